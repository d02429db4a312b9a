/* Root-relative file access. Paths are resolved with openat2 and
 * RESOLVE_IN_ROOT, so an absolute symlink inside a fixture or image root
 * ("/etc/foo -> /etc/bar") resolves inside that root and never escapes to
 * the host. Writes are atomic: temp file, fsync, rename, fsync(dir). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gpuprov/root.h"
#include "gpuprov/util.h"

struct gp_root_fault {
	int rc;
	char *path;
};

int gp_root_open(struct gp_root *r, const char *dir)
{
	*r = (struct gp_root){ .fd = -1 };
	char *real = realpath(dir, NULL);
	if (!real)
		return -errno;
	int fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		free(real);
		return -e;
	}
	r->dir = real;
	r->fd = fd;
	r->fault = gp_xcalloc(1, sizeof *r->fault);
	return 0;
}

void gp_root_close(struct gp_root *r)
{
	if (r->fd >= 0)
		close(r->fd);
	free(r->dir);
	if (r->fault)
		free(r->fault->path);
	free(r->fault);
	*r = (struct gp_root){ .fd = -1 };
}

bool gp_root_is_host(const struct gp_root *r)
{
	return strcmp(r->dir, "/") == 0;
}

char *gp_root_host_path(const struct gp_root *r, const char *path)
{
	while (*path == '/')
		path++;
	if (gp_root_is_host(r))
		return gp_xasprintf("/%s", path);
	return gp_xasprintf("%s/%s", r->dir, path);
}

/* The system call itself; a unit test swaps it to inject EAGAIN. */
static long openat2_syscall(int dfd, const char *path, struct open_how *how, size_t size)
{
	return syscall(SYS_openat2, dfd, path, how, size);
}

gp_root_openat2_fn gp_root_openat2 = openat2_syscall;

int gp_openat2_retry(int dfd, const char *path, struct open_how *how)
{
	/* RESOLVE_IN_ROOT and RESOLVE_BENEATH fail with EAGAIN when a rename
	 * or mount anywhere on the system raced the lookup of a ".."
	 * (openat2(2)): the path may well exist, so try again, a bounded
	 * number of times. */
	for (int attempt = 0;; attempt++) {
		int fd = (int)gp_root_openat2(dfd, path, how, sizeof *how);
		if (fd >= 0)
			return fd;
		if ((errno != EAGAIN && errno != EINTR) ||
		    attempt + 1 >= GP_ROOT_OPENAT2_ATTEMPTS)
			return -errno;
	}
}

int gp_root_openat(const struct gp_root *r, const char *path, int flags, mode_t mode)
{
	while (*path == '/')
		path++;
	if (!*path)
		path = ".";
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	return gp_openat2_retry(r->fd, path, &how);
}

int gp_root_open_parent(const struct gp_root *r, const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	if (!slash || !slash[1])
		return -EINVAL;
	*base = slash + 1;
	if (strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0)
		return -EINVAL;
	_cleanup_free_ char *dir = gp_xstrndup(path, (size_t)(slash - path));
	return gp_root_openat(r, *dir ? dir : "/", O_PATH | O_DIRECTORY, 0);
}

/* Refuses what is not a regular file or is over max, then reads it whole. */
static int read_fd(int fd, size_t max, char **data, size_t *len)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (S_ISFIFO(st.st_mode))
		return -GP_ROOT_EFIFO;
	if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
		return -GP_ROOT_EDEVICE;
	if (!S_ISREG(st.st_mode))
		return -GP_ROOT_ESOCKET;
	if ((uint64_t)st.st_size > max)
		return -GP_ROOT_ETOOBIG;
	/* Opened without blocking (a FIFO swapped in would hang the open);
	 * a regular file reads the same either way, but clear it anyway. */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK))
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	/* /proc and /sys files say size 0 and still have content: read until
	 * EOF, never past max. */
	struct gp_buf b = { 0 };
	/* Straight into a buffer of the size fstat gave (a byte more, for the
	 * read that sees EOF): no second copy of a journal or a cache. */
	gp_buf_reserve(&b, st.st_size > 0 ? (size_t)st.st_size + 1 : 65536);
	b.data[0] = '\0';
	for (;;) {
		if (b.cap - b.len < 2)
			gp_buf_reserve(&b, 65536);
		ssize_t n = read(fd, b.data + b.len, b.cap - b.len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			gp_buf_free(&b);
			return -e;
		}
		if (n == 0)
			break;
		if ((size_t)n > max - b.len) {
			gp_buf_free(&b);
			return -GP_ROOT_ETOOBIG;
		}
		b.len += (size_t)n;
		b.data[b.len] = '\0';
	}
	if (len)
		*len = b.len;
	*data = gp_buf_steal(&b);
	return 0;
}

