/* Uninstall: what the journal says a stage added, taken out again.
 *
 * The journal is the source (the package database only for reverse
 * dependencies): a package record without
 * "installed_before" is one gpuprov's install brought (removed), one with
 * it was there before (kept; its hold released when gpuprov set it; listed
 * as not undoable when gpuprov moved it to another version, since the old
 * version may be gone from every repository); a file record with a backup
 * replaced an operator's file (the backup is written back), one without it
 * is a file gpuprov created (removed); a symlink record ("link") is a link
 * gpuprov made (removed, or the operator's link it replaced,
 * "link_before", made again); a directory record ("dir") is one gpuprov
 * created (removed once nothing else is in it, else kept and named; the
 * directories below it and its links to entries within it, an extracted
 * archive's, go with it), or, "whole", one a command of gpuprov's created
 * and filled (the Python environment: removed with all in it, whatever was
 * put there since, as gpuprov cannot tell pip's files from others'; a
 * directory that was there before gpuprov is never recorded, so never
 * removed). Files
 * under /run are not undone: a boot empties them (the reboot-required flag
 * an uninstall itself writes). A stage whose packages an installed package
 * of someone else's (or of another stage this run keeps) depends on is
 * blocked: apt's remove would take it.
 * The order within a stage is the reverse of an install's: packages first,
 * then the files (repository lists and keys among them). */
#include <string.h>
#include <sys/stat.h>

#include "gpuprov/context.h"
#include "gpuprov/json.h"
#include "gpuprov/pkg.h"
#include "gpuprov/profile.h"
#include "gpuprov/undo.h"

/* What the journal holds of one stage. */
struct undo {
	char **remove; /* packages gpuprov installed */
	char **release; /* packages there before whose hold gpuprov set */
	char **kept; /* "name (VERSION before gpuprov, now NOW)": not undoable */
	char **forget; /* package records of packages there before */
	char **files; /* files gpuprov wrote, newest record first */
	char **theirs; /* packages not gpuprov's that removing remove takes along */
	char **staged; /* "name (stage S)": another stage's, taken along too */
	char **dirs; /* directories gpuprov created, deepest first */
};

bool gp_undo_volatile(const char *path)
{
	return gp_str_starts_with(path, "/run/") || gp_str_starts_with(path, "/var/run/");
}

/* Deepest (longest) first: a directory goes before the one it is in. */
static void sort_deepest_first(char **dirs)
{
	size_t nd = gp_strv_len(dirs);
	for (size_t i = 1; i < nd; i++)
		for (size_t k = i; k > 0 && strlen(dirs[k]) > strlen(dirs[k - 1]); k--) {
			char *t = dirs[k];
			dirs[k] = dirs[k - 1];
			dirs[k - 1] = t;
		}
}

/* The packages apt's remove of remove would take along that the stage did
 * not install: the operator's (u->theirs), which an uninstall must not
 * touch, and those another gpuprov stage installed (u->staged) that this
 * run does not remove first (an uninstall of every stage takes the later
 * stages first; --only driver would take the container toolkit along
 * unasked). A database that cannot be read names none (the removal then
 * fails on its own). */
static void dependents(struct gp_ctx *c, const char *stage, struct undo *u)
{
	_cleanup_strv_ char **all = NULL;
	u->theirs = gp_xcalloc(1, sizeof(char *));
	u->staged = gp_xcalloc(1, sizeof(char *));
	if (!u->remove[0] || gp_pkg_rdepends(c, (const char *const *)u->remove, &all) < 0)
		return;
	for (size_t i = 0; all[i]; i++) {
		const cJSON *rec = gp_journal_package(&c->journal, all[i]);
		const char *owner = gp_json_string(rec, "stage", NULL);
		if (!rec || gp_json_string(rec, "installed_before", NULL)) {
			gp_strv_push(&u->theirs, all[i]);
		} else if (owner && !gp_streq(owner, stage)) {
			_cleanup_free_ char *line = gp_xasprintf("%s (stage %s)", all[i],
			                                         owner);
			gp_strv_push(&u->staged, line);
		}
	}
}

