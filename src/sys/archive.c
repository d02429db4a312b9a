/* Tarball extraction into a root: hash while reading, decode (liblzma for
 * xz, threaded where allowed; libarchive's filters for gzip and zstd), parse
 * with libarchive's tar reader only, write every entry ourselves
 * relative to a staging directory fd, and rename the staging directory into
 * place once the hash matched. archive_write_disk is not used: it works on
 * paths relative to the process's cwd (fchdir is process-wide, so it would
 * race with any other thread), its SECURE_* flags reject destinations behind
 * a symlink, and it would apply owners, xattrs and ACLs we never want. With
 * openat/openat2 on the staging fd we decide each of those ourselves. */
#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lzma.h>

#include "gpuprov/archive.h"
#include "gpuprov/sha256.h"
#include "gpuprov/util.h"
#include "gpuprov/xzpar.h"

#define IN_BUF_SIZE (128 * 1024)
#define OUT_BUF_SIZE (256 * 1024)
#define DEFAULT_XZ_MEM (48ull << 20)
/* A hard cap for any xz file (libarchive sets none): xz -9 needs 65 MiB,
 * only crafted or exotic files ask for more. */
#define XZ_MEM_STOP (256ull << 20)
#define MAX_XZ_THREADS 16

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

/* ---- liblzma ----
 * xz goes through liblzma directly rather than libarchive's xz filter, for
 * two reasons: the threaded decoder, and trailing bytes. libarchive decodes
 * with LZMA_CONCATENATED and fails on bytes after the xz stream; we decode
 * one stream and leave what follows to the hash, as for gzip and zstd. */
static const char *lz_strerror(lzma_ret r)
{
	switch (r) {
	case LZMA_MEM_ERROR:
		return "out of memory";
	case LZMA_MEMLIMIT_ERROR:
		return "needs more than 256 MiB of memory to decode (dictionary too "
		       "large)";
	case LZMA_FORMAT_ERROR:
		return "not an xz stream";
	case LZMA_OPTIONS_ERROR:
		return "unsupported xz options";
	case LZMA_DATA_ERROR:
		return "corrupt xz data";
	case LZMA_BUF_ERROR:
		return "truncated xz data";
	default:
		return "xz decoder error";
	}
}