int gp_root_read_max(const struct gp_root *r, const char *path, size_t max, char **data,
                     size_t *len)
{
	_cleanup_close_ int fd = gp_root_openat(r, path, O_RDONLY | O_NOCTTY | O_NONBLOCK,
	                                        0);
	if (fd < 0)
		return fd;
	return read_fd(fd, max, data, len);
}

int gp_root_read(const struct gp_root *r, const char *path, char **data, size_t *len)
{
	return gp_root_read_max(r, path, GP_ROOT_READ_MAX, data, len);
}

static const char *file_kind(int rc)
{
	switch (-rc) {
	case GP_ROOT_EFIFO:
		return "a FIFO";
	case GP_ROOT_EDEVICE:
		return "a device";
	case GP_ROOT_ESOCKET:
		return "a socket";
	case EISDIR:
		return "a directory";
	default:
		return NULL;
	}
}

static char *size_text(size_t n)
{
	if (n >= 1024 * 1024 && n % (1024 * 1024) == 0)
		return gp_xasprintf("%zu MiB", n / (1024 * 1024));
	if (n >= 1024 && n % 1024 == 0)
		return gp_xasprintf("%zu KiB", n / 1024);
	return gp_xasprintf("%zu bytes", n);
}

static char *read_error(const char *where, size_t max, int rc)
{
	const char *kind = file_kind(rc);
	if (kind)
		return gp_xasprintf("%s is %s, not a regular file", where, kind);
	if (rc == -GP_ROOT_ETOOBIG) {
		_cleanup_free_ char *bound = size_text(max);
		return gp_xasprintf("%s is larger than %s, the most gpuprov reads of it",
		                    where, bound);
	}
	if (rc == -EAGAIN)
		return gp_xasprintf("%s: the lookup kept racing renames on the system "
		                    "(EAGAIN %d times); run gpuprov again",
		                    where, GP_ROOT_OPENAT2_ATTEMPTS);
	return gp_xasprintf("%s: %s", where, strerror(-rc));
}

char *gp_root_read_error(const struct gp_root *r, const char *path, size_t max, int rc)
{
	_cleanup_free_ char *where = gp_root_is_host(r)
	                                 ? gp_xstrdup(path)
	                                 : gp_xasprintf("%s in root %s", path, r->dir);
	return read_error(where, max, rc);
}

char *gp_host_read_error(const char *path, size_t max, int rc)
{
	return read_error(path, max, rc);
}

int gp_root_stat(const struct gp_root *r, const char *path, struct stat *st)
{
	_cleanup_close_ int fd = gp_root_openat(r, path, O_PATH, 0);
	if (fd < 0)
		return fd;
	return fstat(fd, st) < 0 ? -errno : 0;
}

