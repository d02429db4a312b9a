/* Stage nouveau: keep nouveau (and nova_core) off NVIDIA GPUs.
 * check:  the root's modprobe configuration, as libkmod reads it, has
 *         "blacklist nouveau" and "options nouveau modeset=0" (any file
 *         counts, NVIDIA's own included); the initramfs was rebuilt after
 *         that configuration last changed; nouveau/nova_core loaded or bound.
 * apply:  writes the blacklist file, rebuilds the initramfs chrooted, and
 *         asks for a reboot when nouveau or nova_core is still in use.
 * verify: blacklist seen by libkmod, neither module loaded, no NVIDIA GPU
 *         bound to them. */
#include <string.h>

#include "gpuprov/drift.h"
#include "gpuprov/json.h"
#include "gpuprov/modprobe.h"
#include "gpuprov/modules.h"
#include "gpuprov/pci.h"
#include "gpuprov/run.h"
#include "gpuprov/stages.h"

#define DEFAULT_BLACKLIST_FILE "/etc/modprobe.d/blacklist-nouveau.conf"
#define MARK_INITRAMFS "initramfs_rebuilt_for"

/* --- profile keys (stages.nouveau) --------------------------------------- */

#define KEY_BLACKLIST_FILE "blacklist_file"
#define KEY_INITRAMFS "initramfs"

static char *modprobe_file(const cJSON *v, size_t i)
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
	return gp_schema_why_got(s,
	                         "must be a .conf file directly in /etc/modprobe.d (or "
	                         "/lib/modprobe.d), where modprobe reads it");
}

static const struct gp_value_check check_modprobe_file = {
	.check = modprobe_file,
	.schema = "{\"pattern\": \"^/(?:etc|lib)/modprobe\\\\.d/[^/]+\\\\.conf$\"}",
};

static const struct gp_key nouveau_keys[] = {
	GP_KEY_STRING_ROW(KEY_BLACKLIST_FILE, &check_modprobe_file,
	                  .doc = "The modprobe file written: a .conf file directly in "
	                         "/etc/modprobe.d or /lib/modprobe.d (libkmod does not "
	                         "read /usr/lib/modprobe.d).",
	                  .default_value = "\"" DEFAULT_BLACKLIST_FILE "\"",
	                  .example = "\"/etc/modprobe.d/blacklist-nouveau.conf\""),
	GP_KEY_STRINGS_ROW(KEY_INITRAMFS, &gp_check_argv,
	                   .doc = "The initramfs command for this stage; empty or "
	                          "absent: distro.initramfs.",
	                   .example = "[\"dracut\", \"--force\"]"),
	GP_KEY_END,
};

static char *blacklist_text(void)
{
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage nouveau): keeps nouveau and nova_core off NVIDIA");
	gp_buf_puts(
	    &b,
	    "# GPUs so the NVIDIA driver can bind them. modeset=0 also stops a nouveau\n"
	    "# that is loaded anyway (blacklist only stops loading by alias).\n"
	    "blacklist nouveau\n"
	    "options nouveau modeset=0\n"
	    "blacklist nova_core\n");
	return gp_buf_steal(&b);
}

struct nouveau_facts {
	bool blacklisted; /* blacklist nouveau + modeset=0 */
	bool nova_blacklisted;
	bool initramfs_current;
	char fingerprint[65]; /* of the nouveau-related modprobe config */
	enum gp_tristate nouveau_loaded;
	enum gp_tristate nova_loaded;
	char *bound; /* "0000:17:00.0 (nouveau)", or NULL */
};

static void nouveau_facts_free(struct nouveau_facts *f)
{
	free(f->bound);
}

static const char *blacklist_file(const cJSON *cfg)
{
	return gp_json_string(cfg, KEY_BLACKLIST_FILE, DEFAULT_BLACKLIST_FILE);
}

/* A digest of every modprobe file that mentions nouveau or nova, as the
 * target will look after the planned writes: the initramfs must have been
 * rebuilt for exactly this configuration. */
