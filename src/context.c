/* The effect door: the only code that changes the target. In dry-run each
 * function records a plan entry and returns; for real it records the same
 * entry, then backs up what it replaces, writes atomically, journals the
 * result and logs it. Stages call these and never test dry_run. */
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

#include "gpuprov/archive.h"
#include "gpuprov/context.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/facts.h"
#include "gpuprov/json.h"
#include "gpuprov/prefetch.h"
#include "gpuprov/run.h"

int gp_ctx_read(struct gp_ctx *c, const char *path, char **data, size_t *len)
{
	bool exists;
	const char *planned;
	size_t planned_len;
	/* A real run's effects are on disk (and a rule's are not in the plan). */
	if (c->dry_run &&
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
	if (c->dry_run &&
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

static const char *stage_name(const struct gp_ctx *c)
{
	return c->stage ? c->stage->name : "gpuprov";
}

static struct gp_effect *add_effect(struct gp_ctx *c, enum gp_effect_kind k)
{
	return gp_stage_plan_add_effect(c->stage, k);
}

/* After SIGTERM/SIGINT/SIGHUP no further change starts; what is done is in
 * the journal, so the same command finishes the job later. */
int gp_ctx_root_fault(struct gp_ctx *c)
{
	const char *path = NULL;
	int rc = gp_root_fault(&c->root, &path);
	if (!rc)
		return 0;
	_cleanup_free_ char *why = gp_root_read_error(&c->root, path, 0, rc);
	return gp_fail(c->err, GP_EXIT_INVALID_INPUT, "%s: could not look up %s",
	               stage_name(c), why);
}

static int refuse_when_stopping(struct gp_ctx *c)
{
	if (gp_ctx_root_fault(c) < 0)
		return -1;
	if (!gp_run_stop_signal || c->dry_run)
		return 0;
	const char *d = sigdescr_np(gp_run_stop_signal);
	return gp_fail(
	    c->err, GP_EXIT_APPLY_FAILED,
	    "%s: interrupted by signal %d (%s) before the next change; run the "
	    "same command again to finish",
	    stage_name(c), (int)gp_run_stop_signal, d ? d : "unknown signal");
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
static void record_fingerprint(struct gp_ctx *c, const char *path)
{
	cJSON *rec = gp_journal_file(&c->journal, path);
	struct stat st;
	if (!rec || gp_root_lstat(&c->root, path, &st) < 0)
		return;
	_cleanup_free_ char *fp = fingerprint(&st);
	gp_json_set_string(rec, "stat", fp);
}

bool gp_ctx_recorded_file_intact(struct gp_ctx *c, const char *path, bool deep,
                                 bool *hashed)
{
	*hashed = false;
	const cJSON *rec = gp_journal_file(&c->journal, path);
	const char *want = gp_json_string(rec, "sha256", NULL);
	struct stat st;
	if (!want || gp_root_lstat(&c->root, path, &st) < 0 || !S_ISREG(st.st_mode))
		return false;
	_cleanup_free_ char *fp = fingerprint(&st);
	if (!deep && gp_streq(gp_json_string(rec, "stat", NULL), fp))
		return true;
	*hashed = true;
	char have[65];
	return gp_root_sha256_file(&c->root, path, have) == 0 && strcmp(have, want) == 0;
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
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "%s: cannot back up %s to %s: %s; nothing was changed",
		               stage_name(c), path, dest, strerror(-rc));
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

static int save_journal(struct gp_ctx *c)
{
	int rc = gp_journal_save(&c->root, &c->journal);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "cannot write the journal %s: %s", GP_STATE_FILE,
		               strerror(-rc));
	return 0;
}

static int parent_dir(struct gp_ctx *c, const char *path)
{
	_cleanup_free_ char *dir = gp_xstrndup(path, (size_t)(strrchr(path, '/') - path));
	if (!*dir)
		return 0;
	int rc = gp_root_mkdir_p(&c->root, dir, 0755);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "%s: cannot create directory %s: %s", stage_name(c), dir,
		               strerror(-rc));
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
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED, "%s: cannot read %s: %s",
		               stage_name(c), path, strerror(-rc));
	*exists = rc == 0;
	struct stat st;
	*mode_ok = !*exists || gp_root_stat(&c->root, path, &st) < 0 ||
	           (st.st_mode & 07777) == (mode & 07777);
	return 0;
}

int gp_effect_write(struct gp_ctx *c, const char *path, const void *data, size_t len,
                    mode_t mode)
{
	if (refuse_when_stopping(c) < 0)
		return -1;
	_cleanup_free_ char *old = NULL;
	size_t old_len;
	bool exists, mode_ok;
	if (current_file(c, path, mode, &old, &old_len, &exists, &mode_ok) < 0)
		return -1;
	if (exists && old_len == len && memcmp(old, data, len) == 0 && mode_ok)
		return 0;

	struct gp_effect *e = add_effect(c, GP_EFFECT_WRITE);
	e->path = gp_xstrdup(path);
	e->old_exists = exists;
	e->old_data = exists ? gp_xmemdup0(old, old_len) : NULL;
	e->old_len = old_len;
	e->new_data = gp_xmemdup0(data, len);
	e->new_len = len;
	e->mode = mode;
	if (c->dry_run)
		return 0;

	/* The intent first: killed after the rename, the next run finds the
	 * file as written and records it (gp_ctx_recover); killed before,
	 * it drops the backup this write took. */
	char sha[65];
	gp_sha256_hex(data, len, sha);
	_cleanup_free_ char *backup_path = exists ? backup_dest(c, path, old, old_len)
	                                          : NULL;
	gp_journal_set_intent(&c->journal, path, sha, stage_name(c), backup_path);
	if (save_journal(c) < 0)
		return -1;
	if (backup_path && write_backup(c, path, backup_path, old, old_len) < 0)
		return -1;
	if (parent_dir(c, path) < 0)
		return -1;
	int rc = gp_root_write_atomic(&c->root, path, data, len, mode, 0, 0);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED, "%s: cannot write %s: %s",
		               stage_name(c), path, strerror(-rc));
	gp_journal_record_file(&c->journal, path, sha, stage_name(c), backup_path);
	gp_journal_clear_intent(&c->journal, path);
	gp_log(c, "wrote %s (%zu bytes, mode %04o, sha256 %s)", path, len,
	       (unsigned)mode & 07777, sha);
	return save_journal(c);
}

