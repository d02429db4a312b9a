/* Stage pytorch: a Python environment with PyTorch that is proven to see the GPU.
 * method conda: Miniforge (the installer through the download layer, its
 *         sha256 pinned by the profile) in batch mode into <prefix>, then
 *         `conda create -n <env> python=<ver>` from the profile's channels
 *         only (--override-channels); <prefix>/.condarc holds the channels,
 *         channel_alias, proxy and CA. Anaconda's defaults channels are
 *         refused unless the profile says their terms are accepted.
 * method venv: `python3 -m venv <prefix>` with the distro's Python
 *         (python3-venv through the package layer when ensurepip is missing).
 * Packages: exact pins, with pip from index_url (a tagged index such as
 *         .../whl/cu118 pins torch, torchvision and torchaudio to that local
 *         version, "2.7.1+cu118") or with conda (installer conda). pip's
 *         settings go to the environment's own pip.conf, never a home.
 * check:  the environment exists with the profile's Python (pyvenv.cfg or
 *         conda-meta/python-*.json), its config files are the rendered ones,
 *         every pin is installed (dist-info METADATA or conda-meta), without
 *         running Python.
 * apply:  only the missing steps, in order, through the effect door.
 * verify: the same metadata, the wheel's CUDA tag against the loaded
 *         driver, then the environment's Python, chrooted, imports torch and
 *         reports versions, cuDNN, the GPUs it sees and one tensor op on cuda. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "gpuprov/cuda_releases.h"
#include "gpuprov/drift.h"
#include "gpuprov/json.h"
#include "gpuprov/nvproc.h"
#include "gpuprov/pkg.h"
#include "gpuprov/pytorch.h"
#include "gpuprov/run.h"
#include "gpuprov/stages.h"
#include "gpuprov/version.h"

/* The default installer: the newest Miniforge for the profile's
 * architecture (Miniforge3-Linux-x86_64.sh, Miniforge3-Linux-aarch64.sh). */
#define MINIFORGE_LATEST                                                                 \
	"https://github.com/conda-forge/miniforge/releases/latest/download/"
#define MINIFORGE MINIFORGE_LATEST "Miniforge3-Linux-x86_64.sh"

/* --- profile keys (stages.pytorch) --------------------------------------- */

#define KEY_METHOD GP_PYTORCH_KEY_METHOD
#define KEY_PREFIX GP_PYTORCH_KEY_PREFIX
#define KEY_ENV "env"
#define KEY_PYTHON "python"
#define KEY_PACKAGES "packages"
#define KEY_INDEX_URL "index_url"
#define KEY_INSTALLER_URL "installer_url"
#define KEY_INSTALLER_SHA256 "installer_sha256"
#define KEY_CHANNELS "channels"
#define KEY_DEFAULTS_TOS_ACCEPTED "defaults_tos_accepted"
#define KEY_INSTALLER "installer"
#define KEY_EXTRA_INDEX_URLS "extra_index_urls"
#define KEY_CA_BUNDLE "ca_bundle"
#define KEY_PROXY "proxy"
#define KEY_CHANNEL_ALIAS "channel_alias"

static char *python_version_check(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (gp_str_starts_with(s, "3.") && gp_schema_numeric_parts(s, 2, 3))
		return NULL;
	return gp_schema_why_got(s, "must be a Python version \"3.N\" or \"3.N.M\", e.g. "
	                            "\"3.11\"");
}

static char *conda_env_check(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (*s && *s != '.' && *s != '-' && gp_schema_only(s, GP_ALNUM "_.-"))
		return NULL;
	return gp_schema_why_got(s,
	                         "must be an environment name: letters, digits, '_', '.' "
	                         "and '-', not starting with '.' or '-'");
}

/* "name==version": a PEP 508 name (letters, digits, '.', '_', '-', starting
 * and ending with a letter or digit) pinned exactly; no other operator, no
 * wildcard, extras or markers. */
static char *pin_check(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	const char *eq = strstr(s, "==");
	if (eq && eq > s) {
		_cleanup_free_ char *name = gp_xstrndup(s, (size_t)(eq - s));
		const char *ver = eq + 2;
		size_t nl = strlen(name);
		if (gp_schema_only(name, GP_ALNUM "._-") && strchr(GP_ALNUM, name[0]) &&
		    strchr(GP_ALNUM, name[nl - 1]) && *ver >= '0' && *ver <= '9' &&
		    gp_schema_only(ver, GP_ALNUM ".+!_-"))
			return NULL;
	}
	return gp_schema_why_got(s, "entries must be exact pins \"name==version\", e.g. "
	                            "\"torch==2.1.2\"");
}

/* A conda channel name, with an optional label path
 * ("nvidia/label/cuda-12.4.1"); not a URL. */
static char *channel_check(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	bool ok = strchr(GP_ALNUM, s[0]) && gp_schema_only(s, GP_ALNUM "_.-/") &&
	          !strstr(s, "//") && !gp_str_ends_with(s, "/");
	if (ok && *s)
		return NULL;
	return gp_schema_why_got(
	    s, "entries must be channel names such as \"conda-forge\" or "
	       "\"nvidia/label/cuda-12.4.1\", not URLs");
}

/* A proxy for pip and conda: http:// is normal for a proxy (TLS to the index
 * goes through it with CONNECT), so allow_insecure_http does not apply. */
static char *proxy_url_check(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (!gp_str_starts_with(s, "http://") && !gp_str_starts_with(s, "https://"))
		return gp_schema_why_got(s,
		                         "must be an http:// or https:// proxy URL, e.g. "
		                         "\"http://proxy.lan:3128\"");
	return gp_schema_check_url(v, i);
}

static const struct gp_value_check check_python_version = {
	.check = python_version_check,
	.schema = "{\"pattern\": \"^3(?:\\\\.[0-9]+){1,2}$\"}",
};
static const struct gp_value_check check_conda_env = {
	.check = conda_env_check,
	.schema = "{\"pattern\": \"^[A-Za-z0-9_][A-Za-z0-9_.-]*$\"}",
};
static const struct gp_value_check check_pin = {
	.check = pin_check,
	.schema =
	    "{\"pattern\": "
	    "\"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?==[0-9][A-Za-z0-9.+!_-]*$\"}",
};
static const struct gp_value_check check_channel = {
	.check = channel_check,
	.schema = "{\"pattern\": \"^[A-Za-z0-9][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.-]+)*$\"}",
};
static const struct gp_value_check check_proxy_url = {
	.check = proxy_url_check,
	.schema = "{\"pattern\": "
	          "\"^https?://[^/?#@\\\\s\\\\x00-\\\\x1f\\\\x7f]+(?:[/"
	          "?#][^\\\\s\\\\x00-\\\\x1f\\\\x7f]*)?$\"}",
};

static const char *const methods[] = { "conda", "venv", NULL };
static const char *const installers[] = { "pip", "conda", NULL };

