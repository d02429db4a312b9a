/* Tests for util.c helpers that shape untrusted text for messages, the
 * string vectors that parsers of such text build, and writeback kicks. */
#include "testutil.h"

#include <fcntl.h>
#include <unistd.h>

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

static void test_strv_append_keeps_items_across_growth(void **state)
{
	(void)state;
	char **v = gp_xcalloc(1, sizeof(char *));
	size_t n = 0;
	char item[16];
	for (int i = 0; i < 1000; i++) {
		snprintf(item, sizeof item, "%d", i);
		gp_strv_append(&v, &n, item);
		assert_int_equal(n, (size_t)i + 1);
		assert_null(v[n]);
	}
	assert_int_equal(gp_strv_len(v), 1000);
	assert_string_equal(v[0], "0");
	assert_string_equal(v[511], "511");
	assert_string_equal(v[999], "999");
	gp_strv_free(v);

	char **w = NULL; /* a vector may also start as NULL */
	n = 0;
	gp_strv_append(&w, &n, "a");
	assert_string_equal(w[0], "a");
	assert_null(w[1]);
	gp_strv_free(w);
}

/* A text of many short lines is split in linear time: growing the vector by
 * one item per line, as gp_strv_push does, took minutes for this one (the
 * alarm ends the test instead). */
static void test_strv_split_many_items_is_linear(void **state)
{
	(void)state;
	enum { items = 300000 };
	char *text = gp_xmalloc(2 * items + 1);
	for (size_t i = 0; i < items; i++)
		memcpy(text + 2 * i, "a\n", 2);
	text[2 * items] = '\0';
	alarm(20);
	char **v = gp_strv_split(text, '\n');
	alarm(0);
	assert_int_equal(gp_strv_len(v), items);
	assert_string_equal(v[items - 1], "a");
	gp_strv_free(v);
	free(text);
}

static void test_buf_written_by_opens_one_comment_line(void **state)
{
	(void)state;
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage %s) from profile %s.", "env", "p1");
	gp_buf_puts(&b, "body\n");
	char *s = gp_buf_steal(&b);
	assert_string_equal(s,
	                    "# Written by gpuprov (stage env) from profile p1.\nbody\n");
	free(s);
}

/* Writeback is started a stretch at a time, and for the rest at the end; a
 * position that goes backwards (a restarted download) starts nothing. */
static void test_writeback_kick_in_stretches(void **state)
{
	(void)state;
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct gp_writeback wb = { 0 };
	const off_t mib = 1 << 20;
	for (off_t end = mib; end < 8 * mib; end += mib) {
		gp_writeback_kick(&wb, fd, end, false);
		assert_int_equal(wb.started, 0);
	}
	gp_writeback_kick(&wb, fd, 8 * mib, false);
	assert_int_equal(wb.started, 8 * mib);
	gp_writeback_kick(&wb, fd, 9 * mib, false);
	assert_int_equal(wb.started, 8 * mib);
	gp_writeback_kick(&wb, fd, 9 * mib + 1, true);
	assert_int_equal(wb.started, 9 * mib + 1);
	gp_writeback_kick(&wb, fd, 5, true);
	assert_int_equal(wb.started, 9 * mib + 1);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_excerpt_from_first_error),
		cmocka_unit_test(test_excerpt_drops_control_characters),
		cmocka_unit_test(test_excerpt_bounded_at_utf8_boundary),
		cmocka_unit_test(test_strv_append_keeps_items_across_growth),
		cmocka_unit_test(test_strv_split_many_items_is_linear),
		cmocka_unit_test(test_buf_written_by_opens_one_comment_line),
		cmocka_unit_test(test_writeback_kick_in_stretches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