/* A symlink is removed as a link: its target is recorded, nothing behind
 * it is read or copied, and a dangling one goes too. */
static int remove_symlink(struct gp_ctx *c, const char *path)
{
	_cleanup_free_ char *target = NULL;
	int rc = gp_root_readlink(&c->root, path, &target);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "%s: cannot read link %s: %s", stage_name(c), path,
		               strerror(-rc));
	struct gp_effect *e = add_effect(c, GP_EFFECT_REMOVE);
	e->path = gp_xstrdup(path);
	e->target = gp_xstrdup(target);
	e->old_exists = true;
	if (c->dry_run)
		return 0;
	rc = gp_root_unlink(&c->root, path);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED, "%s: cannot remove %s: %s",
		               stage_name(c), path, strerror(-rc));
	gp_journal_record_file(&c->journal, path, NULL, stage_name(c), NULL);
	gp_log(c, "removed link %s -> %s", path, target);
	return save_journal(c);
}

int gp_effect_remove(struct gp_ctx *c, const char *path)
{
	if (refuse_when_stopping(c) < 0)
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
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED, "%s: cannot read %s: %s",
		               stage_name(c), path, strerror(-rc));
	struct gp_effect *e = add_effect(c, GP_EFFECT_REMOVE);
	e->path = gp_xstrdup(path);
	e->old_exists = true;
	e->old_data = gp_xmemdup0(old, old_len);
	e->old_len = old_len;
	if (c->dry_run)
		return 0;
	_cleanup_free_ char *backup_path = NULL;
	if (backup(c, path, old, old_len, &backup_path) < 0)
		return -1;
	rc = gp_root_unlink(&c->root, path);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED, "%s: cannot remove %s: %s",
		               stage_name(c), path, strerror(-rc));
	gp_journal_record_file(&c->journal, path, NULL, stage_name(c), backup_path);
	gp_log(c, "removed %s", path);
	return save_journal(c);
}

