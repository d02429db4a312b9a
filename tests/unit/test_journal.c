/* The journal (state.json) and the run lock. */
#include "testutil.h"

#include <sys/file.h>

#include <sys/stat.h>

#include "gpuprov/exitcodes.h"
#include "gpuprov/journal.h"
#include "gpuprov/json.h"

/* sha256 values of the form gpuprov records: 64 lowercase hex digits. */
#define SHA_A "1111111111111111111111111111111111111111111111111111111111111111"
#define SHA_B "2222222222222222222222222222222222222222222222222222222222222222"
#define SHA_P "abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdef0123"

struct fixture {
	char *dir;
	struct gp_root root;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	f->dir = tu_tmpdir();
	assert_int_equal(gp_root_open(&f->root, f->dir), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	gp_root_close(&f->root);
	tu_rmrf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void test_missing_is_empty(void **state)
{
	struct fixture *f = *state;
	struct gp_journal j;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	assert_true(gp_journal_is_empty(&j));
	assert_null(gp_journal_profile_name(&j));
	assert_null(gp_journal_reboot_reason(&j));
	gp_journal_free(&j);
	/* Loading wrote nothing. */
	assert_false(gp_root_exists(&f->root, GP_STATE_DIR));
}

static void test_roundtrip(void **state)
{
	struct fixture *f = *state;
	struct gp_journal j;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	gp_journal_set_profile(&j, "a100-ubuntu2204", "/p/a100.json", SHA_P);
	gp_journal_set_stage(&j, "nouveau", "done");
	gp_journal_record_file(&j, "/etc/x.conf", SHA_A, "nouveau",
	                       "/var/lib/gpuprov/backup/etc/x.conf");
	gp_journal_record_file(&j, "/etc/x.conf", SHA_B, "nouveau",
	                       "/var/lib/gpuprov/backup/etc/x.conf.1");
	gp_journal_set_reboot(&j, "nouveau is loaded", "boot-1");
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	gp_journal_free(&j);

	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	assert_false(gp_journal_is_empty(&j));
	assert_string_equal(gp_journal_profile_name(&j), "a100-ubuntu2204");
	assert_string_equal(gp_journal_profile_path(&j), "/p/a100.json");
	assert_string_equal(gp_journal_file_sha256(&j, "/etc/x.conf"), SHA_B);
	assert_null(gp_journal_file_sha256(&j, "/etc/other"));
	/* The first backup is kept: it holds the operator's original. */
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(j.doc, "files");
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(files, "/etc/x.conf");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(x, "backup")->valuestring,
	                    "/var/lib/gpuprov/backup/etc/x.conf");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(
	    gp_journal_stage(&j, "nouveau"), "state");
	assert_string_equal(st->valuestring, "done");
	assert_string_equal(gp_journal_reboot_reason(&j), "nouveau is loaded");
	assert_string_equal(gp_journal_reboot_boot_id(&j), "boot-1");
	gp_journal_clear_reboot(&j);
	assert_null(gp_journal_reboot_reason(&j));
	gp_journal_free(&j);
}

static void expect_corrupt(struct fixture *f, const char *text)
{
	tu_write(f->dir, "var/lib/gpuprov/state.json", text);
	struct gp_journal j;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), -1);
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	assert_non_null(strstr(err.msg, "state.json is corrupt"));
	assert_non_null(strstr(err.msg, "move it aside"));
	assert_null(j.doc);
}

static void test_corrupt(void **state)
{
	struct fixture *f = *state;
	expect_corrupt(f, "{\"gpuprov_state\": 1, \"profile\": ");
	expect_corrupt(f, "\x7f"
	                  "ELF\x01\x02garbage");
	expect_corrupt(f, "[1, 2, 3]");
	expect_corrupt(f, "{\"something\": \"else\"}");
	expect_corrupt(f, "");
}

/* Wrong types and forms of the members gpuprov reads: refused with the
 * line:col of the bad value, and the file is left as it was. */
