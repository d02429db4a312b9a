/* Stage cudnn: cuDNN headers and libraries from NVIDIA's redist tarball
 * (method tarball, below), or from NVIDIA's repository (method apt,
 * cudnn_apt.c).
 * Method tarball:
 * Layout: the tarball (top folder stripped) is extracted as a whole into
 * <base>/cudnn-<version>, where <base> is stages.cudnn.path, else
 * stages.cuda.path; the archive layer stages it and renames it into place
 * only after the sha256 matched. Then <base>/include/cudnn*.h and
 * <base>/lib64/libcudnn* become relative symlinks into that directory (other
 * names the archive holds stay inside it; a link that would replace a file
 * gpuprov did not link there is refused, naming it),
 * /etc/ld.so.conf.d/gpuprov-cudnn.conf lists <base>/lib64, and ldconfig runs
 * chrooted. The links are one rule effect in the plan and the run alike (the
 * archive's names are known once it is extracted). A version change
 * extracts a new directory, removes (gp_effect_remove) the links into
 * another cudnn-* directory (all of them, so the plan lists each), links
 * the new version, then removes the old cudnn-<version> directories gpuprov
 * installed (gp_effect_remove_tree, which refuses a tree holding a file
 * gpuprov did not install); nothing of the CUDA tree itself is overwritten
 * by the archive.
 * check:  cudnn_version.h under <base>/include has the profile's version
 *         (MAJOR.MINOR.PATCHLEVEL), every file gpuprov recorded under
 *         <base>/cudnn-<version> is unchanged (hashed only when its size,
 *         mtime, ctime or inode differ from those recorded), every entry of
 *         its include/ and lib/ with a cuDNN name has its link, no link
 *         points into another cudnn-* directory, no other cudnn-* directory
 *         gpuprov installed is left, ldconfig ran for this version, and
 *         what verify looks at: the ld.so.conf.d file as apply writes it and
 *         every soname in the linker cache (/etc/ld.so.cache, or
 *         `ldconfig -p` where that cannot be read).
 * apply:  download (sha256 pinned by the profile; see below) and extract in
 *         one pass (extracted while it downloads, renamed into place after
 *         the sha256 matched), symlinks, ld.so.conf.d file, ldconfig. The
 *         prefetch hook announces the tarball, so it downloads while earlier
 *         stages apply.
 * verify: every recorded file hashes to its sha256, headers present, every
 *         libcudnn*.so.<major> soname present and in the root's linker cache
 *         (gp_ctx_linker_cache), version equal to the profile's, CUDA major
 *         equal to the installed toolkit's (skipped while cuDNN is absent).
 *
 * sha256: gpuprov downloads nothing without a pinned sha256. NVIDIA's
 * redistrib_<A.B.C>.json manifest has no pinned hash of its own, so a hash
 * read from it would be only as good as the connection; rather than relax
 * that rule the stage is blocked until the profile pins stages.cudnn.sha256
 * (the value is in that manifest). */
#include <string.h>
#include <sys/stat.h>

#include "gpuprov/arch.h"
#include "gpuprov/archive.h"
#include "gpuprov/cudatk.h"
#include "gpuprov/json.h"
#include "gpuprov/ldcache.h"
#include "gpuprov/nvdriver.h"
#include "gpuprov/pkg.h"
#include "gpuprov/pkgdb.h"
#include "gpuprov/run.h"
#include "gpuprov/stages.h"

#include "cudnn.h"

#define REDIST "https://developer.download.nvidia.com/compute/cudnn/redist/cudnn/"
#define LD_CONF "/etc/ld.so.conf.d/gpuprov-cudnn.conf"
#define MARK_LDCONFIG "ldconfig_ran_for"

/* --- profile keys (stages.cudnn) ----------------------------------------- */

#define KEY_METHOD "method"
#define KEY_VERSION "version"
#define KEY_CUDA "cuda"
#define KEY_URL "url"
#define KEY_SHA256 "sha256"
#define KEY_PATH "path"

static char *version_check(const cJSON *v, size_t i)
{
	if (gp_schema_numeric_parts(v->valuestring, 3, 4))
		return NULL;
	return gp_schema_why_got(v->valuestring,
	                         "must be a cuDNN version: 3 or 4 numbers "
	                         "separated by dots, e.g. \"8.9.7.29\"");
}

static const struct gp_value_check check_version = {
	.check = version_check,
	.schema = "{\"pattern\": \"^[0-9]+(?:\\\\.[0-9]+){2,3}$\"}",
};

static const char *const methods[] = { "tarball", "apt", NULL };
static const char *const cuda_majors[] = { "11", "12", "13", NULL };