int gp_effect_symlink(struct gp_ctx *c, const char *target, const char *path)
{
	if (refuse_when_stopping(c) < 0)
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
	if (c->dry_run)
		return 0;
	_cleanup_free_ char *backup_path = NULL;
	if (replaces_file && backup(c, path, old, old_len, &backup_path) < 0)
		return -1;
	if (backup_path) {
		gp_journal_record_file(&c->journal, path, NULL, stage_name(c),
		                       backup_path);
		if (save_journal(c) < 0)
			return -1;
	}
	if (parent_dir(c, path) < 0)
		return -1;
	int rc = gp_root_symlink(&c->root, target, path);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "%s: cannot link %s -> %s: %s", stage_name(c), path,
		               target, strerror(-rc));
	/* A link made where this run removed one (a cuDNN version change) is
	 * no removal any more; a record with a backup keeps it. */
	const cJSON *rec = gp_journal_file(&c->journal, path);
	if (rec && !gp_journal_file_sha256(&c->journal, path) &&
	    !cJSON_GetObjectItemCaseSensitive(rec, "backup")) {
		gp_journal_forget_file(&c->journal, path);
		if (save_journal(c) < 0)
			return -1;
	}
	gp_log(c, "symlink %s -> %s", path, target);
	return 0;
}

int gp_effect_mkdir(struct gp_ctx *c, const char *path, mode_t mode)
{
	if (refuse_when_stopping(c) < 0)
		return -1;
	struct stat st;
	if (gp_root_stat(&c->root, path, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	struct gp_effect *e = add_effect(c, GP_EFFECT_MKDIR);
	e->path = gp_xstrdup(path);
	e->mode = mode;
	if (c->dry_run)
		return 0;
	int rc = gp_root_mkdir_p(&c->root, path, mode);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED, "%s: cannot create %s: %s",
		               stage_name(c), path, strerror(-rc));
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

static int run_logged(struct gp_ctx *c, char *const argv[], struct gp_run_result *res)
{
	const struct gp_run_opts opts = {
		.root = c->root.dir,
		.timeout_ms = c->cmd_timeout_ms,
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
	struct gp_progress *p = c->out ? gp_progress_of(c->out) : NULL;
	if (!p || p->mode == GP_PROGRESS_OFF)
		return run_logged(c, argv, res);
	/* The program as it runs: "/usr/sbin/update-initramfs -u". */
	_cleanup_strv_ char **shown = gp_strv_copy(argv);
	char *path = NULL;
	if (gp_run_resolve(c->root.dir, argv[0], &path) == 0 && path) {
		free(shown[0]);
		shown[0] = path;
	}
	_cleanup_free_ char *what = gp_argv_display(shown);
	gp_progress_command_begin(p, c->stage ? c->stage->name : NULL, what);
	int rc = run_logged(c, argv, res);
	gp_progress_command_end(p, rc < 0 ? -1 : res->exit_code);
	return rc;
}

void gp_ctx_announce_stage(struct gp_ctx *c, const struct gp_stage_plan *sp, bool done)
{
	if (c->dry_run || !c->out)
		return;
	gp_progress_stage(gp_progress_of(c->out), sp->name,
	                  done ? gp_stage_state_id(sp->state) : NULL,
	                  (uint64_t)gp_monotonic_ms());
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

int gp_effect_run_result(struct gp_ctx *c, char *const argv[],
                         struct gp_run_result *failed)
{
	*failed = (struct gp_run_result){ 0 };
	if (refuse_when_stopping(c) < 0)
		return -1;
	struct gp_effect *e = add_effect(c, GP_EFFECT_RUN);
	e->argv = gp_strv_copy(argv);
	if (c->dry_run)
		return 0;
	struct gp_run_result res = { 0 };
	int rc = run_announced(c, argv, &res);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "%s: cannot run %s in %s: %s", stage_name(c), argv[0],
		               c->root.dir, strerror(-rc));
	if (!gp_run_succeeded(&res)) {
		_cleanup_free_ char *cmd = gp_strv_join(argv, " ");
		_cleanup_free_ char *how = gp_run_describe(&res, c->cmd_timeout_ms);
		_cleanup_free_ char *tail = output_tail(res.output ? res.output : "", 3);
		gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		        "%s: '%s' %s%s%s; full output in %s", stage_name(c), cmd, how,
		        *tail ? ": " : "", tail, GP_LOG_FILE);
		*failed = res;
		return -1;
	}
	gp_run_result_free(&res);
	return 0;
}

void gp_effect_reboot(struct gp_ctx *c, const char *reason)
{
	struct gp_effect *e = add_effect(c, GP_EFFECT_REBOOT);
	e->reason = gp_xstrdup(reason);
	c->reboot_requested = true;
	if (c->dry_run)
		return;
	gp_log(c, "reboot required: %s", reason);
	/* Saved at once, not only when the run ends: a run killed after this
	 * still shows the pending reboot. The engine writes the full record
	 * (every stage's reason) at the end. */
	_cleanup_free_ char *why = gp_xasprintf("%s: %s", stage_name(c), reason);
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
}

int gp_ctx_run_readonly(struct gp_ctx *c, char *const argv[], struct gp_run_result *res)
{
	return run_logged(c, argv, res);
}

/* --- downloads and archives -------------------------------------------- */

void gp_ctx_close_fetcher(struct gp_ctx *c)
{
	gp_prefetch_free(c->prefetch);
	c->prefetch = NULL;
	gp_fetcher_free(c->fetcher);
	c->fetcher = NULL;
}

static bool allow_http(const struct gp_ctx *c)
{
	return c->profile && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
	                         c->profile->doc, "allow_insecure_http"));
}

