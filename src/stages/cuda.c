/* Stage cuda: the CUDA toolkit in <path> (default /usr/local/cuda-X.Y).
 * Methods: repo installs cuda-toolkit-X-Y (never the `cuda` meta package,
 * which pulls in a driver) from NVIDIA's repository through the package
 * layer, adding the repository and its pinned key first; runfile downloads
 * the installer (sha256 pinned) and runs it chrooted with --silent --toolkit
 * --toolkitpath=<path>, so its bundled driver is never installed. Several
 * toolkits can coexist; with "link": true /usr/local/cuda points at this one
 * (replaced atomically). With "replace_previous": true (method repo) a
 * version change removes the other toolkits' packages gpuprov's journal says
 * this stage installed (gp_effect_pkg_remove), after the new one and its
 * link; an operator's own toolkit stays, and the plan says so. Without
 * "link": true, gpuprov's own /usr/local/cuda pointing at a toolkit that
 * goes goes with it (it would dangle).
 * check:  version.json / version.txt, CUDA_VERSION in include/cuda.h under
 *         <path> agree with the profile's version; repo: the package is
 *         installed; the /usr/local/cuda link when asked for. Blocked when
 *         the repository or the runfile cannot be fetched as pinned.
 * apply:  repository + package, or runfile; then the link; then the
 *         previous toolkits' packages go (replace_previous).
 * verify: every version source (files, `nvcc --version` run chrooted)
 *         agrees with the profile; the toolkit's minimum driver (cuda_releases.h)
 *         <= the driver (loaded module, else the driver package); the nvcc
 *         first on the PATH the env stage writes is this toolkit's, with
 *         the driver's CUDA (what nvidia-smi shows) and nvcc's told apart. */
#include <ctype.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuprov/cuda_releases.h"
#include "gpuprov/cudatk.h"
#include "gpuprov/drift.h"
#include "gpuprov/journal.h"
#include "gpuprov/json.h"
#include "gpuprov/nvproc.h"
#include "gpuprov/pkg.h"
#include "gpuprov/pkgdb.h"
#include "gpuprov/run.h"
#include "gpuprov/stages.h"
#include "gpuprov/undo.h"
#include "gpuprov/version.h"

#define CUDA_LINK "/usr/local/cuda"

/* --- profile keys (stages.cuda) ------------------------------------------ */

#define KEY_METHOD "method"
#define KEY_VERSION GP_CUDA_KEY_VERSION
#define KEY_PATH GP_CUDA_KEY_PATH
#define KEY_URL "url"
#define KEY_SHA256 "sha256"
#define KEY_LINK "link"
#define KEY_REPLACE "replace_previous"

static char *version_check(const cJSON *v, size_t i)
{
	if (gp_schema_numeric_parts(v->valuestring, 2, 3))
		return NULL;
	return gp_schema_why_got(
	    v->valuestring, "must be a CUDA version \"X.Y\" or \"X.Y.Z\", e.g. \"12.4\"");
}

static const struct gp_value_check check_version = {
	.check = version_check,
	.schema = "{\"pattern\": \"^[0-9]+(?:\\\\.[0-9]+){1,2}$\"}",
};

static const char *const methods[] = { "repo", "runfile", NULL };

static const struct gp_key cuda_keys[] = {
	GP_KEY_ENUM_ROW(KEY_METHOD, methods, .doc = "How the toolkit is installed.",
	                .example = "\"repo\""),
	GP_KEY_STRING_ROW(KEY_VERSION, &check_version,
	                  .doc = "CUDA version \"X.Y\" or \"X.Y.Z\".",
	                  .example = "\"12.4\""),
	GP_KEY_STRING_ROW(KEY_PATH, &gp_check_install_dir,
	                  .doc = "Where the toolkit lives.",
	                  .example = "\"/usr/local/cuda-12.4\""),
	GP_KEY_STRING_ROW(
	    KEY_URL, &gp_check_url, .doc = "The toolkit runfile (method runfile).",
	    .example = "\"https://developer.download.nvidia.com/compute/cuda/"
	               "12.9.1/local_installers/"
	               "cuda_12.9.1_575.57.08_linux.run\""),
	GP_KEY_STRING_ROW(
	    KEY_SHA256, &gp_check_sha256, .doc = "sha256 of url.",
	    .example = "\"0f6d806ddd87230d2adbe8a6006a9d20144fdbda9de2d6acc6"
	               "77daa5d036417a\""),
	GP_KEY_BOOL_ROW(KEY_LINK,
	                .doc = "Point /usr/local/cuda at this toolkit (replaced "
	                       "atomically).",
	                .example = "true"),
	GP_KEY_BOOL_ROW(KEY_REPLACE,
	                .doc = "Method repo: remove the toolkits of other versions "
	                       "gpuprov installed (default false: they stay side "
	                       "by side; an operator's own toolkit always stays).",
	                .example = "true"),
	GP_KEY_END,
};

