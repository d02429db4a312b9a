/* The journal (state.json) and the run lock. The journal is the memory of
 * gpuprov between runs and across reboots: what profile was installed,
 * each stage's state, every file written (with sha256 and backup), and a
 * pending reboot with the boot id it was requested in. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

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
	gp_json_set_string(o, key, value);
}

static const char *get_string(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- validation on load: a journal is trusted only when every member
 * gpuprov reads has the type and form it writes. */

enum member_kind {
	M_STRING,
	M_SHA256,
	M_BACKUP,
	M_STRINGS,
	M_BOOL,
	M_NUMBER,
	M_OBJECT,
	M_COUNT
};

struct member {
	const char *key;
	enum member_kind kind;
};

static const struct member profile_members[] = {
	{ "name", M_STRING },       { "path", M_STRING }, { "sha256", M_SHA256 },
	{ "overrides", M_STRINGS }, { NULL, 0 },
};
static const struct member file_members[] = {
	{ "sha256", M_SHA256 }, { "stage", M_STRING }, { "backup", M_BACKUP },
	{ "stat", M_STRING },   { "link", M_STRING },  { "link_before", M_STRING },
	{ "dir", M_BOOL },      { "mode", M_STRING },  { "owner", M_STRING },
	{ "whole", M_BOOL },    { NULL, 0 },
};
/* "packages"."<name>": what an install left, for drift (src/stages/drift.c). */
static const struct member package_members[] = {
	{ "version", M_STRING },          { "stage", M_STRING },  { "held", M_BOOL },
	{ "installed_before", M_STRING }, { "hold_set", M_BOOL }, { NULL, 0 },
};
static const struct member reboot_members[] = {
	{ "reason", M_STRING },
	{ "boot_id", M_STRING },
	{ "time", M_STRING },
	{ NULL, 0 },
};
/* "resume": the reboots gpuprov made for one install (--reboot=auto). */
static const struct member resume_members[] = {
	{ "reboots", M_COUNT },
	{ "time", M_STRING },
	{ "stopped", M_STRING },
	{ NULL, 0 },
};

/* What is wrong: the bad value and why. */
struct invalid {
	const cJSON *value;
	char *why;
};

static bool invalid(struct invalid *bad, const cJSON *value, const char *fmt, ...)
    _printf_(3, 4);
static bool invalid(struct invalid *bad, const cJSON *value, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	bad->why = gp_xvasprintf(fmt, ap);
	va_end(ap);
	bad->value = value;
	return false;
}

static const char *type_name(const cJSON *v)
{
	return cJSON_IsString(v)   ? "a string"
	       : cJSON_IsNumber(v) ? "a number"
	       : cJSON_IsBool(v)   ? "true or false"
	       : cJSON_IsNull(v)   ? "null"
	       : cJSON_IsArray(v)  ? "an array"
	                           : "an object";
}

