/* The package managers' command lines and repository files, built as argv
 * vectors and text (no shell). One table per backend (pkg_apt.c,
 * pkg_dnf.c), what they share in pkgcmd.c; pkg.c runs them through the
 * effect door. Pure functions. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/pkg.h"

struct gp_pkg_backend {
	const char *name; /* "apt", "dnf" */
	const char *lock_files[3]; /* in-root, NULL-terminated: probed before commands */
	/* argv vectors (NULL-terminated, free with gp_strv_free). */
	char **(*refresh)(void);
	char **(*install)(const struct gp_pkg_want *want, size_t n);
	char **(*hold)(char *const *names, bool hold);
	/* The repository file: its in-root path and contents. keyring is the
	 * in-root path of the keyring (signed-by= / gpgkey=), fpr the checked
	 * fingerprint, for a comment. */
	char *(*repo_path)(const struct gp_pkg_repo *repo);
	char *(*repo_text)(const struct gp_pkg_repo *repo, const char *keyring,
	                   const char *fpr);
	/* Where a plain (non-package) keyring is written. */
	char *(*keyring_path)(const struct gp_pkg_repo *repo, bool armored);
};

extern const struct gp_pkg_backend gp_pkg_apt;
extern const struct gp_pkg_backend gp_pkg_dnf;
const struct gp_pkg_backend *gp_pkg_backend_get(enum gp_pkg_manager pm);

/* "name=version" (apt), "name-version" (dnf), or name alone. */
char *gp_pkg_want_spec(const struct gp_pkg_want *w, char sep);
