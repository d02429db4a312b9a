/* Profiles: load by name or path, validate each file against the schema
 * with FILE:LINE:COL errors, resolve `extends` (objects merge key by key,
 * everything else replaces), and digest the result. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "gpuprov/exitcodes.h"
#include "gpuprov/json.h"
#include "gpuprov/profile.h"
#include "gpuprov/root.h"

#ifndef GP_DATADIR
#define GP_DATADIR "/usr/local/share/gpuprov"
#endif
#ifndef GP_SRCDIR
#define GP_SRCDIR "."
#endif

#define MAX_EXTENDS_DEPTH 16

/* --- schema ------------------------------------------------------------- */

enum field_type {
	F_STRING,
	F_BOOL,
	F_OBJECT, /* with children */
	F_STRING_ARRAY,
	F_STRING_MAP, /* object of string values */
	F_STAGE, /* object with children, or false */
	F_STAGE_ANY, /* object with any keys, or false: typed by a later stage */
};

/* A value check beyond the type: returns NULL when fine, else why not
 * (allocated), phrased to follow the key's name. */
typedef char *(*value_check)(const cJSON *v);

struct field {
	const char *key;
	enum field_type type;
	const struct field *children; /* NULL-key terminated */
	value_check check;            /* each string, array item or map entry */
};

static bool valid_profile_name(const char *s);

static char *check_profile_name(const cJSON *v)
{
	if (valid_profile_name(v->valuestring))
		return NULL;
	return gp_xasprintf("must be lowercase letters, digits, '.', '_', '-' and '/' "
	                    "(got \"%s\")",
	                    v->valuestring);
}

/* Directories end up in PATH-like lists and ld.so.conf lines. */
static char *check_directory(const cJSON *v)
{
	const char *s = v->valuestring;
	if (s[0] == '/' && !strpbrk(s, ":\n\r\t") && !strstr(s, "/../") &&
	    !gp_str_ends_with(s, "/.."))
		return NULL;
	return gp_xasprintf("must be an absolute path without ':', '..' or control "
	                    "characters (got \"%s\")",
	                    s);
}

static char *check_modprobe_file(const cJSON *v)
{
	const char *s = v->valuestring;
	static const char *const dirs[] = { "/etc/modprobe.d/", "/usr/lib/modprobe.d/",
		                            "/lib/modprobe.d/" };
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		const char *base = s + strlen(dirs[i]);
		if (gp_str_starts_with(s, dirs[i]) && !strchr(base, '/') &&
		    gp_str_ends_with(base, ".conf") && strcmp(base, ".conf") != 0)
			return NULL;
	}
	return gp_xasprintf("must be a .conf file directly in /etc/modprobe.d (or "
	                    "/usr/lib/modprobe.d), where modprobe reads it (got \"%s\")",
	                    s);
}

static bool valid_var_name(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
	       strlen(s);
}

/* Environment variables (one map entry): names a shell accepts; PATH,
 * LD_LIBRARY_PATH and CUDA_HOME come from their own keys; values are
 * single lines. */
static char *check_env_var(const cJSON *item)
{
	static const char *const own[] = { "PATH", "LD_LIBRARY_PATH", "CUDA_HOME" };
	for (size_t i = 0; i < ARRAY_SIZE(own); i++)
		if (strcmp(item->string, own[i]) == 0)
			return gp_xasprintf("must not set %s: it comes from cuda_home, path "
			                    "and ld_library_path",
			                    own[i]);
	if (!valid_var_name(item->string))
		return gp_xasprintf("has \"%s\", which is not a variable name (letters, "
		                    "digits and _, not starting with a digit)",
		                    item->string);
	if (strpbrk(item->valuestring, "\n\r"))
		return gp_xasprintf("has a value for %s that spans lines", item->string);
	return NULL;
}

static const struct field match_fields[] = {
	{ "os_id", F_STRING, NULL, NULL }, { "version_id", F_STRING, NULL, NULL },
	{ "arch", F_STRING, NULL, NULL },  { "gpus", F_STRING_ARRAY, NULL, NULL },
	{ NULL, 0, NULL, NULL },
};

static const struct field distro_fields[] = {
	{ "id", F_STRING, NULL, NULL },
	{ "package_manager", F_STRING, NULL, NULL },
	{ "initramfs", F_STRING_ARRAY, NULL, NULL },
	{ NULL, 0, NULL, NULL },
};

static const struct field nouveau_fields[] = {
	{ "blacklist_file", F_STRING, NULL, check_modprobe_file },
	{ "initramfs", F_STRING_ARRAY, NULL, NULL },
	{ NULL, 0, NULL, NULL },
};

