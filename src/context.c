/* The effect door: the only code that changes the target. In plan mode each
 * function records a plan entry and returns; in apply mode it records the
 * same entry, then backs up what it replaces, writes atomically, journals
 * the result and logs it; in verify mode it refuses (gp_ctx_door_open).
 * Stages call these and never look at the mode. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuprov/context.h"
#include "gpuprov/json.h"
#include "gpuprov/kernelinfo.h"
#include "gpuprov/ldcache.h"
#include "gpuprov/nvfabric.h"
#include "gpuprov/nvprobe.h"
#include "gpuprov/rebootsig.h"
#include "gpuprov/run.h"

int gp_ctx_read(struct gp_ctx *c, const char *path, char **data, size_t *len)
{
	bool exists;
	const char *planned;
	size_t planned_len;
	/* A real run's effects are on disk (and a rule's are not in the plan). */
	if (c->mode == GP_MODE_PLAN &&
	    gp_plan_lookup_file(c->plan, path, &exists, &planned, &planned_len)) {
		if (!exists)
			return -ENOENT;
		*data = gp_xmemdup0(planned, planned_len);
		if (len)
			*len = planned_len;
		return 0;
	}
	return gp_root_read(&c->root, path, data, len);
}

bool gp_ctx_exists(struct gp_ctx *c, const char *path)
{
	bool exists;
	const char *planned;
	size_t planned_len;
	if (c->mode == GP_MODE_PLAN &&
	    gp_plan_lookup_file(c->plan, path, &exists, &planned, &planned_len))
		return exists;
	return gp_root_exists(&c->root, path);
}

void gp_log(struct gp_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = gp_xvasprintf(fmt, ap);
	va_end(ap);
	const char *stage = c->stage ? c->stage->name : NULL;
	if (c->out)
		gp_debug(c->out, "%s%s%s", stage ? stage : "", stage ? ": " : "", msg);
	if (c->log_fd < 0)
		return;
	char when[32];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	_cleanup_free_ char *line = gp_xasprintf("%s [%d] %s%s%s\n", when, (int)getpid(),
	                                         stage ? stage : "", stage ? ": " : "",
	                                         msg);
	if (write(c->log_fd, line, strlen(line)) < 0) {
		/* The log is best effort; the journal is the record that matters. */
	}
}

const char *gp_ctx_stage_name(const struct gp_ctx *c)
{
	return c->stage ? c->stage->name : "gpuprov";
}

/* An EFFECT event for each effect of the started stage not sent yet: every
 * one but the last is made once the next one is added, the last when the
 * stage ends (ended). An open rule and what it records are sent once it
 * ends (gp_effect_rule_end drops what it recorded), as the plan lists them. */
static void send_effects(struct gp_ctx *c, bool ended)
{
	const struct gp_stage_plan *sp = c->announced;
	if (c->mode != GP_MODE_APPLY || !sp || sp != c->stage)
		return;
	size_t made = c->rule_from ? c->rule_from - 1 : sp->n_effects;
	for (; c->effects_sent < made; c->effects_sent++)
		gp_event_send(
		    &c->events,
		    &(struct gp_event){ .kind = GP_EVENT_EFFECT,
		                        .stage = sp->name,
		                        .effect = &sp->effects[c->effects_sent],
		                        .failed = ended && sp->state == GP_STATE_FAILED &&
		                                  c->effects_sent + 1 == sp->n_effects });
}

static struct gp_effect *add_effect(struct gp_ctx *c, enum gp_effect_kind k)
{
	send_effects(c, false);
	c->effects_added++;
	return gp_stage_plan_add_effect(c->stage, k);
}

struct gp_effect *gp_ctx_add_effect(struct gp_ctx *c, enum gp_effect_kind k)
{
	return add_effect(c, k);
}

/* A lookup the root layer could not make (EAGAIN after every retry): the
 * session's answers would rest on a guess, so every effect fails. */
int gp_ctx_root_fault(struct gp_ctx *c)
{
	const char *path = NULL;
	int rc = gp_root_fault(&c->root, &path);
	if (!rc)
		return 0;
	_cleanup_free_ char *why = gp_root_read_error(&c->root, path, 0, rc);
	return gp_fail(c->err, GP_EINPUT, "%s: could not look up %s",
	               gp_ctx_stage_name(c), why);
}

int gp_ctx_door_open(struct gp_ctx *c, const char *effect)
{
	/* Verify runs no stage's apply, so an effect there is gpuprov's own
	 * bug; refused before it reads anything, as one outside a stage. */
	if (c->mode == GP_MODE_VERIFY || !c->stage)
		return gp_fail(c->err, GP_EFAILED,
		               "internal error: %s called %s; nothing was changed; "
		               "this is a bug in gpuprov, please report it",
		               effect,
		               c->mode == GP_MODE_VERIFY
		                   ? "in verify mode, which changes nothing"
		                   : "outside a stage");
	if (gp_ctx_root_fault(c) < 0)
		return -1;
	/* After SIGTERM/SIGINT/SIGHUP no further change starts; what is done
	 * is in the journal, so the same command finishes the job later. */
	if (!gp_run_stop_signal || c->mode == GP_MODE_PLAN)
		return 0;
	const char *d = sigdescr_np(gp_run_stop_signal);
	return gp_fail(
	    c->err, GP_EFAILED,
	    "%s: interrupted by signal %d (%s) before the next change; run the "
	    "same command again to finish",
	    gp_ctx_stage_name(c), (int)gp_run_stop_signal, d ? d : "unknown signal");
}

/* "dev:ino:size:mtime:ctime" (times in ns) of a file: while it is the same,
 * the file was not written, replaced or touched since (ctime cannot be set
 * from user space), so its recorded sha256 still holds. */