struct cuda_settings {
	const char *method;
	const char *version; /* "X.Y" or "X.Y.Z" */
	char *xy; /* "X.Y" */
	char *path;
	char *package; /* cuda-toolkit-X-Y */
	bool link;
	bool replace; /* replace_previous */
	char *link_target;
	const char *url, *sha256; /* runfile */
	struct gp_pkg_nvidia_repo nv;
};

static void settings_free(struct cuda_settings *s)
{
	free(s->xy);
	free(s->path);
	free(s->package);
	free(s->link_target);
	gp_pkg_nvidia_repo_free(&s->nv);
}

char *gp_cuda_toolkit_path(const cJSON *cfg)
{
	const char *path = gp_json_string(cfg, KEY_PATH, NULL);
	const char *v = gp_json_string(cfg, KEY_VERSION, NULL);
	if (path)
		return gp_xstrdup(path);
	if (!v)
		return NULL;
	const char *dot = strchr(v, '.');
	int n = dot ? (int)(dot - v) + 1 + (int)strcspn(dot + 1, ".") : (int)strlen(v);
	return gp_xasprintf("/usr/local/cuda-%.*s", n, v);
}

static void settings(struct gp_ctx *c, const cJSON *cfg, struct cuda_settings *s)
{
	*s = (struct cuda_settings){ 0 };
	s->method = gp_json_string(cfg, KEY_METHOD, "repo");
	s->version = gp_json_string(cfg, KEY_VERSION, NULL);
	if (s->version) {
		const char *dot = strchr(s->version, '.');
		size_t n = dot ? (size_t)(dot - s->version) + 1 + strcspn(dot + 1, ".")
		               : strlen(s->version);
		s->xy = gp_xstrndup(s->version, n);
		_cleanup_free_ char *dash = gp_str_replace_char(s->xy, '.', '-');
		s->package = gp_xasprintf("cuda-toolkit-%s", dash);
	}
	s->path = gp_cuda_toolkit_path(cfg);
	s->link = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, KEY_LINK));
	s->replace = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, KEY_REPLACE));
	if (s->path) {
		const char *slash = strrchr(s->path, '/');
		s->link_target = strncmp(s->path, "/usr/local/", 11) == 0 &&
		                         slash == s->path + 10
		                     ? gp_xstrdup(slash + 1)
		                     : gp_xstrdup(s->path);
	}
	s->url = gp_json_string(cfg, KEY_URL, NULL);
	s->sha256 = gp_json_string(cfg, KEY_SHA256, NULL);
	gp_pkg_nvidia_repo(c->profile, &s->nv);
}

static char *blocked_reason(struct gp_ctx *c, const struct cuda_settings *s)
{
	if (!s->version)
		return gp_xstrdup("stages.cuda.version is not set");
	if (strcmp(s->method, "runfile") == 0) {
		if (!s->url)
			return gp_xstrdup("stages.cuda.url (the runfile) is not set");
		if (!s->sha256)
			return gp_xstrdup(
			    "stages.cuda.sha256 is not set: gpuprov downloads "
			    "nothing without a pinned sha256 (NVIDIA "
			    "publishes only MD5 lists for runfiles; the "
			    "sha256 is in its redist manifests)");
		return NULL;
	}
	if (!gp_profile_distro_string(c->profile, "package_manager"))
		return gp_xstrdup("method repo needs distro.package_manager");
	_cleanup_free_ char *have = NULL;
	if (gp_pkg_installed(c, s->package, &have) == 0 && have)
		return NULL; /* installed: no repository needed to check it */
	char *problem = gp_pkg_repo_problem(&s->nv.repo);
	if (!problem)
		return NULL;
	char *r = gp_xasprintf("cannot add NVIDIA's repository: %s", problem);
	free(problem);
	return r;
}

