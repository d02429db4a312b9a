/* The output object: every message goes through here. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/output.h"

static const char *const format_names[] = {
	[GP_FORMAT_TEXT] = "text",
	[GP_FORMAT_JSON] = "json",
	[GP_FORMAT_PROMETHEUS] = "prometheus",
};

const char *gp_format_name(enum gp_format f)
{
	return (size_t)f < ARRAY_SIZE(format_names) ? format_names[f] : "?";
}

int gp_format_parse(const char *name, enum gp_format *f)
{
	for (size_t i = 0; i < ARRAY_SIZE(format_names); i++)
		if (strcmp(name, format_names[i]) == 0) {
			*f = (enum gp_format)i;
			return 0;
		}
	return -EINVAL;
}

char *gp_format_names(void)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; i < ARRAY_SIZE(format_names); i++)
		gp_buf_printf(&b, "%s%s", i ? ", " : "", format_names[i]);
	return gp_buf_steal(&b);
}

void gp_out_init(struct gp_out *o, FILE *out, FILE *err)
{
	*o = (struct gp_out){ .out = out, .err = err };
}

static void emit(const struct gp_out *o, const char *prefix, const char *fmt, va_list ap)
{
	/* One line at a time, also against background download progress,
	 * whose renderer takes the same lock; a progress line it left open on
	 * a terminal is ended first. */
	flockfile(o->err);
	if (o->progress.line_open && o->progress.f == o->err) {
		fputc('\n', o->err);
		((struct gp_out *)o)->progress.line_open = false;
	}
	fputs("gpuprov: ", o->err);
	fputs(prefix, o->err);
	vfprintf(o->err, fmt, ap);
	fputc('\n', o->err);
	fflush(o->err);
	funlockfile(o->err);
}

void gp_error(const struct gp_out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(o, "", fmt, ap);
	va_end(ap);
}

void gp_warn(const struct gp_out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(o, "warning: ", fmt, ap);
	va_end(ap);
}

void gp_info(const struct gp_out *o, const char *fmt, ...)
{
	if (o->verbosity < 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	emit(o, "", fmt, ap);
	va_end(ap);
}

void gp_debug(const struct gp_out *o, const char *fmt, ...)
{
	if (o->verbosity < 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	emit(o, "", fmt, ap);
	va_end(ap);
}

void gp_print_json(const struct gp_out *o, cJSON *doc)
{
	char *text = cJSON_Print(doc);
	fprintf(o->out, "%s\n", text);
	free(text);
	cJSON_Delete(doc);
}
