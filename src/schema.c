/* The typed schema of JSON settings: the walker that validates an object
 * against a table of keys (FILE:LINE:COL errors with what was expected and
 * a did-you-mean), the value checks several tables share, and each key's
 * JSON Schema for docs/profile.schema.json. The profile's tables are in
 * src/profile.c, each stage's in its stage file. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "gpuprov/schema.h"
#include "gpuprov/urltemplate.h"

bool gp_schema_only(const char *s, const char *set)
{
	return strspn(s, set) == strlen(s);
}

/* s quoted for a message: at most about 60 bytes of it, with quotes,
 * backslashes and control characters escaped, so that a message stays one
 * readable line whatever the input holds. */
char *gp_schema_quoted(const char *s)
{
	struct gp_buf b = { 0 };
	gp_buf_puts(&b, "\"");
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++, n++) {
		if (n >= 60 && (*p & 0xc0) != 0x80) {
			gp_buf_puts(&b, "...");
			break;
		}
		if (*p < 0x20 || *p == 0x7f)
			gp_buf_printf(&b, "\\x%02x", *p);
		else if (*p == '"' || *p == '\\')
			gp_buf_printf(&b, "\\%c", *p);
		else
			gp_buf_append(&b, p, 1);
	}
	gp_buf_puts(&b, "\"");
	return gp_buf_steal(&b);
}

/* "must ... (got "VALUE")": the common shape of a value check's answer. */
char *gp_schema_why_got(const char *s, const char *why)
{
	_cleanup_free_ char *q = gp_schema_quoted(s);
	return gp_xasprintf("%s (got %s)", why, q);
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 64 || lb > 64)
		return 99;
	size_t row[65];
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* Keeps cand as *best when it is nearer to s than any before (and fewer
 * than 3 edits away). */
static void consider(const char *s, const char *cand, const char **best, size_t *best_d)
{
	size_t d = edit_distance(s, cand);
	if (d < *best_d) {
		*best_d = d;
		*best = cand;
	}
}

/* The nearest of a NULL-terminated list, or NULL. */
const char *gp_schema_closest(const char *s, const char *const *list)
{
	const char *best = NULL;
	size_t best_d = 3;
	for (; *list; list++)
		consider(s, *list, &best, &best_d);
	return best;
}

/* Directories end up in PATH-like lists and ld.so.conf lines. */
static char *check_directory(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (s[0] == '/' && !strpbrk(s, ":\n\r\t") && !strstr(s, "/../") &&
	    !gp_str_ends_with(s, "/.."))
		return NULL;
	return gp_schema_why_got(s,
	                         "must be an absolute path without ':', '..' or control "
	                         "characters");
}

/* https:// (or http://, allowed later by allow_insecure_http) with a host
 * and without credentials. A URL with credentials is never echoed. */
char *gp_schema_check_url(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	const char *sep = strstr(s, "://");
	if (sep) {
		const char *host = sep + 3;
		size_t n = strcspn(host, "/?#");
		if (memchr(host, '@', n))
			return gp_xstrdup(
			    "must not carry credentials (\"user:password@\" "
			    "before the host): they would end up in plans, "
			    "logs and the journal");
	}
	const char *rest = gp_str_starts_with(s, "https://")  ? s + 8
	                   : gp_str_starts_with(s, "http://") ? s + 7
	                                                      : NULL;
	if (!rest)
		return gp_schema_why_got(s, "must be an https:// URL");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			return gp_schema_why_got(
			    s, "must not contain spaces or control characters");
	if (strcspn(rest, "/?#") == 0)
		return gp_schema_why_got(s, "must name a host after the scheme");
	_cleanup_free_ char *why = gp_url_template_check(s);
	if (why)
		return gp_schema_why_got(s, why);
	return NULL;
}

static char *check_sha256(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	size_t bad = strspn(s, GP_DIGITS "abcdefABCDEF");
	if (s[bad]) {
		if ((unsigned char)s[bad] >= 0x80)
			return gp_xasprintf(
			    "must be 64 hex digits, as sha256sum prints them; "
			    "character %zu is not even ASCII",
			    bad + 1);
		return gp_xasprintf("must be 64 hex digits, as sha256sum prints them; "
		                    "character %zu ('%c') is not a hex digit",
		                    bad + 1,
		                    s[bad] >= ' ' && s[bad] != 0x7f ? s[bad] : '?');
	}
	if (bad != 64)
		return gp_xasprintf("must be 64 hex digits, as sha256sum prints them "
		                    "(got %zu digits)",
		                    bad);
	if (!gp_schema_only(s, GP_DIGITS "abcdef"))
		return gp_xstrdup("must be written in lowercase hex, as sha256sum "
		                  "prints it");
	return NULL;
}

