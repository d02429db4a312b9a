/* The target root. Every path gpuprov reads or writes is an absolute path
 * inside the root ("/etc/modprobe.d/x.conf"), resolved with openat2
 * RESOLVE_IN_ROOT so that no symlink inside the root can lead out of it.
 * Functions return 0 or a negative errno and never print. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "gpuprov/sha256.h"

struct gp_root_fault;
struct gp_root {
	char *dir; /* absolute, no trailing slash; "/" for the host */
	int fd; /* O_PATH|O_DIRECTORY fd of dir */
	/* The first lookup gp_root_exists could not make (gp_root_fault);
	 * shared by copies of the struct, freed by gp_root_close. */
	struct gp_root_fault *fault;
};

/* Opens dir as the root. -ENOENT, -ENOTDIR, ... on failure. */
int gp_root_open(struct gp_root *r, const char *dir);
void gp_root_close(struct gp_root *r);
bool gp_root_is_host(const struct gp_root *r);
/* The host path of an in-root path, for messages and for tools that need one. */
char *gp_root_host_path(const struct gp_root *r, const char *path);

/* Failure codes beyond the errno range; functions return their negation.
 * A file gpuprov reads must be a regular file (a FIFO would block the run, a
 * device like /dev/zero never ends) no larger than the bound for its kind. */
enum {
	GP_ROOT_EFIFO = 4300, /* a FIFO where a file was expected */
	GP_ROOT_EDEVICE, /* a character or block device */
	GP_ROOT_ESOCKET, /* a socket (or another non-regular file) */
	GP_ROOT_ETOOBIG, /* larger than the bound given for this kind of file */
};

/* Bounds of what one read takes in, by kind of input. The default fits the
 * largest package database or apt list; small facts (os-release, a sysfs or
 * /proc value) get far less, so a wrong file fails at once. */
#define GP_ROOT_READ_MAX ((size_t)1 << 30) /* 1 GiB */
#define GP_ROOT_SMALL_MAX ((size_t)64 << 10) /* 64 KiB */
#define GP_ROOT_CONFIG_MAX ((size_t)1 << 20) /* 1 MiB: one modprobe.d file */
#define GP_PROFILE_MAX ((size_t)16 << 20) /* 16 MiB: one profile file */
#define GP_JOURNAL_MAX ((size_t)256 << 20) /* 256 MiB: the journal */

/* How often gp_root_openat tries a lookup that openat2 failed with EAGAIN
 * (a rename or mount raced a ".." in it) before it returns -EAGAIN. */
#define GP_ROOT_OPENAT2_ATTEMPTS 128

/* openat2(rootfd, path, flags, RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS), O_CLOEXEC
 * added; EAGAIN and EINTR are retried (GP_ROOT_OPENAT2_ATTEMPTS). Every
 * openat2 of a root path goes through here: -EAGAIN means "could not look",
 * never "absent". */
int gp_root_openat(const struct gp_root *r, const char *path, int flags, mode_t mode);
/* Opens the directory that holds path; *base points into path at the last component. */
int gp_root_open_parent(const struct gp_root *r, const char *path, const char **base);

/* Reads a whole file (NUL-terminated; len excludes the NUL). -ENOENT when
 * absent. The open never blocks; a FIFO, device or socket is refused
 * (-GP_ROOT_EFIFO, ...), a directory is -EISDIR, more than max bytes
 * (GP_ROOT_READ_MAX for gp_root_read) is -GP_ROOT_ETOOBIG. /proc and /sys
 * files, which report size 0, are read to their end within the bound. */
int gp_root_read(const struct gp_root *r, const char *path, char **data, size_t *len);
int gp_root_read_max(const struct gp_root *r, const char *path, size_t max, char **data,
                     size_t *len);
/* What went wrong reading path, for a message: "/etc/os-release in root /x
 * is a FIFO, not a regular file", "... is larger than 16 MiB, the most
 * gpuprov reads of it", "...: Permission denied". The caller adds what next. */
