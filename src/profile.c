/* Profiles: load by name or path, validate each file against the schema
 * with FILE:LINE:COL errors, resolve `extends` (objects merge key by key,
 * everything else replaces), and digest the result.
 *
 * The schema is the tables below (src/schema.c walks them): every key a
 * profile may hold, its JSON type and a check of its value; "stages" holds
 * one entry per row of the stage table, each with the keys its stage file
 * declares. docs/profile.schema.json mirrors them for editors (its stage
 * part is generated: `make schema-json`; tests/unit/test_profile_schema.c
 * keeps the two in step) and docs/gpuprov-profile.5 describes them. Two
 * checks look beyond a single value: an "override" names each rule at most
 * once, and an http:// URL is refused unless the resolved profile (after
 * `extends`) sets "allow_insecure_http": true. Everything else that relates two settings
 * (driver against CUDA, cuDNN against CUDA, ...) is the compatibility
 * preflight's job (compat.h), not the loader's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "gpuprov/arch.h"
#include "gpuprov/compat.h"
#include "gpuprov/json.h"
#include "gpuprov/profile.h"
#include "gpuprov/root.h"
#include "gpuprov/schema.h"
#include "gpuprov/strmap.h"
#include "gpuprov/urltemplate.h"

#ifndef GP_DATADIR
#define GP_DATADIR "/usr/local/share/gpuprov"
#endif
#ifndef GP_SRCDIR
#define GP_SRCDIR "."
#endif

#define MAX_EXTENDS_DEPTH 16

/* --- schema ------------------------------------------------------------- */

static bool valid_profile_name(const char *s);

static char *check_profile_name(const cJSON *v, size_t i)
{
	if (valid_profile_name(v->valuestring))
		return NULL;
	return gp_schema_why_got(
	    v->valuestring, "must be lowercase letters, digits, '.', '_', '-' and '/'");
}

/* os-release(5): ID and VERSION_ID are lowercase letters, digits, '.', '_'
 * and '-'. */
static char *check_os_release_word(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (*s && gp_schema_only(s, GP_LOWER GP_DIGITS "._-"))
		return NULL;
	return gp_schema_why_got(s, "must be written as os-release writes it: lowercase "
	                            "letters, digits, '.', '_' and '-'");
}

static char *check_pci_id(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (strlen(s) == 9 && gp_str_starts_with(s, "10de:") &&
	    gp_schema_only(s + 5, GP_DIGITS "abcdef"))
		return NULL;
	return gp_schema_why_got(s, "entries must be NVIDIA PCI ids \"10de:xxxx\" with 4 "
	                            "lowercase hex digits, e.g. \"10de:20b0\"");
}

/* A package name with {kernel} where the kernel release goes. */
static char *check_headers_pattern(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	static const char mark[] = "{kernel}";
	struct gp_buf rest = { 0 };
	bool found = false;
	for (const char *p = s; *p;) {
		if (gp_str_starts_with(p, mark)) {
			found = true;
			gp_buf_puts(&rest, "x");
			p += strlen(mark);
		} else {
			gp_buf_append(&rest, p, 1);
			p++;
		}
	}
	_cleanup_free_ char *r = gp_buf_steal(&rest);
	if (found && strchr(GP_ALNUM, r[0]) && gp_schema_only(r, GP_ALNUM "._+-"))
		return NULL;
	return gp_schema_why_got(
	    s, "must be a package name with \"{kernel}\" where the kernel "
	       "release goes, e.g. \"linux-headers-{kernel}\" or "
	       "\"kernel-devel-{kernel}\"");
}

/* The rule ids, for the did-you-mean; gp_compat_rule_known() decides. */
static const char *const rule_ids[] = {
	GP_RULE_DRIVER_CUDA,
	GP_RULE_GPU_CUDA,
	GP_RULE_CUDNN_CUDA,
	GP_RULE_TORCH_DRIVER,
	GP_RULE_MODULE_FLAVOR,
	GP_RULE_DRIVER_GPU,
	NULL,
};

