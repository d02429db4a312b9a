/* Stage container_toolkit: NVIDIA's container toolkit for docker,
 * containerd or CRI-O (the profile's runtime).
 * check:  the four toolkit packages at the profile's version and held;
 *         the engine's configuration has the nvidia runtime (and the
 *         default runtime when asked): docker's daemon.json, or the
 *         containerd / CRI-O drop-in (and config.toml's imports line); on
 *         the live host, the engine restarted since gpuprov wrote them; with
 *         cdi_spec, the CDI spec current. Blocked without the version,
 *         without a pinned repository key (distro.container_toolkit_repo)
 *         while something is to install, or on a file gpuprov will not
 *         change (a daemon.json it cannot merge with, a config.toml it
 *         does not understand line by line).
 * apply:  the repository (its key checked against the pinned fingerprint),
 *         the packages in one transaction at exactly the version, the hold;
 *         the engine's files (daemon.json merged keeping every member
 *         gpuprov does not own; drop-ins whole; config.toml one line)
 *         written as file effects, so the plan shows their diffs; then
 *         `systemctl restart <engine>`, on the live host only (never under
 *         --root) and only for files gpuprov changed. With cdi_spec,
 *         `nvidia-ctk cdi generate` (re)writes the CDI spec when it is
 *         missing, names another driver than the loaded one, or lacks a GPU.
 * verify: each package at the version, the hold, the runtime and its
 *         binary, default-runtime when asked; the CDI spec current
 *         (src/pure/cdispec.c); with test_image, on the live host, a
 *         container of that image (never pulled) lists every GPU: docker,
 *         for CRI-O podman when it is installed, for containerd ctr or
 *         nerdctl (containerd_client) in containerd_namespace, the GPUs as
 *         CDI devices when a CDI spec is there.
 * Facts and sources: docs/reference/nvidia-container-toolkit.md. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuprov/cdispec.h"
#include "gpuprov/containerdcfg.h"
#include "gpuprov/dockercfg.h"
#include "gpuprov/json.h"
#include "gpuprov/nvproc.h"
#include "gpuprov/pci.h"
#include "gpuprov/pkg.h"
#include "gpuprov/pkgdb.h"
#include "gpuprov/root.h"
#include "gpuprov/run.h"
#include "gpuprov/sha256.h"
#include "gpuprov/stages.h"

#define STAGE "container_toolkit"
#define DAEMON_JSON "/etc/docker/daemon.json"
#define RUNTIME_NAME "nvidia"
#define RUNTIME_PATH "nvidia-container-runtime"
/* containerd and CRI-O take the runtime's absolute path. */
#define RUNTIME_ABS "/usr/bin/" RUNTIME_PATH
/* The drop-ins and the imports pattern, where nvidia-ctk puts them. */
#define CONTAINERD_CONFIG "/etc/containerd/config.toml"
#define CONTAINERD_DROPIN "/etc/containerd/conf.d/99-nvidia.toml"
#define CONTAINERD_IMPORTS "/etc/containerd/conf.d/*.toml"
#define CRIO_DROPIN "/etc/crio/crio.conf.d/99-nvidia.toml"
/* The daemon.json content docker was last restarted for (its sha256). */
#define MARK_RESTARTED "docker_restarted_for"
#define REPO_ID "nvidia-container-toolkit"
/* The distro base's object that describes NVIDIA's repository. */
#define DISTRO_REPO "container_toolkit_repo"
/* Where the CDI spec is generated (the static directory: /var/run/cdi is
 * cleared at boot). */
#define CDI_SPEC "/etc/cdi/nvidia.yaml"
#define CDI_RUN_SPEC "/var/run/cdi/nvidia.yaml"

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
#define KEY_CDI_SPEC "cdi_spec"
#define KEY_TEST_IMAGE "test_image"
#define KEY_CONTAINERD_NAMESPACE "containerd_namespace"
#define KEY_CONTAINERD_CLIENT "containerd_client"
/* The containerd namespace of Kubernetes' CRI plugin, where the images
 * kubelet pulled are (docs/reference/nvidia-container-toolkit.md). */
#define DEFAULT_NAMESPACE "k8s.io"

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

