/* Unified diffs for plans, byte-for-byte what GNU `diff -u` prints.
 *
 * When several edit scripts are equally short, any of them is a correct diff,
 * but users compare plan output with diffs they make by hand, so every choice
 * follows GNU diffutils: identical ends are trimmed the same way, lines that
 * match nothing in the other text are set aside before the search, the search
 * is Myers' linear-space O(ND) bisection with the same tie-breaking and the
 * same cost cap, and runs of changes are slid to the same place afterwards.
 * Memory is O(N + M). */
#include <stdint.h>
#include <string.h>

#include "gpuprov/diff.h"
#include "gpuprov/util.h"

#define CONTEXT 3
/* GNU raises its horizon to the context: that many identical lines at each
 * end stay inside the analysed region, which decides both which lines get
 * discarded and how far a run of changes may slide. */
#define HORIZON CONTEXT

struct text {
	const char *s;
	size_t len;
	bool missing_nl; /* non-empty and not ending in '\n' */
	size_t n; /* len + missing_nl: GNU compares as if the newline were there */
	size_t nlines;
	size_t *start; /* nlines + 1 offsets; start[nlines] == n */

	/* The analysed region, lines [lo, lo + count). */
	size_t lo;
	ptrdiff_t count;
	ptrdiff_t *equiv; /* equivalence class of each region line, >= 1 */
	char *changed_mem; /* count + 2 flags ... */
	char *changed; /* ... so that changed[-1] and changed[count] read 0 */
	ptrdiff_t *undisc; /* classes of the lines that were not discarded */
	ptrdiff_t *realidx; /* their region line numbers */
	ptrdiff_t nundisc;
};

static inline char byte_at(const struct text *t, size_t i)
{
	return i < t->len ? t->s[i] : '\n';
}

static void text_init(struct text *t, const char *s, size_t len)
{
	*t = (struct text){ .s = s ? s : "", .len = s ? len : 0 };
	t->missing_nl = t->len && t->s[t->len - 1] != '\n';
	t->n = t->len + t->missing_nl;

	for (const char *p = t->s, *end = t->s + t->len;
	     (p = memchr(p, '\n', (size_t)(end - p))); p++)
		t->nlines++;
	t->nlines += t->missing_nl;

	t->start = gp_xmalloc((t->nlines + 1) * sizeof(size_t));
	size_t off = 0;
	for (size_t i = 0; i < t->nlines; i++) {
		t->start[i] = off;
		const char *nl = memchr(t->s + off, '\n', t->len - off);
		off = nl ? (size_t)(nl - t->s) + 1 : t->n;
	}
	t->start[t->nlines] = t->n;
}

static void text_free(struct text *t)
{
	free(t->start);
	free(t->equiv);
	free(t->changed_mem);
	free(t->undisc);
	free(t->realidx);
}