/* No '.', '..' or empty components (so no "//" and no trailing '/'), no
 * ':' (PATH-like lists) and no control characters. */
bool gp_schema_plain_absolute_path(const char *s)
{
	if (s[0] != '/' || strchr(s, ':'))
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	for (const char *c = s + 1;; c++) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += n;
		if (!*c)
			return true;
	}
}

/* A file in the target root: a plain absolute path. */
static char *check_file_path(const cJSON *v, size_t i)
{
	if (gp_schema_plain_absolute_path(v->valuestring))
		return NULL;
	return gp_schema_why_got(v->valuestring, "must be an absolute path such as "
	                                         "\"/var/lib/shim-signed/mok/MOK.priv\"");
}

/* An argv: the first element is a bare command name (looked up in the
 * root's /usr/sbin:/usr/bin:/sbin:/bin) or an absolute path. */
static char *check_argv(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (i != 0)
		return NULL;
	if (s[0] == '/'
	        ? gp_schema_plain_absolute_path(s)
	        : *s && *s != '-' && *s != '.' && gp_schema_only(s, GP_ALNUM "._+-"))
		return NULL;
	return gp_schema_why_got(s, "must start with a command: a bare name such as "
	                            "\"update-initramfs\" or an absolute path");
}

/* min..max dot-separated runs of digits: "535.104.05". */
bool gp_schema_numeric_parts(const char *s, int min, int max)
{
	int parts = 0;
	for (;;) {
		size_t n = strspn(s, GP_DIGITS);
		if (n == 0)
			return false;
		parts++;
		s += n;
		if (!*s)
			break;
		if (*s != '.')
			return false;
		s++;
	}
	return parts >= min && parts <= max;
}

static char *check_under(const char *s, const char *const *dirs, const char *names)
{
	if (s[0] != '/') {
		_cleanup_free_ char *why = gp_xasprintf(
		    "must be an absolute path under %s", names);
		return gp_schema_why_got(s, why);
	}
	if (!gp_schema_plain_absolute_path(s))
		return gp_schema_why_got(s,
		                         "must be a plain absolute path: no '.' or '..' "
		                         "components, no '//' or trailing '/', no ':' or "
		                         "control characters");
	for (; *dirs; dirs++)
		if (gp_str_starts_with(s, *dirs) && s[strlen(*dirs)])
			return NULL;
	_cleanup_free_ char *why = gp_xasprintf("must be under %s, where gpuprov "
	                                        "installs software",
	                                        names);
	return gp_schema_why_got(s, why);
}

static char *check_install_dir(const cJSON *v, size_t i)
{
	static const char *const dirs[] = { "/usr/local/", "/opt/", NULL };
	return check_under(v->valuestring, dirs, "/usr/local/ or /opt/");
}

static char *check_prefix_dir(const cJSON *v, size_t i)
{
	static const char *const dirs[] = { "/opt/", "/usr/local/", "/srv/", NULL };
	return check_under(v->valuestring, dirs, "/opt/, /usr/local/ or /srv/");
}

/* A file inside the target root that a tool there reads (pip's cert). */
static char *check_root_file(const cJSON *v, size_t i)
{
	if (gp_schema_plain_absolute_path(v->valuestring))
		return NULL;
	return gp_schema_why_got(
	    v->valuestring, "must be a plain absolute path inside the root: no '.' or "
	                    "'..' components, no '//' or trailing '/', no ':' or control "
	                    "characters");
}

const struct gp_value_check gp_check_url = {
	.check = gp_schema_check_url,
	.schema = "{\"$ref\": \"#/$defs/url\"}",
};
const struct gp_value_check gp_check_sha256 = {
	.check = check_sha256,
	.schema = "{\"$ref\": \"#/$defs/sha256\"}",
};
const struct gp_value_check gp_check_directory = {
	.check = check_directory,
	.schema = "{\"$ref\": \"#/$defs/directory\"}",
};
const struct gp_value_check gp_check_file_path = {
	.check = check_file_path,
	.schema = "{\"pattern\": \"^/\"}",
};
const struct gp_value_check gp_check_root_file = {
	.check = check_root_file,
	.schema = "{\"pattern\": "
	          "\"^(?:/(?!\\\\.\\\\.?(?:/|$))[^/:\\\\x00-\\\\x1f\\\\x7f]+)+$\"}",
};
const struct gp_value_check gp_check_argv = {
	.check = check_argv,
	.schema = "{\"$ref\": \"#/$defs/argv\"}",
	.whole = true,
};
const struct gp_value_check gp_check_install_dir = {
	.check = check_install_dir,
	.schema = "{\"$ref\": \"#/$defs/installDir\"}",
};
const struct gp_value_check gp_check_prefix_dir = {
	.check = check_prefix_dir,
	.schema = "{\"$ref\": \"#/$defs/prefixDir\"}",
};