static char *check_rule(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (gp_compat_rule_known(s))
		return NULL;
	_cleanup_free_ char *all = gp_strv_join((char **)rule_ids, ", ");
	_cleanup_free_ char *q = gp_schema_quoted(s);
	const char *near = gp_schema_closest(s, rule_ids);
	if (near)
		return gp_xasprintf("must be one of %s (got %s; did you mean \"%s\"?)",
		                    all, q, near);
	return gp_xasprintf("must be one of %s (got %s)", all, q);
}

static char *check_reason(const cJSON *v, size_t i)
{
	if (strspn(v->valuestring, " \t\r\n") < strlen(v->valuestring))
		return NULL;
	return gp_xstrdup("must say why the rule does not apply to this profile (got "
	                  "an empty reason)");
}

/* A package repository: a URL, or file:///DIR/ for a repository inside the
 * target root (an offline bundle, a mounted mirror). */
static char *check_repo_url(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (gp_str_starts_with(s, "file:///"))
		return strpbrk(s, " \t\r\n")
		           ? gp_schema_why_got(s, "must not contain spaces")
		           : NULL;
	return gp_schema_check_url(v, i);
}

/* An OpenPGP v4 fingerprint: 40 hex digits, spaces allowed (as gpg prints it). */
static char *check_fingerprint(const cJSON *v, size_t i)
{
	size_t n = 0;
	for (const char *p = v->valuestring; *p; p++) {
		if (*p == ' ')
			continue;
		if (!strchr(GP_DIGITS "abcdefABCDEF", *p))
			return gp_schema_why_got(
			    v->valuestring,
			    "must be a key fingerprint: 40 hex digits (spaces "
			    "allowed)");
		n++;
	}
	if (n != 40)
		return gp_schema_why_got(v->valuestring,
		                         "must be a key fingerprint: 40 hex digits "
		                         "(spaces allowed)");
	return NULL;
}

static const char *const arches[] = { "x86_64", "aarch64", NULL };
static const char *const distro_ids[] = { "ubuntu2204", "ubuntu2404", "ubuntu2604",
	                                  "debian12",   "debian13",   "rhel9",
	                                  "rhel10",     NULL };
static const char *const apt_sources_formats[] = { "list", "deb822", NULL };
static const char *const package_managers[] = { "apt", "dnf", NULL };

/* A profile-level check: its JSON Schema is written in
 * docs/profile.schema.json by hand (only the stages' is generated). */
#define CHECK(fn) (&(const struct gp_value_check){ .check = (fn) })
#define STRING(k, fn) GP_KEY_STRING_ROW(k, CHECK(fn))
#define URL(k) GP_KEY_STRING_ROW(k, &gp_check_url)
#define ENUM(k, list) GP_KEY_ENUM_ROW(k, list)
#define STRINGS(k, chk) GP_KEY_STRINGS_ROW(k, chk)
#define OBJECT(k, kids)                                                                  \
	{                                                                                \
		.name = (k), .type = GP_KEY_OBJECT, .children = (kids)                   \
	}

static const struct gp_key match_keys[] = {
	STRING("os_id", check_os_release_word),
	STRING("version_id", check_os_release_word),
	ENUM("arch", arches),
	STRINGS("gpus", CHECK(check_pci_id)),
	GP_KEY_END,
};

/* Another vendor repository than NVIDIA's CUDA one: the container toolkit's
 * (src/stages/container_toolkit.c). */
static const struct gp_key vendor_repo_keys[] = {
	STRING("url", check_repo_url),
	URL("keyring_url"),
	GP_KEY_STRING_ROW("keyring_sha256", &gp_check_sha256),
	STRING("keyring_fingerprint", check_fingerprint),
	GP_KEY_END,
};

static const struct gp_key distro_keys[] = {
	ENUM("id", distro_ids),
	ENUM("package_manager", package_managers),
	ENUM("nvidia_repo", distro_ids),
	URL("keyring_url"),
	GP_KEY_STRING_ROW("keyring_sha256", &gp_check_sha256),
	STRING("keyring_fingerprint", check_fingerprint),
	STRING("repo_url", check_repo_url),
	STRINGS("initramfs", &gp_check_argv),
	STRING("kernel_headers", check_headers_pattern),
	OBJECT("container_toolkit_repo", vendor_repo_keys),
	ENUM("apt_sources_format", apt_sources_formats),
	GP_KEY_BOOL_ROW("dnf_module_streams"),
	GP_KEY_END,
};

