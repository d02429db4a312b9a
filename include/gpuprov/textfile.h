/* verify --textfile: where the metrics file goes (--textfile-dir, the
 * settings file's textfile_dir, Debian's directory) and its atomic write
 * (textfile.c). Failures come back as -1 with err set. */
#pragma once

#include <stddef.h>

#include "gpuprov/error.h"
#include "gpuprov/root.h"

/* The in-root path DIR/gpuprov.prom (allocated in *path): DIR is dir (the
 * option's), else textfile_dir of GP_CONF_FILE in the root, else
 * GP_TEXTFILE_DIR_DEFAULT. DIR must be an existing directory and not a
 * symlink (GP_EOPTION); a settings file that cannot be read or parsed is
 * GP_EINPUT naming its line. */
int gp_textfile_path(const struct gp_root *r, const char *dir, char **path,
                     struct gp_err *err);
/* Replaces path with data atomically: a temp file in the same directory
 * (its name does not end in .prom, so the collector never reads it),
 * fsync, rename. GP_EFAILED naming the path. */
int gp_textfile_write(const struct gp_root *r, const char *path, const char *data,
                      size_t len, struct gp_err *err);
