/* All output goes through one object so tests can capture it and --json,
 * -q, -v and --no-color apply everywhere. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "gpuprov/progress.h"
#include "gpuprov/util.h"

struct gp_out {
	FILE *out; /* results: plans, reports, JSON */
	FILE *err; /* diagnostics */
	bool json; /* results as one JSON document on out */
	int verbosity; /* -1 quiet, 0 normal, 1 verbose */
	bool color;
	struct gp_progress progress; /* download progress (see progress.h) */
};

void gp_out_init(struct gp_out *o, FILE *out, FILE *err);
/* Diagnostics, prefixed "gpuprov: ". info is hidden by -q, debug needs -v. */
void gp_error(const struct gp_out *o, const char *fmt, ...) _printf_(2, 3);
void gp_warn(const struct gp_out *o, const char *fmt, ...) _printf_(2, 3);
void gp_info(const struct gp_out *o, const char *fmt, ...) _printf_(2, 3);
void gp_debug(const struct gp_out *o, const char *fmt, ...) _printf_(2, 3);