static const struct gp_key pytorch_keys[] = {
	GP_KEY_ENUM_ROW(KEY_METHOD, methods, .doc = "conda environment or Python venv.",
	                .example = "\"conda\""),
	GP_KEY_STRING_ROW(KEY_PREFIX, &gp_check_prefix_dir,
	                  .doc = "conda's install prefix, or the venv's directory.",
	                  .example = "\"/opt/conda\""),
	GP_KEY_STRING_ROW(KEY_ENV, &check_conda_env, .doc = "conda environment name.",
	                  .example = "\"torch\""),
	GP_KEY_STRING_ROW(KEY_PYTHON, &check_python_version,
	                  .doc = "Python version \"3.N\" or \"3.N.M\".",
	                  .example = "\"3.11\""),
	GP_KEY_STRINGS_ROW(KEY_PACKAGES, &check_pin,
	                   .doc = "pip packages, each pinned exactly: \"name==version\".",
	                   .example = "[\"torch==2.1.2\", \"torchvision==0.16.2\"]"),
	GP_KEY_STRING_ROW(KEY_INDEX_URL, &gp_check_url,
	                  .doc = "pip index for the wheels.",
	                  .example = "\"https://download.pytorch.org/whl/cu121\""),
	GP_KEY_STRING_ROW(KEY_INSTALLER_URL, &gp_check_url,
	                  .doc = "The conda installer (Miniforge or Miniconda).",
	                  .example = "\"" MINIFORGE "\""),
	GP_KEY_STRING_ROW(
	    KEY_INSTALLER_SHA256, &gp_check_sha256, .doc = "sha256 of installer_url.",
	    .example = "\"81a5d0d0870ba2022efb0a531dcc60adbdc2bbff7b3ef19d6f"
	               "d6d8105406c775\""),
	GP_KEY_STRINGS_ROW(KEY_CHANNELS, &check_channel,
	                   .doc = "conda channels by name (optionally with a label "
	                          "path), not URLs.",
	                   .example = "[\"conda-forge\"]"),
	GP_KEY_BOOL_ROW(KEY_DEFAULTS_TOS_ACCEPTED,
	                .doc = "The operator accepts the terms of service of Anaconda's "
	                       "defaults channels.",
	                .example = "true"),
	GP_KEY_ENUM_ROW(KEY_INSTALLER, installers,
	                .doc = "How the packages are installed: pip from index_url, or "
	                       "conda from the channels (method conda only).",
	                .default_value = "\"pip\"", .example = "\"pip\""),
	GP_KEY_STRINGS_ROW(KEY_EXTRA_INDEX_URLS, &gp_check_url,
	                   .doc = "More pip indexes searched after index_url (pip's "
	                          "--extra-index-url).",
	                   .example = "[\"https://pypi.org/simple\"]"),
	GP_KEY_STRING_ROW(KEY_CA_BUNDLE, &gp_check_root_file,
	                  .doc = "A PEM CA bundle inside the root that pip (cert) and "
	                         "conda (ssl_verify) verify a private index or channel "
	                         "mirror with.",
	                  .example = "\"/etc/ssl/certs/mirror-ca.pem\""),
	GP_KEY_STRING_ROW(KEY_PROXY, &check_proxy_url,
	                  .doc = "Proxy for pip and conda inside the root: http:// or "
	                         "https://, without credentials.",
	                  .example = "\"http://proxy.lan:3128\""),
	GP_KEY_STRING_ROW(KEY_CHANNEL_ALIAS, &gp_check_url,
	                  .doc = "conda's channel_alias: where channel names resolve (a "
	                         "conda mirror).",
	                  .example = "\"https://conda.mirror.lan\""),
	GP_KEY_END,
};

struct torch {
	const char *method, *installer, *prefix, *env, *python;
	char **pins; /* "name==version" as in the profile */
	char **want; /* the same with the index's local tag where it applies */
	const char *index_url; /* as written */
	char *index; /* after --mirror */
	char **extra; /* extra_index_urls after --mirror */
	const char *installer_url, *installer_sha256;
	char *
	    default_installer; /* the architecture's latest Miniforge, when no installer_url */
	char **channels;
	bool tos;
	const char *ca_bundle, *proxy;
	char *channel_alias; /* after --mirror */
	char *tag; /* the index URL's wheel tag ("cu118", "cpu"), or NULL */
	char *envdir; /* conda: <prefix>/envs/<env>; venv: <prefix> */
	char *python_bin, *conda;
};

static void torch_free(struct torch *t)
{
	gp_strv_free(t->pins);
	gp_strv_free(t->want);
	free(t->index);
	gp_strv_free(t->extra);
	gp_strv_free(t->channels);
	free(t->channel_alias);
	free(t->tag);
	free(t->envdir);
	free(t->python_bin);
	free(t->conda);
	free(t->default_installer);
}

static bool is_conda(const struct torch *t)
{
	return strcmp(t->method, "conda") == 0;
}

static bool pip_installs(const struct torch *t)
{
	return strcmp(t->installer, "pip") == 0;
}

/* Project names compare as PEP 503 normalises them. */
static char *normalize(const char *name, size_t n)
{
	char *s = gp_xstrndup(name, n);
	for (char *p = s; *p; p++)
		*p = *p == '-' || *p == '.'
		         ? '_'
		         : (char)(*p | (*p >= 'A' && *p <= 'Z' ? 0x20 : 0));
	return s;
}

static bool tagged_project(const char *name, size_t n)
{
	_cleanup_free_ char *norm = normalize(name, n);
	return strcmp(norm, "torch") == 0 || strcmp(norm, "torchvision") == 0 ||
	       strcmp(norm, "torchaudio") == 0;
}

/* The last path component of an index URL when it is a PyTorch wheel tag. */
static char *index_tag(const char *url)
{
	char buf[16];
	bool cpu = false;
	if (!url || (!gp_torch_tag_cuda(url, &cpu, buf) && !cpu))
		return NULL;
	size_t len = strlen(url);
	while (len && url[len - 1] == '/')
		len--;
	size_t start = len;
	while (start && url[start - 1] != '/')
		start--;
	return gp_xstrndup(url + start, len - start);
}

static int rewrite_all(struct gp_ctx *c, char **v)
{
	for (size_t i = 0; v && v[i]; i++) {
		char *r;
		if (gp_ctx_rewrite_url(c, v[i], &r) < 0)
			return -1;
		free(v[i]);
		v[i] = r;
	}
	return 0;
}

char *gp_pytorch_envdir(const cJSON *cfg)
{
	bool conda = strcmp(gp_json_string(cfg, KEY_METHOD, "conda"), "conda") == 0;
	const char *prefix = gp_json_string(cfg, KEY_PREFIX,
	                                    conda ? "/opt/conda" : "/opt/venv");
	return conda ? gp_xasprintf("%s/envs/%s", prefix,
	                            gp_json_string(cfg, KEY_ENV, "torch"))
	             : gp_xstrdup(prefix);
}

static int settings(struct gp_ctx *c, const cJSON *cfg, struct torch *t)
{
	*t = (struct torch){ 0 };
	t->method = gp_json_string(cfg, KEY_METHOD, "conda");
	t->installer = gp_json_string(cfg, KEY_INSTALLER, "pip");
	t->prefix = gp_json_string(cfg, KEY_PREFIX,
	                           is_conda(t) ? "/opt/conda" : "/opt/venv");
	t->env = gp_json_string(cfg, KEY_ENV, "torch");
	t->python = gp_json_string(cfg, KEY_PYTHON, NULL);
	t->pins = gp_json_strv(cfg, KEY_PACKAGES);
	if (!t->pins)
		t->pins = gp_xcalloc(1, sizeof(char *));
	t->index_url = gp_json_string(cfg, KEY_INDEX_URL, NULL);
	t->extra = gp_json_strv(cfg, KEY_EXTRA_INDEX_URLS);
	t->installer_url = gp_json_string(cfg, KEY_INSTALLER_URL, NULL);
	if (!t->installer_url)
		t->installer_url = t->default_installer = gp_xasprintf(
		    MINIFORGE_LATEST "Miniforge3-Linux-%s.sh",
		    gp_profile_arch(c->profile));
	t->installer_sha256 = gp_json_string(cfg, KEY_INSTALLER_SHA256, NULL);
	t->channels = gp_json_strv(cfg, KEY_CHANNELS);
	if (!t->channels) {
		t->channels = gp_xcalloc(1, sizeof(char *));
		gp_strv_push(&t->channels, "conda-forge");
	}
	t->tos = cJSON_IsTrue(
	    cJSON_GetObjectItemCaseSensitive(cfg, KEY_DEFAULTS_TOS_ACCEPTED));
	t->ca_bundle = gp_json_string(cfg, KEY_CA_BUNDLE, NULL);
	t->proxy = gp_json_string(cfg, KEY_PROXY, NULL);
	t->tag = pip_installs(t) ? index_tag(t->index_url) : NULL;
	t->want = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; t->pins[i]; i++) {
		const char *p = t->pins[i];
		size_t n = strcspn(p, "=");
		_cleanup_free_ char *w = t->tag && !strchr(p, '+') && tagged_project(p, n)
		                             ? gp_xasprintf("%s+%s", p, t->tag)
		                             : gp_xstrdup(p);
		gp_strv_push(&t->want, w);
	}
	t->envdir = gp_pytorch_envdir(cfg);
	t->python_bin = gp_xasprintf("%s/bin/python", t->envdir);
	t->conda = gp_xasprintf("%s/bin/conda", t->prefix);
	const char *alias = gp_json_string(cfg, KEY_CHANNEL_ALIAS, NULL);
	if ((t->index_url && gp_ctx_rewrite_url(c, t->index_url, &t->index) < 0) ||
	    rewrite_all(c, t->extra) < 0 ||
	    (alias && gp_ctx_rewrite_url(c, alias, &t->channel_alias) < 0)) {
		torch_free(t);
		return -1;
	}
	return 0;
}

