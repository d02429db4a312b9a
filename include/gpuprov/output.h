/* All output goes through one object so tests can capture it and --json,
 * -q, -v and --no-color apply everywhere. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "gpuprov/progress.h"
#include "gpuprov/util.h"

/* How results are printed on out. A new format (prometheus) is a value
 * here and a case in each renderer; docs/architecture.md lists them. */
enum gp_format {
	GP_FORMAT_TEXT, /* for people */
	GP_FORMAT_JSON, /* one JSON document (--json); events as JSON lines */
	GP_FORMAT_PROMETHEUS, /* verify only: the textfile format (prometheus.h) */
};

struct gp_out {
	FILE *out; /* results: plans, reports, JSON */
	FILE *err; /* diagnostics */
	enum gp_format format;
	int verbosity; /* -1 quiet, 0 normal, 1 verbose */
	bool color;
	struct gp_progress progress; /* download progress (see progress.h) */
};

/* The format's name (--format NAME), and the format of a name: 0, or
 * -EINVAL for a name that is none. */
const char *gp_format_name(enum gp_format f);
int gp_format_parse(const char *name, enum gp_format *f);
/* "text, json": the names, for messages. */
char *gp_format_names(void);

void gp_out_init(struct gp_out *o, FILE *out, FILE *err);
/* Diagnostics, prefixed "gpuprov: ". info is hidden by -q, debug needs -v. */
void gp_error(const struct gp_out *o, const char *fmt, ...) _printf_(2, 3);
void gp_warn(const struct gp_out *o, const char *fmt, ...) _printf_(2, 3);
void gp_info(const struct gp_out *o, const char *fmt, ...) _printf_(2, 3);
void gp_debug(const struct gp_out *o, const char *fmt, ...) _printf_(2, 3);
/* Prints doc as the one JSON document of the command's results on o->out,
 * and frees it. */
void gp_print_json(const struct gp_out *o, cJSON *doc);