static int get_fetcher(struct gp_ctx *c)
{
	if (c->fetcher)
		return 0;
	struct gp_fetch_opts o = c->fetch_opts;
	if (c->out)
		gp_progress_attach(c->out, &o);
	o.allow_http = allow_http(c);
	if (gp_fetcher_new(&c->root, &o, &c->fetcher, c->err) < 0)
		return -1;
	return 0;
}

/* The DOWNLOAD plan entry, after the checks every run makes (a sha256,
 * offline and not cached); NULL with c->err set when they fail. */
static struct gp_effect *plan_download(struct gp_ctx *c,
                                       const struct gp_fetch_artifact *a)
{
	if (refuse_when_stopping(c) < 0 || get_fetcher(c) < 0)
		return NULL;
	if (!a->sha256) {
		gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		        "%s: %s has no sha256; gpuprov downloads nothing it cannot "
		        "verify",
		        stage_name(c), a->name ? a->name : a->url);
		return NULL;
	}
	struct gp_effect *e = add_effect(c, GP_EFFECT_DOWNLOAD);
	e->url = gp_fetch_rewrite_url(c->fetcher, a->url);
	e->sha256 = gp_xstrdup(a->sha256);
	e->size = a->size;
	e->path = gp_fetch_cache_path(c->fetcher, a->sha256);
	e->cached = gp_fetch_is_cached(c->fetcher, a);
	/* Offline and missing: fail in the plan pass already, before any change. */
	if (c->fetch_opts.offline && !e->cached && strncmp(e->url, "file://", 7) != 0) {
		gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		        "%s: offline, and %s (%s, sha256 %s) is not in the cache %s",
		        stage_name(c), a->name ? a->name : a->url, e->url, a->sha256,
		        c->fetch_opts.cache_dir ? c->fetch_opts.cache_dir
		                                : GP_FETCH_DEFAULT_CACHE);
		return NULL;
	}
	return e;
}

/* A download's failure, as the stage's error. */
static int download_failed(struct gp_ctx *c, struct gp_fetch_result *res)
{
	gp_log(c, "download failed: %s", res->msg);
	gp_fail(c->err, c->err->exit_code ? c->err->exit_code : GP_EXIT_APPLY_FAILED,
	        "%s: %s", stage_name(c), res->msg);
	gp_fetch_result_clear(res);
	return -1;
}

/* The real download of the planned e: from the background download when
 * there is one, else in this thread. */
static int download_real(struct gp_ctx *c, const struct gp_effect *e,
                         const struct gp_fetch_artifact *a, char **cache_path)
{
	struct gp_fetch_result res = { 0 };
	if (gp_prefetch_wait(c->prefetch, a->sha256, &res)) {
		gp_log(c, "download %s (sha256 %s): fetched in the background", e->url,
		       a->sha256);
		c->err->exit_code = 0; /* a failure is this one's */
	} else {
		gp_log(c, "download %s (sha256 %s)%s", e->url, a->sha256,
		       e->cached ? ": in the cache" : "");
		gp_fetch_one(c->fetcher, a, &res, c->err);
	}
	if (res.status < 0)
		return download_failed(c, &res);
	gp_log(c, "%s %s: %llu bytes, sha256 %s",
	       res.from_cache ? "cached" : "downloaded", res.path,
	       (unsigned long long)res.size, res.sha256);
	*cache_path = TAKE_PTR(res.path);
	gp_fetch_result_clear(&res);
	return 0;
}