/* Anaconda's channels, whose terms of service must be accepted. */
static bool is_defaults_channel(const char *ch)
{
	static const char *const names[] = { "defaults", "main", "r",       "msys2",
		                             "free",     "pro",  "anaconda" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (strcmp(ch, names[i]) == 0)
			return true;
	return gp_str_starts_with(ch, "pkgs/") || gp_str_starts_with(ch, "anaconda/");
}

static const char *first_defaults_channel(const struct torch *t)
{
	for (size_t i = 0; t->channels[i]; i++)
		if (is_defaults_channel(t->channels[i]))
			return t->channels[i];
	return NULL;
}

/* "3.11" wants "3.11.x"; "3.11.2" exactly that. */
static bool python_matches(const char *want, const char *have)
{
	size_t n = strlen(want);
	return have && strncmp(want, have, n) == 0 && (!have[n] || have[n] == '.');
}

/* The distro's python3 version from its /usr/lib/python3.N directory (the
 * one /usr/bin/python3 points to), or NULL. */
static char *distro_python(struct gp_ctx *c)
{
	_cleanup_free_ char *target = NULL;
	if (gp_root_readlink(&c->root, "/usr/bin/python3", &target) < 0)
		return NULL;
	const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
	if (!gp_str_starts_with(base, "python3."))
		return NULL;
	return gp_xstrdup(base + 6);
}

static bool have_ensurepip(struct gp_ctx *c, const char *ver)
{
	_cleanup_free_ char *p = gp_xasprintf("/usr/lib/python%s/ensurepip/__init__.py",
	                                      ver);
	return gp_ctx_exists(c, p);
}

/* The environment's Python version: pyvenv.cfg's "version" (venv) or the
 * conda-meta/python-<version>-<build>.json record (conda); NULL when there
 * is no environment with a python binary. */
static char *env_python(struct gp_ctx *c, const struct torch *t)
{
	if (!gp_ctx_exists(c, t->python_bin))
		return NULL;
	if (!is_conda(t)) {
		_cleanup_free_ char *cfgpath = gp_xasprintf("%s/pyvenv.cfg", t->envdir);
		_cleanup_free_ char *text = NULL;
		if (gp_ctx_read(c, cfgpath, &text, NULL) < 0)
			return NULL;
		_cleanup_strv_ char **lines = gp_strv_split(text, '\n');
		for (size_t i = 0; lines[i]; i++) {
			char key[32], val[64];
			if (sscanf(lines[i], " %31[a-z_] = %63s", key, val) == 2 &&
			    (strcmp(key, "version") == 0 ||
			     strcmp(key, "version_info") == 0))
				return gp_xstrdup(val);
		}
		return NULL;
	}
	_cleanup_free_ char *meta = gp_xasprintf("%s/conda-meta", t->envdir);
	_cleanup_strv_ char **names = NULL;
	if (gp_root_list_dir(&c->root, meta, &names) < 0)
		return NULL;
	for (size_t i = 0; names[i]; i++) {
		const char *n = names[i];
		if (gp_str_starts_with(n, "python-") && n[7] >= '0' && n[7] <= '9' &&
		    gp_str_ends_with(n, ".json"))
			return gp_xstrndup(n + 7, strcspn(n + 7, "-"));
	}
	return NULL;
}

/* <envdir>/lib/python<M.m>/site-packages for a Python version "3.11.2". */
static char *site_packages(const struct torch *t, const char *pyver)
{
	const char *dot = strchr(pyver, '.');
	size_t n = dot ? strcspn(dot + 1, ".") + (size_t)(dot + 1 - pyver)
	               : strlen(pyver);
	return gp_xasprintf("%s/lib/python%.*s/site-packages", t->envdir, (int)n, pyver);
}

/* Installed version of a project, from its dist-info METADATA (pip) or its
 * conda-meta record (conda), or NULL. */
static char *installed_version(struct gp_ctx *c, const struct torch *t, const char *pyver,
                               const char *name, size_t nlen)
{
	_cleanup_free_ char *want = normalize(name, nlen);
	bool conda = !pip_installs(t);
	_cleanup_free_ char *dir = conda ? gp_xasprintf("%s/conda-meta", t->envdir)
	                                 : site_packages(t, pyver);
	_cleanup_strv_ char **names = NULL;
	if (gp_root_list_dir(&c->root, dir, &names) < 0)
		return NULL;
	for (size_t i = 0; names[i]; i++) {
		const char *n = names[i];
		if (!gp_str_ends_with(n, conda ? ".json" : ".dist-info"))
			continue;
		_cleanup_free_ char *path = gp_xasprintf(
		    conda ? "%s/%s" : "%s/%s/METADATA", dir, n);
		_cleanup_free_ char *text = NULL;
		if (conda) {
			if (strncmp(n, name, nlen) != 0 || n[nlen] != '-' ||
			    gp_ctx_read(c, path, &text, NULL) < 0)
				continue;
			char *r = gp_conda_meta_version(text, want);
			if (r)
				return r;
			continue;
		}
		_cleanup_free_ char *norm = normalize(n, strcspn(n, "-"));
		if (strcmp(norm, want) != 0 || gp_ctx_read(c, path, &text, NULL) < 0)
			continue;
		char *r = gp_pip_metadata_version(text);
		if (r)
			return r;
	}
	return NULL;
}

char *gp_conda_meta_version(const char *text, const char *want)
{
	cJSON *doc = cJSON_Parse(text);
	const char *jn = gp_json_string(doc, "name", NULL);
	const char *jv = gp_json_string(doc, "version", NULL);
	_cleanup_free_ char *norm = jn ? normalize(jn, strlen(jn)) : NULL;
	char *r = norm && jv && strcmp(norm, want) == 0 ? gp_xstrdup(jv) : NULL;
	cJSON_Delete(doc);
	return r;
}

char *gp_pip_metadata_version(const char *text)
{
	/* The headers end at the first empty line; the description after it
	 * may hold anything. */
	for (const char *line = text; *line && *line != '\n' && *line != '\r';) {
		if (gp_str_starts_with(line, "Version: "))
			return gp_xstrndup(line + 9, strcspn(line + 9, "\r\n "));
		line += strcspn(line, "\n");
		line += *line == '\n';
	}
	return NULL;
}

bool gp_pip_index_offers(const char *output, const char *version)
{
	static const char label[] = "Available versions: ";
	size_t n = strlen(version);
	for (const char *line = n ? output : NULL; line && *line;) {
		const char *end = line + strcspn(line, "\n");
		if (gp_str_starts_with(line, label))
			for (const char *v = line + strlen(label); v < end;) {
				size_t len = strcspn(v, ",\r\n"); /* stops at end */
				if (len == n && memcmp(v, version, n) == 0)
					return true;
				v += len;
				v += strspn(v, ", ");
				if (*v == '\r')
					break;
			}
		line = *end ? end + 1 : NULL;
	}
	return false;
}

static void append_yaml_quoted(struct gp_buf *b, const char *s)
{
	gp_buf_puts(b, "'");
	for (; *s; s++)
		gp_buf_puts(b, *s == '\'' ? "''" : (char[]){ *s, 0 });
	gp_buf_puts(b, "'");
}

static char *render_condarc(const struct gp_ctx *c, const struct torch *t)
{
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage pytorch) from profile %s; gpuprov",
	                  c->profile->name);
	gp_buf_puts(&b, "# replaces this file, so change the profile instead.\n"
	                "channels:\n");
	for (size_t i = 0; t->channels[i]; i++) {
		gp_buf_puts(&b, "  - ");
		append_yaml_quoted(&b, t->channels[i]);
		gp_buf_puts(&b, "\n");
	}
	if (t->channel_alias) {
		gp_buf_puts(&b, "channel_alias: ");
		append_yaml_quoted(&b, t->channel_alias);
		gp_buf_puts(&b, "\n");
	}
	if (t->ca_bundle) {
		gp_buf_puts(&b, "ssl_verify: ");
		append_yaml_quoted(&b, t->ca_bundle);
		gp_buf_puts(&b, "\n");
	}
	if (t->proxy) {
		gp_buf_puts(&b, "proxy_servers:\n  http: ");
		append_yaml_quoted(&b, t->proxy);
		gp_buf_puts(&b, "\n  https: ");
		append_yaml_quoted(&b, t->proxy);
		gp_buf_puts(&b, "\n");
	}
	gp_buf_puts(&b, "auto_update_conda: false\n");
	return gp_buf_steal(&b);
}