static bool is_sha256(const char *s)
{
	return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

/* An absolute path without ".." components, as gpuprov records them. */
static bool is_clean_path(const char *s)
{
	if (s[0] != '/')
		return false;
	for (const char *c = s; (c = strstr(c, "/..")); c += 3)
		if (c[3] == '/' || c[3] == '\0')
			return false;
	return true;
}

static bool check_member(const cJSON *v, enum member_kind kind, struct invalid *bad)
{
	if (kind == M_STRINGS) {
		if (!cJSON_IsArray(v))
			return invalid(bad, v, "must be an array of strings, not %s",
			               type_name(v));
		for (const cJSON *x = v->child; x; x = x->next)
			if (!cJSON_IsString(x))
				return invalid(bad, v, "must hold only strings, not %s",
				               type_name(x));
		return true;
	}
	if (kind == M_COUNT)
		return (cJSON_IsNumber(v) && v->valuedouble >= 0 &&
		        v->valuedouble <= GP_RESUME_REBOOTS_LIMIT &&
		        v->valuedouble == (double)(unsigned)v->valuedouble) ||
		       invalid(bad, v, "must be a whole number from 0 to %d",
		               GP_RESUME_REBOOTS_LIMIT);
	if (kind == M_BOOL)
		return cJSON_IsBool(v) ||
		       invalid(bad, v, "must be true or false, not %s", type_name(v));
	if (kind == M_NUMBER)
		return cJSON_IsNumber(v) ||
		       invalid(bad, v, "must be a number, not %s", type_name(v));
	if (kind == M_OBJECT)
		return cJSON_IsObject(v) ||
		       invalid(bad, v, "must be an object, not %s", type_name(v));
	if (!cJSON_IsString(v))
		return invalid(bad, v, "must be a string, not %s", type_name(v));
	if (kind == M_SHA256 && !is_sha256(v->valuestring))
		return invalid(bad, v, "must be 64 lowercase hex digits");
	if (kind == M_BACKUP && (!gp_str_starts_with(v->valuestring, GP_BACKUP_DIR "/") ||
	                         !is_clean_path(v->valuestring)))
		return invalid(bad, v, "must be a path under %s", GP_BACKUP_DIR);
	return true;
}

/* o must be an object; its known members must be what gpuprov writes.
 * Members it does not know are left alone. */
static bool check_object(const cJSON *o, const struct member *m, struct invalid *bad)
{
	if (!cJSON_IsObject(o))
		return invalid(bad, o, "must be an object, not %s", type_name(o));
	for (; m && m->key; m++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, m->key);
		if (v && !check_member(v, m->kind, bad))
			return false;
	}
	return true;
}

/* Each member of o (an object) checked by check. */
static bool check_entries(const cJSON *o, bool (*check)(const cJSON *, struct invalid *),
                          struct invalid *bad)
{
	if (!check_object(o, NULL, bad))
		return false;
	for (const cJSON *e = o->child; e; e = e->next)
		if (!check(e, bad))
			return false;
	return true;
}

/* A stage's record: its state, time and marks, all strings. */
static bool check_stage(const cJSON *rec, struct invalid *bad)
{
	if (!check_object(rec, NULL, bad))
		return false;
	for (const cJSON *v = rec->child; v; v = v->next)
		if (!check_member(v, M_STRING, bad))
			return false;
	return true;
}

static bool check_file(const cJSON *rec, struct invalid *bad)
{
	if (!is_clean_path(rec->string))
		return invalid(bad, rec,
		               "names a file that is not an absolute path without '..'");
	return check_object(rec, file_members, bad);
}

static bool check_package(const cJSON *rec, struct invalid *bad)
{
	return check_object(rec, package_members, bad);
}

static bool check_history(const cJSON *history, struct invalid *bad);

static bool check_journal(const cJSON *doc, struct invalid *bad)
{
	const cJSON *format = cJSON_GetObjectItemCaseSensitive(doc, "gpuprov_state");
	if (format->valuedouble != GP_STATE_FORMAT)
		return invalid(bad, format, "format %g is not one gpuprov wrote",
		               format->valuedouble);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, "profile");
	if (v && !check_object(v, profile_members, bad))
		return false;
	v = cJSON_GetObjectItemCaseSensitive(doc, "stages");
	if (v && !check_entries(v, check_stage, bad))
		return false;
	/* "intents": writes about to start, recorded like the files. */
	static const char *const file_maps[] = { "files", "intents" };
	for (size_t i = 0; i < ARRAY_SIZE(file_maps); i++) {
		v = cJSON_GetObjectItemCaseSensitive(doc, file_maps[i]);
		if (v && !check_entries(v, check_file, bad))
			return false;
	}
	v = cJSON_GetObjectItemCaseSensitive(doc, "packages");
	if (v && !check_entries(v, check_package, bad))
		return false;
	v = cJSON_GetObjectItemCaseSensitive(doc, "history");
	if (v && !check_history(v, bad))
		return false;
	v = cJSON_GetObjectItemCaseSensitive(doc, "resume");
	if (v && !check_object(v, resume_members, bad))
		return false;
	v = cJSON_GetObjectItemCaseSensitive(doc, "reboot");
	return !v || check_object(v, reboot_members, bad);
}

