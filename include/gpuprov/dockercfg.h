/* Docker's daemon configuration (/etc/docker/daemon.json) merged with the
 * runtime the container toolkit stage owns (src/pure/dockercfg.c): memory
 * in, memory out. Every member gpuprov does not own is kept as it was;
 * only runtimes.<name> and, when asked, default-runtime are set. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/error.h"

/* What the merge owns: runtimes.<name> = {"path": path, "runtimeArgs": []}
 * and, with set_default, "default-runtime": name. */
struct gp_docker_runtime {
	const char *name; /* "nvidia" */
	const char *path; /* "nvidia-container-runtime" */
	bool set_default;
};

/* Merges rt into the daemon.json text old (len bytes; NULL or only
 * whitespace: no file yet). 0 with *out (allocated, 4-space indented, ending
 * in a newline) and *changed (whether the merged document differs from old's
 * as JSON: formatting and member order do not count), or -1 with err set
 * (GP_EINPUT, "FILE:LINE:COL: ..." or "FILE: ..." naming the fix): not JSON,
 * not an object, "runtimes" or its rt->name entry not an object, or a number
 * that would not be written back exactly (beyond 2^53). file names old in
 * messages. */
int gp_docker_daemon_merge(const char *file, const char *old, size_t len,
                           const struct gp_docker_runtime *rt, char **out, bool *changed,
                           struct gp_err *err);

/* What old configures for rt, for verify: 0 with *has_runtime (runtimes.<name>
 * has path rt->path) and *is_default (default-runtime is rt->name); -1 with
 * err set as gp_docker_daemon_merge. */
int gp_docker_daemon_inspect(const char *file, const char *old, size_t len,
                             const struct gp_docker_runtime *rt, bool *has_runtime,
                             bool *is_default, struct gp_err *err);