/* The host[:port] of a plain-http URL, for pip's trusted-host (pip ignores
 * an http index elsewhere than on loopback unless it is trusted); NULL for
 * any other scheme: https is verified, never trusted blindly. */
static char *http_host(const char *url)
{
	if (!url || strncmp(url, "http://", 7) != 0)
		return NULL;
	const char *host = url + 7;
	size_t len = strcspn(host, "/?#");
	const char *at = memchr(host, '@', len);
	if (at) {
		len -= (size_t)(at + 1 - host);
		host = at + 1;
	}
	return len ? gp_xstrndup(host, len) : NULL;
}

/* Each http index's host once: pip trusts them only when told (profile
 * validation only lets http through with allow_insecure_http). */
static char **trusted_hosts(const struct torch *t)
{
	char **hosts = gp_xcalloc(1, sizeof(char *));
	_cleanup_free_ char *main_host = http_host(t->index);
	if (main_host)
		gp_strv_push(&hosts, main_host);
	for (size_t i = 0; t->extra && t->extra[i]; i++) {
		_cleanup_free_ char *h = http_host(t->extra[i]);
		if (h && !gp_strv_contains(hosts, h))
			gp_strv_push(&hosts, h);
	}
	return hosts;
}

static void append_trusted_hosts(struct gp_buf *b, const struct torch *t)
{
	_cleanup_strv_ char **hosts = trusted_hosts(t);
	for (size_t i = 0; hosts[i]; i++)
		gp_buf_printf(b, "%s%s\n", i ? "    " : "trusted-host =\n    ", hosts[i]);
}

static char *render_pip_conf(const struct gp_ctx *c, const struct torch *t)
{
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage pytorch) from profile %s; gpuprov",
	                  c->profile->name);
	gp_buf_puts(&b, "# replaces this file, so change the profile instead.\n"
	                "[global]\n");
	if (t->index)
		gp_buf_printf(&b, "index-url = %s\n", t->index);
	for (size_t i = 0; t->extra && t->extra[i]; i++)
		gp_buf_printf(&b, "%s%s\n", i ? "    " : "extra-index-url =\n    ",
		              t->extra[i]);
	append_trusted_hosts(&b, t);
	if (t->ca_bundle)
		gp_buf_printf(&b, "cert = %s\n", t->ca_bundle);
	if (t->proxy)
		gp_buf_printf(&b, "proxy = %s\n", t->proxy);
	gp_buf_puts(&b, "disable-pip-version-check = true\nno-input = true\n");
	return gp_buf_steal(&b);
}

/* What is there, against the profile. */
struct survey {
	bool conda_ok; /* <prefix>/bin/conda (method conda) */
	char *condarc, *condarc_path;
	bool condarc_ok;
	char *pyver; /* the environment's Python, NULL: no environment */
	bool python_ok; /* the profile's Python (and, for a venv, pip) */
	bool has_pip;
	char *pip_conf, *pip_conf_path;
	bool pip_conf_ok;
	char **missing; /* "torch 2.7.0+cu118 -> 2.7.1+cu118", "(none)" when absent */
	char **missing_want; /* the pins to install */
	char **missing_have; /* their installed versions, "" for none */
};

static void survey_free(struct survey *s)
{
	free(s->condarc);
	free(s->condarc_path);
	free(s->pyver);
	free(s->pip_conf);
	free(s->pip_conf_path);
	gp_strv_free(s->missing);
	gp_strv_free(s->missing_want);
	gp_strv_free(s->missing_have);
}

static bool version_is(const char *have, const char *want)
{
	return have && strcmp(have, want) == 0;
}

static void survey(struct gp_ctx *c, const struct torch *t, struct survey *s)
{
	*s = (struct survey){ 0 };
	s->conda_ok = !is_conda(t) || gp_ctx_exists(c, t->conda);
	s->condarc = render_condarc(c, t);
	s->condarc_path = gp_xasprintf("%s/.condarc", t->prefix);
	s->condarc_ok = !is_conda(t) || gp_stage_file_is(c, s->condarc_path, s->condarc);
	s->pyver = env_python(c, t);
	s->python_ok = s->pyver && (!t->python || python_matches(t->python, s->pyver));
	if (s->python_ok && !is_conda(t)) {
		/* A venv whose ensurepip was cut short has no pip: make it again. */
		_cleanup_free_ char *site = site_packages(t, s->pyver);
		_cleanup_free_ char *pip = gp_xasprintf("%s/pip/__init__.py", site);
		s->has_pip = gp_ctx_exists(c, pip);
		s->python_ok = s->has_pip;
	}
	s->pip_conf = render_pip_conf(c, t);
	s->pip_conf_path = gp_xasprintf("%s/pip.conf", t->envdir);
	s->pip_conf_ok = !pip_installs(t) ||
	                 gp_stage_file_is(c, s->pip_conf_path, s->pip_conf);
	s->missing = gp_xcalloc(1, sizeof(char *));
	s->missing_want = gp_xcalloc(1, sizeof(char *));
	s->missing_have = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; t->want[i]; i++) {
		const char *w = t->want[i];
		size_t n = strcspn(w, "=");
		_cleanup_free_ char *have = s->pyver
		                                ? installed_version(c, t, s->pyver, w, n)
		                                : NULL;
		if (version_is(have, w + n + 2))
			continue;
		_cleanup_free_ char *why = gp_xasprintf(
		    "%.*s %s -> %s", (int)n, w, have ? have : "(none)", w + n + 2);
		gp_strv_push(&s->missing, why);
		gp_strv_push(&s->missing_want, w);
		gp_strv_push(&s->missing_have, have ? have : "");
	}
}

static char **argv_new(const char *first);
static char **pip_argv(const struct torch *t, const char *command, const char *sub);
static void push_indexes(char ***argv, const struct torch *t);

/* `python -m pip index versions NAME` against the profile's indexes, as
 * the install's pip.conf will say (the environment's may name others
 * still: an upgrade or a rollback moves the index too), pre-releases
 * included. Read-only: pip only reads the index pages. */
static char **pip_index_argv(const struct torch *t, const char *name)
{
	char **argv = pip_argv(t, "index", "versions");
	gp_strv_push(&argv, "--pre");
	push_indexes(&argv, t);
	_cleanup_strv_ char **hosts = trusted_hosts(t);
	for (size_t i = 0; hosts[i]; i++) {
		gp_strv_push(&argv, "--trusted-host");
		gp_strv_push(&argv, hosts[i]);
	}
	if (t->ca_bundle) {
		gp_strv_push(&argv, "--cert");
		gp_strv_push(&argv, t->ca_bundle);
	}
	if (t->proxy) {
		gp_strv_push(&argv, "--proxy");
		gp_strv_push(&argv, t->proxy);
	}
	gp_strv_push(&argv, name);
	return argv;
}

/* The pins an existing environment is to move to (s->missing_want) that
 * the profile's indexes do not offer, asked of the environment's own pip
 * before anything changes (an upgrade or a rollback to wheels gone from
 * the index would otherwise fail half-way): "name==version (what pip
 * listed or said)", joined; NULL when every one is offered, or when there
 * is no environment with pip yet to ask. Asked in the plan pass only, the
 * one that blocks before any change: the real pass's check after it would
 * ask the index the same again, and its pip install fails on its own (and
 * puts the pins back) should a version vanish in between. */
static char *pins_not_offered(struct gp_ctx *c, const struct torch *t,
                              const struct survey *s)
{
	if (c->mode != GP_MODE_PLAN || !pip_installs(t) || !s->pyver || !s->python_ok ||
	    !t->index)
		return NULL;
	struct gp_buf b = { 0 };
	for (size_t i = 0; s->missing_want[i]; i++) {
		const char *w = s->missing_want[i];
		size_t n = strcspn(w, "=");
		_cleanup_free_ char *name = gp_xstrndup(w, n);
		_cleanup_strv_ char **argv = pip_index_argv(t, name);
		struct gp_run_result res = { 0 };
		int rc = gp_ctx_run_readonly(c, argv, &res);
		if (rc == 0 && gp_run_succeeded(&res) &&
		    gp_pip_index_offers(res.output, w + n + 2)) {
			gp_run_result_free(&res);
			continue;
		}
		_cleanup_free_ char *said =
		    rc < 0 ? gp_xstrdup(strerror(-rc))
		    : gp_run_succeeded(&res)
		        ? gp_output_excerpt(res.output, "Available versions:", 3, 300)
		        : gp_output_excerpt(res.output, "ERROR:", 3, 300);
		gp_buf_printf(&b, "%s%s (pip index versions: %s)", b.len ? ", " : "", w,
		              *said ? said : "it said nothing");
		gp_run_result_free(&res);
	}
	return b.len ? gp_buf_steal(&b) : NULL;
}