/* --- the walker ----------------------------------------------------------- */

void gp_schema_push_paths(char ***v, const char *pointer, const struct gp_key *keys)
{
	for (const struct gp_key *k = keys; k->name; k++) {
		_cleanup_free_ char *p = gp_json_pointer_append(pointer, k->name);
		gp_strv_push(v, p);
		if (k->children)
			gp_schema_push_paths(v, p, k->children);
	}
}

static char *known_keys_hint(const struct gp_key *keys, const char *name)
{
	const char *best = NULL;
	size_t best_d = 3;
	for (const struct gp_key *k = keys; k->name; k++)
		consider(name, k->name, &best, &best_d);
	if (best)
		return gp_xasprintf("did you mean \"%s\"?", best);
	struct gp_buf b = { 0 };
	gp_buf_puts(&b, "known keys:");
	for (const struct gp_key *k = keys; k->name; k++)
		gp_buf_printf(&b, " %s", k->name);
	return gp_buf_steal(&b);
}

int gp_schema_fail(const struct gp_json_doc *d, const char *pointer, bool at_key,
                   struct gp_err *err, const char *fmt, ...)
{
	int line, col;
	if (at_key)
		gp_json_doc_where_key(d, pointer, &line, &col);
	else
		gp_json_doc_where(d, pointer, &line, &col);
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = gp_xvasprintf(fmt, ap);
	va_end(ap);
	return gp_fail(err, GP_EINPUT, "%s:%d:%d: %s", d->file, line, col, msg);
}

/* What a value must be, to follow "must be". */
static const char *type_name(const struct gp_key *k)
{
	switch (k->type) {
	case GP_KEY_STRING:
		return "a string";
	case GP_KEY_BOOL:
		return "true or false";
	case GP_KEY_NUMBER:
		return k->integer ? "a whole number" : "a number";
	case GP_KEY_OBJECT:
		return "an object";
	case GP_KEY_STRING_ARRAY:
		return "an array of strings";
	case GP_KEY_STRING_MAP:
		return "an object of strings";
	case GP_KEY_STAGE:
		return "an object, or false to disable the stage";
	case GP_KEY_CUSTOM:
		break;
	}
	return "?";
}

const char *gp_schema_type_word(const struct gp_key *k)
{
	switch (k->type) {
	case GP_KEY_STRING:
		return "string";
	case GP_KEY_BOOL:
		return "boolean";
	case GP_KEY_NUMBER:
		return k->integer ? "integer" : "number";
	case GP_KEY_OBJECT:
		return "object";
	case GP_KEY_STRING_ARRAY:
		return "array of strings";
	case GP_KEY_STRING_MAP:
		return "object of strings";
	case GP_KEY_STAGE:
		return "object or false";
	case GP_KEY_CUSTOM:
		break;
	}
	return "custom";
}

/* What a value of the wrong type is, for "(got ...)". */
char *gp_schema_describe(const cJSON *v)
{
	if (cJSON_IsString(v))
		return gp_schema_quoted(v->valuestring);
	if (cJSON_IsNumber(v)) {
		char *s = cJSON_PrintUnformatted(v);
		return s ? s : gp_xstrdup("a number");
	}
	if (cJSON_IsBool(v))
		return gp_xstrdup(cJSON_IsTrue(v) ? "true" : "false");
	if (cJSON_IsNull(v))
		return gp_xstrdup("null");
	if (cJSON_IsArray(v))
		return gp_xstrdup(v->child ? "an array" : "[]");
	return gp_xstrdup(v->child ? "an object" : "{}");
}

static int check_at(const struct gp_schema_walk *w, const cJSON *v, size_t index,
                    const char *pointer, const struct gp_key *k)
{
	_cleanup_free_ char *why = k->check->check(v, index);
	/* A map entry's check is mostly about its name: point at the key. */
	if (why)
		return gp_schema_fail(w->d, pointer, k->type == GP_KEY_STRING_MAP, w->err,
		                      "\"%s\" %s", k->name, why);
	if (w->accepted)
		w->accepted(w, v, pointer, k);
	return 0;
}