static const struct field env_fields[] = {
	{ "cuda_home", F_STRING, NULL, check_directory },
	{ "path", F_STRING_ARRAY, NULL, check_directory },
	{ "ld_library_path", F_STRING_ARRAY, NULL, check_directory },
	{ "vars", F_STRING_MAP, NULL, check_env_var },
	{ NULL, 0, NULL, NULL },
};

static const struct field stage_fields[] = {
	{ "nouveau", F_STAGE, nouveau_fields, NULL },
	{ "driver", F_STAGE_ANY, NULL, NULL },
	{ "cuda", F_STAGE_ANY, NULL, NULL },
	{ "cudnn", F_STAGE_ANY, NULL, NULL },
	{ "pytorch", F_STAGE_ANY, NULL, NULL },
	{ "env", F_STAGE, env_fields, NULL },
	{ NULL, 0, NULL, NULL },
};

static const struct field profile_fields[] = {
	{ "name", F_STRING, NULL, check_profile_name },
	{ "description", F_STRING, NULL, NULL },
	{ "extends", F_STRING, NULL, check_profile_name },
	{ "match", F_OBJECT, match_fields, NULL },
	{ "distro", F_OBJECT, distro_fields, NULL },
	{ "stages", F_OBJECT, stage_fields, NULL },
	{ NULL, 0, NULL, NULL },
};

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

static char *known_keys_hint(const struct field *fields, const char *key)
{
	const char *best = NULL;
	size_t best_d = 3;
	for (const struct field *f = fields; f->key; f++) {
		size_t d = edit_distance(key, f->key);
		if (d < best_d) {
			best_d = d;
			best = f->key;
		}
	}
	if (best)
		return gp_xasprintf("did you mean \"%s\"?", best);
	struct gp_buf b = { 0 };
	gp_buf_puts(&b, "known keys:");
	for (const struct field *f = fields; f->key; f++)
		gp_buf_printf(&b, " %s", f->key);
	return gp_buf_steal(&b);
}

/* A FILE:LINE:COL error at the value at pointer, or at its key when at_key. */
static int where_fail(const struct gp_json_doc *d, const char *pointer, bool at_key,
                      struct gp_err *err, const char *fmt, ...) _printf_(5, 6);
static int where_fail(const struct gp_json_doc *d, const char *pointer, bool at_key,
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
	return gp_fail(err, GP_EXIT_INVALID_INPUT, "%s:%d:%d: %s", d->file, line, col,
	               msg);
}

static const char *type_name(enum field_type t)
{
	switch (t) {
	case F_STRING:
		return "a string";
	case F_BOOL:
		return "true or false";
	case F_OBJECT:
		return "an object";
	case F_STRING_ARRAY:
		return "an array of strings";
	case F_STRING_MAP:
		return "an object of strings";
	case F_STAGE:
	case F_STAGE_ANY:
		return "an object, or false to disable the stage";
	}
	return "?";
}

static int validate_object(const struct gp_json_doc *d, const cJSON *obj,
                           const char *pointer, const struct field *fields,
                           struct gp_err *err);

static int check_at(const struct gp_json_doc *d, const cJSON *v, const char *pointer,
                    const struct field *f, struct gp_err *err)
{
	_cleanup_free_ char *why = f->check(v);
	if (!why)
		return 0;
	return where_fail(d, pointer, false, err, "\"%s\" %s", f->key, why);
}

static int validate_value(const struct gp_json_doc *d, const cJSON *v,
                          const char *pointer, const struct field *f, struct gp_err *err)
{
	bool ok = false;
	switch (f->type) {
	case F_STRING:
		ok = cJSON_IsString(v);
		break;
	case F_BOOL:
		ok = cJSON_IsBool(v);
		break;
	case F_OBJECT:
		ok = cJSON_IsObject(v);
		break;
	case F_STAGE:
	case F_STAGE_ANY:
		ok = cJSON_IsObject(v) || cJSON_IsFalse(v);
		break;
	case F_STRING_ARRAY:
	case F_STRING_MAP:
		ok = f->type == F_STRING_ARRAY ? cJSON_IsArray(v) : cJSON_IsObject(v);
		if (!ok)
			break;
		size_t i = 0;
		for (const cJSON *item = v->child; item; item = item->next, i++) {
			if (cJSON_IsString(item))
				continue;
			_cleanup_free_ char *p = f->type == F_STRING_ARRAY
			                             ? gp_xasprintf("%s/%zu", pointer, i)
			                             : gp_xasprintf("%s/%s", pointer,
			                                            item->string);
			return where_fail(d, p, false, err, "\"%s\" must hold only strings",
			                  f->key);
		}
		break;
	}
	if (!ok)
		return where_fail(d, pointer, false, err, "\"%s\" must be %s", f->key,
		                  type_name(f->type));
	if (f->check && f->type == F_STRING)
		return check_at(d, v, pointer, f, err);
	size_t i = 0;
	for (const cJSON *item = v->child; f->check && item; item = item->next, i++) {
		_cleanup_free_ char *p = f->type == F_STRING_ARRAY
		                             ? gp_xasprintf("%s/%zu", pointer, i)
		                             : gp_json_pointer_append(pointer, item->string);
		if (check_at(d, item, p, f, err) < 0)
			return -1;
	}
	if (f->children && cJSON_IsObject(v))
		return validate_object(d, v, pointer, f->children, err);
	return 0;
}

