/* Tests for util.c helpers that shape untrusted text for messages. */
#include "testutil.h"

#include "gpuprov/util.h"

static void expect_excerpt(const char *text, const char *from, size_t lines, size_t bytes,
                           const char *want)
{
	char *got = gp_output_excerpt(text, from, lines, bytes);
	assert_string_equal(got, want);
	free(got);
}

static void test_excerpt_from_first_error(void **state)
{
	const char *pip = "Looking in indexes: http://x/whl\n"
	                  "Collecting torch\n"
	                  "ERROR: Could not find a version\n"
	                  "\n"
	                  "ERROR: No matching distribution found for torch\n";
	expect_excerpt(pip, "ERROR:", 6, 600,
	               "ERROR: Could not find a version / ERROR: No matching "
	               "distribution found for torch");
	/* No line starts with from: the last lines of the whole text. */
	expect_excerpt("a\nb\n  c\t d\n", "ERROR:", 2, 600, "b / c  d");
	expect_excerpt(pip, NULL, 1, 600,
	               "ERROR: No matching distribution found for torch");
	expect_excerpt("", "ERROR:", 3, 100, "");
	expect_excerpt(NULL, NULL, 3, 100, "");
}

static void test_excerpt_drops_control_characters(void **state)
{
	expect_excerpt("ERROR: \033[31mred\033[0m\a\rdone\x7f\n", "ERROR:", 3, 100,
	               "ERROR: [31mred[0mdone");
}

static void test_excerpt_bounded_at_utf8_boundary(void **state)
{
	/* "é" is two bytes: a cut inside it backs off before it. */
	expect_excerpt("abcdéfgh", NULL, 1, 8, "abcd...");
	expect_excerpt("abcdéfghij", NULL, 1, 9, "abcdé...");
	expect_excerpt("abcdéfgh", NULL, 1, 9, "abcdéfgh");
	char big[5000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	char *got = gp_output_excerpt(big, NULL, 3, 600);
	assert_int_equal(strlen(got), 600);
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_excerpt_from_first_error),
		cmocka_unit_test(test_excerpt_drops_control_characters),
		cmocka_unit_test(test_excerpt_bounded_at_utf8_boundary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
