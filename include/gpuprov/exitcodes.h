/* The one exit-code table. README.md and docs/gpuprov.8 document it.
 * Header-only: constants, so it has no .c file. */
#pragma once

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
