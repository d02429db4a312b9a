/* Profiles: load by name or path, validate each file against the schema
 * with FILE:LINE:COL errors, resolve `extends` (objects merge key by key,
 * everything else replaces), and digest the result.
 *
 * The schema is the tables below: every key a profile may hold, its JSON
 * type and a check of its value. docs/profile.schema.json mirrors them for
 * editors (tests/unit/test_profile_schema.c keeps the two in step) and
 * docs/gpuprov-profile.5 describes them. Two checks look beyond a single
 * value: an "override" names each rule at most once, and an http:// URL is
 * refused unless the resolved profile (after `extends`) sets
 * "allow_insecure_http": true. Everything else that relates two settings
 * (driver against CUDA, cuDNN against CUDA, ...) is the compatibility
 * preflight's job (compat.h), not the loader's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "gpuprov/compat.h"
#include "gpuprov/json.h"
#include "gpuprov/profile.h"
#include "gpuprov/root.h"
#include "gpuprov/strmap.h"

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
	F_OVERRIDE, /* object with children, or a non-empty array of such objects */
};

/* A value check beyond the type: returns NULL when fine, else why not
 * (allocated), phrased to follow the key's name. index is the item's place
 * in its array or map (0 for a single string). */
typedef char *(*value_check)(const cJSON *v, size_t index);

struct field {
	const char *key;
	enum field_type type;
	const struct field *children; /* NULL-key terminated */
	value_check check; /* each string, array item or map entry */
	const char *const *choices; /* F_STRING: the values allowed, NULL-terminated */
};

#define DIGITS "0123456789"
#define LOWER "abcdefghijklmnopqrstuvwxyz"
#define UPPER "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define ALNUM LOWER UPPER DIGITS

static bool only(const char *s, const char *set)
{
	return strspn(s, set) == strlen(s);
}

/* s quoted for a message: at most about 60 bytes of it, with quotes,
 * backslashes and control characters escaped, so that a message stays one
 * readable line whatever the input holds. */
