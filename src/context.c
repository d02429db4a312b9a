/* The effect door: the only code that changes the target. In dry-run each
 * function records a plan entry and returns; for real it records the same
 * entry, then backs up what it replaces, writes atomically, journals the
 * result and logs it. Stages call these and never test dry_run. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuprov/context.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/run.h"

int gp_ctx_read(struct gp_ctx *c, const char *path, char **data, size_t *len)
{
	bool exists;
	const char *planned;
	size_t planned_len;
	if (gp_plan_lookup_file(c->plan, path, &exists, &planned, &planned_len)) {
		if (!exists)
			return -ENOENT;
		*data = gp_xstrndup(planned, planned_len);
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
	if (gp_plan_lookup_file(c->plan, path, &exists, &planned, &planned_len))
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
static int refuse_when_stopping(struct gp_ctx *c)
{
	if (!gp_run_stop_signal || c->dry_run)
		return 0;
	const char *d = sigdescr_np(gp_run_stop_signal);
	return gp_fail(
	    c->err, GP_EXIT_APPLY_FAILED,
	    "%s: interrupted by signal %d (%s) before the next change; run the "
	    "same command again to finish",
	    stage_name(c), (int)gp_run_stop_signal, d ? d : "unknown signal");
}

/* Copies what is at path into the backup tree unless gpuprov wrote it
 * itself (then the first backup, taken before gpuprov's first write,
 * already holds the operator's version). Returns the backup path. */
static int backup(struct gp_ctx *c, const char *path, const char *data, size_t len,
                  char **backup_path)
{
	*backup_path = NULL;
	char sha[65];
	gp_sha256_hex(data, len, sha);
	if (gp_streq(gp_journal_file_sha256(&c->journal, path), sha))
		return 0;
	struct stat st;
	mode_t mode = gp_root_stat(&c->root, path, &st) == 0 ? st.st_mode & 07777 : 0644;
	_cleanup_free_ char *dest = gp_xasprintf("%s%s", GP_BACKUP_DIR, path);
	for (int n = 1; gp_root_exists(&c->root, dest); n++) {
		free(dest);
		dest = gp_xasprintf("%s%s.%d", GP_BACKUP_DIR, path, n);
	}
	_cleanup_free_ char *dir = gp_xstrndup(dest, (size_t)(strrchr(dest, '/') - dest));
	int rc = gp_root_mkdir_p(&c->root, dir, 0700);
	if (rc == 0)
		rc = gp_root_write_atomic(&c->root, dest, data, len, mode, 0, 0);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "%s: cannot back up %s to %s: %s; nothing was changed",
		               stage_name(c), path, dest, strerror(-rc));
	gp_log(c, "backed up %s to %s", path, dest);
	*backup_path = TAKE_PTR(dest);
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

int gp_effect_write(struct gp_ctx *c, const char *path, const void *data, size_t len,
                    mode_t mode)
{
	if (refuse_when_stopping(c) < 0)
		return -1;
	_cleanup_free_ char *old = NULL;
	size_t old_len = 0;
	int rc = gp_ctx_read(c, path, &old, &old_len);
	if (rc < 0 && rc != -ENOENT)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED, "%s: cannot read %s: %s",
		               stage_name(c), path, strerror(-rc));
	bool exists = rc == 0;
	struct stat st;
	bool mode_ok = !exists || gp_root_stat(&c->root, path, &st) < 0 ||
	               (st.st_mode & 07777) == (mode & 07777);
	if (exists && old_len == len && memcmp(old, data, len) == 0 && mode_ok)
		return 0;

	struct gp_effect *e = add_effect(c, GP_EFFECT_WRITE);
	e->path = gp_xstrdup(path);
	e->old_exists = exists;
	e->old_data = exists ? gp_xstrndup(old, old_len) : NULL;
	e->old_len = old_len;
	e->new_data = gp_xstrndup(data, len);
	e->new_len = len;
	e->mode = mode;
	if (c->dry_run)
		return 0;

	_cleanup_free_ char *backup_path = NULL;
	if (exists && backup(c, path, old, old_len, &backup_path) < 0)
		return -1;
	if (parent_dir(c, path) < 0)
		return -1;
	rc = gp_root_write_atomic(&c->root, path, data, len, mode, 0, 0);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED, "%s: cannot write %s: %s",
		               stage_name(c), path, strerror(-rc));
	char sha[65];
	gp_sha256_hex(data, len, sha);
	gp_journal_record_file(&c->journal, path, sha, stage_name(c), backup_path);
	gp_log(c, "wrote %s (%zu bytes, mode %04o, sha256 %s)", path, len,
	       (unsigned)mode & 07777, sha);
	return save_journal(c);
}

int gp_effect_remove(struct gp_ctx *c, const char *path)
{
	if (refuse_when_stopping(c) < 0)
		return -1;
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
	e->old_data = gp_xstrndup(old, old_len);
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
	struct gp_effect *e = add_effect(c, GP_EFFECT_SYMLINK);
	e->path = gp_xstrdup(path);
	e->target = gp_xstrdup(target);
	if (c->dry_run)
		return 0;
	if (parent_dir(c, path) < 0)
		return -1;
	int rc = gp_root_symlink(&c->root, target, path);
	if (rc < 0)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "%s: cannot link %s -> %s: %s", stage_name(c), path,
		               target, strerror(-rc));
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

int gp_effect_run(struct gp_ctx *c, char *const argv[])
{
	if (refuse_when_stopping(c) < 0)
		return -1;
	struct gp_effect *e = add_effect(c, GP_EFFECT_RUN);
	e->argv = gp_strv_copy(argv);
	if (c->dry_run)
		return 0;
	struct gp_run_result res = { 0 };
	int rc = run_logged(c, argv, &res);
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
		gp_run_result_free(&res);
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
	if (!c->dry_run)
		gp_log(c, "reboot required: %s", reason);
}

int gp_ctx_run_readonly(struct gp_ctx *c, char *const argv[], struct gp_run_result *res)
{
	return run_logged(c, argv, res);
}
