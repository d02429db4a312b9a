/* The package layer: one interface over apt (Ubuntu, Debian) and dnf
 * (Rocky/RHEL 9). Queries read the root's package database (dpkg status,
 * the rpm database) and see the packages planned earlier in the same run;
 * the gp_effect_pkg_* functions are effects (see context.h): in dry-run they
 * record plan entries, for real they run the backend's commands chrooted,
 * non-interactive, and wait (bounded, with a message) for a dpkg/rpm lock
 * another process holds, never breaking it.
 *
 * The backend comes from the profile's distro.package_manager. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/pkg_types.h"

struct gp_ctx;
struct gp_profile;

/* The target's package manager. -1 with err set when the profile names none. */
int gp_pkg_manager(struct gp_ctx *c, enum gp_pkg_manager *pm);

/* Installed version of name (*version set, free it), or *version NULL when
 * not installed, as the target will look once the effects planned so far
 * in this run are made. 0, or -1 with c->err set when the database cannot be
 * read. Never runs a command. */
int gp_pkg_installed(struct gp_ctx *c, const char *name, char **version);
/* The version of name (allocated) as the database had it before this
 * run's first install or removal, planned installs not counted; NULL when
 * it was not installed. What a plan of the same root sees before its own
 * planned effects. Never runs a command. */
char *gp_pkg_installed_before(struct gp_ctx *c, const char *name);
/* dnf roots: which of want (each with a version) no repository offers at
 * that version, as dnf's cache of them knows (gp_dnf_offers_argv, run
 * read-only): "name-version" each in *missing. 0; -1 with *error (what
 * dnf said) when dnf could not be asked. */
int gp_pkg_dnf_missing(struct gp_ctx *c, const struct gp_pkg_want *want, size_t n,
                       char ***missing, char **error);
/* Is name held (apt-mark hold / dnf versionlock), planned holds included? */
bool gp_pkg_is_held(struct gp_ctx *c, const char *name);

/* Adds the repository (keyring, source list, metadata refresh); nothing
 * when it is already configured with that key. */
int gp_effect_pkg_add_repo(struct gp_ctx *c, const struct gp_pkg_repo *repo);
/* Installs (or up/downgrades to) the wanted versions in one transaction,
 * refreshing metadata at most once per run. Already-satisfied wants are not
 * effects. Held packages among them (and, when it touches the NVIDIA driver
 * set, every held member of that set) are unheld for the transaction and
 * held again after it; the held ones of the driver release it leaves are
 * pinned at the new release's version (see gp_pkg_install_problem). */
int gp_effect_pkg_install(struct gp_ctx *c, const struct gp_pkg_want *want, size_t n);
/* Why gp_effect_pkg_install of these wants would refuse, as the root's apt
 * lists tell now, or NULL (nothing to refuse, dnf, or not known before the
 * refresh): a held package of the NVIDIA driver release the install leaves
 * (installed at the upstream version a pinned member is installed at) is
 * pinned at that member's version, and refused when the lists do not offer
 * it there. For a stage's check to block on before any change. Free it. */
char *gp_pkg_install_problem(struct gp_ctx *c, const struct gp_pkg_want *want, size_t n);
/* Holds (hold=true) or releases the named packages as a set. */
int gp_effect_pkg_hold(struct gp_ctx *c, const char *const *names, size_t n, bool hold);

/* Removes exactly the named packages that are installed (apt-get remove
 * --purge, dnf remove --noautoremove), releasing the held ones first; the
 * journal forgets their records. Nothing installed: not an effect. */
int gp_effect_pkg_remove(struct gp_ctx *c, const char *const *names, size_t n);

/* --- additions (issue 5) ------------------------------------------------ */

/* Frees c->pkg (NULL-safe); the engine calls it when the run ends. */
void gp_pkg_state_free(struct gp_ctx *c);

/* Why the repository cannot be added as described (no keyring URL, no
 * sha256, no or a malformed fingerprint), for a stage's check to block on;
 * NULL when it can. Free it. */
char *gp_pkg_repo_problem(const struct gp_pkg_repo *repo);

/* The NVIDIA driver set installed (or planned) in the root: every package
 * whose name starts with one of NVIDIA's driver prefixes (nvidia-,
 * libnvidia-, linux-modules-nvidia-, linux-objects-nvidia-,
 * linux-signatures-nvidia-, xserver-xorg-video-nvidia-, cuda-drivers,
 * libcuda1, libxnvctrl, kmod-nvidia, nvidia (dnf module packages share the
 * nvidia- prefix)). Sorted; never NULL. For `hold: true`:
 * gp_effect_pkg_hold(c, set, gp_strv_len(set), true). */
char **gp_pkg_nvidia_set(struct gp_ctx *c);

/* Can name be installed from the repositories the root knows? 1 when apt's
 * downloaded lists offer it, 0 when they do not, -ENOENT when that is not
 * known: no apt lists yet (metadata never refreshed), or dnf, whose metadata
 * gpuprov does not read. Installed and planned packages are not considered
 * (ask gp_pkg_installed). Never runs a command. */
int gp_pkg_available(struct gp_ctx *c, const char *name);

/* NVIDIA's CUDA repository as the profile describes it; the driver and CUDA
 * stages add the same one. id cuda-<distro.nvidia_repo>-<dir> ("cuda"
 * without nvidia_repo), URL distro.repo_url or NVIDIA's
 * <nvidia_repo>/<dir>/ directory, <dir> the profile's architecture as NVIDIA
 * names it (gp_arch_nvidia_dir: x86_64, sbsa), flat (suite "/"), keyring from
 * distro.keyring_url and keyring_sha256, key distro.keyring_fingerprint,
 * else (apt only) GP_NVIDIA_APT_KEY. repo's strings point into the profile
 * and into the struct: free it with gp_pkg_nvidia_repo_free. */
struct gp_pkg_nvidia_repo {
	struct gp_pkg_repo repo;
	char *id, *url;
};
void gp_pkg_nvidia_repo(const struct gp_profile *p, struct gp_pkg_nvidia_repo *r);
void gp_pkg_nvidia_repo_free(struct gp_pkg_nvidia_repo *r);
/* Does the distro base want apt sources in deb822 form
 * (distro.apt_sources_format "deb822": Debian 13 and later)? Every apt
 * repository gpuprov adds sets gp_pkg_repo.deb822 from it. */
bool gp_pkg_deb822(const struct gp_profile *p);
/* The key that signs NVIDIA's apt repositories (docs/reference/nvidia.md section 3). */
#define GP_NVIDIA_APT_KEY "EB693B3035CD5710E231E123A4B469963BF863CC"

/* How long the effects wait for a dpkg/rpm lock another process holds:
 * GPUPROV_LOCK_WAIT (seconds) from the environment, default 300. */
#define GP_PKG_LOCK_WAIT_DEFAULT_S 300

/* The keyring path in a cuda-keyring package (NVIDIA's layout); the
 * dry-run's repository file names it before the package is downloaded. */
#define GP_CUDA_KEYRING_PATH "/usr/share/keyrings/cuda-archive-keyring.gpg"

/* The installed packages that removing names (NULL-terminated) would take
 * along: gp_pkgdb_rdepends over the root's dpkg database, with the packages
 * this run already removed counted as gone and not listed. *out is never
 * NULL; none for dnf (its database is read without dependencies). 0, or -1
 * with c->err set. */
int gp_pkg_rdepends(struct gp_ctx *c, const char *const *names, char ***out);