/* The JSON pointer of node under v, or NULL: found by a walk, as cJSON
 * keeps no parent links (only an error needs it). */
static char *pointer_to(const cJSON *v, const char *pointer, const cJSON *node)
{
	if (v == node)
		return gp_xstrdup(pointer);
	size_t index = 0;
	for (const cJSON *c = v->child; c; c = c->next, index++) {
		_cleanup_free_ char *at = cJSON_IsObject(v)
		                              ? gp_json_pointer_append(pointer, c->string)
		                              : gp_xasprintf("%s/%zu", pointer, index);
		char *found = pointer_to(c, at, node);
		if (found)
			return found;
	}
	return NULL;
}

/* The bad value's line:col: positions are computed only now, for the error. */
static char *where(const char *host, const char *text, size_t len, const char *pointer)
{
	struct gp_json_doc d;
	struct gp_err ignored = { 0 };
	int line = 1, col = 1;
	if (gp_json_doc_parse(&d, host, text, len, &ignored) == 0)
		gp_json_doc_where(&d, pointer, &line, &col);
	gp_json_doc_free(&d);
	return gp_xasprintf("%s:%d:%d", host, line, col);
}

#define MOVE_IT_ASIDE                                                                    \
	"move it aside to start over (gpuprov then treats this root as never "           \
	"provisioned)"

static int refuse(struct gp_err *err, const char *host, const char *why)
{
	return gp_fail(err, GP_EINPUT, "the journal %s is corrupt (%s); " MOVE_IT_ASIDE,
	               host, why);
}

/* The "files" index: every record by path. */
static void index_files(struct gp_journal *j)
{
	gp_strmap_free(&j->files);
	cJSON *files = cJSON_GetObjectItemCaseSensitive(j->doc, "files");
	for (cJSON *f = files ? files->child : NULL; f; f = f->next)
		gp_strmap_put(&j->files, f->string, f);
}

static int parse_owned(struct gp_journal *j, const char *host, char *text, size_t len,
                       struct gp_err *err);

int gp_journal_load(const struct gp_root *r, struct gp_journal *j, struct gp_err *err)
{
	*j = (struct gp_journal){ 0 };
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	_cleanup_free_ char *host = gp_root_host_path(r, GP_STATE_FILE);
	int rc = gp_root_read_max(r, GP_STATE_FILE, GP_JOURNAL_MAX, &text, &len);
	if (rc == -ENOENT) {
		j->doc = cJSON_CreateObject();
		cJSON_AddNumberToObject(j->doc, "gpuprov_state", GP_STATE_FORMAT);
		return 0;
	}
	if (rc < 0) {
		_cleanup_free_ char *why = gp_root_read_error(r, GP_STATE_FILE,
		                                              GP_JOURNAL_MAX, rc);
		return gp_fail(err, GP_EINPUT,
		               "cannot read the journal: %s; move it aside to start over "
		               "(gpuprov then treats this root as never provisioned)",
		               why);
	}
	return parse_owned(j, host, TAKE_PTR(text), len, err);
}

int gp_journal_parse(struct gp_journal *j, const char *host, const char *text, size_t len,
                     struct gp_err *err)
{
	return parse_owned(j, host, gp_xmemdup0(text, len), len, err);
}

/* Parses text (NUL-terminated at len), which the journal keeps as what was
 * saved: a save that would write the same bytes writes nothing. */