/* An image reference as docker takes it; never an option ("-..."). */
static char *image_reference(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	if (((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
	     (*s >= 'A' && *s <= 'Z')) &&
	    gp_schema_only(s, GP_ALNUM "._/:@-_") && strlen(s) <= 255)
		return NULL;
	return gp_schema_why_got(
	    s, "must be an image reference (nvidia/cuda:12.8.1-base-ubuntu24.04)");
}

static const struct gp_value_check check_image_reference = {
	.check = image_reference,
	.schema =
	    "{\"pattern\": \"^[0-9A-Za-z][0-9A-Za-z._/:@_-]*$\", \"maxLength\": 255}",
};

static const char *const runtimes[] = { "docker", "containerd", "crio", NULL };
static const char *const containerd_clients[] = { "ctr", "nerdctl", NULL };

/* A containerd namespace as containerd takes it (its identifiers: letters
 * and digits, single '.', '_' or '-' between them, at most 76). */
static char *namespace_name(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	bool ok = strlen(s) <= 76 && gp_schema_only(s, GP_ALNUM "._-");
	for (size_t k = 0; ok && s[k]; k++)
		if (strchr("._-", s[k]))
			ok = k > 0 && !strchr("._-", s[k - 1]) && s[k + 1];
	if (ok && *s)
		return NULL;
	return gp_schema_why_got(s, "must be a containerd namespace (k8s.io, default)");
}

static const struct gp_value_check check_namespace = {
	.check = namespace_name,
	.schema = "{\"pattern\": \"^[A-Za-z0-9]+([._-][A-Za-z0-9]+)*$\", "
	          "\"maxLength\": 76}",
};

static const struct gp_key container_toolkit_keys[] = {
	GP_KEY_STRING_ROW(KEY_VERSION, &check_package_version,
	                  .doc = "The version of nvidia-container-toolkit, "
	                         "nvidia-container-toolkit-base, "
	                         "libnvidia-container-tools and libnvidia-container1, "
	                         "installed exactly and held; required.",
	                  .example = "\"1.17.8-1\""),
	GP_KEY_ENUM_ROW(KEY_RUNTIME, runtimes,
	                .doc = "The container engine configured: docker "
	                       "(" DAEMON_JSON
	                       " merged), containerd (the drop-in " CONTAINERD_DROPIN
	                       ", imported by " CONTAINERD_CONFIG
	                       ") or crio (the drop-in " CRIO_DROPIN ").",
	                .default_value = "\"docker\"", .example = "\"docker\""),
	GP_KEY_BOOL_ROW(KEY_DEFAULT_RUNTIME,
	                .doc = "Also make nvidia docker's default-runtime (every "
	                       "container then runs with the NVIDIA runtime).",
	                .default_value = "false", .example = "true"),
	GP_KEY_BOOL_ROW(KEY_CDI_SPEC,
	                .doc = "Generate the CDI spec " CDI_SPEC " with `nvidia-ctk "
	                       "cdi generate` for the loaded driver, and again "
	                       "when it names another driver version or lacks a "
	                       "GPU (containers then ask for nvidia.com/gpu=all).",
	                .default_value = "false", .example = "true"),
	GP_KEY_STRING_ROW(KEY_TEST_IMAGE, &check_image_reference,
	                  .doc = "An image already on the host that verify runs, on "
	                         "the live host with docker running, as `docker run "
	                         "--rm --pull=never` with every GPU (`--device "
	                         "nvidia.com/gpu=all` with cdi_spec, else `--gpus "
	                         "all`) and `nvidia-smi -L`; it must list every GPU. "
	                         "With runtime crio, by podman when it is installed "
	                         "(`podman run --rm --pull=never --device "
	                         "nvidia.com/gpu=all`); with runtime containerd, by "
	                         "containerd_client when it is installed, in "
	                         "containerd_namespace (`ctr run --rm --device "
	                         "nvidia.com/gpu=all` with a CDI spec, else `--gpus "
	                         "0 ... --gpus N-1`; `nerdctl run --rm "
	                         "--pull=never --device nvidia.com/gpu=all`, else "
	                         "`--gpus all`). gpuprov never pulls it.",
	                  .example = "\"nvidia/cuda:12.8.1-base-ubuntu24.04\""),
	GP_KEY_STRING_ROW(KEY_CONTAINERD_NAMESPACE, &check_namespace,
	                  .doc = "With runtime containerd: the containerd namespace "
	                         "whose images verify's test_image is looked up and "
	                         "run in. The default is Kubernetes' (its CRI "
	                         "plugin's, where kubelet's images are); ctr and "
	                         "nerdctl on their own use \"default\".",
	                  .default_value = "\"" DEFAULT_NAMESPACE "\"",
	                  .example = "\"k8s.io\""),
	GP_KEY_ENUM_ROW(KEY_CONTAINERD_CLIENT, containerd_clients,
	                .doc = "With runtime containerd: the client that runs "
	                       "verify's test_image, ctr (containerd's own) or "
	                       "nerdctl.",
	                .default_value = "\"ctr\"", .example = "\"nerdctl\""),
	GP_KEY_END,
};

/* --- settings ------------------------------------------------------------ */

/* The container engines, in the order of runtimes[]. */
static const struct engine {
	const char *name; /* the profile's value and the systemd unit */
	const char *daemon; /* its binary: restarted only when installed */
	const char *mark; /* the stage mark: the files it was restarted for */
} engines[] = {
	{ "docker", "/usr/bin/dockerd", MARK_RESTARTED },
	{ "containerd", "/usr/bin/containerd", "containerd_restarted_for" },
	{ "crio", "/usr/bin/crio", "crio_restarted_for" },
};

struct ctk {
	const char *version;
	struct gp_pkg_repo repo;
	struct gp_docker_runtime rt;
	const struct engine *engine; /* KEY_RUNTIME */
	bool cdi; /* KEY_CDI_SPEC */
	const char *test_image; /* KEY_TEST_IMAGE, or NULL */
	const char *ns; /* KEY_CONTAINERD_NAMESPACE */
	bool nerdctl; /* KEY_CONTAINERD_CLIENT */
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
	s->cdi = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, KEY_CDI_SPEC));
	s->test_image = gp_json_string(cfg, KEY_TEST_IMAGE, NULL);
	s->ns = gp_json_string(cfg, KEY_CONTAINERD_NAMESPACE, DEFAULT_NAMESPACE);
	s->nerdctl = gp_streq(gp_json_string(cfg, KEY_CONTAINERD_CLIENT, "ctr"),
	                      "nerdctl");
	const char *engine = gp_json_string(cfg, KEY_RUNTIME, "docker");
	s->engine = &engines[0];
	for (size_t i = 0; i < ARRAY_SIZE(engines); i++)
		if (strcmp(engine, engines[i].name) == 0)
			s->engine = &engines[i];
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

