/* Allocation, strings, buffers and string vectors. */
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/util.h"

static void oom(void)
{
	fputs("gpuprov: out of memory\n", stderr);
	abort();
}

void *gp_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *gp_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom();
	return p;
}

void *gp_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

char *gp_xstrdup(const char *s)
{
	return s ? gp_xstrndup(s, strlen(s)) : NULL;
}

char *gp_xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (!p)
		oom();
	return p;
}

bool gp_header_define(const char *text, const char *name, long *value)
{
	for (const char *line = text; line && *line;) {
		char found[64];
		long v;
		if (sscanf(line, " #define %63s %ld", found, &v) == 2 &&
		    strcmp(found, name) == 0) {
			*value = v;
			return true;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return false;
}

char *gp_xmemdup0(const void *p, size_t n)
{
	char *d = gp_xmalloc(n + 1);
	memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

char *gp_xvasprintf(const char *fmt, va_list ap)
{
	char *s;
	if (vasprintf(&s, fmt, ap) < 0)
		oom();
	return s;
}

char *gp_xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = gp_xvasprintf(fmt, ap);
	va_end(ap);
	return s;
}

bool gp_str_starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool gp_str_ends_with(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);
	return ls >= lx && memcmp(s + ls - lx, suffix, lx) == 0;
}

bool gp_streq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

void gp_buf_reserve(struct gp_buf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < b->len + extra + 1)
		cap *= 2;
	b->data = gp_xrealloc(b->data, cap);
	b->cap = cap;
}

void gp_buf_append(struct gp_buf *b, const void *data, size_t len)
{
	gp_buf_reserve(b, len);
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

void gp_buf_puts(struct gp_buf *b, const char *s)
{
	gp_buf_append(b, s, strlen(s));
}

void gp_buf_printf(struct gp_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = gp_xvasprintf(fmt, ap);
	va_end(ap);
	gp_buf_puts(b, s);
	free(s);
}

void gp_buf_written_by(struct gp_buf *b, const char *fmt, ...)
{
	gp_buf_puts(b, "# Written by gpuprov");
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *s = gp_xvasprintf(fmt, ap);
	va_end(ap);
	gp_buf_puts(b, s);
	gp_buf_puts(b, "\n");
}

char *gp_buf_steal(struct gp_buf *b)
{
	char *s = b->data ? b->data : gp_xstrdup("");
	*b = (struct gp_buf){ 0 };
	return s;
}

void gp_buf_free(struct gp_buf *b)
{
	free(b->data);
	*b = (struct gp_buf){ 0 };
}

size_t gp_strv_len(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

char **gp_strv_copy(char *const *v)
{
	size_t n = gp_strv_len(v);
	char **c = gp_xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		c[i] = gp_xstrdup(v[i]);
	return c;
}

void gp_strv_push(char ***v, const char *s)
{
	size_t n = gp_strv_len(*v);
	*v = gp_xrealloc(*v, (n + 2) * sizeof(char *));
	(*v)[n] = gp_xstrdup(s);
	(*v)[n + 1] = NULL;
}

/* The room for n items and the NULL: the next power of two. */
static size_t strv_room(size_t n)
{
	size_t room = 1;
	while (room < n + 1)
		room *= 2;
	return room;
}

void gp_strv_append(char ***v, size_t *n, const char *s)
{
	if (!*v || *n + 2 > strv_room(*n))
		*v = gp_xrealloc(*v, strv_room(*n + 1) * sizeof(char *));
	(*v)[*n] = gp_xstrdup(s);
	(*v)[++*n] = NULL;
}

bool gp_strv_contains(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

void gp_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void gp_strv_sort(char **v)
{
	if (v)
		qsort(v, gp_strv_len(v), sizeof(char *), cmp_strp);
}

char *gp_strv_join(char *const *v, const char *sep)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; v && v[i]; i++) {
		if (i)
			gp_buf_puts(&b, sep);
		gp_buf_puts(&b, v[i]);
	}
	return gp_buf_steal(&b);
}

char **gp_strv_split(const char *s, char sep)
{
	char **v = gp_xcalloc(1, sizeof(char *));
	size_t items = 0;
	while (s && *s) {
		const char *e = strchr(s, sep);
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (n) {
			char *item = gp_xstrndup(s, n);
			gp_strv_append(&v, &items, item);
			free(item);
		}
		s = e ? e + 1 : s + n;
	}
	return v;
}

/* Quotes an argument for display the way a shell user would type it. */
static void append_quoted(struct gp_buf *b, const char *arg)
{
	static const char plain_chars[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789-_./=:,+@%";
	if (*arg && strspn(arg, plain_chars) == strlen(arg)) {
		gp_buf_puts(b, arg);
		return;
	}
	gp_buf_puts(b, "'");
	for (const char *c = arg; *c; c++) {
		if (*c == '\'')
			gp_buf_puts(b, "'\\''");
		else
			gp_buf_append(b, c, 1);
	}
	gp_buf_puts(b, "'");
}

char *gp_argv_display(char *const *argv)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; argv && argv[i]; i++) {
		if (i)
			gp_buf_puts(&b, " ");
		append_quoted(&b, argv[i]);
	}
	return gp_buf_steal(&b);
}