static int parse_owned(struct gp_journal *j, const char *host, char *text, size_t len,
                       struct gp_err *err)
{
	*j = (struct gp_journal){ 0 };
	_cleanup_free_ char *owned = text;
	struct gp_err perr = { 0 };
	cJSON *doc = gp_json_parse(host, text, len, &perr);
	if (!doc)
		return refuse(err, host, perr.msg);
	const cJSON *format = cJSON_GetObjectItemCaseSensitive(doc, "gpuprov_state");
	if (!cJSON_IsObject(doc) || !cJSON_IsNumber(format)) {
		cJSON_Delete(doc);
		return refuse(err, host, "not a gpuprov state document");
	}
	double version = format->valuedouble;
	if (version > GP_STATE_FORMAT) {
		cJSON_Delete(doc);
		return gp_fail(err, GP_EINPUT,
		               "the journal %s is in format %g, newer than this gpuprov "
		               "reads (%d): a newer gpuprov wrote it; use that one, "
		               "or " MOVE_IT_ASIDE,
		               host, version, GP_STATE_FORMAT);
	}
	struct invalid bad = { 0 };
	if (!check_journal(doc, &bad)) {
		_cleanup_free_ char *pointer = pointer_to(doc, "", bad.value);
		if (!pointer) /* cannot happen: the value is in doc */
			pointer = gp_xstrdup("");
		cJSON_Delete(doc);
		_cleanup_free_ char *at = where(host, text, len, pointer);
		_cleanup_free_ char *why = gp_xasprintf(
		    "%s: \"%s\" %s", at, *pointer ? pointer : "/", bad.why);
		free(bad.why);
		return refuse(err, host, why);
	}
	j->doc = doc;
	j->saved = TAKE_PTR(owned);
	j->saved_len = len;
	index_files(j);
	return 0;
}

int gp_journal_save(const struct gp_root *r, struct gp_journal *j)
{
	char *text = cJSON_Print(j->doc);
	if (!text)
		return -ENOMEM;
	size_t len = strlen(text);
	text = gp_xrealloc(text, len + 2); /* in place, mostly: no second copy */
	text[len++] = '\n';
	text[len] = '\0';
	/* A run that changed nothing leaves the file as it was, mtime too. */
	if (j->saved && j->saved_len == len && memcmp(j->saved, text, len) == 0) {
		free(text);
		return 0;
	}
	int rc = gp_root_mkdir_p(r, GP_STATE_DIR, 0755);
	if (rc == 0)
		rc = gp_root_write_atomic(r, GP_STATE_FILE, text, len, 0644, 0, 0);
	if (rc < 0) {
		free(text);
		return rc;
	}
	free(j->saved);
	j->saved = text;
	j->saved_len = len;
	return 0;
}

void gp_journal_free(struct gp_journal *j)
{
	cJSON_Delete(j->doc);
	gp_strmap_free(&j->files);
	free(j->saved);
	*j = (struct gp_journal){ 0 };
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
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; overrides && overrides[i]; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(overrides[i]));
	gp_json_set_item(p, "overrides", arr);
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
	const char *was = get_string(s, "state");
	/* The time is when the stage came to its state: a rerun that finds it
	 * the same changes nothing, and a stage gpuprov did that a later run
	 * finds satisfied is still done. */
	if (gp_streq(was, state) ||
	    (gp_streq(was, "done") && gp_streq(state, "satisfied")))
		return;
	char when[32];
	now_iso8601(when);
	set_string(s, "state", state);
	set_string(s, "time", when);
}

/* Sets key unless it is set: the first backup or replaced link holds what
 * was there before gpuprov. */
static void set_first(cJSON *f, const char *key, const char *value)
{
	if (value && !get_string(f, key))
		set_string(f, key, value);
}

/* The record of path in "files", made when there is none. */
static cJSON *file_record(struct gp_journal *j, const char *path)
{
	cJSON *f = gp_strmap_get(&j->files, path);
	if (!f) {
		f = cJSON_AddObjectToObject(child_object(j->doc, "files"), path);
		gp_strmap_put(&j->files, f->string, f);
	}
	return f;
}