/* Does the toolkit under path say the profile's version? *why when not. */
static bool files_ok(struct gp_ctx *c, const struct cuda_settings *s, char **why)
{
	struct gp_cuda_probe p;
	gp_cuda_probe_files(&c->root, s->path, &p);
	const char *v = p.json ? p.json : p.txt;
	bool ok = false;
	if (!v && !p.header)
		*why = gp_xasprintf("no CUDA toolkit in %s (no version.json, version.txt "
		                    "or include/cuda.h)",
		                    s->path);
	else if (v && !gp_cuda_version_agrees(v, s->version))
		*why = gp_xasprintf("%s/%s says CUDA %s; the profile wants %s", s->path,
		                    p.json ? "version.json" : "version.txt", v,
		                    s->version);
	else if (p.header && !gp_cuda_version_agrees(p.header, s->xy))
		*why = gp_xasprintf("%s/include/cuda.h says CUDA %s; the profile wants "
		                    "%s",
		                    s->path, p.header, s->version);
	else
		ok = true;
	gp_cuda_probe_free(&p);
	return ok;
}

static bool link_ok(struct gp_ctx *c, const struct cuda_settings *s)
{
	_cleanup_free_ char *have = NULL;
	return !s->link || (gp_root_readlink(&c->root, CUDA_LINK, &have) == 0 &&
	                    strcmp(have, s->link_target) == 0);
}

/* --- other toolkits: an upgrade (replace_previous) ------------------------ */

/* Does name end in the "-X-Y" of a toolkit other than dash's (the
 * profile's)? cuda-toolkit-X-Y and the packages it pulls in
 * (cuda-nvcc-X-Y, libcublas-X-Y, ...) all do. */
static bool other_toolkit_package(const char *name, const char *dash)
{
	const char *p = name + strlen(name);
	for (int group = 0; group < 2; group++) {
		const char *digits = p;
		while (digits > name && isdigit((unsigned char)digits[-1]))
			digits--;
		if (digits == p || digits == name || digits[-1] != '-')
			return false;
		p = digits - 1;
	}
	return strcmp(p + 1, dash) != 0;
}

/* Was name installed by this stage, as gpuprov's journal says (recorded
 * by the cuda stage, not there before gpuprov)? */
static bool installed_by_stage(struct gp_ctx *c, const char *name)
{
	const cJSON *rec = gp_journal_package(&c->journal, name);
	return rec && gp_streq(gp_json_string(rec, "stage", NULL), "cuda") &&
	       !gp_json_string(rec, "installed_before", NULL);
}

/* What replace_previous removes: the installed packages of other toolkit
 * versions that this stage installed. Never an operator's own. */
static char **previous_packages(struct gp_ctx *c, const struct cuda_settings *s)
{
	char **out = gp_xcalloc(1, sizeof(char *));
	if (!s->replace || strcmp(s->method, "repo") != 0)
		return out;
	_cleanup_free_ char *dash = gp_str_replace_char(s->xy, '.', '-');
	const cJSON *pkgs = gp_journal_packages(&c->journal);
	for (const cJSON *p = pkgs ? pkgs->child : NULL; p; p = p->next) {
		_cleanup_free_ char *have = NULL;
		if (other_toolkit_package(p->string, dash) &&
		    installed_by_stage(c, p->string) &&
		    gp_pkg_installed(c, p->string, &have) == 0 && have)
			gp_strv_push(&out, p->string);
	}
	gp_strv_sort(out);
	return out;
}

/* gpuprov's own /usr/local/cuda link, which the profile no longer asks for
 * (link not true), pointing at a toolkit whose packages replace_previous
 * removes (gone): left, it would dangle, so it goes with them (as
 * gp_undo_file takes it: the operator's link it replaced made again).
 * *target: where it points (free it). */