static const struct gp_key cudnn_keys[] = {
	GP_KEY_ENUM_ROW(KEY_METHOD, methods, .doc = "How cuDNN is installed.",
	                .example = "\"tarball\""),
	GP_KEY_STRING_ROW(KEY_VERSION, &check_version,
	                  .doc = "cuDNN version: 3 or 4 dot-separated numbers.",
	                  .example = "\"8.9.7.29\""),
	GP_KEY_ENUM_ROW(KEY_CUDA, cuda_majors,
	                .doc = "The CUDA major version the build is for.",
	                .example = "\"12\""),
	GP_KEY_STRING_ROW(
	    KEY_URL, &gp_check_url, .doc = "The tarball (method tarball).",
	    .example = "\"https://developer.download.nvidia.com/compute/cudnn/"
	               "redist/cudnn/linux-x86_64/"
	               "cudnn-linux-x86_64-8.9.7.29_cuda12-archive.tar.xz\""),
	GP_KEY_STRING_ROW(
	    KEY_SHA256, &gp_check_sha256, .doc = "sha256 of url.",
	    .example = "\"475333625c7e42a7af3ca0b2f7506a106e30c93b1aa0081cd9"
	               "c13efb6e21e3bb\""),
	GP_KEY_STRING_ROW(KEY_PATH, &gp_check_install_dir,
	                  .doc = "Where the tarball is unpacked.",
	                  .example = "\"/opt/cudnn-8.9.7.29\""),
	GP_KEY_END,
};

static void settings_free(struct cudnn_settings *s)
{
	free(s->version3);
	free(s->cuda_major);
	free(s->url);
	free(s->dir);
	free(s->pkgs[0]);
	free(s->pkgs[1]);
	gp_pkg_nvidia_repo_free(&s->nv);
}

/* A.B.C of a version A.B.C[.D...]. */
char *cudnn_first3(const char *v)
{
	const char *p = v;
	for (int dots = 0; *p && !(*p == '.' && ++dots == 3); p++)
		;
	return gp_xstrndup(v, (size_t)(p - v));
}

static void settings(struct gp_ctx *c, const cJSON *cfg, struct cudnn_settings *s)
{
	*s = (struct cudnn_settings){ 0 };
	const cJSON *cuda = gp_stage_settings(c, &gp_stage_cudnn, "cuda");
	s->method = gp_json_string(cfg, KEY_METHOD, "tarball");
	s->version = gp_json_string(cfg, KEY_VERSION, NULL);
	if (s->version)
		s->version3 = cudnn_first3(s->version);
	const char *major = gp_json_string(cfg, KEY_CUDA, NULL);
	const char *cv = gp_json_string(cuda, GP_CUDA_KEY_VERSION, NULL);
	if (major)
		s->cuda_major = gp_xstrdup(major);
	else if (cv)
		s->cuda_major = gp_xstrndup(cv, strcspn(cv, "."));
	const char *url = gp_json_string(cfg, KEY_URL, NULL);
	/* linux-x86_64 or linux-sbsa (arm64 servers). */
	const char *dir = gp_arch_nvidia_dir(gp_profile_arch(c->profile));
	if (url)
		s->url = gp_xstrdup(url);
	else if (s->version && s->cuda_major)
		s->url = gp_xasprintf(REDIST
		                      "linux-%s/cudnn-linux-%s-%s_cuda%s-archive.tar.xz",
		                      dir, dir, s->version, s->cuda_major);
	s->sha256 = gp_json_string(cfg, KEY_SHA256, NULL);
	s->base = gp_json_string(cfg, KEY_PATH, NULL);
	if (!s->base) {
		s->base = gp_json_string(cuda, GP_CUDA_KEY_PATH, NULL);
		s->base_from_cuda = true;
	}
	if (s->base && s->version)
		s->dir = gp_xasprintf("%s/cudnn-%s", s->base, s->version);
	if (strcmp(s->method, "apt") == 0)
		cudnn_apt_settings(c, s);
}

/* MAJOR.MINOR.PATCHLEVEL from a cudnn_version.h, or NULL. */
char *cudnn_header_version(struct gp_ctx *c, const char *path)
{
	_cleanup_free_ char *text = NULL;
	if (gp_ctx_read(c, path, &text, NULL) < 0)
		return NULL;
	return gp_cudnn_header_parse(text);
}

/* Why a blocked stage cannot go on, or NULL. */
static char *blocked_reason(struct gp_ctx *c, const struct cudnn_settings *s)
{
	if (s->apt)
		return cudnn_apt_blocked_reason(c, s);
	if (!s->version)
		return gp_xstrdup("stages.cudnn.version is not set");
	if (!s->url)
		return gp_xstrdup("no URL: set stages.cudnn.url, or stages.cudnn.cuda "
		                  "to derive NVIDIA's");
	if (!s->sha256)
		return gp_xasprintf(
		    "stages.cudnn.sha256 is not set: gpuprov downloads nothing without a "
		    "pinned sha256, and NVIDIA's redistrib_%s.json manifest has no "
		    "pinned "
		    "hash of its own; pin the tarball's sha256 (from that manifest) in "
		    "the profile",
		    s->version3);
	if (!s->base)
		return gp_xstrdup("no destination: set stages.cudnn.path or "
		                  "stages.cuda.path");
	/* A toolkit the cuda stage installs earlier in this run will be there. */
	if (s->base_from_cuda && !gp_ctx_exists(c, s->base) &&
	    !gp_plan_stage_needed(c->plan, "cuda")) {
		_cleanup_free_ char *cuda = gp_hint_command(c, "install", "cuda");
		return gp_xasprintf("the CUDA toolkit directory %s does not exist; "
		                    "install CUDA first ('%s') or set "
		                    "stages.cudnn.path",
		                    s->base, cuda);
	}
	return NULL;
}

