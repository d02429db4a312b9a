/* dnf's command lines and repository files (pkg_dnf.c). Pure functions. */
#pragma once

#include <stdbool.h>

#include "gpuprov/pkg_types.h"

extern const struct gp_pkg_backend gp_pkg_dnf;

/* The read-only query of the versions of names that the repositories in
 * dnf's cache offer: `dnf -C repoquery --available --showduplicates`, one
 * "NAME EVR NAME-VERSION-RELEASE.ARCH" line each (EVR as rpm's database
 * gives it: no "0:" epoch). */
char **gp_dnf_offers_argv(char *const *names);
/* Where that query writes (its lock) although it changes nothing. */
#define GP_DNF_CACHE_DIR "/var/cache/dnf"
/* `rpm -e NAME...`: how an imported key (gpg-pubkey-KEYID-DATE, which
 * dnf does not see) is removed. */
char **gp_rpm_erase_argv(char *const *names);
/* Does out, that query's output, offer name (by its name, or as
 * NAME-VERSION-RELEASE.ARCH) at version? */
bool gp_dnf_offers(const char *out, const char *name, const char *version);
