/* The machine architectures gpuprov knows ("x86_64", "aarch64": uname -m,
 * match.arch) and the names vendors give them in URLs and paths (arch.c).
 * Every architecture-dependent URL or package name is built from these,
 * never spelt for one architecture. Pure: no I/O. */
#pragma once

#include <stdbool.h>

/* The architecture when nothing says otherwise. */
#define GP_ARCH_DEFAULT "x86_64"

/* Is arch one gpuprov knows? */
bool gp_arch_known(const char *arch);
/* NVIDIA's directory for it in the CUDA repositories and in the cuDNN and
 * CUDA redistributables: "x86_64", "sbsa" (arm64 servers; NVIDIA has no
 * "arm64" directory). NULL for an unknown arch. */
const char *gp_arch_nvidia_dir(const char *arch);
/* Debian's name for it ("amd64", "arm64"), as in apt repository paths such
 * as NVIDIA's container toolkit's deb/amd64/. NULL when unknown. */
const char *gp_arch_deb_name(const char *arch);
/* The multiarch library directory: "/usr/lib/x86_64-linux-gnu",
 * "/usr/lib/aarch64-linux-gnu" (Debian, Ubuntu). NULL when unknown. */
const char *gp_arch_multiarch_libdir(const char *arch);
/* The multiarch include directory: "/usr/include/x86_64-linux-gnu" etc. */
const char *gp_arch_multiarch_includedir(const char *arch);
/* May the proprietary kernel modules be installed there? Not on aarch64:
 * its servers (Grace Hopper, Grace Blackwell) run the open modules, the
 * only ones gpuprov supports there. */
bool gp_arch_has_proprietary_modules(const char *arch);
