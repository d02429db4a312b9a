/* Line-based unified diff for plans, in the format `diff -u` documents:
 * `--- old` / `+++ new` headers, `@@ -l,s +l,s @@` hunks with 3 lines of
 * context, hunks merged when at most 6 unchanged lines separate them, and
 * `\ No newline at end of file` after a line that lacks its newline.
 *
 * The edit script comes from E. Myers, "An O(ND) Difference Algorithm and
 * Its Variations" (1986): the greedy forward search over diagonals, keeping
 * each round's V array so the path can be walked back. The common prefix and
 * suffix are trimmed first, so a small edit in a large file stays cheap.
 * When the middle needs more than MAX_D edits the search gives up and the
 * whole middle is reported as deleted and inserted: still a correct diff,
 * only not a minimal one, and memory stays bounded (about 16 MiB). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gpuprov/diff.h"
#include "gpuprov/util.h"

#define CONTEXT 3
#define MAX_D 2000L

struct line {
	const char *s;
	size_t len; /* with the '\n', if the line has one */
	uint64_t hash;
};

struct change {
	size_t i0, i1; /* old lines [i0, i1) deleted */
	size_t j0, j1; /* new lines [j0, j1) inserted */
};

static struct line *split_lines(const char *text, size_t len, size_t *n)
{
	size_t count = 0, k = 0;
	for (size_t i = 0; i < len; i++)
		count += text[i] == '\n';
	if (len && text[len - 1] != '\n')
		count++;

	struct line *lines = gp_xcalloc(count ? count : 1, sizeof(*lines));
	for (const char *p = text, *end = text + len; p < end; k++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl + 1 - p) : (size_t)(end - p);
		uint64_t h = 14695981039346656037ull; /* FNV-1a */
		for (size_t i = 0; i < l; i++)
			h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
		lines[k] = (struct line){ p, l, h };
		p += l;
	}
	*n = count;
	return lines;
}

static bool same(const struct line *a, const struct line *b)
{
	return a->hash == b->hash && a->len == b->len && !memcmp(a->s, b->s, a->len);
}

/* Myers' greedy search on a[0..n) against b[0..m); marks the lines of a
 * shortest edit script in del[] and ins[], or returns false if that takes
 * more than MAX_D edits. trace holds round d's V[k] for k = -d, -d+2 .. d at
 * trace[d * (d + 1) / 2 + (k + d) / 2]. */
static bool myers(const struct line *a, long n, const struct line *b, long m, bool *del,
                  bool *ins)
{
	long dmax = n + m < MAX_D ? n + m : MAX_D, d, x, y, k;
	_cleanup_free_ long *v = gp_xcalloc((size_t)(2 * dmax + 3), sizeof(long));
	_cleanup_free_ long *trace = gp_xmalloc((size_t)((dmax + 1) * (dmax + 2) / 2) *
	                                        sizeof(long));
	long *V = v + dmax + 1; /* V[k] for k in [-dmax - 1, dmax + 1] */

	for (d = 0; d <= dmax; d++) {
		long *t = trace + d * (d + 1) / 2;
		for (k = -d; k <= d; k += 2) {
			if (k == -d || (k != d && V[k - 1] < V[k + 1]))
				x = V[k + 1]; /* down: insert b[y - 1] */
			else
				x = V[k - 1] + 1; /* right: delete a[x - 1] */
			y = x - k;
			while (x < n && y < m && same(&a[x], &b[y]))
				x++, y++;
			V[k] = t[(k + d) / 2] = x;
			if (x >= n && y >= m)
				goto found;
		}
	}
	return false;

found:
	/* Walk back from (n, m): each round undoes one edit and a snake. */
	for (x = n, y = m; d > 0; d--) {
		const long *t = trace + (d - 1) * d / 2;
		k = x - y;
		bool down = k == -d ||
		            (k != d && t[(k - 1 + d - 1) / 2] < t[(k + 1 + d - 1) / 2]);
		long pk = down ? k + 1 : k - 1;
		x = t[(pk + d - 1) / 2];
		y = x - pk;
		if (down)
			ins[y] = true;
		else
			del[x] = true;
	}
	return true;
}