static int validate_object(const struct gp_json_doc *d, const cJSON *obj,
                           const char *pointer, const struct field *fields,
                           struct gp_err *err)
{
	for (const cJSON *item = obj->child; item; item = item->next) {
		_cleanup_free_ char *p = gp_json_pointer_append(pointer, item->string);
		const struct field *f = fields;
		while (f->key && strcmp(f->key, item->string) != 0)
			f++;
		if (!f->key) {
			_cleanup_free_ char *hint = known_keys_hint(fields, item->string);
			return where_fail(d, p, true, err, "unknown key \"%s\"; %s",
			                  item->string, hint);
		}
		if (validate_value(d, item, p, f, err) < 0)
			return -1;
	}
	return 0;
}

static bool valid_profile_name(const char *s)
{
	if (!*s || *s == '.' || *s == '-')
		return false;
	for (; *s; s++)
		if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789._-/", *s))
			return false;
	return true;
}

/* --- loading ------------------------------------------------------------ */

char **gp_profile_search_path(const char *dir_override)
{
	char **v = gp_xcalloc(1, sizeof(char *));
	if (dir_override)
		gp_strv_push(&v, dir_override);
	gp_strv_push(&v, "/etc/gpuprov/profiles");
	gp_strv_push(&v, GP_DATADIR "/profiles");
	gp_strv_push(&v, GP_SRCDIR "/profiles");
	return v;
}

/* "./x.json", "/etc/x.json", "x.json" are files; "distro/ubuntu2204" is a name. */
static bool is_path(const char *s)
{
	return s[0] == '/' || gp_str_starts_with(s, "./") || gp_str_starts_with(s, "../") ||
	       gp_str_ends_with(s, ".json");
}

/* Finds NAME.json in the search path; the error lists every directory tried. */
static char *find_profile(const char *name, char *const *search, struct gp_err *err)
{
	if (!valid_profile_name(name) || strstr(name, "..")) {
		gp_fail(err, GP_EXIT_INVALID_INPUT,
		        "profile name \"%s\" is not valid: use lowercase letters, "
		        "digits, '.', "
		        "'_' and '-' (or give a path to a .json file)",
		        name);
		return NULL;
	}
	struct gp_buf tried = { 0 };
	for (size_t i = 0; search && search[i]; i++) {
		char *path = gp_xasprintf("%s/%s.json", search[i], name);
		if (access(path, F_OK) == 0) {
			gp_buf_free(&tried);
			return path;
		}
		gp_buf_printf(&tried, "%s%s", i ? ", " : "", search[i]);
		free(path);
	}
	gp_fail(
	    err, GP_EXIT_INVALID_INPUT,
	    "profile \"%s\" not found; searched %s; 'gpuprov profiles list' shows the "
	    "available ones, --profile-dir adds a directory",
	    name, tried.data ? tried.data : "(no directories)");
	gp_buf_free(&tried);
	return NULL;
}

static int read_host_file(const char *path, char **text, size_t *len)
{
	struct gp_root host;
	int rc = gp_root_open(&host, "/");
	if (rc < 0)
		return rc;
	rc = gp_root_read(&host, path, text, len);
	gp_root_close(&host);
	return rc;
}

/* Objects merge key by key (child wins); anything else replaces. */
static void merge_into(cJSON *base, const cJSON *child)
{
	for (const cJSON *item = child->child; item; item = item->next) {
		cJSON *existing = cJSON_GetObjectItemCaseSensitive(base, item->string);
		if (existing && cJSON_IsObject(existing) && cJSON_IsObject(item)) {
			merge_into(existing, item);
			continue;
		}
		cJSON_DeleteItemFromObjectCaseSensitive(base, item->string);
		cJSON_AddItemToObject(base, item->string, cJSON_Duplicate(item, 1));
	}
}