static void test_invalid_members(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *text, *where, *why;
	} cases[] = {
		{ "{\"gpuprov_state\": 1, \"files\": []}", ":1:31: \"/files\"",
		  "must be an object, not an array" },
		{ "{\"gpuprov_state\": 1,\n \"files\": {\"/etc/x\": \"abc\"}}",
		  ":2:22: \"/files/~1etc~1x\"", "must be an object, not a string" },
		{ "{\"gpuprov_state\": 1, \"files\": {\"/etc/x\": {\"sha256\": 5}}}",
		  ":1:53: \"/files/~1etc~1x/sha256\"", "must be a string, not a number" },
		{ "{\"gpuprov_state\": 1, \"files\": {\"/etc/x\": {\"sha256\": \"zz\"}}}",
		  "\"/files/~1etc~1x/sha256\"", "64 lowercase hex digits" },
		{ "{\"gpuprov_state\": 1, \"files\": {\"etc/x\": {}}}",
		  "\"/files/etc~1x\"", "not an absolute path" },
		{ "{\"gpuprov_state\": 1, \"files\": {\"/a/../etc/x\": {}}}",
		  "\"/files/~1a~1..~1etc~1x\"", "without '..'" },
		{ "{\"gpuprov_state\": 1, \"files\": {\"/etc/x\": {\"backup\": "
		  "\"/etc/y\"}}}",
		  "\"/files/~1etc~1x/backup\"", "under /var/lib/gpuprov/backup" },
		{ "{\"gpuprov_state\": 1, \"files\": {\"/etc/x\": {\"stage\": null}}}",
		  "\"/files/~1etc~1x/stage\"", "must be a string, not null" },
		{ "{\"gpuprov_state\": 1, \"profile\": \"a100\"}", "\"/profile\"",
		  "must be an object, not a string" },
		{ "{\"gpuprov_state\": 1, \"profile\": {\"name\": [\"a\"]}}",
		  "\"/profile/name\"", "must be a string, not an array" },
		{ "{\"gpuprov_state\": 1, \"profile\": {\"overrides\": [1]}}",
		  "\"/profile/overrides\"", "only strings, not a number" },
		{ "{\"gpuprov_state\": 1, \"stages\": {\"env\": \"done\"}}",
		  "\"/stages/env\"", "must be an object, not a string" },
		{ "{\"gpuprov_state\": 1, \"stages\": {\"env\": {\"state\": true}}}",
		  "\"/stages/env/state\"", "must be a string, not true or false" },
		{ "{\"gpuprov_state\": 1, \"reboot\": {\"boot_id\": {}}}",
		  "\"/reboot/boot_id\"", "must be a string, not an object" },
		{ "{\"gpuprov_state\": 0.5}", "\"/gpuprov_state\"", "format 0.5" },
		{ "{\"gpuprov_state\": 1, \"intents\": {\"/etc/x\": {\"sha256\": 1}}}",
		  "\"/intents/~1etc~1x/sha256\"", "must be a string, not a number" },
		{ "{\"gpuprov_state\": 1, \"files\": {\"/etc/x\": {\"mode\": 420}}}",
		  "\"/files/~1etc~1x/mode\"", "must be a string, not a number" },
		{ "{\"gpuprov_state\": 1, \"files\": {\"/etc/x\": {\"link\": 1}}}",
		  "\"/files/~1etc~1x/link\"", "must be a string, not a number" },
		{ "{\"gpuprov_state\": 1, \"files\": {\"/etc/x\": {\"dir\": \"yes\"}}}",
		  "\"/files/~1etc~1x/dir\"", "must be true or false, not a string" },
		{ "{\"gpuprov_state\": 1, \"packages\": []}", "\"/packages\"",
		  "must be an object, not an array" },
		{ "{\"gpuprov_state\": 1, \"packages\": {\"p\": {\"version\": 1}}}",
		  "\"/packages/p/version\"", "must be a string, not a number" },
		{ "{\"gpuprov_state\": 1, \"packages\": {\"p\": {\"held\": \"yes\"}}}",
		  "\"/packages/p/held\"", "must be true or false, not a string" },
		{ "{\"gpuprov_state\": 1, \"packages\": {\"p\": "
		  "{\"installed_before\": 1}}}",
		  "\"/packages/p/installed_before\"", "must be a string, not a number" },
		{ "{\"gpuprov_state\": 1, \"history\": {}}", "\"/history\"",
		  "must be an array of entries, not an object" },
		{ "{\"gpuprov_state\": 1, \"history\": [1]}", "\"/history/0\"",
		  "must be an object, not a number" },
		{ "{\"gpuprov_state\": 1, \"history\": [{\"id\": \"1\"}]}",
		  "\"/history/0/id\"", "must be a number, not a string" },
		{ "{\"gpuprov_state\": 1, \"history\": [{\"profile\": {\"sha256\": "
		  "\"x\"}}]}",
		  "\"/history/0/profile/sha256\"", "64 lowercase hex digits" },
		{ "{\"gpuprov_state\": 1, \"history\": [{\"profile\": {\"doc\": []}}]}",
		  "\"/history/0/profile/doc\"", "must be an object, not an array" },
		{ "{\"gpuprov_state\": 1, \"history\": [{}, {\"files\": {\"x\": {}}}]}",
		  "\"/history/1/files/x\"", "not an absolute path" },
		{ "{\"gpuprov_state\": 1, \"history\": [{\"packages\": {\"p\": "
		  "{\"hold_set\": 1}}}]}",
		  "\"/history/0/packages/p/hold_set\"", "must be true or false" },
		{ "{\"gpuprov_state\": 1, \"history\": [{\"holds\": [true]}]}",
		  "\"/history/0/holds\"", "only strings, not true or false" },
		{ "{\"gpuprov_state\": 1, \"history\": [{\"preexisting\": {\"p\": 1}}]}",
		  "\"/history/0/preexisting/p\"", "must be a string, not a number" },
		{ "{\"gpuprov_state\": 1, \"history\": [{\"running\": \"yes\"}]}",
		  "\"/history/0/running\"", "must be true or false, not a string" },
		{ "{\"gpuprov_state\": 1, \"history\": [{},{},{},{},{},{},{},{},{},{},{},"
		  "{},{},{},{},{},{}]}",
		  "\"/history/16\"", "is entry 17, more than gpuprov keeps (16)" },
		{ "{\"gpuprov_state\": 1, \"resume\": {\"reboots\": -1}}",
		  "\"/resume/reboots\"", "a whole number from 0 to 1000" },
		{ "{\"gpuprov_state\": 1, \"resume\": {\"reboots\": 1.5}}",
		  "\"/resume/reboots\"", "a whole number from 0 to 1000" },
		{ "{\"gpuprov_state\": 1, \"resume\": {\"stopped\": 3}}",
		  "\"/resume/stopped\"", "must be a string, not a number" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		tu_write(f->dir, "var/lib/gpuprov/state.json", cases[i].text);
		struct gp_journal j;
		struct gp_err err = { 0 };
		assert_int_equal(gp_journal_load(&f->root, &j, &err), -1);
		assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
		if (!strstr(err.msg, cases[i].where) || !strstr(err.msg, cases[i].why) ||
		    !strstr(err.msg, "state.json is corrupt") ||
		    !strstr(err.msg, "move it aside"))
			fail_msg("case %zu: %s", i, err.msg);
		assert_null(j.doc);
	}
}

