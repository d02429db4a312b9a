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
};

int gp_engine_install(const struct gp_options *o, struct gp_out *out);
int gp_engine_verify(const struct gp_options *o, struct gp_out *out);
int gp_engine_status(const struct gp_options *o, struct gp_out *out);