static char *fingerprint(const struct stat *st)
{
	return gp_xasprintf("%llu:%llu:%lld:%lld.%09ld:%lld.%09ld",
	                    (unsigned long long)st->st_dev,
	                    (unsigned long long)st->st_ino, (long long)st->st_size,
	                    (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
	                    (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

/* Adds the file's fingerprint to its journal record (just written). */
void gp_ctx_record_fingerprint(struct gp_ctx *c, const char *path)
{
	cJSON *rec = gp_journal_file(&c->journal, path);
	struct stat st;
	if (!rec || gp_root_lstat(&c->root, path, &st) < 0)
		return;
	_cleanup_free_ char *fp = fingerprint(&st);
	gp_json_set_string(rec, "stat", fp);
	/* verify's drift check compares them (src/stages/drift.c). */
	gp_journal_record_file_stat(&c->journal, path, st.st_mode, st.st_uid, st.st_gid);
}

bool gp_ctx_recorded_file_intact(struct gp_ctx *c, const char *path, bool deep,
                                 bool *hashed)
{
	*hashed = false;
	struct stat st;
	return gp_root_lstat(&c->root, path, &st) == 0 &&
	       gp_ctx_recorded_stat_intact(c, NULL, path, &st, deep, hashed);
}

bool gp_ctx_recorded_stat_intact(struct gp_ctx *c, struct gp_root_dir *d,
                                 const char *path, const struct stat *st, bool deep,
                                 bool *hashed)
{
	*hashed = false;
	const cJSON *rec = gp_journal_file(&c->journal, path);
	const char *want = gp_json_string(rec, "sha256", NULL);
	if (!want || !S_ISREG(st->st_mode))
		return false;
	_cleanup_free_ char *fp = fingerprint(st);
	if (!deep && gp_streq(gp_json_string(rec, "stat", NULL), fp))
		return true;
	*hashed = true;
	char have[65];
	int rc = d ? gp_root_sha256_file_in(&c->root, d, path, have)
	           : gp_root_sha256_file(&c->root, path, have);
	return rc == 0 && strcmp(have, want) == 0;
}

/* A file gpuprov wrote that holds something else now (data: what is
 * there, NULL when nothing is) was edited: replacing it is corrective,
 * and backup_dest keeps the edited copy. */
static bool file_edited(struct gp_ctx *c, const char *path, const char *data, size_t len)
{
	const char *recorded = gp_journal_file_sha256(&c->journal, path);
	char sha[65];
	bool planned;
	const char *ignored;
	size_t ignored_len;
	/* Written earlier in this plan: data is that plan's, not an edit. */
	if (!recorded || !data ||
	    gp_plan_lookup_file(c->plan, path, &planned, &ignored, &ignored_len))
		return false;
	gp_sha256_hex(data, len, sha);
	return !gp_streq(sha, recorded);
}

/* Called before the effect is added (file_edited looks at the plan). */
static void mark_edited(struct gp_effect *e, bool edited)
{
	if (edited) {
		e->edited = true;
		e->change = GP_CHANGE_CORRECTIVE;
	}
}

/* Where backing up what is at path would go: NULL when gpuprov wrote it
 * itself (then the first backup, taken before gpuprov's first write,
 * already holds the operator's version). */
static char *backup_dest(struct gp_ctx *c, const char *path, const char *data, size_t len)
{
	char sha[65];
	gp_sha256_hex(data, len, sha);
	if (gp_streq(gp_journal_file_sha256(&c->journal, path), sha))
		return NULL;
	char *dest = gp_xasprintf("%s%s", GP_BACKUP_DIR, path);
	for (int n = 1; gp_root_exists(&c->root, dest); n++) {
		free(dest);
		dest = gp_xasprintf("%s%s.%d", GP_BACKUP_DIR, path, n);
	}
	return dest;
}

/* Copies what is at path (data) to dest in the backup tree. */
static int write_backup(struct gp_ctx *c, const char *path, const char *dest,
                        const char *data, size_t len)
{
	struct stat st;
	mode_t mode = gp_root_stat(&c->root, path, &st) == 0 ? st.st_mode & 07777 : 0644;
	_cleanup_free_ char *dir = gp_xstrndup(dest, (size_t)(strrchr(dest, '/') - dest));
	int rc = gp_root_mkdir_p(&c->root, dir, 0700);
	if (rc == 0)
		rc = gp_root_write_atomic(&c->root, dest, data, len, mode, 0, 0);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED,
		               "%s: cannot back up %s to %s: %s; nothing was changed",
		               gp_ctx_stage_name(c), path, dest, strerror(-rc));
	gp_log(c, "backed up %s to %s", path, dest);
	return 0;
}

/* Backs up what is at path unless gpuprov wrote it itself. Returns the
 * backup path (NULL: none taken). */
static int backup(struct gp_ctx *c, const char *path, const char *data, size_t len,
                  char **backup_path)
{
	*backup_path = backup_dest(c, path, data, len);
	if (*backup_path && write_backup(c, path, *backup_path, data, len) < 0) {
		free(*backup_path);
		*backup_path = NULL;
		return -1;
	}
	return 0;
}

int gp_ctx_save_journal(struct gp_ctx *c)
{
	int rc = gp_journal_save(&c->root, &c->journal);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED, "cannot write the journal %s: %s",
		               GP_STATE_FILE, strerror(-rc));
	return 0;
}

char *gp_ctx_missing_dir(struct gp_ctx *c, const char *path)
{
	_cleanup_free_ char *copy = gp_xstrdup(path);
	for (char *p = copy + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		struct stat st;
		if (*copy && gp_root_lstat(&c->root, copy, &st) == -ENOENT)
			return TAKE_PTR(copy);
		*p = saved;
		if (!saved)
			return NULL;
	}
}

int gp_ctx_record_dir(struct gp_ctx *c, const char *dir)
{
	if (!dir || gp_str_starts_with(dir, GP_STATE_DIR) ||
	    gp_str_starts_with(dir, "/run/") || gp_str_starts_with(dir, "/var/run/") ||
	    gp_streq(dir, "/run"))
		return 0;
	gp_journal_record_dir(&c->journal, dir, gp_ctx_stage_name(c));
	return gp_ctx_save_journal(c);
}

int gp_ctx_make_parent(struct gp_ctx *c, const char *path)
{
	_cleanup_free_ char *dir = gp_xstrndup(path, (size_t)(strrchr(path, '/') - path));
	if (!*dir)
		return 0;
	_cleanup_free_ char *made = gp_ctx_missing_dir(c, dir);
	if (gp_ctx_record_dir(c, made) < 0)
		return -1;
	int rc = gp_root_mkdir_p(&c->root, dir, 0755);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED, "%s: cannot create directory %s: %s",
		               gp_ctx_stage_name(c), dir, strerror(-rc));
	return 0;
}

/* The file at path as this run sees it (planned writes included): *old
 * (free it) and *old_len when it exists, and whether its mode is already
 * mode. 0, or -1 with c->err set when it cannot be read. */
static int current_file(struct gp_ctx *c, const char *path, mode_t mode, char **old,
                        size_t *old_len, bool *exists, bool *mode_ok)
{
	*old = NULL;
	*old_len = 0;
	int rc = gp_ctx_read(c, path, old, old_len);
	if (rc < 0 && rc != -ENOENT)
		return gp_fail(c->err, GP_EFAILED, "%s: cannot read %s: %s",
		               gp_ctx_stage_name(c), path, strerror(-rc));
	*exists = rc == 0;
	struct stat st;
	*mode_ok = !*exists || gp_root_stat(&c->root, path, &st) < 0 ||
	           (st.st_mode & 07777) == (mode & 07777);
	return 0;
}

int gp_effect_write(struct gp_ctx *c, const char *path, const void *data, size_t len,
                    mode_t mode)
{
	if (gp_ctx_door_open(c, "gp_effect_write") < 0)
		return -1;
	_cleanup_free_ char *old = NULL;
	size_t old_len;
	bool exists, mode_ok;
	if (current_file(c, path, mode, &old, &old_len, &exists, &mode_ok) < 0)
		return -1;
	if (exists && old_len == len && memcmp(old, data, len) == 0 && mode_ok)
		return 0;

	bool edited = file_edited(c, path, exists ? old : NULL, old_len);
	struct gp_effect *e = add_effect(c, GP_EFFECT_WRITE);
	e->path = gp_xstrdup(path);
	mark_edited(e, edited);
	e->old_exists = exists;
	e->old_data = exists ? gp_xmemdup0(old, old_len) : NULL;
	e->old_len = old_len;
	e->new_data = gp_xmemdup0(data, len);
	e->new_len = len;
	e->mode = mode;
	if (c->mode == GP_MODE_PLAN)
		return 0;

	/* The intent first: killed after the rename, the next run finds the
	 * file as written and records it (gp_ctx_recover); killed before,
	 * it drops the backup this write took. */
	char sha[65];
	gp_sha256_hex(data, len, sha);
	_cleanup_free_ char *backup_path = exists ? backup_dest(c, path, old, old_len)
	                                          : NULL;
	gp_journal_set_intent(&c->journal, path, sha, gp_ctx_stage_name(c), backup_path);
	if (gp_ctx_save_journal(c) < 0)
		return -1;
	if (backup_path && write_backup(c, path, backup_path, old, old_len) < 0)
		return -1;
	if (gp_ctx_make_parent(c, path) < 0)
		return -1;
	int rc = gp_root_write_atomic(&c->root, path, data, len, mode, 0, 0);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED, "%s: cannot write %s: %s",
		               gp_ctx_stage_name(c), path, strerror(-rc));
	gp_journal_record_file(&c->journal, path, sha, gp_ctx_stage_name(c), backup_path);
	gp_ctx_record_fingerprint(c, path);
	gp_journal_clear_intent(&c->journal, path);
	gp_log(c, "wrote %s (%zu bytes, mode %04o, sha256 %s)", path, len,
	       (unsigned)mode & 07777, sha);
	return gp_ctx_save_journal(c);
}

