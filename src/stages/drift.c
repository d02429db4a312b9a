/* Drift against the journal: what gpuprov wrote, installed and held, and
 * what the driver needs to survive the next boot. verify runs it for each
 * stage after the stage's own verify; it reports only what drifted, each
 * finding with an id "<stage>.drift_<kind>[.<subject>]" and a hint that
 * names the command that repairs it (docs/findings.md, "Drift"); install
 * asks it whether a change is corrective and whether a stage's files
 * drifted. It reads the disk as it is (gp_root_*): the journal's records
 * are about the disk, whatever a plan has planned. Levels: fail where
 * the machine breaks (a file gone, a driver module missing for the next
 * kernel, module and libraries apart, a cuDNN file or the CUDA link
 * changed), warn where it may still work (an edit, a mode, a version
 * moved, a hold lifted). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuprov/drift.h"
#include "gpuprov/journal.h"
#include "gpuprov/json.h"
#include "gpuprov/kernelinfo.h"
#include "gpuprov/nvdriver.h"
#include "gpuprov/nvproc.h"
#include "gpuprov/pkg.h"
#include "gpuprov/sha256.h"
#include "gpuprov/stages.h"

bool gp_drift_stage_applied(const struct gp_ctx *c, const char *stage)
{
	const char *state = gp_json_string(gp_journal_stage_get(&c->journal, stage),
	                                   "state", NULL);
	return gp_streq(state, "done") || gp_streq(state, "satisfied") ||
	       gp_streq(state, "reboot_pending");
}

char *gp_drift_settings_digest(const struct gp_ctx *c, const cJSON *cfg)
{
	_cleanup_free_ char *printed = cJSON_PrintUnformatted(cfg);
	/* The profile's name too: the stages write it into their files. */
	_cleanup_free_ char *text = gp_xasprintf("%s\n%s", c->profile->name,
	                                         printed ? printed : "");
	char sha[65];
	gp_sha256_hex(text, strlen(text), sha);
	return gp_xstrdup(sha);
}

bool gp_drift_corrective(const struct gp_ctx *c, const char *stage, const cJSON *cfg,
                         const char *profile_digest)
{
	if (!gp_drift_stage_applied(c, stage))
		return false;
	const char *recorded = gp_json_string(gp_journal_stage_get(&c->journal, stage),
	                                      "settings_sha256", NULL);
	if (!recorded) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(c->journal.doc,
		                                                  "profile");
		return gp_streq(gp_json_string(p, "sha256", NULL), profile_digest);
	}
	_cleanup_free_ char *now = gp_drift_settings_digest(c, cfg);
	return gp_streq(recorded, now);
}

/* --- files and packages the journal records ------------------------------ */

/* "<stage>.drift_<kind>.<subject>": the finding shape every file and
 * package kind shares, one check per subject (tests/e2e/findings_check.py). */
static void add_drift(struct gp_report *rep, const char *base, const char *subject,
                      enum gp_level level, const char *check, const char *hint,
                      const char *evidence)
{
	_cleanup_free_ char *what = gp_xasprintf("%s %s", check, subject);
	gp_report_add_subject(rep, base, subject, level, what, hint, "%s", evidence);
}

enum file_drift { FILE_INTACT, FILE_REMOVED, FILE_EDITED, FILE_MODE };

/* How the file gpuprov recorded (rec) differs from it now; *st is what is
 * there (for FILE_EDITED and FILE_MODE). A file that cannot be looked at
 * is left to the stage's own verify. */
static enum file_drift classify(struct gp_ctx *c, struct gp_root_dir *d, const char *path,
                                const cJSON *rec, struct stat *st)
{
	int rc = gp_root_lstat_in(&c->root, d, path, st);
	if (rc == -ENOENT)
		return FILE_REMOVED;
	bool hashed;
	if (rc < 0)
		return FILE_INTACT;
	if (!S_ISREG(st->st_mode) ||
	    !gp_ctx_recorded_stat_intact(c, d, path, st, false, &hashed))
		return FILE_EDITED;
	char mode[16], owner[32];
	snprintf(mode, sizeof mode, "%04o", (unsigned)st->st_mode & 07777);
	snprintf(owner, sizeof owner, "%u:%u", (unsigned)st->st_uid,
	         (unsigned)st->st_gid);
	const char *want_mode = gp_json_string(rec, "mode", mode);
	const char *want_owner = gp_json_string(rec, "owner", owner);
	return gp_streq(mode, want_mode) && gp_streq(owner, want_owner) ? FILE_INTACT
	                                                                : FILE_MODE;
}

