/* Does a root fit a profile's "match" section (match.c)? */
#pragma once

#include "gpuprov/profile.h"
#include "gpuprov/root.h"

/* How the root differs from the profile's "match" (distro, version,
 * architecture, GPUs), or NULL when it fits. Unknown facts count as a
 * mismatch. */
char *gp_profile_mismatch(const struct gp_profile *p, const struct gp_root *r);
