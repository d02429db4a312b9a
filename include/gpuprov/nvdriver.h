/* NVIDIA driver knowledge for the driver stage: which packages make up a
 * driver of a branch (Canonical's archive names or NVIDIA's repository
 * names), the module flavor a set of GPUs needs, the runfile installer's
 * command line and kernel release ordering. Pure: no I/O, unit-tested. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/gpus.h"
#include "gpuprov/pkg_types.h"

enum gp_drv_method { GP_DRV_APT, GP_DRV_DNF, GP_DRV_RUNFILE };
enum gp_drv_source { GP_DRV_CANONICAL, GP_DRV_NVIDIA };

/* The module flavor a set of GPUs can use: FLAVOR_ANY when both serve all
 * of them, CONFLICT when one needs open (Blackwell, Grace Hopper) and
 * another proprietary (Volta and older); *needs_open and *needs_prop (may
 * be NULL) get the first GPU needing each. */
enum gp_flavor_need {
	GP_FLAVOR_ANY,
	GP_FLAVOR_OPEN,
	GP_FLAVOR_PROPRIETARY,
	GP_FLAVOR_CONFLICT
};
enum gp_flavor_need gp_gpus_flavor_need(const struct gp_gpu_info *const *gpus, size_t n,
                                        const struct gp_gpu_info **needs_open,
                                        const struct gp_gpu_info **needs_prop);

/* NVIDIA's default flavor for a driver branch or version when the GPUs do
 * not decide: open from R560 (560.28.03 made them the default), proprietary
 * before. */
#define GP_OPEN_DEFAULT_BRANCH "560"
bool gp_driver_open_by_default(const char *branch_or_version);

/* "modules": "auto" resolved for the GPUs present: 0 with *open set, or -1
 * when no flavor drives all of them (CONFLICT). GPUs gpuprov does not know
 * (unknown ids) do not decide: they follow NVIDIA's default for the branch. */
int gp_driver_auto_flavor(const struct gp_gpu_info *const *gpus, size_t n,
                          const char *branch_or_version, bool *open);

/* What the driver stage installs. */
struct gp_drv_choice {
	enum gp_drv_method method;
	enum gp_drv_source source; /* apt only; dnf is always NVIDIA's */
	const char *branch; /* "535" */
	const char *version; /* exact "535.183.01", or NULL: the branch's newest */
	bool server; /* Canonical's -server packages */
	bool open; /* module flavor, resolved */
	bool prebuilt; /* Canonical's signed linux-modules-nvidia-* instead of DKMS */
	char *const *kernels; /* releases to cover: the running kernel, then newer */
	const char *kernel_flavour; /* "generic": the meta package's suffix, or NULL */
	bool
	    no_streams; /* dnf without module streams (RHEL 10): nvidia-open, cuda-drivers */
};

struct gp_drv_pkgs {
	struct gp_pkg_want *want; /* names owned; versions point into the choice */
	size_t n_want;
	char *probe; /* the package whose installed version is the driver's */
};
/* (`hold: true` holds the whole installed NVIDIA set: gp_pkg_nvidia_set.) */

/* "535-server-open": the Canonical name suffix (branch, -server, -open). */
char *gp_drv_suffix(const struct gp_drv_choice *ch);
/* The packages for an apt or dnf choice, kernel headers not included (the
 * stage adds the headers it finds missing). */
void gp_drv_packages(const struct gp_drv_choice *ch, struct gp_drv_pkgs *out);
void gp_drv_pkgs_free(struct gp_drv_pkgs *p);
/* The branch an NVIDIA package name carries ("535" of
 * nvidia-driver-535-server, linux-modules-nvidia-535-server-5.15.0-91-generic,
 * nvidia-fabricmanager-535): its first dash-separated field of three
 * digits, malloc'd; NULL when it has none (nvidia-settings, dnf's names). */
char *gp_drv_package_branch(const char *name);
/* Is the installed NVIDIA package name one the apt driver of choice ch leaves
 * behind: of another branch (an upgrade 535 -> 580), or the DKMS package of
 * its own when ch takes Canonical's prebuilt modules? The stage removes
 * those rather than leave them installed and held. */
bool gp_drv_package_leaves(const struct gp_drv_choice *ch, const char *name);
/* Is the Canonical package name of the branch of ch but of another flavor
 * (-server or plain; -open or the proprietary modules' own packages:
 * nvidia-driver-, nvidia-dkms-, nvidia-kernel-source-,
 * linux-modules-nvidia-, linux-objects-nvidia-, which the open flavor has
 * as -open twins; the libraries and utilities the two share are not)? With
 * NVIDIA's repository as the source, also its meta package of the other
 * module flavor (nvidia-open-<BR> or cuda-drivers-<BR>); with dnf without
 * module streams (RHEL 10), nvidia-open or cuda-drivers and the DKMS
 * package of that flavor (kmod-nvidia-open-dkms, kmod-nvidia-latest-dkms).
 * The stage removes those of them its own install brought. */
bool gp_drv_package_other_flavor(const struct gp_drv_choice *ch, const char *name);

/* "NVIDIA-Linux-<arch>-<version>.run" (arch as uname -m: x86_64, aarch64)
 * and its default download URL. */
char *gp_drv_runfile_name(const char *arch, const char *version);
char *gp_drv_runfile_url(const char *arch, const char *version);
/* The installer's argv, run chrooted: silent, DKMS, the module type, no
 * nouveau handling of its own (the nouveau stage owns that), no X
 * configuration, and MOK signing when key and cert are given (both or
 * neither). */
char **gp_drv_runfile_argv(const char *path, bool open, const char *key,
                           const char *cert);

/* The flavour of a kernel release, as Ubuntu names it ("generic" for
 * "5.15.0-91-generic", "aws" for "6.8.0-1012-aws", "generic-64k" for arm64's
 * "6.8.0-31-generic-64k"); NULL when the release has
 * no "-<number>-<word>" tail. Free it. */
char *gp_kernel_flavour(const char *kver);
/* Kernel releases compared as rpmvercmp does: digit runs as numbers, other
 * runs as text ("5.15.0-101-generic" > "5.15.0-91-generic"). */
int gp_kver_compare(const char *a, const char *b);
/* The upstream part of a package version: "535.183.01" of
 * "535.183.01-0ubuntu0.22.04.1" and of "3:535.183.01-1.el9". Free it. */
char *gp_pkg_upstream_version(const char *v);
/* Does an installed upstream version satisfy the profile (the exact version
 * when given, else the branch's major)? */
bool gp_driver_version_matches(const char *upstream, const char *branch,
                               const char *version);