/* /run (and /var/run, its link) is emptied at every boot, and the files
 * gpuprov writes there are shared with other tools (reboot-required and
 * its .pkgs list, which others append to): gone or changed is their normal
 * life, not drift. */
static bool boot_volatile(const char *path)
{
	return gp_str_starts_with(path, "/run/") || gp_str_starts_with(path, "/var/run/");
}

/* The journal's records of the files stage wrote (not those it removed:
 * they have no sha256), one by one. */
static const cJSON *next_file(const struct gp_ctx *c, const char *stage, const cJSON *f)
{
	if (!f) {
		const cJSON *files = cJSON_GetObjectItemCaseSensitive(c->journal.doc,
		                                                      "files");
		f = files ? files->child : NULL;
	} else {
		f = f->next;
	}
	while (f && !(gp_streq(gp_json_string(f, "stage", NULL), stage) &&
	              gp_json_string(f, "sha256", NULL) && !boot_volatile(f->string)))
		f = f->next;
	return f;
}

char *gp_drift_files_summary(struct gp_ctx *c, const char *stage)
{
	static const char *const words[] = { [FILE_REMOVED] = "removed",
		                             [FILE_EDITED] = "edited",
		                             [FILE_MODE] = "changed mode or owner" };
	struct gp_buf b = { 0 };
	struct gp_root_dir dir = GP_ROOT_DIR_INIT;
	for (const cJSON *f = next_file(c, stage, NULL); f; f = next_file(c, stage, f)) {
		struct stat st;
		enum file_drift d = classify(c, &dir, f->string, f, &st);
		if (d != FILE_INTACT)
			gp_buf_printf(&b, "%s%s %s since gpuprov wrote it",
			              b.len ? ", " : "", f->string, words[d]);
	}
	gp_root_dir_close(&dir);
	return b.len ? gp_buf_steal(&b) : NULL;
}

bool gp_drift_file_changed(struct gp_ctx *c, const char *path)
{
	const cJSON *rec = gp_journal_file(&c->journal, path);
	struct stat st;
	struct gp_root_dir d = GP_ROOT_DIR_INIT;
	bool changed = rec && gp_json_string(rec, "sha256", NULL) &&
	               !boot_volatile(path) &&
	               classify(c, &d, path, rec, &st) != FILE_INTACT;
	gp_root_dir_close(&d);
	return changed;
}

static void file_drift(struct gp_ctx *c, struct gp_root_dir *dir, const char *stage,
                       const char *path, const cJSON *rec, struct gp_report *rep)
{
	struct stat st;
	enum file_drift d = classify(c, dir, path, rec, &st);
	if (d == FILE_INTACT)
		return;
	_cleanup_free_ char *install = gp_hint_command(c, "install", stage);
	/* A cuDNN file is a library a program loads: changed is broken. */
	bool cudnn = gp_streq(stage, "cudnn");
	if (d == FILE_REMOVED) {
		_cleanup_free_ char *base = cudnn ? gp_xstrdup("cudnn.drift_cudnn_file")
		                                  : gp_xasprintf("%s.drift_file_removed",
		                                                 stage);
		_cleanup_free_ char *hint = gp_xasprintf("'%s' writes it again", install);
		_cleanup_free_ char *ev = gp_xstrdup("gpuprov wrote it; it is gone");
		add_drift(rep, base, path, GP_FAIL,
		          cudnn ? "drift: cuDNN file" : "drift: file removed", hint, ev);
	} else if (d == FILE_EDITED) {
		_cleanup_free_ char *base = cudnn ? gp_xstrdup("cudnn.drift_cudnn_file")
		                                  : gp_xasprintf("%s.drift_file_edited",
		                                                 stage);
		_cleanup_free_ char *hint = gp_xasprintf(
		    "'%s' restores it; the edited copy is backed up to %s first", install,
		    GP_BACKUP_DIR);
		_cleanup_free_ char *ev = gp_xasprintf(
		    "%s since gpuprov wrote it (sha256 %s)",
		    S_ISREG(st.st_mode) ? "edited" : "no regular file any more",
		    gp_json_string(rec, "sha256", ""));
		add_drift(rep, base, path, cudnn ? GP_FAIL : GP_WARN,
		          cudnn ? "drift: cuDNN file" : "drift: file edited", hint, ev);
	} else {
		_cleanup_free_ char *base = gp_xasprintf("%s.drift_file_mode", stage);
		_cleanup_free_ char *hint = gp_xasprintf("'%s' sets them back", install);
		_cleanup_free_ char *ev = gp_xasprintf(
		    "mode %04o and owner %u:%u; gpuprov wrote it with %s and %s",
		    (unsigned)st.st_mode & 07777, (unsigned)st.st_uid,
		    (unsigned)st.st_gid, gp_json_string(rec, "mode", "the same"),
		    gp_json_string(rec, "owner", "the same"));
		add_drift(rep, base, path, GP_WARN, "drift: file mode", hint, ev);
	}
}