static bool link_goes(struct gp_ctx *c, const struct cuda_settings *s, char *const *gone,
                      char **target)
{
	*target = NULL;
	const cJSON *rec = gp_journal_file(&c->journal, CUDA_LINK);
	if (s->link || !gone[0] || !gp_json_string(rec, "link", NULL) ||
	    !gp_streq(gp_json_string(rec, "stage", NULL), "cuda") ||
	    gp_root_readlink(&c->root, CUDA_LINK, target) < 0)
		return false;
	const char *base = strrchr(*target, '/') ? strrchr(*target, '/') + 1 : *target;
	if (gp_str_starts_with(base, "cuda-") && base[5]) {
		_cleanup_free_ char *dash = gp_str_replace_char(base + 5, '.', '-');
		_cleanup_free_ char *suffix = gp_xasprintf("-%s", dash);
		for (size_t i = 0; gone[i]; i++)
			if (gp_str_ends_with(gone[i], suffix))
				return true;
	}
	free(*target);
	*target = NULL;
	return false;
}

/* For the plan: "NAME OLD -> removed" for each of gone, then each other
 * cuda-toolkit-X-Y installed (CUDA 10 to 13) as "NAME VERSION stays" and
 * why. NULL when there is none. */
static char *other_toolkits(struct gp_ctx *c, const struct cuda_settings *s,
                            char *const *gone)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; gone[i]; i++) {
		_cleanup_free_ char *v = NULL;
		gp_pkg_installed(c, gone[i], &v);
		gp_buf_printf(&b, "%s%s %s -> removed", b.len ? ", " : "", gone[i],
		              v ? v : "?");
	}
	_cleanup_free_ char *target = NULL;
	if (link_goes(c, s, gone, &target))
		gp_buf_printf(&b,
		              ", %s -> %s goes with it (gpuprov's link; stages.cuda.link "
		              "is not true)",
		              CUDA_LINK, target);
	for (unsigned major = 10; s->package && major <= 13; major++)
		for (unsigned minor = 0; minor <= 9; minor++) {
			char name[32];
			snprintf(name, sizeof name, "cuda-toolkit-%u-%u", major, minor);
			_cleanup_free_ char *v = NULL;
			if (strcmp(name, s->package) == 0 ||
			    gp_strv_contains(gone, name) ||
			    gp_pkg_installed(c, name, &v) < 0 || !v)
				continue;
			gp_buf_printf(
			    &b, "%s%s %s stays (%s)", b.len ? ", " : "", name, v,
			    installed_by_stage(c, name) ? "side by side: stages.cuda."
			                                  "replace_previous is not true"
			                                : "not installed by gpuprov");
		}
	return b.len ? gp_buf_steal(&b) : NULL;
}

/* replace_previous: the other toolkits' packages go once the new one is
 * in (the package layer releases their holds first); a hold on them
 * passes to the new toolkit's package. */
static int remove_previous(struct gp_ctx *c, const struct cuda_settings *s)
{
	_cleanup_strv_ char **gone = previous_packages(c, s);
	bool held = false;
	for (size_t i = 0; gone[i]; i++)
		held |= gp_pkg_is_held(c, gone[i]);
	if (!gone[0])
		return 0;
	_cleanup_free_ char *target = NULL;
	bool drop_link = link_goes(c, s, gone, &target);
	if (gp_effect_pkg_remove(c, (const char *const *)gone, gp_strv_len(gone)) < 0)
		return -1;
	if (drop_link && gp_undo_file(c, CUDA_LINK) < 0)
		return -1;
	const char *const pkg[] = { s->package };
	return held ? gp_effect_pkg_hold(c, pkg, 1, true) : 0;
}

static int cuda_check(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	struct cuda_settings s;
	settings(c, cfg, &s);
	_cleanup_free_ char *blocked = blocked_reason(c, &s);
	_cleanup_free_ char *why = NULL, *pkg = NULL;
	bool repo = strcmp(s.method, "repo") == 0;
	if (blocked) {
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", blocked);
		settings_free(&s);
		return 0;
	}
	if (repo && gp_pkg_installed(c, s.package, &pkg) < 0) {
		settings_free(&s);
		return -1;
	}
	_cleanup_strv_ char **gone = previous_packages(c, &s);
	_cleanup_free_ char *others = repo ? other_toolkits(c, &s, gone) : NULL;
	if (repo && !pkg)
		gp_check_set(ck, GP_STATE_NEEDED, "%s is not installed%s%s", s.package,
		             others ? "; " : "", others ? others : "");
	else if (!files_ok(c, &s, &why))
		gp_check_set(ck, GP_STATE_NEEDED, "%s", why);
	else if (!link_ok(c, &s))
		gp_check_set(ck, GP_STATE_NEEDED, "%s does not point at %s", CUDA_LINK,
		             s.link_target);
	else if (gone[0])
		gp_check_set(ck, GP_STATE_NEEDED, "CUDA %s in %s; %s", s.version, s.path,
		             others);
	else
		gp_check_set(ck, GP_STATE_SATISFIED, "CUDA %s in %s%s%s%s", s.version,
		             s.path, pkg ? " (" : "", pkg ? s.package : "",
		             pkg ? " installed)" : "");
	settings_free(&s);
	return 0;
}