/* A symlink is removed as a link: its target is recorded, nothing behind
 * it is read or copied, and a dangling one goes too. */
static int remove_symlink(struct gp_ctx *c, const char *path)
{
	_cleanup_free_ char *target = NULL;
	int rc = gp_root_readlink(&c->root, path, &target);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED, "%s: cannot read link %s: %s",
		               gp_ctx_stage_name(c), path, strerror(-rc));
	struct gp_effect *e = add_effect(c, GP_EFFECT_REMOVE);
	e->path = gp_xstrdup(path);
	e->target = gp_xstrdup(target);
	e->old_exists = true;
	if (c->mode == GP_MODE_PLAN)
		return 0;
	rc = gp_root_unlink(&c->root, path);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED, "%s: cannot remove %s: %s",
		               gp_ctx_stage_name(c), path, strerror(-rc));
	gp_journal_record_file(&c->journal, path, NULL, gp_ctx_stage_name(c), NULL);
	gp_journal_record_link(&c->journal, path, NULL, NULL, gp_ctx_stage_name(c));
	gp_log(c, "removed link %s -> %s", path, target);
	return gp_ctx_save_journal(c);
}

int gp_effect_remove(struct gp_ctx *c, const char *path)
{
	if (gp_ctx_door_open(c, "gp_effect_remove") < 0)
		return -1;
	bool exists;
	const char *planned;
	size_t planned_len;
	struct stat st;
	if (!gp_plan_lookup_file(c->plan, path, &exists, &planned, &planned_len) &&
	    gp_root_lstat(&c->root, path, &st) == 0 && S_ISLNK(st.st_mode))
		return remove_symlink(c, path);
	_cleanup_free_ char *old = NULL;
	size_t old_len = 0;
	int rc = gp_ctx_read(c, path, &old, &old_len);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED, "%s: cannot read %s: %s",
		               gp_ctx_stage_name(c), path, strerror(-rc));
	bool edited = file_edited(c, path, old, old_len);
	struct gp_effect *e = add_effect(c, GP_EFFECT_REMOVE);
	e->path = gp_xstrdup(path);
	mark_edited(e, edited);
	e->old_exists = true;
	e->old_data = gp_xmemdup0(old, old_len);
	e->old_len = old_len;
	if (c->mode == GP_MODE_PLAN)
		return 0;
	_cleanup_free_ char *backup_path = NULL;
	if (backup(c, path, old, old_len, &backup_path) < 0)
		return -1;
	rc = gp_root_unlink(&c->root, path);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED, "%s: cannot remove %s: %s",
		               gp_ctx_stage_name(c), path, strerror(-rc));
	gp_journal_record_file(&c->journal, path, NULL, gp_ctx_stage_name(c),
	                       backup_path);
	gp_log(c, "removed %s", path);
	return gp_ctx_save_journal(c);
}

int gp_effect_symlink(struct gp_ctx *c, const char *target, const char *path)
{
	if (gp_ctx_door_open(c, "gp_effect_symlink") < 0)
		return -1;
	_cleanup_free_ char *current = NULL;
	if (gp_root_readlink(&c->root, path, &current) == 0 &&
	    strcmp(current, target) == 0)
		return 0;
	/* A regular file in the way is replaced like a write replaces one:
	 * shown in the plan and backed up first. */
	struct stat st;
	_cleanup_free_ char *old = NULL;
	size_t old_len = 0;
	bool replaces_file = gp_root_lstat(&c->root, path, &st) == 0 &&
	                     S_ISREG(st.st_mode) &&
	                     gp_root_read(&c->root, path, &old, &old_len) == 0;
	struct gp_effect *e = add_effect(c, GP_EFFECT_SYMLINK);
	e->path = gp_xstrdup(path);
	e->target = gp_xstrdup(target);
	e->old_exists = replaces_file;
	if (c->mode == GP_MODE_PLAN)
		return 0;
	_cleanup_free_ char *backup_path = NULL;
	if (replaces_file && backup(c, path, old, old_len, &backup_path) < 0)
		return -1;
	if (backup_path) {
		gp_journal_record_file(&c->journal, path, NULL, gp_ctx_stage_name(c),
		                       backup_path);
		if (gp_ctx_save_journal(c) < 0)
			return -1;
	}
	if (gp_ctx_make_parent(c, path) < 0)
		return -1;
	/* Journaled so that an uninstall removes it, or puts back the link of
	 * someone else's it replaced (a record without "link": not gpuprov's).
	 * A link made where this run removed one (a cuDNN version change) is
	 * no removal any more. Saved before the link is made: killed between
	 * the two, the rerun makes the record true; the other way round it
	 * would find the link right and never record it as gpuprov's. */
	const cJSON *rec = gp_journal_file(&c->journal, path);
	bool ours = rec && cJSON_GetObjectItemCaseSensitive(rec, "link");
	gp_journal_record_link(&c->journal, path, target, ours ? NULL : current,
	                       gp_ctx_stage_name(c));
	if (gp_ctx_save_journal(c) < 0)
		return -1;
	int rc = gp_root_symlink(&c->root, target, path);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED, "%s: cannot link %s -> %s: %s",
		               gp_ctx_stage_name(c), path, target, strerror(-rc));
	gp_log(c, "symlink %s -> %s", path, target);
	return 0;
}