/* Files the journal records for this stage under dir: each present and
 * unchanged? Only those whose size, times or inode changed are hashed,
 * unless deep (verify). *n counts them, *hashed those read; *bad names the
 * first that is not intact. */
static bool recorded_files_ok(struct gp_ctx *c, const char *dir, bool deep, size_t *n,
                              size_t *hashed, char **bad)
{
	*n = *hashed = 0;
	*bad = NULL;
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(c->journal.doc, "files");
	size_t len = strlen(dir);
	/* The journal records a tree's files directory by directory. */
	struct gp_root_dir d = GP_ROOT_DIR_INIT;
	for (const cJSON *f = files ? files->child : NULL; f; f = f->next) {
		if (!gp_streq(gp_json_string(f, "stage", NULL), "cudnn") ||
		    !gp_json_string(f, "sha256", NULL) ||
		    strncmp(f->string, dir, len) != 0 || f->string[len] != '/')
			continue;
		(*n)++;
		bool read = false;
		struct stat st;
		bool ok = gp_root_lstat_in(&c->root, &d, f->string, &st) == 0 &&
		          gp_ctx_recorded_stat_intact(c, &d, f->string, &st, deep, &read);
		*hashed += read;
		if (!ok) {
			*bad = gp_xstrdup(f->string);
			break;
		}
	}
	gp_root_dir_close(&d);
	return !*bad;
}

/* The links of <base>/<to> (hundreds of them), read in one pass: names
 * and targets; none when the directory cannot be listed. */
struct links {
	char *dir;
	char **names;
	char **targets;
};

static void links_read(struct gp_ctx *c, const struct cudnn_settings *s, const char *to,
                       struct links *l)
{
	*l = (struct links){ .dir = gp_xasprintf("%s/%s", s->base, to) };
	if (gp_root_list_links(&c->root, l->dir, &l->names, &l->targets) < 0) {
		l->names = gp_xcalloc(1, sizeof(char *));
		l->targets = gp_xcalloc(1, sizeof(char *));
	}
}

static void links_free(struct links *l)
{
	free(l->dir);
	gp_strv_free(l->names);
	gp_strv_free(l->targets);
	*l = (struct links){ 0 };
}

/* Of the links l, those into a cudnn-* directory other than this
 * version's go to *stale. */
static void stale_links(const struct cudnn_settings *s, const struct links *l,
                        char ***stale)
{
	_cleanup_free_ char *mine = gp_xasprintf("../cudnn-%s/", s->version);
	for (size_t i = 0; l->names[i]; i++) {
		if (strncmp(l->targets[i], "../cudnn-", 9) != 0 ||
		    strncmp(l->targets[i], mine, strlen(mine)) == 0)
			continue;
		_cleanup_free_ char *path = gp_xasprintf("%s/%s", l->dir, l->names[i]);
		gp_strv_push(stale, path);
	}
}

/* Does the journal record a file of this stage under dir? */
static bool recorded_under(struct gp_ctx *c, const char *dir)
{
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(c->journal.doc, "files");
	size_t len = strlen(dir);
	for (const cJSON *f = files ? files->child : NULL; f; f = f->next)
		if (gp_streq(gp_json_string(f, "stage", NULL), "cudnn") &&
		    gp_json_string(f, "sha256", NULL) &&
		    strncmp(f->string, dir, len) == 0 && f->string[len] == '/')
			return true;
	return false;
}

/* The <base>/cudnn-<other version> directories gpuprov installed (the
 * journal records files in them): a version change removes them. */
