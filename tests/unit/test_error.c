/* Tests for the error model (error.h) and its one mapping to exit codes
 * (exitcodes.h): every domain code has a name, the ranges stay clear of
 * errno and of each other, and a long message is kept, not cut at 2 KiB. */
#include "testutil.h"

#include "gpuprov/error.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/util.h"

static const struct {
	int base, end;
} ranges[] = {
	{ GP_E_GENERAL_BASE, GP_E_GENERAL_END },
	{ GP_E_FETCH_BASE, GP_E_FETCH_END },
};

static void test_ranges_clear_of_errno_and_each_other(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(ranges); i++) {
		assert_true(ranges[i].base > GP_ERRNO_MAX);
		assert_true(ranges[i].end > ranges[i].base);
		assert_true(ranges[i].end <= ranges[i].base + GP_E_RANGE_SIZE);
		for (size_t j = 0; j < i; j++)
			assert_true(ranges[i].base >= ranges[j].base + GP_E_RANGE_SIZE ||
			            ranges[j].base >= ranges[i].base + GP_E_RANGE_SIZE);
	}
}

static void test_every_domain_code_has_its_own_name(void **state)
{
	const char *seen[2 * GP_E_RANGE_SIZE];
	size_t n = 0;
	for (size_t i = 0; i < ARRAY_SIZE(ranges); i++)
		for (int code = ranges[i].base; code < ranges[i].end; code++) {
			const char *name = gp_strerror(code);
			assert_non_null(name);
			if (strcmp(name, "unknown error") == 0)
				fail_msg("code %d has no name", code);
			assert_string_equal(gp_strerror(-code), name);
			for (size_t k = 0; k < n; k++)
				if (strcmp(seen[k], name) == 0)
					fail_msg("code %d shares its name \"%s\"", code,
					         name);
			seen[n++] = name;
		}
	/* The ends of the ranges are not codes. */
	assert_string_equal(gp_strerror(GP_E_GENERAL_END), "unknown error");
	assert_string_equal(gp_strerror(GP_E_FETCH_END), "unknown error");
}

static void test_strerror_names_errno(void **state)
{
	assert_string_equal(gp_strerror(ENOENT), "No such file or directory");
	assert_string_equal(gp_strerror(-EACCES), "Permission denied");
	assert_string_equal(gp_strerror(GP_ERRNO_MAX), "unknown error");
	assert_string_equal(gp_strerror(GP_EINPUT), "invalid input");
}

static int exit_of(int code)
{
	struct gp_err err = { 0 };
	gp_fail(&err, code, "x");
	return gp_exit_code(&err);
}

static void test_exit_code_mapping(void **state)
{
	assert_int_equal(exit_of(GP_EINPUT), GP_EXIT_INVALID_INPUT);
	assert_int_equal(exit_of(-GP_FETCH_EINVAL), GP_EXIT_INVALID_INPUT);
	assert_int_equal(exit_of(-GP_FETCH_EREFUSED), GP_EXIT_INVALID_INPUT);
	assert_int_equal(exit_of(GP_EBLOCKED), GP_EXIT_BLOCKED);
	assert_int_equal(exit_of(-GP_FETCH_EOFFLINE), GP_EXIT_BLOCKED);
	assert_int_equal(exit_of(GP_EOPTION), GP_EXIT_USAGE);
	assert_int_equal(exit_of(GP_ELOCKED), GP_EXIT_LOCKED);
	assert_int_equal(exit_of(GP_EFAILED), GP_EXIT_APPLY_FAILED);
	assert_int_equal(exit_of(-GP_FETCH_ECHECKSUM), GP_EXIT_APPLY_FAILED);
	assert_int_equal(exit_of(-ENOENT), GP_EXIT_APPLY_FAILED);
	assert_int_equal(exit_of(0), GP_EXIT_APPLY_FAILED);
}

/* apt's errors run long: a message well past the old 2048 bytes is kept. */
static void test_long_message_kept_whole(void **state)
{
	struct gp_err err = { 0 };
	size_t len = 20000;
	char *text = malloc(len + 1);
	for (size_t i = 0; i < len; i++)
		text[i] = (char)('a' + i % 26);
	text[len] = '\0';
	gp_fail(&err, GP_EFAILED, "apt-get failed: %s", text);
	assert_int_equal(strlen(err.msg), strlen("apt-get failed: ") + len);
	assert_string_equal(err.msg + strlen("apt-get failed: "), text);
	free(text);
}

/* Past the bound, the message is cut at a character and says so. */
static void test_too_long_message_marked(void **state)
{
	struct gp_err err = { 0 };
	size_t len = 2 * GP_ERR_MSG_MAX;
	char *text = malloc(len + 1);
	for (size_t i = 0; i + 1 < len; i += 2)
		memcpy(text + i, "\xc3\xa9", 2); /* "é" */
	text[len] = '\0';
	/* The bound falls inside an "é": the cut backs off before it. */
	assert_int_equal((GP_ERR_MSG_MAX - sizeof GP_ERR_TRUNCATED) % 2, 1);
	gp_fail(&err, GP_EFAILED, "%s", text);
	size_t got = strlen(err.msg);
	assert_true(got < GP_ERR_MSG_MAX);
	assert_true(got > GP_ERR_MSG_MAX - sizeof GP_ERR_TRUNCATED - 2);
	size_t body = got - strlen(GP_ERR_TRUNCATED);
	assert_string_equal(err.msg + body, GP_ERR_TRUNCATED);
	assert_int_equal(body % 2, 0); /* whole "é"s only */
	assert_memory_equal(err.msg + body - 2, "\xc3\xa9", 2);
	free(text);
}

/* gp_fail replaces the message (the latest failure is reported, restated
 * with more context), except in collect mode, where msg keeps the first. */
static void test_latest_failure_replaces_unless_collecting(void **state)
{
	struct gp_err err = { 0 };
	gp_fail(&err, GP_EINPUT, "first");
	assert_int_equal(gp_fail(&err, -ENOENT, "second, after: %s", err.msg), -1);
	assert_string_equal(err.msg, "second, after: first");
	assert_int_equal(err.code, ENOENT);

	struct gp_err all = { .all = calloc(1, sizeof(char *)) };
	gp_fail(&all, GP_EINPUT, "one");
	gp_fail(&all, GP_EBLOCKED, "two");
	assert_string_equal(all.msg, "one");
	assert_int_equal(all.code, GP_EINPUT);
	assert_int_equal(gp_strv_len(all.all), 2);
	assert_string_equal(all.all[1], "two");
	gp_strv_free(all.all);

	assert_int_equal(gp_fail(NULL, GP_EFAILED, "nowhere"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges_clear_of_errno_and_each_other),
		cmocka_unit_test(test_every_domain_code_has_its_own_name),
		cmocka_unit_test(test_strerror_names_errno),
		cmocka_unit_test(test_exit_code_mapping),
		cmocka_unit_test(test_long_message_kept_whole),
		cmocka_unit_test(test_too_long_message_marked),
		cmocka_unit_test(test_latest_failure_replaces_unless_collecting),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
