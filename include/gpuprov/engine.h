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
	struct gp_events events; /* where a real run's events go (event.h) */
};

int gp_engine_install(const struct gp_options *o, struct gp_out *out);
int gp_engine_verify(const struct gp_options *o, struct gp_out *out);
int gp_engine_status(const struct gp_options *o, struct gp_out *out);
/* `profiles list|show|lint` (catalog.c). show prints the file as written,
 * or with resolved the document after inheritance. lint loads each file and
 * runs the compatibility preflight on it, reporting every problem of every
 * file: exit 65 when a file does not load, else 4 when an issue blocks. */
int gp_engine_profiles_list(const struct gp_options *o, struct gp_out *out);
int gp_engine_profiles_show(const struct gp_options *o, const char *name, bool resolved,
                            struct gp_out *out);
int gp_engine_profiles_lint(const struct gp_options *o, char *const *files,
                            struct gp_out *out);
/* The profile names the search path offers, sorted; a name in an earlier
 * directory hides the same name later. */
char **gp_catalog_names(char *const *search);
struct gp_profile;
/* Does the profile enable a stage? A distro base (distro/ubuntu2204) does
 * not: it is there to be extended, not installed. */
bool gp_catalog_enables_stage(const struct gp_profile *p);
/* What would block a stage of the profile on any fresh host because a pin
 * is missing (gpuprov downloads nothing it cannot verify): one "stage
 * NAME: why" per problem, empty when none. Free with gp_strv_free. */
char **gp_catalog_missing_pins(const struct gp_profile *p);

/* `detect` (detect.c): OS, running kernel, Secure Boot, NVIDIA GPUs of the
 * root and the profiles whose match fits it, best first. Read-only. */
int gp_engine_detect(const struct gp_options *o, struct gp_out *out);