static char **old_dirs(struct gp_ctx *c, const struct cudnn_settings *s)
{
	char **old = gp_xcalloc(1, sizeof(char *));
	_cleanup_free_ char *mine = gp_xasprintf("cudnn-%s", s->version);
	_cleanup_strv_ char **names = NULL;
	if (gp_root_list_dir(&c->root, s->base, &names) < 0)
		return old;
	for (size_t i = 0; names[i]; i++) {
		_cleanup_free_ char *path = gp_xasprintf("%s/%s", s->base, names[i]);
		struct stat st;
		if (strncmp(names[i], "cudnn-", 6) != 0 || strcmp(names[i], mine) == 0 ||
		    gp_root_lstat(&c->root, path, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    !recorded_under(c, path))
			continue;
		gp_strv_push(&old, path);
	}
	return old;
}

/* Only cuDNN's own names (cudnn*.h, libcudnn*) are linked into the
 * toolkit's include/ and lib64/: any other file an archive holds (a cuda.h,
 * a libcudart) stays inside cudnn-<version>, where it shadows nothing. */
static bool cudnn_name(const char *from, const char *name)
{
	if (strcmp(from, "include") == 0)
		return gp_str_starts_with(name, "cudnn") && gp_str_ends_with(name, ".h");
	return gp_str_starts_with(name, "libcudnn");
}

/* Is path a link gpuprov made (into a cudnn-* directory)? */
static bool our_link(struct gp_ctx *c, const char *path)
{
	_cleanup_free_ char *target = NULL;
	return gp_root_readlink(&c->root, path, &target) == 0 &&
	       strncmp(target, "../cudnn-", 9) == 0;
}

/* Every entry of <dir>/<from> has its link among l (<base>/<to>/<name>)?
 * *bad names the first that has not. */
static bool links_ok(struct gp_ctx *c, const struct cudnn_settings *s, const char *from,
                     const struct links *l, char **bad)
{
	_cleanup_free_ char *src = gp_xasprintf("%s/%s", s->dir, from);
	_cleanup_strv_ char **names = NULL;
	if (gp_root_list_dir(&c->root, src, &names) < 0)
		return true;
	for (size_t i = 0; names[i]; i++) {
		if (!cudnn_name(from, names[i]))
			continue;
		_cleanup_free_ char *want = gp_xasprintf("../cudnn-%s/%s/%s", s->version,
		                                         from, names[i]);
		const char *have = gp_root_link_lookup(l->names, l->targets, names[i]);
		if (!have || strcmp(have, want) != 0) {
			*bad = gp_xasprintf("%s/%s", l->dir, names[i]);
			return false;
		}
	}
	return true;
}

/* "; the old <dirs> go" for a check reason, or "". */
static char *old_dirs_note(char *const *old)
{
	if (!old || !old[0])
		return gp_xstrdup("");
	_cleanup_free_ char *list = gp_strv_join(old, ", ");
	return gp_xasprintf("; the old %s %s", list, old[1] ? "go" : "goes");
}

/* The root's linker cache, "NAME\tPATH" pairs borrowed from c until the
 * next effect; NULL with *error. */
static char *const *linker_cache(struct gp_ctx *c, char **error)
{
	char *const *pairs;
	return gp_ctx_linker_cache(c, &pairs, error) < 0 ? NULL : pairs;
}

/* Is name a libcudnn*.so.<major> soname? */
static bool cudnn_soname(const char *name, long major)
{
	char suffix[32];
	snprintf(suffix, sizeof suffix, ".so.%ld", major);
	return gp_str_starts_with(name, "libcudnn") && strlen(name) > strlen(suffix) &&
	       gp_str_ends_with(name, suffix);
}

/* What the ld.so.conf.d file says: the toolkit's lib64, where the links are. */
static char *ld_conf_text(const struct gp_ctx *c, const struct cudnn_settings *s)
{
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage cudnn) from profile %s.", c->profile->name);
	gp_buf_printf(&b, "%s/lib64\n", s->base);
	return gp_buf_steal(&b);
}

/* What verify looks at, for check: the ld.so.conf.d file as apply writes it,
 * and every soname of the extracted library directory in the linker cache;
 * else NEEDED, so that apply rewrites the file and reruns ldconfig. Where
 * the cache cannot be read at all (neither /etc/ld.so.cache nor
 * `ldconfig -p`) the journal's mark that ldconfig ran is all there is to
 * go by. */
static void check_linker(struct gp_ctx *c, const struct cudnn_settings *s,
                         struct gp_check *ck)
{
	_cleanup_free_ char *want = ld_conf_text(c, s);
	_cleanup_free_ char *have = NULL;
	if (gp_ctx_read(c, LD_CONF, &have, NULL) < 0 || strcmp(have, want) != 0) {
		gp_check_set(ck, GP_STATE_NEEDED, "%s is missing or changed", LD_CONF);
		return;
	}
	_cleanup_free_ char *err = NULL;
	char *const *cache = linker_cache(c, &err);
	if (!cache) {
		gp_log(c, "cannot read the linker cache: %s", err);
		return;
	}
	_cleanup_free_ char *libdir = gp_xasprintf("%s/lib", s->dir);
	_cleanup_strv_ char **names = NULL;
	if (gp_root_list_dir(&c->root, libdir, &names) < 0)
		return;
	long major = strtol(s->version, NULL, 10);
	for (size_t i = 0; names[i]; i++)
		if (cudnn_soname(names[i], major) &&
		    !gp_ldcache_lookup(cache, names[i])) {
			gp_check_set(ck, GP_STATE_NEEDED,
			             "%s is not in the linker cache (%s)", names[i],
			             GP_LDCACHE_FILE);
			return;
		}
}

