/* Small helpers shared by every module: cleanup attributes, growable
 * buffers and string lists; error.h (the error object that carries
 * user-facing messages up to the CLI) comes with it. Allocation failures
 * abort: a half-handled OOM on a provisioning run is worse than a clean
 * stop. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "gpuprov/error.h"

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _unused_ __attribute__((unused))

static inline void gp_freep(void *p)
{
	free(*(void **)p);
}
static inline void gp_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
static inline void gp_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
#define _cleanup_free_ _cleanup_(gp_freep)
#define _cleanup_close_ _cleanup_(gp_closep)
#define _cleanup_fclose_ _cleanup_(gp_fclosep)

/* Hand ownership on: returns the pointer and clears the variable so its
 * cleanup handler does nothing. */
#define TAKE_PTR(p)                                                                      \
	({                                                                               \
		__typeof__(p) _tp = (p);                                                 \
		(p) = NULL;                                                              \
		_tp;                                                                     \
	})
#define TAKE_FD(fd)                                                                      \
	({                                                                               \
		int _tfd = (fd);                                                         \
		(fd) = -1;                                                               \
		_tfd;                                                                    \
	})

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

void *gp_xmalloc(size_t n);
void *gp_xcalloc(size_t n, size_t size);
void *gp_xrealloc(void *p, size_t n);
char *gp_xstrdup(const char *s);
char *gp_xstrndup(const char *s, size_t n);
/* A NUL-terminated copy of n bytes that may themselves hold NULs (a binary
 * keyring): strndup would stop at the first. */
char *gp_xmemdup0(const void *p, size_t n);
char *gp_xasprintf(const char *fmt, ...) _printf_(1, 2);
char *gp_xvasprintf(const char *fmt, va_list ap) _printf_(1, 0);

/* The integer value of "#define name VALUE" in C header text (the first
 * such line); false when there is none. */
bool gp_header_define(const char *text, const char *name, long *value);

bool gp_str_starts_with(const char *s, const char *prefix);
bool gp_str_ends_with(const char *s, const char *suffix);
bool gp_streq(const char *a, const char *b); /* NULL-safe */
/* A copy of s with every from replaced by to. */
char *gp_str_replace_char(const char *s, char from, char to);

/* Milliseconds on the monotonic clock: for timeouts, backoff and rates. */
int64_t gp_monotonic_ms(void);

/* Write all of data (retrying short writes and EINTR): 0 or -errno. The
 * p variant writes at off and leaves the fd offset alone. */
int gp_write_all(int fd, const void *data, size_t len);
int gp_pwrite_all(int fd, const void *data, size_t len, off_t off);

/* Starts the kernel's writeback of a file being written, a stretch at a time,
 * so that the fsync or syncfs that must come before it is made visible finds
 * most of it already on disk instead of waiting for all of it at the end.
 * It only starts writes (sync_file_range's SYNC_FILE_RANGE_WRITE): durability
 * still comes from that fsync. Call after each write with the highest offset
 * written so far; final = true starts whatever is left. Errors are ignored:
 * at worst the fsync does all the work, as before. */
struct gp_writeback {
	off_t started; /* writeback was started for [0, started) */
};
void gp_writeback_kick(struct gp_writeback *wb, int fd, off_t end, bool final);

/* Growable byte buffer, always NUL-terminated. */
struct gp_buf {
	char *data;
	size_t len;
	size_t cap;
};
/* Room for extra more bytes and the NUL, without changing len. */
void gp_buf_reserve(struct gp_buf *b, size_t extra);
void gp_buf_append(struct gp_buf *b, const void *data, size_t len);
void gp_buf_puts(struct gp_buf *b, const char *s);
void gp_buf_printf(struct gp_buf *b, const char *fmt, ...) _printf_(2, 3);
char *gp_buf_steal(struct gp_buf *b); /* returns data ("" if empty), resets b */
void gp_buf_free(struct gp_buf *b);
/* The first line of the comment that opens a file gpuprov writes: "# Written by
 * gpuprov", fmt's text (one line) and a newline. Further comment lines, "# "
 * each, are the caller's. */
void gp_buf_written_by(struct gp_buf *b, const char *fmt, ...) _printf_(2, 3);

/* A command's output quoted in one line for an error message: from the
 * first line that starts with from (NULL or absent: the whole text), its
 * last max_lines non-empty lines, blanks trimmed, control characters
 * dropped, joined with " / ", cut to at most max_bytes (at a UTF-8
 * boundary, ending "..."). Never NULL. */
char *gp_output_excerpt(const char *text, const char *from, size_t max_lines,
                        size_t max_bytes);

/* NULL-terminated string vectors. */
size_t gp_strv_len(char *const *v);
char **gp_strv_copy(char *const *v);
void gp_strv_push(char ***v, const char *s); /* copies s */
/* Appends a copy of s to *v, which holds *n items, in amortized constant
 * time (gp_strv_push counts the items and grows by one: quadratic in a
 * loop over hostile input). The room doubles, so *v must start empty (NULL
 * or gp_xcalloc(1, sizeof(char *)), *n = 0) and grow only through here. */
void gp_strv_append(char ***v, size_t *n, const char *s);
bool gp_strv_contains(char *const *v, const char *s);
void gp_strv_free(char **v);
/* Sorts v in place, strcmp order (byte order). */
void gp_strv_sort(char **v);
char *gp_strv_join(char *const *v, const char *sep);
/* argv as a shell user would type it: arguments quoted only where needed. */
char *gp_argv_display(char *const *argv);
/* Split on sep, dropping empty items ("a,,b" -> a, b). */
char **gp_strv_split(const char *s, char sep);
static inline void gp_strv_freep(char ***v)
{
	gp_strv_free(*v);
}
#define _cleanup_strv_ _cleanup_(gp_strv_freep)