/* Why the stage cannot go on, or NULL. */
static char *blocked_reason(struct gp_ctx *c, const struct torch *t,
                            const struct survey *s)
{
	const char *dflt = first_defaults_channel(t);
	if (is_conda(t) && dflt && !t->tos)
		return gp_xasprintf(
		    "stages.pytorch.channels has \"%s\", one of Anaconda's defaults "
		    "channels, whose terms of service must be accepted; gpuprov never "
		    "accepts them silently: set stages.pytorch.defaults_tos_accepted to "
		    "true once your organisation has accepted them, or use "
		    "conda-forge",
		    dflt);
	if (!is_conda(t) && !pip_installs(t))
		return gp_xstrdup("stages.pytorch.installer conda needs method conda; "
		                  "use installer pip with method venv");
	if (is_conda(t) && !t->python)
		return gp_xstrdup("stages.pytorch.python is not set: method conda "
		                  "creates the environment with that Python version");
	if (is_conda(t) && !s->conda_ok && !t->installer_sha256)
		return gp_xasprintf(
		    "stages.pytorch.installer_sha256 is not set: gpuprov downloads "
		    "nothing without a pinned sha256, and the .sha256 file beside the "
		    "installer comes from the same server, so it proves nothing the "
		    "connection does not; pin the value from %s.sha256 (with a "
		    "versioned installer_url: the 'latest' one changes) in the profile",
		    t->installer_url);
	if (pip_installs(t) && t->pins[0] && !t->index_url)
		return gp_xstrdup("stages.pytorch.index_url is not set: pip installs "
		                  "the packages from that index only, e.g. "
		                  "https://download.pytorch.org/whl/cu128");
	if (!is_conda(t) && t->python) {
		_cleanup_free_ char *have = distro_python(c);
		if (have && !python_matches(t->python, have))
			return gp_xasprintf(
			    "stages.pytorch.python is %s, but method venv uses the "
			    "distro's Python, %s (/usr/bin/python3); remove the key or "
			    "use method conda",
			    t->python, have);
	}
	_cleanup_free_ char *absent = pins_not_offered(c, t, s);
	if (absent)
		return gp_xasprintf(
		    "nothing changed: the index (stages.pytorch.index_url %s) does not "
		    "offer %s; pin versions it has, or make an index that still has "
		    "them the profile's",
		    t->index, absent);
	return NULL;
}

static int torch_check(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	struct torch t;
	if (settings(c, cfg, &t) < 0)
		return -1;
	struct survey s;
	survey(c, &t, &s);
	_cleanup_free_ char *blocked = blocked_reason(c, &t, &s);
	struct gp_buf why = { 0 };
	if (!s.conda_ok)
		gp_buf_printf(&why, "; no conda in %s (Miniforge to install)", t.prefix);
	else if (!s.condarc_ok)
		gp_buf_printf(&why, "; %s differs from the profile", s.condarc_path);
	if (!s.pyver)
		gp_buf_printf(&why, "; no environment at %s", t.envdir);
	else if (!s.python_ok && !is_conda(&t) && !s.has_pip)
		gp_buf_printf(&why, "; %s has no pip (an interrupted venv)", t.envdir);
	else if (!s.python_ok)
		gp_buf_printf(&why, "; %s has Python %s, the profile wants %s", t.envdir,
		              s.pyver, t.python);
	if (s.pyver && !s.pip_conf_ok)
		gp_buf_printf(&why, "; %s differs from the profile", s.pip_conf_path);
	if (s.pyver && s.missing[0]) {
		_cleanup_free_ char *list = gp_strv_join(s.missing, ", ");
		gp_buf_printf(&why, "; to install: %s", list);
	}
	if (blocked)
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", blocked);
	else if (why.len)
		gp_check_set(ck, GP_STATE_NEEDED, "%s", why.data + 2);
	else {
		_cleanup_free_ char *list = gp_strv_join(t.want, ", ");
		gp_check_set(ck, GP_STATE_SATISFIED, "%s: Python %s%s%s", t.envdir,
		             s.pyver, *list ? ", " : "", list);
	}
	gp_buf_free(&why);
	survey_free(&s);
	torch_free(&t);
	return 0;
}

/* pip's own words, from its first "ERROR:" line (its errors come last),
 * bounded and without control characters: they go to a terminal. */
#define PIP_QUOTE_LINES 6
#define PIP_QUOTE_BYTES 600

/* After a failed pip run, the pins whose installed version is no longer
 * the one the survey found (their indices in s->missing_want, ending with
 * SIZE_MAX; text: "torch 2.7.1+cu118 -> 2.8.0+cu128, ..."), none when pip
 * changed none. pip resolves and downloads every requirement before it
 * installs any, so a missing version, an unreachable index or a wrong
 * sha256 changes nothing; a failure while it installs puts back only the
 * package it was installing, not those it had finished. */
static size_t *pins_moved(struct gp_ctx *c, const struct torch *t, const struct survey *s,
                          char **text)
{
	_cleanup_free_ char *pyver = env_python(c, t);
	size_t n_want = gp_strv_len(s->missing_want), n_moved = 0;
	size_t *moved = gp_xcalloc(n_want + 1, sizeof *moved);
	struct gp_buf b = { 0 };
	for (size_t i = 0; pyver && s->missing_want[i]; i++) {
		const char *w = s->missing_want[i];
		size_t n = strcspn(w, "=");
		_cleanup_free_ char *now = installed_version(c, t, pyver, w, n);
		if (gp_streq(now ? now : "", s->missing_have[i]))
			continue;
		moved[n_moved++] = i;
		gp_buf_printf(&b, "%s%.*s %s -> %s", b.len ? ", " : "", (int)n, w,
		              *s->missing_have[i] ? s->missing_have[i] : "(none)",
		              now ? now : "(none)");
	}
	moved[n_moved] = SIZE_MAX;
	*text = b.len ? gp_buf_steal(&b) : gp_xstrdup("");
	return moved;
}

static char **argv_new(const char *first);
static char **pip_install_argv(const struct torch *t, bool with_index);

/* After pip failed part-way, the pins it had moved go back to the versions
 * they had, so the environment is the previous working set again, as the
 * driver's package set is after a failed upgrade: the environment's
 * pip.conf as it was before this run (old_conf, when the run changed it:
 * the previous index, trusted hosts, certificate and proxy), then pip
 * install --no-deps NAME==OLD through it, and pip uninstall for a pin that
 * was not installed. 0, or -1 when that failed too (c->err says how). */
static int put_back_pins(struct gp_ctx *c, const struct torch *t, const struct survey *s,
                         const size_t *moved, const char *old_conf)
{
	if (old_conf &&
	    gp_effect_write(c, s->pip_conf_path, old_conf, strlen(old_conf), 0644) < 0)
		return -1;
	_cleanup_strv_ char **install = pip_install_argv(t, false);
	gp_strv_push(&install, "--no-deps");
	_cleanup_strv_ char **uninstall = argv_new(t->python_bin);
	const char *un[] = { "-m", "pip", "uninstall", "-y",
		             "--disable-pip-version-check" };
	for (size_t i = 0; i < ARRAY_SIZE(un); i++)
		gp_strv_push(&uninstall, un[i]);
	size_t base_install = gp_strv_len(install),
	       base_uninstall = gp_strv_len(uninstall);
	for (size_t k = 0; moved[k] != SIZE_MAX; k++) {
		const char *w = s->missing_want[moved[k]];
		const char *had = s->missing_have[moved[k]];
		int n = (int)strcspn(w, "=");
		_cleanup_free_ char *arg = *had ? gp_xasprintf("%.*s==%s", n, w, had)
		                                : gp_xstrndup(w, (size_t)n);
		gp_strv_push(*had ? &install : &uninstall, arg);
	}
	if (gp_strv_len(install) > base_install && gp_effect_run(c, install) < 0)
		return -1;
	if (gp_strv_len(uninstall) > base_uninstall && gp_effect_run(c, uninstall) < 0)
		return -1;
	return 0;
}

