/* apt's command lines and repository files (pkg_apt.c), and for now the
 * backend selector and the "name=version" spec both backends use. Pure
 * functions. */
#pragma once

#include "gpuprov/pkg_types.h"

extern const struct gp_pkg_backend gp_pkg_apt;
const struct gp_pkg_backend *gp_pkg_backend_get(enum gp_pkg_manager pm);

/* "name=version" (apt), "name-version" (dnf), or name alone. */
char *gp_pkg_want_spec(const struct gp_pkg_want *w, char sep);