int gp_effect_mkdir(struct gp_ctx *c, const char *path, mode_t mode)
{
	if (gp_ctx_door_open(c, "gp_effect_mkdir") < 0)
		return -1;
	struct stat st;
	if (gp_root_stat(&c->root, path, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	struct gp_effect *e = add_effect(c, GP_EFFECT_MKDIR);
	e->path = gp_xstrdup(path);
	e->mode = mode;
	if (c->mode == GP_MODE_PLAN)
		return 0;
	_cleanup_free_ char *made = gp_ctx_missing_dir(c, path);
	if (gp_ctx_record_dir(c, made) < 0)
		return -1;
	int rc = gp_root_mkdir_p(&c->root, path, mode);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED, "%s: cannot create %s: %s",
		               gp_ctx_stage_name(c), path, strerror(-rc));
	gp_log(c, "mkdir %s", path);
	return 0;
}

/* The last lines of a command's output, for an error message. */
static char *output_tail(const char *out, int lines)
{
	size_t n = strlen(out);
	while (n && out[n - 1] == '\n')
		n--;
	size_t start = n;
	while (start > 0 && lines > 0) {
		if (out[start - 1] == '\n')
			lines--;
		if (lines > 0)
			start--;
	}
	return gp_xstrndup(out + start, n - start);
}

/* How a command may touch the root: writable, or read-only, with or
 * without a scratch (gp_run_opts.scratch_overlay). */
struct run_access {
	bool read_only;
	const char *scratch_overlay;
};
static const struct run_access RUN_WRITABLE = { false, NULL };

static int run_logged(struct gp_ctx *c, char *const argv[], struct run_access access,
                      struct gp_run_result *res)
{
	const struct gp_run_opts opts = {
		.root = c->root.dir,
		.timeout_ms = c->cmd_timeout_ms,
		.read_only = access.read_only,
		.scratch_overlay = access.scratch_overlay,
	};
	_cleanup_free_ char *cmd = gp_strv_join(argv, " ");
	gp_log(c, "run %s", cmd);
	int rc = gp_run(&opts, argv, res);
	if (rc < 0) {
		gp_log(c, "could not run %s: %s", argv[0], strerror(-rc));
		return rc;
	}
	_cleanup_free_ char *how = gp_run_describe(res, c->cmd_timeout_ms);
	gp_log(c, "%s %s%s%s", argv[0], how, res->output_len ? "; output:\n" : "",
	       res->output_len ? res->output : "");
	return 0;
}

/* run_logged, shown as it starts and while it runs (see progress.h): a
 * long apt or conda run is not minutes of silence. */
static int run_announced(struct gp_ctx *c, char *const argv[], struct gp_run_result *res)
{
	if (!c->events.fn)
		return run_logged(c, argv, RUN_WRITABLE, res);
	/* The program as it runs: "/usr/sbin/update-initramfs -u". */
	_cleanup_strv_ char **shown = gp_strv_copy(argv);
	char *path = NULL;
	if (gp_run_resolve(c->root.dir, argv[0], &path) == 0 && path) {
		free(shown[0]);
		shown[0] = path;
	}
	_cleanup_free_ char *what = gp_argv_display(shown);
	const char *stage = c->stage ? c->stage->name : NULL;
	gp_event_send(&c->events, &(struct gp_event){ .kind = GP_EVENT_COMMAND_START,
	                                              .stage = stage,
	                                              .command = what });
	int rc = run_logged(c, argv, RUN_WRITABLE, res);
	gp_event_send(&c->events,
	              &(struct gp_event){ .kind = GP_EVENT_COMMAND_DONE,
	                                  .stage = stage,
	                                  .command = what,
	                                  .status = rc < 0 ? -1 : res->exit_code });
	return rc;
}

void gp_ctx_announce_stage(struct gp_ctx *c, const struct gp_stage_plan *sp, bool done)
{
	if (c->mode != GP_MODE_APPLY)
		return;
	if (!done) {
		c->announced = sp;
		c->effects_sent = 0;
		gp_event_send(&c->events,
		              &(struct gp_event){ .kind = GP_EVENT_STAGE_START,
		                                  .stage = sp->name });
		return;
	}
	if (c->announced != sp)
		return; /* it did not start applying */
	send_effects(c, true);
	c->announced = NULL;
	gp_event_send(&c->events,
	              &(struct gp_event){ .kind = GP_EVENT_STAGE_DONE,
	                                  .stage = sp->name,
	                                  .state = gp_stage_state_id(sp->state) });
}

void gp_effect_rule_begin(struct gp_ctx *c, const char *makes, const char *fmt, ...)
{
	struct gp_effect *e = add_effect(c, GP_EFFECT_RULE);
	e->target = gp_xstrdup(makes);
	va_list ap;
	va_start(ap, fmt);
	e->reason = gp_xvasprintf(fmt, ap);
	va_end(ap);
	c->rule_from = c->stage->n_effects;
}

void gp_effect_rule_dir(struct gp_ctx *c, const char *dir)
{
	if (!c->rule_from)
		return;
	struct gp_effect *e = &c->stage->effects[c->rule_from - 1];
	if (!e->replaces)
		e->replaces = gp_xcalloc(1, sizeof(char *));
	gp_strv_push(&e->replaces, dir);
}

void gp_effect_rule_end(struct gp_ctx *c)
{
	if (c->rule_from)
		gp_stage_plan_truncate(c->stage, c->rule_from);
	c->rule_from = 0;
}

int gp_effect_run(struct gp_ctx *c, char *const argv[])
{
	struct gp_run_result failed;
	int rc = gp_effect_run_result(c, argv, &failed);
	gp_run_result_free(&failed);
	return rc;
}

static int run_effect_command(struct gp_ctx *c, char *const argv[],
                              struct gp_run_result *failed);

/* The plan's entry for a command, once the door is open: 0, or -1. */
static int add_run_effect(struct gp_ctx *c, char *const argv[])
{
	if (gp_ctx_door_open(c, "gp_effect_run") < 0)
		return -1;
	add_effect(c, GP_EFFECT_RUN)->argv = gp_strv_copy(argv);
	return 0;
}

int gp_effect_run_result(struct gp_ctx *c, char *const argv[],
                         struct gp_run_result *failed)
{
	*failed = (struct gp_run_result){ 0 };
	if (add_run_effect(c, argv) < 0)
		return -1;
	if (c->mode == GP_MODE_PLAN)
		return 0;
	return run_effect_command(c, argv, failed);
}

/* Is path below a directory the journal records as gpuprov's whole? */
static bool under_whole_dir(struct gp_ctx *c, const char *path)
{
	_cleanup_free_ char *up = gp_xstrdup(path);
	for (char *slash; (slash = strrchr(up, '/')) && slash != up;) {
		*slash = '\0';
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
		        gp_journal_file(&c->journal, up), "whole")))
			return true;
	}
	return false;
}