void gp_journal_record_file(struct gp_journal *j, const char *path, const char *sha256,
                            const char *stage, const char *backup)
{
	cJSON *f = file_record(j, path);
	set_string(f, "sha256", sha256);
	set_string(f, "stage", stage);
	set_first(f, "backup", backup);
}

void gp_journal_record_link(struct gp_journal *j, const char *path, const char *target,
                            const char *before, const char *stage)
{
	cJSON *f = file_record(j, path);
	set_string(f, "stage", stage);
	set_string(f, "link", target);
	set_first(f, "link_before", before);
}

void gp_journal_record_dir(struct gp_journal *j, const char *path, const char *stage)
{
	cJSON *f = file_record(j, path);
	set_string(f, "stage", stage);
	cJSON_DeleteItemFromObjectCaseSensitive(f, "dir");
	cJSON_AddTrueToObject(f, "dir");
}

void gp_journal_record_whole_dir(struct gp_journal *j, const char *path,
                                 const char *stage)
{
	gp_journal_record_dir(j, path, stage);
	cJSON *f = file_record(j, path);
	cJSON_DeleteItemFromObjectCaseSensitive(f, "whole");
	cJSON_AddTrueToObject(f, "whole");
}

cJSON *gp_journal_file(const struct gp_journal *j, const char *path)
{
	return gp_strmap_get(&j->files, path);
}

const char *gp_journal_file_sha256(const struct gp_journal *j, const char *path)
{
	return get_string(gp_journal_file(j, path), "sha256");
}

static void forget(struct gp_journal *j, cJSON *files, cJSON *rec)
{
	gp_strmap_remove(&j->files, rec->string);
	cJSON_Delete(cJSON_DetachItemViaPointer(files, rec));
}

void gp_journal_forget_file(struct gp_journal *j, const char *path)
{
	cJSON *rec = gp_journal_file(j, path);
	if (rec)
		forget(j, cJSON_GetObjectItemCaseSensitive(j->doc, "files"), rec);
}

void gp_journal_forget_under(struct gp_journal *j, const char *dir)
{
	cJSON *files = cJSON_GetObjectItemCaseSensitive(j->doc, "files");
	size_t n = strlen(dir);
	for (cJSON *f = files ? files->child : NULL, *next; f; f = next) {
		next = f->next;
		if (strncmp(f->string, dir, n) == 0 && f->string[n] == '/')
			forget(j, files, f);
	}
}

void gp_journal_set_reboot(struct gp_journal *j, const char *reason, const char *boot_id)
{
	cJSON *rb = child_object(j->doc, "reboot");
	/* The same request again keeps the time it was first made. */
	if (gp_streq(get_string(rb, "reason"), reason) &&
	    gp_streq(get_string(rb, "boot_id"), boot_id))
		return;
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

unsigned gp_journal_resume_reboots(const struct gp_journal *j)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j->doc, "resume"), "reboots");
	return cJSON_IsNumber(n) ? (unsigned)n->valuedouble : 0; /* checked on load */
}

const char *gp_journal_resume_stopped(const struct gp_journal *j)
{
	return get_string(cJSON_GetObjectItemCaseSensitive(j->doc, "resume"), "stopped");
}

void gp_journal_count_resume(struct gp_journal *j)
{
	cJSON *rs = child_object(j->doc, "resume");
	unsigned n = gp_journal_resume_reboots(j);
	char when[32];
	now_iso8601(when);
	gp_json_set_item(rs, "reboots",
	                 cJSON_CreateNumber(n < GP_RESUME_REBOOTS_LIMIT ? n + 1 : n));
	set_string(rs, "time", when);
}

void gp_journal_stop_resume(struct gp_journal *j, const char *why)
{
	set_string(child_object(j->doc, "resume"), "stopped", why);
}

void gp_journal_clear_resume(struct gp_journal *j)
{
	cJSON_DeleteItemFromObjectCaseSensitive(j->doc, "resume");
}

