/* gp_unified_diff: exact expected text for simple cases whose shortest diff
 * is unique (also compared byte for byte with GNU `diff -u` where it is
 * installed), and, on seeded random texts, a replay of every diff onto the
 * old text to prove the hunks rebuild the new one plus a check against an
 * O(NM) LCS that the edit script is minimal. Where several shortest scripts
 * exist, any of them is accepted. */
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

static void skip_line(const char **o, const char *oend, struct gp_buf *out)
{
	const char *nl = memchr(*o, '\n', (size_t)(oend - *o));
	size_t n = nl ? (size_t)(nl + 1 - *o) : (size_t)(oend - *o);
	gp_buf_append(out, *o, n);
	*o += n;
}

/* Replays diff onto old and checks it yields new: the hunks must match the
 * old text line for line, come in order without overlapping or touching
 * (hunks closer than 2 * 3 context lines are merged), their headers must
 * count their bodies, and the newline markers must sit where the texts lack
 * newlines. Counts the '-' and '+' lines. */
static void check_applies(const char *old, size_t old_len, const char *new,
                          size_t new_len, const char *diff, long *ndel, long *nins)
{
	struct gp_buf out = { 0 };
	const char *o = old ? old : "", *oend = o + old_len, *p = diff;
	long oline = 0, nline = 0; /* lines consumed so far */
	bool first = true;

	*ndel = *nins = 0;
	if (!*diff) {
		assert_int_equal(old_len, new_len);
		assert_memory_equal(o, new ? new : "", old_len);
		return;
	}
	assert_true(gp_str_starts_with(p, "--- OLD\n+++ NEW\n"));
	p += strlen("--- OLD\n+++ NEW\n");
	assert_true(*p);

	while (*p) {
		long a, b = 1, c, d = 1;
		int used = 0;
		if (sscanf(p, "@@ -%ld,%ld +%ld,%ld @@%n", &a, &b, &c, &d, &used) != 4 &&
		    sscanf(p, "@@ -%ld +%ld,%ld @@%n", &a, &c, &d, &used) != 3 &&
		    sscanf(p, "@@ -%ld,%ld +%ld @@%n", &a, &b, &c, &used) != 3 &&
		    sscanf(p, "@@ -%ld +%ld @@%n", &a, &c, &used) != 2)
			fail_msg("bad hunk header: %.40s", p);
		assert_true(used > 0 && p[used] == '\n');
		/* ",1" is never written. */
		assert_null(memmem(p, (size_t)used, ",1 ", 3));
		p += used + 1;

		/* An empty range names the line before it. */
		long ostart = b ? a - 1 : a, nstart = d ? c - 1 : c;
		assert_true(ostart >= oline && ostart - oline == nstart - nline);
		/* Separate hunks leave more than 6 unchanged lines between. */
		assert_true(first || ostart - oline > 0);
		first = false;
		while (oline < ostart) {
			skip_line(&o, oend, &out);
			oline++;
			nline++;
		}

		long seen_old = 0, seen_new = 0;
		while (*p && *p != '@') {
			char mark = *p;
			size_t len;
			const char *s = body_line(&p, &len);
			assert_true(mark == ' ' || mark == '-' || mark == '+');
			if (mark == ' ' || mark == '-') {
				assert_true((size_t)(oend - o) >= len);
				assert_memory_equal(o, s, len);
				assert_true(o + len == oend || o[len - 1] == '\n');
				o += len;
				seen_old++;
			}
			if (mark == ' ' || mark == '+') {
				gp_buf_append(&out, s, len);
				seen_new++;
			}
			*ndel += mark == '-';
			*nins += mark == '+';
		}
		assert_int_equal(seen_old, b);
		assert_int_equal(seen_new, d);
		oline += b;
		nline += d;
	}
	gp_buf_append(&out, o, (size_t)(oend - o));
	assert_int_equal(out.len, new_len);
	assert_memory_equal(out.len ? out.data : "", new ? new : "", new_len);
	gp_buf_free(&out);
}