static void config_fingerprint(struct gp_ctx *c, const char *our_file, char out[65])
{
	char **files = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < GP_MODPROBE_DIRS; i++) {
		char **names = NULL;
		if (gp_root_list_dir(&c->root, gp_modprobe_dirs[i], &names) < 0)
			continue;
		for (size_t j = 0; names[j]; j++) {
			if (!gp_str_ends_with(names[j], ".conf"))
				continue;
			char *p = gp_xasprintf("%s/%s", gp_modprobe_dirs[i], names[j]);
			if (!gp_strv_contains(files, p))
				gp_strv_push(&files, p);
			free(p);
		}
		gp_strv_free(names);
	}
	if (!gp_strv_contains(files, our_file))
		gp_strv_push(&files, our_file);
	struct gp_buf b = { 0 };
	for (size_t i = 0; files[i]; i++) {
		_cleanup_free_ char *text = NULL;
		size_t len = 0;
		if (gp_ctx_read(c, files[i], &text, &len) < 0)
			continue;
		if (!strstr(text, "nouveau") && !strstr(text, "nova"))
			continue;
		gp_buf_printf(&b, "%s\n", files[i]);
		gp_buf_append(&b, text, len);
	}
	gp_sha256_hex(b.data ? b.data : "", b.len, out);
	gp_buf_free(&b);
	gp_strv_free(files);
}

static int gather(struct gp_ctx *c, const cJSON *cfg, struct nouveau_facts *f)
{
	*f = (struct nouveau_facts){ 0 };
	static const char *const modules[] = { "nouveau", "nova_core", NULL };
	struct gp_modprobe_facts mp[2] = { 0 };
	int rc = gp_modprobe_query_modules(&c->root, modules, mp);
	if (rc < 0) {
		_cleanup_free_ char *why = mp[0].error ? TAKE_PTR(mp[0].error)
		                                       : gp_xstrdup(strerror(-rc));
		gp_modprobe_facts_free(&mp[0]);
		gp_modprobe_facts_free(&mp[1]);
		return gp_fail(
		    c->err, GP_EFAILED,
		    "nouveau: cannot read the modprobe configuration under %s: "
		    "%s; make it a regular file or remove it",
		    c->root.dir, why);
	}
	f->blacklisted = mp[0].blacklisted &&
	                 gp_modprobe_option_is(&mp[0], "modeset", "0");
	f->nova_blacklisted = mp[1].blacklisted;
	gp_modprobe_facts_free(&mp[0]);
	gp_modprobe_facts_free(&mp[1]);

	config_fingerprint(c, blacklist_file(cfg), f->fingerprint);
	f->initramfs_current = gp_stage_mark_is(c, "nouveau", MARK_INITRAMFS,
	                                        f->fingerprint);
	f->nouveau_loaded = gp_module_loaded(&c->root, "nouveau");
	f->nova_loaded = gp_module_loaded(&c->root, "nova_core");

	struct gp_pci_list pci = { 0 };
	if (gp_pci_scan(&c->root, &pci) == 0) {
		struct gp_buf b = { 0 };
		for (size_t i = 0; i < pci.n; i++) {
			const struct gp_pci_device *d = &pci.devs[i];
			if (d->vendor != 0x10de || !d->driver)
				continue;
			if (strcmp(d->driver, "nouveau") &&
			    strcmp(d->driver, "nova_core") &&
			    strcmp(d->driver, "nova-core"))
				continue;
			gp_buf_printf(&b, "%s%s (%s)", b.len ? ", " : "", d->address,
			              d->driver);
		}
		f->bound = b.len ? gp_buf_steal(&b) : NULL;
		gp_buf_free(&b);
		gp_pci_list_free(&pci);
	}
	return 0;
}

static bool in_use(const struct nouveau_facts *f)
{
	return f->nouveau_loaded == GP_YES || f->nova_loaded == GP_YES || f->bound;
}

/* nova_core can bind the GPU even with nouveau blacklisted: when it is in
 * use, its own blacklist line is required too. */
static bool config_done(const struct nouveau_facts *f)
{
	bool nova_in_use = f->nova_loaded == GP_YES ||
	                   (f->bound && strstr(f->bound, "nova"));
	return f->blacklisted && (f->nova_blacklisted || !nova_in_use);
}