int gp_lock_acquire(const struct gp_root *r, int *fdp, struct gp_err *err)
{
	_cleanup_free_ char *host = gp_root_host_path(r, GP_LOCK_FILE);
	int rc = gp_root_mkdir_p(r, GP_STATE_DIR, 0755);
	if (rc < 0)
		return gp_fail(err, rc, "cannot create %s: %s", GP_STATE_DIR,
		               strerror(-rc));
	_cleanup_close_ int fd = gp_root_openat(r, GP_LOCK_FILE,
	                                        O_RDWR | O_CREAT | O_NOFOLLOW, 0644);
	if (fd < 0)
		return gp_fail(err, fd, "cannot open the lock %s: %s", host,
		               strerror(-fd));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK)
			return gp_fail(err, errno, "cannot lock %s: %s", host,
			               strerror(errno));
		char pid[32] = "";
		ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		return gp_fail(
		    err, GP_ELOCKED,
		    "another gpuprov run (pid %s) holds the lock %s; wait for it to "
		    "finish, then run this command again",
		    *pid ? pid : "unknown", host);
	}
	char pid[32];
	int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		return gp_fail(err, errno, "cannot write the lock %s: %s", host,
		               strerror(errno));
	*fdp = TAKE_FD(fd);
	return 0;
}

bool gp_lock_held(const struct gp_root *r)
{
	/* O_NONBLOCK: a FIFO in its place must not hang the check. */
	_cleanup_close_ int fd = gp_root_openat(r, GP_LOCK_FILE,
	                                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
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

/* --- drift: what verify compares with (src/stages/drift.c) --------------- */

void gp_journal_record_file_stat(struct gp_journal *j, const char *path, unsigned mode,
                                 unsigned uid, unsigned gid)
{
	cJSON *f = gp_journal_file(j, path);
	if (!f)
		return;
	char buf[32];
	snprintf(buf, sizeof buf, "%04o", mode & 07777);
	set_string(f, "mode", buf);
	snprintf(buf, sizeof buf, "%u:%u", uid, gid);
	set_string(f, "owner", buf);
}

void gp_journal_record_package(struct gp_journal *j, const char *name,
                               const char *version, const char *stage)
{
	cJSON *p = child_object(child_object(j->doc, "packages"), name);
	set_string(p, "version", version);
	set_string(p, "stage", stage);
}

void gp_journal_record_hold(struct gp_journal *j, const char *name, bool held)
{
	cJSON *p = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j->doc, "packages"), name);
	if (p)
		gp_json_set_item(p, "held", cJSON_CreateBool(held));
}

void gp_journal_forget_package(struct gp_journal *j, const char *name)
{
	cJSON_DeleteItemFromObjectCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j->doc, "packages"), name);
}

const cJSON *gp_journal_packages(const struct gp_journal *j)
{
	return cJSON_GetObjectItemCaseSensitive(j->doc, "packages");
}

void gp_journal_set_stage_settings(struct gp_journal *j, const char *stage,
                                   const char *sha256)
{
	set_string(gp_journal_stage(j, stage), "settings_sha256", sha256);
}

const cJSON *gp_journal_package(const struct gp_journal *j, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(gp_journal_packages(j), name);
}

void gp_journal_set_package_before(struct gp_journal *j, const char *name,
                                   const char *version)
{
	cJSON *p = (cJSON *)gp_journal_package(j, name);
	if (p)
		set_string(p, "installed_before", version);
}

void gp_journal_record_hold_set(struct gp_journal *j, const char *name)
{
	cJSON *p = (cJSON *)gp_journal_package(j, name);
	if (p)
		gp_json_set_item(p, "hold_set", cJSON_CreateTrue());
}

/* --- history: one entry per profile installed (gpuprov history) ---------- */