static int check_choice(const struct gp_schema_walk *w, const cJSON *v,
                        const char *pointer, const struct gp_key *k)
{
	for (const char *const *c = k->choices; *c; c++)
		if (strcmp(*c, v->valuestring) == 0)
			return 0;
	_cleanup_free_ char *all = gp_strv_join((char **)k->choices, ", ");
	_cleanup_free_ char *q = gp_schema_quoted(v->valuestring);
	const char *near = gp_schema_closest(v->valuestring, k->choices);
	if (near)
		return gp_schema_fail(
		    w->d, pointer, false, w->err,
		    "\"%s\" must be one of %s (got %s; did you mean \"%s\"?)", k->name,
		    all, q, near);
	return gp_schema_fail(w->d, pointer, false, w->err,
	                      "\"%s\" must be one of %s (got %s)", k->name, all, q);
}

/* A number within the key's bounds (and whole when it must be). */
static int check_number(const struct gp_schema_walk *w, const cJSON *v,
                        const char *pointer, const struct gp_key *k)
{
	double x = v->valuedouble;
	_cleanup_free_ char *got = gp_schema_describe(v);
	if (k->integer && x != floor(x))
		return gp_schema_fail(w->d, pointer, false, w->err,
		                      "\"%s\" must be a whole number (got %s); write it "
		                      "without a fraction, e.g. %.0f",
		                      k->name, got, floor(x));
	if (x < k->min || x > k->max)
		return gp_schema_fail(w->d, pointer, false, w->err,
		                      "\"%s\" must be from %g to %g (got %s); use a "
		                      "value in that range",
		                      k->name, k->min, k->max, got);
	return 0;
}

int gp_schema_validate(const struct gp_schema_walk *w, const cJSON *obj,
                       const char *pointer, const struct gp_key *keys);

static int validate_value(const struct gp_schema_walk *w, const cJSON *v,
                          const char *pointer, const struct gp_key *k)
{
	bool ok = false;
	switch (k->type) {
	case GP_KEY_STRING:
		ok = cJSON_IsString(v);
		break;
	case GP_KEY_BOOL:
		ok = cJSON_IsBool(v);
		break;
	case GP_KEY_NUMBER:
		ok = cJSON_IsNumber(v);
		break;
	case GP_KEY_OBJECT:
		ok = cJSON_IsObject(v);
		break;
	case GP_KEY_STAGE:
		ok = cJSON_IsObject(v) || cJSON_IsFalse(v);
		break;
	case GP_KEY_CUSTOM:
		return k->validate(w, v, pointer, k);
	case GP_KEY_STRING_ARRAY:
	case GP_KEY_STRING_MAP:
		ok = k->type == GP_KEY_STRING_ARRAY ? cJSON_IsArray(v)
		                                    : cJSON_IsObject(v);
		if (!ok)
			break;
		size_t i = 0;
		for (const cJSON *item = v->child; item; item = item->next, i++) {
			if (cJSON_IsString(item))
				continue;
			_cleanup_free_ char *p = k->type == GP_KEY_STRING_ARRAY
			                             ? gp_xasprintf("%s/%zu", pointer, i)
			                             : gp_json_pointer_append(
			                                   pointer, item->string);
			_cleanup_free_ char *got = gp_schema_describe(item);
			return gp_schema_fail(w->d, p, false, w->err,
			                      "\"%s\" must hold only strings (got %s)",
			                      k->name, got);
		}
		break;
	}
	if (!ok) {
		_cleanup_free_ char *got = gp_schema_describe(v);
		return gp_schema_fail(w->d, pointer, false, w->err,
		                      "\"%s\" must be %s (got %s)", k->name, type_name(k),
		                      got);
	}
	if (k->type == GP_KEY_NUMBER)
		return check_number(w, v, pointer, k);
	if (k->type == GP_KEY_STRING) {
		if (k->choices)
			return check_choice(w, v, pointer, k);
		return k->check ? check_at(w, v, 0, pointer, k) : 0;
	}
	size_t i = 0;
	for (const cJSON *item = v->child; k->check && item; item = item->next, i++) {
		_cleanup_free_ char *p = k->type == GP_KEY_STRING_ARRAY
		                             ? gp_xasprintf("%s/%zu", pointer, i)
		                             : gp_json_pointer_append(pointer,
		                                                      item->string);
		if (check_at(w, item, i, p, k) < 0)
			return -1;
	}
	if (k->children && cJSON_IsObject(v))
		return gp_schema_validate(w, v, pointer, k->children);
	return 0;
}