static char *quoted(const char *s)
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
static char *why_got(const char *s, const char *why)
{
	_cleanup_free_ char *q = quoted(s);
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
static const char *closest(const char *s, const char *const *list)
{
	const char *best = NULL;
	size_t best_d = 3;
	for (; *list; list++)
		consider(s, *list, &best, &best_d);
	return best;
}

static bool valid_profile_name(const char *s);

static char *check_profile_name(const cJSON *v, size_t i)
{
	if (valid_profile_name(v->valuestring))
		return NULL;
	return why_got(v->valuestring,
	               "must be lowercase letters, digits, '.', '_', '-' and '/'");
}

/* Directories end up in PATH-like lists and ld.so.conf lines. */
static char *check_directory(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (s[0] == '/' && !strpbrk(s, ":\n\r\t") && !strstr(s, "/../") &&
	    !gp_str_ends_with(s, "/.."))
		return NULL;
	return why_got(s, "must be an absolute path without ':', '..' or control "
	                  "characters");
}

static char *check_modprobe_file(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	/* The directories libkmod reads (it has no /usr/lib/modprobe.d; on
	 * merged-/usr systems /lib/modprobe.d is that directory). */
	static const char *const dirs[] = { "/etc/modprobe.d/", "/lib/modprobe.d/" };
	for (size_t k = 0; k < ARRAY_SIZE(dirs); k++) {
		const char *base = s + strlen(dirs[k]);
		if (gp_str_starts_with(s, dirs[k]) && !strchr(base, '/') &&
		    gp_str_ends_with(base, ".conf") && strcmp(base, ".conf") != 0)
			return NULL;
	}
	return why_got(s, "must be a .conf file directly in /etc/modprobe.d (or "
	                  "/lib/modprobe.d), where modprobe reads it");
}

static bool valid_var_name(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	return only(s, ALNUM "_");
}

/* Variables that make every program, or every shell, run code or change
 * how it reads its input: set system-wide by the env stage, each would be
 * a way into every login. */
static const struct {
	const char *name;
	const char *why;
} unsafe_vars[] = {
	{ "BASH_ENV", "bash runs the file it names in every non-interactive shell" },
	{ "ENV", "sh and bash run the file it names in every interactive shell" },
	{ "PROMPT_COMMAND", "bash runs it before every prompt" },
	{ "PS0", "bash expands it, command substitutions included, at every command" },
	{ "PS1", "bash expands it, command substitutions included, at every prompt" },
	{ "PS2", "bash expands it, command substitutions included, at every prompt" },
	{ "PS4", "bash expands it, command substitutions included, in every traced "
	         "command" },
	{ "IFS", "it changes how every shell splits words" },
	{ "SHELLOPTS", "it turns on shell options in every bash script" },
	{ "BASHOPTS", "it turns on shell options in every bash script" },
	{ "GLOBIGNORE", "it changes what every bash glob matches" },
	{ "CDPATH", "it changes where cd in every script goes" },
	{ "GCONV_PATH", "glibc loads character-set modules (code) from it" },
};

/* Why a variable may not be set system-wide, or NULL. */
static char *unsafe_var(const char *name)
{
	if (gp_str_starts_with(name, "LD_"))
		return gp_xasprintf("must not set %s: the dynamic loader reads LD_* "
		                    "variables in every program it starts (LD_PRELOAD "
		                    "and LD_AUDIT load code into each); library "
		                    "directories go in ld_library_path",
		                    name);
	for (size_t k = 0; k < ARRAY_SIZE(unsafe_vars); k++)
		if (strcmp(name, unsafe_vars[k].name) == 0)
			return gp_xasprintf("must not set %s: %s, so a system-wide "
			                    "value reaches every login",
			                    name, unsafe_vars[k].why);
	return NULL;
}

/* Environment variables (one map entry): names a shell accepts; PATH,
 * LD_LIBRARY_PATH and CUDA_HOME come from their own keys; none that
 * injects code into every program or shell; values are single lines. */
static char *check_env_var(const cJSON *item, size_t i)
{
	static const char *const own[] = { "PATH", "LD_LIBRARY_PATH", "CUDA_HOME" };
	for (size_t k = 0; k < ARRAY_SIZE(own); k++)
		if (strcmp(item->string, own[k]) == 0)
			return gp_xasprintf(
			    "must not set %s: it comes from cuda_home, path "
			    "and ld_library_path",
			    own[k]);
	char *unsafe = unsafe_var(item->string);
	if (unsafe)
		return unsafe;
	if (!valid_var_name(item->string)) {
		_cleanup_free_ char *q = quoted(item->string);
		return gp_xasprintf("has %s, which is not a variable name (letters, "
		                    "digits and _, not starting with a digit)",
		                    q);
	}
	if (strpbrk(item->valuestring, "\n\r"))
		return gp_xasprintf("has a value for %s that spans lines", item->string);
	return NULL;
}

/* os-release(5): ID and VERSION_ID are lowercase letters, digits, '.', '_'
 * and '-'. */
static char *check_os_release_word(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (*s && only(s, LOWER DIGITS "._-"))
		return NULL;
	return why_got(s, "must be written as os-release writes it: lowercase "
	                  "letters, digits, '.', '_' and '-'");
}

static char *check_pci_id(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (strlen(s) == 9 && gp_str_starts_with(s, "10de:") &&
	    only(s + 5, DIGITS "abcdef"))
		return NULL;
	return why_got(s, "entries must be NVIDIA PCI ids \"10de:xxxx\" with 4 "
	                  "lowercase hex digits, e.g. \"10de:20b0\"");
}

/* https:// (or http://, allowed later by allow_insecure_http) with a host
 * and without credentials. A URL with credentials is never echoed. */
static char *check_url(const cJSON *v, size_t i)
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
		return why_got(s, "must be an https:// URL");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			return why_got(s,
			               "must not contain spaces or control characters");
	if (strcspn(rest, "/?#") == 0)
		return why_got(s, "must name a host after the scheme");
	return NULL;
}