int gp_effect_run_creating(struct gp_ctx *c, char *const argv[], const char *dir)
{
	if (add_run_effect(c, argv) < 0)
		return -1;
	if (c->mode == GP_MODE_PLAN)
		return 0;
	/* Inside one already (conda create in gpuprov's prefix): that goes. */
	_cleanup_free_ char *made = under_whole_dir(c, dir) ? NULL
	                                                    : gp_ctx_missing_dir(c, dir);
	if (made && !gp_streq(made, dir)) {
		/* The parents are plain directories: removed once empty. */
		_cleanup_free_ char *parent = gp_xstrndup(
		    dir, (size_t)(strrchr(dir, '/') - dir));
		_cleanup_free_ char *top = gp_ctx_missing_dir(c, parent);
		if (gp_ctx_record_dir(c, top) < 0)
			return -1;
	}
	if (made) {
		gp_journal_record_whole_dir(&c->journal, dir, gp_ctx_stage_name(c));
		if (gp_ctx_save_journal(c) < 0)
			return -1;
	}
	struct gp_run_result failed = { 0 };
	int rc = run_effect_command(c, argv, &failed);
	gp_run_result_free(&failed);
	return rc;
}

/* The command of an effect, for real: run, logged, its failure explained. */
static int run_effect_command(struct gp_ctx *c, char *const argv[],
                              struct gp_run_result *failed)
{
	struct gp_run_result res = { 0 };
	int rc = run_announced(c, argv, &res);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED, "%s: cannot run %s in %s: %s",
		               gp_ctx_stage_name(c), argv[0], c->root.dir, strerror(-rc));
	if (!gp_run_succeeded(&res)) {
		_cleanup_free_ char *cmd = gp_strv_join(argv, " ");
		_cleanup_free_ char *how = gp_run_describe(&res, c->cmd_timeout_ms);
		_cleanup_free_ char *tail = output_tail(res.output ? res.output : "", 3);
		gp_fail(c->err, GP_EFAILED, "%s: '%s' %s%s%s; full output in %s",
		        gp_ctx_stage_name(c), cmd, how, *tail ? ": " : "", tail,
		        GP_LOG_FILE);
		*failed = res;
		return -1;
	}
	gp_run_result_free(&res);
	return 0;
}

/* The flag file and the package list, as update-notifier-common writes
 * them: the list is only added to, so another tool's names stay. When
 * completing (a rerun that still waits for its reboot) a list that names
 * anything is left alone: the run that asked wrote its names, or another
 * tool did; only a missing or empty one gets gpuprov's. */
static int mark_reboot_required(struct gp_ctx *c, const char *const *pkgs,
                                bool completing)
{
	static const char flag[] = "*** System restart required ***\n";
	static const char *const own[] = { "gpuprov", NULL };
	if (gp_effect_write(c, GP_REBOOT_REQUIRED, flag, strlen(flag), 0644) < 0)
		return -1;
	_cleanup_free_ char *old = NULL;
	size_t old_len = 0;
	struct stat st;
	int rc = gp_root_stat(&c->root, GP_REBOOT_REQUIRED_PKGS, &st) == 0 &&
	                 st.st_size > (off_t)GP_REBOOT_PKGS_MAX
	             ? -GP_ROOT_ETOOBIG
	             : gp_ctx_read(c, GP_REBOOT_REQUIRED_PKGS, &old, &old_len);
	if (rc < 0 && rc != -ENOENT) {
		_cleanup_free_ char *why = gp_root_read_error(
		    &c->root, GP_REBOOT_REQUIRED_PKGS, GP_REBOOT_PKGS_MAX, rc);
		return gp_fail(c->err, GP_EFAILED,
		               "%s: cannot read %s; remove it or make it a regular file, "
		               "then run the same command again",
		               gp_ctx_stage_name(c), why);
	}
	if (rc < 0 || memchr(old, '\0', old_len)) {
		free(old); /* absent, or not text: written afresh */
		old = gp_xstrdup("");
		old_len = 0;
	}
	_cleanup_strv_ char **listed = gp_reboot_pkgs_parse(old, old_len);
	if (completing && listed && listed[0])
		return 0;
	struct gp_buf b = { 0 };
	gp_buf_append(&b, old, old_len);
	if (old_len && old[old_len - 1] != '\n')
		gp_buf_append(&b, "\n", 1);
	for (const char *const *p = pkgs && *pkgs ? pkgs : own; *p; p++)
		if (!gp_strv_contains(listed, *p)) {
			gp_buf_printf(&b, "%s\n", *p);
			gp_strv_push(&listed, *p);
		}
	rc = gp_effect_write(c, GP_REBOOT_REQUIRED_PKGS, b.data, b.len, 0644);
	gp_buf_free(&b);
	return rc;
}

int gp_effect_reboot_required(struct gp_ctx *c, const char *const *pkgs)
{
	if (gp_ctx_door_open(c, "gp_effect_reboot_required") < 0)
		return -1;
	return mark_reboot_required(c, pkgs, true);
}

int gp_effect_reboot(struct gp_ctx *c, const char *reason)
{
	return gp_effect_reboot_for(c, reason, NULL);
}

int gp_effect_reboot_for(struct gp_ctx *c, const char *reason, const char *const *pkgs)
{
	if (gp_ctx_door_open(c, "gp_effect_reboot") < 0)
		return -1;
	if (mark_reboot_required(c, pkgs, false) < 0)
		return -1;
	struct gp_effect *e = add_effect(c, GP_EFFECT_REBOOT);
	e->reason = gp_xstrdup(reason);
	c->reboot_requested = true;
	if (c->mode == GP_MODE_PLAN)
		return 0;
	gp_log(c, "reboot required: %s", reason);
	/* Saved at once, not only when the run ends: a run killed after this
	 * still shows the pending reboot. The engine writes the full record
	 * (every stage's reason) at the end. */
	_cleanup_free_ char *why = gp_xasprintf("%s: %s", gp_ctx_stage_name(c), reason);
	_cleanup_free_ char *now = gp_boot_id(&c->root);
	const char *pending = gp_journal_reboot_reason(&c->journal);
	_cleanup_free_ char *all =
	    pending && gp_streq(gp_journal_reboot_boot_id(&c->journal), now) &&
	            !strstr(pending, why)
	        ? gp_xasprintf("%s; %s", pending, why)
	        : NULL;
	gp_journal_set_reboot(&c->journal, all ? all : why, now);
	if (gp_journal_save(&c->root, &c->journal) < 0)
		gp_log(c, "cannot write the journal %s", GP_STATE_FILE);
	return 0;
}