static const struct member history_members[] = {
	{ "id", M_NUMBER },
	{ "started", M_STRING },
	{ "ended", M_STRING },
	{ "result", M_STRING },
	{ "uninstalled", M_STRING },
	{ "profile", M_OBJECT },
	{ "packages", M_OBJECT },
	{ "files", M_OBJECT },
	{ "holds", M_STRINGS },
	{ "preexisting", M_OBJECT },
	{ "stages", M_OBJECT },
	{ "versions", M_OBJECT },
	{ "running", M_BOOL },
	{ "rollback_of", M_NUMBER },
	{ NULL, 0 },
};
static const struct member history_profile_members[] = {
	{ "name", M_STRING },
	{ "sha256", M_SHA256 },
	{ "doc", M_OBJECT },
	{ NULL, 0 },
};

static bool check_history_entry(const cJSON *e, struct invalid *bad)
{
	if (!check_object(e, history_members, bad))
		return false;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "profile");
	if (v && !check_object(v, history_profile_members, bad))
		return false;
	v = cJSON_GetObjectItemCaseSensitive(e, "packages");
	if (v && !check_entries(v, check_package, bad))
		return false;
	v = cJSON_GetObjectItemCaseSensitive(e, "files");
	if (v && !check_entries(v, check_file, bad))
		return false;
	/* name -> version, stage -> state: objects of strings. */
	static const char *const string_maps[] = { "preexisting", "stages" };
	for (size_t i = 0; i < ARRAY_SIZE(string_maps); i++) {
		v = cJSON_GetObjectItemCaseSensitive(e, string_maps[i]);
		if (v && !check_stage(v, bad))
			return false;
	}
	return true;
}

static bool check_history(const cJSON *history, struct invalid *bad)
{
	if (!cJSON_IsArray(history))
		return invalid(bad, history, "must be an array of entries, not %s",
		               type_name(history));
	int n = 0;
	for (const cJSON *e = history->child; e; e = e->next) {
		if (++n > GP_HISTORY_MAX)
			return invalid(bad, e,
			               "is entry %d, more than gpuprov keeps (%d)", n,
			               GP_HISTORY_MAX);
		if (!check_history_entry(e, bad))
			return false;
	}
	return true;
}

const cJSON *gp_journal_history(const struct gp_journal *j)
{
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(j->doc, "history");
	return cJSON_IsArray(h) ? h : NULL;
}

static cJSON *newest_entry(const struct gp_journal *j)
{
	const cJSON *h = gp_journal_history(j);
	cJSON *e = h ? h->child : NULL;
	while (e && e->next)
		e = e->next;
	return e;
}

const cJSON *gp_journal_history_current(const struct gp_journal *j)
{
	const cJSON *e = newest_entry(j);
	return e && !cJSON_GetObjectItemCaseSensitive(e, "uninstalled") ? e : NULL;
}

void gp_journal_history_begin(struct gp_journal *j, const char *name, const char *digest,
                              const cJSON *doc, const cJSON *versions)
{
	cJSON *last = newest_entry(j);
	if (last && !cJSON_GetObjectItemCaseSensitive(last, "uninstalled") &&
	    gp_streq(
	        get_string(cJSON_GetObjectItemCaseSensitive(last, "profile"), "sha256"),
	        digest)) {
		/* The same profile again (after a reboot, a kill, a failure, or
		 * to repair drift): the same entry goes on. */
		gp_json_set_item(last, "running", cJSON_CreateTrue());
		return;
	}
	cJSON *h = cJSON_GetObjectItemCaseSensitive(j->doc, "history");
	if (!cJSON_IsArray(h)) {
		cJSON_DeleteItemFromObjectCaseSensitive(j->doc, "history");
		h = cJSON_AddArrayToObject(j->doc, "history");
	}
	const cJSON *last_id = cJSON_GetObjectItemCaseSensitive(last, "id");
	double id = cJSON_IsNumber(last_id) && last_id->valuedouble >= 1 &&
	                    last_id->valuedouble < 1e9
	                ? (double)(long)last_id->valuedouble + 1
	                : 1;
	char when[32];
	now_iso8601(when);
	cJSON *e = cJSON_CreateObject();
	cJSON_AddNumberToObject(e, "id", id);
	cJSON_AddStringToObject(e, "started", when);
	cJSON_AddTrueToObject(e, "running");
	cJSON *p = cJSON_AddObjectToObject(e, "profile");
	cJSON_AddStringToObject(p, "name", name);
	cJSON_AddStringToObject(p, "sha256", digest);
	cJSON_AddItemToObject(p, "doc", cJSON_Duplicate(doc, true));
	cJSON_AddItemToObject(e, "versions",
	                      versions ? cJSON_Duplicate(versions, true)
	                               : cJSON_CreateObject());
	cJSON_AddItemToArray(h, e);
	while (cJSON_GetArraySize(h) > GP_HISTORY_MAX)
		cJSON_DeleteItemFromArray(h, 0);
}