static char *check_sha256(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	size_t bad = strspn(s, DIGITS "abcdefABCDEF");
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
	if (!only(s, DIGITS "abcdef"))
		return gp_xstrdup("must be written in lowercase hex, as sha256sum "
		                  "prints it");
	return NULL;
}

/* No '.', '..' or empty components (so no "//" and no trailing '/'), no
 * ':' (PATH-like lists) and no control characters. */
static bool plain_absolute_path(const char *s)
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
	if (plain_absolute_path(v->valuestring))
		return NULL;
	return why_got(v->valuestring, "must be an absolute path such as "
	                               "\"/var/lib/shim-signed/mok/MOK.priv\"");
}

/* An argv: the first element is a bare command name (looked up in the
 * root's /usr/sbin:/usr/bin:/sbin:/bin) or an absolute path. */
static char *check_argv(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (i != 0)
		return NULL;
	if (s[0] == '/' ? plain_absolute_path(s)
	                : *s && *s != '-' && *s != '.' && only(s, ALNUM "._+-"))
		return NULL;
	return why_got(s, "must start with a command: a bare name such as "
	                  "\"update-initramfs\" or an absolute path");
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
	if (found && strchr(ALNUM, r[0]) && only(r, ALNUM "._+-"))
		return NULL;
	return why_got(s, "must be a package name with \"{kernel}\" where the kernel "
	                  "release goes, e.g. \"linux-headers-{kernel}\" or "
	                  "\"kernel-devel-{kernel}\"");
}