static void files_drift(struct gp_ctx *c, const char *stage, struct gp_report *rep)
{
	struct gp_root_dir dir = GP_ROOT_DIR_INIT;
	for (const cJSON *f = next_file(c, stage, NULL); f; f = next_file(c, stage, f))
		file_drift(c, &dir, stage, f->string, f, rep);
	gp_root_dir_close(&dir);
}

static int packages_drift(struct gp_ctx *c, const char *stage, struct gp_report *rep)
{
	const cJSON *pkgs = gp_journal_packages(&c->journal);
	_cleanup_free_ char *install = gp_hint_command(c, "install", stage);
	_cleanup_free_ char *version_base = gp_xasprintf("%s.drift_package_version",
	                                                 stage);
	_cleanup_free_ char *hold_base = gp_xasprintf("%s.drift_hold_lifted", stage);
	for (const cJSON *p = pkgs ? pkgs->child : NULL; p; p = p->next) {
		if (!gp_streq(gp_json_string(p, "stage", NULL), stage))
			continue;
		const char *want = gp_json_string(p, "version", "");
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, p->string, &have) < 0)
			return -1;
		if (!have || !gp_streq(have, want)) {
			_cleanup_free_ char *hint = gp_xasprintf(
			    "'%s' brings %s back to the profile (a pinned version "
			    "installed "
			    "again, held when the profile holds it)",
			    install, p->string);
			_cleanup_free_ char *ev = gp_xasprintf(
			    "%s%s; gpuprov installed %s", have ? "at " : "not installed",
			    have ? have : "", want);
			add_drift(rep, version_base, p->string, have ? GP_WARN : GP_FAIL,
			          "drift: package version", hint, ev);
		}
		const cJSON *held = cJSON_GetObjectItemCaseSensitive(p, "held");
		if (have && cJSON_IsTrue(held) && !gp_pkg_is_held(c, p->string)) {
			_cleanup_free_ char *hint = gp_xasprintf(
			    "'%s' holds it again (an unheld driver is what an unattended "
			    "upgrade moves)",
			    install);
			_cleanup_free_ char *ev = gp_xasprintf(
			    "no longer held; gpuprov held it at %s", want);
			add_drift(rep, hold_base, p->string, GP_WARN,
			          "drift: hold lifted", hint, ev);
		}
	}
	return 0;
}

void gp_drift_accept_packages(struct gp_ctx *c, const char *stage)
{
	cJSON *pkgs = cJSON_GetObjectItemCaseSensitive(c->journal.doc, "packages");
	for (cJSON *p = pkgs ? pkgs->child : NULL; p; p = p->next) {
		_cleanup_free_ char *have = NULL;
		if (gp_streq(gp_json_string(p, "stage", NULL), stage) &&
		    gp_pkg_installed(c, p->string, &have) == 0 && have)
			gp_journal_record_package(&c->journal, p->string, have, stage);
	}
}

/* --- the driver: the next kernel and the libraries ----------------------- */

static bool is_nvidia_ko(const char *name)
{
	static const char *const names[] = { "nvidia.ko", "nvidia.ko.xz", "nvidia.ko.zst",
		                             "nvidia.ko.gz" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (gp_streq(name, names[i]))
			return true;
	return false;
}

/* nvidia.ko anywhere under dir, at most depth levels down and budget
 * entries in all (a kernel's tree has some thousands). */
static bool find_nvidia_ko(const struct gp_root *r, const char *dir, int depth,
                           size_t *budget)
{
	_cleanup_strv_ char **names = NULL;
	if (depth < 0 || gp_root_list_dir(r, dir, &names) < 0)
		return false;
	for (size_t i = 0; names[i]; i++) {
		if (!*budget)
			return false;
		--*budget;
		if (is_nvidia_ko(names[i]))
			return true;
		_cleanup_free_ char *sub = gp_xasprintf("%s/%s", dir, names[i]);
		struct stat st;
		if (gp_root_lstat(r, sub, &st) == 0 && S_ISDIR(st.st_mode) &&
		    find_nvidia_ko(r, sub, depth - 1, budget))
			return true;
	}
	return false;
}

/* Is an NVIDIA module built (DKMS: updates/dkms) or packaged (Ubuntu's
 * linux-modules-nvidia-<BR>-<kver>, a runfile or kmod: kernel/, extra/)
 * for kver? */
static bool kernel_has_nvidia(const struct gp_root *r, const char *kver)
{
	static const char *const dirs[] = { "updates", "extra", "kernel" };
	size_t budget = 100000;
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		_cleanup_free_ char *d = gp_xasprintf("/lib/modules/%s/%s", kver,
		                                      dirs[i]);
		if (find_nvidia_ko(r, d, 6, &budget))
			return true;
	}
	return false;
}