/* The reboots --reboot=auto made for one install: counted, stopped,
 * saved, loaded back and cleared. */
static void test_resume_record(void **state)
{
	struct fixture *f = *state;
	struct gp_journal j;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	assert_int_equal(gp_journal_resume_reboots(&j), 0);
	gp_journal_count_resume(&j);
	gp_journal_count_resume(&j);
	gp_journal_stop_resume(&j, "the cap");
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	gp_journal_free(&j);
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	assert_int_equal(gp_journal_resume_reboots(&j), 2);
	assert_string_equal(gp_journal_resume_stopped(&j), "the cap");
	gp_journal_clear_resume(&j);
	assert_int_equal(gp_journal_resume_reboots(&j), 0);
	assert_null(gp_journal_resume_stopped(&j));
	gp_journal_free(&j);
}

/* What drift is measured against: a file's mode and owner, the packages an
 * install left and their holds, a stage's settings; saved and loaded back.
 * A package that was never recorded gets no hold record. */
static void test_drift_records(void **state)
{
	struct fixture *f = *state;
	struct gp_journal j;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	gp_journal_record_file(&j, "/etc/x", SHA_A, "env", NULL);
	gp_journal_record_file_stat(&j, "/etc/x", 0100644, 0, 0);
	gp_journal_record_file_stat(&j, "/etc/unrecorded", 0100600, 1, 2);
	gp_journal_record_package(&j, "nvidia-driver-535", "535.183.01-1", "driver");
	gp_journal_record_hold(&j, "nvidia-driver-535", true);
	gp_journal_record_hold(&j, "never-installed", true);
	gp_journal_record_package(&j, "gone", "1", "driver");
	gp_journal_forget_package(&j, "gone");
	gp_journal_set_stage_settings(&j, "env", SHA_B);
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	gp_journal_free(&j);
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	const cJSON *rec = gp_journal_file(&j, "/etc/x");
	assert_string_equal(gp_json_string(rec, "mode", NULL), "0644");
	assert_string_equal(gp_json_string(rec, "owner", NULL), "0:0");
	assert_null(gp_journal_file(&j, "/etc/unrecorded"));
	const cJSON *pkgs = gp_journal_packages(&j);
	assert_int_equal(cJSON_GetArraySize(pkgs), 1);
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(pkgs, "nvidia-driver-535");
	assert_string_equal(gp_json_string(p, "version", NULL), "535.183.01-1");
	assert_string_equal(gp_json_string(p, "stage", NULL), "driver");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "held")));
	assert_string_equal(
	    gp_json_string(gp_journal_stage_get(&j, "env"), "settings_sha256", NULL),
	    SHA_B);
	gp_journal_free(&j);
}