static int apply_runfile(struct gp_ctx *c, const struct cuda_settings *s)
{
	_cleanup_free_ char *name = gp_xasprintf("CUDA %s runfile", s->version);
	const struct gp_fetch_artifact a = { .name = name,
		                             .url = s->url,
		                             .sha256 = s->sha256 };
	_cleanup_free_ char *cached = NULL;
	if (gp_effect_download(c, &a, &cached) < 0)
		return -1;
	_cleanup_free_ char *tkpath = gp_xasprintf("--toolkitpath=%s", s->path);
	/* --toolkit alone: the installer's driver is never selected. */
	char *const argv[] = { "/bin/sh", cached, "--silent", "--toolkit", tkpath, NULL };
	return gp_effect_run(c, argv);
}

/* Announces the runfile download when apply will run it (the toolkit's
 * files are not there): it starts while earlier stages apply. */
static int cuda_prefetch(struct gp_ctx *c, const cJSON *cfg)
{
	struct cuda_settings s;
	settings(c, cfg, &s);
	_cleanup_free_ char *why = NULL;
	if (strcmp(s.method, "runfile") == 0 && s.url && s.sha256 &&
	    !files_ok(c, &s, &why)) {
		_cleanup_free_ char *name = gp_xasprintf("CUDA %s runfile", s.version);
		const struct gp_fetch_artifact a = { .name = name,
			                             .url = s.url,
			                             .sha256 = s.sha256 };
		gp_prefetch_add(c, &a);
	}
	settings_free(&s);
	return 0;
}

static int cuda_apply(struct gp_ctx *c, const cJSON *cfg)
{
	struct cuda_settings s;
	settings(c, cfg, &s);
	int rc = 0;
	_cleanup_free_ char *why = NULL;
	if (strcmp(s.method, "runfile") == 0) {
		if (!files_ok(c, &s, &why))
			rc = apply_runfile(c, &s);
	} else {
		_cleanup_free_ char *have = NULL;
		rc = gp_pkg_installed(c, s.package, &have);
		if (rc == 0 && (!have || !files_ok(c, &s, &why))) {
			const struct gp_pkg_want w = { .name = s.package };
			rc = gp_effect_pkg_add_repo(c, &s.nv.repo);
			if (rc == 0)
				rc = gp_effect_pkg_install(c, &w, 1);
		}
	}
	if (rc == 0 && s.link)
		rc = gp_effect_symlink(c, s.link_target, CUDA_LINK);
	if (rc == 0)
		rc = remove_previous(c, &s);
	settings_free(&s);
	return rc;
}

/* nvcc's version: runs `<dir>/nvcc --version` chrooted. NULL with *err set
 * when it cannot run or says nothing readable. */
static char *run_nvcc(struct gp_ctx *c, const char *nvcc, char **err)
{
	char *const argv[] = { (char *)nvcc, "--version", NULL };
	struct gp_run_result res = { 0 };
	int rc = gp_ctx_run_readonly(c, argv, &res);
	char *v = NULL;
	if (rc < 0)
		*err = gp_xasprintf("cannot run %s: %s", nvcc, strerror(-rc));
	else if (!gp_run_succeeded(&res)) {
		_cleanup_free_ char *how = gp_run_describe(&res, c->cmd_timeout_ms);
		*err = gp_xasprintf("'%s --version' %s", nvcc, how);
	} else if (!(v = gp_nvcc_version_parse(res.output)))
		*err = gp_xasprintf("'%s --version' printed no 'release X.Y'", nvcc);
	gp_run_result_free(&res);
	return v;
}

/* The installed driver: the loaded module's version, else the driver
 * package's upstream version; *from says which. NULL when none. */
