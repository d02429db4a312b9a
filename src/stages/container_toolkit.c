/* Stage container_toolkit: NVIDIA's container toolkit for docker.
 * check:  the four toolkit packages at the profile's version and held;
 *         /etc/docker/daemon.json has runtimes.nvidia (and default-runtime
 *         when asked); on the live host, docker restarted since gpuprov
 *         wrote that file. Blocked without the version, without a pinned
 *         repository key (distro.container_toolkit_repo) while something
 *         is to install, or on a daemon.json gpuprov cannot merge with.
 * apply:  the repository (its key checked against the pinned fingerprint),
 *         the packages in one transaction at exactly the version, the hold;
 *         daemon.json merged (every member gpuprov does not own kept) and
 *         written as a file effect, so the plan shows its diff; then
 *         `systemctl restart docker`, on the live host only (never under
 *         --root) and only for a daemon.json gpuprov changed.
 * verify: each package at the version, the hold, the runtime in
 *         daemon.json and its binary, default-runtime when asked.
 * Facts and sources: docs/reference/nvidia-container-toolkit.md. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuprov/dockercfg.h"
#include "gpuprov/json.h"
#include "gpuprov/pkg.h"
#include "gpuprov/pkgdb.h"
#include "gpuprov/root.h"
#include "gpuprov/sha256.h"
#include "gpuprov/stages.h"

#define STAGE "container_toolkit"
#define DAEMON_JSON "/etc/docker/daemon.json"
#define RUNTIME_NAME "nvidia"
#define RUNTIME_PATH "nvidia-container-runtime"
/* The daemon.json content docker was last restarted for (its sha256). */
#define MARK_RESTARTED "docker_restarted_for"
#define REPO_ID "nvidia-container-toolkit"
/* The distro base's object that describes NVIDIA's repository. */
#define DISTRO_REPO "container_toolkit_repo"

/* One version for all four, as NVIDIA's install guide pins them. */
static const char *const packages[] = { "nvidia-container-toolkit",
	                                "nvidia-container-toolkit-base",
	                                "libnvidia-container-tools",
	                                "libnvidia-container1" };
#define N_PACKAGES ARRAY_SIZE(packages)

/* --- profile keys (stages.container_toolkit) ---------------------------- */

#define KEY_VERSION "version"
#define KEY_RUNTIME "runtime"
#define KEY_DEFAULT_RUNTIME "default_runtime"

/* A Debian or RPM version: a digit first, then what both allow. */
static char *package_version(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (*s >= '0' && *s <= '9' && gp_schema_only(s, GP_ALNUM ".+~-"))
		return NULL;
	return gp_schema_why_got(s, "must be a package version (1.17.8-1)");
}

static const struct gp_value_check check_package_version = {
	.check = package_version,
	.schema = "{\"pattern\": \"^[0-9][0-9A-Za-z.+~-]*$\"}",
};

static const char *const runtimes[] = { "docker", NULL };

static const struct gp_key container_toolkit_keys[] = {
	GP_KEY_STRING_ROW(KEY_VERSION, &check_package_version,
	                  .doc = "The version of nvidia-container-toolkit, "
	                         "nvidia-container-toolkit-base, "
	                         "libnvidia-container-tools and libnvidia-container1, "
	                         "installed exactly and held; required.",
	                  .example = "\"1.17.8-1\""),
	GP_KEY_ENUM_ROW(KEY_RUNTIME, runtimes,
	                .doc = "The container engine configured: docker "
	                       "(/etc/docker/daemon.json).",
	                .default_value = "\"docker\"", .example = "\"docker\""),
	GP_KEY_BOOL_ROW(KEY_DEFAULT_RUNTIME,
	                .doc = "Also make nvidia docker's default-runtime (every "
	                       "container then runs with the NVIDIA runtime).",
	                .default_value = "false", .example = "true"),
	GP_KEY_END,
};

/* --- settings ------------------------------------------------------------ */

struct ctk {
	const char *version;
	struct gp_pkg_repo repo;
	struct gp_docker_runtime rt;
	char *daemon_where; /* DAEMON_JSON as messages name it (root prefixed) */
};