/* Online CPUs we may run on, for the decoder's thread count. */
static unsigned cpu_count(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0) {
		int n = CPU_COUNT(&set);
		if (n > 0)
			return (unsigned)n;
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

/* Threads for the xz decoder: 1 is liblzma's single-threaded one; more
 * are liblzma's threaded decoder, or with *blocks our own block-parallel
 * one (src/sys/xzpar.c), which keeps liblzma's threads off unverified
 * input. */
static unsigned pick_xz_threads(const struct gp_archive_opts *o, bool preverified,
                                bool *blocks)
{
	*blocks = false;
	if (o->xz_threads == 1)
		return 1;
	if (o->xz_threads > 1) {
		*blocks = o->flags & GP_ARCHIVE_XZ_BLOCKS;
		return o->xz_threads < MAX_XZ_THREADS ? o->xz_threads : MAX_XZ_THREADS;
	}
	unsigned n = cpu_count();
	n = n < MAX_XZ_THREADS ? n : MAX_XZ_THREADS;
	/* Automatic: 5.3.3alpha..5.8.0 have a use-after-free on crafted input
	 * in the threaded decoder (CVE-2025-31115). Distributions backport the
	 * fix without changing the version, so it cannot be detected: use it
	 * only when the input was verified before decoding, or upstream >=
	 * 5.8.1. */
	if (!preverified && lzma_version_number() < 50080012u)
		*blocks = n > 1;
	return n;
}

/* ---- the input: read, count and hash every byte once ---- */
struct src {
	gp_archive_read_fn read;
	void *ud;
	struct gp_sha256 *md;
	unsigned char *buf;
	size_t len, pos; /* valid bytes in buf; bytes handed on */
	uint64_t total;
	int err; /* the read callback's -errno */
	bool eof;
};

/* Reads the next chunk of input into dst, hashing and counting it. */
static ssize_t src_read(struct src *s, unsigned char *dst, size_t cap)
{
	if (s->eof)
		return 0;
	if (s->err)
		return s->err;
	ssize_t n;
	do
		n = s->read(s->ud, dst, cap);
	while (n == -EINTR);
	if (n < 0) {
		s->err = (int)n;
		return n;
	}
	if ((size_t)n > cap) {
		s->err = -EOVERFLOW; /* a broken callback; never trust its count */
		return s->err;
	}
	if (n == 0) {
		s->eof = true;
		return 0;
	}
	gp_sha256_update(s->md, dst, (size_t)n);
	s->total += (uint64_t)n;
	return n;
}

/* Reads the next chunk into buf + at (the bytes before it are kept). */
static ssize_t src_fill(struct src *s, size_t at)
{
	ssize_t n = src_read(s, s->buf + at, IN_BUF_SIZE - at);
	if (n > 0)
		s->len = at + (size_t)n;
	return n;
}

/* ---- the xz decoder thread ----
 * liblzma decodes in a thread of its own while libarchive parses and
 * writes in the caller's: a pipeline over two small rings (input chunks
 * read and hashed by the caller, who alone calls the read callback; output
 * chunks for libarchive). Memory: the rings (2.5 MiB) and the decoder. */
#define XZ_IN_SLOTS 4
#define XZ_OUT_SLOTS 8

struct xzpipe {
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	lzma_stream *strm;
	unsigned char *in[XZ_IN_SLOTS];
	size_t in_len[XZ_IN_SLOTS];
	unsigned in_head, in_count; /* chunks waiting, the head one in use */
	bool in_eof;
	unsigned char *out[XZ_OUT_SLOTS];
	size_t out_len[XZ_OUT_SLOTS];
	unsigned out_head, out_count; /* decoded chunks, oldest first */
	bool main_holds; /* libarchive has out[out_head] */
	bool done, stop;
	lzma_ret err; /* when done: LZMA_STREAM_END or the failure */
};

/* Under the lock: the decoder's loop. */
static void *xz_thread(void *data)
{
	struct xzpipe *p = data;
	lzma_stream *z = p->strm;
	bool have_out = false, held_in = false;
	unsigned cur = 0;
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		if (!have_out) {
			if (p->out_count == XZ_OUT_SLOTS) {
				pthread_cond_wait(&p->cond, &p->lock);
				continue;
			}
			cur = (p->out_head + p->out_count) % XZ_OUT_SLOTS;
			z->next_out = p->out[cur];
			z->avail_out = OUT_BUF_SIZE;
			have_out = true;
		}
		if (z->avail_in == 0) {
			if (held_in) {
				p->in_head = (p->in_head + 1) % XZ_IN_SLOTS;
				p->in_count--;
				held_in = false;
				pthread_cond_broadcast(&p->cond);
			}
			if (p->in_count) {
				z->next_in = p->in[p->in_head];
				z->avail_in = p->in_len[p->in_head];
				held_in = true;
			} else if (!p->in_eof) {
				pthread_cond_wait(&p->cond, &p->lock);
				continue;
			}
		}
		lzma_action act = z->avail_in == 0 && p->in_eof ? LZMA_FINISH : LZMA_RUN;
		pthread_mutex_unlock(&p->lock);
		lzma_ret r = lzma_code(z, act);
		pthread_mutex_lock(&p->lock);
		size_t produced = OUT_BUF_SIZE - z->avail_out;
		if (r != LZMA_OK || z->avail_out == 0) {
			if (produced) {
				p->out_len[cur] = produced;
				p->out_count++;
			}
			have_out = false;
		}
		if (r != LZMA_OK) {
			p->done = true;
			p->err = r;
		}
		pthread_cond_broadcast(&p->cond);
		if (p->done)
			break;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static int xzpipe_start(struct xzpipe *p, lzma_stream *strm)
{
	*p = (struct xzpipe){ .strm = strm };
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	for (int i = 0; i < XZ_IN_SLOTS; i++)
		p->in[i] = gp_xmalloc(IN_BUF_SIZE);
	for (int i = 0; i < XZ_OUT_SLOTS; i++)
		p->out[i] = gp_xmalloc(OUT_BUF_SIZE);
	/* Signals stay with the caller's thread (its waits must see them). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&p->thread, NULL, xz_thread, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	p->running = rc == 0;
	return -rc;
}

static void xzpipe_end(struct xzpipe *p)
{
	if (p->running) {
		pthread_mutex_lock(&p->lock);
		p->stop = true;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thread, NULL);
		p->running = false;
	}
	for (int i = 0; i < XZ_IN_SLOTS; i++)
		free(p->in[i]);
	for (int i = 0; i < XZ_OUT_SLOTS; i++)
		free(p->out[i]);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	*p = (struct xzpipe){ 0 };
}

/* ---- extraction state ---- */
struct ex {
	const struct gp_archive_opts *o;
	struct gp_archive_result *res;
	struct src src;
	struct archive *a;
	int sfd; /* staging directory */
	struct stat sst; /* its identity, checked again before the rename */
	bool have_top;
	uint64_t out_bytes;
	lzma_stream xz;
	bool xz_active;
	lzma_ret xz_err;
	struct xzpipe pipe;
	struct gp_xzpar *par; /* the block-parallel decoder instead of the pipe */
	int par_err;
};

_printf_(3, 4) static int fail(struct ex *x, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->res->msg, sizeof x->res->msg, fmt, ap);
	va_end(ap);
	return rc;
}

static ssize_t la_raw_read(struct archive *a, void *ud, const void **out)
{
	struct ex *x = ud;
	struct src *s = &x->src;
	if (s->pos < s->len) { /* the bytes peeked at for format detection */
		*out = s->buf + s->pos;
		size_t n = s->len - s->pos;
		s->pos = s->len;
		return (ssize_t)n;
	}
	ssize_t n = src_fill(s, 0);
	if (n < 0) {
		archive_set_error(a, (int)-n, "read error");
		return -1;
	}
	s->pos = s->len = (size_t)n;
	*out = s->buf;
	return n;
}

/* Feeds libarchive the output of liblzma (the decoder thread). One xz
 * stream is decoded (no LZMA_CONCATENATED): what follows it is only
 * hashed. Reading, and so hashing, happens here, in the caller's thread. */
static ssize_t la_xz_read(struct archive *a, void *ud, const void **out)
{
	struct ex *x = ud;
	struct src *s = &x->src;
	struct xzpipe *p = &x->pipe;
	pthread_mutex_lock(&p->lock);
	if (p->main_holds) {
		p->out_head = (p->out_head + 1) % XZ_OUT_SLOTS;
		p->out_count--;
		p->main_holds = false;
		pthread_cond_broadcast(&p->cond);
	}
	for (;;) {
		if (p->out_count) {
			p->main_holds = true;
			*out = p->out[p->out_head];
			ssize_t n = (ssize_t)p->out_len[p->out_head];
			pthread_mutex_unlock(&p->lock);
			return n;
		}
		if (p->done) {
			lzma_ret r = p->err;
			pthread_mutex_unlock(&p->lock);
			if (r == LZMA_STREAM_END)
				return 0;
			x->xz_err = r;
			archive_set_error(a, EIO, "%s", lz_strerror(r));
			return -1;
		}
		if (p->in_count < XZ_IN_SLOTS && !p->in_eof) {
			unsigned slot = (p->in_head + p->in_count) % XZ_IN_SLOTS;
			pthread_mutex_unlock(&p->lock);
			ssize_t n;
			if (s->pos < s->len) { /* the bytes peeked at for detection */
				n = (ssize_t)(s->len - s->pos);
				memcpy(p->in[slot], s->buf + s->pos, (size_t)n);
				s->pos = s->len;
			} else {
				n = src_read(s, p->in[slot], IN_BUF_SIZE);
			}
			if (n < 0) {
				archive_set_error(a, (int)-n, "read error");
				return -1;
			}
			pthread_mutex_lock(&p->lock);
			if (n > 0) {
				p->in_len[slot] = (size_t)n;
				p->in_count++;
			} else {
				p->in_eof = true;
			}
			pthread_cond_broadcast(&p->cond);
			continue;
		}
		pthread_cond_wait(&p->cond, &p->lock);
	}
}

/* Feeds libarchive the blocks the parallel decoder hands back in order,
 * reading (and hashing) input in the caller's thread whenever it takes
 * more: while the workers decode, the download goes on. */
static ssize_t la_xzpar_read(struct archive *a, void *ud, const void **out)
{
	struct ex *x = ud;
	struct src *s = &x->src;
	for (bool wait = false;; wait = false) {
		const uint8_t *o;
		ssize_t n = gp_xzpar_take(x->par, &o, wait);
		if (n >= 0) {
			*out = o;
			return n;
		}
		if (n != -EAGAIN)
			goto fail;
		if (!gp_xzpar_hungry(x->par)) {
			n = gp_xzpar_take(x->par, &o, true);
			if (n >= 0) {
				*out = o;
				return n;
			}
			goto fail;
		}
		if (s->pos < s->len) {
			n = gp_xzpar_feed(x->par, s->buf + s->pos, s->len - s->pos);
			if (n < 0)
				goto fail;
			/* After the stream: only hashed, as in la_xz_read. */
			s->pos = gp_xzpar_ended(x->par) ? s->len : s->pos + (size_t)n;
			continue;
		}
		if (s->eof) {
			x->xz_err = LZMA_BUF_ERROR;
			archive_set_error(a, EIO, "%s", lz_strerror(LZMA_BUF_ERROR));
			return -1;
		}
		s->pos = s->len = 0;
		n = src_fill(s, 0);
		if (n < 0) {
			archive_set_error(a, (int)-n, "read error");
			return -1;
		}
		continue;
	fail:
		x->par_err = (int)n;
		archive_set_error(a, EIO, "%s", gp_xzpar_msg(x->par));
		return -1;
	}
}

/* ---- paths ---- */

/* "./a//b/./c/" -> "a/b/c"; "" for the archive's root. NULL with *why set
 * for an absolute path or a ".." component. */
char *gp_archive_norm_path(const char *p, const char **why)
{
	if (p[0] == '/') {
		*why = "is absolute";
		return NULL;
	}
	struct gp_buf b = { 0 };
	const char *c = p;
	while (*c) {
		const char *e = strchrnul(c, '/');
		size_t n = (size_t)(e - c);
		if (n == 2 && c[0] == '.' && c[1] == '.') {
			gp_buf_free(&b);
			*why = "has a '..' component";
			return NULL;
		}
		if (n && !(n == 1 && c[0] == '.')) {
			if (b.len)
				gp_buf_append(&b, "/", 1);
			gp_buf_append(&b, c, n);
		}
		c = *e ? e + 1 : e;
	}
	return gp_buf_steal(&b);
}

/* Applies GP_ARCHIVE_STRIP_TOP to a normalised path: *out points into p.
 * Returns NULL on success, else the reason. */
static const char *strip_top(struct ex *x, const char *p, bool is_dir, bool set_top,
                             const char **out)
{
	if (!(x->o->flags & GP_ARCHIVE_STRIP_TOP)) {
		*out = p;
		return NULL;
	}
	if (!*p) { /* "./" */
		*out = p;
		return NULL;
	}
	const char *slash = strchr(p, '/');
	size_t n = slash ? (size_t)(slash - p) : strlen(p);
	if (!x->have_top) {
		if (!set_top)
			return "is outside the top folder";
		if (!slash && !is_dir)
			return "is not inside a top folder";
		if (n >= sizeof x->res->top)
			return "has a top folder name that is too long";
		memcpy(x->res->top, p, n);
		x->res->top[n] = '\0';
		x->have_top = true;
	}
	if (strlen(x->res->top) != n || memcmp(x->res->top, p, n) != 0)
		return "is outside the top folder";
	*out = slash ? slash + 1 : p + n;
	if (!**out && !is_dir)
		return "is not a directory but has the name of the top folder";
	return NULL;
}

/* A symlink at rel (inside dest) pointing to target stays inside dest:
 * relative, "../" only at the start and no deeper than the link sits. */
const char *gp_archive_symlink_check(const char *rel, const char *target)
{
	if (!*target)
		return "has an empty symlink target";
	if (target[0] == '/')
		return "is a symlink with an absolute target";
	int depth = 0;
	for (const char *c = rel; *c; c++)
		depth += *c == '/';
	bool named = false;
	const char *c = target;
	while (*c) {
		const char *e = strchrnul(c, '/');
		size_t n = (size_t)(e - c);
		if (n == 2 && c[0] == '.' && c[1] == '.') {
			if (named)
				return "is a symlink whose target has '..' after a name";
			if (--depth < 0)
				return "is a symlink whose target leaves the destination";
		} else if (n && !(n == 1 && c[0] == '.')) {
			named = true;
		}
		c = *e ? e + 1 : e;
	}
	return NULL;
}

/* ---- writing relative to the staging fd ---- */

static int openat2_beneath(int dfd, const char *path, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
		           RESOLVE_NO_XDEV,
	};
	return gp_openat2_retry(dfd, path, &how);
}

/* Creates a directory (mode forced, umask ignored); EEXIST is fine when it
 * is a directory. A non-directory there is replaced: later entries win. */
static int make_dir(int pfd, const char *name, mode_t mode)
{
	if (mkdirat(pfd, name, 0700) < 0) {
		if (errno != EEXIST)
			return -errno;
		struct stat st;
		if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		if (!S_ISDIR(st.st_mode)) {
			if (unlinkat(pfd, name, 0) < 0 || mkdirat(pfd, name, 0700) < 0)
				return -errno;
		}
	}
	/* The staging tree is ours alone (its top is 0700), so following a
	 * name here cannot be raced into a symlink. */
	return fchmodat(pfd, name, mode, 0) < 0 ? -errno : 0;
}

/* Opens the directory holding rel inside staging, creating missing parents
 * (0755). Never follows a symlink. *base points at rel's last component. */
static int open_parent(struct ex *x, const char *rel, const char **base, bool create)
{
	const char *slash = strrchr(rel, '/');
	if (!slash) {
		*base = rel;
		int fd = fcntl(x->sfd, F_DUPFD_CLOEXEC, 3);
		return fd < 0 ? -errno : fd;
	}
	*base = slash + 1;
	_cleanup_free_ char *dir = gp_xstrndup(rel, (size_t)(slash - rel));
	int fd = openat2_beneath(x->sfd, dir, O_PATH | O_DIRECTORY);
	if (fd != -ENOENT || !create)
		return fd;
	/* Walk and create the missing components one at a time. */
	_cleanup_close_ int cur = fcntl(x->sfd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return -errno;
	for (char *c = dir; *c;) {
		char *e = strchrnul(c, '/');
		bool last = !*e;
		*e = '\0';
		int nfd = openat(cur, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT) {
			int rc = make_dir(cur, c, 0755);
			if (rc < 0)
				return rc;
			nfd = openat(cur, c,
			             O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0) {
			struct stat st;
			if (errno == ENOTDIR &&
			    fstatat(cur, c, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(st.st_mode))
				return -ELOOP;
			return -errno;
		}
		close(cur);
		cur = nfd;
		c = last ? e : e + 1;
	}
	return TAKE_FD(cur);
}

/* Makes room for a new non-directory entry: removes a file or link left by
 * an earlier entry of the same name; a directory there is refused. */
static int make_room(struct ex *x, const char *name, int pfd, const char *base)
{
	struct stat st;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return fail(x, -errno, "%s: %s", name, strerror(errno));
	}
	if (S_ISDIR(st.st_mode))
		return fail(x, -GP_ARCHIVE_EUNSAFE,
		            "%s: would replace a directory extracted earlier", name);
	if (unlinkat(pfd, base, 0) < 0)
		return fail(x, -errno, "%s: %s", name, strerror(errno));
	return 0;
}

static int parent_error(struct ex *x, const char *name, int rc)
{
	if (rc == -ELOOP || rc == -EXDEV)
		return fail(x, -GP_ARCHIVE_EUNSAFE,
		            "%s: its path goes through a symlink in the archive", name);
	if (rc == -ENOTDIR)
		return fail(x, -GP_ARCHIVE_EUNSAFE,
		            "%s: a parent of this entry is not a directory", name);
	return fail(x, rc, "%s: cannot open its directory: %s", name, strerror(-rc));
}

/* The directory fd for a new non-directory entry at rel, with room made
 * for it; *base is its last component. A negative result has failed x. */
static int open_slot(struct ex *x, const char *name, const char *rel, const char **base)
{
	int pfd = open_parent(x, rel, base, true);
	if (pfd < 0)
		return parent_error(x, name, pfd);
	int rc = make_room(x, name, pfd, *base);
	if (rc < 0) {
		close(pfd);
		return rc;
	}
	return pfd;
}

/* A libarchive failure: the input's read error, the xz decoder's, "not a
 * tar" before the first entry, or else corrupt data. */
static int la_error(struct ex *x, const char *name)
{
	if (x->src.err)
		return fail(x, x->src.err, "reading the archive: %s",
		            strerror(-x->src.err));
	if (x->xz_err)
		return fail(x, -GP_ARCHIVE_ECORRUPT, "%s: %s", name ? name : "archive",
		            lz_strerror(x->xz_err));
	if (x->par_err)
		return fail(x, x->par_err == -ENOMEM ? -ENOMEM : -GP_ARCHIVE_ECORRUPT,
		            "%s: %s", name ? name : "archive", gp_xzpar_msg(x->par));
	const char *msg = archive_error_string(x->a);
	/* libarchive's ARCHIVE_ERRNO_FILE_FORMAT is EILSEQ on Linux. */
	if (x->res->entries == 0 && archive_errno(x->a) == EILSEQ &&
	    archive_format(x->a) == 0)
		return fail(x, -GP_ARCHIVE_EFORMAT,
		            "not a tar archive (%s compression): %s",
		            x->res->filter ? x->res->filter : "unknown",
		            msg ? msg : "unrecognized");
	return fail(x, -GP_ARCHIVE_ECORRUPT, "%s: %s", name ? name : "archive",
	            msg ? msg : "corrupt archive");
}

static void entry_times(struct archive_entry *e, struct timespec ts[2])
{
	ts[0].tv_sec = ts[1].tv_sec = archive_entry_mtime(e);
	ts[0].tv_nsec = ts[1].tv_nsec = archive_entry_mtime_nsec(e);
}

static void hash_zeros(struct gp_sha256 *md, uint64_t n)
{
	static const unsigned char zeros[65536];
	for (; n; n -= n < sizeof zeros ? n : sizeof zeros)
		gp_sha256_update(md, zeros, n < sizeof zeros ? (size_t)n : sizeof zeros);
}

static int write_file(struct ex *x, struct archive_entry *e, const char *name,
                      const char *rel, mode_t mode)
{
	const char *base;
	_cleanup_close_ int pfd = open_slot(x, name, rel, &base);
	if (pfd < 0)
		return pfd;
	_cleanup_close_ int fd = openat(
	    pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(x, -errno, "%s: cannot create: %s", name, strerror(errno));
	int64_t end = 0;
	_cleanup_(gp_sha256_freep) struct gp_sha256 *md = x->o->on_file ? gp_sha256_new()
	                                                                : NULL;
	bool in_order = true; /* blocks came in offset order: md is the content's */
	struct gp_writeback wb = { 0 };
	for (;;) {
		const void *buf;
		size_t size;
		la_int64_t off;
		int r = archive_read_data_block(x->a, &buf, &size, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return la_error(x, name);
		if (off < 0)
			return fail(x, -GP_ARCHIVE_ECORRUPT, "%s: negative data offset",
			            name);
		x->out_bytes += size;
		if (x->o->max_bytes && x->out_bytes > x->o->max_bytes)
			return fail(
			    x, -GP_ARCHIVE_ETOOBIG,
			    "%s: the archive holds more than %llu bytes of file data",
			    name, (unsigned long long)x->o->max_bytes);
		int rc = gp_pwrite_all(fd, buf, size, (off_t)off);
		if (rc < 0)
			return fail(x, rc, "%s: write: %s", name, strerror(-rc));
		if (md && off < end)
			in_order = false;
		if (md && in_order) {
			hash_zeros(md, (uint64_t)(off - end)); /* a hole before it */
			gp_sha256_update(md, buf, size);
		}
		if (off + (int64_t)size > end)
			end = off + (int64_t)size;
		gp_writeback_kick(&wb, fd, (off_t)end, false);
	}
	/* A sparse file ending in a hole: give it its full size. */
	if (archive_entry_size_is_set(e) && archive_entry_size(e) > end) {
		if (ftruncate(fd, (off_t)archive_entry_size(e)) < 0)
			return fail(x, -errno, "%s: truncate: %s", name, strerror(errno));
		if (md)
			hash_zeros(md, (uint64_t)(archive_entry_size(e) - end));
	}
	if (fchmod(fd, mode) < 0)
		return fail(x, -errno, "%s: chmod: %s", name, strerror(errno));
	if (x->o->flags & GP_ARCHIVE_KEEP_MTIME) {
		struct timespec ts[2];
		entry_times(e, ts);
		if (futimens(fd, ts) < 0)
			return fail(x, -errno, "%s: set times: %s", name,
			            strerror(errno));
	}
	gp_writeback_kick(&wb, fd, (off_t)end, true); /* syncfs before the swap */
	if (md && !in_order) { /* overlapping blocks: read back what is there */
		gp_sha256_reset(md);
		int rc = gp_sha256_update_fd(md, fd, 0, NULL);
		if (rc < 0)
			return fail(x, rc, "%s: read back: %s", name, strerror(-rc));
	}
	if (close(TAKE_FD(fd)) < 0)
		return fail(x, -errno, "%s: write: %s", name, strerror(errno));
	if (md) {
		char hex[65];
		gp_sha256_peek_hex(md, hex);
		x->o->on_file(x->o->on_file_data, rel, hex);
	}
	return 0;
}

static int write_dir(struct ex *x, const char *name, const char *rel, mode_t mode)
{
	const char *base;
	_cleanup_close_ int pfd = open_parent(x, rel, &base, true);
	if (pfd < 0)
		return parent_error(x, name, pfd);
	int rc = make_dir(pfd, base, mode);
	if (rc < 0)
		return fail(x, rc, "%s: mkdir: %s", name, strerror(-rc));
	return 0;
}

static int write_symlink(struct ex *x, struct archive_entry *e, const char *name,
                         const char *rel)
{
	const char *target = archive_entry_symlink(e);
	if (!target)
		target = ""; /* libarchive reports an empty target as none */
	const char *why = gp_archive_symlink_check(rel, target);
	if (why)
		return fail(x, -GP_ARCHIVE_EUNSAFE, "%s: %s ('%s')", name, why, target);
	const char *base;
	_cleanup_close_ int pfd = open_slot(x, name, rel, &base);
	if (pfd < 0)
		return pfd;
	if (symlinkat(target, pfd, base) < 0)
		return fail(x, -errno, "%s: symlink: %s", name, strerror(errno));
	if (x->o->flags & GP_ARCHIVE_KEEP_MTIME) {
		struct timespec ts[2];
		entry_times(e, ts);
		if (utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
			return fail(x, -errno, "%s: set times: %s", name,
			            strerror(errno));
	}
	return 0;
}

static int write_hardlink(struct ex *x, const char *name, const char *rel,
                          const char *link)
{
	const char *why = NULL;
	_cleanup_free_ char *norm = gp_archive_norm_path(link, &why);
	if (!norm)
		return fail(x, -GP_ARCHIVE_EUNSAFE, "%s: hardlink target '%s' %s", name,
		            link, why);
	const char *trel;
	why = strip_top(x, norm, false, false, &trel);
	if (why || !*trel)
		return fail(x, -GP_ARCHIVE_EUNSAFE, "%s: hardlink target '%s' %s", name,
		            link, why ? why : "is the destination itself");
	if (strcmp(trel, rel) == 0)
		return fail(x, -GP_ARCHIVE_EUNSAFE, "%s: hardlink to itself", name);
	const char *tbase;
	_cleanup_close_ int tfd = open_parent(x, trel, &tbase, false);
	struct stat st;
	if (tfd < 0 || fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(
		    x, -GP_ARCHIVE_EUNSAFE,
		    "%s: hardlink target '%s' is not an earlier entry of the archive",
		    name, link);
	/* A second name for a symlink would sit at another depth, where its
	 * target (checked for the first name only) could lead out of dest. */
	if (!S_ISREG(st.st_mode))
		return fail(x, -GP_ARCHIVE_EUNSAFE,
		            "%s: hardlink target '%s' is not a regular file", name, link);
	const char *base;
	_cleanup_close_ int pfd = open_slot(x, name, rel, &base);
	if (pfd < 0)
		return pfd;
	if (linkat(tfd, tbase, pfd, base, 0) < 0)
		return fail(x, -errno, "%s: link: %s", name, strerror(errno));
	if (x->o->on_file)
		x->o->on_file(x->o->on_file_data, rel, NULL);
	return 0;
}

static int extract_entry(struct ex *x, struct archive_entry *e)
{
	const char *name = archive_entry_pathname(e);
	if (!name || !*name)
		return fail(x, -GP_ARCHIVE_EUNSAFE, "entry %llu: no path name",
		            (unsigned long long)x->res->entries);
	const char *why = NULL;
	_cleanup_free_ char *norm = gp_archive_norm_path(name, &why);
	if (!norm)
		return fail(x, -GP_ARCHIVE_EUNSAFE, "%s: path %s", name, why);

	mode_t type = archive_entry_filetype(e);
	const char *hardlink = archive_entry_hardlink(e);
	switch (type) {
	case AE_IFCHR:
	case AE_IFBLK:
		return fail(x, -GP_ARCHIVE_EUNSAFE, "%s: device nodes are refused", name);
	case AE_IFIFO:
		return fail(x, -GP_ARCHIVE_EUNSAFE, "%s: FIFOs are refused", name);
	case AE_IFSOCK:
		return fail(x, -GP_ARCHIVE_EUNSAFE, "%s: sockets are refused", name);
	case AE_IFREG:
	case AE_IFDIR:
	case AE_IFLNK:
		break;
	default:
		if (!hardlink)
			return fail(x, -GP_ARCHIVE_EUNSAFE, "%s: unknown file type 0%o",
			            name, (unsigned)type);
	}
	mode_t mode = archive_entry_perm(e);
	if (mode & (S_ISUID | S_ISGID | S_ISVTX))
		return fail(x, -GP_ARCHIVE_EUNSAFE,
		            "%s: setuid, setgid or sticky bit (mode %04o) is refused",
		            name, (unsigned)mode);

	bool is_dir = type == AE_IFDIR && !hardlink;
	const char *rel;
	why = strip_top(x, norm, is_dir, true, &rel);
	if (why && x->have_top && gp_str_ends_with(why, "top folder"))
		return fail(x, -GP_ARCHIVE_ELAYOUT, "%s: %s '%s'", name, why,
		            x->res->top);
	if (why)
		return fail(x, -GP_ARCHIVE_ELAYOUT, "%s: %s", name, why);
	if (!*rel) {
		if (is_dir)
			return 0; /* the destination itself: always 0755 */
		return fail(x, -GP_ARCHIVE_EUNSAFE, "%s: would replace the destination",
		            name);
	}

	if (hardlink)
		return write_hardlink(x, name, rel, hardlink);
	mode &= 0755;
	switch (type) {
	case AE_IFDIR:
		return write_dir(x, name, rel, mode | 0700);
	case AE_IFLNK:
		return write_symlink(x, e, name, rel);
	default:
		return write_file(x, e, name, rel, mode);
	}
}

/* ---- the staging directory and the swap ---- */

#define STAGING_TAG ".gpuprov-staging."
#define OLD_TAG ".gpuprov-old."

/* Removes ".<base>.gpuprov-{staging,old}.<pid>.<n>" left by runs that died. */
static void remove_stale(int pfd, const char *base)
{
	int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	_cleanup_(closedirp) DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	size_t blen = strlen(base);
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		if (n[0] != '.' || strncmp(n + 1, base, blen) != 0)
			continue;
		n += 1 + blen;
		if (gp_str_starts_with(n, STAGING_TAG))
			n += strlen(STAGING_TAG);
		else if (gp_str_starts_with(n, OLD_TAG))
			n += strlen(OLD_TAG);
		else
			continue;
		char *end;
		long pid = strtol(n, &end, 10);
		if (end == n || *end != '.' || pid <= 0 || pid > INT_MAX)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		gp_rm_tree_at(pfd, de->d_name);
	}
}

/* ".<base><tag><pid>.<n>": a new directory when make, else a free name. */
static char *unique_name(int pfd, const char *base, const char *tag, bool make)
{
	static unsigned counter;
	for (int i = 0; i < 1000; i++) {
		unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
		char *name = gp_xasprintf(".%s%s%d.%u", base, tag, (int)getpid(), n);
		struct stat st;
		if (make ? mkdirat(pfd, name, 0700) == 0
		         : fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
		               errno == ENOENT)
			return name;
		int e = make ? errno : EEXIST;
		free(name);
		if (e != EEXIST)
			return NULL;
	}
	errno = EEXIST;
	return NULL;
}

static bool no_rename_flags(int e)
{
	return e == EINVAL || e == ENOSYS || e == EOPNOTSUPP;
}

/* Puts staging in place of base (see archive.h for the exact steps). */
static int swap_in(struct ex *x, int pfd, const char *staging, const char *base,
                   const char *dest)
{
	struct stat st;
	/* The name must still be ours: in a parent others can write to, it
	 * could have been swapped for a directory of theirs. */
	if (fstatat(pfd, staging, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    st.st_dev != x->sst.st_dev || st.st_ino != x->sst.st_ino)
		return fail(x, -EBUSY,
		            "%s: the staging directory %s was replaced meanwhile", dest,
		            staging);
	bool exists = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists && !S_ISDIR(st.st_mode))
		return fail(x, -GP_ARCHIVE_EDEST, "%s: exists and is not a directory",
		            dest);
	if (!exists) {
		if (renameat2(pfd, staging, pfd, base, RENAME_NOREPLACE) == 0)
			return 0;
		if (!no_rename_flags(errno))
			return fail(x, -errno, "%s: rename into place: %s", dest,
			            strerror(errno));
		if (renameat(pfd, staging, pfd, base) < 0)
			return fail(x, -errno, "%s: rename into place: %s", dest,
			            strerror(errno));
		return 0;
	}
	x->res->replaced = true;
	const char *old = staging; /* after the exchange, staging holds the old tree */
	_cleanup_free_ char *aside = NULL;
	if (renameat2(pfd, staging, pfd, base, RENAME_EXCHANGE) < 0) {
		if (!no_rename_flags(errno))
			return fail(x, -errno, "%s: swap into place: %s", dest,
			            strerror(errno));
		aside = unique_name(pfd, base, OLD_TAG, false);
		if (!aside)
			return fail(x, -errno, "%s: no name for the old tree: %s", dest,
			            strerror(errno));
		if (renameat(pfd, base, pfd, aside) < 0)
			return fail(x, -errno, "%s: move the old tree aside: %s", dest,
			            strerror(errno));
		if (renameat(pfd, staging, pfd, base) < 0) {
			int e = errno;
			renameat(pfd, aside, pfd, base);
			return fail(x, -e, "%s: rename into place: %s", dest,
			            strerror(e));
		}
		old = aside;
	}
	if (gp_rm_tree_at(pfd, old) < 0) {
		const char *slash = strrchr(dest, '/');
		snprintf(x->res->leftover, sizeof x->res->leftover, "%.*s/%s",
		         (int)(slash - dest), dest, old);
	}
	return 0;
}

/* ---- the extraction ---- */

static const char *filter_name(int code)
{
	switch (code) {
	case ARCHIVE_FILTER_NONE:
		return "none";
	case ARCHIVE_FILTER_XZ:
		return "xz";
	case ARCHIVE_FILTER_GZIP:
		return "gzip";
	case ARCHIVE_FILTER_ZSTD:
		return "zstd";
	default:
		return "unknown";
	}
}

/* Opens libarchive on the input (through liblzma when threads > 1 and the
 * input is xz) and reads every entry into staging. */
static int extract_entries(struct ex *x, unsigned threads, bool blocks)
{
	static const unsigned char xz_magic[6] = { 0xfd, '7', 'z', 'X', 'Z', 0 };
	struct src *s = &x->src;
	/* Peek at the magic to choose the decoder. */
	while (s->len < sizeof xz_magic && !s->eof) {
		ssize_t n = src_fill(s, s->len);
		if (n < 0)
			return fail(x, (int)n, "reading the archive: %s",
			            strerror((int)-n));
	}
	if (s->len == 0)
		return fail(x, -GP_ARCHIVE_EFORMAT,
		            "the input is empty, not a tar archive");
	bool own_xz = false;
	own_xz = s->len >= sizeof xz_magic &&
	         memcmp(s->buf, xz_magic, sizeof xz_magic) == 0;

	/* Blocks in parallel only when the first block records its sizes
	 * (xz -T); a single-threaded xz's one block goes through the pipe. */
	size_t need = 0;
	while (own_xz && blocks && !gp_xzpar_suits(s->buf, s->len, &need) &&
	       need > s->len && need <= IN_BUF_SIZE && !s->eof) {
		ssize_t n = src_fill(s, s->len);
		if (n < 0)
			return fail(x, (int)n, "reading the archive: %s",
			            strerror((int)-n));
	}
	if (own_xz && blocks && !gp_xzpar_suits(s->buf, s->len, &need))
		threads = 1;
	else if (own_xz && blocks) {
		int prc = gp_xzpar_new(threads, XZ_MEM_STOP, &x->par);
		if (prc < 0)
			return fail(x, prc, "xz decoder threads: %s", strerror(-prc));
		x->res->xz_blocks = true;
	}

	x->a = archive_read_new();
	if (!x->a)
		abort();
	/* tar only, and only these filters: most libarchive CVEs live in the
	 * other readers. No skip or seek callback: every byte passes la_*_read,
	 * so the hash covers all of it. */
	archive_read_support_format_tar(x->a);
	ssize_t (*reader)(struct archive *, void *, const void **) = la_raw_read;
	if (x->par) {
		reader = la_xzpar_read;
		x->res->xz_threads = threads;
	} else if (own_xz) {
		lzma_mt mt = {
			.flags = LZMA_FAIL_FAST,
			.threads = threads,
			.timeout = 0,
			.memlimit_threading = x->o->xz_mem_limit ? x->o->xz_mem_limit
			                                         : DEFAULT_XZ_MEM,
			.memlimit_stop = XZ_MEM_STOP,
		};
		x->xz = (lzma_stream)LZMA_STREAM_INIT;
		lzma_ret r = threads > 1 ? lzma_stream_decoder_mt(&x->xz, &mt)
		                         : lzma_stream_decoder(&x->xz, XZ_MEM_STOP, 0);
		if (r != LZMA_OK)
			return fail(x,
			            r == LZMA_MEM_ERROR ? -ENOMEM : -GP_ARCHIVE_ECORRUPT,
			            "xz decoder: %s", lz_strerror(r));
		x->xz_active = true;
		int prc = xzpipe_start(&x->pipe, &x->xz);
		if (prc < 0)
			return fail(x, prc, "xz decoder thread: %s", strerror(-prc));
		reader = la_xz_read;
		x->res->xz_threads = threads;
	} else {
		archive_read_support_filter_xz(x->a);
		archive_read_support_filter_gzip(x->a);
		archive_read_support_filter_zstd(x->a);
	}
	if (own_xz)
		x->res->filter = "xz";
	int r = archive_read_open(x->a, x, NULL, reader, NULL);
	if (!own_xz)
		x->res->filter = filter_name(archive_filter_code(x->a, 0));
	if (r != ARCHIVE_OK)
		return la_error(x, NULL);
	if (archive_filter_count(x->a) > 2)
		return fail(
		    x, -GP_ARCHIVE_EFORMAT,
		    "archive: compressed more than once (%s inside %s); expected one "
		    "of xz, gzip, zstd around a tar",
		    filter_name(archive_filter_code(x->a, 0)),
		    filter_name(archive_filter_code(x->a, 1)));
	for (;;) {
		struct archive_entry *e;
		r = archive_read_next_header(x->a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return la_error(x, NULL);
		/* Charset warnings: the raw name is still set and checked. */
		if ((archive_format(x->a) & ARCHIVE_FORMAT_BASE_MASK) !=
		    ARCHIVE_FORMAT_TAR)
			return fail(x, -GP_ARCHIVE_EFORMAT, "not a tar archive");
		x->res->entries++;
		int rc = extract_entry(x, e);
		if (rc < 0)
			return rc;
	}
	if ((x->o->flags & GP_ARCHIVE_STRIP_TOP) && !x->have_top)
		return fail(x, -GP_ARCHIVE_ELAYOUT,
		            "the archive has no top folder to strip");
	return 0;
}

static void ex_free(struct ex *x)
{
	if (x->a)
		archive_read_free(x->a);
	x->a = NULL;
	if (x->xz_active) {
		xzpipe_end(&x->pipe);
		lzma_end(&x->xz); /* joins liblzma's own threads */
	}
	x->xz_active = false;
	if (x->par) {
		x->res->xz_block_bytes = gp_xzpar_peak(x->par);
		gp_xzpar_free(x->par);
	}
	x->par = NULL;
}

static int extract(const struct gp_root *root, const char *dest_in,
                   gp_archive_read_fn read, void *ud, const struct gp_archive_opts *opts,
                   bool preverified, struct gp_archive_result *res)
{
	static const struct gp_archive_opts none = { 0 };
	const struct gp_archive_opts *o = opts ? opts : &none;
	struct ex x = { .o = o, .res = res, .sfd = -1 };
	char want[65] = "";
	if (o->sha256 && gp_sha256_normalize(o->sha256, want) < 0)
		return fail(&x, -EINVAL, "expected sha256 '%s' is not 64 hex digits",
		            o->sha256);

	/* The destination: an absolute in-root path, no trailing slash. */
	_cleanup_free_ char *dest = gp_xstrdup(dest_in);
	for (size_t n = strlen(dest); n > 1 && dest[n - 1] == '/'; n--)
		dest[n - 1] = '\0';
	const char *slash = strrchr(dest, '/');
	const char *base = slash ? slash + 1 : "";
	const char *why = NULL;
	_cleanup_free_ char *norm = dest[0] == '/' ? gp_archive_norm_path(dest + 1, &why)
	                                           : NULL;
	if (!norm || !*norm || strcmp(norm, dest + 1) != 0)
		return fail(&x, -GP_ARCHIVE_EDEST,
		            "%s: the destination must be an absolute path without '.' or "
		            "'..' components",
		            dest_in);
	if (slash != dest) {
		_cleanup_free_ char *parent = gp_xstrndup(dest, (size_t)(slash - dest));
		int rc = gp_root_mkdir_p(root, parent, 0755);
		if (rc < 0)
			return fail(&x, rc, "%s: cannot create its parent: %s", dest,
			            strerror(-rc));
	}
	_cleanup_close_ int ppath = gp_root_open_parent(root, dest, &base);
	if (ppath < 0)
		return fail(&x, ppath, "%s: cannot open its parent: %s", dest,
		            strerror(-ppath));
	/* O_PATH is not enough for fsync and fdopendir. */
	_cleanup_close_ int pfd = openat(ppath, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return fail(&x, -errno, "%s: cannot open its parent: %s", dest,
		            strerror(errno));
	struct stat st;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
		return fail(&x, -GP_ARCHIVE_EDEST, "%s: exists and is %s", dest,
		            S_ISLNK(st.st_mode)
		                ? "a symlink (give the directory it points to)"
		                : "not a directory");
	remove_stale(pfd, base);

	_cleanup_(gp_sha256_freep) struct gp_sha256 *md = gp_sha256_new();
	_cleanup_free_ unsigned char *buf = gp_xmalloc(IN_BUF_SIZE);
	x.src = (struct src){ .read = read, .ud = ud, .md = md, .buf = buf };

	_cleanup_free_ char *staging = unique_name(pfd, base, STAGING_TAG, true);
	if (!staging)
		return fail(&x, -errno,
		            "%s: cannot create a staging directory beside it: %s", dest,
		            strerror(errno));
	x.sfd = openat(pfd, staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* 0700 whatever the umask: private while it is filled. */
	int rc = x.sfd < 0 || fchmod(x.sfd, 0700) < 0 || fstat(x.sfd, &x.sst) < 0
	             ? fail(&x, -errno, "%s: staging: %s", dest, strerror(errno))
	             : 0;
	bool blocks;
	unsigned threads = pick_xz_threads(o, preverified, &blocks);
	if (rc == 0)
		rc = extract_entries(&x, threads, blocks);
	ex_free(&x);
	/* Drain: libarchive stops at the tar end marker, the hash needs it all. */
	while (rc == 0 && !x.src.eof) {
		ssize_t n = src_fill(&x.src, 0);
		if (n < 0)
			rc = fail(&x, (int)n, "reading the archive: %s",
			          strerror((int)-n));
	}
	res->in_bytes = x.src.total;
	res->out_bytes = x.out_bytes;
	if (rc == 0) {
		gp_sha256_peek_hex(md, res->sha256);
		if (want[0] && strcmp(want, res->sha256) != 0)
			rc = fail(
			    &x, -GP_ARCHIVE_EHASH,
			    "sha256 mismatch: expected %s, got %s (%llu bytes); nothing "
			    "was installed",
			    want, res->sha256, (unsigned long long)res->in_bytes);
	}
	if (rc == 0 && fchmod(x.sfd, 0755) < 0)
		rc = fail(&x, -errno, "%s: chmod: %s", dest, strerror(errno));
	/* Data and names on disk before the rename makes them visible. */
	if (rc == 0 && syncfs(x.sfd) < 0)
		rc = fail(&x, -errno, "%s: sync: %s", dest, strerror(errno));
	if (x.sfd >= 0)
		close(x.sfd);
	if (rc == 0)
		rc = swap_in(&x, pfd, staging, base, dest);
	if (rc < 0) {
		gp_rm_tree_at(pfd, staging);
		return rc;
	}
	fsync(pfd);
	return 0;
}

int gp_archive_extract(const struct gp_root *root, const char *dest,
                       gp_archive_read_fn read, void *userdata,
                       const struct gp_archive_opts *opts, struct gp_archive_result *res)
{
	*res = (struct gp_archive_result){ 0 };
	return extract(root, dest, read, userdata, opts, false, res);
}

static ssize_t fd_read(void *ud, void *buf, size_t len)
{
	ssize_t n = read(*(int *)ud, buf, len);
	return n < 0 ? -errno : n;
}

int gp_archive_extract_fd(const struct gp_root *root, const char *dest, int fd,
                          const struct gp_archive_opts *opts,
                          struct gp_archive_result *res)
{
	*res = (struct gp_archive_result){ 0 };
	struct stat st;
	bool preverified = false;
	off_t start;
	if (opts && opts->sha256 && !(opts->flags & GP_ARCHIVE_NO_PREVERIFY) &&
	    fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (start = lseek(fd, 0, SEEK_CUR)) >= 0) {
		char want[65], got[65];
		if (gp_sha256_normalize(opts->sha256, want) < 0) {
			snprintf(res->msg, sizeof res->msg,
			         "expected sha256 '%s' is not 64 hex digits",
			         opts->sha256);
			return -EINVAL;
		}
		int rc = gp_sha256_fd_hex(fd, start, got);
		if (rc < 0) {
			snprintf(res->msg, sizeof res->msg, "reading the archive: %s",
			         strerror(-rc));
			return rc;
		}
		if (strcmp(want, got) != 0) {
			memcpy(res->sha256, got, sizeof got);
			snprintf(
			    res->msg, sizeof res->msg,
			    "sha256 mismatch: expected %s, got %s; nothing was installed",
			    want, got);
			return -GP_ARCHIVE_EHASH;
		}
		preverified = true;
	}
	return extract(root, dest, fd_read, &fd, opts, preverified, res);
}

int gp_archive_extract_file(const struct gp_root *root, const char *dest,
                            const char *path, const struct gp_archive_opts *opts,
                            struct gp_archive_result *res)
{
	*res = (struct gp_archive_result){ 0 };
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		snprintf(res->msg, sizeof res->msg, "%s: %s", path, strerror(e));
		return -e;
	}
	return gp_archive_extract_fd(root, dest, fd, opts, res);
}

const char *gp_archive_strerror(int rc)
{
	switch (-rc) {
	case GP_ARCHIVE_EFORMAT:
		return "not a tar archive with xz, gzip or zstd compression";
	case GP_ARCHIVE_ECORRUPT:
		return "truncated or corrupt archive";
	case GP_ARCHIVE_EUNSAFE:
		return "unsafe archive entry";
	case GP_ARCHIVE_ELAYOUT:
		return "archive has no single top folder";
	case GP_ARCHIVE_EHASH:
		return "sha256 mismatch";
	case GP_ARCHIVE_ETOOBIG:
		return "archive too large";
	case GP_ARCHIVE_EDEST:
		return "unusable destination";
	default:
		return rc < 0 ? strerror(-rc) : "success";
	}
}