static int cudnn_check(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	struct cudnn_settings s;
	settings(c, cfg, &s);
	_cleanup_free_ char *blocked = blocked_reason(c, &s);
	if (blocked || s.apt) {
		int rc = 0;
		if (blocked)
			gp_check_set(ck, GP_STATE_BLOCKED, "%s", blocked);
		else
			rc = cudnn_apt_check(c, &s, ck);
		settings_free(&s);
		return rc;
	}
	_cleanup_free_ char *hdr = gp_xasprintf("%s/include/cudnn_version.h", s.base);
	_cleanup_free_ char *have = cudnn_header_version(c, hdr);
	size_t n, hashed;
	_cleanup_free_ char *bad = NULL;
	bool files_ok = recorded_files_ok(c, s.dir, false, &n, &hashed, &bad);
	gp_log(c,
	       "%zu of %zu recorded files hashed (the others kept their size, "
	       "times and inode)",
	       hashed, n);
	bool ldconfig_ok = !n || gp_stage_mark_is(c, "cudnn", MARK_LDCONFIG, s.version);
	_cleanup_free_ char *badlink = NULL;
	struct links include, lib64;
	links_read(c, &s, "include", &include);
	links_read(c, &s, "lib64", &lib64);
	bool links = links_ok(c, &s, "include", &include, &badlink) &&
	             links_ok(c, &s, "lib", &lib64, &badlink);
	_cleanup_strv_ char **stale = NULL;
	stale_links(&s, &include, &stale);
	stale_links(&s, &lib64, &stale);
	links_free(&include);
	links_free(&lib64);
	_cleanup_strv_ char **old = old_dirs(c, &s);
	_cleanup_free_ char *note = old_dirs_note(old);
	_cleanup_free_ char *going = stale ? gp_xasprintf(
	                                         ": %zu link(s) into the old version go",
	                                         gp_strv_len(stale))
	                                   : gp_xstrdup("");
	if (!have)
		gp_check_set(ck, GP_STATE_NEEDED, "no cuDNN in %s (no %s); install %s%s",
		             s.base, hdr, s.version, note);
	else if (strcmp(have, s.version3) != 0)
		gp_check_set(ck, GP_STATE_NEEDED,
		             "%s says cuDNN %s; the profile wants %s%s%s", hdr, have,
		             s.version, going, note);
	else if (!files_ok)
		gp_check_set(ck, GP_STATE_NEEDED,
		             "%s is missing or changed since gpuprov installed it", bad);
	else if (!links)
		gp_check_set(ck, GP_STATE_NEEDED, "the link %s is missing or wrong",
		             badlink);
	else if (stale)
		gp_check_set(ck, GP_STATE_NEEDED, "%s still points into an old version%s",
		             stale[0], note);
	else if (old[0])
		gp_check_set(ck, GP_STATE_NEEDED,
		             "the old cuDNN directory %s is still there", old[0]);
	else if (!ldconfig_ok)
		gp_check_set(ck, GP_STATE_NEEDED, "ldconfig not run for cuDNN %s",
		             s.version);
	else {
		gp_check_set(ck, GP_STATE_SATISFIED, "cuDNN %s in %s (%zu files intact)",
		             have, s.base, n);
		check_linker(c, &s, ck);
	}
	settings_free(&s);
	return 0;
}

/* Relative links <base>/<to>/<name> -> ../cudnn-<version>/<from>/<name>. */
static int link_dir(struct gp_ctx *c, const struct cudnn_settings *s, const char *from,
                    const char *to)
{
	_cleanup_free_ char *src = gp_xasprintf("%s/%s", s->dir, from);
	_cleanup_strv_ char **names = NULL;
	if (gp_root_list_dir(&c->root, src, &names) < 0)
		return 0; /* dry-run: not extracted yet; or the archive has none */
	for (size_t i = 0; names[i]; i++) {
		if (!cudnn_name(from, names[i]))
			continue;
		_cleanup_free_ char *target = gp_xasprintf("../cudnn-%s/%s/%s",
		                                           s->version, from, names[i]);
		_cleanup_free_ char *path = gp_xasprintf("%s/%s/%s", s->base, to,
		                                         names[i]);
		if (gp_effect_symlink(c, target, path) < 0)
			return -1;
	}
	return 0;
}

/* Before link_dir: a link it would make must not replace a file gpuprov
 * did not link there (the toolkit's own, another cuDNN's): refused, naming
 * it, before any link changes. */