/* After a failed pip run: what pip said, what gpuprov put back, and what it
 * most likely means. */
static void pip_hint(struct gp_ctx *c, const struct torch *t, const struct survey *s,
                     char *const argv[], const struct gp_run_result *res,
                     const char *old_conf)
{
	if (!res->output)
		return; /* pip did not run: c->err says why */
	_cleanup_free_ char *cmd = gp_strv_join(argv, " ");
	_cleanup_free_ char *how = gp_run_describe(res, c->cmd_timeout_ms);
	_cleanup_free_ char *said = gp_output_excerpt(
	    res->output, "ERROR:", PIP_QUOTE_LINES, PIP_QUOTE_BYTES);
	_cleanup_free_ char *moved_text = NULL;
	_cleanup_free_ size_t *moved = pins_moved(c, t, s, &moved_text);
	_cleanup_free_ char *back_failed = NULL;
	if (*moved_text && put_back_pins(c, t, s, moved, old_conf) < 0)
		back_failed = gp_xstrdup(c->err->msg);
	_cleanup_free_ char *hint =
	    back_failed ? gp_xasprintf("pip had changed %s before it failed, and putting "
	                               "them back failed too (%s): the environment is "
	                               "half upgraded; fix the cause and run the install "
	                               "again, or 'gpuprov rollback'",
	                               moved_text, back_failed)
	    : *moved_text
	        ? gp_xasprintf("pip had changed %s before it failed (it puts back "
	                       "only the package it was installing); gpuprov put "
	                       "them back, so every pin is as before: fix the "
	                       "cause and run the install again",
	                       moved_text)
	    : strstr(res->output, "Expected sha256")
	        ? gp_xasprintf("a wheel does not match the sha256 the index %s gives "
	                       "for it (a corrupt mirror or a tampered file): pip "
	                       "installed nothing",
	                       t->index)
	        : gp_xasprintf("pip installed nothing: check that the index %s is "
	                       "reachable from the target (stages.pytorch.index_url, "
	                       "proxy, ca_bundle, or --mirror) and has these versions",
	                       t->index);
	gp_fail(c->err, GP_EFAILED,
	        "pytorch: '%s' %s; pip said: %s; %s; full output in %s", cmd, how,
	        *said ? said : "nothing", hint, GP_LOG_FILE);
}

static void push_channels(char ***argv, const struct torch *t)
{
	gp_strv_push(argv, "--override-channels");
	for (size_t i = 0; t->channels[i]; i++) {
		gp_strv_push(argv, "-c");
		gp_strv_push(argv, t->channels[i]);
	}
}

static int run_argv(struct gp_ctx *c, char **argv)
{
	int rc = gp_effect_run(c, argv);
	gp_strv_free(argv);
	return rc;
}

/* run_argv of a command that creates dir (a prefix, an environment): a dir
 * not there yet is journaled first as gpuprov's, so uninstall removes it. */
static int run_argv_creating(struct gp_ctx *c, char **argv, const char *dir)
{
	int rc = gp_effect_run_creating(c, argv, dir);
	gp_strv_free(argv);
	return rc;
}

static char **argv_new(const char *first)
{
	char **v = gp_xcalloc(1, sizeof(char *));
	gp_strv_push(&v, first);
	return v;
}

/* Miniforge in batch mode, then the ToS acceptance the profile declared. */
static int install_conda(struct gp_ctx *c, const struct torch *t, const struct survey *s)
{
	if (!s->conda_ok) {
		const struct gp_fetch_artifact a = { .name = "Miniforge installer",
			                             .url = t->installer_url,
			                             .sha256 = t->installer_sha256 };
		_cleanup_free_ char *cached = NULL;
		if (gp_effect_download(c, &a, &cached) < 0)
			return -1;
		char **argv = argv_new("bash");
		gp_strv_push(&argv, cached);
		gp_strv_push(&argv, "-b");
		/* A killed installer leaves the prefix behind: -u lets it finish. */
		if (gp_root_exists(&c->root, t->prefix))
			gp_strv_push(&argv, "-u");
		gp_strv_push(&argv, "-p");
		gp_strv_push(&argv, t->prefix);
		if (run_argv_creating(c, argv, t->prefix) < 0)
			return -1;
	}
	/* Miniforge writes its own .condarc, unknown to a plan. */
	int rc = s->conda_ok ? gp_effect_write(c, s->condarc_path, s->condarc,
	                                       strlen(s->condarc), 0644)
	                     : gp_effect_write_over(c, s->condarc_path, s->condarc,
	                                            strlen(s->condarc), 0644,
	                                            "the Miniforge installer");
	if (rc < 0)
		return -1;
	if (s->python_ok && !(s->missing[0] && !pip_installs(t)))
		return 0;
	for (size_t i = 0; t->channels[i]; i++) {
		if (!is_defaults_channel(t->channels[i]))
			continue;
		char **argv = argv_new(t->conda);
		gp_strv_push(&argv, "tos");
		gp_strv_push(&argv, "accept");
		gp_strv_push(&argv, "--override-channels");
		gp_strv_push(&argv, "-c");
		gp_strv_push(&argv, t->channels[i]);
		if (run_argv(c, argv) < 0)
			return -1;
	}
	if (s->python_ok)
		return 0;
	char **argv = argv_new(t->conda);
	gp_strv_push(&argv, s->pyver ? "install" : "create");
	gp_strv_push(&argv, "-y");
	gp_strv_push(&argv, "-n");
	gp_strv_push(&argv, t->env);
	push_channels(&argv, t);
	_cleanup_free_ char *py = gp_xasprintf("python=%s", t->python);
	gp_strv_push(&argv, py);
	return run_argv_creating(c, argv, t->envdir);
}

/* A venv from the distro's Python; python3-venv first when ensurepip is
 * missing (Debian and Ubuntu split it out). */
static int install_venv(struct gp_ctx *c, const struct torch *t, const struct survey *s)
{
	if (s->python_ok)
		return 0;
	_cleanup_free_ char *ver = distro_python(c);
	if (!ver || !have_ensurepip(c, ver)) {
		enum gp_pkg_manager pm;
		if (gp_pkg_manager(c, &pm) < 0)
			return -1;
		const struct gp_pkg_want w = { pm == GP_PKG_APT ? "python3-venv"
			                                        : "python3",
			                       NULL };
		if (gp_effect_pkg_install(c, &w, 1) < 0)
			return -1;
	}
	char *const argv[] = { "python3", "-m", "venv", (char *)t->prefix, NULL };
	return gp_effect_run_creating(c, argv, t->prefix);
}

/* python -m pip COMMAND [SUB] with gpuprov's fixed options: no prompts, no
 * version check, nothing cached in the environment's home. */
static char **pip_argv(const struct torch *t, const char *command, const char *sub)
{
	char **argv = argv_new(t->python_bin);
	gp_strv_push(&argv, "-m");
	gp_strv_push(&argv, "pip");
	gp_strv_push(&argv, command);
	if (sub)
		gp_strv_push(&argv, sub);
	const char *fixed[] = { "--no-input", "--disable-pip-version-check",
		                "--no-cache-dir" };
	for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
		gp_strv_push(&argv, fixed[i]);
	return argv;
}

/* The profile's index and extra indexes. */
static void push_indexes(char ***argv, const struct torch *t)
{
	gp_strv_push(argv, "--index-url");
	gp_strv_push(argv, t->index);
	for (size_t i = 0; t->extra && t->extra[i]; i++) {
		gp_strv_push(argv, "--extra-index-url");
		gp_strv_push(argv, t->extra[i]);
	}
}

/* python -m pip install, and with_index the profile's indexes (without,
 * pip goes by the environment's pip.conf). */
static char **pip_install_argv(const struct torch *t, bool with_index)
{
	char **argv = pip_argv(t, "install", NULL);
	if (with_index)
		push_indexes(&argv, t);
	return argv;
}

