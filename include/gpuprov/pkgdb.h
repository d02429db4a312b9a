/* Read-only package databases under a root, for the package layer (pkg.h):
 * dpkg's status file, apt's downloaded Packages lists, rpm's sqlite database
 * (RHEL 9: /var/lib/rpm/rpmdb.sqlite, read with libsqlite3; each row is an
 * rpm header blob, parsed here) and dnf's versionlock list. Nothing here
 * runs a command, writes or prints. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/root.h"

#define GP_DPKG_STATUS "/var/lib/dpkg/status"
#define GP_APT_LISTS "/var/lib/apt/lists"
#define GP_RPMDB_SQLITE "/var/lib/rpm/rpmdb.sqlite"
#define GP_DNF_VERSIONLOCK "/etc/dnf/plugins/versionlock.list"

/* One installed package. version is the backend's full string
 * ("1:535.183.01-0ubuntu1", "3:560.35.03-1.el9"; the rpm epoch only when
 * set). held: dpkg selection "hold" (apt-mark hold) or a versionlock entry. */
struct gp_pkgdb_entry {
	char *name;
	char *version;
	bool held;
	/* Pre-Depends and Depends joined by ", ", and Provides ("" when
	 * absent), for gp_pkgdb_rdepends; rpm's Requires and Provides names
	 * (gp_rpm_header_relations; NULL when its header has them malformed). */
	char *depends, *provides;
	/* An alias only (struct gp_pkgdb): the package's own name. */
	char *of;
};

/* e: one entry per package name (the first of several versions). alias
 * (rpm only): every installed header again under its
 * "name-version-release.arch", the name dnf and the profiles give one
 * version of a package that is installed several times over
 * (kernel-devel-6.12.0-55.9.1.el10_0.x86_64), with no relations. */
struct gp_pkgdb {
	struct gp_pkgdb_entry *e;
	size_t n;
	struct gp_pkgdb_entry *alias;
	size_t n_alias;
};
void gp_pkgdb_free(struct gp_pkgdb *db);
/* The entry of name, else the alias so named; NULL when neither. */
const struct gp_pkgdb_entry *gp_pkgdb_find(const struct gp_pkgdb *db, const char *name);

/* dpkg status text: only packages whose status is "installed" count
 * ("install ok installed", "hold ok installed"); a package selected for hold
 * but not installed is not listed. -EINVAL for a stanza without Package. */
int gp_dpkg_status_parse(const char *text, struct gp_pkgdb *db);
/* The installed packages that removing names takes along, as apt's and
 * dpkg's remove do: each whose Depends or Pre-Depends has a group ("a (>=
 * 1) | b:any") that no installed package outside the removed set satisfies
 * any more (by name or Provides; versions are not compared: a package gone
 * satisfies no version), then those that depend on these, to the closure.
 * Not names themselves; in database order. NULL-terminated, never NULL. */
char **gp_pkgdb_rdepends(const struct gp_pkgdb *db, const char *const *names);
/* <root>/var/lib/dpkg/status; -ENOENT when the root has no dpkg. */
int gp_dpkg_status_read(const struct gp_root *r, struct gp_pkgdb *db);

/* Every version of name in the root's apt lists (*_Packages), newest first
 * (dpkg order), duplicates dropped. An empty list when none. Returns how
 * many Packages lists there are (0: never refreshed), or -errno. */
int gp_apt_candidates(const struct gp_root *r, const char *name, char ***versions);
/* The same for one Packages text (appends to *versions, unsorted). */
void gp_apt_packages_scan(const char *text, const char *name, char ***versions);

/* The stanzas of the root's apt lists, as much of them as the exact-version
 * closure needs. depends is Pre-Depends and Depends joined by ", " ("" when
 * neither). */
struct gp_apt_pkg {
	char *name, *version, *depends;
};
struct gp_apt_index {
	struct gp_apt_pkg *p;
	size_t n, cap;
};
/* Reads every *_Packages list; returns how many there are (0: never
 * refreshed, an empty index), or -errno. */
int gp_apt_index_read(const struct gp_root *r, struct gp_apt_index *ix);
/* Appends the stanzas of one Packages text. */
void gp_apt_index_parse(const char *text, struct gp_apt_index *ix);
void gp_apt_index_free(struct gp_apt_index *ix);
const struct gp_apt_pkg *gp_apt_index_find(const struct gp_apt_index *ix,
                                           const char *name, const char *version);
/* Extends names[i] at versions[i] (NULL-terminated vectors of the same
 * length, full versions) with the transitive closure of their exact-version
 * dependencies: each "dep (= V)" of a member's stanza that is not an
 * alternative ("a | b": apt's choice) and that the index offers at V, added
 * as dep at V. Canonical's driver packages depend on their utilities and
 * libraries that way; pinning only the named ones lets apt pick the newest
 * of the rest and stop with "held broken packages". A name already in the
 * vectors keeps its version. */
void gp_apt_exact_closure(const struct gp_apt_index *ix, char ***names, char ***versions);
/* The newest version of name the index offers whose dependencies without
 * alternatives on any of names[] admit it at versions[] (full versions; the
 * relations =, <<, <=, >=, >>); NULL when no version does. Canonical's
 * prebuilt modules depend on the driver's nvidia-kernel-common at exactly
 * (or within) one release: the version to pin them at with the driver. */
const char *gp_apt_newest_agreeing(const struct gp_apt_index *ix, const char *name,
                                   char *const *names, char *const *versions);

/* dpkg's version order (deb-version(7)): epoch, upstream, revision; '~'
 * sorts before anything, even the end. <0, 0, >0. */
int gp_dpkg_vercmp(const char *a, const char *b);
/* Does full version v have upstream version u ("535.183.01" matches
 * "535.183.01-0ubuntu1" and "1:535.183.01-1")? Also true when v == u. */
bool gp_pkg_version_matches(const char *v, const char *u);

/* NAME, EPOCH, VERSION, RELEASE from an rpm header blob as rpm stores it in
 * its database (index count, data length, index entries, data; no lead or
 * magic). -EINVAL when the blob is malformed or has no name/version. */
int gp_rpm_header_parse(const void *blob, size_t len, char **name, char **version);
/* "NAME-VERSION-RELEASE.ARCH" of an rpm header blob (no epoch, as `rpm -q`
 * and dnf name one installed package), "NAME-VERSION-RELEASE" without an
 * arch (an imported key: gpg-pubkey-f46ea1f0-6b107177); NULL when malformed
 * or without a release. */
char *gp_rpm_header_nvra(const void *blob, size_t len);
/* The Requires and Provides names of an rpm header blob, each list joined
 * by ", " as a dpkg relation field (for gp_pkgdb_rdepends; versions left
 * out, names made safe for its splitting: '(' and ')' as '{' and '}', the
 * characters it cuts at as '_'; file paths and rpmlib() features left out);
 * "" when none. -EINVAL for a malformed blob (then both NULL). */
int gp_rpm_header_relations(const void *blob, size_t len, char **requires,
                            char **provides);
/* The root's rpm database (rpmdb.sqlite opened read-only), held flags from
 * the versionlock list. -ENOENT when there is none. */
int gp_rpmdb_read(const struct gp_root *r, struct gp_pkgdb *db);
/* Names locked by a dnf versionlock.list text ("name-[epoch:]version-release.*"
 * lines; '!' excludes and comments are skipped). */
char **gp_dnf_versionlock_names(const char *text);