static const struct gp_key override_keys[] = {
	STRING("rule", check_rule),
	STRING("reason", check_reason),
	GP_KEY_END,
};

static int validate_override(const struct gp_schema_walk *w, const cJSON *v,
                             const char *pointer, const struct gp_key *k);

/* "stages" gets its children, one per stage of the stage table, at the
 * first use (profile_schema). */
static struct gp_key profile_keys[] = {
	STRING("name", check_profile_name),
	GP_KEY_STRING_ROW("description", NULL),
	STRING("extends", check_profile_name),
	OBJECT("match", match_keys),
	OBJECT("distro", distro_keys),
	GP_KEY_BOOL_ROW("allow_insecure_http"),
	{ .name = "override",
	  .type = GP_KEY_CUSTOM,
	  .children = override_keys,
	  .validate = validate_override },
	OBJECT("stages", NULL),
	GP_KEY_END,
};

/* The rows of "stages", one per stage of the stage table, handed over by
 * gp_profile_use_stage_keys: the table sits above this file, which never
 * knows a stage. */
static const struct gp_key *stage_rows;

void gp_profile_use_stage_keys(const struct gp_key *rows)
{
	stage_rows = rows;
	for (struct gp_key *k = profile_keys; k->name; k++)
		if (strcmp(k->name, "stages") == 0)
			k->children = rows;
}

static const struct gp_key *profile_schema(void)
{
	if (!stage_rows) {
		fputs("gpuprov: internal error: a profile was read before the stage "
		      "table gave its keys (gp_profile_use_stage_keys)\n",
		      stderr);
		abort();
	}
	return profile_keys;
}

char **gp_profile_schema_keys(void)
{
	char **v = gp_xcalloc(1, sizeof(char *));
	gp_schema_push_paths(&v, "", profile_schema());
	return v;
}

/* An http:// URL seen in one file of a chain; refused after the merge
 * unless the resolved profile allows it and the URL is still there. */
struct http_use {
	char *where; /* FILE:LINE:COL */
	char *pointer;
	char *key;
	char *value;
};

struct load_state {
	char **chain; /* realpaths followed so far */
	struct http_use *http;
	size_t n_http;
};

/* The walker's accepted hook: notes each http:// URL of a URL key. */
static void note_http(const struct gp_schema_walk *w, const cJSON *v, const char *pointer,
                      const struct gp_key *k)
{
	if (k->check != &gp_check_url || !gp_str_starts_with(v->valuestring, "http://"))
		return;
	struct load_state *st = w->data;
	int line, col;
	gp_json_doc_where(w->d, pointer, &line, &col);
	st->http = gp_xrealloc(st->http, (st->n_http + 1) * sizeof *st->http);
	st->http[st->n_http++] = (struct http_use){
		.where = gp_xasprintf("%s:%d:%d", w->d->file, line, col),
		.pointer = gp_xstrdup(pointer),
		.key = gp_xstrdup(k->name),
		.value = gp_xstrdup(v->valuestring),
	};
}

/* One override: its keys, then both of them present. */
static int validate_override_entry(const struct gp_schema_walk *w, const cJSON *o,
                                   const char *pointer, const struct gp_key *k)
{
	if (gp_schema_validate(w, o, pointer, k->children) < 0)
		return -1;
	if (!cJSON_GetObjectItemCaseSensitive(o, "rule")) {
		_cleanup_free_ char *all = gp_strv_join((char **)rule_ids, ", ");
		return gp_schema_fail(w->d, pointer, false, w->err,
		                      "\"override\" needs a \"rule\": one of %s", all);
	}
	if (!cJSON_GetObjectItemCaseSensitive(o, "reason"))
		return gp_schema_fail(
		    w->d, pointer, false, w->err,
		    "\"override\" needs a \"reason\": say why the rule does "
		    "not apply to this profile");
	return 0;
}