/* Uninstall's records: a link gpuprov made keeps the first link it
 * replaced, one it removed again keeps that too and has no target; a
 * directory it made; all of it loads back. */
static void test_link_and_dir_records(void **state)
{
	struct fixture *f = *state;
	struct gp_journal j;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	gp_journal_record_link(&j, "/etc/l", "/a", "/theirs", "env");
	gp_journal_record_link(&j, "/etc/l", "/b", "/a", "env");
	gp_journal_record_link(&j, "/etc/gone", "/x", NULL, "env");
	gp_journal_record_link(&j, "/etc/gone", NULL, NULL, "env");
	gp_journal_record_dir(&j, "/etc/d", "env");
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	gp_journal_free(&j);
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	const cJSON *l = gp_journal_file(&j, "/etc/l");
	assert_string_equal(gp_json_string(l, "link", NULL), "/b");
	assert_string_equal(gp_json_string(l, "link_before", NULL), "/theirs");
	const cJSON *gone = gp_journal_file(&j, "/etc/gone");
	assert_non_null(gone);
	assert_null(gp_json_string(gone, "link", NULL));
	assert_null(gp_journal_file_sha256(&j, "/etc/gone"));
	assert_true(cJSON_IsTrue(
	    cJSON_GetObjectItemCaseSensitive(gp_journal_file(&j, "/etc/d"), "dir")));
	gp_journal_free(&j);
}

/* History: an install's entry takes the resolved profile, the versions
 * and, when it ends, the packages (what was there before gpuprov too),
 * holds, files and stage states; the same profile again continues the
 * entry (a rerun that changed nothing changes nothing), another starts a
 * new one; at most GP_HISTORY_MAX are kept, oldest dropped; all of it
 * loads back. */
