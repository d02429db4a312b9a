/* The settings file's parser. Strict, so that a typo is an error naming
 * its line rather than a setting silently ignored: every line is blank, a
 * comment or "key = value" of a known key, each key at most once. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "gpuprov/conf.h"
#include "gpuprov/util.h"

static const char *const known_keys[] = { "textfile_dir" };

static bool is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r';
}

/* [*s, *e) without blanks at either end. */
static void trim(const char **s, const char **e)
{
	while (*s < *e && is_blank(**s))
		(*s)++;
	while (*e > *s && is_blank((*e)[-1]))
		(*e)--;
}

/* One "key = value" line, [s, e) trimmed. NULL, or why not (allocated). */
static char *parse_setting(const char *s, const char *e, struct gp_conf *conf,
                           size_t *first_line, size_t line)
{
	const char *eq = memchr(s, '=', (size_t)(e - s));
	if (!eq)
		return gp_xasprintf(
		    "expected KEY = VALUE, got '%.*s'; e.g. textfile_dir = "
		    "/var/lib/prometheus/node-exporter",
		    (int)(e - s > 80 ? 80 : e - s), s);
	const char *ks = s, *ke = eq, *vs = eq + 1, *ve = e;
	trim(&ks, &ke);
	trim(&vs, &ve);
	size_t klen = (size_t)(ke - ks), k = 0;
	while (k < ARRAY_SIZE(known_keys) &&
	       !(strlen(known_keys[k]) == klen && memcmp(known_keys[k], ks, klen) == 0))
		k++;
	if (k == ARRAY_SIZE(known_keys))
		return gp_xasprintf("unknown key '%.*s'; the keys are: textfile_dir",
		                    (int)(klen > 80 ? 80 : klen), ks);
	if (first_line[k])
		return gp_xasprintf("%s given twice (first on line %zu); keep one",
		                    known_keys[k], first_line[k]);
	first_line[k] = line;
	if (vs == ve || *vs != '/')
		return gp_xasprintf(
		    "textfile_dir needs an absolute directory, got '%.*s'; "
		    "e.g. textfile_dir = /var/lib/prometheus/node-exporter",
		    (int)(ve - vs > 80 ? 80 : ve - vs), vs);
	conf->textfile_dir = gp_xstrndup(vs, (size_t)(ve - vs));
	return NULL;
}

int gp_conf_parse(const char *text, size_t len, struct gp_conf *conf, size_t *line,
                  char **why)
{
	*conf = (struct gp_conf){ 0 };
	*why = NULL;
	size_t first_line[ARRAY_SIZE(known_keys)] = { 0 };
	const char *p = text, *end = text + len;
	for (*line = 1; p < end; (*line)++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;
		if (memchr(p, '\0', (size_t)(e - p))) {
			*why = gp_xstrdup("a NUL byte: the file is not text; write "
			                  "KEY = VALUE lines");
			break;
		}
		const char *s = p;
		trim(&s, &e);
		if (s < e && *s != '#')
			*why = parse_setting(s, e, conf, first_line, *line);
		if (*why)
			break;
		p = nl ? nl + 1 : end;
	}
	if (!*why)
		return 0;
	gp_conf_clear(conf);
	return -EINVAL;
}

void gp_conf_clear(struct gp_conf *conf)
{
	free(conf->textfile_dir);
	*conf = (struct gp_conf){ 0 };
}