int gp_effect_reboot_now(struct gp_ctx *c, const char *reason, const char *stub)
{
	if (gp_ctx_door_open(c, "gp_effect_reboot_now") < 0)
		return -1;
	/* The last guard against the worst surprise: a command chrooted into
	 * an image or a fixture can still reach the host's systemd (a bind-
	 * mounted /run), so a root that is not /, or a gpuprov that runs
	 * chrooted itself, reboots nothing but a stub. */
	if (!stub && (!gp_root_is_host(&c->root) || gp_run_self_chrooted() != 0))
		return gp_fail(
		    c->err, GP_EFAILED,
		    "internal error: a reboot of %s was asked for, which is not "
		    "the host's /; nothing was rebooted; this is a bug in "
		    "gpuprov, please report it",
		    c->root.dir);
	/* Queued, not waited for: the unit that runs a resumed install is one
	 * the reboot stops. */
	char *const systemctl[] = { "systemctl", "--no-block", "reboot", NULL };
	char *const stubbed[] = { (char *)stub, NULL };
	char *const *argv = stub ? stubbed : systemctl;
	struct gp_effect *e = add_effect(c, GP_EFFECT_REBOOT);
	e->reason = gp_xstrdup(reason);
	e->argv = gp_strv_copy(argv);
	if (c->mode == GP_MODE_PLAN)
		return 0;
	gp_log(c, "rebooting: %s", reason);
	struct gp_run_result failed = { 0 };
	int rc = run_effect_command(c, argv, &failed);
	gp_run_result_free(&failed);
	return rc;
}

/* The read-only namespace could not be made (rc). Refusing would fail every
 * probe where namespaces are not allowed (a container), which ran before
 * the namespace existed; so say it once and run without it from now on. */
static void give_up_read_only(struct gp_ctx *c, int rc)
{
	c->read_only_refused = true;
	if (c->out)
		gp_warn(c->out,
		        "cannot mount %s read-only in a private mount namespace (%s); "
		        "read-only commands run on the writable root",
		        c->root.dir, strerror(-rc));
}

static int run_read_only(struct gp_ctx *c, char *const argv[], struct run_access access,
                         struct gp_run_result *res)
{
	if (c->read_only_refused)
		return run_logged(c, argv, RUN_WRITABLE, res);
	int rc = run_logged(c, argv, access, res);
	if (rc == 0 || !res->read_only_refused)
		return rc;
	give_up_read_only(c, rc);
	return run_logged(c, argv, RUN_WRITABLE, res);
}

int gp_ctx_run_readonly(struct gp_ctx *c, char *const argv[], struct gp_run_result *res)
{
	return run_read_only(c, argv, (struct run_access){ true, NULL }, res);
}

int gp_ctx_run_query(struct gp_ctx *c, char *const argv[], const char *scratch_dir,
                     struct gp_run_result *res)
{
	return run_read_only(c, argv, (struct run_access){ true, scratch_dir }, res);
}

/* The pairs of the root's /etc/ld.so.cache, read and parsed here: no
 * child to spawn on a no-op run (issue 18). The disk as it is, not the
 * plan's view: only ldconfig writes the file, and a planned ldconfig has
 * not run (`ldconfig -p` would see the same). NULL with *why (what keeps
 * it from being read) otherwise. */
static char **read_linker_cache_file(struct gp_ctx *c, char **why)
{
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	int rc = gp_root_read_max(&c->root, GP_LDCACHE_FILE, GP_LDCACHE_MAX, &data, &len);
	if (rc < 0) {
		*why = gp_root_read_error(&c->root, GP_LDCACHE_FILE, GP_LDCACHE_MAX, rc);
		return NULL;
	}
	_cleanup_free_ char *reason = NULL;
	char **pairs = gp_ldcache_parse(data, len, &reason);
	if (!pairs)
		*why = gp_xasprintf("%s: %s", GP_LDCACHE_FILE, reason);
	return pairs;
}

/* The fallback: the pairs `ldconfig -p` lists, run chrooted with the root
 * read-only. 0, or -1 with *error. */
static int list_linker_cache(struct gp_ctx *c, char ***pairs, char **error)
{
	char *const argv[] = { "ldconfig", "-p", NULL };
	struct gp_run_result res = { 0 };
	int rc = gp_ctx_run_readonly(c, argv, &res);
	if (rc < 0 || !gp_run_succeeded(&res)) {
		*error = rc < 0 ? gp_xstrdup(strerror(-rc))
		                : gp_run_describe(&res, c->cmd_timeout_ms);
		gp_run_result_free(&res);
		return -1;
	}
	*pairs = gp_ldcache_parse_listing(res.output ? res.output : "");
	gp_run_result_free(&res);
	return 0;
}

int gp_ctx_linker_cache(struct gp_ctx *c, char *const **pairs, char **error)
{
	if (c->ld_cache && c->ld_cache_at == c->effects_added) {
		*pairs = c->ld_cache;
		return 0;
	}
	gp_strv_free(c->ld_cache);
	_cleanup_free_ char *why = NULL;
	c->ld_cache = read_linker_cache_file(c, &why);
	if (!c->ld_cache) {
		gp_log(c, "%s; asking 'ldconfig -p'", why);
		_cleanup_free_ char *listing_error = NULL;
		if (list_linker_cache(c, &c->ld_cache, &listing_error) < 0) {
			*error = gp_xasprintf("%s, and 'ldconfig -p' failed: %s", why,
			                      listing_error);
			return -1;
		}
	}
	c->ld_cache_at = c->effects_added;
	*pairs = c->ld_cache;
	return 0;
}

int gp_ctx_nvprobe(struct gp_ctx *c, int timeout_ms, struct gp_nvprobe *p)
{
	int rc = gp_nvprobe_run(&c->root, timeout_ms, !c->read_only_refused, p);
	if (rc == 0 || !p->read_only_refused)
		return rc;
	give_up_read_only(c, rc);
	gp_nvprobe_free(p);
	return gp_nvprobe_run(&c->root, timeout_ms, false, p);
}

int gp_ctx_nvfabric(struct gp_ctx *c, int timeout_ms, struct gp_nvfabric *f)
{
	int rc = gp_nvfabric_run(&c->root, timeout_ms, !c->read_only_refused, f);
	if (rc == 0 || !f->read_only_refused)
		return rc;
	give_up_read_only(c, rc);
	gp_nvfabric_clear(f);
	return gp_nvfabric_run(&c->root, timeout_ms, false, f);
}

/* Calls fn for every non-directory entry under dir (in-root path), sorted,
 * depth first. */
void gp_ctx_walk(struct gp_ctx *c, const char *dir,
                 void (*fn)(struct gp_ctx *c, const char *path, const struct stat *st,
                            void *data),
                 void *data)
{
	_cleanup_strv_ char **names = NULL;
	if (gp_root_list_dir(&c->root, dir, &names) < 0)
		return;
	for (size_t i = 0; names[i]; i++) {
		_cleanup_free_ char *p = gp_xasprintf("%s/%s", dir, names[i]);
		struct stat st;
		if (gp_root_lstat(&c->root, p, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode))
			gp_ctx_walk(c, p, fn, data);
		else
			fn(c, p, &st, data);
	}
}