static void test_history(void **state)
{
	struct fixture *f = *state;
	struct gp_journal j;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	assert_null(gp_journal_history(&j));
	assert_null(gp_journal_history_current(&j));
	cJSON *doc = cJSON_Parse("{\"name\": \"a\", \"stages\": {\"cudnn\": "
	                         "{\"version\": \"9.1.0\"}}}");
	cJSON *versions = cJSON_Parse("{\"cudnn\": \"9.1.0\"}");
	gp_journal_history_begin(&j, "a", SHA_A, doc, versions);
	gp_journal_record_package(&j, "libfoo", "2", "driver");
	gp_journal_set_package_before(&j, "libfoo", "1");
	gp_journal_record_hold(&j, "libfoo", true);
	gp_journal_record_hold_set(&j, "libfoo");
	gp_journal_record_package(&j, "nvidia-driver-535", "535.1-1", "driver");
	gp_journal_record_file(&j, "/etc/x", SHA_B, "env", GP_BACKUP_DIR "/etc/x");
	gp_journal_set_stage(&j, "env", "done");
	gp_journal_history_end(&j, "completed");
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	gp_journal_free(&j);

	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	const cJSON *e = gp_journal_history_current(&j);
	assert_non_null(e);
	assert_int_equal(cJSON_GetArraySize(gp_journal_history(&j)), 1);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble, 1);
	assert_string_equal(gp_json_string(e, "result", NULL), "completed");
	assert_null(cJSON_GetObjectItemCaseSensitive(e, "running"));
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "profile");
	assert_string_equal(gp_json_string(p, "sha256", NULL), SHA_A);
	assert_true(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(p, "doc"), doc, true));
	assert_string_equal(
	    gp_json_string(cJSON_GetObjectItemCaseSensitive(e, "versions"), "cudnn",
	                   NULL),
	    "9.1.0");
	assert_string_equal(
	    gp_json_string(cJSON_GetObjectItemCaseSensitive(e, "preexisting"), "libfoo",
	                   NULL),
	    "1");
	const cJSON *holds = cJSON_GetObjectItemCaseSensitive(e, "holds");
	assert_int_equal(cJSON_GetArraySize(holds), 1);
	assert_string_equal(holds->child->valuestring, "libfoo");
	assert_string_equal(
	    gp_json_string(cJSON_GetObjectItemCaseSensitive(
	                       cJSON_GetObjectItemCaseSensitive(e, "files"), "/etc/x"),
	                   "backup", NULL),
	    GP_BACKUP_DIR "/etc/x");
	assert_string_equal(
	    gp_json_string(cJSON_GetObjectItemCaseSensitive(e, "stages"), "env", NULL),
	    "done");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
	    (cJSON *)gp_journal_package(&j, "libfoo"), "hold_set")));

	/* The same profile, nothing changed: the file stays as it was. */
	_cleanup_free_ char *before = gp_xstrdup(j.saved);
	gp_journal_history_begin(&j, "a", SHA_A, doc, versions);
	assert_true(cJSON_IsTrue(
	    cJSON_GetObjectItemCaseSensitive(gp_journal_history_current(&j), "running")));
	gp_journal_history_end(&j, "completed");
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	assert_string_equal(j.saved, before);

	/* Other profiles: new entries, the oldest dropped beyond the bound. */
	for (int i = 0; i < GP_HISTORY_MAX + 2; i++) {
		char sha[65];
		snprintf(sha, sizeof sha, "%064d", i);
		gp_journal_history_begin(&j, "b", sha, doc, NULL);
		gp_journal_history_end(&j, i % 2 ? "failed" : "reboot_pending");
	}
	const cJSON *h = gp_journal_history(&j);
	assert_int_equal(cJSON_GetArraySize(h), GP_HISTORY_MAX);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(h->child, "id")->valuedouble,
	                 (1 + GP_HISTORY_MAX + 2) - GP_HISTORY_MAX + 1);
	gp_journal_history_uninstalled(&j);
	assert_null(gp_journal_history_current(&j));
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	gp_journal_free(&j);
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	assert_int_equal(cJSON_GetArraySize(gp_journal_history(&j)), GP_HISTORY_MAX);
	assert_null(gp_journal_history_current(&j));
	gp_journal_free(&j);
	cJSON_Delete(doc);
	cJSON_Delete(versions);
}

/* gp_journal_parse on a file's bytes answers as gp_journal_load on the file
 * (the fuzzer's way in), and keeps its own copy of them. */
static void test_parse_from_memory(void **state)
{
	struct fixture *f = *state;
	static const char *const texts[] = {
		"{\"gpuprov_state\": 1, \"stages\": {\"env\": {\"state\": \"done\"}}}\n",
		"{\"gpuprov_state\": 1,\n \"files\": {\"/etc/x\": \"abc\"}}",
		"{\"gpuprov_state\": 99}",
		"[1, 2",
	};
	_cleanup_free_ char *host = gp_root_host_path(&f->root, GP_STATE_FILE);
	for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
		tu_write(f->dir, "var/lib/gpuprov/state.json", texts[i]);
		struct gp_journal loaded, parsed;
		struct gp_err load_err = { 0 }, parse_err = { 0 };
		int load_rc = gp_journal_load(&f->root, &loaded, &load_err);
		_cleanup_free_ char *copy = gp_xstrdup(texts[i]);
		size_t len = strlen(copy);
		int parse_rc = gp_journal_parse(&parsed, host, copy, len, &parse_err);
		memset(copy, 'x', len);
		assert_int_equal(parse_rc, load_rc);
		if (load_rc == 0) {
			assert_int_equal(parsed.saved_len, loaded.saved_len);
			assert_memory_equal(parsed.saved, texts[i], len);
			_cleanup_free_ char *a = cJSON_PrintUnformatted(parsed.doc);
			_cleanup_free_ char *b = cJSON_PrintUnformatted(loaded.doc);
			assert_string_equal(a, b);
		} else {
			assert_string_equal(parse_err.msg, load_err.msg);
		}
		gp_journal_free(&loaded);
		gp_journal_free(&parsed);
	}
}

