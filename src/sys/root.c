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
	return 0;
}

void gp_root_close(struct gp_root *r)
{
	if (r->fd >= 0)
		close(r->fd);
	free(r->dir);
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
	int fd = (int)syscall(SYS_openat2, r->fd, path, &how, sizeof how);
	return fd < 0 ? -errno : fd;
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

int gp_root_read(const struct gp_root *r, const char *path, char **data, size_t *len)
{
	_cleanup_close_ int fd = gp_root_openat(r, path, O_RDONLY | O_NOCTTY, 0);
	if (fd < 0)
		return fd;
	struct gp_buf b = { 0 };
	char chunk[65536];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof chunk);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			gp_buf_free(&b);
			return -e;
		}
		if (n == 0)
			break;
		gp_buf_append(&b, chunk, (size_t)n);
	}
	if (len)
		*len = b.len;
	*data = gp_buf_steal(&b);
	return 0;
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

bool gp_root_exists(const struct gp_root *r, const char *path)
{
	struct stat st;
	return gp_root_stat(r, path, &st) == 0;
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
	if (rc == 0 && fchmod(fd, mode) < 0)
		rc = -errno;
	if (rc == 0 && fchown(fd, uid, gid) < 0 && errno != EPERM)
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

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
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
	qsort(v, gp_strv_len(v), sizeof(char *), cmp_names);
	*names = v;
	return 0;
}

int gp_root_sha256_file(const struct gp_root *r, const char *path, char out[65])
{
	_cleanup_close_ int fd = gp_root_openat(r, path, O_RDONLY | O_NOFOLLOW, 0);
	if (fd < 0)
		return fd;
	return gp_sha256_fd_hex(fd, 0, out);
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