static int refuse_shadowing(struct gp_ctx *c, const struct cudnn_settings *s,
                            const char *from, const char *to)
{
	_cleanup_free_ char *src = gp_xasprintf("%s/%s", s->dir, from);
	_cleanup_strv_ char **names = NULL;
	if (gp_root_list_dir(&c->root, src, &names) < 0)
		return 0;
	for (size_t i = 0; names[i]; i++) {
		_cleanup_free_ char *path = gp_xasprintf("%s/%s/%s", s->base, to,
		                                         names[i]);
		struct stat st;
		if (!cudnn_name(from, names[i]) ||
		    gp_root_lstat(&c->root, path, &st) < 0 || our_link(c, path))
			continue;
		return gp_fail(c->err, GP_EBLOCKED,
		               "cudnn: the archive's %s/%s would replace %s, which "
		               "gpuprov did not install (the toolkit's, or another "
		               "cuDNN's); nothing was linked; remove or move it, or set "
		               "stages.cudnn.path to a directory of its own",
		               from, names[i], path);
	}
	return 0;
}

/* Before linking: the links into another cudnn-* directory go (the plan
 * knows them all, from the tree as it is), before ldconfig reads lib64. */
static int remove_old_links(struct gp_ctx *c, const struct cudnn_settings *s)
{
	_cleanup_strv_ char **stale = NULL;
	static const char *const dirs[] = { "include", "lib64" };
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		struct links l;
		links_read(c, s, dirs[i], &l);
		stale_links(s, &l, &stale);
		links_free(&l);
	}
	for (size_t i = 0; stale && stale[i]; i++)
		if (gp_effect_remove(c, stale[i]) < 0)
			return -1;
	return 0;
}

/* The links to the extracted archive, one rule effect: which names it holds
 * is known once it is extracted, so a plan made before the download lists
 * the same effect as the run. */
static int link_archive(struct gp_ctx *c, const struct cudnn_settings *s)
{
	gp_effect_rule_begin(c, "symlink",
	                     "each cudnn*.h of %s/include as %s/include/NAME -> "
	                     "../cudnn-%s/include/NAME, and each libcudnn* of %s/lib "
	                     "as %s/lib64/NAME -> ../cudnn-%s/lib/NAME (the names the "
	                     "archive holds)",
	                     s->dir, s->base, s->version, s->dir, s->base, s->version);
	_cleanup_free_ char *include = gp_xasprintf("%s/include", s->base);
	_cleanup_free_ char *lib64 = gp_xasprintf("%s/lib64", s->base);
	gp_effect_rule_dir(c, include);
	gp_effect_rule_dir(c, lib64);
	int rc = link_dir(c, s, "include", "include");
	if (rc == 0)
		rc = link_dir(c, s, "lib", "lib64");
	gp_effect_rule_end(c);
	return rc;
}

/* After linking: the old version's directories. */
static int remove_old_dirs(struct gp_ctx *c, const struct cudnn_settings *s)
{
	_cleanup_strv_ char **old = old_dirs(c, s);
	for (size_t i = 0; old[i]; i++)
		if (gp_effect_remove_tree(c, old[i]) < 0)
			return -1;
	return 0;
}

/* The tarball, when the profile pins it (URL and sha256). */
static int cudnn_prefetch(struct gp_ctx *c, const cJSON *cfg)
{
	struct cudnn_settings s;
	settings(c, cfg, &s);
	_cleanup_free_ char *name = gp_xasprintf("cudnn %s", s.version);
	if (strcmp(s.method, "tarball") == 0 && s.version && s.url && s.sha256)
		gp_prefetch_add(c, &(const struct gp_fetch_artifact){
		                       .name = name, .url = s.url, .sha256 = s.sha256 });
	settings_free(&s);
	return 0;
}

static int cudnn_apply(struct gp_ctx *c, const cJSON *cfg)
{
	struct cudnn_settings s;
	settings(c, cfg, &s);
	if (s.apt) {
		int rc = cudnn_apt_apply(c, &s);
		settings_free(&s);
		return rc;
	}
	_cleanup_free_ char *name = gp_xasprintf("cudnn %s", s.version);
	const struct gp_fetch_artifact a = { .name = name,
		                             .url = s.url,
		                             .sha256 = s.sha256 };
	_cleanup_free_ char *ld_conf = ld_conf_text(c, &s);
	char *const ldconfig[] = { "ldconfig", NULL };
	int rc = gp_effect_mkdir(c, s.base, 0755);
	if (rc == 0)
		rc = gp_effect_download_extract(c, &a, s.dir, GP_ARCHIVE_STRIP_TOP);
	if (rc == 0)
		rc = refuse_shadowing(c, &s, "include", "include");
	if (rc == 0)
		rc = refuse_shadowing(c, &s, "lib", "lib64");
	if (rc == 0)
		rc = remove_old_links(c, &s);
	if (rc == 0)
		rc = link_archive(c, &s);
	if (rc == 0)
		rc = remove_old_dirs(c, &s);
	if (rc == 0)
		rc = gp_effect_write(c, LD_CONF, ld_conf, strlen(ld_conf), 0644);
	if (rc == 0)
		rc = gp_effect_run(c, ldconfig);
	if (rc == 0)
		gp_stage_mark_set(c, "cudnn", MARK_LDCONFIG, s.version);
	settings_free(&s);
	return rc;
}