static void test_newer_format(void **state)
{
	struct fixture *f = *state;
	tu_write(f->dir, "var/lib/gpuprov/state.json",
	         "{\"gpuprov_state\": 99, \"files\": \"a new shape\"}");
	struct gp_journal j;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), -1);
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	assert_non_null(strstr(err.msg, "format 99, newer than this gpuprov reads (1)"));
	assert_non_null(strstr(err.msg, "move it aside"));
	assert_null(j.doc);
}

/* Members gpuprov does not know (a later format-1 addition) are kept. */
static void test_unknown_members_kept(void **state)
{
	struct fixture *f = *state;
	tu_write(f->dir, "var/lib/gpuprov/state.json",
	         "{\"gpuprov_state\": 1, \"extra\": [1], \"files\": {\"/etc/x\": "
	         "{\"sha256\": \"" SHA_A "\", \"note\": 3}}}");
	struct gp_journal j;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	assert_string_equal(gp_journal_file_sha256(&j, "/etc/x"), SHA_A);
	assert_non_null(cJSON_GetObjectItemCaseSensitive(j.doc, "extra"));
	gp_journal_free(&j);
}

static char *saved_text(struct fixture *f)
{
	_cleanup_free_ char *path = gp_xasprintf("%s/var/lib/gpuprov/state.json", f->dir);
	FILE *fp = fopen(path, "re");
	assert_non_null(fp);
	char *text = gp_xcalloc(1, 1 << 16);
	size_t n = fread(text, 1, (1 << 16) - 1, fp);
	text[n] = '\0';
	fclose(fp);
	return text;
}

/* The index: lookups, replacing a record, forgetting one and a directory,
 * and the records saved in the order they were first made. */
static void test_file_index(void **state)
{
	struct fixture *f = *state;
	struct gp_journal j;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	char path[64];
	for (int i = 0; i < 2000; i++) {
		snprintf(path, sizeof path, "/opt/d%d/f%04d", i % 3, i);
		gp_journal_record_file(&j, path, i % 2 ? SHA_A : SHA_B, "cudnn", NULL);
	}
	assert_string_equal(gp_journal_file_sha256(&j, "/opt/d1/f0001"), SHA_A);
	assert_string_equal(gp_journal_file_sha256(&j, "/opt/d0/f1998"), SHA_B);
	assert_null(gp_journal_file(&j, "/opt/d1/f0000"));
	/* Replaced in place: still one record, at its first place. */
	gp_journal_record_file(&j, "/opt/d0/f0000", SHA_A, "env", NULL);
	assert_string_equal(gp_journal_file_sha256(&j, "/opt/d0/f0000"), SHA_A);
	/* A removal record has no sha256. */
	gp_journal_record_file(&j, "/opt/d2/f0002", NULL, "env", NULL);
	assert_non_null(gp_journal_file(&j, "/opt/d2/f0002"));
	assert_null(gp_journal_file_sha256(&j, "/opt/d2/f0002"));
	gp_journal_forget_file(&j, "/opt/d1/f0004");
	gp_journal_forget_file(&j, "/opt/none"); /* nothing to forget */
	assert_null(gp_journal_file(&j, "/opt/d1/f0004"));
	gp_journal_forget_under(&j, "/opt/d1");
	for (int i = 0; i < 2000; i++) {
		snprintf(path, sizeof path, "/opt/d%d/f%04d", i % 3, i);
		if (i % 3 == 1)
			assert_null(gp_journal_file(&j, path));
		else
			assert_non_null(gp_journal_file(&j, path));
	}
	/* "/opt/d1x" is not under "/opt/d1". */
	gp_journal_record_file(&j, "/opt/d1x", SHA_A, "env", NULL);
	gp_journal_forget_under(&j, "/opt/d1");
	assert_non_null(gp_journal_file(&j, "/opt/d1x"));
	/* A record made again after it was forgotten goes to the end. */
	gp_journal_record_file(&j, "/opt/d1/f0001", SHA_B, "env", NULL);
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	gp_journal_free(&j);

	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(j.doc, "files");
	int n = 0, last = -1;
	const char *tail = NULL;
	for (const cJSON *rec = files->child; rec; rec = rec->next, n++) {
		int i;
		if (sscanf(rec->string, "/opt/d%*d/f%d", &i) == 1 && !rec->next)
			tail = rec->string;
		else if (sscanf(rec->string, "/opt/d%*d/f%d", &i) == 1) {
			assert_true(i > last); /* first-made order */
			last = i;
		}
	}
	assert_int_equal(n, 2000 - 667 + 2);
	assert_non_null(tail);
	assert_string_equal(tail, "/opt/d1/f0001");
	assert_string_equal(gp_journal_file_sha256(&j, "/opt/d0/f0000"), SHA_A);
	assert_string_equal(gp_journal_file_sha256(&j, "/opt/d1/f0001"), SHA_B);
	gp_journal_free(&j);
}

