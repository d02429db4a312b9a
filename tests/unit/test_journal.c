/* The journal (state.json) and the run lock. */
#include "testutil.h"

#include <sys/file.h>

#include "gpuprov/exitcodes.h"
#include "gpuprov/journal.h"

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
	gp_journal_set_profile(&j, "a100-ubuntu2204", "/p/a100.json", "abc");
	gp_journal_set_stage(&j, "nouveau", "done");
	gp_journal_record_file(&j, "/etc/x.conf", "1111", "nouveau",
	                       "/var/lib/gpuprov/backup/etc/x.conf");
	gp_journal_record_file(&j, "/etc/x.conf", "2222", "nouveau",
	                       "/var/lib/gpuprov/backup/etc/x.conf.1");
	gp_journal_set_reboot(&j, "nouveau is loaded", "boot-1");
	assert_int_equal(gp_journal_save(&f->root, &j), 0);
	gp_journal_free(&j);

	assert_int_equal(gp_journal_load(&f->root, &j, &err), 0);
	assert_false(gp_journal_is_empty(&j));
	assert_string_equal(gp_journal_profile_name(&j), "a100-ubuntu2204");
	assert_string_equal(gp_journal_profile_path(&j), "/p/a100.json");
	assert_string_equal(gp_journal_file_sha256(&j, "/etc/x.conf"), "2222");
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
	assert_int_equal(err.exit_code, GP_EXIT_INVALID_INPUT);
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
	assert_int_equal(err.exit_code, GP_EXIT_LOCKED);
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
		cmocka_unit_test_setup_teardown(test_lock_contention, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
