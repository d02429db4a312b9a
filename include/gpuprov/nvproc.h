/* The loaded NVIDIA kernel module of the target root (nvproc.c):
 * <root>/proc/driver/nvidia/version. Nothing here prints or decides. */
#pragma once

#include <stdbool.h>

#include "gpuprov/root.h"

/* The loaded NVIDIA kernel module from <root>/proc/driver/nvidia/version:
 * its version ("535.104.05", free it) and whether it is the open flavor
 * (open may be NULL). -ENOENT when no NVIDIA module is loaded (or /proc is
 * not there), -EINVAL when the file does not look like NVRM's. */
int gp_nvidia_module_read(const struct gp_root *r, char **version, bool *open);
int gp_nvidia_module_parse(const char *text, char **version, bool *open);
