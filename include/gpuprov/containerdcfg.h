/* containerd's and CRI-O's configuration for the NVIDIA runtime
 * (containerdcfg.c): the drop-in files the container toolkit stage writes,
 * and the one edit gpuprov makes to containerd's own config.toml, its
 * top-level "imports" array, so that containerd reads the drop-in. Memory
 * in, memory out; not a TOML editor: a line-oriented look that refuses
 * what it does not understand rather than guess. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/error.h"

/* What gp_containerd_imports_edit saw in config.toml. */
struct gp_containerd_config {
	int version; /* the top-level "version": 2 or 3; 0 when there is no file */
	/* The first line (1-based) with a table or dotted key of the CRI
	 * plugin, 0 when none: containerd before 2.1 lets a drop-in's plugin
	 * table replace the whole of this one. */
	size_t cri_line;
	bool systemd_cgroup; /* a "SystemdCgroup = true" line */
};

/* config.toml (old, len bytes; NULL or blanks and comments only: no file)
 * with pattern in its top-level imports array: 0 with *out (allocated:
 * old with that one line changed or added after "version", or a new
 * "version = 2" file), *changed and *cfg; -1 with err set (GP_EINPUT,
 * "FILE:LINE: ..." naming the fix): a NUL byte, a multi-line string, an
 * imports array over several lines or with anything but plain strings, a
 * line that is no table header, key or array continuation, no "version"
 * (a version 1 config, which has no imports) or a version other than 2 or
 * 3. file names old in messages. */
int gp_containerd_imports_edit(const char *file, const char *old, size_t len,
                               const char *pattern, char **out, bool *changed,
                               struct gp_containerd_config *cfg, struct gp_err *err);

/* The containerd drop-in for config version (2 or 3): runtime "nvidia" of
 * the CRI plugin, runc-type, running path; default_runtime_name with
 * set_default; SystemdCgroup = true with systemd_cgroup. Allocated. */
char *gp_containerd_dropin(int version, const char *path, bool set_default,
                           bool systemd_cgroup);

/* The CRI-O drop-in: crio.runtime.runtimes.nvidia running path, and
 * default_runtime with set_default. Allocated. */
char *gp_crio_dropin(const char *path, bool set_default);