/* min..max dot-separated runs of digits: "535.104.05". */
static bool numeric_parts(const char *s, int min, int max)
{
	int parts = 0;
	for (;;) {
		size_t n = strspn(s, DIGITS);
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

static char *check_branch(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	size_t n = strlen(s);
	if (n >= 2 && n <= 3 && only(s, DIGITS))
		return NULL;
	return why_got(s, "must be a driver branch: 2 or 3 digits, e.g. \"535\"");
}

static char *check_driver_version(const cJSON *v, size_t i)
{
	if (numeric_parts(v->valuestring, 2, 3))
		return NULL;
	return why_got(v->valuestring, "must be a driver version: 2 or 3 numbers "
	                               "separated by dots, e.g. \"535.104.05\"");
}

static char *check_cuda_version(const cJSON *v, size_t i)
{
	if (numeric_parts(v->valuestring, 2, 3))
		return NULL;
	return why_got(v->valuestring,
	               "must be a CUDA version \"X.Y\" or \"X.Y.Z\", e.g. \"12.4\"");
}

static char *check_cudnn_version(const cJSON *v, size_t i)
{
	if (numeric_parts(v->valuestring, 3, 4))
		return NULL;
	return why_got(v->valuestring, "must be a cuDNN version: 3 or 4 numbers "
	                               "separated by dots, e.g. \"8.9.7.29\"");
}

static char *check_python_version(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (gp_str_starts_with(s, "3.") && numeric_parts(s, 2, 3))
		return NULL;
	return why_got(s, "must be a Python version \"3.N\" or \"3.N.M\", e.g. "
	                  "\"3.11\"");
}

static char *check_under(const char *s, const char *const *dirs, const char *names)
{
	if (s[0] != '/') {
		_cleanup_free_ char *why = gp_xasprintf(
		    "must be an absolute path under %s", names);
		return why_got(s, why);
	}
	if (!plain_absolute_path(s))
		return why_got(s, "must be a plain absolute path: no '.' or '..' "
		                  "components, no '//' or trailing '/', no ':' or "
		                  "control characters");
	for (; *dirs; dirs++)
		if (gp_str_starts_with(s, *dirs) && s[strlen(*dirs)])
			return NULL;
	_cleanup_free_ char *why = gp_xasprintf("must be under %s, where gpuprov "
	                                        "installs software",
	                                        names);
	return why_got(s, why);
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

static char *check_conda_env(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (*s && *s != '.' && *s != '-' && only(s, ALNUM "_.-"))
		return NULL;
	return why_got(s, "must be an environment name: letters, digits, '_', '.' "
	                  "and '-', not starting with '.' or '-'");
}

/* "name==version": a PEP 508 name (letters, digits, '.', '_', '-', starting
 * and ending with a letter or digit) pinned exactly; no other operator, no
 * wildcard, extras or markers. */
static char *check_pin(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	const char *eq = strstr(s, "==");
	if (eq && eq > s) {
		_cleanup_free_ char *name = gp_xstrndup(s, (size_t)(eq - s));
		const char *ver = eq + 2;
		size_t nl = strlen(name);
		if (only(name, ALNUM "._-") && strchr(ALNUM, name[0]) &&
		    strchr(ALNUM, name[nl - 1]) && *ver >= '0' && *ver <= '9' &&
		    only(ver, ALNUM ".+!_-"))
			return NULL;
	}
	return why_got(s, "entries must be exact pins \"name==version\", e.g. "
	                  "\"torch==2.1.2\"");
}

/* A conda channel name, with an optional label path
 * ("nvidia/label/cuda-12.4.1"); not a URL. */
static char *check_channel(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	bool ok = strchr(ALNUM, s[0]) && only(s, ALNUM "_.-/") && !strstr(s, "//") &&
	          !gp_str_ends_with(s, "/");
	if (ok && *s)
		return NULL;
	return why_got(s, "entries must be channel names such as \"conda-forge\" or "
	                  "\"nvidia/label/cuda-12.4.1\", not URLs");
}

/* A file inside the target root that a tool there reads (pip's cert). */
static char *check_root_file(const cJSON *v, size_t i)
{
	if (plain_absolute_path(v->valuestring))
		return NULL;
	return why_got(v->valuestring,
	               "must be a plain absolute path inside the root: no '.' or "
	               "'..' components, no '//' or trailing '/', no ':' or control "
	               "characters");
}

/* A proxy for pip and conda: http:// is normal for a proxy (TLS to the index
 * goes through it with CONNECT), so allow_insecure_http does not apply. */
static char *check_proxy_url(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (!gp_str_starts_with(s, "http://") && !gp_str_starts_with(s, "https://"))
		return why_got(s, "must be an http:// or https:// proxy URL, e.g. "
		                  "\"http://proxy.lan:3128\"");
	return check_url(v, i);
}

/* The rule ids, for the did-you-mean; gp_compat_rule_known() decides. */
static const char *const rule_ids[] = {
	GP_RULE_DRIVER_CUDA,  GP_RULE_GPU_CUDA,      GP_RULE_CUDNN_CUDA,
	GP_RULE_TORCH_DRIVER, GP_RULE_MODULE_FLAVOR, NULL,
};

static char *check_rule(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (gp_compat_rule_known(s))
		return NULL;
	_cleanup_free_ char *all = gp_strv_join((char **)rule_ids, ", ");
	_cleanup_free_ char *q = quoted(s);
	const char *near = closest(s, rule_ids);
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
		return strpbrk(s, " \t\r\n") ? why_got(s, "must not contain spaces")
		                             : NULL;
	return check_url(v, i);
}

/* An OpenPGP v4 fingerprint: 40 hex digits, spaces allowed (as gpg prints it). */
static char *check_fingerprint(const cJSON *v, size_t i)
{
	size_t n = 0;
	for (const char *p = v->valuestring; *p; p++) {
		if (*p == ' ')
			continue;
		if (!strchr(DIGITS "abcdefABCDEF", *p))
			return why_got(v->valuestring,
			               "must be a key fingerprint: 40 hex digits (spaces "
			               "allowed)");
		n++;
	}
	if (n != 40)
		return why_got(v->valuestring, "must be a key fingerprint: 40 hex digits "
		                               "(spaces allowed)");
	return NULL;
}

static const char *const arches[] = { "x86_64", "aarch64", NULL };
static const char *const distro_ids[] = { "ubuntu2204", "ubuntu2404", "debian12", "rhel9",
	                                  NULL };
static const char *const package_managers[] = { "apt", "dnf", NULL };
static const char *const driver_methods[] = { "apt", "dnf", "runfile", NULL };
static const char *const flavors[] = { "server", "desktop", NULL };
static const char *const driver_sources[] = { "canonical", "nvidia", NULL };
static const char *const kernel_module_kinds[] = { "auto", "prebuilt", "dkms", NULL };
static const char *const module_kinds[] = { "open", "proprietary", "auto", NULL };
static const char *const cuda_methods[] = { "repo", "runfile", NULL };
static const char *const cudnn_methods[] = { "tarball", "apt", NULL };
static const char *const cuda_majors[] = { "11", "12", "13", NULL };
static const char *const pytorch_methods[] = { "conda", "venv", NULL };
static const char *const pytorch_installers[] = { "pip", "conda", NULL };

#define STRING(k, chk)                                                                   \
	{                                                                                \
		.key = (k), .type = F_STRING, .check = (chk)                             \
	}
#define ENUM(k, list)                                                                    \
	{                                                                                \
		.key = (k), .type = F_STRING, .choices = (list)                          \
	}
#define BOOL(k)                                                                          \
	{                                                                                \
		.key = (k), .type = F_BOOL                                               \
	}
#define STRINGS(k, chk)                                                                  \
	{                                                                                \
		.key = (k), .type = F_STRING_ARRAY, .check = (chk)                       \
	}
#define NESTED(k, t, kids)                                                               \
	{                                                                                \
		.key = (k), .type = (t), .children = (kids)                              \
	}
#define END                                                                              \
	{                                                                                \
		.key = NULL                                                              \
	}

static const struct field match_fields[] = {
	STRING("os_id", check_os_release_word),
	STRING("version_id", check_os_release_word),
	ENUM("arch", arches),
	STRINGS("gpus", check_pci_id),
	END,
};

static const struct field distro_fields[] = {
	ENUM("id", distro_ids),
	ENUM("package_manager", package_managers),
	ENUM("nvidia_repo", distro_ids),
	STRING("keyring_url", check_url),
	STRING("keyring_sha256", check_sha256),
	STRING("keyring_fingerprint", check_fingerprint),
	STRING("repo_url", check_repo_url),
	STRINGS("initramfs", check_argv),
	STRING("kernel_headers", check_headers_pattern),
	END,
};

static const struct field override_fields[] = {
	STRING("rule", check_rule),
	STRING("reason", check_reason),
	END,
};

static const struct field nouveau_fields[] = {
	STRING("blacklist_file", check_modprobe_file),
	STRINGS("initramfs", check_argv),
	END,
};

static const struct field driver_fields[] = {
	ENUM("method", driver_methods),
	STRING("branch", check_branch),
	ENUM("flavor", flavors),
	ENUM("modules", module_kinds),
	STRING("version", check_driver_version),
	BOOL("hold"),
	STRING("url", check_url),
	STRING("sha256", check_sha256),
	ENUM("source", driver_sources),
	ENUM("kernel_modules", kernel_module_kinds),
	STRING("mok_key", check_file_path),
	STRING("mok_cert", check_file_path),
	END,
};

static const struct field cuda_fields[] = {
	ENUM("method", cuda_methods),
	STRING("version", check_cuda_version),
	STRING("path", check_install_dir),
	STRING("url", check_url),
	STRING("sha256", check_sha256),
	BOOL("link"),
	END,
};

static const struct field cudnn_fields[] = {
	ENUM("method", cudnn_methods),
	STRING("version", check_cudnn_version),
	ENUM("cuda", cuda_majors),
	STRING("url", check_url),
	STRING("sha256", check_sha256),
	STRING("path", check_install_dir),
	END,
};

static const struct field pytorch_fields[] = {
	ENUM("method", pytorch_methods),       STRING("prefix", check_prefix_dir),
	STRING("env", check_conda_env),        STRING("python", check_python_version),
	STRINGS("packages", check_pin),        STRING("index_url", check_url),
	STRING("installer_url", check_url),    STRING("installer_sha256", check_sha256),
	STRINGS("channels", check_channel),    BOOL("defaults_tos_accepted"),
	ENUM("installer", pytorch_installers), STRINGS("extra_index_urls", check_url),
	STRING("ca_bundle", check_root_file),  STRING("proxy", check_proxy_url),
	STRING("channel_alias", check_url),    END,
};

static const struct field env_fields[] = {
	STRING("cuda_home", check_directory),
	STRINGS("path", check_directory),
	STRINGS("ld_library_path", check_directory),
	{ .key = "vars", .type = F_STRING_MAP, .check = check_env_var },
	BOOL("conda_init"),
	END,
};

static const struct field stage_fields[] = {
	NESTED("nouveau", F_STAGE, nouveau_fields),
	NESTED("driver", F_STAGE, driver_fields),
	NESTED("cuda", F_STAGE, cuda_fields),
	NESTED("cudnn", F_STAGE, cudnn_fields),
	NESTED("pytorch", F_STAGE, pytorch_fields),
	NESTED("env", F_STAGE, env_fields),
	END,
};

static const struct field profile_fields[] = {
	STRING("name", check_profile_name),
	STRING("description", NULL),
	STRING("extends", check_profile_name),
	NESTED("match", F_OBJECT, match_fields),
	NESTED("distro", F_OBJECT, distro_fields),
	BOOL("allow_insecure_http"),
	NESTED("override", F_OVERRIDE, override_fields),
	NESTED("stages", F_OBJECT, stage_fields),
	END,
};

static void push_keys(char ***v, const char *pointer, const struct field *fields)
{
	for (const struct field *f = fields; f->key; f++) {
		_cleanup_free_ char *p = gp_json_pointer_append(pointer, f->key);
		gp_strv_push(v, p);
		if (f->children)
			push_keys(v, p, f->children);
	}
}

char **gp_profile_schema_keys(void)
{
	char **v = gp_xcalloc(1, sizeof(char *));
	push_keys(&v, "", profile_fields);
	return v;
}

static char *known_keys_hint(const struct field *fields, const char *key)
{
	const char *best = NULL;
	size_t best_d = 3;
	for (const struct field *f = fields; f->key; f++)
		consider(key, f->key, &best, &best_d);
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
	return gp_fail(err, GP_EINPUT, "%s:%d:%d: %s", d->file, line, col, msg);
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
		return "an object, or false to disable the stage";
	case F_OVERRIDE:
		return "an object {\"rule\": ..., \"reason\": ...} or a non-empty array "
		       "of them";
	}
	return "?";
}

/* What a value of the wrong type is, for "(got ...)". */
static char *describe(const cJSON *v)
{
	if (cJSON_IsString(v))
		return quoted(v->valuestring);
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

struct vctx {
	const struct gp_json_doc *d;
	struct gp_err *err;
	struct load_state *st;
};

static void note_http(const struct vctx *x, const cJSON *v, const char *pointer,
                      const struct field *f)
{
	if (!gp_str_starts_with(v->valuestring, "http://"))
		return;
	struct load_state *st = x->st;
	int line, col;
	gp_json_doc_where(x->d, pointer, &line, &col);
	st->http = gp_xrealloc(st->http, (st->n_http + 1) * sizeof *st->http);
	st->http[st->n_http++] = (struct http_use){
		.where = gp_xasprintf("%s:%d:%d", x->d->file, line, col),
		.pointer = gp_xstrdup(pointer),
		.key = gp_xstrdup(f->key),
		.value = gp_xstrdup(v->valuestring),
	};
}

static int validate_object(const struct vctx *x, const cJSON *obj, const char *pointer,
                           const struct field *fields);

static int check_at(const struct vctx *x, const cJSON *v, size_t index,
                    const char *pointer, const struct field *f)
{
	_cleanup_free_ char *why = f->check(v, index);
	/* A map entry's check is mostly about its name: point at the key. */
	if (why)
		return where_fail(x->d, pointer, f->type == F_STRING_MAP, x->err,
		                  "\"%s\" %s", f->key, why);
	if (f->check == check_url)
		note_http(x, v, pointer, f);
	return 0;
}

static int check_choice(const struct vctx *x, const cJSON *v, const char *pointer,
                        const struct field *f)
{
	for (const char *const *c = f->choices; *c; c++)
		if (strcmp(*c, v->valuestring) == 0)
			return 0;
	_cleanup_free_ char *all = gp_strv_join((char **)f->choices, ", ");
	_cleanup_free_ char *q = quoted(v->valuestring);
	const char *near = closest(v->valuestring, f->choices);
	if (near)
		return where_fail(
		    x->d, pointer, false, x->err,
		    "\"%s\" must be one of %s (got %s; did you mean \"%s\"?)", f->key,
		    all, q, near);
	return where_fail(x->d, pointer, false, x->err,
	                  "\"%s\" must be one of %s (got %s)", f->key, all, q);
}

/* One override: its keys, then both of them present. */
static int validate_override_entry(const struct vctx *x, const cJSON *o,
                                   const char *pointer, const struct field *f)
{
	if (validate_object(x, o, pointer, f->children) < 0)
		return -1;
	if (!cJSON_GetObjectItemCaseSensitive(o, "rule")) {
		_cleanup_free_ char *all = gp_strv_join((char **)rule_ids, ", ");
		return where_fail(x->d, pointer, false, x->err,
		                  "\"override\" needs a \"rule\": one of %s", all);
	}
	if (!cJSON_GetObjectItemCaseSensitive(o, "reason"))
		return where_fail(
		    x->d, pointer, false, x->err,
		    "\"override\" needs a \"reason\": say why the rule does "
		    "not apply to this profile");
	return 0;
}

static int validate_override(const struct vctx *x, const cJSON *v, const char *pointer,
                             const struct field *f)
{
	if (cJSON_IsObject(v))
		return validate_override_entry(x, v, pointer, f);
	if (!cJSON_IsArray(v) || !v->child) {
		_cleanup_free_ char *got = describe(v);
		return where_fail(x->d, pointer, false, x->err,
		                  "\"%s\" must be %s (got %s)", f->key,
		                  type_name(f->type), got);
	}
	size_t i = 0;
	for (const cJSON *item = v->child; item; item = item->next, i++) {
		_cleanup_free_ char *p = gp_xasprintf("%s/%zu", pointer, i);
		if (!cJSON_IsObject(item)) {
			_cleanup_free_ char *got = describe(item);
			return where_fail(
			    x->d, p, false, x->err,
			    "\"%s\" entries must be objects {\"rule\": ..., "
			    "\"reason\": ...} (got %s)",
			    f->key, got);
		}
		if (validate_override_entry(x, item, p, f) < 0)
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
			gp_json_doc_where(x->d, first, &line, &col);
			return where_fail(
			    x->d, again, false, x->err,
			    "rule \"%s\" is overridden twice (first at %d:%d); "
			    "keep one override per rule",
			    rule, line, col);
		}
	}
	return 0;
}

static int validate_value(const struct vctx *x, const cJSON *v, const char *pointer,
                          const struct field *f)
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
		ok = cJSON_IsObject(v) || cJSON_IsFalse(v);
		break;
	case F_OVERRIDE:
		return validate_override(x, v, pointer, f);
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
			                             : gp_json_pointer_append(
			                                   pointer, item->string);
			_cleanup_free_ char *got = describe(item);
			return where_fail(x->d, p, false, x->err,
			                  "\"%s\" must hold only strings (got %s)",
			                  f->key, got);
		}
		break;
	}
	if (!ok) {
		_cleanup_free_ char *got = describe(v);
		return where_fail(x->d, pointer, false, x->err,
		                  "\"%s\" must be %s (got %s)", f->key,
		                  type_name(f->type), got);
	}
	if (f->type == F_STRING) {
		if (f->choices)
			return check_choice(x, v, pointer, f);
		return f->check ? check_at(x, v, 0, pointer, f) : 0;
	}
	size_t i = 0;
	for (const cJSON *item = v->child; f->check && item; item = item->next, i++) {
		_cleanup_free_ char *p = f->type == F_STRING_ARRAY
		                             ? gp_xasprintf("%s/%zu", pointer, i)
		                             : gp_json_pointer_append(pointer,
		                                                      item->string);
		if (check_at(x, item, i, p, f) < 0)
			return -1;
	}
	if (f->children && cJSON_IsObject(v))
		return validate_object(x, v, pointer, f->children);
	return 0;
}