int gp_root_lstat(const struct gp_root *r, const char *path, struct stat *st)
{
	const char *base;
	_cleanup_close_ int dfd = gp_root_open_parent(r, path, &base);
	if (dfd < 0)
		return dfd;
	return fstatat(dfd, base, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* d opened on path's parent (kept when it is that already); *base: the
 * last name, checked as gp_root_open_parent checks it. */
static int dir_for(const struct gp_root *r, struct gp_root_dir *d, const char *path,
                   const char **base)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return -EINVAL;
	size_t n = (size_t)(slash - path);
	if (!d->path || strlen(d->path) != n || strncmp(d->path, path, n) != 0) {
		gp_root_dir_close(d);
		const char *ignored;
		int fd = gp_root_open_parent(r, path, &ignored);
		if (fd < 0)
			return fd;
		d->fd = fd;
		d->path = gp_xstrndup(path, n);
	}
	*base = slash + 1;
	if (!**base || strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0)
		return -EINVAL;
	return 0;
}

int gp_root_lstat_in(const struct gp_root *r, struct gp_root_dir *d, const char *path,
                     struct stat *st)
{
	const char *base;
	int rc = dir_for(r, d, path, &base);
	if (rc < 0)
		return rc;
	return fstatat(d->fd, base, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

void gp_root_dir_close(struct gp_root_dir *d)
{
	if (d->fd >= 0)
		close(d->fd);
	free(d->path);
	*d = (struct gp_root_dir)GP_ROOT_DIR_INIT;
}

bool gp_root_exists(const struct gp_root *r, const char *path)
{
	struct stat st;
	int rc = gp_root_stat(r, path, &st);
	if (rc == -EAGAIN && r->fault && !r->fault->rc) {
		r->fault->rc = rc;
		r->fault->path = gp_xstrdup(path);
	}
	return rc == 0;
}

int gp_root_fault(const struct gp_root *r, const char **path)
{
	if (!r->fault || !r->fault->rc)
		return 0;
	*path = r->fault->path;
	return r->fault->rc;
}

int gp_root_readlink(const struct gp_root *r, const char *path, char **target)
{
	const char *base;
	_cleanup_close_ int dfd = gp_root_open_parent(r, path, &base);
	if (dfd < 0)
		return dfd;
	char buf[PATH_MAX];
	ssize_t n = readlinkat(dfd, base, buf, sizeof buf - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	*target = gp_xstrdup(buf);
	return 0;
}

/* Creates a uniquely named temp file beside base in dfd. */
static int open_temp(int dfd, const char *base, char **name)
{
	for (int attempt = 0; attempt < 100; attempt++) {
		char *tmp = gp_xasprintf(".#%s.gpuprov%d.%d", base, (int)getpid(),
		                         attempt);
		int fd = openat(
		    dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0) {
			*name = tmp;
			return fd;
		}
		int e = errno;
		free(tmp);
		if (e != EEXIST)
			return -e;
	}
	return -EEXIST;
}

int gp_root_write_atomic(const struct gp_root *r, const char *path, const void *data,
                         size_t len, mode_t mode, uid_t uid, gid_t gid)
{
	const char *base;
	_cleanup_close_ int dfd = gp_root_open_parent(r, path, &base);
	if (dfd < 0)
		return dfd;
	/* O_PATH fds cannot be used for openat of new files everywhere; reopen. */
	_cleanup_close_ int wdfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (wdfd < 0)
		return -errno;
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = open_temp(wdfd, base, &tmp);
	if (fd < 0)
		return fd;
	int rc = gp_write_all(fd, data, len);
	/* Owner before mode: chown clears set-id bits. A file that cannot get
	 * the owner or mode asked for is not written at all. */
	if (rc == 0 && fchown(fd, uid, gid) < 0)
		rc = -errno;
	if (rc == 0 && fchmod(fd, mode) < 0)
		rc = -errno;
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (rc == 0 && renameat(wdfd, tmp, wdfd, base) < 0)
		rc = -errno;
	if (rc < 0) {
		unlinkat(wdfd, tmp, 0);
		return rc;
	}
	fsync(wdfd);
	return 0;
}

int gp_root_mkdir_p(const struct gp_root *r, const char *path, mode_t mode)
{
	_cleanup_free_ char *copy = gp_xstrdup(path);
	for (char *p = copy + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		const char *base;
		_cleanup_close_ int dfd = gp_root_open_parent(r, copy, &base);
		if (dfd < 0)
			return dfd;
		if (mkdirat(dfd, base, mode) < 0 && errno != EEXIST)
			return -errno;
		struct stat st;
		if (gp_root_stat(r, copy, &st) < 0 || !S_ISDIR(st.st_mode))
			return -ENOTDIR;
		*p = saved;
		if (!saved)
			break;
		while (p[1] == '/')
			p++;
		if (!p[1])
			break;
	}
	return 0;
}

int gp_root_unlink(const struct gp_root *r, const char *path)
{
	const char *base;
	_cleanup_close_ int dfd = gp_root_open_parent(r, path, &base);
	if (dfd < 0)
		return dfd;
	if (unlinkat(dfd, base, 0) < 0)
		return -errno;
	fsync(dfd);
	return 0;
}

int gp_root_symlink(const struct gp_root *r, const char *target, const char *path)
{
	const char *base;
	_cleanup_close_ int dfd = gp_root_open_parent(r, path, &base);
	if (dfd < 0)
		return dfd;
	_cleanup_free_ char *tmp = gp_xasprintf(".#%s.gpuprov%d", base, (int)getpid());
	unlinkat(dfd, tmp, 0);
	if (symlinkat(target, dfd, tmp) < 0)
		return -errno;
	if (renameat(dfd, tmp, dfd, base) < 0) {
		int e = errno;
		unlinkat(dfd, tmp, 0);
		return -e;
	}
	return 0;
}

bool gp_root_writable(const struct gp_root *r)
{
	return faccessat(r->fd, ".", W_OK, AT_EACCESS) == 0;
}

int gp_root_list_dir(const struct gp_root *r, const char *path, char ***names)
{
	int fd = gp_root_openat(r, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	char **v = gp_xcalloc(1, sizeof(char *));
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		gp_strv_push(&v, de->d_name);
	}
	closedir(d);
	gp_strv_sort(v);
	*names = v;
	return 0;
}

int gp_root_list_links(const struct gp_root *r, const char *path, char ***names,
                       char ***targets)
{
	_cleanup_close_ int dfd = gp_root_openat(r, path, O_PATH | O_DIRECTORY, 0);
	if (dfd < 0)
		return dfd;
	char **v = NULL;
	int rc = gp_root_list_dir(r, path, &v);
	if (rc < 0)
		return rc;
	size_t n = gp_strv_len(v);
	char **t = gp_xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		char buf[PATH_MAX];
		ssize_t len = readlinkat(dfd, v[i], buf, sizeof buf - 1);
		t[i] = gp_xstrndup(buf, len > 0 ? (size_t)len : 0);
	}
	*names = v;
	*targets = t;
	return 0;
}

static int name_cmp(const void *key, const void *elem)
{
	return strcmp(key, *(char *const *)elem);
}

const char *gp_root_link_lookup(char *const *names, char *const *targets,
                                const char *name)
{
	char *const *hit = bsearch(name, names, gp_strv_len(names), sizeof *names,
	                           name_cmp);
	if (!hit || !*targets[hit - names])
		return NULL;
	return targets[hit - names];
}

/* The hash of the regular file open at fd. */
static int sha256_regular(int fd, char out[65])
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return S_ISFIFO(st.st_mode) ? -GP_ROOT_EFIFO : -GP_ROOT_EDEVICE;
	return gp_sha256_fd_hex(fd, 0, out);
}

int gp_root_sha256_file(const struct gp_root *r, const char *path, char out[65])
{
	_cleanup_close_ int fd = gp_root_openat(r, path,
	                                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
	if (fd < 0)
		return fd;
	return sha256_regular(fd, out);
}

int gp_root_sha256_file_in(const struct gp_root *r, struct gp_root_dir *d,
                           const char *path, char out[65])
{
	const char *base;
	int rc = dir_for(r, d, path, &base);
	if (rc < 0)
		return rc;
	/* One name in a directory resolved inside the root, not followed. */
	_cleanup_close_ int fd = openat(
	    d->fd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return sha256_regular(fd, out);
}

int gp_rm_tree_at(int dfd, const char *name)
{
	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	/* Without u+wx we could not empty it (when not root). */
	if (fstat(fd, &st) == 0 && (st.st_mode & 0700) != 0700)
		fchmod(fd, (st.st_mode & 07777) | 0700);
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int r = gp_rm_tree_at(dirfd(d), de->d_name);
		if (r < 0 && rc == 0)
			rc = r;
	}
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

int gp_root_remove_tree(const struct gp_root *r, const char *path)
{
	const char *base;
	_cleanup_close_ int pfd = gp_root_open_parent(r, path, &base);
	if (pfd < 0)
		return pfd;
	struct stat st;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return gp_rm_tree_at(pfd, base);
}
