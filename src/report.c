/* Verify findings, their ids and their text and JSON renderings. */
#include <stdarg.h>
#include <string.h>

#include "gpuprov/output.h"
#include "gpuprov/prometheus.h"
#include "gpuprov/report.h"
#include "gpuprov/util.h"

const char *gp_level_name(enum gp_level l)
{
	switch (l) {
	case GP_PASS:
		return "pass";
	case GP_WARN:
		return "warn";
	case GP_FAIL:
		return "fail";
	case GP_SKIP:
		return "skip";
	}
	return "?";
}

void gp_report_init(struct gp_report *r, const char *profile_name)
{
	*r = (struct gp_report){ .profile_name = gp_xstrdup(profile_name) };
}

void gp_report_free(struct gp_report *r)
{
	for (size_t i = 0; i < r->n; i++) {
		struct gp_finding *f = &r->findings[i];
		free(f->id);
		free(f->stage);
		free(f->check);
		free(f->evidence);
		free(f->hint);
	}
	free(r->findings);
	free(r->profile_name);
	gp_strv_free(r->facts);
	*r = (struct gp_report){ 0 };
}

/* Between min_parts and max_parts parts ("<stage>.<check>" is two,
 * "<stage>.<check>.<subject>" three), each a non-empty run of [a-z0-9_]. */
static bool id_valid(const char *id, int min_parts, int max_parts)
{
	int parts = 1;
	size_t len = 0;
	for (const char *p = id;; p++) {
		if (*p == '.' || !*p) {
			if (!len)
				return false;
			if (!*p)
				break;
			parts++;
			len = 0;
		} else if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		           *p == '_') {
			len++;
		} else {
			return false;
		}
	}
	return parts >= min_parts && parts <= max_parts;
}

_Noreturn static void refuse_id(const char *id, const char *check)
{
	fprintf(stderr,
	        "gpuprov: internal error: the verify finding \"%s\" has the id \"%s\", "
	        "not <stage>.<check>[.<subject>] of [a-z0-9_] (a bug in gpuprov)\n",
	        check ? check : "?", id);
	abort();
}

static void add(struct gp_report *r, char *id, enum gp_level level, const char *check,
                const char *hint, const char *evidence_fmt, va_list ap)
{
	r->findings = gp_xrealloc(r->findings, (r->n + 1) * sizeof *r->findings);
	r->findings[r->n++] = (struct gp_finding){
		.id = id,
		.stage = gp_xstrndup(id, strcspn(id, ".")),
		.level = level,
		.check = gp_xstrdup(check),
		.evidence = gp_xvasprintf(evidence_fmt, ap),
		.hint = level == GP_PASS ? NULL : gp_xstrdup(hint),
	};
}

void gp_report_add(struct gp_report *r, const char *id, enum gp_level level,
                   const char *check, const char *hint, const char *evidence_fmt, ...)
{
	if (!id_valid(id, 2, 3))
		refuse_id(id, check);
	va_list ap;
	va_start(ap, evidence_fmt);
	add(r, gp_xstrdup(id), level, check, hint, evidence_fmt, ap);
	va_end(ap);
}

void gp_report_add_subject(struct gp_report *r, const char *base, const char *subject,
                           enum gp_level level, const char *check, const char *hint,
                           const char *evidence_fmt, ...)
{
	if (!id_valid(base, 2, 2))
		refuse_id(base, check);
	_cleanup_free_ char *part = gp_finding_subject(subject);
	va_list ap;
	va_start(ap, evidence_fmt);
	add(r, gp_xasprintf("%s.%s", base, part), level, check, hint, evidence_fmt, ap);
	va_end(ap);
}

char *gp_finding_subject(const char *name)
{
	char *out = gp_xmalloc(strlen(name) + 2);
	size_t n = 0;
	bool gap = false;
	for (const char *p = name; *p; p++) {
		char ch = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
		if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) {
			if (gap && n)
				out[n++] = '_';
			out[n++] = ch;
			gap = false;
		} else {
			gap = true;
		}
	}
	if (!n)
		out[n++] = '_';
	out[n] = '\0';
	return out;
}

/* The slot of key in r->facts, or the terminating NULL's. */
static size_t fact_slot(const struct gp_report *r, const char *key)
{
	size_t i = 0;
	while (r->facts && r->facts[i] && strcmp(r->facts[i], key) != 0)
		i += 2;
	return i;
}

void gp_report_set_fact(struct gp_report *r, const char *key, const char *value)
{
	size_t i = fact_slot(r, key);
	if (r->facts && r->facts[i]) {
		free(r->facts[i + 1]);
		r->facts[i + 1] = gp_xstrdup(value ? value : "");
		return;
	}
	/* A few facts per run: two pushes each is fine. */
	gp_strv_push(&r->facts, key);
	gp_strv_push(&r->facts, value ? value : "");
}