int gp_schema_validate(const struct gp_schema_walk *w, const cJSON *obj,
                       const char *pointer, const struct gp_key *keys)
{
	bool failed = false;
	for (const cJSON *item = obj->child; item; item = item->next) {
		_cleanup_free_ char *p = gp_json_pointer_append(pointer, item->string);
		const struct gp_key *k = keys;
		while (k->name && strcmp(k->name, item->string) != 0)
			k++;
		int rc;
		if (!k->name) {
			_cleanup_free_ char *hint = known_keys_hint(keys, item->string);
			_cleanup_free_ char *q = gp_schema_quoted(item->string);
			rc = gp_schema_fail(w->d, p, true, w->err, "unknown key %s; %s",
			                    q, hint);
		} else {
			rc = validate_value(w, item, p, k);
		}
		if (rc < 0 && !w->err->all)
			return -1;
		/* Collecting every problem: go on with the next member. */
		failed |= rc < 0;
	}
	return failed ? -1 : 0;
}

/* --- JSON Schema ------------------------------------------------------------ */

/* The JSON Schema of one string under check: {"type": "string"} with the
 * check's rule, or the check's $ref alone. */
static cJSON *string_schema(const struct gp_value_check *check)
{
	cJSON *rule = check ? cJSON_Parse(check->schema) : NULL;
	cJSON *s = cJSON_CreateObject();
	if (!rule || !cJSON_GetObjectItemCaseSensitive(rule, "$ref"))
		cJSON_AddStringToObject(s, "type", "string");
	for (cJSON *m = rule ? rule->child : NULL; m; m = m->next)
		cJSON_AddItemToObject(s, m->string, cJSON_Duplicate(m, 1));
	cJSON_Delete(rule);
	return s;
}

cJSON *gp_schema_key_json(const struct gp_key *k)
{
	cJSON *s;
	switch (k->type) {
	case GP_KEY_STRING:
		s = string_schema(k->check);
		break;
	case GP_KEY_STRING_ARRAY:
		if (k->check && k->check->whole) {
			s = string_schema(k->check);
			cJSON_DeleteItemFromObjectCaseSensitive(s, "type");
			break;
		}
		s = cJSON_CreateObject();
		cJSON_AddStringToObject(s, "type", "array");
		cJSON_AddItemToObject(s, "items", string_schema(k->check));
		break;
	case GP_KEY_STRING_MAP:
		s = k->check ? string_schema(k->check) : cJSON_CreateObject();
		gp_json_set_string(s, "type", "object");
		if (!cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"))
			cJSON_AddItemToObject(s, "additionalProperties",
			                      string_schema(NULL));
		break;
	default:
		s = cJSON_CreateObject();
		cJSON_AddStringToObject(s, "type",
		                        k->type == GP_KEY_BOOL ? "boolean"
		                        : k->type == GP_KEY_NUMBER
		                            ? gp_schema_type_word(k)
		                            : "object");
		break;
	}
	/* type (or $ref) first, then the description, then the rule. */
	cJSON *out = cJSON_CreateObject();
	cJSON *first = cJSON_GetObjectItemCaseSensitive(s, "type");
	if (!first)
		first = cJSON_GetObjectItemCaseSensitive(s, "$ref");
	if (first)
		cJSON_AddItemToObject(out, first->string, cJSON_Duplicate(first, 1));
	if (k->doc)
		cJSON_AddStringToObject(out, "description", k->doc);
	for (cJSON *m = s->child; m; m = m->next)
		if (m != first)
			cJSON_AddItemToObject(out, m->string, cJSON_Duplicate(m, 1));
	cJSON_Delete(s);
	if (k->choices) {
		cJSON *e = cJSON_AddArrayToObject(out, "enum");
		for (const char *const *c = k->choices; *c; c++)
			cJSON_AddItemToArray(e, cJSON_CreateString(*c));
	}
	if (k->type == GP_KEY_NUMBER) {
		cJSON_AddNumberToObject(out, "minimum", k->min);
		cJSON_AddNumberToObject(out, "maximum", k->max);
	}
	cJSON *def = k->default_value ? cJSON_Parse(k->default_value) : NULL;
	if (def)
		cJSON_AddItemToObject(out, "default", def);
	cJSON *ex = k->example ? cJSON_Parse(k->example) : NULL;
	if (ex)
		cJSON_AddItemToArray(cJSON_AddArrayToObject(out, "examples"), ex);
	return out;
}