/* An object, or a non-empty array of objects, each rule at most once. */
static int validate_override(const struct gp_schema_walk *w, const cJSON *v,
                             const char *pointer, const struct gp_key *k)
{
	if (cJSON_IsObject(v))
		return validate_override_entry(w, v, pointer, k);
	if (!cJSON_IsArray(v) || !v->child) {
		_cleanup_free_ char *got = gp_schema_describe(v);
		return gp_schema_fail(w->d, pointer, false, w->err,
		                      "\"%s\" must be an object {\"rule\": ..., "
		                      "\"reason\": ...} or a non-empty array of them "
		                      "(got %s)",
		                      k->name, got);
	}
	size_t i = 0;
	for (const cJSON *item = v->child; item; item = item->next, i++) {
		_cleanup_free_ char *p = gp_xasprintf("%s/%zu", pointer, i);
		if (!cJSON_IsObject(item)) {
			_cleanup_free_ char *got = gp_schema_describe(item);
			return gp_schema_fail(
			    w->d, p, false, w->err,
			    "\"%s\" entries must be objects {\"rule\": ..., "
			    "\"reason\": ...} (got %s)",
			    k->name, got);
		}
		if (validate_override_entry(w, item, p, k) < 0)
			return -1;
		const char *rule =
		    cJSON_GetObjectItemCaseSensitive(item, "rule")->valuestring;
		size_t j = 0;
		for (const cJSON *e = v->child; e != item; e = e->next, j++) {
			if (strcmp(
			        cJSON_GetObjectItemCaseSensitive(e, "rule")->valuestring,
			        rule) != 0)
				continue;
			_cleanup_free_ char *first = gp_xasprintf("%s/%zu/rule", pointer,
			                                          j);
			_cleanup_free_ char *again = gp_xasprintf("%s/rule", p);
			int line, col;
			gp_json_doc_where(w->d, first, &line, &col);
			return gp_schema_fail(
			    w->d, again, false, w->err,
			    "rule \"%s\" is overridden twice (first at %d:%d); "
			    "keep one override per rule",
			    rule, line, col);
		}
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
	if (GP_SRCDIR[0]) /* empty in an installed package: no source tree */
		gp_strv_push(&v, GP_SRCDIR "/profiles");
	return v;
}

/* "./x.json", "/etc/x.json", "x.json" are files; "distro/ubuntu2204" is a name. */
static bool is_path(const char *s)
{
	return s[0] == '/' || gp_str_starts_with(s, "./") ||
	       gp_str_starts_with(s, "../") || gp_str_ends_with(s, ".json");
}

/* Finds NAME.json in the search path; the error lists every directory tried. */
static char *find_profile(const char *name, char *const *search, struct gp_err *err)
{
	if (!valid_profile_name(name) || strstr(name, "..")) {
		gp_fail(err, GP_EINPUT,
		        "profile name \"%s\" is not valid: use lowercase letters, "
		        "digits, '.', '_', '-' and '/' (or give a path to a .json file)",
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
	    err, GP_EINPUT,
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
	rc = gp_root_read_max(&host, path, GP_PROFILE_MAX, text, len);
	gp_root_close(&host);
	return rc;
}

/* Objects merge key by key (child wins); anything else replaces. The
 * base's members are indexed first: looking each key up in the list would
 * make a profile with many vars quadratic. */
static void merge_into(cJSON *base, const cJSON *child)
{
	struct gp_strmap members = { 0 };
	for (cJSON *m = base->child; m; m = m->next)
		gp_strmap_put(&members, m->string, m);
	for (const cJSON *item = child->child; item; item = item->next) {
		cJSON *existing = gp_strmap_get(&members, item->string);
		if (existing && cJSON_IsObject(existing) && cJSON_IsObject(item)) {
			merge_into(existing, item);
			continue;
		}
		if (existing)
			cJSON_DetachItemViaPointer(base, existing);
		cJSON *copy = cJSON_Duplicate(item, 1);
		cJSON_AddItemToObject(base, item->string, copy);
		/* Re-keyed before the old member (and its key) is freed. */
		gp_strmap_put(&members, copy->string, copy);
		cJSON_Delete(existing);
	}
	gp_strmap_free(&members);
}

/* --- control characters --------------------------------------------------- */

/* A profile's text as the control-character check walks it: the byte at i
 * and its line and column (columns count characters, as json.c does). */
struct cursor {
	const unsigned char *s;
	size_t len, i;
	int line, col;
};

static void advance(struct cursor *t, size_t n)
{
	for (; n && t->i < t->len; n--, t->i++) {
		if (t->s[t->i] == '\n') {
			t->line++;
			t->col = 1;
		} else if ((t->s[t->i] & 0xc0) != 0x80) {
			t->col++;
		}
	}
}

/* "ESC (U+001B)": a control character's name for a message. */
static char *control_name(unsigned cp)
{
	static const char *const c0[32] = {
		"NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL",
		"BS",  "TAB", "LF",  "VT",  "FF",  "CR",  "SO",  "SI",
		"DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB",
		"CAN", "EM",  "SUB", "ESC", "FS",  "GS",  "RS",  "US",
	};
	const char *name = cp < 32 ? c0[cp] : cp == 0x7f ? "DEL" : "C1";
	return gp_xasprintf("%s (U+%04X)", name, cp);
}

static bool is_control(unsigned cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

/* The code point of the UTF-8 sequence at t (its length in *n), or -1 when
 * the bytes there are not UTF-8 (overlong forms and surrogates included). */
static long utf8_at(const struct cursor *t, size_t *n)
{
	const unsigned char *p = t->s + t->i;
	size_t left = t->len - t->i;
	static const long min_cp[] = { 0, 0, 0x80, 0x800, 0x10000 };
	*n = p[0] < 0x80             ? 1
	     : (p[0] & 0xe0) == 0xc0 ? 2
	     : (p[0] & 0xf0) == 0xe0 ? 3
	     : (p[0] & 0xf8) == 0xf0 ? 4
	                             : 0;
	if (!*n || *n > left) {
		*n = 1;
		return -1;
	}
	long cp = *n == 1 ? p[0] : p[0] & (0x7f >> *n);
	for (size_t k = 1; k < *n; k++) {
		if ((p[k] & 0xc0) != 0x80) {
			*n = 1;
			return -1;
		}
		cp = cp << 6 | (p[k] & 0x3f);
	}
	if (cp < min_cp[*n] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) {
		*n = 1;
		return -1;
	}
	return cp;
}

/* Each problem is FILE:LINE:COL; in lint mode (err->all) all of them. */
static int control_fail(const char *file, const struct cursor *t, struct gp_err *err,
                        const char *what)
{
	return gp_fail(err, GP_EINPUT,
	               "%s:%d:%d: %s: profile text reaches terminals and shell "
	               "files; remove it",
	               file, t->line, t->col, what);
}

/* One escape inside a string (t at its backslash): \u0000 to \u001f, \u007f
 * to \u009f and \b \f \n \r \t are control characters too. cJSON would cut
 * a string at \u0000 without a word. Returns the escape's length. */
static size_t check_escape(const char *file, const struct cursor *t, struct gp_err *err,
                           int *failed)
{
	static const char letters[] = "bfnrt";
	static const unsigned codes[] = { 0x08, 0x0c, 0x0a, 0x0d, 0x09 };
	const unsigned char *p = t->s + t->i;
	size_t left = t->len - t->i;
	if (left < 2)
		return 1;
	const char *simple = strchr(letters, p[1]);
	long cp = -1;
	size_t n = 2;
	if (simple && p[1]) {
		cp = codes[simple - letters];
	} else if (p[1] == 'u' && left >= 6) {
		char hex[5] = { (char)p[2], (char)p[3], (char)p[4], (char)p[5], 0 };
		if (gp_schema_only(hex, GP_DIGITS "abcdefABCDEF")) {
			cp = strtol(hex, NULL, 16);
			n = 6;
		}
	}
	if (cp >= 0 && is_control((unsigned)cp)) {
		_cleanup_free_ char *name = control_name((unsigned)cp);
		_cleanup_free_ char *what = gp_xasprintf(
		    "the escape \\%.*s is the control character %s%s", (int)n - 1,
		    (const char *)p + 1, name,
		    cp == 0 ? ", which would silently cut the string short there" : "");
		control_fail(file, t, err, what);
		*failed = 1;
	}
	return n;
}

/* Refuses control characters (C0, DEL, C1) in the profile's text: inside
 * strings (keys and values, raw or escaped) all of them, elsewhere all but
 * tab, LF and CR (they stay out of `profiles show` too); and strings that
 * are not UTF-8. */
static int check_control_chars(const char *file, const char *text, size_t len,
                               struct gp_err *err)
{
	struct cursor t = {
		.s = (const unsigned char *)text, .len = len, .line = 1, .col = 1
	};
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		t.s += 3;
		t.len -= 3;
	}
	int failed = 0;
	bool in_string = false, line_comment = false, block_comment = false;
	while (t.i < t.len && (!failed || err->all)) {
		const unsigned char *p = t.s + t.i;
		size_t left = t.len - t.i;
		if (line_comment || block_comment) {
			if (line_comment && *p == '\n')
				line_comment = false;
			if (block_comment && left >= 2 && p[0] == '*' && p[1] == '/') {
				block_comment = false;
				advance(&t, 1);
			}
		} else if (in_string && *p == '\\') {
			advance(&t, check_escape(file, &t, err, &failed));
			continue;
		} else if (*p == '"') {
			in_string = !in_string;
		} else if (!in_string && left >= 2 && p[0] == '/' &&
		           (p[1] == '/' || p[1] == '*')) {
			line_comment = p[1] == '/';
			block_comment = p[1] == '*';
			advance(&t, 2);
			continue;
		}
		size_t n = 1;
		long cp = *p < 0x80 ? *p : utf8_at(&t, &n);
		bool whitespace = !in_string && (*p == '\t' || *p == '\n' || *p == '\r');
		if (cp < 0 && in_string) {
			_cleanup_free_ char *what = gp_xasprintf(
			    "byte 0x%02x in a string is not UTF-8; save the file as "
			    "UTF-8",
			    *p);
			gp_fail(err, GP_EINPUT, "%s:%d:%d: %s", file, t.line, t.col,
			        what);
			failed = 1;
		} else if (cp >= 0 && is_control((unsigned)cp) && !whitespace) {
			_cleanup_free_ char *name = control_name((unsigned)cp);
			_cleanup_free_ char *what = gp_xasprintf(
			    "control character %s%s", name,
			    in_string ? " in a string" : "");
			control_fail(file, &t, err, what);
			failed = 1;
		}
		advance(&t, n);
	}
	return failed ? -1 : 0;
}

static cJSON *chain_from_text(const char *path, const char *text, size_t len,
                              char *const *search, struct load_state *st, int depth,
                              struct gp_err *err);

static cJSON *load_chain(const char *path, char *const *search, struct load_state *st,
                         int depth, struct gp_err *err)
{
	char ***chain = &st->chain;
	_cleanup_free_ char *abs = realpath(path, NULL);
	if (!abs) {
		gp_fail(err, GP_EINPUT, "cannot open profile %s: %s", path,
		        strerror(errno));
		return NULL;
	}
	gp_strv_push(chain, abs);

	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int rc = read_host_file(abs, &text, &len);
	if (rc < 0) {
		_cleanup_free_ char *why = gp_host_read_error(path, GP_PROFILE_MAX, rc);
		gp_fail(err, GP_EINPUT,
		        "cannot read profile: %s; give a profile name or a JSON file",
		        why);
		return NULL;
	}
	return chain_from_text(path, text, len, search, st, depth, err);
}

/* load_chain's work on the file's text: parse, check, follow "extends". */
static cJSON *chain_from_text(const char *path, const char *text, size_t len,
                              char *const *search, struct load_state *st, int depth,
                              struct gp_err *err)
{
	char ***chain = &st->chain;
	struct gp_json_doc d;
	if (gp_json_doc_parse(&d, path, text, len, err) < 0 ||
	    check_control_chars(path, text, len, err) < 0) {
		gp_json_doc_free(&d);
		return NULL;
	}
	if (!cJSON_IsObject(d.json)) {
		gp_schema_fail(&d, "", false, err, "a profile must be a JSON object");
		gp_json_doc_free(&d);
		return NULL;
	}
	struct gp_schema_walk w = {
		.d = &d, .err = err, .accepted = note_http, .data = st
	};
	if (gp_schema_validate(&w, d.json, "", profile_schema()) < 0) {
		gp_json_doc_free(&d);
		return NULL;
	}
	cJSON *doc = TAKE_PTR(d.json);
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(doc, "extends");
	if (cJSON_IsString(ext)) {
		/* Found or not, the message is placed at the value: a separate
		 * error, so that lint's list holds only the placed one. */
		struct gp_err lookup = { 0 };
		_cleanup_free_ char *parent_path = find_profile(ext->valuestring, search,
		                                                &lookup);
		if (!parent_path) {
			gp_schema_fail(&d, "/extends", false, err, "%s", lookup.msg);
			cJSON_Delete(doc);
			gp_json_doc_free(&d);
			return NULL;
		}
		_cleanup_free_ char *parent_abs = realpath(parent_path, NULL);
		if (parent_abs && (gp_strv_contains(*chain, parent_abs) ||
		                   depth + 1 > MAX_EXTENDS_DEPTH)) {
			gp_strv_push(chain, parent_abs);
			_cleanup_free_ char *names = gp_strv_join(*chain, " -> ");
			gp_schema_fail(
			    &d, "/extends", false, err,
			    "\"extends\" forms a cycle (or a chain deeper than %d): "
			    "%s; remove one of these links",
			    MAX_EXTENDS_DEPTH, names);
			cJSON_Delete(doc);
			gp_json_doc_free(&d);
			return NULL;
		}
		cJSON *parent = load_chain(parent_path, search, st, depth + 1, err);
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

static void load_state_free(struct load_state *st)
{
	gp_strv_free(st->chain);
	for (size_t i = 0; i < st->n_http; i++) {
		free(st->http[i].where);
		free(st->http[i].pointer);
		free(st->http[i].key);
		free(st->http[i].value);
	}
	free(st->http);
}

/* The member at a JSON pointer made of object keys only (URLs are never
 * array items), or NULL. */
static const cJSON *member_at(const cJSON *doc, const char *pointer)
{
	const cJSON *v = doc;
	for (const char *p = pointer; v && *p == '/';) {
		p++;
		size_t n = strcspn(p, "/");
		struct gp_buf key = { 0 };
		for (size_t i = 0; i < n; i++) {
			if (p[i] == '~' && i + 1 < n &&
			    (p[i + 1] == '0' || p[i + 1] == '1')) {
				gp_buf_puts(&key, p[i + 1] == '0' ? "~" : "/");
				i++;
			} else {
				gp_buf_append(&key, p + i, 1);
			}
		}
		_cleanup_free_ char *k = gp_buf_steal(&key);
		v = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, k) : NULL;
		p += n;
	}
	return v;
}

/* http:// URLs need "allow_insecure_http": true in the resolved profile.
 * Each file of the chain noted its http:// URLs (the child's first); one
 * that a child replaced, or that sits in a stage a child disabled, is not
 * in the result and does not count. */
static int check_insecure_http(const cJSON *doc, const struct load_state *st,
                               struct gp_err *err)
{
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "allow_insecure_http")))
		return 0;
	for (size_t i = 0; i < st->n_http; i++) {
		const struct http_use *u = &st->http[i];
		const cJSON *v = member_at(doc, u->pointer);
		if (!cJSON_IsString(v) || strcmp(v->valuestring, u->value) != 0)
			continue;
		_cleanup_free_ char *q = gp_schema_quoted(u->value);
		return gp_fail(
		    err, GP_EINPUT,
		    "%s: \"%s\" must be an https:// URL (got %s); plain http is "
		    "allowed only when the profile, after extends, has "
		    "\"allow_insecure_http\": true (for a local mirror)",
		    u->where, u->key, q);
	}
	return 0;
}

static int finish_load(const char *path, cJSON *doc, struct load_state *st,
                       struct gp_profile **out, struct gp_err *err);

static const char *doc_arch(const cJSON *doc)
{
	const cJSON *match = cJSON_GetObjectItemCaseSensitive(doc, "match");
	const char *arch = gp_json_string(match, "arch", NULL);
	return gp_arch_known(arch) ? arch : GP_ARCH_DEFAULT;
}

/* The URL placeholders ({nvidia_arch}, ...: urltemplate.h) of every string
 * in the resolved profile replaced with arch's names, once the chain is
 * resolved, so that a base serves the architecture its child matches and
 * plans, journal and digest show the URLs gpuprov fetches. */
static void expand_arch_placeholders(cJSON *node, const char *arch)
{
	const char *values[GP_URL_PLACEHOLDERS] = {
		[GP_URL_ARCH] = arch,
		[GP_URL_NVIDIA_ARCH] = gp_arch_nvidia_dir(arch),
		[GP_URL_DEB_ARCH] = gp_arch_deb_name(arch),
	};
	cJSON *v;
	cJSON_ArrayForEach(v, node)
	{
		if (cJSON_IsString(v) && strchr(v->valuestring, '{')) {
			char *x = gp_url_template_expand(v->valuestring, values);
			if (x) {
				cJSON_SetValuestring(v, x);
				free(x);
			}
		} else if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
			expand_arch_placeholders(v, arch);
		}
	}
}