/* Setting what the journal holds changes nothing, so a run that changes
 * nothing leaves the file as it was: same bytes, same mtime. */
static void test_noop_save_leaves_file(void **state)
{
	struct fixture *f = *state;
	struct gp_journal j;
	struct gp_err err = { 0 };
	char *const overrides[] = { "rule-a", NULL };
	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	gp_journal_set_profile(&j, "a100", "/p/a100.json", SHA_P);
	gp_journal_set_overrides(&j, overrides);
	gp_journal_set_stage(&j, "nouveau", "done");
	gp_journal_set_stage(&j, "env", "satisfied");
	gp_journal_record_file(&j, "/etc/x", SHA_A, "env", NULL);
	gp_json_set_string(gp_journal_file(&j, "/etc/x"), "stat", "1:2:3");
	gp_journal_set_reboot(&j, "nouveau is loaded", "boot-1");
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	gp_journal_free(&j);
	_cleanup_free_ char *before = saved_text(f);
	/* An mtime in the past, so a rewrite would show. */
	_cleanup_free_ char *path = gp_xasprintf("%s/var/lib/gpuprov/state.json", f->dir);
	struct timespec old[2] = { { .tv_sec = 1000000000 }, { .tv_sec = 1000000000 } };
	assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);

	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	gp_journal_set_profile(&j, "a100", "/p/a100.json", SHA_P);
	gp_journal_set_overrides(&j, overrides);
	gp_journal_set_stage(&j, "nouveau", "satisfied"); /* done, still */
	gp_journal_set_stage(&j, "env", "satisfied");
	gp_journal_record_file(&j, "/etc/x", SHA_A, "env", NULL);
	gp_json_set_string(gp_journal_file(&j, "/etc/x"), "stat", "1:2:3");
	gp_journal_set_reboot(&j, "nouveau is loaded", "boot-1");
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	_cleanup_free_ char *after = saved_text(f);
	assert_string_equal(before, after);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, 1000000000);

	/* A real change is written, and its time recorded. */
	gp_journal_set_stage(&j, "env", "failed");
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_mtim.tv_sec > 1000000000);
	const cJSON *env = gp_journal_stage_get(&j, "env");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(env, "state")->valuestring,
	                    "failed");
	gp_journal_free(&j);
}

static void test_lock_contention(void **state)
{
	struct fixture *f = *state;
	int first = -1, second = -1;
	struct gp_err err = { 0 };
	assert_int_equal(gp_lock_acquire(&f->root, &first, &err), 0);
	assert_true(first >= 0);
	/* flock locks belong to the open file description, so a second
	 * acquisition in this process conflicts like another process would. */
	assert_int_equal(gp_lock_acquire(&f->root, &second, &err), -1);
	assert_int_equal(gp_exit_code(&err), GP_EXIT_LOCKED);
	char pid[32];
	snprintf(pid, sizeof pid, "pid %d", (int)getpid());
	assert_non_null(strstr(err.msg, pid));
	assert_non_null(strstr(err.msg, "another gpuprov run"));
	gp_lock_release(first);
	assert_int_equal(gp_lock_acquire(&f->root, &second, &err), 0);
	gp_lock_release(second);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_missing_is_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_members, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drift_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_and_dir_records, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_history, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resume_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_format, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parse_from_memory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_members_kept, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_file_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_noop_save_leaves_file, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_lock_contention, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
