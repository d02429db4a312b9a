/* What the package backends share (pkgcmd.c): the backend for a package
 * manager and the "name=version" spec both write. Pure functions. */
#pragma once

#include "gpuprov/pkg_types.h"

const struct gp_pkg_backend *gp_pkg_backend_get(enum gp_pkg_manager pm);

/* A copy of head (a command line) with names appended; names may be NULL. */
char **gp_pkgcmd_with_names(char *const *head, char *const *names);
/* "name=version" (apt), "name-version" (dnf), or name alone. */
char *gp_pkg_want_spec(const struct gp_pkg_want *w, char sep);