/* Line number of byte offset off, which is a line start. */
static size_t line_at(const struct text *t, size_t off)
{
	size_t lo = 0, hi = t->nlines;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->start[mid] < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Line i without the virtual newline, so "x" at EOF differs from "x\n". */
static size_t line_len(const struct text *t, size_t i)
{
	size_t e = t->start[i + 1] < t->len ? t->start[i + 1] : t->len;
	return e - t->start[i];
}

/* Trims the identical ends at byte level like GNU's find_identical_ends, which
 * is not the same as counting equal lines: the suffix scan stops short of the
 * prefix and may end mid-line, and both ends keep HORIZON lines. */
static void trim_ends(struct text *a, struct text *b)
{
	size_t n = a->n < b->n ? a->n : b->n, p = 0;
	while (p < n && byte_at(a, p) == byte_at(b, p))
		p++;
	/* The virtual newline of one side must not match a real one. */
	if ((a->len < p) != (b->len < p))
		p--;
	int keep = HORIZON;
	while (p && (byte_at(a, p - 1) != '\n' || keep--))
		p--;
	a->lo = b->lo = line_at(a, p);

	size_t p0 = a->n, p1 = b->n;
	if (a->missing_nl == b->missing_nl) {
		size_t beg0 = p + (a->n < b->n ? 0 : a->n - b->n);
		while (p0 != beg0) {
			p0--, p1--;
			if (byte_at(a, p0) != byte_at(b, p1)) {
				p0++, p1++;
				beg0 = p0;
				break;
			}
		}
		bool at_bol = (p0 == 0 || byte_at(a, p0 - 1) == '\n') &&
		              (p1 == 0 || byte_at(b, p1 - 1) == '\n');
		/* One extra line when mid-line, which also gives the shifting
		 * pass a line to spare. */
		keep = HORIZON + !at_bol;
		while (keep-- && p0 != a->n)
			while (byte_at(a, p0++) != '\n')
				;
		p1 += p0 - beg0;
	}
	a->count = (ptrdiff_t)(line_at(a, p0) - a->lo);
	b->count = (ptrdiff_t)(line_at(b, p1) - b->lo);
}

struct class_slot {
	uint64_t hash;
	const char *line;
	size_t len;
	ptrdiff_t id; /* 0: empty slot */
};

static uint64_t hash_line(const char *p, size_t len)
{
	uint64_t h = 14695981039346656037ULL; /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
	return h;
}

/* Numbers the region lines of both texts so that equal lines share a class;
 * returns one past the largest class. */
static ptrdiff_t assign_classes(struct text *t[2])
{
	size_t total = (size_t)(t[0]->count + t[1]->count), size = 16;
	while (size < 2 * total)
		size *= 2;
	struct class_slot *slots = gp_xcalloc(size, sizeof(*slots));
	ptrdiff_t next = 1;

	for (int f = 0; f < 2; f++) {
		t[f]->equiv = gp_xmalloc(((size_t)t[f]->count + 1) * sizeof(ptrdiff_t));
		for (ptrdiff_t i = 0; i < t[f]->count; i++) {
			size_t ln = t[f]->lo + (size_t)i, len = line_len(t[f], ln);
			const char *line = t[f]->s + t[f]->start[ln];
			uint64_t h = hash_line(line, len);
			size_t k = h & (size - 1);
			while (slots[k].id &&
			       !(slots[k].hash == h && slots[k].len == len &&
			         memcmp(slots[k].line, line, len) == 0))
				k = (k + 1) & (size - 1);
			if (!slots[k].id)
				slots[k] = (struct class_slot){ h, line, len, next++ };
			t[f]->equiv[i] = slots[k].id;
		}
	}
	free(slots);
	return next;
}

/* Sets aside lines that match nothing in the other text, plus runs of lines
 * that match very many, as GNU's discard_confusing_lines does; they are
 * changes anyway, and which ones go changes what the search settles on. */
static void discard_confusing(struct text *t[2], ptrdiff_t nclasses)
{
	ptrdiff_t *occurs[2];
	char *disc[2];

	for (int f = 0; f < 2; f++) {
		occurs[f] = gp_xcalloc((size_t)nclasses, sizeof(ptrdiff_t));
		for (ptrdiff_t i = 0; i < t[f]->count; i++)
			occurs[f][t[f]->equiv[i]]++;
	}

	/* 1: matches nothing; 2: matches more than about sqrt(lines) times, so it
	 * only goes when it sits inside a run of 1s. */
	for (int f = 0; f < 2; f++) {
		ptrdiff_t end = t[f]->count, many = 5;
		for (ptrdiff_t tem = end / 64; (tem >>= 2) > 0;)
			many *= 2;
		disc[f] = gp_xcalloc((size_t)end + 1, 1);
		for (ptrdiff_t i = 0; i < end; i++) {
			ptrdiff_t nmatch = occurs[1 - f][t[f]->equiv[i]];
			if (nmatch == 0)
				disc[f][i] = 1;
			else if (nmatch > many)
				disc[f][i] = 2;
		}
	}

	for (int f = 0; f < 2; f++) {
		char *d = disc[f];
		ptrdiff_t end = t[f]->count;

		for (ptrdiff_t i = 0; i < end; i++) {
			if (d[i] == 2) {
				d[i] = 0;
				continue;
			}
			if (d[i] == 0)
				continue;

			ptrdiff_t j, provisional = 0;
			for (j = i; j < end && d[j]; j++)
				provisional += d[j] == 2;
			while (j > i && d[j - 1] == 2)
				d[--j] = 0, provisional--;
			ptrdiff_t length = j - i;

			if (provisional * 4 > length) {
				while (j > i)
					if (d[--j] == 2)
						d[j] = 0;
				continue;
			}

			ptrdiff_t minimum = 1, consec;
			for (ptrdiff_t tem = length >> 2; (tem >>= 2) > 0;)
				minimum <<= 1;
			minimum++;

			/* Long subruns of provisionals stay. Reaching minimum
			 * backs up to the subrun start and, as consec keeps
			 * growing, clears it all. */
			for (j = 0, consec = 0; j < length; j++) {
				if (d[i + j] != 2)
					consec = 0;
				else if (minimum == ++consec)
					j -= consec;
				else if (minimum < consec)
					d[i + j] = 0;
			}

			/* Keep provisionals at either end of the run until 3
			 * definite discards in a row, or one 8 lines in. */
			for (j = 0, consec = 0; j < length; j++) {
				if (j >= 8 && d[i + j] == 1)
					break;
				if (d[i + j] == 2)
					consec = 0, d[i + j] = 0;
				else if (d[i + j] == 0)
					consec = 0;
				else
					consec++;
				if (consec == 3)
					break;
			}
			i += length - 1;
			for (j = 0, consec = 0; j < length; j++) {
				if (j >= 8 && d[i - j] == 1)
					break;
				if (d[i - j] == 2)
					consec = 0, d[i - j] = 0;
				else if (d[i - j] == 0)
					consec = 0;
				else
					consec++;
				if (consec == 3)
					break;
			}
		}
	}

	for (int f = 0; f < 2; f++) {
		size_t n = (size_t)t[f]->count + 1;
		t[f]->undisc = gp_xmalloc(n * sizeof(ptrdiff_t));
		t[f]->realidx = gp_xmalloc(n * sizeof(ptrdiff_t));
		t[f]->nundisc = 0;
		for (ptrdiff_t i = 0; i < t[f]->count; i++) {
			if (disc[f][i]) {
				t[f]->changed[i] = 1;
				continue;
			}
			t[f]->undisc[t[f]->nundisc] = t[f]->equiv[i];
			t[f]->realidx[t[f]->nundisc++] = i;
		}
		free(disc[f]);
		free(occurs[f]);
	}
}

struct search {
	const ptrdiff_t *xv, *yv;
	ptrdiff_t *fd, *bd; /* furthest x per diagonal x - y, forward and backward */
	ptrdiff_t too_expensive;
	struct text *x, *y;
};

struct partition {
	ptrdiff_t xmid, ymid;
	bool lo_minimal, hi_minimal;
};

/* Finds the middle snake of an optimal path through [xoff, xlim) x [yoff,
 * ylim), searching from both corners at once. The first and last lines of
 * both ranges are known to differ. Past too_expensive steps (unless minimal)
 * it settles for the diagonal that got furthest, so pathological inputs cost
 * O(N^1.5) rather than O(N * D). */
static void diag(struct search *s, ptrdiff_t xoff, ptrdiff_t xlim, ptrdiff_t yoff,
                 ptrdiff_t ylim, bool minimal, struct partition *part)
{
	ptrdiff_t *fd = s->fd, *bd = s->bd;
	const ptrdiff_t *xv = s->xv, *yv = s->yv;
	const ptrdiff_t dmin = xoff - ylim, dmax = xlim - yoff;
	const ptrdiff_t fmid = xoff - yoff, bmid = xlim - ylim;
	ptrdiff_t fmin = fmid, fmax = fmid, bmin = bmid, bmax = bmid;
	const bool odd = (fmid - bmid) & 1;

	fd[fmid] = xoff;
	bd[bmid] = xlim;
	for (ptrdiff_t c = 1;; c++) {
		ptrdiff_t d;

		if (fmin > dmin)
			fd[--fmin - 1] = -1;
		else
			fmin++;
		if (fmax < dmax)
			fd[++fmax + 1] = -1;
		else
			fmax--;
		for (d = fmax; d >= fmin; d -= 2) {
			ptrdiff_t tlo = fd[d - 1], thi = fd[d + 1];
			ptrdiff_t x = tlo < thi ? thi : tlo + 1, y = x - d;
			while (x < xlim && y < ylim && xv[x] == yv[y])
				x++, y++;
			fd[d] = x;
			if (odd && bmin <= d && d <= bmax && bd[d] <= x) {
				*part = (struct partition){ x, y, true, true };
				return;
			}
		}

		if (bmin > dmin)
			bd[--bmin - 1] = PTRDIFF_MAX;
		else
			bmin++;
		if (bmax < dmax)
			bd[++bmax + 1] = PTRDIFF_MAX;
		else
			bmax--;
		for (d = bmax; d >= bmin; d -= 2) {
			ptrdiff_t tlo = bd[d - 1], thi = bd[d + 1];
			ptrdiff_t x = tlo < thi ? tlo : thi - 1, y = x - d;
			while (xoff < x && yoff < y && xv[x - 1] == yv[y - 1])
				x--, y--;
			bd[d] = x;
			if (!odd && fmin <= d && d <= fmax && x <= fd[d]) {
				*part = (struct partition){ x, y, true, true };
				return;
			}
		}

		if (minimal || c < s->too_expensive)
			continue;

		ptrdiff_t fxybest = -1, fxbest = 0, bxybest = PTRDIFF_MAX, bxbest = 0;
		for (d = fmax; d >= fmin; d -= 2) {
			ptrdiff_t x = fd[d] < xlim ? fd[d] : xlim, y = x - d;
			if (ylim < y)
				x = ylim + d, y = ylim;
			if (fxybest < x + y)
				fxybest = x + y, fxbest = x;
		}
		for (d = bmax; d >= bmin; d -= 2) {
			ptrdiff_t x = bd[d] > xoff ? bd[d] : xoff, y = x - d;
			if (y < yoff)
				x = yoff + d, y = yoff;
			if (x + y < bxybest)
				bxybest = x + y, bxbest = x;
		}
		bool fwd = (xlim + ylim) - bxybest < fxybest - (xoff + yoff);
		*part = fwd ? (struct partition){ fxbest, fxybest - fxbest, true, false }
		            : (struct partition){ bxbest, bxybest - bxbest, false, true };
		return;
	}
}

/* Marks the changed lines of [xoff, xlim) x [yoff, ylim). Recursion depth
 * is about log2 of the edit cost, since each split halves it. */
static void compareseq(struct search *s, ptrdiff_t xoff, ptrdiff_t xlim, ptrdiff_t yoff,
                       ptrdiff_t ylim, bool minimal)
{
	const ptrdiff_t *xv = s->xv, *yv = s->yv;

	while (xoff < xlim && yoff < ylim && xv[xoff] == yv[yoff])
		xoff++, yoff++;
	while (xoff < xlim && yoff < ylim && xv[xlim - 1] == yv[ylim - 1])
		xlim--, ylim--;

	if (xoff == xlim) {
		for (; yoff < ylim; yoff++)
			s->y->changed[s->y->realidx[yoff]] = 1;
	} else if (yoff == ylim) {
		for (; xoff < xlim; xoff++)
			s->x->changed[s->x->realidx[xoff]] = 1;
	} else {
		struct partition part;
		diag(s, xoff, xlim, yoff, ylim, minimal, &part);
		compareseq(s, xoff, part.xmid, yoff, part.ymid, part.lo_minimal);
		compareseq(s, part.xmid, xlim, part.ymid, ylim, part.hi_minimal);
	}
}

static void search(struct text *x, struct text *y)
{
	ptrdiff_t diags = x->nundisc + y->nundisc + 3, te = 1;
	for (ptrdiff_t k = diags; k; k >>= 2)
		te <<= 1;
	ptrdiff_t *mem = gp_xmalloc(2 * (size_t)diags * sizeof(ptrdiff_t));
	struct search s = {
		.xv = x->undisc,
		.yv = y->undisc,
		.fd = mem + y->nundisc + 1,
		.bd = mem + diags + y->nundisc + 1,
		.too_expensive = te > 4096 ? te : 4096,
		.x = x,
		.y = y,
	};
	compareseq(&s, 0, x->nundisc, 0, y->nundisc, false);
	free(mem);
}

/* Slides each run of changes over identical lines: first back to merge with
 * earlier runs, then forward as far as it goes, then back again to line up
 * with a run in the other text if it passed one. Without this, insertions
 * into repeated lines would land where the search happened to put them. */
static void shift_boundaries(struct text *t[2])
{
	for (int f = 0; f < 2; f++) {
		char *changed = t[f]->changed;
		const char *other = t[1 - f]->changed;
		const ptrdiff_t *eq = t[f]->equiv;
		ptrdiff_t i = 0, j = 0, end = t[f]->count;

		for (;;) {
			ptrdiff_t runlength, start, corresponding;

			while (i < end && !changed[i]) {
				while (other[j++])
					;
				i++;
			}
			if (i == end)
				break;
			start = i;
			while (changed[++i])
				;
			while (other[j])
				j++;

			do {
				runlength = i - start;
				while (start && eq[start - 1] == eq[i - 1]) {
					changed[--start] = 1;
					changed[--i] = 0;
					while (changed[start - 1])
						start--;
					while (other[--j])
						;
				}
				corresponding = other[j - 1] ? i : end;
				while (i != end && eq[start] == eq[i]) {
					changed[start++] = 0;
					changed[i++] = 1;
					while (changed[i])
						i++;
					while (other[++j])
						corresponding = i;
				}
			} while (runlength != i - start);

			while (corresponding < i) {
				changed[--start] = 1;
				changed[--i] = 0;
				while (other[--j])
					;
			}
		}
	}
}

struct change {
	ptrdiff_t line0, line1; /* whole-text line numbers, from 0 */
	ptrdiff_t deleted, inserted;
};

static struct change *build_script(struct text *a, struct text *b, size_t *n)
{
	size_t cap = 16;
	struct change *ch = gp_xmalloc(cap * sizeof(*ch));
	const char *c0 = a->changed, *c1 = b->changed;

	*n = 0;
	/* Unchanged lines pair up one to one, so both reach their end together. */
	for (ptrdiff_t i0 = 0, i1 = 0; i0 < a->count || i1 < b->count; i0++, i1++) {
		if (!c0[i0] && !c1[i1])
			continue;
		ptrdiff_t l0 = i0, l1 = i1;
		while (c0[i0])
			i0++;
		while (c1[i1])
			i1++;
		if (*n == cap)
			ch = gp_xrealloc(ch, (cap *= 2) * sizeof(*ch));
		ch[(*n)++] = (struct change){
			.line0 = (ptrdiff_t)a->lo + l0,
			.line1 = (ptrdiff_t)b->lo + l1,
			.deleted = i0 - l0,
			.inserted = i1 - l1,
		};
	}
	return ch;
}

static void put_line(struct gp_buf *out, char mark, const struct text *t, ptrdiff_t i)
{
	size_t b = t->start[i], len = line_len(t, (size_t)i);

	gp_buf_append(out, &mark, 1);
	gp_buf_append(out, t->s + b, len);
	if (b + len == t->len && t->missing_nl)
		gp_buf_puts(out, "\n\\ No newline at end of file\n");
}

/* GNU prints an empty range as the line before it with ",0" (patch relies on
 * "-0,0" for new files), and a one-line range without ",1". */
static void put_range(struct gp_buf *out, ptrdiff_t first, ptrdiff_t last)
{
	if (last < first)
		gp_buf_printf(out, "%td,0", last + 1);
	else if (last == first)
		gp_buf_printf(out, "%td", first + 1);
	else
		gp_buf_printf(out, "%td,%td", first + 1, last - first + 1);
}

static void put_hunks(struct gp_buf *out, const struct text *a, const struct text *b,
                      const struct change *ch, size_t n)
{
	for (size_t h = 0, e; h < n; h = e + 1) {
		/* Changes closer than two contexts share a hunk, as their contexts
		 * would touch. */
		for (e = h; e + 1 < n; e++)
			if (ch[e + 1].line0 - (ch[e].line0 + ch[e].deleted) >=
			    2 * CONTEXT + 1)
				break;

		ptrdiff_t first0 = ch[h].line0 - CONTEXT, first1 = ch[h].line1 - CONTEXT;
		ptrdiff_t last0 = ch[e].line0 + ch[e].deleted - 1 + CONTEXT;
		ptrdiff_t last1 = ch[e].line1 + ch[e].inserted - 1 + CONTEXT;
		if (first0 < 0)
			first0 = 0;
		if (first1 < 0)
			first1 = 0;
		if (last0 > (ptrdiff_t)a->nlines - 1)
			last0 = (ptrdiff_t)a->nlines - 1;
		if (last1 > (ptrdiff_t)b->nlines - 1)
			last1 = (ptrdiff_t)b->nlines - 1;

		gp_buf_puts(out, "@@ -");
		put_range(out, first0, last0);
		gp_buf_puts(out, " +");
		put_range(out, first1, last1);
		gp_buf_puts(out, " @@\n");

		ptrdiff_t i = first0, j = first1;
		size_t k = h;
		while (i <= last0 || j <= last1) {
			if (k > e || i < ch[k].line0) {
				put_line(out, ' ', a, i++);
				j++;
				continue;
			}
			for (ptrdiff_t m = 0; m < ch[k].deleted; m++)
				put_line(out, '-', a, i++);
			for (ptrdiff_t m = 0; m < ch[k].inserted; m++)
				put_line(out, '+', b, j++);
			k++;
		}
	}
}

char *gp_unified_diff(const char *old_label, const char *old_text, size_t old_len,
                      const char *new_label, const char *new_text, size_t new_len)
{
	struct text a, b, *t[2] = { &a, &b };
	struct gp_buf out = { 0 };

	if (!old_text)
		old_len = 0;
	if (!new_text)
		new_len = 0;
	if (old_len == new_len &&
	    (old_len == 0 || memcmp(old_text, new_text, old_len) == 0))
		return gp_xstrdup("");

	text_init(&a, old_text, old_len);
	text_init(&b, new_text, new_len);
	trim_ends(&a, &b);
	for (int f = 0; f < 2; f++) {
		t[f]->changed_mem = gp_xcalloc((size_t)t[f]->count + 2, 1);
		t[f]->changed = t[f]->changed_mem + 1;
	}
	discard_confusing(t, assign_classes(t));
	search(&a, &b);
	shift_boundaries(t);

	size_t n;
	struct change *ch = build_script(&a, &b, &n);
	if (n) {
		gp_buf_printf(&out, "--- %s\n+++ %s\n", old_label ? old_label : "",
		              new_label ? new_label : "");
		put_hunks(&out, &a, &b, ch, n);
	}
	free(ch);
	text_free(&a);
	text_free(&b);
	return gp_buf_steal(&out);
}