int gp_effect_download(struct gp_ctx *c, const struct gp_fetch_artifact *a,
                       char **cache_path)
{
	*cache_path = NULL;
	struct gp_effect *e = plan_download(c, a);
	if (!e)
		return -1;
	if (c->dry_run) {
		*cache_path = gp_xstrdup(e->path);
		return 0;
	}
	return download_real(c, e, a, cache_path);
}

/* Calls fn for every non-directory entry under dir (in-root path), sorted,
 * depth first. */
static void walk(struct gp_ctx *c, const char *dir,
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
			walk(c, p, fn, data);
		else
			fn(c, p, &st, data);
	}
}

static void collect_path(struct gp_ctx *c, const char *path, const struct stat *st,
                         void *data)
{
	gp_strv_push((char ***)data, path);
}

/* The sha256s the archive layer computed while writing, by path relative
 * to the destination (a later entry for the same path wins). */
struct written {
	cJSON *by_rel;
	size_t dest_len;
};

static void on_file_written(void *data, const char *rel, const char *sha256)
{
	struct written *w = data;
	cJSON_DeleteItemFromObjectCaseSensitive(w->by_rel, rel);
	cJSON_AddItemToObject(w->by_rel, rel,
	                      sha256 ? cJSON_CreateString(sha256) : cJSON_CreateNull());
}

/* Journals a regular file under an extracted tree, with the sha256 taken
 * while it was written when there is one, else read now. */
static void journal_file(struct gp_ctx *c, const char *path, const struct stat *st,
                         void *data)
{
	const struct written *w = data;
	if (!S_ISREG(st->st_mode))
		return;
	const char *known = gp_json_string(w->by_rel, path + w->dest_len + 1, NULL);
	char sha[65];
	if (known)
		snprintf(sha, sizeof sha, "%s", known);
	else if (gp_root_sha256_file(&c->root, path, sha) < 0)
		return;
	gp_journal_record_file(&c->journal, path, sha, stage_name(c), NULL);
	record_fingerprint(c, path);
}

/* The EXTRACT plan entry: destination and what it replaces. */
static void plan_extract(struct gp_ctx *c, const char *archive_path, const char *sha256,
                         const char *dest)
{
	struct gp_effect *e = add_effect(c, GP_EFFECT_EXTRACT);
	e->source = gp_xstrdup(archive_path);
	e->sha256 = gp_xstrdup(sha256);
	e->path = gp_xstrdup(dest);
	struct stat st;
	e->old_exists = gp_root_lstat(&c->root, dest, &st) == 0;
	if (e->old_exists) {
		e->replaces = gp_xcalloc(1, sizeof(char *));
		walk(c, dest, collect_path, &e->replaces);
	}
}

/* After an extraction: the error, or the log line and the journal. */
static int extracted(struct gp_ctx *c, const char *what, const char *dest, int rc,
                     const struct gp_archive_result *res, const struct written *w)
{
	if (rc < 0) {
		gp_log(c, "extract failed: %s", res->msg);
		return gp_fail(
		    c->err, GP_EXIT_APPLY_FAILED,
		    "%s: cannot extract %s into %s: %s: %s; nothing was installed "
		    "there",
		    stage_name(c), what, dest, gp_archive_strerror(rc), res->msg);
	}
	gp_log(c, "extracted %llu entries (%llu bytes) into %s%s%s%s",
	       (unsigned long long)res->entries, (unsigned long long)res->out_bytes, dest,
	       res->replaced ? ", replacing the old one" : "",
	       res->leftover[0] ? "; the old directory could not be removed: " : "",
	       res->leftover);
	gp_journal_forget_under(&c->journal, dest);
	walk(c, dest, journal_file, (void *)w);
	return save_journal(c);
}

static int extract_cached(struct gp_ctx *c, const char *archive_path, const char *sha256,
                          const char *dest, unsigned flags)
{
	if (parent_dir(c, dest) < 0)
		return -1;
	_cleanup_free_ char *host = gp_root_host_path(&c->root, archive_path);
	struct written w = { .by_rel = cJSON_CreateObject(), .dest_len = strlen(dest) };
	const struct gp_archive_opts opts = { .sha256 = sha256,
		                              .flags = flags,
		                              .on_file = on_file_written,
		                              .on_file_data = &w };
	struct gp_archive_result res;
	gp_log(c, "extract %s into %s", archive_path, dest);
	int rc = gp_archive_extract_file(&c->root, dest, host, &opts, &res);
	rc = extracted(c, archive_path, dest, rc, &res, &w);
	cJSON_Delete(w.by_rel);
	return rc;
}