/* The CUDA toolkit's version under base, from version.json or version.txt. */
static char *toolkit_version(struct gp_ctx *c, const char *base)
{
	_cleanup_free_ char *jpath = gp_xasprintf("%s/version.json", base);
	_cleanup_free_ char *text = NULL;
	if (gp_ctx_read(c, jpath, &text, NULL) == 0) {
		cJSON *doc = cJSON_Parse(text);
		const cJSON *cuda = cJSON_GetObjectItemCaseSensitive(doc, "cuda");
		const char *v = gp_json_string(cuda, "version", NULL);
		char *r = v ? gp_xstrdup(v) : NULL;
		cJSON_Delete(doc);
		if (r)
			return r;
	}
	_cleanup_free_ char *tpath = gp_xasprintf("%s/version.txt", base);
	free(text);
	text = NULL;
	char v[32];
	if (gp_ctx_read(c, tpath, &text, NULL) == 0 &&
	    sscanf(text, "CUDA Version %31s", v) == 1)
		return gp_xstrdup(v);
	return NULL;
}

/* cudnn_version.h and cudnn.h present, the version the profile wants. */
void cudnn_verify_headers(struct gp_ctx *c, struct gp_report *rep, const char *hdr,
                          const char *cudnn_h, const char *want, const char *install)
{
	_cleanup_free_ char *have = cudnn_header_version(c, hdr);
	bool hdr_ok = gp_ctx_exists(c, hdr) && gp_ctx_exists(c, cudnn_h);
	gp_report_add(rep, "cudnn.headers", hdr_ok ? GP_PASS : GP_FAIL, "headers",
	              install, "%s and %s %s", hdr, cudnn_h,
	              hdr_ok ? "present" : "missing");
	if (have && gp_streq(have, want))
		gp_report_add(rep, "cudnn.version", GP_PASS, "version", NULL,
		              "%s says %s", hdr, have);
	else
		gp_report_add(rep, "cudnn.version", GP_FAIL, "version", install,
		              "%s says %s; the profile wants %s", hdr,
		              have ? have : "nothing readable", want ? want : "?");
}

/* Every libcudnn*.so.<major> in listdir is present in linkdir and resolved
 * by the root's linker cache (gp_ctx_linker_cache) to a file there. */
void cudnn_verify_sonames(struct gp_ctx *c, struct gp_report *rep, const char *listdir,
                          const char *linkdir, long major, const char *install)
{
	_cleanup_strv_ char **names = NULL;
	_cleanup_free_ char *err = NULL;
	char *const *cache = linker_cache(c, &err);
	if (!cache)
		gp_report_add(rep, "cudnn.linker_cache", GP_FAIL, "linker cache",
		              "check that the root has a working ldconfig",
		              "cannot read the linker cache: %s", err);
	size_t sonames = 0;
	if (gp_root_list_dir(&c->root, listdir, &names) < 0)
		names = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; names[i]; i++) {
		const char *n = names[i];
		if (!cudnn_soname(n, major))
			continue;
		sonames++;
		_cleanup_free_ char *check = gp_xasprintf("soname %s", n);
		/* The id's subject is the library: n without its ".so.<major>". */
		_cleanup_free_ char *lib = gp_xstrndup(n,
		                                       (size_t)(strrchr(n, '.') - n) - 3);
		_cleanup_free_ char *in_lib = gp_xasprintf("%s/%s", linkdir, n);
		struct stat st;
		const char *resolved = gp_ldcache_lookup(cache, n);
		if (gp_root_stat(&c->root, in_lib, &st) < 0)
			gp_report_add_subject(rep, "cudnn.soname", lib, GP_FAIL, check,
			                      install, "%s is missing or a broken link",
			                      in_lib);
		else if (!cache)
			continue;
		else if (!resolved)
			gp_report_add_subject(rep, "cudnn.soname", lib, GP_FAIL, check,
			                      install, "not in the linker cache (%s)",
			                      GP_LDCACHE_FILE);
		else if (gp_root_stat(&c->root, resolved, &st) < 0)
			gp_report_add_subject(
			    rep, "cudnn.soname", lib, GP_FAIL, check, install,
			    "the linker cache points at %s, which does not exist",
			    resolved);
		else
			gp_report_add_subject(rep, "cudnn.soname", lib, GP_PASS, check,
			                      NULL, "%s => %s", n, resolved);
	}
	if (!sonames)
		gp_report_add(rep, "cudnn.libraries", GP_FAIL, "libraries", install,
		              "no libcudnn*.so.%ld in %s", major, listdir);
}

/* The toolkit in tkdir has the CUDA major cuDNN (its header hdr) was
 * built for. */