void gp_ctx_collect_path(struct gp_ctx *c, const char *path, const struct stat *st,
                         void *data)
{
	gp_strv_push((char ***)data, path);
}

/* The regular files under a tree, and the first of them the journal does
 * not record as written (a removal record does not count). */
struct unrecorded {
	char *first;
	size_t files;
};

static void find_unrecorded(struct gp_ctx *c, const char *path, const struct stat *st,
                            void *data)
{
	struct unrecorded *u = data;
	if (!S_ISREG(st->st_mode))
		return;
	u->files++;
	if (!u->first && !gp_journal_file_sha256(&c->journal, path))
		u->first = gp_xstrdup(path);
}

int gp_effect_remove_tree(struct gp_ctx *c, const char *path)
{
	if (gp_ctx_door_open(c, "gp_effect_remove_tree") < 0)
		return -1;
	if (path[0] != '/' || !path[1] || strstr(path, "/../") ||
	    gp_str_ends_with(path, "/.."))
		return gp_fail(c->err, GP_EFAILED,
		               "%s: will not remove the directory tree '%s': give an "
		               "absolute path below / without '..'",
		               gp_ctx_stage_name(c), path);
	struct stat st;
	int rc = gp_root_lstat(&c->root, path, &st);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0 || !S_ISDIR(st.st_mode))
		return gp_fail(c->err, GP_EFAILED, "%s: will not remove %s: %s",
		               gp_ctx_stage_name(c), path,
		               rc < 0 ? strerror(-rc)
		               : S_ISLNK(st.st_mode)
		                   ? "it is a symlink, not a directory (never followed)"
		                   : "it is not a directory");
	struct unrecorded u = { 0 };
	gp_ctx_walk(c, path, find_unrecorded, &u);
	if (u.first || !u.files) {
		gp_fail(c->err, GP_EFAILED,
		        "%s: will not remove %s: %s%s; move %s away (or remove the "
		        "directory by hand), then run again",
		        gp_ctx_stage_name(c), path,
		        u.first ? "it holds a file gpuprov did not install: "
		                : "gpuprov recorded no file in it",
		        u.first ? u.first : "", u.first ? "that file" : "it");
		free(u.first);
		return -1;
	}
	struct gp_effect *e = add_effect(c, GP_EFFECT_REMOVE_TREE);
	e->path = gp_xstrdup(path);
	e->replaces = gp_xcalloc(1, sizeof(char *));
	gp_ctx_walk(c, path, gp_ctx_collect_path, &e->replaces);
	if (c->mode == GP_MODE_PLAN)
		return 0;
	rc = gp_root_remove_tree(&c->root, path);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED,
		               "%s: cannot remove the directory %s: %s",
		               gp_ctx_stage_name(c), path, strerror(-rc));
	gp_journal_forget_under(&c->journal, path);
	gp_journal_forget_file(&c->journal, path);
	gp_log(c, "removed the directory %s (%zu entries)", path,
	       gp_strv_len(e->replaces));
	return gp_ctx_save_journal(c);
}

int gp_effect_remove_made_dir(struct gp_ctx *c, const char *path)
{
	if (gp_ctx_door_open(c, "gp_effect_remove_made_dir") < 0)
		return -1;
	const cJSON *rec = gp_journal_file(&c->journal, path);
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rec, "dir")))
		return gp_fail(c->err, GP_EFAILED,
		               "%s: will not remove the directory %s: the journal does "
		               "not record it as made by gpuprov (a bug in gpuprov)",
		               gp_ctx_stage_name(c), path);
	struct stat st;
	int rc = gp_root_lstat(&c->root, path, &st);
	if (rc == 0 && !S_ISDIR(st.st_mode))
		return gp_fail(c->err, GP_EFAILED,
		               "%s: will not remove %s: it is no directory any more "
		               "(never followed); remove it by hand",
		               gp_ctx_stage_name(c), path);
	if (rc == 0) {
		struct gp_effect *e = add_effect(c, GP_EFFECT_REMOVE_TREE);
		e->path = gp_xstrdup(path);
		e->replaces = gp_xcalloc(1, sizeof(char *));
	}
	if (c->mode == GP_MODE_PLAN)
		return 0;
	if (rc == 0 && (rc = gp_root_remove_tree(&c->root, path)) < 0)
		return gp_fail(c->err, GP_EFAILED,
		               "%s: cannot remove the directory %s: %s",
		               gp_ctx_stage_name(c), path, strerror(-rc));
	gp_journal_forget_under(&c->journal, path);
	gp_journal_forget_file(&c->journal, path);
	gp_log(c, "removed the directory %s", path);
	return gp_ctx_save_journal(c);
}

/* --- what a killed run left ---------------------------------------------- */

/* The pid in gpuprov's own temp name ".#NAME.gpuprovPID" or
 * ".#NAME.gpuprovPID.N" (root.c), or 0 for any other name. */
static pid_t temp_name_pid(const char *name)
{
	if (strncmp(name, ".#", 2) != 0)
		return 0;
	const char *tag = NULL;
	for (const char *p = name + 2; (p = strstr(p, ".gpuprov")); p++)
		tag = p;
	if (!tag || !isdigit((unsigned char)tag[8]))
		return 0;
	char *end;
	long pid = strtol(tag + 8, &end, 10);
	if (*end == '.' && isdigit((unsigned char)end[1]))
		strtol(end + 1, &end, 10);
	return *end || pid <= 0 || pid > INT_MAX ? 0 : (pid_t)pid;
}

/* Is pid this run or another live gpuprov? The pid is one of the machine
 * gpuprov runs on, so this is the host's process table, not the root's. */
static bool live_gpuprov(pid_t pid)
{
	if (pid == getpid())
		return true;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return false;
	char path[64], comm[32] = "";
	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = fd < 0 ? -1 : read(fd, comm, sizeof comm - 1);
	comm[n > 0 ? n : 0] = '\0';
	return strcmp(comm, "gpuprov\n") == 0;
}

/* Adds the directory of path, and its twin in the backup tree, to dirs. */
static void add_dirs_of(char ***dirs, const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;
	if (!slash || path[0] != '/')
		return;
	_cleanup_free_ char *dir = gp_xstrndup(path, (size_t)(slash - path));
	_cleanup_free_ char *bdir = gp_xasprintf("%s%s", GP_BACKUP_DIR, dir);
	const char *both[] = { *dir ? dir : "/", bdir };
	for (size_t i = 0; i < ARRAY_SIZE(both); i++)
		if (!gp_strv_contains(*dirs, both[i]))
			gp_strv_push(dirs, both[i]);
}