static void undo_gather(struct gp_ctx *c, const char *stage, struct undo *u)
{
	*u = (struct undo){ .remove = gp_xcalloc(1, sizeof(char *)),
		            .release = gp_xcalloc(1, sizeof(char *)),
		            .kept = gp_xcalloc(1, sizeof(char *)),
		            .forget = gp_xcalloc(1, sizeof(char *)),
		            .files = gp_xcalloc(1, sizeof(char *)),
		            .dirs = gp_xcalloc(1, sizeof(char *)) };
	const cJSON *pkgs = gp_journal_packages(&c->journal);
	for (const cJSON *p = pkgs ? pkgs->child : NULL; p; p = p->next) {
		if (!gp_streq(gp_json_string(p, "stage", NULL), stage))
			continue;
		const char *before = gp_json_string(p, "installed_before", NULL);
		if (!before) {
			gp_strv_push(&u->remove, p->string);
			continue;
		}
		gp_strv_push(&u->forget, p->string);
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "hold_set")))
			gp_strv_push(&u->release, p->string);
		_cleanup_free_ char *now = NULL;
		if (gp_pkg_installed(c, p->string, &now) == 0 && now &&
		    !gp_streq(now, before)) {
			_cleanup_free_ char *line = gp_xasprintf(
			    "%s (%s before gpuprov, now %s)", p->string, before, now);
			gp_strv_push(&u->kept, line);
		}
	}
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(c->journal.doc, "files");
	size_t n = 0;
	for (const cJSON *f = files ? files->child : NULL; f; f = f->next)
		if (!gp_streq(gp_json_string(f, "stage", NULL), stage) ||
		    gp_undo_volatile(f->string))
			continue;
		else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "dir")))
			gp_strv_push(&u->dirs, f->string);
		else {
			gp_strv_push(&u->files, f->string);
			n++;
		}
	for (size_t i = 0; i < n / 2; i++) { /* newest first */
		char *t = u->files[i];
		u->files[i] = u->files[n - 1 - i];
		u->files[n - 1 - i] = t;
	}
	dependents(c, stage, u);
	sort_deepest_first(u->dirs);
}

static void undo_free(struct undo *u)
{
	gp_strv_free(u->remove);
	gp_strv_free(u->release);
	gp_strv_free(u->kept);
	gp_strv_free(u->forget);
	gp_strv_free(u->files);
	gp_strv_free(u->theirs);
	gp_strv_free(u->staged);
	gp_strv_free(u->dirs);
}

/* A directory gpuprov made whole (gp_journal_record_whole_dir)? */
static bool whole_dir(struct gp_ctx *c, const char *dir)
{
	return cJSON_IsTrue(
	    cJSON_GetObjectItemCaseSensitive(gp_journal_file(&c->journal, dir), "whole"));
}

/* Does path go in this uninstall, as this run sees it: removed by an effect
 * planned or made already, in a directory made whole that goes, or one of
 * the stage's files without a backup (a file or link gpuprov created,
 * removed below)? */
static bool goes(struct gp_ctx *c, const struct undo *u, const char *path)
{
	for (size_t i = 0; u->dirs[i]; i++) {
		size_t n = strlen(u->dirs[i]);
		if (strncmp(path, u->dirs[i], n) == 0 && path[n] == '/' &&
		    whole_dir(c, u->dirs[i]))
			return true;
	}
	bool exists;
	const char *data;
	size_t len;
	if (gp_plan_lookup_file(c->plan, path, &exists, &data, &len) && !exists)
		return true;
	const cJSON *rec = gp_journal_file(&c->journal, path);
	return gp_strv_contains(u->files, path) && !gp_json_string(rec, "backup", NULL) &&
	       !gp_json_string(rec, "link_before", NULL);
}

struct stays {
	const struct undo *u;
	char *first; /* the first entry that stays */
};

/* A symlink that names an entry beside it or below (no '/' first, no
 * ".."), as an extracted archive's own links do (libcudnn.so ->
 * libcudnn.so.8): it goes with its directory. */
static bool link_within(struct gp_ctx *c, const char *path)
{
	_cleanup_free_ char *target = NULL;
	if (gp_root_readlink(&c->root, path, &target) < 0 || target[0] == '/')
		return false;
	_cleanup_strv_ char **parts = gp_strv_split(target, '/');
	return !gp_strv_contains(parts, "..");
}

/* What stays decides: a directory below goes when its entries do. */
static void find_staying(struct gp_ctx *c, const char *path, const struct stat *st,
                         void *data)
{
	struct stays *s = data;
	if (s->first || S_ISDIR(st->st_mode) ||
	    (S_ISLNK(st->st_mode) && link_within(c, path)))
		return;
	if (!goes(c, s->u, path))
		s->first = gp_xstrdup(path);
}

/* The first entry under dir that stays (free it), or NULL: then the
 * directory gpuprov made goes too. */
static char *staying_entry(struct gp_ctx *c, const struct undo *u, const char *dir)
{
	if (whole_dir(c, dir))
		return NULL;
	struct stays s = { u, NULL };
	gp_ctx_walk(c, dir, find_staying, &s);
	return s.first;
}