/* path as messages name it (root prefixed), allocated. */
static char *where(struct gp_ctx *c, const char *path)
{
	return gp_xasprintf("%s%s", gp_root_is_host(&c->root) ? "" : c->root.dir, path);
}

/* A configuration file of the engine's as it is: *old (allocated, NULL
 * when there is none), *len, *mode (the file's, 0644 for a new one). 0; -1
 * with c->err set: GP_EINPUT when it is there but not a regular file or
 * too large (nothing is written then). Read from the root directly: no
 * other stage writes these. */
static int read_config(struct gp_ctx *c, const char *path, char **old, size_t *len,
                       mode_t *mode)
{
	struct stat st;
	*old = NULL;
	*len = 0;
	*mode = 0644;
	_cleanup_free_ char *w = where(c, path);
	int rc = gp_root_lstat(&c->root, path, &st);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED,
		               "stage " STAGE ": cannot look at %s: %s", w,
		               strerror(-rc));
	if (!S_ISREG(st.st_mode))
		return gp_fail(c->err, GP_EINPUT,
		               "%s is %s, not a regular file: gpuprov merges only a "
		               "regular %s and never writes through a link; replace it "
		               "with a regular file and run gpuprov again",
		               w,
		               S_ISLNK(st.st_mode)   ? "a symbolic link"
		               : S_ISDIR(st.st_mode) ? "a directory"
		                                     : "a special file",
		               strrchr(path, '/') + 1);
	*mode = st.st_mode & 07777;
	rc = gp_root_read_max(&c->root, path, GP_ROOT_CONFIG_MAX, old, len);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0) {
		_cleanup_free_ char *why = gp_root_read_error(&c->root, path,
		                                              GP_ROOT_CONFIG_MAX, rc);
		return gp_fail(c->err, GP_EINPUT,
		               "stage " STAGE ": %s; nothing was written", why);
	}
	return 0;
}

/* The daemon.json gpuprov would leave: *merged (allocated), *changed, and
 * *mode. 0; -1 with c->err set as read_config, or GP_EINPUT when it is not
 * a JSON object gpuprov can merge with. */
static int daemon_merge(struct gp_ctx *c, const struct ctk *s, char **merged,
                        bool *changed, mode_t *mode)
{
	_cleanup_free_ char *old = NULL;
	size_t len = 0;
	if (read_config(c, DAEMON_JSON, &old, &len, mode) < 0)
		return -1;
	return gp_docker_daemon_merge(s->daemon_where, old, len, &s->rt, merged, changed,
	                              c->err);
}

/* A file the engine's configuration is to have, and why it changes. */
struct engine_file {
	const char *path;
	char *text;
	mode_t mode;
	bool changed;
	const char *why; /* what the file lacks now */
};

/* What gpuprov leaves for the engine: its files (the drop-in, or
 * daemon.json, first) and the digest of their texts (what a restart is
 * for). */
struct engine_cfg {
	struct engine_file f[2];
	size_t n;
	bool any_changed;
	char digest[65];
};

static void engine_cfg_free(struct engine_cfg *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->f[i].text);
	e->n = 0;
}

/* Adds a file whose whole text gpuprov writes (a drop-in). */
static int add_whole_file(struct gp_ctx *c, struct engine_cfg *e, const char *path,
                          char *text, const char *why)
{
	_cleanup_free_ char *old = NULL;
	size_t len;
	struct engine_file *f = &e->f[e->n++];
	*f = (struct engine_file){ .path = path, .text = text, .why = why };
	if (read_config(c, path, &old, &len, &f->mode) < 0)
		return -1;
	f->changed = !old || len != strlen(text) || memcmp(old, text, len) != 0;
	return 0;
}

/* containerd's files: the drop-in for config.toml's version, and
 * config.toml importing its directory. */
static int containerd_files(struct gp_ctx *c, const struct ctk *s, struct engine_cfg *e)
{
	_cleanup_free_ char *old = NULL, *w = where(c, CONTAINERD_CONFIG);
	size_t len;
	mode_t mode;
	if (read_config(c, CONTAINERD_CONFIG, &old, &len, &mode) < 0)
		return -1;
	struct gp_containerd_config cfg;
	char *edited = NULL;
	bool changed;
	if (gp_containerd_imports_edit(w, old, len, CONTAINERD_IMPORTS, &edited, &changed,
	                               &cfg, c->err) < 0)
		return -1;
	if (cfg.cri_line) {
		free(edited);
		return gp_fail(c->err, GP_EINPUT,
		               "%s:%zu configures containerd's CRI plugin: containerd "
		               "before 2.1 lets a drop-in's plugin table replace that "
		               "one whole, so the nvidia drop-in would drop these "
		               "settings; move them into a file of %s yourself, or "
		               "configure the runtime with `nvidia-ctk runtime "
		               "configure --runtime=containerd`, and run gpuprov "
		               "again; nothing was written",
		               w, cfg.cri_line, CONTAINERD_IMPORTS);
	}
	char *dropin = gp_containerd_dropin(cfg.version ? cfg.version : 2, RUNTIME_ABS,
	                                    s->rt.set_default, cfg.systemd_cgroup);
	if (add_whole_file(c, e, CONTAINERD_DROPIN, dropin,
	                   "does not configure the nvidia runtime") < 0) {
		free(edited);
		return -1;
	}
	e->f[e->n++] = (struct engine_file){
		.path = CONTAINERD_CONFIG,
		.text = edited,
		.mode = mode,
		.changed = changed,
		.why = "does not import " CONTAINERD_IMPORTS
	};
	return 0;
}