static int validate_object(const struct vctx *x, const cJSON *obj, const char *pointer,
                           const struct field *fields)
{
	bool failed = false;
	for (const cJSON *item = obj->child; item; item = item->next) {
		_cleanup_free_ char *p = gp_json_pointer_append(pointer, item->string);
		const struct field *f = fields;
		while (f->key && strcmp(f->key, item->string) != 0)
			f++;
		int rc;
		if (!f->key) {
			_cleanup_free_ char *hint = known_keys_hint(fields, item->string);
			_cleanup_free_ char *q = quoted(item->string);
			rc = where_fail(x->d, p, true, x->err, "unknown key %s; %s", q,
			                hint);
		} else {
			rc = validate_value(x, item, p, f);
		}
		if (rc < 0 && !x->err->all)
			return -1;
		/* Collecting every problem: go on with the next member. */
		failed |= rc < 0;
	}
	return failed ? -1 : 0;
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
		if (only(hex, DIGITS "abcdefABCDEF")) {
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
	struct gp_json_doc d;
	if (gp_json_doc_parse(&d, path, text, len, err) < 0 ||
	    check_control_chars(path, text, len, err) < 0) {
		gp_json_doc_free(&d);
		return NULL;
	}
	if (!cJSON_IsObject(d.json)) {
		where_fail(&d, "", false, err, "a profile must be a JSON object");
		gp_json_doc_free(&d);
		return NULL;
	}
	struct vctx x = { .d = &d, .err = err, .st = st };
	if (validate_object(&x, d.json, "", profile_fields) < 0) {
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
			where_fail(&d, "/extends", false, err, "%s", lookup.msg);
			cJSON_Delete(doc);
			gp_json_doc_free(&d);
			return NULL;
		}
		_cleanup_free_ char *parent_abs = realpath(parent_path, NULL);
		if (parent_abs && (gp_strv_contains(*chain, parent_abs) ||
		                   depth + 1 > MAX_EXTENDS_DEPTH)) {
			gp_strv_push(chain, parent_abs);
			_cleanup_free_ char *names = gp_strv_join(*chain, " -> ");
			where_fail(
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
		_cleanup_free_ char *q = quoted(u->value);
		return gp_fail(
		    err, GP_EINPUT,
		    "%s: \"%s\" must be an https:// URL (got %s); plain http is "
		    "allowed only when the profile, after extends, has "
		    "\"allow_insecure_http\": true (for a local mirror)",
		    u->where, u->key, q);
	}
	return 0;
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
	if (doc && check_insecure_http(doc, &st, err) < 0) {
		cJSON_Delete(doc);
		doc = NULL;
	}
	load_state_free(&st);
	if (!doc)
		return -1;
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

const char *gp_profile_distro_string(const struct gp_profile *p, const char *key)
{
	const cJSON *distro = cJSON_GetObjectItemCaseSensitive(p->doc, "distro");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(distro, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}