void cudnn_verify_cuda_major(struct gp_ctx *c, struct gp_report *rep, const char *tkdir,
                             const char *cuda_major, const char *hdr)
{
	if (!gp_ctx_exists(c, hdr)) {
		/* The profile's CUDA major says nothing about a cuDNN not there. */
		gp_report_add(rep, "cudnn.cuda_major", GP_SKIP, "CUDA major", NULL,
		              "cuDNN is not installed (no %s): nothing to compare with "
		              "the toolkit",
		              hdr);
		return;
	}
	_cleanup_free_ char *tk = toolkit_version(c, tkdir);
	_cleanup_free_ char *cuda_hint = gp_install_hint(c, "cuda");
	if (!tk)
		gp_report_add(rep, "cudnn.cuda_major", GP_WARN, "CUDA major", cuda_hint,
		              "no version.json or version.txt in %s: cannot tell the "
		              "toolkit's CUDA version; cuDNN is built for CUDA %s",
		              tkdir, cuda_major ? cuda_major : "?");
	else if (cuda_major && strncmp(tk, cuda_major, strlen(cuda_major)) == 0 &&
	         tk[strlen(cuda_major)] == '.')
		gp_report_add(rep, "cudnn.cuda_major", GP_PASS, "CUDA major", NULL,
		              "toolkit %s, cuDNN built for CUDA %s", tk, cuda_major);
	else
		gp_report_add(rep, "cudnn.cuda_major", GP_FAIL, "CUDA major",
		              "set stages.cudnn.cuda to the toolkit's major version",
		              "toolkit %s in %s, cuDNN built for CUDA %s", tk, tkdir,
		              cuda_major ? cuda_major : "?");
}

static int cudnn_verify(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep)
{
	struct cudnn_settings s;
	settings(c, cfg, &s);
	_cleanup_free_ char *blocked = blocked_reason(c, &s);
	if (s.apt) {
		int rc = 0;
		if (blocked && !s.pkgs[0])
			gp_report_add(rep, "cudnn.packages", GP_FAIL, "packages", NULL,
			              "%s", blocked);
		else
			rc = cudnn_apt_verify(c, &s, rep);
		settings_free(&s);
		return rc;
	}
	if (!s.base || !s.version) {
		gp_report_add(rep, "cudnn.destination", GP_FAIL, "destination",
		              "set stages.cudnn.path or stages.cuda.path", "%s",
		              blocked ? blocked : "no destination");
		settings_free(&s);
		return 0;
	}
	_cleanup_free_ char *install = gp_install_hint(c, "cudnn");
	_cleanup_free_ char *hdr = gp_xasprintf("%s/include/cudnn_version.h", s.base);
	_cleanup_free_ char *cudnn_h = gp_xasprintf("%s/include/cudnn.h", s.base);
	cudnn_verify_headers(c, rep, hdr, cudnn_h, s.version3, install);

	/* Every file gpuprov installed, hashed (check trusts unchanged
	 * size, times and inode; verify reads them all). */
	size_t nfiles, hashed;
	_cleanup_free_ char *bad = NULL;
	if (recorded_files_ok(c, s.dir, true, &nfiles, &hashed, &bad) && nfiles)
		gp_report_add(rep, "cudnn.files", GP_PASS, "files", NULL,
		              "%zu files in %s have the sha256 gpuprov recorded", nfiles,
		              s.dir);
	else if (nfiles)
		gp_report_add(rep, "cudnn.files", GP_FAIL, "files", install,
		              "%s is missing or changed since gpuprov installed it", bad);

	/* Sonames: libcudnn*.so.<major> in the extracted library directory. */
	_cleanup_free_ char *libdir = gp_xasprintf("%s/lib", s.dir);
	_cleanup_free_ char *lib64 = gp_xasprintf("%s/lib64", s.base);
	cudnn_verify_sonames(c, rep, libdir, lib64, strtol(s.version, NULL, 10), install);
	cudnn_verify_cuda_major(c, rep, s.base, s.cuda_major, hdr);
	settings_free(&s);
	return 0;
}

static bool cudnn_uses_nvidia_repo(const struct gp_profile *p, const cJSON *cfg)
{
	return gp_streq(gp_json_string(cfg, KEY_METHOD, "tarball"), "apt");
}

const struct gp_stage gp_stage_cudnn = {
	.name = "cudnn",
	.summary = "cuDNN libraries and headers",
	.keys = cudnn_keys,
	.doc = "cuDNN.",
	.reads = (const char *const[]){ "cuda", NULL },
	.check = cudnn_check,
	.apply = cudnn_apply,
	.verify = cudnn_verify,
	.prefetch = cudnn_prefetch,
	.pin = &(const struct gp_stage_pin){ .method = "tarball",
	                                     .fallback = "tarball",
	                                     .key = KEY_SHA256,
	                                     .what = "the cuDNN tarball" },
	.uses_nvidia_repo = cudnn_uses_nvidia_repo,
};
