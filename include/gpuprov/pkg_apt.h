/* apt's command lines and repository files (pkg_apt.c). Pure functions. */
#pragma once

#include "gpuprov/pkg_types.h"

extern const struct gp_pkg_backend gp_pkg_apt;