/* The engine's configuration gpuprov would leave. 0; -1 with c->err set
 * (GP_EINPUT: a file gpuprov will not change; nothing is written then). */
static int engine_config(struct gp_ctx *c, const struct ctk *s, struct engine_cfg *e)
{
	*e = (struct engine_cfg){ 0 };
	int rc;
	if (s->engine == &engines[0]) {
		struct engine_file *f = &e->f[e->n++];
		*f = (struct engine_file){
			.path = DAEMON_JSON,
			.why = "does not configure the nvidia runtime"
		};
		rc = daemon_merge(c, s, &f->text, &f->changed, &f->mode);
	} else if (strcmp(s->engine->name, "containerd") == 0)
		rc = containerd_files(c, s, e);
	else
		rc = add_whole_file(c, e, CRIO_DROPIN,
		                    gp_crio_dropin(RUNTIME_ABS, s->rt.set_default),
		                    "does not configure the nvidia runtime");
	if (rc < 0) {
		engine_cfg_free(e);
		return -1;
	}
	struct gp_buf all = { 0 };
	for (size_t i = 0; i < e->n; i++) {
		gp_buf_puts(&all, e->f[i].text);
		e->any_changed |= e->f[i].changed;
	}
	gp_sha256_hex(all.data, all.len, e->digest);
	gp_buf_free(&all);
	return 0;
}

/* Whether the engine is to be restarted for e: on the live host only, with
 * its daemon installed, when a file is to change or gpuprov wrote them and
 * the engine was not restarted for that content since. */
static bool restart_needed(struct gp_ctx *c, const struct ctk *s,
                           const struct engine_cfg *e)
{
	if (!gp_root_is_host(&c->root) || !gp_ctx_exists(c, s->engine->daemon))
		return false;
	if (e->any_changed)
		return true;
	bool hashed;
	return gp_ctx_recorded_file_intact(c, e->f[0].path, false, &hashed) &&
	       !gp_stage_mark_is(c, STAGE, s->engine->mark, e->digest);
}

/* What the plan says about the engine restart when a file changes,
 * allocated. */
static char *restart_note(struct gp_ctx *c, const struct ctk *s)
{
	if (!gp_root_is_host(&c->root))
		return gp_xasprintf("%s is not restarted under --root: restart it where "
		                    "this root runs",
		                    s->engine->name);
	if (!gp_ctx_exists(c, s->engine->daemon))
		return gp_xasprintf("%s is not installed: the runtime applies once it "
		                    "starts",
		                    s->engine->name);
	return gp_xasprintf("%s will be restarted", s->engine->name);
}

/* --- the CDI spec --------------------------------------------------------- */

/* The NVIDIA GPUs on the root's PCI bus (0 when it cannot be read). */
static size_t gpu_count(struct gp_ctx *c)
{
	struct gp_pci_list l;
	size_t n = 0;
	if (gp_pci_scan(&c->root, &l) < 0)
		return 0;
	for (size_t i = 0; i < l.n; i++)
		n += gp_pci_is_nvidia_gpu(&l.devs[i]);
	gp_pci_list_free(&l);
	return n;
}

/* What is wrong with the CDI spec at path for this host, allocated, or
 * NULL when it is current; *summary (allocated, may be NULL) says what a
 * current one lists. The driver compared is the loaded module's:
 * nvidia-ctk generates for the driver NVML reports. */
static char *cdi_problem_at(struct gp_ctx *c, const char *path, char **summary)
{
	struct stat st;
	*summary = NULL;
	int rc = gp_root_lstat(&c->root, path, &st);
	if (rc == -ENOENT)
		return gp_xasprintf("there is no CDI spec %s", path);
	if (rc == 0 && !S_ISREG(st.st_mode))
		return gp_xasprintf("%s is not a regular file", path);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (rc == 0)
		rc = gp_root_read_max(&c->root, path, GP_CDI_SPEC_MAX + 1, &text, &len);
	if (rc < 0)
		return gp_root_read_error(&c->root, path, GP_CDI_SPEC_MAX + 1, rc);
	struct gp_cdi_spec spec;
	struct gp_err err = { 0 };
	if (gp_cdi_spec_parse(path, text, len, &spec, &err) < 0)
		return gp_xstrdup(err.msg);
	_cleanup_free_ char *loaded = NULL;
	if (gp_nvidia_module_read(&c->root, &loaded, NULL) < 0)
		loaded = NULL;
	size_t n = gpu_count(c);
	char *why = gp_cdi_spec_problem(&spec, loaded, n);
	if (why) {
		char *full = gp_xasprintf("the CDI spec %s is stale: %s", path, why);
		free(why);
		why = full;
	} else
		*summary = gp_xasprintf("%s lists %zu GPU%s and \"all\" for driver %s",
		                        path, n, n == 1 ? "" : "s", spec.driver_version);
	gp_cdi_spec_free(&spec);
	return why;
}

static char *cdi_problem(struct gp_ctx *c, char **summary)
{
	return cdi_problem_at(c, CDI_SPEC, summary);
}

/* A spec of the same name in /var/run/cdi takes precedence over CDI_SPEC
 * (docs/reference/nvidia-container-toolkit.md): one that is stale hides
 * the current one. Verify only: gpuprov did not write it and leaves it. */
