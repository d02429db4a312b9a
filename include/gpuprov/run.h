/* The command runner: argv only, no shell. The program is resolved inside
 * the root (absolute path, or searched in the fixed PATH), the child gets a
 * fresh minimal environment, stdin from /dev/null, its own process group,
 * and runs chrooted when the root is not "/". A timeout kills the whole
 * group (TERM, a grace period, then KILL). stdout and stderr are captured
 * together. Never prints. */
#pragma once

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* Set by the program's SIGTERM/SIGINT/SIGHUP handler to the signal number: a
 * running command's process group is then stopped as on a timeout (TERM,
 * grace, KILL) and waited for, so nothing outlives gpuprov's lock; no new
 * command starts (-EINTR). */
extern volatile sig_atomic_t gp_run_stop_signal;
/* Installs that handler (no SA_RESTART, so waits wake up). */
void gp_run_install_stop_handlers(void);

#define GP_RUN_PATH "/usr/sbin:/usr/bin:/sbin:/bin"

struct gp_run_opts {
	const char *root; /* NULL or "/" for the host, else chroot into it */
	int timeout_ms; /* <= 0: no timeout */
	int kill_grace_ms; /* between TERM and KILL; <= 0: 2000 */
	char *const *extra_env; /* more "K=V" entries, or NULL */
	/* Runs the command in a private mount namespace where the root and
	 * every mount below it are read-only, so that a write fails with EROFS
	 * instead of changing the target: as root, else in a new user namespace
	 * (uid and gid mapped to themselves). When neither can be made, gp_run
	 * runs nothing and says so (read_only_refused). */
	bool read_only;
	/* With read_only, for a query whose program insists on writing (dnf's
	 * lock and logs): an empty private tmpfs on the root's /tmp, and this
	 * directory of the root (NULL: none) seen writable through an overlay
	 * whose upper layer is on that tmpfs; every write is gone with the
	 * namespace. Where either cannot be made the command meets the
	 * read-only root there. */
	const char *scratch_overlay;
};

struct gp_run_result {
	int exit_code; /* when signal == 0; -1 when killed by a signal */
	int signal; /* > 0 when killed by a signal */
	bool timed_out; /* killed by us after timeout_ms (signal says which) */
	int stopped_by; /* killed by us because gpuprov got this signal, else 0 */
	char *output; /* stdout+stderr, NUL-terminated; NULL when gp_run failed */
	size_t output_len;
	/* gp_run failed because read_only was asked and the namespace could
	 * not be made (its return value says why); the command did not run. */
	bool read_only_refused;
};

/* The read-only mount namespace of gp_run_opts.read_only, for a child
 * gpuprov forks itself rather than a program gp_run starts (the NVML probe,
 * src/sys/nvprobe.c). gp_run_read_only_init fills it in the parent (root:
 * NULL or "/" for the host); gp_run_enter_read_only, called in the child
 * before it chroots, makes the root and every mount below it read-only for
 * the child and its children alone, so a write fails with EROFS. It is
 * async-signal-safe; 0, or -1 with errno set when the namespace cannot be
 * made (the caller decides: gp_run reports read_only_refused). */
struct gp_run_read_only {
	const char *root; /* NULL: the host's "/" */
	/* gp_run_opts.scratch_overlay, resolved in the parent ("" for none):
	 * the root's /tmp, where the tmpfs goes; the overlay's directory, its
	 * upper and work directories on the tmpfs, and its mount options. */
	char scratch[PATH_MAX];
	char overlay[PATH_MAX];
	char upper[PATH_MAX + 16], work[PATH_MAX + 16];
	char overlay_opts[3 * PATH_MAX + 64];
	/* "ID ID 1\n": the user namespace, when one is needed, maps the
	 * caller's uid and gid to themselves. */
	char uid_map[32];
	char gid_map[32];
};
void gp_run_read_only_init(struct gp_run_read_only *ro, const char *root);
int gp_run_enter_read_only(const struct gp_run_read_only *ro);

/* 0 when the program ran (look at res), -ENOENT when it does not exist in
 * the root, -EACCES when not executable, -EINVAL for an empty or relative
 * argv[0] or an extra_env entry without '=', other negative errno on failure
 * (a failed chroot or exec in the child comes back as its errno). res is
 * output only: always reset, free it with gp_run_result_free. opts may be
 * NULL. The environment is PATH, LC_ALL=C, HOME=/root,
 * DEBIAN_FRONTEND=noninteractive, the caller's proxy variables (not
 * HTTP_PROXY), then extra_env, whose entries replace same-named ones.
 * After the program exits, output is read until EOF but for at most the
 * grace period: a daemon it left holding the pipe is not waited for, nor
 * killed. */
int gp_run(const struct gp_run_opts *opts, char *const argv[], struct gp_run_result *res);
bool gp_run_succeeded(const struct gp_run_result *res);
/* "exited with status 3", "killed by signal 9 (Killed)", "timed out after 5 s"
 * ("after 250 ms" below a second). Pass the timeout_ms gp_run had; free it. */
char *gp_run_describe(const struct gp_run_result *res, int timeout_ms);
void gp_run_result_free(struct gp_run_result *res);
/* Resolves argv0 inside root the way gp_run does: an absolute path as is, a
 * bare name searched in GP_RUN_PATH; symlinks, absolute ones included, and
 * ".." are followed inside the root. Sets *path (free it) to the in-root
 * path, e.g. "/usr/sbin/update-initramfs", or NULL on error. */
int gp_run_resolve(const char *root, const char *argv0, char **path);
/* Is gpuprov itself chrooted, its / not PID 1's (what systemd's
 * running_in_chroot() asks)? 1 yes, 0 no, -errno when it cannot tell (no
 * /proc): a reboot asked from a chroot would reboot the host it is in. */
int gp_run_self_chrooted(void);
