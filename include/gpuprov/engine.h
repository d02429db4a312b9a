/* The engine: profile -> ordered stages; check, plan, apply, verify;
 * journal, lock, reboot and resume. Returns exit codes (exitcodes.h). */
#pragma once

#include <stdbool.h>

#include "gpuprov/event.h"
#include "gpuprov/fetch.h"
#include "gpuprov/output.h"

struct gp_options {
	const char *root; /* default "/" */
	const char *profile_dir; /* --profile-dir, may be NULL */
	const char *profile; /* --profile NAME|PATH, may be NULL */
	char **only; /* --only, NULL-terminated or NULL */
	char **skip; /* --skip */
	bool dry_run;
	bool force; /* go ahead although the profile's match does not fit */
	int cmd_timeout_ms;
	const char *rerun; /* the command line to repeat after a reboot */
	const char *cache_dir; /* --cache-dir, in the root; NULL: the default */
	const char *ca_file; /* --ca-file, a host path; NULL: system CAs */
	struct gp_fetch_mirror *mirrors; /* --mirror FROM=TO, n_mirrors of them */
	size_t n_mirrors;
	bool offline; /* --offline */
	bool textfile; /* verify --textfile (or --textfile-dir): write the metrics file */
	const char *textfile_dir; /* --textfile-dir, in the root; NULL: configured */
	int deep; /* verify --deep: enum gp_deep_level (nvhealth.h), 0 off */
	struct gp_events events; /* where a real run's events go (event.h) */
	/* install --reboot=auto: arm gpuprov-resume.service and reboot when a
	 * stage needs it (at most GP_RESUME_MAX_REBOOTS times for one install). */
	bool reboot_auto;
	bool resumed; /* run by `gpuprov resume`: its reboots count toward the cap */
	const char *reboot_stub; /* GPUPROV_REBOOT_STUB: in-root program run instead */
	char *const *argv; /* the command line as typed: the resume marker's */
	long rollback_to; /* rollback --to N: the history entry's id; 0: the previous */
};

/* The reboots --reboot=auto makes for one install before it stops. */
#define GP_RESUME_MAX_REBOOTS 3
/* The unit that continues an install after its reboot, and its enabling. */
#define GP_RESUME_UNIT "gpuprov-resume.service"
#define GP_RESUME_WANTS "/etc/systemd/system/multi-user.target.wants/" GP_RESUME_UNIT

int gp_engine_install(const struct gp_options *o, struct gp_out *out);
int gp_engine_verify(const struct gp_options *o, struct gp_out *out);
int gp_engine_status(const struct gp_options *o, struct gp_out *out);
/* `history`: the journal's install history, newest first. */
int gp_engine_history(const struct gp_options *o, struct gp_out *out);
/* `uninstall`: what the journal says gpuprov added goes, stages in reverse
 * order (--only/--skip select them), planned first (--dry-run: only). */
int gp_engine_uninstall(const struct gp_options *o, struct gp_out *out);
/* `rollback`: the state of the history entry before the current one (or
 * --to N) made again, planned first (--dry-run: only) as an install of the
 * entry's profile copy, after a step that puts its packages back at their
 * recorded versions (src/rollback.c). */
int gp_engine_rollback(const struct gp_options *o, struct gp_out *out);
/* `gpuprov resume`, before the install it continues: under the lock it
 * removes the resume marker (first, whatever it holds, so that nothing
 * loops at the next boot) and the unit's enabling link, counts the boot in
 * the journal and returns the recorded command line in *argv. No marker:
 * 0 and *argv NULL. Else 0 or an exit code. */
int gp_engine_resume_take(const struct gp_options *o, struct gp_out *out, char ***argv);