const char *gp_report_fact(const struct gp_report *r, const char *key)
{
	size_t i = fact_slot(r, key);
	return r->facts && r->facts[i] ? r->facts[i + 1] : NULL;
}

size_t gp_report_count(const struct gp_report *r, enum gp_level level)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n; i++)
		n += r->findings[i].level == level;
	return n;
}

static const char *level_color(enum gp_level l)
{
	switch (l) {
	case GP_PASS:
		return "\033[32m";
	case GP_WARN:
		return "\033[33m";
	case GP_FAIL:
		return "\033[31m";
	case GP_SKIP:
		return "\033[2m";
	}
	return "";
}

void gp_report_render_text(const struct gp_report *r, FILE *f, bool color)
{
	fprintf(f, "gpuprov verify: profile %s\n",
	        r->profile_name ? r->profile_name : "?");
	const char *last_stage = NULL;
	for (size_t i = 0; i < r->n; i++) {
		const struct gp_finding *x = &r->findings[i];
		if (!gp_streq(last_stage, x->stage)) {
			fprintf(f, "\n%s:\n", x->stage);
			last_stage = x->stage;
		}
		fprintf(f, "  %s%-4s%s  %s: %s\n", color ? level_color(x->level) : "",
		        gp_level_name(x->level), color ? "\033[0m" : "", x->check,
		        x->evidence);
		if (x->hint)
			fprintf(f, "        hint: %s\n", x->hint);
	}
	fprintf(f, "\n%zu passed, %zu warnings, %zu failed, %zu skipped\n",
	        gp_report_count(r, GP_PASS), gp_report_count(r, GP_WARN),
	        gp_report_count(r, GP_FAIL), gp_report_count(r, GP_SKIP));
}

void gp_report_measure(struct gp_report *r, double measured, double expected,
                       const char *unit)
{
	if (!r->n)
		return;
	struct gp_finding *f = &r->findings[r->n - 1];
	f->measured = measured;
	f->expected = expected;
	f->unit = unit;
}

cJSON *gp_report_to_json(const struct gp_report *r)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddNumberToObject(root, "gpuprov_report", 1);
	cJSON_AddStringToObject(root, "profile", r->profile_name ? r->profile_name : "");
	cJSON_AddBoolToObject(root, "ok", gp_report_count(r, GP_FAIL) == 0);
	cJSON *arr = cJSON_AddArrayToObject(root, "findings");
	for (size_t i = 0; i < r->n; i++) {
		const struct gp_finding *x = &r->findings[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "stage", x->stage);
		cJSON_AddStringToObject(o, "id", x->id);
		cJSON_AddStringToObject(o, "level", gp_level_name(x->level));
		cJSON_AddStringToObject(o, "check", x->check);
		cJSON_AddStringToObject(o, "evidence", x->evidence);
		if (x->hint)
			cJSON_AddStringToObject(o, "hint", x->hint);
		else
			cJSON_AddNullToObject(o, "hint");
		if (x->unit) {
			cJSON *m = cJSON_AddObjectToObject(o, "measurement");
			cJSON_AddNumberToObject(m, "measured", x->measured);
			cJSON_AddStringToObject(m, "unit", x->unit);
			if (x->expected > 0) {
				cJSON_AddNumberToObject(m, "expected", x->expected);
				cJSON_AddNumberToObject(m, "fraction",
				                        x->measured / x->expected);
			} else {
				cJSON_AddNullToObject(m, "expected");
				cJSON_AddNullToObject(m, "fraction");
			}
		}
		cJSON_AddItemToArray(arr, o);
	}
	cJSON *counts = cJSON_AddObjectToObject(root, "counts");
	for (enum gp_level l = GP_PASS; l <= GP_SKIP; l++)
		cJSON_AddNumberToObject(counts, gp_level_name(l),
		                        (double)gp_report_count(r, l));
	return root;
}

void gp_report_render(const struct gp_report *r, const struct gp_out *out)
{
	switch (out->format) {
	case GP_FORMAT_JSON:
		gp_print_json(out, gp_report_to_json(r));
		return;
	case GP_FORMAT_TEXT:
		gp_report_render_text(r, out->out, out->color);
		return;
	case GP_FORMAT_PROMETHEUS: {
		/* The report's own metrics; verify renders them with the journal's
		 * and the run's (gp_prometheus_render) instead. */
		struct gp_buf b = { 0 };
		gp_prometheus_render(&(struct gp_metrics){ .report = r }, &b);
		fputs(b.data ? b.data : "", out->out);
		gp_buf_free(&b);
		return;
	}
	}
}
