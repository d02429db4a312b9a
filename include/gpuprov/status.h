/* The status of a root: what its journal records, rendered as text or JSON
 * (`gpuprov status`). The engine fills the structure; this renders it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

struct gp_out;

struct gp_status_stage {
	const char *name;
	bool implemented; /* the stage has hooks */
	const char *state; /* the journal's identifier, NULL: no record */
	const char *time; /* ISO 8601 UTC, NULL when none */
};

/* What else says a reboot is wanted (rebootsig.h reads them). */
struct gp_reboot_signals {
	bool flag; /* /var/run/reboot-required exists */
	char **pkgs; /* the names in its .pkgs file, NULL when none */
	/* `dnf needs-restarting -r` (RHEL family, when dnf is in the root):
	 * asked or not; 1 a reboot is needed (its exit 1), 0 not, -1 it failed
	 * otherwise; its output's first line, for the reason. */
	bool dnf_asked;
	int dnf_reboot;
	char *dnf_says;
};

struct gp_status {
	const char *root;
	bool run_in_progress; /* another run holds the lock */
	bool recorded; /* the journal records an install */
	const cJSON *profile; /* the journal's profile record, NULL when none */
	const cJSON *reboot; /* the journal's pending reboot, NULL when none */
	const char *reboot_reason;
	/* The journal's "resume" record (--reboot=auto: reboots counted, why
	 * they stopped), NULL when none. */
	const cJSON *resume;
	int files_written;
	const struct gp_reboot_signals *signals; /* NULL: none read */
	const struct gp_status_stage *stages; /* in run order */
	size_t n_stages;
};

/* Prints the status on out->out in out->format. */
void gp_status_render(const struct gp_status *s, const struct gp_out *out);
void gp_status_render_text(const struct gp_status *s, FILE *f);
cJSON *gp_status_to_json(const struct gp_status *s);