static char *in_use_text(const struct nouveau_facts *f)
{
	struct gp_buf b = { 0 };
	if (f->nouveau_loaded == GP_YES)
		gp_buf_puts(&b, "nouveau is loaded");
	if (f->nova_loaded == GP_YES)
		gp_buf_printf(&b, "%snova_core is loaded", b.len ? ", " : "");
	if (f->bound)
		gp_buf_printf(&b, "%sbound: %s", b.len ? ", " : "", f->bound);
	return gp_buf_steal(&b);
}

/* The initramfs command, resolved in the root. -1 with c->err set when the
 * profile names none (exit 65); *missing set when the root lacks it. */
static int initramfs_tool(struct gp_ctx *c, const cJSON *cfg, char ***argv, bool *missing)
{
	*argv = gp_profile_initramfs_command(c->profile, cfg);
	if (!*argv)
		return gp_fail(c->err, GP_EINPUT,
		               "%s: stage nouveau needs an initramfs command: set "
		               "\"distro\": {\"initramfs\": [...]} (update-initramfs -u "
		               "on Debian/Ubuntu, dracut --force on RHEL)",
		               c->profile->path);
	_cleanup_free_ char *resolved = NULL;
	*missing = gp_run_resolve(c->root.dir, (*argv)[0], &resolved) < 0;
	return 0;
}

static int nouveau_check(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	struct nouveau_facts f;
	if (gather(c, cfg, &f) < 0)
		return -1;
	_cleanup_strv_ char **initramfs = NULL;
	bool tool_missing = false;
	if (initramfs_tool(c, cfg, &initramfs, &tool_missing) < 0) {
		nouveau_facts_free(&f);
		return -1;
	}
	_cleanup_free_ char *use = in_use_text(&f);
	if ((!config_done(&f) || !f.initramfs_current) && tool_missing) {
		gp_check_set(
		    ck, GP_STATE_BLOCKED,
		    "the initramfs must be rebuilt but %s is not installed in %s; "
		    "install it (initramfs-tools on Debian/Ubuntu, dracut on RHEL) "
		    "or set distro.initramfs in the profile",
		    initramfs[0], c->root.dir);
	} else if (!config_done(&f) || !f.initramfs_current) {
		struct gp_buf why = { 0 };
		if (!config_done(&f))
			gp_buf_puts(&why, "nouveau is not blacklisted with modeset=0");
		if (!f.initramfs_current)
			gp_buf_printf(&why,
			              "%sinitramfs not rebuilt for the current blacklist",
			              why.len ? "; " : "");
		if (in_use(&f))
			gp_buf_printf(&why, "; %s (a reboot will follow)", use);
		else if (f.nouveau_loaded == GP_UNKNOWN)
			gp_buf_puts(&why, "; whether nouveau is loaded is unknown "
			                  "(no proc/modules in the root)");
		gp_check_set(ck, GP_STATE_NEEDED, "%s", why.data);
		gp_buf_free(&why);
	} else if (in_use(&f)) {
		gp_check_set(
		    ck, GP_STATE_REBOOT_PENDING,
		    "blacklist in place and initramfs rebuilt, but %s; reboot to "
		    "unload it",
		    use);
	} else if (f.nouveau_loaded == GP_UNKNOWN) {
		gp_check_set(
		    ck, GP_STATE_SATISFIED,
		    "blacklisted with modeset=0, initramfs rebuilt; whether nouveau is "
		    "loaded is unknown (no %s/proc/modules)",
		    gp_root_is_host(&c->root) ? "" : c->root.dir);
	} else {
		gp_check_set(ck, GP_STATE_SATISFIED,
		             "blacklisted with modeset=0, initramfs rebuilt, not loaded");
	}
	nouveau_facts_free(&f);
	return 0;
}