char **gp_drift_kernels_without_module(const struct gp_ctx *c)
{
	char **missing = gp_xcalloc(1, sizeof(char *));
	_cleanup_free_ char *running = gp_running_kernel(&c->root);
	/* Only once the driver works for the running kernel is a newer one
	 * without it drift; before, the driver's own verify says what is missing. */
	if (!running || !kernel_has_nvidia(&c->root, running))
		return missing;
	_cleanup_strv_ char **kernels = gp_installed_kernels(&c->root);
	for (size_t i = 0; kernels[i]; i++)
		if (gp_kver_compare(kernels[i], running) > 0 &&
		    !kernel_has_nvidia(&c->root, kernels[i]))
			gp_strv_push(&missing, kernels[i]);
	return missing;
}

static void kernel_drift(struct gp_ctx *c, struct gp_report *rep)
{
	_cleanup_strv_ char **missing = gp_drift_kernels_without_module(c);
	_cleanup_free_ char *install = gp_hint_command(c, "install", "driver");
	for (size_t i = 0; missing[i]; i++) {
		const char *k = missing[i];
		_cleanup_free_ char *hint = gp_xasprintf(
		    "before rebooting, run '%s' (it runs 'dkms autoinstall -k %s' in the "
		    "root, or installs Ubuntu's prebuilt "
		    "linux-modules-nvidia-<branch>-%s "
		    "package), or run 'dkms autoinstall -k %s' yourself (it needs "
		    "linux-headers-%s); else the machine boots without the NVIDIA driver",
		    install, k, k, k, k);
		_cleanup_free_ char *check = gp_xasprintf("drift: nvidia module for %s",
		                                          k);
		gp_report_add_subject(rep, "driver.drift_kernel_module_missing", k,
		                      GP_FAIL, check, hint,
		                      "kernel %s is installed for the next boot and "
		                      "/lib/modules/%s has no nvidia module (the running "
		                      "kernel has one)",
		                      k, k);
	}
}

/* The user-space driver's version from its library file names
 * (libnvidia-ml.so.<version>) in the usual library directories. */
static char **userspace_versions(const struct gp_root *r)
{
	static const char *const dirs[] = { "/usr/lib/x86_64-linux-gnu",
		                            "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
		                            "/usr/lib" };
	static const char prefix[] = "libnvidia-ml.so.";
	char **found = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		_cleanup_strv_ char **names = NULL;
		if (gp_root_list_dir(r, dirs[i], &names) < 0)
			continue;
		for (size_t k = 0; names[k]; k++) {
			const char *v = names[k] + sizeof prefix - 1;
			/* libnvidia-ml.so.1 is the soname link, not a version. */
			if (gp_str_starts_with(names[k], prefix) && strchr(v, '.') &&
			    !gp_strv_contains(found, v))
				gp_strv_push(&found, v);
		}
	}
	return found;
}

static void library_drift(struct gp_ctx *c, struct gp_report *rep)
{
	_cleanup_free_ char *loaded = NULL;
	if (gp_nvidia_module_read(&c->root, &loaded, NULL) < 0)
		return;
	_cleanup_strv_ char **libs = userspace_versions(&c->root);
	if (!libs[0] || gp_strv_contains(libs, loaded))
		return;
	_cleanup_free_ char *list = gp_strv_join(libs, ", ");
	gp_report_add(rep, "driver.drift_driver_library_mismatch", GP_FAIL,
	              "drift: module and libraries",
	              "reboot to load the new module (the libraries were upgraded "
	              "under the running one; NVML and CUDA fail with \"Driver/library "
	              "version mismatch\" until then)",
	              "the loaded nvidia module is %s, the user-space libraries "
	              "(libnvidia-ml.so.<version>) are %s",
	              loaded, list);
}

int gp_drift_verify(struct gp_ctx *c, const char *stage, const cJSON *cfg,
                    struct gp_report *rep)
{
	files_drift(c, stage, rep);
	if (packages_drift(c, stage, rep) < 0)
		return -1;
	if (gp_streq(stage, "driver")) {
		kernel_drift(c, rep);
		library_drift(c, rep);
	}
	return 0;
}
