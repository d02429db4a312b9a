/* os-release(5) of the target root (osrelease.c), read without a shell.
 * Read under the root; nothing here prints or decides. */
#pragma once

#include "gpuprov/root.h"

struct gp_os_release {
	char *id; /* "ubuntu" */
	char *id_like; /* "debian", may be NULL */
	char *version_id; /* "22.04" */
	char *pretty_name; /* "Ubuntu 22.04.4 LTS" */
	/* The file read ("/etc/os-release"); after a failure other than
	 * -ENOENT, the one that could not be read. Static: never freed. */
	const char *path;
};
/* Parses etc/os-release, falling back to usr/lib/os-release only when the
 * former is absent. Quoting as in os-release(5). -ENOENT when neither
 * exists, -EINVAL when there is no (or an empty) ID; any other failure
 * (a FIFO, over GP_ROOT_SMALL_MAX, -EAGAIN) means it could not be read, not
 * that it is absent: gp_os_release_error says which. On failure *osr holds
 * nothing to free. */
int gp_os_release_read(const struct gp_root *r, struct gp_os_release *osr);
int gp_os_release_parse(const char *text, struct gp_os_release *osr);
/* For a gp_os_release_read failure other than -ENOENT and -EINVAL: the
 * operator's message naming the file, what is wrong and what next. */
char *gp_os_release_error(const struct gp_root *r, const struct gp_os_release *osr,
                          int rc);
void gp_os_release_free(struct gp_os_release *osr);