static int install_packages(struct gp_ctx *c, const struct torch *t,
                            const struct survey *s)
{
	/* What pip.conf said before, for put_back_pins. */
	_cleanup_free_ char *old_conf = NULL;
	size_t old_len = 0;
	if (pip_installs(t) && !s->pip_conf_ok &&
	    (gp_ctx_read(c, s->pip_conf_path, &old_conf, &old_len) < 0 ||
	     strlen(old_conf) != old_len)) {
		free(old_conf);
		old_conf = NULL; /* none, or not text: pip goes by the new one */
	}
	if (pip_installs(t) && gp_effect_write(c, s->pip_conf_path, s->pip_conf,
	                                       strlen(s->pip_conf), 0644) < 0)
		return -1;
	/* A fresh environment has none of them. */
	char *const *todo = s->pyver ? s->missing_want : t->want;
	if (!todo[0])
		return 0;
	char **argv;
	if (pip_installs(t)) {
		argv = pip_install_argv(t, true);
	} else {
		argv = argv_new(t->conda);
		gp_strv_push(&argv, "install");
		gp_strv_push(&argv, "-y");
		gp_strv_push(&argv, "-n");
		gp_strv_push(&argv, t->env);
		push_channels(&argv, t);
	}
	for (size_t i = 0; todo[i]; i++)
		gp_strv_push(&argv, todo[i]);
	struct gp_run_result failed;
	int rc = gp_effect_run_result(c, argv, &failed);
	if (rc < 0 && pip_installs(t))
		pip_hint(c, t, s, argv, &failed, old_conf);
	gp_run_result_free(&failed);
	gp_strv_free(argv);
	return rc;
}

static int torch_apply(struct gp_ctx *c, const cJSON *cfg)
{
	struct torch t;
	if (settings(c, cfg, &t) < 0)
		return -1;
	struct survey s;
	survey(c, &t, &s);
	int rc = is_conda(&t) ? install_conda(c, &t, &s) : install_venv(c, &t, &s);
	if (rc == 0)
		rc = install_packages(c, &t, &s);
	survey_free(&s);
	torch_free(&t);
	return rc;
}

static int torch_prefetch(struct gp_ctx *c, const cJSON *cfg)
{
	struct torch t;
	if (settings(c, cfg, &t) < 0)
		return -1;
	if (is_conda(&t) && t.installer_sha256 && !gp_ctx_exists(c, t.conda)) {
		const struct gp_fetch_artifact a = { .name = "Miniforge installer",
			                             .url = t.installer_url,
			                             .sha256 = t.installer_sha256 };
		gp_prefetch_add(c, &a);
	}
	torch_free(&t);
	return 0;
}

/* --- verify ------------------------------------------------------------- */

/* Prints one marked JSON line; never raises, so the output always parses. */
static const char verify_script[] =
    "import json\n"
    "r = {}\n"
    "try:\n"
    "    import torch\n"
    "except BaseException as e:\n"
    "    print('GPUPROV-TORCH ' + json.dumps({'import_error': '%s: %s' % "
    "(type(e).__name__, e)}))\n"
    "    raise SystemExit(0)\n"
    "r['version'] = str(torch.__version__)\n"
    "r['cuda'] = torch.version.cuda\n"
    "try:\n"
    "    r['cudnn'] = torch.backends.cudnn.version()\n"
    "except Exception:\n"
    "    r['cudnn'] = None\n"
    "r['available'] = bool(torch.cuda.is_available())\n"
    "r['count'] = torch.cuda.device_count() if r['available'] else 0\n"
    "r['names'] = [torch.cuda.get_device_name(i) for i in range(r['count'])]\n"
    "if r['available']:\n"
    "    try:\n"
    "        a = torch.ones(2, 2, device='cuda')\n"
    "        r['matmul'] = float((a @ a).sum().item())\n"
    "    except Exception as e:\n"
    "        r['matmul_error'] = '%s: %s' % (type(e).__name__, e)\n"
    "print('GPUPROV-TORCH ' + json.dumps(r))\n";

#define MARK "GPUPROV-TORCH "

static char *cpu_hint(const struct gp_ctx *c)
{
	_cleanup_free_ char *install = gp_install_hint(c, "pytorch");
	return gp_xasprintf("install CUDA wheels: set stages.pytorch.index_url to a "
	                    "CUDA wheel index such as "
	                    "https://download.pytorch.org/whl/cu128, then %s",
	                    install);
}

/* The wheel's CUDA build against the loaded NVIDIA module. */
static void verify_driver(struct gp_ctx *c, struct gp_report *rep, const char *cuda,
                          const char *source)
{
	_cleanup_free_ char *drv = NULL;
	int rc = gp_nvidia_module_read(&c->root, &drv, NULL);
	const char *floor = gp_cuda_minor_compat_driver(cuda);
	const char *full = gp_cuda_min_driver(cuda);
	_cleanup_free_ char *driver = gp_hint_command(c, "install", "driver");
	_cleanup_free_ char *install = gp_install_hint(c, "pytorch");
	_cleanup_free_ char *no_driver = gp_xasprintf(
	    "install the NVIDIA driver ('%s') and reboot; "
	    "/proc/driver/nvidia/version appears once it is loaded",
	    driver);
	_cleanup_free_ char *too_old = gp_xasprintf(
	    "driver too old for the wheel: upgrade the driver, or set "
	    "stages.pytorch.index_url to a wheel index for an older CUDA (e.g. "
	    "https://download.pytorch.org/whl/cu118) and %s",
	    install);
	if (rc == -ENOENT)
		gp_report_add(
		    rep, "pytorch.wheel_driver", GP_FAIL, "driver for the wheel",
		    no_driver,
		    "no NVIDIA kernel module is loaded; %s is built for CUDA %s", source,
		    cuda);
	else if (rc < 0)
		gp_report_add(rep, "pytorch.wheel_driver", GP_WARN,
		              "driver for the wheel", "check /proc/driver/nvidia/version",
		              "cannot read the loaded driver's version: %s",
		              strerror(-rc));
	else if (!floor)
		gp_report_add(
		    rep, "pytorch.wheel_driver", GP_WARN, "driver for the wheel",
		    "use a CUDA 11, 12 or 13 wheel index",
		    "gpuprov knows no minimum driver for CUDA %s (%s)", cuda, source);
	else if (gp_version_compare(drv, floor) < 0)
		gp_report_add(
		    rep, "pytorch.wheel_driver", GP_FAIL, "driver for the wheel", too_old,
		    "driver %s is older than %s, the least a CUDA %s build (%s) "
		    "needs%s%s",
		    drv, floor, cuda, source, full ? "; full support from " : "",
		    full ? full : "");
	else
		gp_report_add(rep, "pytorch.wheel_driver", GP_PASS,
		              "driver for the wheel", NULL,
		              "driver %s runs the CUDA %s build (%s; needs %s or newer)",
		              drv, cuda, source, floor);
}

