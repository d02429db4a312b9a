/* Verify findings: pass / warn / fail with evidence and a hint, each with a
 * stable id, rendered as text or JSON. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

enum gp_level { GP_PASS, GP_WARN, GP_FAIL, GP_SKIP };
const char *gp_level_name(enum gp_level l);

struct gp_finding {
	char *id; /* what was checked, for machines: stable (docs/findings.md) */
	char *stage; /* the id's first component */
	enum gp_level level;
	char *check; /* what was checked, short */
	char *evidence; /* what was seen */
	char *hint; /* what to do (fail/warn), may be NULL */
	/* A measurement the finding judged (verify --deep): unit NULL when
	 * none; expected 0 when there was nothing to compare with. */
	const char *unit;
	double measured, expected;
};

struct gp_report {
	char *profile_name;
	struct gp_finding *findings;
	size_t n;
	/* What the checks saw, as "<stage>/<name>" -> value pairs (key, value,
	 * key, ...; NULL-terminated), for the metrics (prometheus.h). */
	char **facts;
};

void gp_report_init(struct gp_report *r, const char *profile_name);
void gp_report_free(struct gp_report *r);
/* Adds a finding. id names the check whatever its text says, as a constant
 * at the call: "<stage>.<check>" or "<stage>.<check>.<subject>", each part
 * of [a-z0-9_]; the finding's stage is its first part. Any other id is a
 * bug in gpuprov, refused as an internal error (abort), so every finding
 * has one. hint is dropped for a pass. */
void gp_report_add(struct gp_report *r, const char *id, enum gp_level level,
                   const char *check, const char *hint, const char *evidence_fmt, ...)
    __attribute__((format(printf, 6, 7), nonnull(1, 2)));
/* The same for a check made once per varying name (a library, a package, a
 * directory): the id is base ("<stage>.<check>") "." gp_finding_subject(subject). */
void gp_report_add_subject(struct gp_report *r, const char *base, const char *subject,
                           enum gp_level level, const char *check, const char *hint,
                           const char *evidence_fmt, ...)
    __attribute__((format(printf, 7, 8), nonnull(1, 2, 3)));
/* Attaches a measurement to the last finding added (unit: a constant,
 * "FLOP/s", "B/s"); verify --json gives it as the finding's "measurement"
 * with the fraction measured / expected. */
void gp_report_measure(struct gp_report *r, double measured, double expected,
                       const char *unit);
/* name as an id's subject part: ASCII letters lowercased, every run of
 * characters other than [a-z0-9] one '_', none at either end; "_" when
 * nothing is left. "/usr/local/cuda/bin" -> "usr_local_cuda_bin",
 * "0000:17:00.0" -> "0000_17_00_0", "LD_LIBRARY_PATH" -> "ld_library_path".
 * Allocated. */
char *gp_finding_subject(const char *name);
/* Records a fact a check saw (the loaded module's version, ...): key
 * "<stage>/<name>", value NULL for none; a second call replaces it. */
void gp_report_set_fact(struct gp_report *r, const char *key, const char *value);
/* The fact's value: NULL when it was not recorded, "" when recorded as none. */
const char *gp_report_fact(const struct gp_report *r, const char *key);
size_t gp_report_count(const struct gp_report *r, enum gp_level level);
struct gp_out;
/* Prints the report on out->out in out->format. */
void gp_report_render(const struct gp_report *r, const struct gp_out *out);
void gp_report_render_text(const struct gp_report *r, FILE *f, bool color);
cJSON *gp_report_to_json(const struct gp_report *r);
