/* The journal (state.json) and the run lock. The journal is the memory of
 * gpuprov between runs and across reboots: what profile was installed,
 * each stage's state, every file written (with sha256 and backup), and a
 * pending reboot with the boot id it was requested in. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "gpuprov/exitcodes.h"
#include "gpuprov/journal.h"
#include "gpuprov/json.h"

static void now_iso8601(char buf[32])
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static cJSON *child_object(cJSON *parent, const char *key)
{
	cJSON *o = cJSON_GetObjectItemCaseSensitive(parent, key);
	if (!cJSON_IsObject(o)) {
		cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
		o = cJSON_AddObjectToObject(parent, key);
	}
	return o;
}

static void set_string(cJSON *o, const char *key, const char *value)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	if (value)
		cJSON_AddStringToObject(o, key, value);
}

static const char *get_string(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int gp_journal_load(const struct gp_root *r, struct gp_journal *j, struct gp_err *err)
{
	j->doc = NULL;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	_cleanup_free_ char *host = gp_root_host_path(r, GP_STATE_FILE);
	int rc = gp_root_read(r, GP_STATE_FILE, &text, &len);
	if (rc == -ENOENT) {
		j->doc = cJSON_CreateObject();
		cJSON_AddNumberToObject(j->doc, "gpuprov_state", 1);
		return 0;
	}
	if (rc < 0)
		return gp_fail(err, GP_EXIT_INVALID_INPUT,
		               "cannot read the journal %s: %s", host, strerror(-rc));
	struct gp_err perr = { 0 };
	cJSON *doc = gp_json_parse(host, text, len, &perr);
	if (!doc || !cJSON_IsObject(doc) ||
	    !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(doc, "gpuprov_state"))) {
		cJSON_Delete(doc);
		return gp_fail(
		    err, GP_EXIT_INVALID_INPUT,
		    "the journal %s is corrupt (%s); move it aside to start over "
		    "(gpuprov then treats this root as never provisioned)",
		    host, doc ? "not a gpuprov state document" : perr.msg);
	}
	j->doc = doc;
	return 0;
}

int gp_journal_save(const struct gp_root *r, const struct gp_journal *j)
{
	int rc = gp_root_mkdir_p(r, GP_STATE_DIR, 0755);
	if (rc < 0)
		return rc;
	_cleanup_free_ char *text = cJSON_Print(j->doc);
	if (!text)
		return -ENOMEM;
	struct gp_buf b = { 0 };
	gp_buf_puts(&b, text);
	gp_buf_puts(&b, "\n");
	rc = gp_root_write_atomic(r, GP_STATE_FILE, b.data, b.len, 0644, 0, 0);
	gp_buf_free(&b);
	return rc;
}

void gp_journal_free(struct gp_journal *j)
{
	cJSON_Delete(j->doc);
	j->doc = NULL;
}

bool gp_journal_is_empty(const struct gp_journal *j)
{
	return !cJSON_GetObjectItemCaseSensitive(j->doc, "profile");
}

void gp_journal_set_profile(struct gp_journal *j, const char *name, const char *path,
                            const char *digest)
{
	cJSON *p = child_object(j->doc, "profile");
	set_string(p, "name", name);
	set_string(p, "path", path);
	set_string(p, "sha256", digest);
}

void gp_journal_set_overrides(struct gp_journal *j, char *const *overrides)
{
	cJSON *p = child_object(j->doc, "profile");
	cJSON_DeleteItemFromObjectCaseSensitive(p, "overrides");
	cJSON *arr = cJSON_AddArrayToObject(p, "overrides");
	for (size_t i = 0; overrides && overrides[i]; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(overrides[i]));
}

const char *gp_journal_profile_name(const struct gp_journal *j)
{
	return get_string(cJSON_GetObjectItemCaseSensitive(j->doc, "profile"), "name");
}

const char *gp_journal_profile_path(const struct gp_journal *j)
{
	return get_string(cJSON_GetObjectItemCaseSensitive(j->doc, "profile"), "path");
}

cJSON *gp_journal_stage(struct gp_journal *j, const char *stage)
{
	return child_object(child_object(j->doc, "stages"), stage);
}

const cJSON *gp_journal_stage_get(const struct gp_journal *j, const char *stage)
{
	return cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j->doc, "stages"), stage);
}

void gp_journal_set_stage(struct gp_journal *j, const char *stage, const char *state)
{
	cJSON *s = gp_journal_stage(j, stage);
	char when[32];
	now_iso8601(when);
	set_string(s, "state", state);
	set_string(s, "time", when);
}

void gp_journal_record_file(struct gp_journal *j, const char *path, const char *sha256,
                            const char *stage, const char *backup)
{
	cJSON *f = child_object(child_object(j->doc, "files"), path);
	set_string(f, "sha256", sha256);
	set_string(f, "stage", stage);
	/* Keep the first backup: it holds what was there before gpuprov. */
	if (backup && !get_string(f, "backup"))
		set_string(f, "backup", backup);
}