int gp_profile_load(const char *name_or_path, char *const *search,
                    struct gp_profile **out, struct gp_err *err)
{
	_cleanup_free_ char *path = is_path(name_or_path)
	                                ? gp_xstrdup(name_or_path)
	                                : find_profile(name_or_path, search, err);
	if (!path)
		return -1;
	struct load_state st = { .chain = gp_xcalloc(1, sizeof(char *)) };
	cJSON *doc = load_chain(path, search, &st, 0, err);
	return finish_load(path, doc, &st, out, err);
}

int gp_profile_load_text(const char *path, const char *text, size_t len,
                         char *const *search, struct gp_profile **out, struct gp_err *err)
{
	struct load_state st = { .chain = gp_xcalloc(1, sizeof(char *)) };
	gp_strv_push(&st.chain, path);
	cJSON *doc = chain_from_text(path, text, len, search, &st, 0, err);
	return finish_load(path, doc, &st, out, err);
}

/* The resolved chain doc (NULL: it failed) checked as a whole and made the
 * profile; frees st. */
static int finish_load(const char *path, cJSON *doc, struct load_state *st,
                       struct gp_profile **out, struct gp_err *err)
{
	if (doc && check_insecure_http(doc, st, err) < 0) {
		cJSON_Delete(doc);
		doc = NULL;
	}
	load_state_free(st);
	if (!doc)
		return -1;
	expand_arch_placeholders(doc, doc_arch(doc));
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(doc, "name");
	if (!cJSON_IsString(name)) { /* a present name was checked with its position */
		cJSON_Delete(doc);
		return gp_fail(err, GP_EINPUT,
		               "%s:1:1: the profile has no \"name\"; add one (lowercase "
		               "letters, digits, '.', '_', '-', '/')",
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

char **gp_profile_initramfs_command(const struct gp_profile *p, const cJSON *cfg)
{
	char **argv = gp_json_strv(cfg, "initramfs");
	if (!argv || !argv[0]) {
		gp_strv_free(argv);
		argv = gp_json_strv(cJSON_GetObjectItemCaseSensitive(p->doc, "distro"),
		                    "initramfs");
	}
	if (argv && !argv[0]) {
		gp_strv_free(argv);
		argv = NULL;
	}
	return argv;
}

const char *gp_profile_distro_string(const struct gp_profile *p, const char *key)
{
	const cJSON *distro = cJSON_GetObjectItemCaseSensitive(p->doc, "distro");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(distro, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool gp_profile_distro_bool(const struct gp_profile *p, const char *key, bool dflt)
{
	const cJSON *distro = cJSON_GetObjectItemCaseSensitive(p->doc, "distro");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(distro, key);
	return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

const char *gp_profile_arch(const struct gp_profile *p)
{
	return doc_arch(p->doc);
}