char *gp_root_read_error(const struct gp_root *r, const char *path, size_t max, int rc);
/* The same for a host path (a profile): "/dev/zero is a device, not ...". */
char *gp_host_read_error(const char *path, size_t max, int rc);
int gp_root_stat(const struct gp_root *r, const char *path, struct stat *st);
int gp_root_lstat(const struct gp_root *r, const char *path, struct stat *st);
/* gp_root_lstat for a loop over many files in few directories (a cuDNN
 * tree's hundreds): the parent directory, resolved inside the root as
 * gp_root_lstat resolves it, stays open in d while the next path has the
 * same one, so each further file costs one fstatat of its name
 * (AT_SYMLINK_NOFOLLOW: nothing more is resolved). Only for loops that
 * change nothing: a directory renamed or replaced meanwhile would still be
 * the one opened. d starts as GP_ROOT_DIR_INIT; gp_root_dir_close ends it. */
struct gp_root_dir {
	char *path;
	int fd;
};
#define GP_ROOT_DIR_INIT                                                                 \
	{                                                                                \
		.path = NULL, .fd = -1                                                   \
	}
int gp_root_lstat_in(const struct gp_root *r, struct gp_root_dir *d, const char *path,
                     struct stat *st);
void gp_root_dir_close(struct gp_root_dir *d);
/* false when absent, and when the lookup failed with -EAGAIN after every
 * retry: that failure is kept (the first one) for gp_root_fault, so the
 * caller's "absent" cannot pass for a fact. */
bool gp_root_exists(const struct gp_root *r, const char *path);
/* The lookup gp_root_exists could not make: its -errno, *path the in-root
 * path (borrowed); 0 when every lookup was answered. The engine and the
 * effect door fail on it (exit 65) rather than act on the wrong answer. */
int gp_root_fault(const struct gp_root *r, const char **path);
/* Readlink of the final component (not followed). */
int gp_root_readlink(const struct gp_root *r, const char *path, char **target);

/* Writes data to path atomically: a temp file in the same directory,
 * fchown/fchmod, fsync, rename, fsync of the directory. When the owner or
 * mode cannot be set (-EPERM for uid 0 when not root), nothing is written. */
int gp_root_write_atomic(const struct gp_root *r, const char *path, const void *data,
                         size_t len, mode_t mode, uid_t uid, gid_t gid);
/* mkdir -p inside the root; existing directories are fine. */
int gp_root_mkdir_p(const struct gp_root *r, const char *path, mode_t mode);
int gp_root_unlink(const struct gp_root *r, const char *path);
/* Creates or replaces (atomically) a symlink at path pointing to target. */
int gp_root_symlink(const struct gp_root *r, const char *target, const char *path);
/* rm -rf of the directory path (its last component is never followed: a
 * symlink there is -ENOTDIR) and of everything under it, no link followed. */
int gp_root_remove_tree(const struct gp_root *r, const char *path);
/* rm -rf of name in the directory dfd, following no symlink. */
int gp_rm_tree_at(int dfd, const char *name);

/* Is the root writable by us (for a clear early error)? */
bool gp_root_writable(const struct gp_root *r);

/* sha256 of a regular file in the root (not followed if a symlink). */
int gp_root_sha256_file(const struct gp_root *r, const char *path, char out[65]);
/* The same in a loop over a tree (d as for gp_root_lstat_in): the file
 * opened by its name in its parent, which stays open. */
int gp_root_sha256_file_in(const struct gp_root *r, struct gp_root_dir *d,
                           const char *path, char out[65]);

/* The openat2 system call, replaceable by unit tests that inject failures. */
struct open_how;
/* openat2 with its EAGAIN/EINTR retry: what gp_root_openat and the archive
 * staging lookups use; 0.. an fd, or -errno (-EAGAIN after the bound). */
int gp_openat2_retry(int dfd, const char *path, struct open_how *how);
typedef long (*gp_root_openat2_fn)(int dfd, const char *path, struct open_how *how,
                                   size_t size);
extern gp_root_openat2_fn gp_root_openat2;

/* Lists the names in a directory (without . and ..), sorted. -ENOENT when absent. */
int gp_root_list_dir(const struct gp_root *r, const char *path, char ***names);
/* gp_root_list_dir, and in *targets (parallel to *names) each entry's link
 * target, "" for an entry that is not a symbolic link: one directory open
 * for all, where gp_root_readlink opens the parent for each. */
int gp_root_list_links(const struct gp_root *r, const char *path, char ***names,
                       char ***targets);
/* The target of name in what gp_root_list_links returned, NULL when name is
 * not there or is no link. */
const char *gp_root_link_lookup(char *const *names, char *const *targets,
                                const char *name);
