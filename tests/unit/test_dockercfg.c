/* Docker's daemon.json merged with the NVIDIA runtime (src/pure/dockercfg.c),
 * against golden files: each tests/unit/dockercfg/NAME.json is merged and
 * the result compared with NAME.expected (or NAME-default.expected, merged
 * with default-runtime asked): "changed" or "unchanged" and the merged text,
 * or "refused: MESSAGE". Every merged text merges again to itself,
 * unchanged. After a deliberate change, GP_UPDATE_EXPECTED=1 rewrites the
 * expected files; review the diff before keeping it. */
#include "testutil.h"

#include "gpuprov/dockercfg.h"
#include "gpuprov/util.h"

#define DIR GP_SRCDIR "/tests/unit/dockercfg/"

/* What the expected file holds for one merge of text (NULL: no file). */
static char *outcome(const char *text, size_t len, bool set_default)
{
	const struct gp_docker_runtime rt = { "nvidia", "nvidia-container-runtime",
		                              set_default };
	struct gp_err err = { 0 };
	char *merged = NULL;
	bool changed = true;
	if (gp_docker_daemon_merge("daemon.json", text, len, &rt, &merged, &changed,
	                           &err) < 0) {
		assert_null(merged);
		return gp_xasprintf("refused: %s\n", err.msg);
	}
	/* The result is a fixed point: merged again, it is the same text. */
	char *again = NULL;
	bool changed_again = true;
	assert_int_equal(gp_docker_daemon_merge("daemon.json", merged, strlen(merged),
	                                        &rt, &again, &changed_again, &err),
	                 0);
	assert_false(changed_again);
	assert_string_equal(again, merged);
	/* And inspect sees what the merge set. */
	bool has = false, is_default = false;
	assert_int_equal(gp_docker_daemon_inspect("daemon.json", merged, strlen(merged),
	                                          &rt, &has, &is_default, &err),
	                 0);
	assert_true(has);
	if (set_default)
		assert_true(is_default);
	free(again);
	char *out = gp_xasprintf("%s\n%s", changed ? "changed" : "unchanged", merged);
	free(merged);
	return out;
}

static void golden(const char *name, const char *expected_name, bool set_default,
                   bool no_file)
{
	char *in_path = gp_xasprintf(DIR "%s.json", name);
	char *want_path = gp_xasprintf(DIR "%s.expected", expected_name);
	size_t len = 0;
	char *text = no_file ? NULL : tu_read_file(in_path, &len);
	char *got = outcome(text, len, set_default);
	if (getenv("GP_UPDATE_EXPECTED")) {
		FILE *f = fopen(want_path, "we");
		assert_non_null(f);
		fputs(got, f);
		fclose(f);
	}
	size_t want_len;
	char *want = tu_read_file(want_path, &want_len);
	if (strcmp(got, want) != 0)
		fail_msg("%s merged as\n%s\nbut %s says\n%s", in_path, got, want_path,
		         want);
	free(want);
	free(got);
	free(text);
	free(in_path);
	free(want_path);
}

static void test_missing_file(void **state)
{
	golden("empty", "missing", false, true);
}

static void test_empty_file(void **state)
{
	golden("empty", "empty", false, false);
	golden("blank", "blank", false, false);
}

static void test_unrelated_keys_kept(void **state)
{
	golden("unrelated-keys", "unrelated-keys", false, false);
}

static void test_other_runtimes_kept(void **state)
{
	golden("other-runtimes", "other-runtimes", false, false);
	golden("other-runtimes", "other-runtimes-default", true, false);
}

static void test_nvidia_runtime_replaced(void **state)
{
	golden("nvidia-other-args", "nvidia-other-args", false, false);
}

static void test_already_configured(void **state)
{
	golden("already", "already", false, false);
}

static void test_refused(void **state)
{
	static const char *const names[] = {
		"invalid",           "not-object", "runtimes-not-object",
		"nvidia-not-object", "big-number", "duplicate-key"
	};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		golden(names[i], names[i], false, false);
}

/* A NUL byte or deep nesting is refused, never a crash. */
static void test_hostile(void **state)
{
	const struct gp_docker_runtime rt = { "nvidia", "nvidia-container-runtime",
		                              false };
	struct gp_err err = { 0 };
	char *merged = NULL;
	bool changed;
	assert_int_equal(
	    gp_docker_daemon_merge("d", "{\"a\":\0}", 7, &rt, &merged, &changed, &err),
	    -1);
	assert_non_null(strstr(err.msg, "NUL byte"));
	struct gp_buf deep = { 0 };
	for (int i = 0; i < 5000; i++)
		gp_buf_puts(&deep, "[");
	assert_int_equal(gp_docker_daemon_merge("d", deep.data, deep.len, &rt, &merged,
	                                        &changed, &err),
	                 -1);
	assert_null(merged);
	gp_buf_free(&deep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_empty_file),
		cmocka_unit_test(test_unrelated_keys_kept),
		cmocka_unit_test(test_other_runtimes_kept),
		cmocka_unit_test(test_nvidia_runtime_replaced),
		cmocka_unit_test(test_already_configured),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_hostile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