static char *driver_version(struct gp_ctx *c, char **from)
{
	char *v = NULL;
	if (gp_nvidia_module_read(&c->root, &v, NULL) == 0) {
		*from = gp_xstrdup("the loaded kernel module");
		return v;
	}
	_cleanup_strv_ char **set = gp_pkg_nvidia_set(c);
	for (size_t i = 0; set[i]; i++) {
		if (!gp_str_starts_with(set[i], "nvidia-driver") &&
		    !gp_str_starts_with(set[i], "cuda-drivers") &&
		    !gp_str_starts_with(set[i], "nvidia-open"))
			continue;
		_cleanup_free_ char *full = NULL;
		if (gp_pkg_installed(c, set[i], &full) < 0 || !full || !*full)
			continue;
		const char *up = strchr(full, ':') ? strchr(full, ':') + 1 : full;
		*from = gp_xasprintf("package %s %s", set[i], full);
		return gp_xstrndup(up, strcspn(up, "-"));
	}
	return NULL;
}

/* The newest CUDA X.Y the driver supports (what nvidia-smi's banner shows). */
static char *driver_cuda(const char *drv)
{
	for (unsigned major = 13; major >= 11; major--)
		for (int minor = 9; minor >= 0; minor--) {
			char v[16];
			snprintf(v, sizeof v, "%u.%d", major, minor);
			const char *min = gp_cuda_min_driver(v);
			if (min && gp_version_compare(drv, min) >= 0)
				return gp_xstrdup(v);
		}
	return NULL;
}

/* The first executable nvcc in the env stage's PATH, then the system's. */
static char *path_nvcc(struct gp_ctx *c)
{
	const cJSON *env = gp_stage_settings(c, &gp_stage_cuda, "env");
	_cleanup_strv_ char **dirs = env ? gp_json_strv(env, GP_ENV_KEY_PATH) : NULL;
	if (env && !dirs) {
		dirs = gp_xcalloc(1, sizeof(char *));
		_cleanup_free_ char *d = gp_xasprintf(
		    "%s/bin", gp_json_string(env, GP_ENV_KEY_CUDA_HOME, CUDA_LINK));
		gp_strv_push(&dirs, d);
	}
	_cleanup_strv_ char **sys = gp_strv_split(GP_RUN_PATH, ':');
	for (size_t i = 0; sys[i]; i++)
		gp_strv_push(&dirs, sys[i]);
	for (size_t i = 0; dirs && dirs[i]; i++) {
		_cleanup_free_ char *p = gp_xasprintf("%s/nvcc", dirs[i]);
		struct stat st;
		if (gp_root_stat(&c->root, p, &st) == 0 && S_ISREG(st.st_mode) &&
		    (st.st_mode & 0111))
			return TAKE_PTR(p);
	}
	return NULL;
}

/* What the toolkit's nvcc said, kept for the nvcc on the PATH: mostly the
 * same file (through the /usr/local/cuda link), which need not run twice. */
struct nvcc_answer {
	bool ran;
	struct stat st;
	char *version, *err;
};

static void nvcc_answer_free(struct nvcc_answer *a)
{
	free(a->version);
	free(a->err);
	*a = (struct nvcc_answer){ 0 };
}

/* nvcc --version's release for the file nvcc, from a when it is that file. */
static char *nvcc_version(struct gp_ctx *c, const char *nvcc, const struct nvcc_answer *a,
                          char **err)
{
	struct stat st;
	if (a->ran && gp_root_stat(&c->root, nvcc, &st) == 0 &&
	    st.st_dev == a->st.st_dev && st.st_ino == a->st.st_ino) {
		*err = a->err ? gp_xstrdup(a->err) : NULL;
		return a->version ? gp_xstrdup(a->version) : NULL;
	}
	return run_nvcc(c, nvcc, err);
}