/* Splits text into lines (the '\n' kept, so "a" and "a\n" differ). */
static size_t lines_of(const char *text, size_t len, const char ***starts, size_t **lens)
{
	size_t n = 0;
	*starts = gp_xcalloc(len + 1, sizeof(**starts));
	*lens = gp_xcalloc(len + 1, sizeof(**lens));
	for (const char *p = text, *end = text + len; p < end; n++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		(*starts)[n] = p;
		(*lens)[n] = nl ? (size_t)(nl + 1 - p) : (size_t)(end - p);
		p += (*lens)[n];
	}
	return n;
}

/* Length of the longest common subsequence of lines, by the O(NM) DP. */
static long lcs(const char *old, size_t old_len, const char *new, size_t new_len,
                long *n_out, long *m_out)
{
	_cleanup_free_ const char **as = NULL, **bs = NULL;
	_cleanup_free_ size_t *al = NULL, *bl = NULL;
	size_t n = lines_of(old ? old : "", old_len, &as, &al);
	size_t m = lines_of(new ? new : "", new_len, &bs, &bl);
	_cleanup_free_ long *t = gp_xcalloc((n + 1) * (m + 1), sizeof(long));

	for (size_t i = n; i-- > 0;)
		for (size_t j = m; j-- > 0;) {
			long *cell = &t[i * (m + 1) + j];
			if (al[i] == bl[j] && !memcmp(as[i], bs[j], al[i]))
				*cell = t[(i + 1) * (m + 1) + j + 1] + 1;
			else
				*cell = t[(i + 1) * (m + 1) + j] > t[i * (m + 1) + j + 1]
				            ? t[(i + 1) * (m + 1) + j]
				            : t[i * (m + 1) + j + 1];
		}
	*n_out = (long)n;
	*m_out = (long)m;
	return t[0];
}

/* Diffs old against new, replays the result, and, when expected is given,
 * compares with it (and with GNU diff: only used for cases whose shortest
 * diff is unique). When minimal, asserts the script is a shortest one. */
static void check_full(const char *old, size_t old_len, const char *new, size_t new_len,
                       const char *expected, bool minimal)
{
	_cleanup_free_ char *got = gp_unified_diff("OLD", old, old_len, "NEW", new,
	                                           new_len);
	long ndel, nins;

	assert_non_null(got);
	if (expected)
		assert_string_equal(got, expected);
	check_applies(old, old_len, new, new_len, got, &ndel, &nins);
	if (expected && have_gnu_diff) {
		_cleanup_free_ char *want = gnu_diff(old, old_len, new, new_len);
		assert_string_equal(got, want);
	}
	if (minimal) {
		long n, m, common = lcs(old, old_len, new, new_len, &n, &m);
		assert_int_equal(ndel, n - common);
		assert_int_equal(nins, m - common);
	}
}

static void check(const char *old, const char *new, const char *expected)
{
	check_full(old, old ? strlen(old) : 0, new, new ? strlen(new) : 0, expected,
	           true);
}

#define HDR "--- OLD\n+++ NEW\n"

