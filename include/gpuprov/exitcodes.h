/* The one exit-code table, and the one place a failure becomes an exit
 * status. README.md and docs/gpuprov.8 document the codes. */
#pragma once

#include "gpuprov/error.h"

enum gp_exit {
	GP_EXIT_OK = 0, /* done, or nothing to do */
	GP_EXIT_APPLY_FAILED = 1, /* a change could not be made */
	GP_EXIT_USAGE = 2, /* bad command line */
	GP_EXIT_VERIFY_FAILED = 3, /* verify found a failure */
	GP_EXIT_BLOCKED = 4, /* a precondition is not met */
	GP_EXIT_REBOOT = 5, /* reboot, then run the same command again */
	GP_EXIT_LOCKED = 6, /* another gpuprov run holds the lock */
	GP_EXIT_INVALID_INPUT = 65, /* invalid profile, journal or other input */
};

/* The exit status of a command that failed with err, from err->code:
 * invalid input 65, blocked 4, an unusable setting 2, locked 6, anything
 * else (an errno, GP_EFAILED, 0) 1. Only the CLI and the engine call it;
 * the layers below report codes. */
int gp_exit_code(const struct gp_err *err);