static cJSON *load_chain(const char *path, char *const *search, char ***chain, int depth,
                         struct gp_err *err)
{
	_cleanup_free_ char *abs = realpath(path, NULL);
	if (!abs) {
		gp_fail(err, GP_EXIT_INVALID_INPUT, "cannot open profile %s: %s", path,
		        strerror(errno));
		return NULL;
	}
	gp_strv_push(chain, abs);

	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int rc = read_host_file(abs, &text, &len);
	if (rc < 0) {
		gp_fail(err, GP_EXIT_INVALID_INPUT, "cannot read profile %s: %s", path,
		        strerror(-rc));
		return NULL;
	}
	struct gp_json_doc d;
	if (gp_json_doc_parse(&d, path, text, len, err) < 0) {
		gp_json_doc_free(&d);
		return NULL;
	}
	if (!cJSON_IsObject(d.json)) {
		where_fail(&d, "", false, err, "a profile must be a JSON object");
		gp_json_doc_free(&d);
		return NULL;
	}
	if (validate_object(&d, d.json, "", profile_fields, err) < 0) {
		gp_json_doc_free(&d);
		return NULL;
	}
	cJSON *doc = TAKE_PTR(d.json);
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(doc, "extends");
	if (cJSON_IsString(ext)) {
		_cleanup_free_ char *parent_path = find_profile(ext->valuestring, search,
		                                                err);
		if (!parent_path) {
			int line, col;
			gp_json_doc_where(&d, "/extends", &line, &col);
			_cleanup_free_ char *why = gp_xstrdup(err->msg);
			gp_fail(err, GP_EXIT_INVALID_INPUT, "%s:%d:%d: %s", path, line,
			        col, why);
			cJSON_Delete(doc);
			gp_json_doc_free(&d);
			return NULL;
		}
		_cleanup_free_ char *parent_abs = realpath(parent_path, NULL);
		if (parent_abs && (gp_strv_contains(*chain, parent_abs) ||
		                   depth + 1 > MAX_EXTENDS_DEPTH)) {
			gp_strv_push(chain, parent_abs);
			_cleanup_free_ char *names = gp_strv_join(*chain, " -> ");
			where_fail(&d, "/extends", false, err,
			           "\"extends\" forms a cycle (or a chain deeper than %d): "
			           "%s; remove one of these links",
			           MAX_EXTENDS_DEPTH, names);
			cJSON_Delete(doc);
			gp_json_doc_free(&d);
			return NULL;
		}
		cJSON *parent = load_chain(parent_path, search, chain, depth + 1, err);
		if (!parent) {
			cJSON_Delete(doc);
			gp_json_doc_free(&d);
			return NULL;
		}
		cJSON_DeleteItemFromObjectCaseSensitive(doc, "extends");
		/* Parent's name and description are not inherited. */
		cJSON_DeleteItemFromObjectCaseSensitive(parent, "name");
		cJSON_DeleteItemFromObjectCaseSensitive(parent, "description");
		merge_into(parent, doc);
		cJSON_Delete(doc);
		doc = parent;
	}
	gp_json_doc_free(&d);
	return doc;
}

int gp_profile_load(const char *name_or_path, char *const *search,
                    struct gp_profile **out, struct gp_err *err)
{
	_cleanup_free_ char *path = is_path(name_or_path)
	                                ? gp_xstrdup(name_or_path)
	                                : find_profile(name_or_path, search, err);
	if (!path)
		return -1;
	char **chain = gp_xcalloc(1, sizeof(char *));
	cJSON *doc = load_chain(path, search, &chain, 0, err);
	gp_strv_free(chain);
	if (!doc)
		return -1;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(doc, "name");
	if (!cJSON_IsString(name)) { /* a present name was checked with its position */
		cJSON_Delete(doc);
		return gp_fail(err, GP_EXIT_INVALID_INPUT,
		               "%s:1:1: the profile has no \"name\"; add one (lowercase "
		               "letters, digits, '.', '_', '-')",
		               path);
	}
	struct gp_profile *p = gp_xcalloc(1, sizeof *p);
	p->name = gp_xstrdup(name->valuestring);
	p->path = realpath(path, NULL);
	if (!p->path)
		p->path = gp_xstrdup(path);
	p->doc = doc;
	_cleanup_free_ char *canon = cJSON_PrintUnformatted(doc);
	gp_sha256_hex(canon, strlen(canon), p->digest);
	*out = p;
	return 0;
}

void gp_profile_free(struct gp_profile *p)
{
	if (!p)
		return;
	free(p->name);
	free(p->path);
	cJSON_Delete(p->doc);
	free(p);
}

const cJSON *gp_profile_stage(const struct gp_profile *p, const char *stage)
{
	const cJSON *stages = cJSON_GetObjectItemCaseSensitive(p->doc, "stages");
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(stages, stage);
	return cJSON_IsObject(s) ? s : NULL;
}

const char *gp_profile_distro_string(const struct gp_profile *p, const char *key)
{
	const cJSON *distro = cJSON_GetObjectItemCaseSensitive(p->doc, "distro");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(distro, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}
