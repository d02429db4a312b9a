/* The package value types, below the package layer (pkg.h) and shared with
 * the backends (pkg_apt.c, pkg_dnf.c) and the driver knowledge (nvdriver.h).
 * Header-only: types, no functions, so it has no .c file. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum gp_pkg_manager { GP_PKG_APT, GP_PKG_DNF };

/* One package wanted at an exact version, or at the repository's candidate
 * when version is NULL. Versions are the backend's full strings
 * ("535.183.01-0ubuntu0.22.04.1", "3:560.35.03-1.el9"); a version without a
 * revision ("535.183.01") matches the newest candidate with that upstream
 * version. */
struct gp_pkg_want {
	const char *name;
	const char *version;
};

/* A package repository plus the key that signs it. keyring is downloaded
 * through the download layer (sha256 required); its key fingerprints are
 * read before anything is written and must include fingerprint (40 hex
 * digits, spaces ignored), else the repository is refused. For apt the
 * keyring is either a cuda-keyring-style .deb (its keyring file is taken
 * out and written by gpuprov; the package is not installed) or a
 * binary/armored OpenPGP keyring written to /usr/share/keyrings/<id>.gpg and
 * referenced by signed-by. */
struct gp_pkg_repo {
	const char *id; /* "cuda-ubuntu2204-x86_64": file names derive from it */
	const char *url; /* base URL (apt: "... ./" flat repo or suite/components) */
	const char *suite; /* apt: "/" for a flat repository, or a suite name */
	const char *components; /* apt: "main" etc., NULL for a flat repository */
	const char *keyring_url;
	const char *keyring_sha256;
	const char *fingerprint;
	bool deb822; /* apt: a deb822 <id>.sources file, not a one-line <id>.list */
};

/* One package manager's command lines and repository files, built as argv
 * vectors and text (no shell); pkg.c runs them through the effect door. */
struct gp_pkg_backend {
	const char *name; /* "apt", "dnf" */
	const char *lock_files[3]; /* in-root, NULL-terminated: probed before commands */
	/* argv vectors (NULL-terminated, free with gp_strv_free). */
	char **(*refresh)(void);
	char **(*install)(const struct gp_pkg_want *want, size_t n);
	char **(*hold)(char *const *names, bool hold);
	/* Removes exactly these packages (with their configuration). */
	char **(*remove)(char *const *names);
	/* The repository file: its in-root path and contents. keyring is the
	 * in-root path of the keyring (signed-by= / gpgkey=), fpr the checked
	 * fingerprint, for a comment. */
	char *(*repo_path)(const struct gp_pkg_repo *repo);
	char *(*repo_text)(const struct gp_pkg_repo *repo, const char *keyring,
	                   const char *fpr);
	/* Where a plain (non-package) keyring is written. */
	char *(*keyring_path)(const struct gp_pkg_repo *repo, bool armored);
};