static int nouveau_apply(struct gp_ctx *c, const cJSON *cfg)
{
	struct nouveau_facts f;
	if (gather(c, cfg, &f) < 0)
		return -1;
	_cleanup_strv_ char **initramfs = NULL;
	bool tool_missing;
	int rc = initramfs_tool(c, cfg, &initramfs, &tool_missing);
	if (rc < 0)
		goto out;
	/* Drifted (src/stages/drift.c): written again although libkmod may
	 * read the edited file the same. */
	if (!config_done(&f) || gp_drift_file_changed(c, blacklist_file(cfg))) {
		_cleanup_free_ char *text = blacklist_text();
		rc = gp_effect_write(c, blacklist_file(cfg), text, strlen(text), 0644);
		if (rc < 0)
			goto out;
		config_fingerprint(c, blacklist_file(cfg), f.fingerprint);
	}
	rc = gp_stage_run_once(c, "nouveau", MARK_INITRAMFS, f.fingerprint, initramfs);
	if (rc < 0)
		goto out;
	if (in_use(&f)) {
		_cleanup_free_ char *use = in_use_text(&f);
		_cleanup_free_ char *why = gp_xasprintf(
		    "%s; the blacklist takes effect at the next boot", use);
		gp_effect_reboot(c, why);
	}
out:
	nouveau_facts_free(&f);
	return rc;
}

static void verify_loaded(struct gp_ctx *c, struct gp_report *rep, const char *id,
                          const char *module, enum gp_tristate loaded)
{
	_cleanup_free_ char *check = gp_xasprintf("%s not loaded", module);
	if (loaded == GP_NO)
		gp_report_add(rep, id, GP_PASS, check, NULL, "%s is not loaded", module);
	else if (loaded == GP_YES)
		gp_report_add(
		    rep, id, GP_FAIL, check,
		    "reboot; if it is still loaded after the reboot, check that the "
		    "initramfs was rebuilt and that the kernel command line does not "
		    "load it",
		    "%s is loaded", module);
	else
		gp_report_add(
		    rep, id, GP_WARN, check,
		    "run verify on the live system (not an image) to see loaded modules",
		    "unknown: %s/proc/modules is missing",
		    gp_root_is_host(&c->root) ? "" : c->root.dir);
}

static int nouveau_verify(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep)
{
	struct nouveau_facts f;
	if (gather(c, cfg, &f) < 0)
		return -1;
	_cleanup_free_ char *install = gp_install_hint(c, "nouveau");
	_cleanup_free_ char *write_hint = gp_xasprintf("%s to write the blacklist",
	                                               install);
	_cleanup_free_ char *rebuild_hint = gp_xasprintf(
	    "%s to rebuild it; otherwise the initramfs may still load nouveau at "
	    "boot",
	    install);
	if (f.blacklisted)
		gp_report_add(rep, "nouveau.blacklist", GP_PASS, "blacklist", NULL,
		              "libkmod reads \"blacklist nouveau\" and \"options nouveau "
		              "modeset=0\"");
	else
		gp_report_add(rep, "nouveau.blacklist", GP_FAIL, "blacklist", write_hint,
		              "nouveau is %s in the modprobe configuration",
		              "not blacklisted with modeset=0");
	if (f.initramfs_current)
		gp_report_add(rep, "nouveau.initramfs", GP_PASS, "initramfs", NULL,
		              "rebuilt after the blacklist was written");
	else
		gp_report_add(
		    rep, "nouveau.initramfs", GP_FAIL, "initramfs", rebuild_hint,
		    "not rebuilt by gpuprov since the modprobe configuration changed");
	verify_loaded(c, rep, "nouveau.loaded.nouveau", "nouveau", f.nouveau_loaded);
	verify_loaded(c, rep, "nouveau.loaded.nova_core", "nova_core", f.nova_loaded);
	if (f.bound)
		gp_report_add(
		    rep, "nouveau.gpu_binding", GP_FAIL, "GPU binding",
		    "reboot so the blacklist takes effect; then the NVIDIA driver "
		    "can bind the GPU",
		    "NVIDIA GPUs bound to the wrong driver: %s", f.bound);
	else
		gp_report_add(rep, "nouveau.gpu_binding", GP_PASS, "GPU binding", NULL,
		              "no NVIDIA GPU is bound to nouveau or nova_core");
	nouveau_facts_free(&f);
	return 0;
}

const struct gp_stage gp_stage_nouveau = {
	.name = "nouveau",
	.summary = "blacklist nouveau and nova_core, rebuild the initramfs",
	.keys = nouveau_keys,
	.doc = "Blacklists nouveau and rebuilds the initramfs.",
	.check = nouveau_check,
	.apply = nouveau_apply,
	.verify = nouveau_verify,
};
