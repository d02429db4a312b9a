/* gp_unified_diff: fixed cases whose expected text was checked against GNU
 * diff 3.8, every case also replayed onto the old text to prove the hunks
 * rebuild the new one, and, where GNU diff is installed, byte-for-byte
 * comparison with `diff -u` on the same cases and on random ones. */
#include "testutil.h"

#include <time.h>

#include "gpuprov/diff.h"
#include "gpuprov/util.h"

#define DIFF "/usr/bin/diff"

static char *tmpdir;
static bool have_gnu_diff;

/* Runs argv[0] with stdout captured. LC_ALL=C because GNU translates the
 * "No newline" marker. */
static char *capture(char *const argv[], int *status)
{
	char *envp[] = { "LC_ALL=C", "PATH=/usr/bin:/bin", NULL };
	struct gp_buf out = { 0 };
	char chunk[4096];
	ssize_t n;
	int fds[2], st;

	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (dup2(fds[1], STDOUT_FILENO) < 0)
			_exit(126);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	close(fds[1]);
	while ((n = read(fds[0], chunk, sizeof chunk)) != 0) {
		if (n < 0) {
			assert_int_equal(errno, EINTR);
			continue;
		}
		gp_buf_append(&out, chunk, (size_t)n);
	}
	close(fds[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return gp_buf_steal(&out);
}

static void write_file(const char *path, const char *data, size_t len)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	                              0644);
	assert_true(fd >= 0);
	while (len) {
		ssize_t n = write(fd, data, len);
		assert_true(n > 0);
		data += n;
		len -= (size_t)n;
	}
}

static char *gnu_diff(const char *old, size_t old_len, const char *new, size_t new_len)
{
	_cleanup_free_ char *po = gp_xasprintf("%s/old", tmpdir);
	_cleanup_free_ char *pn = gp_xasprintf("%s/new", tmpdir);
	char *argv[] = { DIFF, "-u", "--label", "OLD", "--label", "NEW", po, pn, NULL };
	bool same = old_len == new_len && (!old_len || !memcmp(old, new, old_len));
	int status;

	write_file(po, old ? old : "", old_len);
	write_file(pn, new ? new : "", new_len);
	char *out = capture(argv, &status);
	assert_int_equal(status, same ? 0 : 1);
	return out;
}

/* The next line of a hunk body, '\n' included unless a "\ No newline"
 * marker follows it, in which case the marker is consumed too. */
static const char *body_line(const char **p, size_t *len)
{
	const char *s = *p + 1, *nl = strchr(s, '\n');
	assert_non_null(nl);
	*len = (size_t)(nl + 1 - s);
	*p = nl + 1;
	if (gp_str_starts_with(*p, "\\ No newline at end of file\n")) {
		(*len)--;
		*p += strlen("\\ No newline at end of file\n");
	}
	return s;
}

/* Replays diff onto old and checks it yields new: the hunks must match the
 * old text line for line, their headers must count their bodies, and the
 * newline markers must sit where the texts lack newlines. */
static void check_applies(const char *old, size_t old_len, const char *new,
                          size_t new_len, const char *diff)
{
	struct gp_buf out = { 0 };
	const char *o = old ? old : "", *oend = o + old_len, *p = diff;

	if (!*diff) {
		assert_int_equal(old_len, new_len);
		assert_memory_equal(o, new ? new : "", old_len);
		return;
	}
	assert_true(gp_str_starts_with(p, "--- OLD\n+++ NEW\n"));
	p += strlen("--- OLD\n+++ NEW\n");

	long oline = 0; /* lines of old consumed so far */
	while (*p) {
		long a, b = 1, c, d = 1;
		int used = 0;
		if (sscanf(p, "@@ -%ld,%ld +%ld,%ld @@%n", &a, &b, &c, &d, &used) != 4 &&
		    sscanf(p, "@@ -%ld +%ld,%ld @@%n", &a, &c, &d, &used) != 3 &&
		    sscanf(p, "@@ -%ld,%ld +%ld @@%n", &a, &b, &c, &used) != 3 &&
		    sscanf(p, "@@ -%ld +%ld @@%n", &a, &c, &used) != 2)
			fail_msg("bad hunk header: %.40s", p);
		assert_true(used > 0 && p[used] == '\n');
		p += used + 1;

		/* An empty range names the line before it. */
		for (long start = b ? a - 1 : a; oline < start; oline++) {
			const char *nl = memchr(o, '\n', (size_t)(oend - o));
			size_t n = nl ? (size_t)(nl + 1 - o) : (size_t)(oend - o);
			gp_buf_append(&out, o, n);
			o += n;
		}

		long seen_old = 0, seen_new = 0;
		while (*p && *p != '@') {
			char mark = *p;
			size_t len;
			const char *s = body_line(&p, &len);
			if (mark == ' ' || mark == '-') {
				assert_true((size_t)(oend - o) >= len);
				assert_memory_equal(o, s, len);
				assert_true(o + len == oend || o[len - 1] == '\n');
				o += len;
				oline++;
				seen_old++;
			}
			if (mark == ' ' || mark == '+') {
				gp_buf_append(&out, s, len);
				seen_new++;
			}
			assert_true(mark == ' ' || mark == '-' || mark == '+');
		}
		assert_int_equal(seen_old, b);
		assert_int_equal(seen_new, d);
	}
	gp_buf_append(&out, o, (size_t)(oend - o));
	assert_int_equal(out.len, new_len);
	assert_memory_equal(out.len ? out.data : "", new ? new : "", new_len);
	gp_buf_free(&out);
}