static cJSON *copy_or_empty(const cJSON *o)
{
	return o ? cJSON_Duplicate(o, true) : cJSON_CreateObject();
}

/* Sets e's key to v (taken); true when that changed e. */
static bool set_changed(cJSON *e, const char *key, cJSON *v)
{
	const cJSON *was = cJSON_GetObjectItemCaseSensitive(e, key);
	bool same = was && gp_json_equal(was, v);
	if (same)
		cJSON_Delete(v);
	else
		gp_json_set_item(e, key, v);
	return !same;
}

void gp_journal_history_end(struct gp_journal *j, const char *result)
{
	cJSON *e = newest_entry(j);
	if (!e)
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(e, "running");
	const cJSON *pkgs = gp_journal_packages(j);
	cJSON *holds = cJSON_CreateArray();
	cJSON *before = cJSON_CreateObject();
	for (const cJSON *p = pkgs ? pkgs->child : NULL; p; p = p->next) {
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "held")))
			cJSON_AddItemToArray(holds, cJSON_CreateString(p->string));
		const char *was = get_string(p, "installed_before");
		if (was)
			cJSON_AddStringToObject(before, p->string, was);
	}
	cJSON *stages = cJSON_CreateObject();
	const cJSON *recs = cJSON_GetObjectItemCaseSensitive(j->doc, "stages");
	for (const cJSON *s = recs ? recs->child : NULL; s; s = s->next) {
		const char *state = get_string(s, "state");
		if (state)
			cJSON_AddStringToObject(stages, s->string, state);
	}
	bool changed = set_changed(e, "result", cJSON_CreateString(result));
	changed |= set_changed(e, "packages", copy_or_empty(pkgs));
	changed |= set_changed(e, "holds", holds);
	changed |= set_changed(e, "preexisting", before);
	changed |= set_changed(
	    e, "files", copy_or_empty(cJSON_GetObjectItemCaseSensitive(j->doc, "files")));
	changed |= set_changed(e, "stages", stages);
	/* A rerun that changed nothing leaves the entry (and the journal) as
	 * it was. */
	if (changed || !cJSON_GetObjectItemCaseSensitive(e, "ended")) {
		char when[32];
		now_iso8601(when);
		set_string(e, "ended", when);
	}
}

void gp_journal_history_uninstalled(struct gp_journal *j)
{
	cJSON *e = newest_entry(j);
	if (!e)
		return;
	char when[32];
	now_iso8601(when);
	set_string(e, "uninstalled", when);
}

void gp_journal_history_rollback_of(struct gp_journal *j, long id)
{
	cJSON *e = newest_entry(j);
	if (e)
		gp_json_set_item(e, "rollback_of", cJSON_CreateNumber((double)id));
}

void gp_journal_forget_stage(struct gp_journal *j, const char *stage)
{
	cJSON_DeleteItemFromObjectCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j->doc, "stages"), stage);
}