/* NVIDIA's repository as the distro base describes it
 * (distro.container_toolkit_repo); its strings point into the profile. */
static void ctk_repo(const struct gp_profile *p, struct gp_pkg_repo *r)
{
	const cJSON *distro = cJSON_GetObjectItemCaseSensitive(p->doc, "distro");
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(distro, DISTRO_REPO);
	*r = (struct gp_pkg_repo){
		.id = REPO_ID,
		.url = gp_json_string(o, "url", NULL),
		.suite = "/",
		.keyring_url = gp_json_string(o, "keyring_url", NULL),
		.keyring_sha256 = gp_json_string(o, "keyring_sha256", NULL),
		.fingerprint = gp_json_string(o, "keyring_fingerprint", NULL),
		.deb822 = gp_pkg_deb822(p),
	};
}

static void ctk_settings(struct gp_ctx *c, const cJSON *cfg, struct ctk *s)
{
	*s = (struct ctk){ .version = gp_json_string(cfg, KEY_VERSION, NULL) };
	ctk_repo(c->profile, &s->repo);
	const cJSON *def = cJSON_GetObjectItemCaseSensitive(cfg, KEY_DEFAULT_RUNTIME);
	s->rt = (struct gp_docker_runtime){ .name = RUNTIME_NAME,
		                            .path = RUNTIME_PATH,
		                            .set_default = cJSON_IsTrue(def) };
	s->daemon_where = gp_xasprintf(
	    "%s%s", gp_root_is_host(&c->root) ? "" : c->root.dir, DAEMON_JSON);
}

static void ctk_free(struct ctk *s)
{
	free(s->daemon_where);
}

/* Why the repository cannot be added, naming the distro base's keys; NULL
 * when it can. */
static char *repo_problem(const struct gp_pkg_repo *r)
{
	static const struct {
		const char *key, *why;
	} needed[] = {
		{ "url", "the repository's URL" },
		{ "keyring_url", "the URL of the key that signs it" },
		{ "keyring_sha256", "that key file's sha256: gpuprov downloads nothing "
		                    "it cannot verify" },
		{ "keyring_fingerprint",
		  "the key's fingerprint, which the downloaded key "
		  "must have before anything is written" },
	};
	const char *have[] = { r->url, r->keyring_url, r->keyring_sha256,
		               r->fingerprint };
	for (size_t i = 0; i < ARRAY_SIZE(needed); i++)
		if (!have[i])
			return gp_xasprintf("distro." DISTRO_REPO
			                    ".%s is not set (%s); the "
			                    "distro bases in profiles/distro/ set it",
			                    needed[i].key, needed[i].why);
	return gp_pkg_repo_problem(r);
}

/* --- packages ------------------------------------------------------------ */

/* What is wrong with the packages, or NULL: the first one missing or at
 * another version, else those not held. -1 when the database cannot be
 * read; *install says whether an install is needed. */
static int packages_problem(struct gp_ctx *c, const struct ctk *s, char **why,
                            bool *install)
{
	*why = NULL;
	*install = false;
	struct gp_buf unheld = { 0 };
	for (size_t i = 0; i < N_PACKAGES && !*why; i++) {
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, packages[i], &have) < 0) {
			gp_buf_free(&unheld);
			return -1;
		}
		if (!have)
			*why = gp_xasprintf("%s is not installed", packages[i]);
		else if (!gp_pkg_version_matches(have, s->version))
			*why = gp_xasprintf("%s %s is installed; the profile wants %s",
			                    packages[i], have, s->version);
		else if (!gp_pkg_is_held(c, packages[i]))
			gp_buf_printf(&unheld, "%s%s", unheld.len ? ", " : "",
			              packages[i]);
	}
	if (*why) {
		*install = true;
		gp_buf_free(&unheld);
	} else if (unheld.len) {
		*why = gp_xasprintf("not held: %s", unheld.data);
		gp_buf_free(&unheld);
	}
	return 0;
}

/* --- daemon.json --------------------------------------------------------- */

/* The daemon.json gpuprov would leave: *merged (allocated), *changed, and
 * *mode (the file's, 0644 for a new one). 0; -1 with c->err set: GP_EINPUT
 * when the file is there but not a regular file, too large or not a JSON
 * object gpuprov can merge with (nothing is written then). Read from the
 * root directly: no other stage writes it. */
