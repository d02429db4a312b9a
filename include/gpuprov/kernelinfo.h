/* The running kernel of the target root (kernelinfo.c): boot id and
 * release. Read under the root; nothing here prints or decides. */
#pragma once

#include "gpuprov/root.h"

/* <root>/proc/sys/kernel/random/boot_id, trimmed; NULL when unavailable. */
char *gp_boot_id(const struct gp_root *r);
/* <root>/proc/sys/kernel/osrelease (uname -r of the running kernel); NULL when unavailable. */
char *gp_running_kernel(const struct gp_root *r);
/* The root's machine architecture (uname -m: "x86_64", "aarch64"):
 * <root>/proc/sys/kernel/arch, the kernel.arch sysctl; without it, this
 * machine's uname(2) (a root gpuprov chroots into runs this machine's
 * binaries). NULL when unknown or not a word of letters, digits, '_' and
 * '-' (at most 32). Free it. */
char *gp_root_arch(const struct gp_root *r);
/* Kernel releases installed in the root: /lib/modules/<kver> (with a
 * /boot/vmlinuz-<kver>) and /boot/vmlinuz-<kver>. A string vector, never NULL. */
char **gp_installed_kernels(const struct gp_root *r);