static void test_equal(_unused_ void **state)
{
	check("a\nb\n", "a\nb\n", "");
	check("a\nb", "a\nb", "");
	check(NULL, NULL, "");
	check(NULL, "", "");
	check("", NULL, "");
	/* Equal texts still come back allocated. */
	char *got = gp_unified_diff("x", NULL, 0, "y", NULL, 0);
	assert_string_equal(got, "");
	free(got);
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

static void test_pure_insert_and_delete(_unused_ void **state)
{
	check("a\nb\nc\nd\n", "a\nb\nX\nc\nd\n",
	      HDR "@@ -1,4 +1,5 @@\n a\n b\n+X\n c\n d\n");
	check("a\nb\nX\nc\nd\n", "a\nb\nc\nd\n",
	      HDR "@@ -1,5 +1,4 @@\n a\n b\n-X\n c\n d\n");
	/* Insertion after line 4 of 8: the context starts at line 2. */
	check("1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nX\n5\n6\n7\n8\n",
	      HDR "@@ -2,6 +2,7 @@\n 2\n 3\n 4\n+X\n 5\n 6\n 7\n");
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

static void test_change_near_edges(_unused_ void **state)
{
	_cleanup_free_ char *old = numbered(10, NULL, 0);
	_cleanup_free_ char *first = numbered(10, (int[]){ 1 }, 1);
	_cleanup_free_ char *last = numbered(10, (int[]){ 10 }, 1);
	check(old, first, HDR "@@ -1,4 +1,4 @@\n-l1\n+L1\n l2\n l3\n l4\n");
	check(old, last, HDR "@@ -7,4 +7,4 @@\n l7\n l8\n l9\n-l10\n+L10\n");
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

/* Several shortest scripts exist: any of them, as long as it is shortest
 * and replays. */
static void test_ambiguous_placement(_unused_ void **state)
{
	check("x\na\ny\n", "x\na\na\ny\n", NULL);
	check("1\n2\n3\n4\n5\n", "4\n5\n1\n2\n3\n", NULL);
	check("[a]\nx=1\n\n[b]\ny=2\n", "[a]\nx=1\n\n[c]\nz=3\n\n[b]\ny=2\n", NULL);
	check("a\nb\nc\na\nb\nb\na\n", "c\nb\na\nb\na\nc\n", NULL);
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
	check_full(old.data, old.len, new.data, new.len, want.data, false);
	gp_buf_free(&old);
	gp_buf_free(&new);
	gp_buf_free(&want);
}

/* Everything differs in order: far past the edit cap, so the middle is
 * reported as deleted and inserted, which must still replay. */
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
	assert_true(gp_str_starts_with(got, HDR "@@ -1,10000 +1,10000 @@\n"));
	check_full(old.data, old.len, new.data, new.len, NULL, false);
	gp_buf_free(&old);
	gp_buf_free(&new);
}

/* Many scattered edits in a long file, under the cap: still shortest. */
static void test_many_edits_below_cap(_unused_ void **state)
{
	struct gp_buf old = { 0 }, new = { 0 };

	for (int i = 0; i < 3000; i++) {
		gp_buf_printf(&old, "v%d\n", i);
		if (i % 5 == 0)
			gp_buf_printf(&new, "w%d\n", i); /* 600 changes: 1200 edits */
		else if (i % 7 != 0)
			gp_buf_printf(&new, "v%d\n", i);
	}
	check_full(old.data, old.len, new.data, new.len, NULL, true);
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
 * scripts tie; sometimes without the final newline. */
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

static void test_random_replay_and_minimal(_unused_ void **state)
{
	static const struct {
		unsigned maxlines, alpha, offset;
	} shapes[] = { { 6, 2, 0 },    { 12, 4, 0 },   { 40, 3, 0 },
		       { 120, 12, 0 }, { 200, 12, 6 }, { 60, 8, 4 } };
	struct gp_buf a = { 0 }, b = { 0 };
	unsigned seed = 20240601;

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
		check_full(a.len ? a.data : "", a.len, b.len ? b.data : "", b.len, NULL,
		           true);
	}
	gp_buf_free(&a);
	gp_buf_free(&b);
}

static int group_setup(_unused_ void **state)
{
	char *argv[] = { DIFF, "--version", NULL };
	int status;

	tmpdir = tu_tmpdir();
	/* Other diffs may format differently; only GNU is the reference. */
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
		cmocka_unit_test(test_pure_insert_and_delete),
		cmocka_unit_test(test_change_in_long_file),
		cmocka_unit_test(test_change_near_edges),
		cmocka_unit_test(test_hunks_merge_within_six_lines),
		cmocka_unit_test(test_missing_newline),
		cmocka_unit_test(test_ambiguous_placement),
		cmocka_unit_test(test_large_file_one_change),
		cmocka_unit_test(test_large_file_reversed),
		cmocka_unit_test(test_many_edits_below_cap),
		cmocka_unit_test(test_random_replay_and_minimal),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