static void check_n(const char *old, size_t old_len, const char *new, size_t new_len,
                    const char *expected)
{
	_cleanup_free_ char *got = gp_unified_diff("OLD", old, old_len, "NEW", new,
	                                           new_len);

	assert_non_null(got);
	if (expected)
		assert_string_equal(got, expected);
	check_applies(old, old_len, new, new_len, got);
	if (have_gnu_diff) {
		_cleanup_free_ char *want = gnu_diff(old, old_len, new, new_len);
		assert_string_equal(got, want);
	}
}

static void check(const char *old, const char *new, const char *expected)
{
	check_n(old, old ? strlen(old) : 0, new, new ? strlen(new) : 0, expected);
}

#define HDR "--- OLD\n+++ NEW\n"

static void test_equal(_unused_ void **state)
{
	check("a\nb\n", "a\nb\n", "");
	check("a\nb", "a\nb", "");
	check(NULL, NULL, "");
	check(NULL, "", "");
	check("", NULL, "");
}

static void test_labels_verbatim(_unused_ void **state)
{
	_cleanup_free_ char *got = gp_unified_diff("/etc/a b.conf", "x\n", 2, "(planned)",
	                                           "y\n", 2);
	assert_string_equal(got,
	                    "--- /etc/a b.conf\n+++ (planned)\n@@ -1 +1 @@\n-x\n+y\n");
}

static void test_new_file(_unused_ void **state)
{
	check(NULL, "a\nb\nc\n", HDR "@@ -0,0 +1,3 @@\n+a\n+b\n+c\n");
	check("", "a\n", HDR "@@ -0,0 +1 @@\n+a\n");
}

static void test_removed_all(_unused_ void **state)
{
	check("a\nb\n", "", HDR "@@ -1,2 +0,0 @@\n-a\n-b\n");
	check("a\n", NULL, HDR "@@ -1 +0,0 @@\n-a\n");
}

static void test_single_line(_unused_ void **state)
{
	check("x\n", "y\n", HDR "@@ -1 +1 @@\n-x\n+y\n");
}

/* "l1\n" .. "lN\n", with the lines listed in upper[] capitalised. */
static char *numbered(int n, const int *upper, size_t nupper)
{
	struct gp_buf b = { 0 };
	for (int i = 1; i <= n; i++) {
		bool up = false;
		for (size_t k = 0; k < nupper; k++)
			up |= upper[k] == i;
		gp_buf_printf(&b, "%c%d\n", up ? 'L' : 'l', i);
	}
	return gp_buf_steal(&b);
}

static void test_change_in_long_file(_unused_ void **state)
{
	_cleanup_free_ char *old = numbered(20, NULL, 0);
	_cleanup_free_ char *new = numbered(20, (int[]){ 10 }, 1);
	check(old, new,
	      HDR "@@ -7,7 +7,7 @@\n l7\n l8\n l9\n-l10\n+L10\n l11\n l12\n l13\n");
}

