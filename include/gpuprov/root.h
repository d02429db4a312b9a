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

struct gp_root {
	char *dir; /* absolute, no trailing slash; "/" for the host */
	int fd; /* O_PATH|O_DIRECTORY fd of dir */
};

/* Opens dir as the root. -ENOENT, -ENOTDIR, ... on failure. */
int gp_root_open(struct gp_root *r, const char *dir);
void gp_root_close(struct gp_root *r);
bool gp_root_is_host(const struct gp_root *r);
/* The host path of an in-root path, for messages and for tools that need one. */
char *gp_root_host_path(const struct gp_root *r, const char *path);

/* openat2(rootfd, path, flags, RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS), O_CLOEXEC added. */
int gp_root_openat(const struct gp_root *r, const char *path, int flags, mode_t mode);
/* Opens the directory that holds path; *base points into path at the last component. */
int gp_root_open_parent(const struct gp_root *r, const char *path, const char **base);

/* Reads a whole file (NUL-terminated; len excludes the NUL). -ENOENT when absent. */
int gp_root_read(const struct gp_root *r, const char *path, char **data, size_t *len);
int gp_root_stat(const struct gp_root *r, const char *path, struct stat *st);
int gp_root_lstat(const struct gp_root *r, const char *path, struct stat *st);
bool gp_root_exists(const struct gp_root *r, const char *path);
/* Readlink of the final component (not followed). */
int gp_root_readlink(const struct gp_root *r, const char *path, char **target);

/* Writes data to path atomically: a temp file in the same directory,
 * fchmod/fchown, fsync, rename, fsync of the directory. */
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

/* Lists the names in a directory (without . and ..), sorted. -ENOENT when absent. */
int gp_root_list_dir(const struct gp_root *r, const char *path, char ***names);