static void verify_versions(struct gp_ctx *c, const struct cuda_settings *s,
                            struct gp_report *rep, const char *install,
                            struct nvcc_answer *answer)
{
	struct gp_cuda_probe p;
	gp_cuda_probe_files(&c->root, s->path, &p);
	_cleanup_free_ char *nvcc = gp_xasprintf("%s/bin/nvcc", s->path);
	_cleanup_free_ char *err = NULL;
	p.nvcc = run_nvcc(c, nvcc, &err);
	if (gp_root_stat(&c->root, nvcc, &answer->st) == 0) {
		answer->ran = true;
		answer->version = p.nvcc ? gp_xstrdup(p.nvcc) : NULL;
		answer->err = err ? gp_xstrdup(err) : NULL;
	}
	const char *src[] = { "version.json", "version.txt", "include/cuda.h",
		              "nvcc --version" };
	const char *id[] = { "cuda.version.version_json", "cuda.version.version_txt",
		             "cuda.version.cuda_h", "cuda.version.nvcc" };
	const char *val[] = { p.json, p.txt, p.header, p.nvcc };
	int found = 0;
	for (size_t i = 0; i < ARRAY_SIZE(val); i++) {
		if (!val[i])
			continue;
		found++;
		/* nvcc's third number is a build, cuda.h has none: X.Y only. */
		bool ok = i >= 2 ? gp_cuda_version_agrees(val[i], s->xy)
		                 : gp_cuda_version_agrees(val[i], s->version);
		_cleanup_free_ char *check = gp_xasprintf("version (%s)", src[i]);
		gp_report_add(rep, id[i], ok ? GP_PASS : GP_FAIL, check, install,
		              "%s in %s says %s%s%s", src[i], s->path, val[i],
		              ok ? "" : "; the profile wants ", ok ? "" : s->version);
	}
	if (!p.nvcc)
		gp_report_add(rep, "cuda.nvcc", GP_FAIL, "nvcc", install, "%s", err);
	if (!found)
		gp_report_add(rep, "cuda.toolkit", GP_FAIL, "toolkit", install,
		              "no CUDA toolkit in %s", s->path);
	gp_cuda_probe_free(&p);
}

static void verify_driver(struct gp_ctx *c, const struct cuda_settings *s,
                          struct gp_report *rep, char **drv_cuda)
{
	const char *min = gp_cuda_min_driver(s->version);
	_cleanup_free_ char *from = NULL;
	_cleanup_free_ char *drv = driver_version(c, &from);
	_cleanup_free_ char *driver_hint = gp_install_hint(c, "driver");
	if (drv)
		*drv_cuda = driver_cuda(drv);
	if (!min)
		gp_report_add(rep, "cuda.minimum_driver", GP_WARN, "minimum driver", NULL,
		              "CUDA %s is not in gpuprov's table of minimum drivers",
		              s->version);
	else if (!drv)
		gp_report_add(rep, "cuda.minimum_driver", GP_WARN, "minimum driver",
		              driver_hint,
		              "no NVIDIA driver found (no loaded module, no driver "
		              "package); CUDA %s needs >= %s",
		              s->version, min);
	else if (gp_version_compare(drv, min) < 0)
		gp_report_add(rep, "cuda.minimum_driver", GP_FAIL, "minimum driver",
		              "install driver >= the minimum, or a CUDA the driver "
		              "supports",
		              "CUDA %s needs driver >= %s; the driver is %s (%s), which "
		              "supports CUDA up to %s",
		              s->version, min, drv, from, *drv_cuda ? *drv_cuda : "?");
	else
		gp_report_add(rep, "cuda.minimum_driver", GP_PASS, "minimum driver", NULL,
		              "CUDA %s needs driver >= %s; the driver is %s (%s)",
		              s->version, min, drv, from);
}

/* The nvcc users get: the first on the PATH the env stage writes. */
static void verify_path(struct gp_ctx *c, const struct cuda_settings *s,
                        struct gp_report *rep, const char *drv_cuda,
                        const struct nvcc_answer *answer)
{
	_cleanup_free_ char *nvcc = path_nvcc(c);
	_cleanup_free_ char *err = NULL;
	_cleanup_free_ char *mine = gp_xasprintf("%s/bin/nvcc", s->path);
	_cleanup_free_ char *v = nvcc ? nvcc_version(c, nvcc, answer, &err) : NULL;
	_cleanup_free_ char *smi = drv_cuda
	                               ? gp_xasprintf("; the driver supports CUDA up to "
	                                              "%s (the \"CUDA Version\" "
	                                              "nvidia-smi shows: the driver's, "
	                                              "not the toolkit's)",
	                                              drv_cuda)
	                               : gp_xstrdup("");
	_cleanup_free_ char *env = gp_install_hint(c, "env");
	_cleanup_free_ char *hint = gp_xasprintf(
	    "set stages.env.cuda_home (or path) to this toolkit and %s", env);
	if (!nvcc)
		gp_report_add(rep, "cuda.nvcc_on_path", GP_WARN, "nvcc on PATH", hint,
		              "no nvcc on the PATH the env stage writes%s", smi);
	else if (!v)
		gp_report_add(rep, "cuda.nvcc_on_path", GP_FAIL, "nvcc on PATH", hint,
		              "%s", err);
	else if (!gp_cuda_version_agrees(v, s->xy))
		gp_report_add(rep, "cuda.nvcc_on_path", GP_FAIL, "nvcc on PATH", hint,
		              "nvcc on the PATH is %s and says CUDA %s (the toolkit "
		              "users compile with); the profile's toolkit is CUDA %s at "
		              "%s%s",
		              nvcc, v, s->version, mine, smi);
	else
		gp_report_add(rep, "cuda.nvcc_on_path", GP_PASS, "nvcc on PATH", NULL,
		              "nvcc on the PATH is %s, CUDA %s (the toolkit)%s", nvcc, v,
		              smi);
}