int gp_effect_extract(struct gp_ctx *c, const char *archive_path, const char *sha256,
                      const char *dest, unsigned flags)
{
	if (refuse_when_stopping(c) < 0)
		return -1;
	plan_extract(c, archive_path, sha256, dest);
	if (c->dry_run)
		return 0;
	return extract_cached(c, archive_path, sha256, dest, flags);
}

/* The options of a background download: the context's, with the progress
 * renderer the main fetcher set up (get_fetcher first). */
static struct gp_fetch_opts background_opts(struct gp_ctx *c)
{
	struct gp_fetch_opts o = c->fetch_opts;
	if (c->out && c->out->progress.mode != GP_PROGRESS_OFF) {
		o.progress = gp_progress_callback;
		o.progress_data = &c->out->progress;
	}
	o.allow_http = allow_http(c);
	return o;
}

/* Extracts while pf downloads: the archive layer hashes what it reads and
 * renames into place only once it matched; the reader ends only after the
 * download's own check. When the stream breaks (the download started over,
 * or the archive failed on bytes that may not be the file's), the verified
 * download is extracted once it is complete. */
static int stream_extract(struct gp_ctx *c, struct gp_prefetch *pf,
                          const struct gp_effect *dl, const char *dest, unsigned flags)
{
	if (parent_dir(c, dest) < 0)
		return -1;
	struct gp_prefetch_reader *r = gp_prefetch_reader_new(pf, dl->sha256);
	struct written w = { .by_rel = cJSON_CreateObject(), .dest_len = strlen(dest) };
	const struct gp_archive_opts opts = { .sha256 = dl->sha256,
		                              .flags = flags,
		                              .on_file = on_file_written,
		                              .on_file_data = &w };
	struct gp_archive_result ares;
	gp_log(c, "extract %s into %s while it downloads", dl->url, dest);
	int rc = gp_archive_extract(&c->root, dest, gp_prefetch_read, r, &opts, &ares);
	bool restarted = gp_prefetch_reader_restarted(r);
	gp_prefetch_reader_free(r);
	struct gp_fetch_result res = { 0 };
	gp_prefetch_wait(pf, dl->sha256, &res);
	c->err->exit_code = 0;
	if (res.status < 0) {
		cJSON_Delete(w.by_rel);
		return download_failed(c, &res);
	}
	gp_log(c, "downloaded %s: %llu bytes, sha256 %s", res.path,
	       (unsigned long long)res.size, res.sha256);
	gp_fetch_result_clear(&res);
	if (rc == 0) {
		rc = extracted(c, dl->url, dest, rc, &ares, &w);
		cJSON_Delete(w.by_rel);
		return rc;
	}
	cJSON_Delete(w.by_rel);
	gp_log(c,
	       "extracting while downloading failed (%s); extracting the verified "
	       "download instead",
	       restarted ? "the download started over" : ares.msg);
	return extract_cached(c, dl->path, dl->sha256, dest, flags);
}