char **gp_undo_emptied_dirs(struct gp_ctx *c, char *const *dirs, char *const *files)
{
	struct undo u = { .files = (char **)files, .dirs = gp_strv_copy(dirs) };
	sort_deepest_first(u.dirs);
	char **out = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; u.dirs[i]; i++) {
		_cleanup_free_ char *stay = whole_dir(c, u.dirs[i])
		                                ? gp_xstrdup(u.dirs[i])
		                                : staying_entry(c, &u, u.dirs[i]);
		if (!stay)
			gp_strv_push(&out, u.dirs[i]);
	}
	gp_strv_free(u.dirs);
	return out;
}

enum gp_stage_state gp_undo_check(struct gp_ctx *c, const char *stage, char **reason)
{
	struct undo u;
	undo_gather(c, stage, &u);
	if (u.theirs[0]) {
		_cleanup_free_ char *theirs = gp_strv_join(u.theirs, ", ");
		_cleanup_free_ char *ours = gp_strv_join(u.remove, ", ");
		*reason = gp_xasprintf(
		    "nothing changed: removing %s would take along %s, which gpuprov "
		    "did not install and which depend%s on them (apt's remove "
		    "removes what depends on a package it removes); remove %s "
		    "first (apt-get remove %s), or keep this stage (--skip %s), "
		    "then run gpuprov uninstall again",
		    ours, theirs, u.theirs[1] ? "" : "s", u.theirs[1] ? "them" : "it",
		    theirs, stage);
		undo_free(&u);
		return GP_STATE_BLOCKED;
	}
	if (u.staged[0]) {
		_cleanup_free_ char *staged = gp_strv_join(u.staged, ", ");
		_cleanup_free_ char *ours = gp_strv_join(u.remove, ", ");
		*reason = gp_xasprintf(
		    "nothing changed: removing %s would take along %s, which "
		    "gpuprov installed for %s and which depend%s on them (apt's "
		    "remove removes what depends on a package it removes); "
		    "uninstall %s too (or all stages), or keep this stage (--skip "
		    "%s)",
		    ours, staged, u.staged[1] ? "those stages" : "that stage",
		    u.staged[1] ? "" : "s", u.staged[1] ? "those stages" : "that stage",
		    stage);
		undo_free(&u);
		return GP_STATE_BLOCKED;
	}
	size_t n_remove = gp_strv_len(u.remove), n_files = gp_strv_len(u.files),
	       n_release = gp_strv_len(u.release);
	_cleanup_free_ char *kept = u.kept[0] ? gp_strv_join(u.kept, ", ") : NULL;
	_cleanup_free_ char *released = gp_strv_join(u.release, ", ");
	struct gp_buf kept_dirs = { 0 }, whole = { 0 };
	size_t n_dirs = 0;
	for (size_t i = 0; u.dirs[i]; i++) {
		_cleanup_free_ char *stay = staying_entry(c, &u, u.dirs[i]);
		if (whole_dir(c, u.dirs[i]) && gp_ctx_exists(c, u.dirs[i]))
			gp_buf_printf(&whole, "%s%s", whole.len ? ", " : "", u.dirs[i]);
		if (stay)
			gp_buf_printf(&kept_dirs,
			              "%s%s (it holds %s, which gpuprov did not write)",
			              kept_dirs.len ? ", " : "", u.dirs[i], stay);
		else
			n_dirs++;
	}
	bool needed = n_remove || n_files || n_release || kept || u.dirs[0];
	if (!needed)
		*reason = gp_xstrdup("gpuprov recorded nothing of it");
	else
		*reason = gp_xasprintf(
		    "removes %zu package%s and %zu file%s%s gpuprov added%s%s%s%s%s%s%s",
		    n_remove, n_remove == 1 ? "" : "s", n_files, n_files == 1 ? "" : "s",
		    n_dirs ? (n_dirs == 1 ? " and 1 directory" : " and directories") : "",
		    n_release ? "; releases the holds it set on packages there "
		                "before it: "
		              : "",
		    n_release ? released : "",
		    kept ? "; cannot undo (kept as they are now): " : "",
		    kept ? kept : "",
		    kept ? ", an older version may be in no repository any more" : "",
		    kept_dirs.len
		        ? "; keeps the directories it made that hold what it did "
		          "not write: "
		        : "",
		    kept_dirs.len ? kept_dirs.data : "");
	if (whole.len) {
		char *more = gp_xasprintf(
		    "%s; removes %s with all in it: gpuprov created "
		    "it with a command that filled it",
		    *reason, whole.data);
		free(*reason);
		*reason = more;
	}
	gp_buf_free(&kept_dirs);
	gp_buf_free(&whole);
	undo_free(&u);
	return needed ? GP_STATE_NEEDED : GP_STATE_SATISFIED;
}