/* Findings from the script's JSON. */
static void verify_runtime(struct gp_ctx *c, struct gp_report *rep, const cJSON *r,
                           bool driver_checked)
{
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(r, "import_error");
	_cleanup_free_ char *install = gp_install_hint(c, "pytorch");
	if (cJSON_IsString(err)) {
		_cleanup_free_ char *hint = gp_xasprintf(
		    "the error names the missing module or library: reinstall with "
		    "%s, and check that nothing else in the environment shadows torch",
		    install);
		gp_report_add(rep, "pytorch.import", GP_FAIL, "import torch", hint, "%s",
		              err->valuestring);
		return;
	}
	const char *version = gp_json_string(r, "version", "?");
	const char *cuda = gp_json_string(r, "cuda", NULL);
	gp_report_add(rep, "pytorch.import", GP_PASS, "import torch", NULL, "torch %s",
	              version);
	if (!cuda) {
		_cleanup_free_ char *hint = cpu_hint(c);
		gp_report_add(rep, "pytorch.cuda_build", GP_FAIL, "CUDA build", hint,
		              "torch %s is a CPU-only build (torch.version.cuda is None)",
		              version);
		return;
	}
	gp_report_add(rep, "pytorch.cuda_build", GP_PASS, "CUDA build", NULL,
	              "torch.version.cuda %s", cuda);
	if (!driver_checked) {
		_cleanup_free_ char *src = gp_xasprintf("torch %s", version);
		verify_driver(c, rep, cuda, src);
	}
	const cJSON *cudnn = cJSON_GetObjectItemCaseSensitive(r, "cudnn");
	if (cJSON_IsNumber(cudnn)) {
		int v = cudnn->valueint;
		gp_report_add(rep, "pytorch.cudnn", GP_PASS, "cuDNN", NULL,
		              "%d (%d.%d.%d)", v, v / 10000, v / 100 % 100, v % 100);
	} else {
		_cleanup_free_ char *hint = gp_xasprintf(
		    "the wheel should bundle cuDNN: reinstall with %s", install);
		gp_report_add(rep, "pytorch.cudnn", GP_WARN, "cuDNN", hint,
		              "torch.backends.cudnn.version() gives nothing");
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "available"))) {
		gp_report_add(
		    rep, "pytorch.gpu_visible", GP_FAIL, "GPU visible",
		    "no GPU visible to PyTorch: check that the NVIDIA driver is "
		    "loaded and /dev/nvidia* exist (nvidia-smi), that "
		    "CUDA_VISIBLE_DEVICES does not hide the GPUs, and, in a "
		    "container, that it was started with GPU access",
		    "torch.cuda.is_available() is False");
		return;
	}
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(r, "names");
	struct gp_buf b = { 0 };
	for (const cJSON *n = cJSON_IsArray(names) ? names->child : NULL; n; n = n->next)
		gp_buf_printf(&b, "%s%s", b.len ? ", " : "",
		              cJSON_IsString(n) ? n->valuestring : "?");
	int count = cJSON_GetArraySize(names);
	gp_report_add(rep, "pytorch.gpu_visible", GP_PASS, "GPU visible", NULL,
	              "%d device%s: %s", count, count == 1 ? "" : "s",
	              b.len ? b.data : "none");
	gp_buf_free(&b);
	const cJSON *mm = cJSON_GetObjectItemCaseSensitive(r, "matmul");
	if (cJSON_IsNumber(mm) && mm->valuedouble == 8.0)
		gp_report_add(rep, "pytorch.tensor_op", GP_PASS, "tensor op on the GPU",
		              NULL, "(ones(2,2) @ ones(2,2)).sum() on cuda is 8");
	else
		gp_report_add(
		    rep, "pytorch.tensor_op", GP_FAIL, "tensor op on the GPU",
		    "the GPU is visible but cannot run a kernel: check dmesg for "
		    "Xid errors and that the wheel's CUDA build supports this GPU",
		    "(ones(2,2) @ ones(2,2)).sum() on cuda gave %s",
		    cJSON_IsNumber(mm) ? "a wrong result"
		                       : gp_json_string(r, "matmul_error", "nothing"));
}

static void run_script(struct gp_ctx *c, const struct torch *t, struct gp_report *rep,
                       bool driver_checked)
{
	/* -B: importing must not write bytecode into the target (verify is
	 * read-only; -I ignores PYTHONDONTWRITEBYTECODE). */
	char *const argv[] = { t->python_bin,         "-I", "-B", "-c",
		               (char *)verify_script, NULL };
	struct gp_run_result res = { 0 };
	int rc = gp_ctx_run_readonly(c, argv, &res);
	const char *line = res.output ? strstr(res.output, MARK) : NULL;
	cJSON *doc = NULL;
	if (line) {
		_cleanup_free_ char *json = gp_xstrndup(
		    line + strlen(MARK), strcspn(line + strlen(MARK), "\n"));
		doc = cJSON_Parse(json);
	}
	if (rc < 0 || !gp_run_succeeded(&res) || !doc) {
		_cleanup_free_ char *how = rc < 0
		                               ? gp_xstrdup(strerror(-rc))
		                               : gp_run_describe(&res, c->cmd_timeout_ms);
		_cleanup_free_ char *install = gp_install_hint(c, "pytorch");
		_cleanup_free_ char *hint = gp_xasprintf(
		    "the environment's Python does not run: reinstall with %s", install);
		gp_report_add(rep, "pytorch.import", GP_FAIL, "import torch", hint,
		              "%s -c <check script> in %s: %s%s%.300s", t->python_bin,
		              c->root.dir, how, res.output_len ? ": " : "",
		              res.output ? res.output : "");
	} else
		verify_runtime(c, rep, doc, driver_checked);
	cJSON_Delete(doc);
	gp_run_result_free(&res);
}

static void verify_env(struct gp_ctx *c, const struct torch *t, const struct survey *s,
                       struct gp_report *rep)
{
	_cleanup_free_ char *install = gp_install_hint(c, "pytorch");
	if (s->python_ok)
		gp_report_add(rep, "pytorch.environment", GP_PASS, "environment", NULL,
		              "%s: Python %s", t->envdir, s->pyver);
	else if (!is_conda(t) && !s->has_pip)
		gp_report_add(rep, "pytorch.environment", GP_FAIL, "environment", install,
		              "%s has Python %s but no pip", t->envdir, s->pyver);
	else
		gp_report_add(rep, "pytorch.environment", GP_FAIL, "environment", install,
		              "%s has Python %s; the profile wants %s", t->envdir,
		              s->pyver, t->python ? t->python : "another");
	for (size_t i = 0; t->want[i]; i++) {
		const char *w = t->want[i];
		size_t n = strcspn(w, "=");
		_cleanup_free_ char *have = installed_version(c, t, s->pyver, w, n);
		_cleanup_free_ char *project = gp_xstrndup(w, n);
		_cleanup_free_ char *check = gp_xasprintf("package %s", project);
		if (version_is(have, w + n + 2))
			gp_report_add_subject(rep, "pytorch.package", project, GP_PASS,
			                      check, NULL, "%s", have);
		else
			gp_report_add_subject(rep, "pytorch.package", project, GP_FAIL,
			                      check, install,
			                      "installed: %s; the profile wants %s",
			                      have ? have : "none", w + n + 2);
		if (!version_is(have, w + n + 2) &&
		    gp_drift_stage_applied(c, "pytorch")) {
			_cleanup_free_ char *repair = gp_hint_command(c, "install",
			                                              "pytorch");
			_cleanup_free_ char *hint = gp_xasprintf(
			    "'%s' installs the pinned version again", repair);
			_cleanup_free_ char *what = gp_xasprintf("drift: package %s",
			                                         project);
			gp_report_add_subject(
			    rep, "pytorch.drift_pip_package", project, GP_WARN, what,
			    hint, "%s since gpuprov installed %s in %s",
			    have ? have : "not installed", w + n + 2, t->envdir);
		}
	}
	/* The wheel's local version says which CUDA it is built for. */
	_cleanup_free_ char *tv = installed_version(c, t, s->pyver, "torch", 5);
	const char *local = tv && strchr(tv, '+') ? strchr(tv, '+') + 1 : NULL;
	char buf[16];
	bool cpu = false;
	const char *cuda = local ? gp_torch_tag_cuda(local, &cpu, buf) : NULL;
	if (cpu) {
		_cleanup_free_ char *hint = cpu_hint(c);
		gp_report_add(rep, "pytorch.wheel_cuda_tag", GP_FAIL, "wheel CUDA tag",
		              hint, "torch %s is a CPU-only wheel", tv);
	} else if (cuda) {
		_cleanup_free_ char *src = gp_xasprintf("the torch %s wheel", tv);
		verify_driver(c, rep, cuda, src);
	}
	run_script(c, t, rep, cuda || cpu);
}

static int torch_verify(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep)
{
	struct torch t;
	if (settings(c, cfg, &t) < 0)
		return -1;
	struct survey s;
	survey(c, &t, &s);
	_cleanup_free_ char *install = gp_install_hint(c, "pytorch");
	if (s.pyver)
		verify_env(c, &t, &s, rep);
	else
		gp_report_add(rep, "pytorch.environment", GP_FAIL, "environment", install,
		              "no environment at %s (no %s)", t.envdir, t.python_bin);
	survey_free(&s);
	torch_free(&t);
	return 0;
}

const struct gp_stage gp_stage_pytorch = {
	.name = "pytorch",
	.summary = "conda or venv environment with PyTorch",
	.keys = pytorch_keys,
	.doc = "PyTorch in a conda environment or a venv.",
	.check = torch_check,
	.apply = torch_apply,
	.verify = torch_verify,
	.prefetch = torch_prefetch,
	.pin = &(const struct gp_stage_pin){ .method = "conda",
	                                     .fallback = "conda",
	                                     .key = KEY_INSTALLER_SHA256,
	                                     .what = "the Miniforge installer" },
};