static void test_hunks_merge_within_six_lines(_unused_ void **state)
{
	_cleanup_free_ char *old = numbered(20, NULL, 0);
	/* 6 unchanged lines between: the contexts touch, one hunk. */
	_cleanup_free_ char *near = numbered(20, (int[]){ 5, 12 }, 2);
	/* 7 between: two hunks. */
	_cleanup_free_ char *far = numbered(20, (int[]){ 5, 13 }, 2);

	check(old, near,
	      HDR "@@ -2,14 +2,14 @@\n l2\n l3\n l4\n-l5\n+L5\n"
	          " l6\n l7\n l8\n l9\n l10\n l11\n-l12\n+L12\n l13\n l14\n l15\n");
	check(old, far,
	      HDR "@@ -2,7 +2,7 @@\n l2\n l3\n l4\n-l5\n+L5\n l6\n l7\n l8\n"
	          "@@ -10,7 +10,7 @@\n l10\n l11\n l12\n-l13\n+L13\n l14\n l15\n l16\n");
}

static void test_missing_newline(_unused_ void **state)
{
	check("a\nb", "a\nb\n",
	      HDR "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
	check("a\nb\n", "a\nb",
	      HDR "@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n");
	check("a\nb", "a\nc",
	      HDR "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
	          "\\ No newline at end of file\n");
	/* Unchanged last line: the marker follows the context line. */
	check("a\nb\nc", "x\nb\nc",
	      HDR "@@ -1,3 +1,3 @@\n-a\n+x\n b\n c\n\\ No newline at end of file\n");
	check("", "a", HDR "@@ -0,0 +1 @@\n+a\n\\ No newline at end of file\n");
	check("a", "", HDR "@@ -1 +0,0 @@\n-a\n\\ No newline at end of file\n");
}

/* Where several edit scripts are equally short, GNU's choice. */
static void test_ambiguous_placement(_unused_ void **state)
{
	check("x\na\ny\n", "x\na\na\ny\n", HDR "@@ -1,3 +1,4 @@\n x\n a\n+a\n y\n");
	check("1\n2\n3\n4\n5\n", "4\n5\n1\n2\n3\n",
	      HDR "@@ -1,5 +1,5 @@\n+4\n+5\n 1\n 2\n 3\n-4\n-5\n");
	check("[a]\nx=1\n\n[b]\ny=2\n", "[a]\nx=1\n\n[c]\nz=3\n\n[b]\ny=2\n",
	      HDR "@@ -1,5 +1,8 @@\n [a]\n x=1\n \n+[c]\n+z=3\n+\n [b]\n y=2\n");
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_large_file_one_change(_unused_ void **state)
{
	struct gp_buf old = { 0 }, new = { 0 }, want = { 0 };

	for (int i = 1; i <= 10000; i++) {
		gp_buf_printf(&old, "key%d = %d\n", i, i);
		gp_buf_printf(&new, "key%d = %d\n", i, i == 5000 ? -1 : i);
	}
	gp_buf_puts(&want, HDR "@@ -4997,7 +4997,7 @@\n");
	for (int i = 4997; i <= 5003; i++) {
		if (i == 5000)
			gp_buf_puts(&want, "-key5000 = 5000\n+key5000 = -1\n");
		else
			gp_buf_printf(&want, " key%d = %d\n", i, i);
	}

	double t0 = now();
	_cleanup_free_ char *got = gp_unified_diff("OLD", old.data, old.len, "NEW",
	                                           new.data, new.len);
	assert_true(now() - t0 < 2.0);
	assert_string_equal(got, want.data);
	check_n(old.data, old.len, new.data, new.len, want.data);
	gp_buf_free(&old);
	gp_buf_free(&new);
	gp_buf_free(&want);
}

/* Everything differs in order: the edit cost is about 2N, past GNU's cap,
 * so this takes the bounded path and must still be a correct diff. */
static void test_large_file_reversed(_unused_ void **state)
{
	struct gp_buf old = { 0 }, new = { 0 };

	for (int i = 0; i < 10000; i++) {
		gp_buf_printf(&old, "line %d\n", i);
		gp_buf_printf(&new, "line %d\n", 9999 - i);
	}
	double t0 = now();
	_cleanup_free_ char *got = gp_unified_diff("OLD", old.data, old.len, "NEW",
	                                           new.data, new.len);
	assert_true(now() - t0 < 10.0);
	check_n(old.data, old.len, new.data, new.len, got);
	gp_buf_free(&old);
	gp_buf_free(&new);
}

static unsigned rnd(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return (*seed >> 16) & 0x7fff;
}

static char random_char(unsigned *seed, unsigned alpha, unsigned offset)
{
	unsigned c = rnd(seed) % alpha;
	return (char)(c < 2 ? 'A' + c : 'a' + c + offset);
}

/* Short lines from a small alphabet, so that lines repeat and many edit
 * scripts tie; sometimes without the final newline. "A" and "B" stay common
 * to both texts whatever the offset, so with an offset they become the
 * often-matching lines among unmatched ones that GNU discards in runs. */
static void random_text(struct gp_buf *b, unsigned *seed, unsigned maxlines,
                        unsigned alpha, unsigned offset)
{
	unsigned n = rnd(seed) % (maxlines + 1);
	for (unsigned i = 0; i < n; i++)
		gp_buf_printf(b, "%c\n", random_char(seed, alpha, offset));
	if (b->len && rnd(seed) % 5 == 0)
		b->data[--b->len] = '\0';
}

/* A few line insertions and deletions, the shape of a config edit. */
static void mutate(struct gp_buf *dst, const struct gp_buf *src, unsigned *seed,
                   unsigned alpha)
{
	dst->len = 0;
	gp_buf_append(dst, src->len ? src->data : "", src->len);
	for (unsigned k = rnd(seed) % 4; k; k--) {
		size_t pos = dst->len ? rnd(seed) % (dst->len + 1) : 0;
		while (pos && dst->data[pos - 1] != '\n')
			pos--;
		if (dst->len && rnd(seed) % 2) {
			char *nl = memchr(dst->data + pos, '\n', dst->len - pos);
			size_t end = nl ? (size_t)(nl + 1 - dst->data) : dst->len;
			memmove(dst->data + pos, dst->data + end, dst->len - end + 1);
			dst->len -= end - pos;
		} else {
			char ins[2] = { random_char(seed, alpha, 0), '\n' };
			gp_buf_append(dst, ins, 2);
			memmove(dst->data + pos + 2, dst->data + pos, dst->len - 2 - pos);
			memcpy(dst->data + pos, ins, 2);
		}
	}
}

static void test_random_against_gnu(_unused_ void **state)
{
	static const struct {
		unsigned maxlines, alpha, offset;
	} shapes[] = { { 6, 2, 0 },    { 12, 4, 0 },   { 40, 3, 0 },
		       { 120, 12, 0 }, { 200, 12, 6 }, { 60, 8, 4 } };
	struct gp_buf a = { 0 }, b = { 0 };
	unsigned seed = 20240601;

	if (!have_gnu_diff)
		skip();
	for (size_t it = 0; it < 100 * ARRAY_SIZE(shapes); it++) {
		unsigned maxlines = shapes[it % ARRAY_SIZE(shapes)].maxlines;
		unsigned alpha = shapes[it % ARRAY_SIZE(shapes)].alpha;
		a.len = 0;
		random_text(&a, &seed, maxlines, alpha, 0);
		if (rnd(&seed) % 2)
			mutate(&b, &a, &seed, alpha);
		else {
			b.len = 0;
			random_text(&b, &seed, maxlines, alpha,
			            shapes[it % ARRAY_SIZE(shapes)].offset);
		}
		check_n(a.len ? a.data : "", a.len, b.len ? b.data : "", b.len, NULL);
	}
	gp_buf_free(&a);
	gp_buf_free(&b);
}

static int group_setup(_unused_ void **state)
{
	char *argv[] = { DIFF, "--version", NULL };
	int status;

	tmpdir = tu_tmpdir();
	/* Busybox and BSD diffs place hunks differently; only GNU is the
	 * reference. */
	if (access(argv[0], X_OK) == 0) {
		_cleanup_free_ char *version = capture(argv, &status);
		have_gnu_diff = status == 0 && strstr(version, "GNU diffutils");
	}
	if (!have_gnu_diff)
		print_message("# GNU diff not found: checking fixed expectations only\n");
	return 0;
}

static int group_teardown(_unused_ void **state)
{
	tu_rmrf(tmpdir);
	free(tmpdir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_labels_verbatim),
		cmocka_unit_test(test_new_file),
		cmocka_unit_test(test_removed_all),
		cmocka_unit_test(test_single_line),
		cmocka_unit_test(test_change_in_long_file),
		cmocka_unit_test(test_hunks_merge_within_six_lines),
		cmocka_unit_test(test_missing_newline),
		cmocka_unit_test(test_ambiguous_placement),
		cmocka_unit_test(test_large_file_one_change),
		cmocka_unit_test(test_large_file_reversed),
		cmocka_unit_test(test_random_against_gnu),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