/* Removes gpuprov's own temp files whose run is dead from the directories
 * gpuprov writes to: the journal's, those of every file the journal or the
 * plan names, and their backup twins. Not journaled: a temp file was never
 * recorded (it is gone once renamed), so there is nothing to take back. */
static void remove_stale_temps(struct gp_ctx *c)
{
	_cleanup_strv_ char **dirs = gp_xcalloc(1, sizeof(char *));
	gp_strv_push(&dirs, GP_STATE_DIR);
	add_dirs_of(&dirs, GP_LOG_FILE);
	const char *lists[] = { "files", "intents" };
	for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
		const cJSON *o = cJSON_GetObjectItemCaseSensitive(c->journal.doc,
		                                                  lists[l]);
		for (const cJSON *f = o ? o->child : NULL; f; f = f->next)
			add_dirs_of(&dirs, f->string);
	}
	for (size_t i = 0; c->plan && i < c->plan->n_stages; i++)
		for (size_t j = 0; j < c->plan->stages[i].n_effects; j++) {
			const struct gp_effect *e = &c->plan->stages[i].effects[j];
			add_dirs_of(&dirs, e->path);
			for (size_t k = 0;
			     e->kind == GP_EFFECT_RULE && e->replaces && e->replaces[k];
			     k++) {
				_cleanup_free_ char *in = gp_xasprintf("%s/.",
				                                       e->replaces[k]);
				add_dirs_of(&dirs, in);
			}
		}
	for (size_t i = 0; dirs[i]; i++) {
		_cleanup_strv_ char **names = NULL;
		if (gp_root_list_dir(&c->root, dirs[i], &names) < 0)
			continue;
		for (size_t k = 0; names[k]; k++) {
			pid_t pid = temp_name_pid(names[k]);
			if (!pid || live_gpuprov(pid))
				continue;
			_cleanup_free_ char *p = gp_xasprintf(
			    "%s/%s", strcmp(dirs[i], "/") ? dirs[i] : "", names[k]);
			struct stat st;
			if (gp_root_lstat(&c->root, p, &st) < 0 ||
			    !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
				continue;
			if (gp_root_unlink(&c->root, p) == 0)
				gp_log(c,
				       "removed %s, a temporary file of a run that "
				       "died (pid %d)",
				       p, (int)pid);
		}
	}
}

/* Settles the writes a killed run announced and did not record: one that
 * happened (the file holds exactly what it wrote) is recorded as if that
 * run had; one that did not is dropped, with the backup it may have taken
 * (a copy of what is still in place), so the write redoes it under the
 * same name. True when the journal changed. */
static bool settle_intents(struct gp_ctx *c)
{
	cJSON *intents = cJSON_GetObjectItemCaseSensitive(c->journal.doc, "intents");
	if (!intents || !intents->child)
		return false;
	_cleanup_strv_ char **paths = gp_xcalloc(1, sizeof(char *));
	for (const cJSON *in = intents->child; in; in = in->next)
		gp_strv_push(&paths, in->string);
	for (size_t i = 0; paths[i]; i++) {
		const char *path = paths[i];
		const cJSON *in = cJSON_GetObjectItemCaseSensitive(intents, path);
		const char *want = gp_json_string(in, "sha256", NULL);
		const char *bak = gp_json_string(in, "backup", NULL);
		char have[65] = "", bak_sha[65] = "";
		struct stat st;
		if (gp_root_lstat(&c->root, path, &st) < 0 || !S_ISREG(st.st_mode) ||
		    gp_root_sha256_file(&c->root, path, have) < 0)
			have[0] = '\0';
		if (want && strcmp(have, want) == 0) {
			gp_journal_record_file(&c->journal, path, want,
			                       gp_json_string(in, "stage", "gpuprov"),
			                       bak);
			gp_ctx_record_fingerprint(c, path);
			gp_log(c, "%s holds what a run that died wrote; recorded", path);
		} else if (bak && *have &&
		           gp_root_sha256_file(&c->root, bak, bak_sha) == 0 &&
		           strcmp(bak_sha, have) == 0 &&
		           gp_root_unlink(&c->root, bak) == 0) {
			gp_log(c,
			       "removed %s, the backup of a write to %s that did not "
			       "happen",
			       bak, path);
		}
		gp_journal_clear_intent(&c->journal, path);
	}
	return true;
}

int gp_ctx_recover(struct gp_ctx *c)
{
	bool changed = settle_intents(c);
	remove_stale_temps(c);
	if (!changed)
		return 0;
	return gp_ctx_save_journal(c) < 0 ? -1 : 1;
}

/* The WRITE entry of a download's bytes before they are there (dry run). */
static int plan_write_unseen(struct gp_ctx *c, const char *path, mode_t mode,
                             const char *sha256)
{
	_cleanup_free_ char *old = NULL;
	size_t old_len;
	bool exists, mode_ok;
	if (current_file(c, path, mode, &old, &old_len, &exists, &mode_ok) < 0)
		return -1;
	char sha[65] = "";
	if (exists)
		gp_sha256_hex(old, old_len, sha);
	if (exists && gp_streq(sha, sha256) && mode_ok)
		return 0;
	bool edited = file_edited(c, path, exists ? old : NULL, old_len);
	struct gp_effect *e = add_effect(c, GP_EFFECT_WRITE);
	e->path = gp_xstrdup(path);
	mark_edited(e, edited);
	e->old_exists = exists;
	e->old_data = exists ? TAKE_PTR(old) : NULL;
	e->old_len = old_len;
	e->new_data = gp_xstrdup(""); /* unknown until downloaded */
	e->mode = mode;
	return 0;
}

int gp_effect_write_download(struct gp_ctx *c, const char *path, const void *data,
                             size_t len, mode_t mode, const char *source,
                             const char *sha256)
{
	if (gp_ctx_door_open(c, "gp_effect_write_download") < 0)
		return -1;
	size_t before = c->stage->n_effects;
	int rc;
	if (data)
		rc = gp_effect_write(c, path, data, len, mode);
	else if (c->mode == GP_MODE_PLAN)
		rc = plan_write_unseen(c, path, mode, sha256);
	else
		rc = gp_fail(c->err, GP_EFAILED,
		             "%s: %s is not downloaded; nothing was written to %s",
		             gp_ctx_stage_name(c), source, path);
	if (c->stage->n_effects > before) {
		struct gp_effect *e = &c->stage->effects[before];
		e->source = gp_xstrdup(source);
		e->sha256 = sha256 ? gp_xstrdup(sha256) : NULL;
	}
	return rc;
}

int gp_effect_write_over(struct gp_ctx *c, const char *path, const void *data, size_t len,
                         mode_t mode, const char *maker)
{
	if (gp_ctx_door_open(c, "gp_effect_write_over") < 0)
		return -1;
	size_t before = c->stage->n_effects;
	int rc = gp_effect_write(c, path, data, len, mode);
	if (c->stage->n_effects > before)
		c->stage->effects[before].over = gp_xstrdup(maker);
	return rc;
}