static void verify_cdi_shadow(struct gp_ctx *c, struct gp_report *rep)
{
	if (!gp_ctx_exists(c, CDI_RUN_SPEC))
		return;
	_cleanup_free_ char *ok = NULL, *stale = cdi_problem_at(c, CDI_RUN_SPEC, &ok);
	if (stale)
		gp_report_add(
		    rep, "container_toolkit.cdi_spec_run", GP_FAIL,
		    "CDI spec in /var/run",
		    "it takes precedence over " CDI_SPEC ": remove it, or "
		    "regenerate it with `nvidia-ctk cdi generate --output=" CDI_RUN_SPEC
		    "`",
		    "%s", stale);
	else
		gp_report_add(rep, "container_toolkit.cdi_spec_run", GP_PASS,
		              "CDI spec in /var/run", NULL, "%s", ok);
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

/* Why the engine's files change, for the plan: "daemon.json does not
 * configure the nvidia runtime (docker will be restarted)". */
static void engine_why(struct gp_ctx *c, const struct ctk *s, const struct engine_cfg *e,
                       bool note, struct gp_buf *why)
{
	const char *sep = why->len ? "; " : "";
	for (size_t i = 0; i < e->n; i++) {
		if (!e->f[i].changed)
			continue;
		gp_buf_printf(why, "%s%s %s%s", sep, e->f[i].path, e->f[i].why,
		              i == 0 && s->rt.set_default ? " as the default" : "");
		sep = " and ";
	}
	if (!note)
		return;
	_cleanup_free_ char *restart = restart_note(c, s);
	gp_buf_printf(why, " (%s)", restart);
}

static int ctk_check(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	struct ctk s;
	ctk_settings(c, cfg, &s);
	_cleanup_free_ char *pkgs = NULL, *blocked = NULL;
	_cleanup_free_ char *cdi = NULL, *cdi_ok = NULL;
	struct engine_cfg e = { 0 };
	bool install = false;
	int rc = -1;
	if (s.version && packages_problem(c, &s, &pkgs, &install) < 0)
		goto out;
	blocked = blocked_reason(c, &s, install);
	if (blocked) {
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", blocked);
		rc = 0;
		goto out;
	}
	if (engine_config(c, &s, &e) < 0) {
		if (c->err->code != GP_EINPUT)
			goto out;
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", c->err->msg);
		rc = 0;
		goto out;
	}
	bool restart = restart_needed(c, &s, &e);
	if (s.cdi)
		cdi = cdi_problem(c, &cdi_ok);
	struct gp_buf why = { 0 };
	if (pkgs)
		gp_buf_puts(&why, pkgs);
	if (e.any_changed)
		engine_why(c, &s, &e, true, &why);
	else if (restart)
		gp_buf_printf(&why, "%s%s was not restarted since gpuprov wrote %s",
		              why.len ? "; " : "", s.engine->name, e.f[0].path);
	if (cdi)
		gp_buf_printf(&why, "%s%s", why.len ? "; " : "", cdi);
	if (why.len)
		gp_check_set(ck, GP_STATE_NEEDED, "%s", why.data);
	else
		gp_check_set(ck, GP_STATE_SATISFIED,
		             "%s %s and its three companion packages, held; %s has the "
		             "nvidia runtime%s%s%s",
		             packages[0], s.version, e.f[0].path,
		             s.rt.set_default ? " as the default" : "",
		             cdi_ok ? "; " : "", cdi_ok ? cdi_ok : "");
	gp_buf_free(&why);
	rc = 0;
out:
	engine_cfg_free(&e);
	ctk_free(&s);
	return rc;
}

static int ctk_apply(struct gp_ctx *c, const cJSON *cfg)
{
	struct ctk s;
	ctk_settings(c, cfg, &s);
	_cleanup_free_ char *pkgs = NULL;
	struct engine_cfg e = { 0 };
	bool install = false;
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
	if (engine_config(c, &s, &e) < 0)
		goto out;
	bool restart = restart_needed(c, &s, &e);
	/* The drop-in before the config.toml that imports it. */
	for (size_t i = 0; i < e.n; i++)
		if (e.f[i].changed &&
		    gp_effect_write(c, e.f[i].path, e.f[i].text, strlen(e.f[i].text),
		                    e.f[i].mode) < 0)
			goto out;
	if (restart) {
		char *const argv[] = { "systemctl", "restart", (char *)s.engine->name,
			               NULL };
		if (gp_stage_run_once(c, STAGE, s.engine->mark, e.digest, argv) < 0)
			goto out;
	}
	if (s.cdi) {
		_cleanup_free_ char *ok = NULL, *stale = cdi_problem(c, &ok);
		char *const argv[] = { "nvidia-ctk", "cdi", "generate",
			               "--output=" CDI_SPEC, NULL };
		if (stale && gp_effect_run(c, argv) < 0)
			goto out;
	}
	rc = 0;
out:
	engine_cfg_free(&e);
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

/* containerd's and CRI-O's runtime: what install would write is there. */
static void verify_dropins(struct gp_ctx *c, const struct ctk *s, struct gp_report *rep,
                           const char *install)
{
	struct engine_cfg e;
	_cleanup_free_ char *check = gp_xasprintf("%s runtime", s->engine->name);
	if (engine_config(c, s, &e) < 0) {
		gp_report_add(rep, "container_toolkit.runtime", GP_FAIL, check,
		              "fix the file, then run install again", "%s", c->err->msg);
		return;
	}
	struct gp_buf why = { 0 };
	if (e.any_changed)
		engine_why(c, s, &e, false, &why);
	if (why.len)
		gp_report_add(rep, "container_toolkit.runtime", GP_FAIL, check, install,
		              "%s", why.data);
	else
		gp_report_add(rep, "container_toolkit.runtime", GP_PASS, check, NULL,
		              "%s configures the nvidia runtime (%s)%s%s", e.f[0].path,
		              RUNTIME_ABS, s->rt.set_default ? " as the default" : "",
		              e.n > 1 ? ", imported by " CONTAINERD_CONFIG : "");
	gp_buf_free(&why);
	engine_cfg_free(&e);
}

/* --- the test container -------------------------------------------------- */

#define FINDING_CONTAINER "container_toolkit.container"

/* What to do about a failed `docker run`, from docker's own words (the
 * known failures of docs/reference/nvidia-container-toolkit.md). */
static const char *container_hint(const char *output)
{
	static const struct {
		const char *says, *hint;
	} known[] = {
		{ "could not select device driver \"cdi\"",
		  "docker's CDI support is off: docker 25 or later with the \"cdi\" "
		  "feature in /etc/docker/daemon.json (on by default since 28.2)" },
		{ "could not select device driver",
		  "docker has no nvidia runtime, or was not restarted since it got "
		  "one: run gpuprov install (it restarts docker), or `systemctl "
		  "restart docker`" },
		{ "unresolvable CDI devices",
		  "the CDI spec lacks the device or is stale: set cdi_spec and run "
		  "gpuprov install, which regenerates /etc/cdi/nvidia.yaml (a spec "
		  "in /var/run/cdi overrides it: remove a stale one)" },
		{ "Failed to initialize NVML: Unknown Error",
		  "the container lost its GPU devices (with the systemd cgroup driver "
		  "after `systemctl daemon-reload`): use CDI (cdi_spec) or docker's "
		  "cgroupfs driver, and restart the container" },
		{ "\"nvidia-container-cli\": executable file not found",
		  "ctr's --gpus hook runs nvidia-container-cli, which is not on "
		  "PATH: it comes with libnvidia-container-tools; run gpuprov "
		  "install" },
		{ "nvidia-container-cli: initialization error",
		  "nvidia-container-cli could not reach the driver: check that the "
		  "nvidia module is loaded (`gpuprov verify --only driver`)" },
		{ "Failed to initialize NVML: Driver/library version mismatch",
		  "the loaded kernel module and the driver's libraries differ: "
		  "reboot after the driver upgrade" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (strstr(output, known[i].says))
			return known[i].hint;
	return "read the engine's message above; `gpuprov verify` without a test "
	       "image checks the configuration alone";
}

/* Runs a read-only docker, podman or ctr command: 0 with *res, or -1
 * when it could not run (*why set, allocated). */
static int engine_cli(struct gp_ctx *c, char *const argv[], struct gp_run_result *res,
                      char **why)
{
	int rc = gp_ctx_run_readonly(c, argv, res);
	if (rc < 0) {
		*why = gp_xasprintf("cannot run %s: %s", argv[0], strerror(-rc));
		return -1;
	}
	return 0;
}

/* The GPUs `nvidia-smi -L` listed: lines "GPU <n>: ...". */
static size_t listed_gpus(const char *output)
{
	size_t n = 0;
	for (const char *l = output; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		n += !strncmp(l, "GPU ", 4) && l[4] >= '0' && l[4] <= '9';
	return n;
}

/* Whether output has a line that is exactly line. */
static bool has_line(const char *output, const char *line)
{
	size_t n = strlen(line);
	for (const char *l = output; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, line, n) && (l[n] == '\n' || l[n] == '\0'))
			return true;
	return false;
}

#define PODMAN "/usr/bin/podman"
#define CTR "/usr/bin/ctr"
/* nerdctl's release tarball installs to /usr/local/bin, distributions to
 * /usr/bin. */
static const char *const nerdctl_paths[] = { "/usr/bin/nerdctl",
	                                     "/usr/local/bin/nerdctl" };
/* ctr asks for GPUs one index at a time: a bound on its argv. */
#define CTR_MAX_GPUS 64
#define CDI_ALL_GPUS "nvidia.com/gpu=all"

/* Where nerdctl is installed, or NULL. By its path: /usr/local/bin is not
 * on the commands' PATH (GP_RUN_PATH). */
static const char *nerdctl_path(struct gp_ctx *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(nerdctl_paths); i++)
		if (gp_ctx_exists(c, nerdctl_paths[i]))
			return nerdctl_paths[i];
	return NULL;
}

/* The tool that runs the test container, beside the profile's engine. */
enum container_cli { CLI_DOCKER, CLI_PODMAN, CLI_CTR, CLI_NERDCTL, CLI_NONE };
static const char *const cli_names[] = { "docker", "podman", "ctr", "nerdctl" };

static enum container_cli container_cli(struct gp_ctx *c, const struct ctk *s)
{
	if (s->engine == &engines[0])
		return CLI_DOCKER;
	if (s->engine == &engines[2])
		return gp_ctx_exists(c, PODMAN) ? CLI_PODMAN : CLI_NONE;
	if (!s->nerdctl)
		return gp_ctx_exists(c, CTR) ? CLI_CTR : CLI_NONE;
	return nerdctl_path(c) ? CLI_NERDCTL : CLI_NONE;
}

/* Whether a CDI spec is there for ctr and nerdctl to resolve the GPUs
 * from (they read it on the client side). */
static bool cdi_spec_present(struct gp_ctx *c)
{
	return gp_ctx_exists(c, CDI_SPEC) || gp_ctx_exists(c, CDI_RUN_SPEC);
}

/* The argv of a containerd client (ctr or nerdctl) in the profile's
 * namespace: "TOOL --namespace NS", the words after it appended. */
static char **containerd_argv(struct gp_ctx *c, enum container_cli cli,
                              const struct ctk *s, const char *const *words, size_t *n)
{
	char **argv = NULL;
	*n = 0;
	const char *nerdctl = cli == CLI_NERDCTL ? nerdctl_path(c) : NULL;
	gp_strv_append(&argv, n, nerdctl ? nerdctl : cli_names[cli]);
	gp_strv_append(&argv, n, "--namespace");
	gp_strv_append(&argv, n, s->ns);
	for (size_t i = 0; words[i]; i++)
		gp_strv_append(&argv, n, words[i]);
	return argv;
}

/* The test run's argv for ctr or nerdctl (allocated, NULL-terminated).
 * With a CDI spec, every GPU as the CDI device (`ctr run --device`,
 * containerd 1.7 and later; nerdctl's --device); without one, ctr's
 * `--gpus INDEX` for each GPU (its hook runs nvidia-container-cli; ctr
 * wants a container id too), nerdctl's `--gpus all`. NULL with *why set
 * when ctr's GPUs cannot be named. */
static char **containerd_run_argv(struct gp_ctx *c, enum container_cli cli,
                                  const struct ctk *s, size_t gpus, char **why)
{
	bool cdi = cdi_spec_present(c);
	if (cli == CLI_CTR && !cdi && (!gpus || gpus > CTR_MAX_GPUS)) {
		*why = gpus ? gp_xasprintf("%zu GPUs on the PCI bus: more than ctr's "
		                           "test run names (%d)",
		                           gpus, CTR_MAX_GPUS)
		            : gp_xstrdup("no NVIDIA GPU on the PCI bus to give the ctr "
		                         "test container");
		return NULL;
	}
	static const char *const ctr_head[] = { "run", "--rm", NULL };
	static const char *const nerdctl_head[] = { "run", "--rm", "--pull=never", NULL };
	size_t n;
	char **argv = containerd_argv(c, cli, s, cli == CLI_CTR ? ctr_head : nerdctl_head,
	                              &n);
	if (cdi) {
		gp_strv_append(&argv, &n, "--device");
		gp_strv_append(&argv, &n, CDI_ALL_GPUS);
	} else if (cli == CLI_NERDCTL) {
		gp_strv_append(&argv, &n, "--gpus");
		gp_strv_append(&argv, &n, "all");
	} else
		for (size_t i = 0; i < gpus; i++) {
			_cleanup_free_ char *index = gp_xasprintf("%zu", i);
			gp_strv_append(&argv, &n, "--gpus");
			gp_strv_append(&argv, &n, index);
		}
	gp_strv_append(&argv, &n, s->test_image);
	if (cli == CLI_CTR) {
		_cleanup_free_ char *id = gp_xasprintf("gpuprov-verify-%ld",
		                                       (long)getpid());
		gp_strv_append(&argv, &n, id);
	}
	gp_strv_append(&argv, &n, "nvidia-smi");
	gp_strv_append(&argv, &n, "-L");
	return argv;
}

/* Whether the image is there for the tool, never pulled; *down when the
 * engine's daemon does not answer. 0, or -1 with *why set. */
static int image_present(struct gp_ctx *c, const struct ctk *s, enum container_cli cli,
                         bool *present, bool *down, char **why)
{
	char *image = (char *)s->test_image;
	char *const inspect[] = { "docker",  "image", "inspect", "--format",
		                  "{{.Id}}", image,   NULL };
	char *const exists[] = { "podman", "image", "exists", image, NULL };
	/* ctr: only images with all their content; both in the namespace. */
	const char *const ctr_check[] = { "images", "check", "-q", NULL };
	const char *const nerdctl_inspect[] = { "image",   "inspect", "--format",
		                                "{{.ID}}", image,     NULL };
	bool containerd = cli == CLI_CTR || cli == CLI_NERDCTL;
	size_t n;
	_cleanup_strv_ char **client =
	    containerd ? containerd_argv(c, cli, s,
	                                 cli == CLI_CTR ? ctr_check : nerdctl_inspect, &n)
	               : NULL;
	char *const *argv = containerd ? client : cli == CLI_PODMAN ? exists : inspect;
	struct gp_run_result res = { 0 };
	if (engine_cli(c, argv, &res, why) < 0)
		return -1;
	bool ok = gp_run_succeeded(&res);
	*present = ok && (cli != CLI_CTR || has_line(res.output, image));
	*down = res.output &&
	        (containerd
	             ? !ok && strstr(res.output, "containerd.sock")
	             : !!strstr(res.output, "Cannot connect to the Docker daemon"));
	gp_run_result_free(&res);
	return 0;
}

/* With test_image, on the live host with docker running (or, beside
 * CRI-O, podman installed: it has no daemon; beside containerd, ctr with
 * containerd running) and the image there: the image run with every GPU
 * must list them all. */
static void verify_container(struct gp_ctx *c, const struct ctk *s, struct gp_report *rep)
{
	const char *check = "test container";
	if (!s->test_image)
		return;
	enum container_cli cli = container_cli(c, s);
	if (!gp_root_is_host(&c->root) || cli == CLI_NONE) {
		gp_report_add(
		    rep, FINDING_CONTAINER, GP_SKIP, check, NULL, "%s",
		    !gp_root_is_host(&c->root)
		        ? "containers run on the live host only, not under --root"
		    : s->nerdctl ? "nerdctl (containerd_client) is not installed: "
		                   "it runs the test image beside containerd"
		                 : "only docker, podman beside CRI-O, or ctr beside "
		                   "containerd runs the test image");
		return;
	}
	const char *tool = cli_names[cli];
	char *image = (char *)s->test_image;
	bool containerd = cli == CLI_CTR || cli == CLI_NERDCTL;
	struct gp_run_result res = { 0 };
	_cleanup_free_ char *why = NULL;
	bool present = false, down = false;
	if (image_present(c, s, cli, &present, &down, &why) < 0) {
		gp_report_add(rep, FINDING_CONTAINER, GP_SKIP, check, NULL, "%s", why);
		return;
	}
	if (down) {
		gp_report_add(rep, FINDING_CONTAINER, GP_SKIP, check, NULL,
		              "%s is not running: the test image is run when it is",
		              containerd ? "containerd" : "docker");
		return;
	}
	if (!present) {
		_cleanup_free_ char *where = gp_xasprintf(" --namespace %s", s->ns);
		_cleanup_free_ char *hint = gp_xasprintf(
		    "gpuprov never pulls: `%s%s %spull` it yourself, or name an image "
		    "that is here%s%s%s",
		    tool, containerd ? where : "", cli == CLI_CTR ? "images " : "",
		    cli == CLI_CTR ? " by its full name, as `ctr" : "",
		    cli == CLI_CTR ? where : "",
		    cli == CLI_CTR ? " images check -q` lists it "
		                     "(docker.io/library/ubuntu:24.04)"
		                   : "");
		gp_report_add(rep, FINDING_CONTAINER, GP_WARN, check, hint,
		              "the test image %s is not on this host%s%s", image,
		              containerd ? " in containerd's namespace " : "",
		              containerd ? s->ns : "");
		return;
	}
	char *const with_cdi[] = {
		(char *)tool,         "run", "--rm",       "--pull=never", "--device",
		"nvidia.com/gpu=all", image, "nvidia-smi", "-L",           NULL
	};
	char *const with_gpus[] = { "docker", "run", "--rm", "--pull=never",
		                    "--gpus", "all", image,  "nvidia-smi",
		                    "-L",     NULL };
	size_t want = gpu_count(c);
	_cleanup_strv_ char **client_argv = NULL;
	if (containerd && !(client_argv = containerd_run_argv(c, cli, s, want, &why))) {
		gp_report_add(rep, FINDING_CONTAINER, GP_SKIP, check, NULL, "%s", why);
		return;
	}
	/* podman asks for GPUs as CDI devices only. */
	char *const *argv = client_argv                   ? client_argv
	                    : cli == CLI_PODMAN || s->cdi ? with_cdi
	                                                  : with_gpus;
	if (engine_cli(c, argv, &res, &why) < 0) {
		gp_report_add(rep, FINDING_CONTAINER, GP_SKIP, check, NULL, "%s", why);
		return;
	}
	_cleanup_free_ char *shown = gp_argv_display((char **)argv);
	size_t got = res.output ? listed_gpus(res.output) : 0;
	if (gp_run_succeeded(&res) && got && (!want || got == want))
		gp_report_add(rep, FINDING_CONTAINER, GP_PASS, check, NULL,
		              "`%s` lists %zu GPU%s", shown, got, got == 1 ? "" : "s");
	else if (gp_run_succeeded(&res))
		gp_report_add(rep, FINDING_CONTAINER, GP_FAIL, check,
		              "a GPU the host has is not given to containers: check the "
		              "CDI spec (cdi_spec) and the runtime",
		              "`%s` lists %zu GPU%s; the host has %zu", shown, got,
		              got == 1 ? "" : "s", want);
	else {
		_cleanup_free_ char *how = gp_run_describe(&res, c->cmd_timeout_ms);
		_cleanup_free_ char *said = res.output ? gp_output_excerpt(res.output,
		                                                           NULL, 4, 600)
		                                       : NULL;
		gp_report_add(rep, FINDING_CONTAINER, GP_FAIL, check,
		              container_hint(res.output ? res.output : ""), "`%s` %s%s%s",
		              shown, how, said && *said ? ": " : "", said ? said : "");
	}
	gp_run_result_free(&res);
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
	if (s.engine != &engines[0])
		verify_dropins(c, &s, rep, install);
	else if (daemon_merge(c, &s, &merged, &changed, &mode) < 0) {
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
	if (s.cdi) {
		_cleanup_free_ char *ok = NULL, *stale = cdi_problem(c, &ok);
		if (stale)
			gp_report_add(rep, "container_toolkit.cdi_spec", GP_FAIL,
			              "CDI spec", install, "%s", stale);
		else
			gp_report_add(rep, "container_toolkit.cdi_spec", GP_PASS,
			              "CDI spec", NULL, "%s", ok);
	}
	if (s.cdi)
		verify_cdi_shadow(c, rep);
	verify_container(c, &s, rep);
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