char *gp_str_replace_char(const char *s, char from, char to)
{
	char *copy = gp_xstrdup(s);
	for (char *c = copy; *c; c++)
		if (*c == from)
			*c = to;
	return copy;
}

int gp_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Big enough that the kernel writes in large extents, small enough that the
 * last stretch left for the fsync is short. */
#define WRITEBACK_STRETCH ((off_t)8 << 20)

void gp_writeback_kick(struct gp_writeback *wb, int fd, off_t end, bool final)
{
	if (end <= wb->started || (!final && end - wb->started < WRITEBACK_STRETCH))
		return;
	(void)sync_file_range(fd, wb->started, end - wb->started, SYNC_FILE_RANGE_WRITE);
	wb->started = end;
}

int gp_pwrite_all(int fd, const void *data, size_t len, off_t off)
{
	const char *p = data;
	while (len) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

int64_t gp_monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Is the line of len bytes at l only blanks? */
static bool blank_line(const char *l, size_t len)
{
	return strspn(l, " \t\r") >= len;
}

char *gp_output_excerpt(const char *text, const char *from, size_t max_lines,
                        size_t max_bytes)
{
	const char *start = text ? text : "";
	size_t from_len = from ? strlen(from) : 0, lines = 0;
	for (const char *l = start; *l; l += strcspn(l, "\n"), l += *l == '\n') {
		if (from_len && strncmp(l, from, from_len) == 0) {
			start = l;
			from_len = 0;
			lines = 0;
		}
		lines += !blank_line(l, strcspn(l, "\n"));
	}
	size_t drop = lines > max_lines ? lines - max_lines : 0;
	struct gp_buf b = { 0 };
	for (const char *l = start; *l; l += strcspn(l, "\n"), l += *l == '\n') {
		size_t len = strcspn(l, "\n");
		if (blank_line(l, len) || (drop && drop--))
			continue;
		if (b.len)
			gp_buf_puts(&b, " / ");
		for (size_t i = strspn(l, " \t\r"); i < len; i++) {
			unsigned char ch = (unsigned char)l[i];
			if (ch == '\t')
				gp_buf_append(&b, " ", 1);
			else if (ch >= 0x20 && ch != 0x7f)
				gp_buf_append(&b, &l[i], 1);
		}
	}
	if (b.len > max_bytes && max_bytes >= 3) {
		size_t cut = max_bytes - 3;
		while (cut > 0 && ((unsigned char)b.data[cut] & 0xc0) == 0x80)
			cut--;
		b.len = cut;
		gp_buf_puts(&b, "...");
	}
	return gp_buf_steal(&b);
}