const char *gp_journal_file_sha256(const struct gp_journal *j, const char *path)
{
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(j->doc, "files");
	return get_string(cJSON_GetObjectItemCaseSensitive(files, path), "sha256");
}

void gp_journal_set_reboot(struct gp_journal *j, const char *reason, const char *boot_id)
{
	cJSON *rb = child_object(j->doc, "reboot");
	char when[32];
	now_iso8601(when);
	set_string(rb, "reason", reason);
	set_string(rb, "boot_id", boot_id);
	set_string(rb, "time", when);
}

void gp_journal_clear_reboot(struct gp_journal *j)
{
	cJSON_DeleteItemFromObjectCaseSensitive(j->doc, "reboot");
}

const char *gp_journal_reboot_reason(const struct gp_journal *j)
{
	return get_string(cJSON_GetObjectItemCaseSensitive(j->doc, "reboot"), "reason");
}

const char *gp_journal_reboot_boot_id(const struct gp_journal *j)
{
	return get_string(cJSON_GetObjectItemCaseSensitive(j->doc, "reboot"), "boot_id");
}

int gp_lock_acquire(const struct gp_root *r, int *fdp, struct gp_err *err)
{
	_cleanup_free_ char *host = gp_root_host_path(r, GP_LOCK_FILE);
	int rc = gp_root_mkdir_p(r, GP_STATE_DIR, 0755);
	if (rc < 0)
		return gp_fail(err, GP_EXIT_APPLY_FAILED, "cannot create %s: %s",
		               GP_STATE_DIR, strerror(-rc));
	_cleanup_close_ int fd = gp_root_openat(r, GP_LOCK_FILE,
	                                        O_RDWR | O_CREAT | O_NOFOLLOW, 0644);
	if (fd < 0)
		return gp_fail(err, GP_EXIT_APPLY_FAILED, "cannot open the lock %s: %s",
		               host, strerror(-fd));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK)
			return gp_fail(err, GP_EXIT_APPLY_FAILED, "cannot lock %s: %s",
			               host, strerror(errno));
		char pid[32] = "";
		ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		return gp_fail(
		    err, GP_EXIT_LOCKED,
		    "another gpuprov run (pid %s) holds the lock %s; wait for it to "
		    "finish, then run this command again",
		    *pid ? pid : "unknown", host);
	}
	char pid[32];
	int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		return gp_fail(err, GP_EXIT_APPLY_FAILED, "cannot write the lock %s: %s",
		               host, strerror(errno));
	*fdp = TAKE_FD(fd);
	return 0;
}

bool gp_lock_held(const struct gp_root *r)
{
	_cleanup_close_ int fd = gp_root_openat(r, GP_LOCK_FILE, O_RDONLY | O_NOFOLLOW,
	                                        0);
	if (fd < 0)
		return false;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0)
		return false; /* released with the fd */
	return errno == EWOULDBLOCK;
}

void gp_lock_release(int fd)
{
	if (fd < 0)
		return;
	/* Empty the pid before unlocking so a reader never sees a stale holder. */
	if (ftruncate(fd, 0) < 0) {
		/* nothing to do: the lock is released with the fd either way */
	}
	close(fd);
}

/* --- intents: a write recorded before it starts (context.c) ------------- */

void gp_journal_set_intent(struct gp_journal *j, const char *path, const char *sha256,
                           const char *stage, const char *backup)
{
	cJSON *in = child_object(child_object(j->doc, "intents"), path);
	set_string(in, "sha256", sha256);
	set_string(in, "stage", stage);
	set_string(in, "backup", backup);
}

void gp_journal_clear_intent(struct gp_journal *j, const char *path)
{
	cJSON *intents = cJSON_GetObjectItemCaseSensitive(j->doc, "intents");
	cJSON_DeleteItemFromObjectCaseSensitive(intents, path);
	if (intents && !intents->child)
		cJSON_DeleteItemFromObjectCaseSensitive(j->doc, "intents");
}