static int daemon_merge(struct gp_ctx *c, const struct ctk *s, char **merged,
                        bool *changed, mode_t *mode)
{
	struct stat st;
	*mode = 0644;
	int rc = gp_root_lstat(&c->root, DAEMON_JSON, &st);
	_cleanup_free_ char *old = NULL;
	size_t len = 0;
	if (rc < 0 && rc != -ENOENT)
		return gp_fail(c->err, GP_EFAILED,
		               "stage " STAGE ": cannot look at %s: %s", s->daemon_where,
		               strerror(-rc));
	if (rc == 0 && !S_ISREG(st.st_mode))
		return gp_fail(c->err, GP_EINPUT,
		               "%s is %s, not a regular file: gpuprov merges only a "
		               "regular daemon.json and never writes through a link; "
		               "replace it with a regular file and run gpuprov again",
		               s->daemon_where,
		               S_ISLNK(st.st_mode)   ? "a symbolic link"
		               : S_ISDIR(st.st_mode) ? "a directory"
		                                     : "a special file");
	if (rc == 0) {
		*mode = st.st_mode & 07777;
		rc = gp_root_read_max(&c->root, DAEMON_JSON, GP_ROOT_CONFIG_MAX, &old,
		                      &len);
		if (rc == -ENOENT)
			len = 0;
		else if (rc < 0) {
			_cleanup_free_ char *why = gp_root_read_error(
			    &c->root, DAEMON_JSON, GP_ROOT_CONFIG_MAX, rc);
			return gp_fail(c->err, GP_EINPUT,
			               "stage " STAGE ": %s; nothing was written", why);
		}
	}
	return gp_docker_daemon_merge(s->daemon_where, old, len, &s->rt, merged, changed,
	                              c->err);
}

/* Whether docker is to be restarted for merged: on the live host only, with
 * dockerd installed, when the file is to change or gpuprov wrote it and
 * docker was not restarted for that content since. */
static bool restart_needed(struct gp_ctx *c, const char *merged, bool changed)
{
	if (!gp_root_is_host(&c->root) || !gp_ctx_exists(c, "/usr/bin/dockerd"))
		return false;
	if (changed)
		return true;
	char sha[65];
	gp_sha256_hex(merged, strlen(merged), sha);
	bool hashed;
	return gp_ctx_recorded_file_intact(c, DAEMON_JSON, false, &hashed) &&
	       !gp_stage_mark_is(c, STAGE, MARK_RESTARTED, sha);
}

/* What the plan says about the engine restart when the file changes. */
static const char *restart_note(struct gp_ctx *c)
{
	if (!gp_root_is_host(&c->root))
		return "docker is not restarted under --root: restart it where this "
		       "root runs";
	if (!gp_ctx_exists(c, "/usr/bin/dockerd"))
		return "docker is not installed: the runtime applies once it starts";
	return "docker will be restarted";
}

/* --- hooks --------------------------------------------------------------- */

static char *blocked_reason(struct gp_ctx *c, const struct ctk *s, bool install)
{
	if (!gp_profile_distro_string(c->profile, "package_manager"))
		return gp_xstrdup("stage " STAGE " needs distro.package_manager");
	if (!s->version)
		return gp_xstrdup("stages." STAGE "." KEY_VERSION " is not set: gpuprov "
		                  "installs the toolkit's four packages at one pinned "
		                  "version (see docs/gpuprov-profile.5)");
	if (!install)
		return NULL;
	_cleanup_free_ char *problem = repo_problem(&s->repo);
	return problem ? gp_xasprintf("cannot add NVIDIA's container toolkit "
	                              "repository: %s",
	                              problem)
	               : NULL;
}

