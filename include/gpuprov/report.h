/* Verify findings: pass / warn / fail with evidence and a hint, rendered as
 * text or JSON. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

enum gp_level { GP_PASS, GP_WARN, GP_FAIL, GP_SKIP };
const char *gp_level_name(enum gp_level l);

struct gp_finding {
	char *stage;
	enum gp_level level;
	char *check; /* what was checked, short */
	char *evidence; /* what was seen */
	char *hint; /* what to do (fail/warn), may be NULL */
};

struct gp_report {
	char *profile_name;
	struct gp_finding *findings;
	size_t n;
};

void gp_report_init(struct gp_report *r, const char *profile_name);
void gp_report_free(struct gp_report *r);
void gp_report_add(struct gp_report *r, const char *stage, enum gp_level level,
                   const char *check, const char *hint, const char *evidence_fmt, ...)
    __attribute__((format(printf, 6, 7)));
size_t gp_report_count(const struct gp_report *r, enum gp_level level);
struct gp_out;
/* Prints the report on out->out in out->format. */
void gp_report_render(const struct gp_report *r, const struct gp_out *out);
void gp_report_render_text(const struct gp_report *r, FILE *f, bool color);
cJSON *gp_report_to_json(const struct gp_report *r);