static void put_range(struct gp_buf *out, size_t start, size_t count)
{
	if (count == 1)
		gp_buf_printf(out, "%zu", start + 1);
	else /* an empty range names the line before it */
		gp_buf_printf(out, "%zu,%zu", count ? start + 1 : start, count);
}

static void put_line(struct gp_buf *out, char mark, const struct line *l)
{
	gp_buf_append(out, &mark, 1);
	gp_buf_append(out, l->s, l->len);
	if (l->s[l->len - 1] != '\n')
		gp_buf_puts(out, "\n\\ No newline at end of file\n");
}

static void put_hunk(struct gp_buf *out, const struct line *a, size_t n,
                     const struct line *b, const struct change *c, size_t nc)
{
	size_t os = c[0].i0 > CONTEXT ? c[0].i0 - CONTEXT : 0;
	size_t ns = c[0].j0 - (c[0].i0 - os);
	size_t oe = c[nc - 1].i1 + CONTEXT < n ? c[nc - 1].i1 + CONTEXT : n;
	size_t ne = c[nc - 1].j1 + (oe - c[nc - 1].i1);
	size_t i = os;

	gp_buf_puts(out, "@@ -");
	put_range(out, os, oe - os);
	gp_buf_puts(out, " +");
	put_range(out, ns, ne - ns);
	gp_buf_puts(out, " @@\n");
	for (size_t h = 0; h < nc; h++) {
		for (; i < c[h].i0; i++)
			put_line(out, ' ', &a[i]);
		for (; i < c[h].i1; i++)
			put_line(out, '-', &a[i]);
		for (size_t j = c[h].j0; j < c[h].j1; j++)
			put_line(out, '+', &b[j]);
	}
	for (; i < oe; i++)
		put_line(out, ' ', &a[i]);
}

char *gp_unified_diff(const char *old_label, const char *old_text, size_t old_len,
                      const char *new_label, const char *new_text, size_t new_len)
{
	size_t n, m, pre = 0, suf = 0, nc = 0, i = 0, j = 0;

	old_text = old_len ? old_text : "";
	new_text = new_len ? new_text : "";
	if (old_len == new_len && !memcmp(old_text, new_text, old_len))
		return gp_xstrdup("");

	_cleanup_free_ struct line *a = split_lines(old_text, old_len, &n);
	_cleanup_free_ struct line *b = split_lines(new_text, new_len, &m);
	_cleanup_free_ bool *del = gp_xcalloc(n + 1, sizeof(bool));
	_cleanup_free_ bool *ins = gp_xcalloc(m + 1, sizeof(bool));

	while (pre < n && pre < m && same(&a[pre], &b[pre]))
		pre++;
	while (suf < n - pre && suf < m - pre && same(&a[n - 1 - suf], &b[m - 1 - suf]))
		suf++;
	if (!myers(a + pre, (long)(n - pre - suf), b + pre, (long)(m - pre - suf),
	           del + pre, ins + pre)) {
		memset(del + pre, true, n - pre - suf);
		memset(ins + pre, true, m - pre - suf);
	}

	/* Group the marks into changes; unmarked lines pair up in order. */
	_cleanup_free_ struct change *c = gp_xcalloc(n + m + 1, sizeof(*c));
	while (i < n || j < m) {
		if ((i < n && del[i]) || (j < m && ins[j])) {
			c[nc] = (struct change){ .i0 = i, .j0 = j };
			while (i < n && del[i])
				i++;
			while (j < m && ins[j])
				j++;
			c[nc].i1 = i;
			c[nc++].j1 = j;
		} else {
			i++, j++;
		}
	}

	struct gp_buf out = { 0 };
	if (nc)
		gp_buf_printf(&out, "--- %s\n+++ %s\n", old_label, new_label);
	for (size_t h = 0, e; h < nc; h = e) {
		for (e = h + 1; e < nc && c[e].i0 - c[e - 1].i1 <= 2 * CONTEXT; e++)
			;
		put_hunk(&out, a, n, b, c + h, e - h);
	}
	return gp_buf_steal(&out);
}