int gp_effect_download_extract(struct gp_ctx *c, const struct gp_fetch_artifact *a,
                               const char *dest, unsigned flags)
{
	struct gp_effect *dl = plan_download(c, a);
	if (!dl)
		return -1;
	bool cached = dl->cached;
	plan_extract(c, dl->path, a->sha256, dest);
	if (c->dry_run)
		return 0;
	/* plan_extract may have moved the plan's effects array. */
	dl = &c->stage->effects[c->stage->n_effects - 2];
	struct gp_prefetch *own = NULL;
	struct gp_prefetch *pf = c->prefetch;
	if (!cached && !gp_prefetch_has(pf, a->sha256)) {
		gp_prefetch_list_add(&own, a);
		struct gp_fetch_opts o = background_opts(c);
		struct gp_err err = { 0 };
		if (gp_prefetch_start(own, &c->root, &o, &err) < 0)
			gp_log(c, "cannot download in the background: %s", err.msg);
		pf = own;
	}
	int rc;
	if (!cached && gp_prefetch_has(pf, a->sha256) &&
	    !gp_prefetch_done(pf, a->sha256)) {
		rc = stream_extract(c, pf, dl, dest, flags);
	} else {
		/* In the cache already, or the download is over: extract the
		 * verified file (hashed before the decoder sees a byte). */
		_cleanup_free_ char *path = NULL;
		rc = download_real(c, dl, a, &path);
		if (rc == 0)
			rc = extract_cached(c, path, a->sha256, dest, flags);
	}
	gp_prefetch_free(own);
	return rc;
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
	if (refuse_when_stopping(c) < 0)
		return -1;
	if (path[0] != '/' || !path[1] || strstr(path, "/../") ||
	    gp_str_ends_with(path, "/.."))
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "%s: will not remove the directory tree '%s': give an "
		               "absolute path below / without '..'",
		               stage_name(c), path);
	struct stat st;
	int rc = gp_root_lstat(&c->root, path, &st);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0 || !S_ISDIR(st.st_mode))
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED, "%s: will not remove %s: %s",
		               stage_name(c), path,
		               rc < 0 ? strerror(-rc)
		               : S_ISLNK(st.st_mode)
		                   ? "it is a symlink, not a directory (never followed)"
		                   : "it is not a directory");
	struct unrecorded u = { 0 };
	walk(c, path, find_unrecorded, &u);
	if (u.first || !u.files) {
		gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		        "%s: will not remove %s: %s%s; move %s away (or remove the "
		        "directory by hand), then run again",
		        stage_name(c), path,
		        u.first ? "it holds a file gpuprov did not install: "
		                : "gpuprov recorded no file in it",
		        u.first ? u.first : "", u.first ? "that file" : "it");
		free(u.first);
		return -1;
	}
	struct gp_effect *e = add_effect(c, GP_EFFECT_REMOVE_TREE);
	e->path = gp_xstrdup(path);
	e->replaces = gp_xcalloc(1, sizeof(char *));
	walk(c, path, collect_path, &e->replaces);
	if (c->dry_run)
		return 0;
	rc = gp_root_remove_tree(&c->root, path);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "%s: cannot remove the directory %s: %s", stage_name(c),
		               path, strerror(-rc));
	gp_journal_forget_under(&c->journal, path);
	gp_log(c, "removed the directory %s (%zu entries)", path,
	       gp_strv_len(e->replaces));
	return save_journal(c);
}

int gp_ctx_rewrite_url(struct gp_ctx *c, const char *url, char **out)
{
	*out = NULL;
	if (get_fetcher(c) < 0)
		return -1;
	*out = gp_fetch_rewrite_url(c->fetcher, url);
	return 0;
}

void gp_prefetch_add(struct gp_ctx *c, const struct gp_fetch_artifact *a)
{
	if (c->dry_run)
		return;
	gp_prefetch_list_add(&c->prefetch, a);
}

size_t gp_ctx_prefetch_start(struct gp_ctx *c)
{
	size_t n = gp_prefetch_count(c->prefetch);
	if (!n || c->dry_run || c->fetch_opts.offline)
		return 0;
	/* The main fetcher first: it sets up the progress renderer, which the
	 * thread then shares (gp_progress_callback serialises on the stream). */
	if (get_fetcher(c) < 0) {
		gp_log(c, "no background downloads: %s", c->err->msg);
		return 0;
	}
	struct gp_fetch_opts o = background_opts(c);
	struct gp_err err = { 0 };
	if (gp_prefetch_start(c->prefetch, &c->root, &o, &err) < 0) {
		gp_log(c, "no background downloads: %s", err.msg);
		return 0;
	}
	_cleanup_free_ char *names = gp_prefetch_names(c->prefetch);
	gp_log(c, "downloading in the background: %s", names);
	return n;
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
			record_fingerprint(c, path);
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
	return changed ? save_journal(c) : 0;
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
	struct gp_effect *e = add_effect(c, GP_EFFECT_WRITE);
	e->path = gp_xstrdup(path);
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
	size_t before = c->stage->n_effects;
	int rc;
	if (data)
		rc = gp_effect_write(c, path, data, len, mode);
	else if (c->dry_run)
		rc = plan_write_unseen(c, path, mode, sha256);
	else
		rc = gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		             "%s: %s is not downloaded; nothing was written to %s",
		             stage_name(c), source, path);
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
	size_t before = c->stage->n_effects;
	int rc = gp_effect_write(c, path, data, len, mode);
	if (c->stage->n_effects > before)
		c->stage->effects[before].over = gp_xstrdup(maker);
	return rc;
}