static int cuda_verify(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep)
{
	struct cuda_settings s;
	settings(c, cfg, &s);
	if (!s.version) {
		gp_report_add(rep, "cuda.version", GP_FAIL, "version",
		              "set stages.cuda.version",
		              "stages.cuda.version is not set");
		settings_free(&s);
		return 0;
	}
	_cleanup_free_ char *install = gp_install_hint(c, "cuda");
	if (strcmp(s.method, "repo") == 0) {
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, s.package, &have) < 0) {
			settings_free(&s);
			return -1;
		}
		gp_report_add(rep, "cuda.package", have ? GP_PASS : GP_FAIL, "package",
		              install, "%s %s", s.package,
		              have ? have : "is not installed");
		_cleanup_free_ char *meta = NULL;
		if (gp_pkg_installed(c, "cuda", &meta) == 0 && meta)
			gp_report_add(rep, "cuda.meta_package", GP_WARN, "meta package",
			              "remove the 'cuda' package; gpuprov installs "
			              "cuda-toolkit-X-Y only",
			              "the 'cuda' meta package %s is installed: it pulls "
			              "in a driver of its own",
			              meta);
	}
	struct nvcc_answer answer = { 0 };
	verify_versions(c, &s, rep, install, &answer);
	if (s.link) {
		_cleanup_free_ char *have = NULL;
		bool ok = link_ok(c, &s);
		gp_root_readlink(&c->root, CUDA_LINK, &have);
		gp_report_add(rep, "cuda.link", ok ? GP_PASS : GP_FAIL, "link", install,
		              "%s -> %s%s%s", CUDA_LINK, have ? have : "(missing)",
		              ok ? "" : "; the profile wants ", ok ? "" : s.link_target);
		if (!ok && gp_drift_stage_applied(c, "cuda")) {
			_cleanup_free_ char *repair = gp_hint_command(c, "install",
			                                              "cuda");
			_cleanup_free_ char *hint = gp_xasprintf("'%s' points it back",
			                                         repair);
			gp_report_add(rep, "cuda.drift_cuda_link", GP_FAIL,
			              "drift: CUDA link", hint,
			              "%s -> %s since gpuprov made it -> %s", CUDA_LINK,
			              have ? have : "(missing)", s.link_target);
		}
	}
	_cleanup_free_ char *drv_cuda = NULL;
	verify_driver(c, &s, rep, &drv_cuda);
	verify_path(c, &s, rep, drv_cuda, &answer);
	nvcc_answer_free(&answer);
	settings_free(&s);
	return 0;
}

static bool cuda_uses_nvidia_repo(const struct gp_profile *p, const cJSON *cfg)
{
	return gp_streq(gp_json_string(cfg, KEY_METHOD, "repo"), "repo");
}

const struct gp_stage gp_stage_cuda = {
	.name = "cuda",
	.summary = "CUDA toolkit",
	.keys = cuda_keys,
	.doc = "The CUDA toolkit.",
	.reads = (const char *const[]){ "env", NULL },
	.check = cuda_check,
	.apply = cuda_apply,
	.verify = cuda_verify,
	.prefetch = cuda_prefetch,
	.pin = &(const struct gp_stage_pin){ .method = "runfile",
	                                     .fallback = "repo",
	                                     .key = KEY_SHA256,
	                                     .what = "the CUDA runfile" },
	.uses_nvidia_repo = cuda_uses_nvidia_repo,
};