static int ctk_check(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	struct ctk s;
	ctk_settings(c, cfg, &s);
	_cleanup_free_ char *pkgs = NULL, *merged = NULL, *blocked = NULL;
	bool install = false, changed = false;
	mode_t mode;
	int rc = -1;
	if (s.version && packages_problem(c, &s, &pkgs, &install) < 0)
		goto out;
	blocked = blocked_reason(c, &s, install);
	if (blocked) {
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", blocked);
		rc = 0;
		goto out;
	}
	if (daemon_merge(c, &s, &merged, &changed, &mode) < 0) {
		if (c->err->code != GP_EINPUT)
			goto out;
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", c->err->msg);
		rc = 0;
		goto out;
	}
	bool restart = restart_needed(c, merged, changed);
	struct gp_buf why = { 0 };
	if (pkgs)
		gp_buf_puts(&why, pkgs);
	if (changed)
		gp_buf_printf(&why, "%s%s does not configure the nvidia runtime%s (%s)",
		              why.len ? "; " : "", DAEMON_JSON,
		              s.rt.set_default ? " as the default" : "", restart_note(c));
	else if (restart)
		gp_buf_printf(&why, "%sdocker was not restarted since gpuprov wrote %s",
		              why.len ? "; " : "", DAEMON_JSON);
	if (why.len)
		gp_check_set(ck, GP_STATE_NEEDED, "%s", why.data);
	else
		gp_check_set(ck, GP_STATE_SATISFIED,
		             "%s %s and its three companion packages, held; %s has the "
		             "nvidia runtime%s",
		             packages[0], s.version, DAEMON_JSON,
		             s.rt.set_default ? " as the default" : "");
	gp_buf_free(&why);
	rc = 0;
out:
	ctk_free(&s);
	return rc;
}

static int ctk_apply(struct gp_ctx *c, const cJSON *cfg)
{
	struct ctk s;
	ctk_settings(c, cfg, &s);
	_cleanup_free_ char *pkgs = NULL, *merged = NULL;
	bool install = false, changed = false;
	mode_t mode;
	int rc = -1;
	if (!s.version) {
		gp_fail(c->err, GP_EBLOCKED,
		        "stages." STAGE "." KEY_VERSION " is not set");
		goto out;
	}
	if (packages_problem(c, &s, &pkgs, &install) < 0)
		goto out;
	if (install) {
		_cleanup_free_ char *problem = repo_problem(&s.repo);
		if (problem) {
			gp_fail(c->err, GP_EBLOCKED, "stage " STAGE ": %s", problem);
			goto out;
		}
		struct gp_pkg_want w[N_PACKAGES];
		for (size_t i = 0; i < N_PACKAGES; i++)
			w[i] = (struct gp_pkg_want){ packages[i], s.version };
		if (gp_effect_pkg_add_repo(c, &s.repo) < 0 ||
		    gp_effect_pkg_install(c, w, N_PACKAGES) < 0)
			goto out;
	}
	if (pkgs && gp_effect_pkg_hold(c, packages, N_PACKAGES, true) < 0)
		goto out;
	if (daemon_merge(c, &s, &merged, &changed, &mode) < 0)
		goto out;
	bool restart = restart_needed(c, merged, changed);
	if (changed && gp_effect_write(c, DAEMON_JSON, merged, strlen(merged), mode) < 0)
		goto out;
	if (restart) {
		char sha[65];
		gp_sha256_hex(merged, strlen(merged), sha);
		char *const argv[] = { "systemctl", "restart", "docker", NULL };
		if (gp_stage_run_once(c, STAGE, MARK_RESTARTED, sha, argv) < 0)
			goto out;
	}
	rc = 0;
out:
	ctk_free(&s);
	return rc;
}

static void verify_packages(struct gp_ctx *c, const struct ctk *s, struct gp_report *rep,
                            const char *install)
{
	struct gp_buf unheld = { 0 };
	for (size_t i = 0; i < N_PACKAGES; i++) {
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, packages[i], &have) < 0)
			have = NULL; /* unreadable database: reported as missing */
		bool ok = have && s->version && gp_pkg_version_matches(have, s->version);
		_cleanup_free_ char *check = gp_xasprintf("package %s", packages[i]);
		gp_report_add_subject(rep, "container_toolkit.package", packages[i],
		                      ok ? GP_PASS : GP_FAIL, check, install, "%s %s%s%s",
		                      packages[i], have ? have : "is not installed",
		                      ok || !have ? "" : "; the profile wants ",
		                      ok || !have  ? ""
		                      : s->version ? s->version
		                                   : "?");
		if (have && !gp_pkg_is_held(c, packages[i]))
			gp_buf_printf(&unheld, "%s%s", unheld.len ? ", " : "",
			              packages[i]);
	}
	if (unheld.len)
		gp_report_add(rep, "container_toolkit.hold", GP_FAIL, "hold", install,
		              "not held: %s (an upgrade would move them off the pin)",
		              unheld.data);
	else
		gp_report_add(rep, "container_toolkit.hold", GP_PASS, "hold", NULL,
		              "every installed toolkit package is held");
	gp_buf_free(&unheld);
}