int gp_undo_file(struct gp_ctx *c, const char *path)
{
	const cJSON *rec = gp_journal_file(&c->journal, path);
	const char *backup = gp_json_string(rec, "backup", NULL);
	int rc = 0;
	if (backup) {
		_cleanup_free_ char *data = NULL;
		size_t len = 0;
		struct stat st;
		int r = gp_root_read(&c->root, backup, &data, &len);
		if (r == 0)
			r = gp_root_stat(&c->root, backup, &st);
		if (r < 0)
			return gp_fail(c->err, GP_EFAILED,
			               "%s: cannot read the backup %s of %s: %s; nothing "
			               "more was changed, restore it by hand or move the "
			               "journal's record of it aside",
			               gp_ctx_stage_name(c), backup, path, strerror(-r));
		rc = gp_effect_write(c, path, data, len, st.st_mode & 07777);
	} else if (gp_json_string(rec, "link_before", NULL)) {
		rc = gp_effect_symlink(c, gp_json_string(rec, "link_before", NULL), path);
	} else if (gp_json_string(rec, "sha256", NULL) ||
	           gp_json_string(rec, "link", NULL)) {
		rc = gp_effect_remove(c, path);
	}
	if (rc == 0 && c->mode == GP_MODE_APPLY) {
		gp_journal_forget_file(&c->journal, path);
		rc = gp_ctx_save_journal(c);
	}
	return rc;
}

/* ldconfig after a file of the linker's path list (its cache still names
 * the libraries), the initramfs rebuild after a modprobe file (the
 * initramfs holds a copy of the nouveau blacklist). */
int gp_undo_commands(struct gp_ctx *c, const char *stage, char *const *files)
{
	bool ld = false, modprobe = false;
	for (size_t i = 0; files[i]; i++) {
		ld |= gp_str_starts_with(files[i], "/etc/ld.so.conf.d/");
		modprobe |= gp_str_starts_with(files[i], "/etc/modprobe.d/");
	}
	char *const ldconfig[] = { "ldconfig", NULL };
	if (ld && gp_effect_run(c, ldconfig) < 0)
		return -1;
	if (!modprobe)
		return 0;
	_cleanup_strv_ char **initramfs = gp_profile_initramfs_command(
	    c->profile, gp_profile_stage(c->profile, stage));
	if (!initramfs) /* the install that wrote it had one: a hand-made journal */
		return gp_fail(c->err, GP_EINPUT,
		               "%s: the initramfs must be rebuilt after removing the "
		               "modprobe files, but the profile names no command; "
		               "rebuild it by hand (update-initramfs -u, dracut --force)",
		               stage);
	return gp_effect_run(c, initramfs);
}

int gp_undo_apply(struct gp_ctx *c, const char *stage)
{
	struct undo u;
	undo_gather(c, stage, &u);
	int rc = gp_effect_pkg_hold(c, (const char *const *)u.release,
	                            gp_strv_len(u.release), false);
	if (rc == 0)
		rc = gp_effect_pkg_remove(c, (const char *const *)u.remove,
		                          gp_strv_len(u.remove));
	for (size_t i = 0; rc == 0 && c->mode == GP_MODE_APPLY && u.forget[i]; i++)
		gp_journal_forget_package(&c->journal, u.forget[i]);
	for (size_t i = 0; rc == 0 && u.files[i]; i++)
		rc = gp_undo_file(c, u.files[i]);
	for (size_t i = 0; rc == 0 && u.dirs[i]; i++) {
		_cleanup_free_ char *stay = staying_entry(c, &u, u.dirs[i]);
		if (!stay)
			rc = gp_effect_remove_made_dir(c, u.dirs[i]);
		else if (c->mode == GP_MODE_APPLY) /* the operator's now */
			gp_journal_forget_file(&c->journal, u.dirs[i]);
	}
	if (rc == 0)
		rc = gp_undo_commands(c, stage, u.files);
	/* The driver's module stays loaded until the machine reboots. */
	if (rc == 0 && u.remove[0] && gp_streq(stage, "driver"))
		rc = gp_effect_reboot_for(c,
		                          "the NVIDIA driver was removed; its kernel "
		                          "module stays loaded until a reboot",
		                          (const char *const *)u.remove);
	if (rc == 0 && c->mode == GP_MODE_APPLY) {
		gp_journal_forget_stage(&c->journal, stage);
		rc = gp_ctx_save_journal(c);
	}
	undo_free(&u);
	return rc;
}