static int ctk_verify(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep)
{
	struct ctk s;
	ctk_settings(c, cfg, &s);
	_cleanup_free_ char *install = gp_install_hint(c, STAGE);
	verify_packages(c, &s, rep, install);
	_cleanup_free_ char *merged = NULL;
	bool changed = false, has_runtime = false, is_default = false;
	mode_t mode;
	if (daemon_merge(c, &s, &merged, &changed, &mode) < 0) {
		gp_report_add(rep, "container_toolkit.runtime", GP_FAIL, "docker runtime",
		              "fix the file, then run install again", "%s", c->err->msg);
	} else {
		/* The merge's own result read back: what docker will read. */
		_cleanup_free_ char *have = NULL;
		size_t len = 0;
		if (gp_root_read_max(&c->root, DAEMON_JSON, GP_ROOT_CONFIG_MAX, &have,
		                     &len) < 0)
			have = NULL;
		if (gp_docker_daemon_inspect(s.daemon_where, have, len, &s.rt,
		                             &has_runtime, &is_default, c->err) < 0)
			has_runtime = is_default = false;
		if (has_runtime)
			gp_report_add(rep, "container_toolkit.runtime", GP_PASS,
			              "docker runtime", NULL,
			              "%s has runtimes.nvidia (path %s)", DAEMON_JSON,
			              RUNTIME_PATH);
		else
			gp_report_add(rep, "container_toolkit.runtime", GP_FAIL,
			              "docker runtime", install,
			              "%s has no runtimes.nvidia with path %s: docker "
			              "answers `could not select device driver \"\" with "
			              "capabilities: [[gpu]]`",
			              DAEMON_JSON, RUNTIME_PATH);
		if (s.rt.set_default)
			gp_report_add(rep, "container_toolkit.default_runtime",
			              is_default ? GP_PASS : GP_FAIL, "default runtime",
			              is_default ? NULL : install,
			              "%s %s nvidia the default-runtime", DAEMON_JSON,
			              is_default ? "makes" : "does not make");
	}
	/* dockerd finds the runtime by name on its PATH. */
	static const char *const bins[] = { "/usr/bin/" RUNTIME_PATH,
		                            "/usr/local/bin/" RUNTIME_PATH };
	const char *found = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(bins) && !found; i++)
		if (gp_ctx_exists(c, bins[i]))
			found = bins[i];
	if (found)
		gp_report_add(rep, "container_toolkit.runtime_binary", GP_PASS,
		              "runtime binary", NULL, "%s is installed", found);
	else
		gp_report_add(rep, "container_toolkit.runtime_binary", GP_FAIL,
		              "runtime binary", install,
		              "%s is not in /usr/bin (package %s)", RUNTIME_PATH,
		              packages[0]);
	ctk_free(&s);
	return 0;
}

/* For `profiles lint` and `detect`: the repository's pins, when the
 * profile enables the stage. */
static char *ctk_missing_pin(const struct gp_profile *p, const cJSON *cfg)
{
	struct gp_pkg_repo r;
	ctk_repo(p, &r);
	return repo_problem(&r);
}

const struct gp_stage gp_stage_container_toolkit = {
	.name = STAGE,
	.summary = "NVIDIA container toolkit and docker's nvidia runtime",
	.keys = container_toolkit_keys,
	.doc = "Installs NVIDIA's container toolkit at a pinned version and "
	       "configures docker's nvidia runtime.",
	.check = ctk_check,
	.apply = ctk_apply,
	.verify = ctk_verify,
	.missing_pin = ctk_missing_pin,
};
