/* The command runner. gp_run resolves the program inside the root (links and ".."
 * resolved as the chrooted child will see them, through root.c), builds a fresh
 * environment and forks a guard, which forks the command: stdin from /dev/null,
 * stdout+stderr into one pipe, chroot + chdir, every other fd closed, execve. Between
 * fork and exec (and in the guard, which never execs) only async-signal-safe calls
 * are made; a failure is reported through a CLOEXEC pipe. The parent reads the output
 * with poll, waits for the guard (which exits as the command did) through a pidfd,
 * and on timeout kills the command's whole group (TERM, grace, KILL).
 *
 * The guard is there for a gpuprov killed without a chance to stop its command
 * (SIGKILL): it sees end-of-file on a pipe only gpuprov holds, and then kills the
 * command's group and, as the child subreaper of the command's tree, every
 * descendant that left the group (setsid, double fork), so that nothing of a run
 * keeps running outside its lock.
 *
 * A read-only command (opts->read_only) enters, before the chroot, a mount
 * namespace of its own where the root is a bind mount of itself set read-only
 * with every mount below it (mount_setattr, AT_RECURSIVE): a probe that writes
 * (Python's __pycache__) fails with EROFS and the target stays as it was. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuprov/root.h"
#include "gpuprov/run.h"
#include "gpuprov/util.h"

#define DEFAULT_KILL_GRACE_MS 2000
/* Without a pidfd, how often the parent looks whether the child has exited. */
#define EXIT_POLL_MS 50

/* Passed through when the caller has them. Uppercase HTTP_PROXY is left out on
 * purpose (httpoxy: CGI sets it from a request header; curl ignores it too). */
static const char *const proxy_vars[] = {
	"http_proxy", "https_proxy", "ftp_proxy", "no_proxy",  "HTTPS_PROXY",
	"FTP_PROXY",  "NO_PROXY",    "all_proxy", "ALL_PROXY",
};

static void safe_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

volatile sig_atomic_t gp_run_stop_signal;

static void on_stop_signal(int sig)
{
	gp_run_stop_signal = sig;
}

void gp_run_install_stop_handlers(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };
	sigemptyset(&sa.sa_mask);
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* The stop signals, blocked while the parent waits and let through only
 * inside ppoll, so a signal can never slip in between the check and the wait. */
static void stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
}

static bool is_host_root(const char *root)
{
	return !root || !*root || strcmp(root, "/") == 0;
}

/* Checks that path (absolute, in-root) names an executable regular file.
 * The lookup resolves links and ".." inside the root, as the chrooted
 * child will see them. */
static int check_program(const struct gp_root *root, const char *path)
{
	_cleanup_close_ int fd = gp_root_openat(root, path, O_PATH, 0);
	struct stat st;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EACCES;
	/* The kernel's answer: honours ACLs and noexec mounts; root needs one x bit. */
	if (faccessat(fd, "", X_OK, AT_EACCESS | AT_EMPTY_PATH) < 0)
		return -errno;
	return 0;
}

int gp_run_resolve(const char *root, const char *argv0, char **path)
{
	_cleanup_(gp_root_close) struct gp_root rootdir = { .fd = -1 };
	_cleanup_strv_ char **dirs = NULL;
	int r;

	*path = NULL;
	if (!argv0 || !*argv0)
		return -EINVAL;
	/* The child runs in "/", but a relative path is almost surely a mistake. */
	if (argv0[0] != '/' && strchr(argv0, '/'))
		return -EINVAL;

	r = gp_root_open(&rootdir, is_host_root(root) ? "/" : root);
	if (r < 0)
		return r;

	if (argv0[0] == '/') {
		r = check_program(&rootdir, argv0);
		if (r < 0)
			return r;
		*path = gp_xstrdup(argv0);
		return 0;
	}

	/* Like execvp: a non-executable match does not stop the search, but is what
	 * gets reported when nothing better turns up. */
	r = -ENOENT;
	dirs = gp_strv_split(GP_RUN_PATH, ':');
	for (size_t i = 0; dirs[i]; i++) {
		_cleanup_free_ char *p = gp_xasprintf("%s/%s", dirs[i], argv0);
		int k = check_program(&rootdir, p);

		if (k == 0) {
			*path = TAKE_PTR(p);
			return 0;
		}
		if (k == -EACCES)
			r = -EACCES;
	}
	return r;
}

/* Sets "K=V" in env, replacing an entry with the same key so that the child never
 * sees a key twice. */
static int env_set(char ***env, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t klen;

	if (!eq || eq == kv)
		return -EINVAL;
	klen = (size_t)(eq - kv) + 1;
	for (size_t i = 0; (*env)[i]; i++) {
		if (strncmp((*env)[i], kv, klen) == 0) {
			free((*env)[i]);
			(*env)[i] = gp_xstrdup(kv);
			return 0;
		}
	}
	gp_strv_push(env, kv);
	return 0;
}

static int build_env(char *const *extra, char ***ret)
{
	_cleanup_strv_ char **env = gp_xcalloc(1, sizeof(char *));
	int r;

	gp_strv_push(&env, "PATH=" GP_RUN_PATH);
	gp_strv_push(&env, "LC_ALL=C");
	gp_strv_push(&env, "HOME=/root");
	gp_strv_push(&env, "DEBIAN_FRONTEND=noninteractive");
	for (size_t i = 0; i < ARRAY_SIZE(proxy_vars); i++) {
		const char *v = getenv(proxy_vars[i]);

		if (v) {
			_cleanup_free_ char *kv = gp_xasprintf("%s=%s", proxy_vars[i], v);
			gp_strv_push(&env, kv);
		}
	}
	for (size_t i = 0; extra && extra[i]; i++) {
		r = env_set(&env, extra[i]);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(env);
	return 0;
}

/* Moves fd off 0-2 so that the child's dup2() onto stdio never hits one of its own
 * sources (possible when the caller runs with stdio closed). */
static int fd_above_stdio(int fd)
{
	int n, e;

	if (fd < 0 || fd > 2)
		return fd;
	n = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	e = errno;
	close(fd);
	errno = e;
	return n;
}

/* A close-on-exec pipe whose two ends are above stdio. 0 or -errno. */
static int pipe_above_stdio(int *rd, int *wr)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	*rd = fd_above_stdio(p[0]);
	*wr = fd_above_stdio(p[1]);
	return *rd < 0 || *wr < 0 ? -errno : 0;
}

/* Everything the child needs, prepared before fork so that it allocates nothing. */
struct child_setup {
	const char *root; /* NULL: stay on the host */
	const char *path;
	char *const *argv;
	char *const *envp;
	int nullfd;
	int outfd;
	int errfd;
	int maxfd; /* for the close loop on kernels without close_range */
	int life_r; /* read end of the pipe only gpuprov holds the write end of */
	int life_w;
	pid_t parent; /* gpuprov */
	bool read_only;
	struct gp_run_read_only ro;
};

/* What the error pipe carries: where the child failed, and its errno. */
enum child_step { STEP_EXEC, STEP_READ_ONLY };
struct child_failure {
	int step;
	int err;
};

static void close_fds_except(int keep, int maxfd)
{
#ifdef SYS_close_range
	if ((keep == 3 || syscall(SYS_close_range, 3U, (unsigned)keep - 1, 0U) == 0) &&
	    syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0U) == 0)
		return;
#endif
	for (int fd = 3; fd < maxfd; fd++)
		if (fd != keep)
			close(fd);
}

/* Every signal back to its default and none blocked: ignored signals and the mask
 * survive exec, and the program expects defaults. */
static void default_signals(void)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static _Noreturn void report_failure(int errfd, enum child_step step)
{
	struct child_failure f = { .step = step, .err = errno };
	ssize_t n = write(errfd, &f, sizeof(f));

	(void)n;
	_exit(127);
}

static _Noreturn void report_errno(int errfd)
{
	report_failure(errfd, STEP_EXEC);
}

/* Writes text to a /proc file; 0, or -1 with errno set. */
static int write_proc(const char *path, const char *text)
{
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | O_CLOEXEC), e;
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, len);
	e = n < 0 ? errno : EIO;
	close(fd);
	errno = e;
	return n == (ssize_t)len ? 0 : -1;
}

/* A mount namespace of this process's own: as root, else (not root, or a
 * container that refuses it) inside a new user namespace that maps the
 * caller's ids to themselves, where the process has the capabilities to
 * mount and chroot until it execs. 0, or -1 with errno set. */
static int private_mount_ns(const struct gp_run_read_only *s)
{
	if (unshare(CLONE_NEWNS) == 0)
		return 0;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		return -1;
	if (write_proc("/proc/self/setgroups", "deny") < 0 ||
	    write_proc("/proc/self/uid_map", s->uid_map) < 0 ||
	    write_proc("/proc/self/gid_map", s->gid_map) < 0)
		return -1;
	return 0;
}

void gp_run_read_only_init(struct gp_run_read_only *ro, const char *root)
{
	ro->root = is_host_root(root) ? NULL : root;
	ro->scratch[0] = ro->overlay[0] = '\0';
	snprintf(ro->uid_map, sizeof(ro->uid_map), "%u %u 1\n", (unsigned)getuid(),
	         (unsigned)getuid());
	snprintf(ro->gid_map, sizeof(ro->gid_map), "%u %u 1\n", (unsigned)getgid(),
	         (unsigned)getgid());
}

/* A private namespace, propagation to and from the host cut (MS_PRIVATE),
 * the root made a mount of its own (a bind onto itself) and set read-only
 * with all its submounts in one call. */
int gp_run_enter_read_only(const struct gp_run_read_only *s)
{
	const char *top = s->root ? s->root : "/";
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };

	if (private_mount_ns(s) < 0)
		return -1;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	if (s->root && mount(s->root, s->root, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -1;
	if (mount_setattr(AT_FDCWD, top, AT_RECURSIVE, &ro, sizeof(ro)) < 0)
		return -1;
	/* The scratch is a convenience: where it cannot be made, the
	 * command's write fails with EROFS, the root is as it was. */
	if (!s->scratch[0] ||
	    mount("gpuprov-scratch", s->scratch, "tmpfs",
	          MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64m,mode=1777") < 0)
		return 0;
	if (s->overlay[0] && mkdir(s->upper, 0700) == 0 && mkdir(s->work, 0700) == 0)
		(void)mount("gpuprov-scratch", s->overlay, "overlay",
		            MS_NOSUID | MS_NODEV, s->overlay_opts);
	return 0;
}

/* Where dir of the root really is, links resolved inside it, when it is a
 * directory: 0 with out set, else -1. */
static int real_dir(const char *root, const char *dir, char out[PATH_MAX])
{
	_cleanup_(gp_root_close) struct gp_root rootdir = { .fd = -1 };
	if (gp_root_open(&rootdir, is_host_root(root) ? "/" : root) < 0)
		return -1;
	_cleanup_close_ int fd = gp_root_openat(&rootdir, dir, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return -1;
	char link[64];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, out, PATH_MAX - 1);
	if (n <= 0)
		return -1;
	out[n] = '\0';
	return 0;
}

/* gp_run_opts.scratch_overlay's paths and options, made here, not in the
 * child: "" where the root's /tmp or the directory is missing, or a path
 * holds a character overlayfs's options split at. */
static void scratch_paths(const char *root, const char *overlay,
                          struct gp_run_read_only *ro)
{
	if (real_dir(root, "/tmp", ro->scratch) < 0) {
		ro->scratch[0] = '\0';
		return;
	}
	if (real_dir(root, overlay, ro->overlay) < 0 || strpbrk(ro->overlay, ",:\\") ||
	    strpbrk(ro->scratch, ",:\\")) {
		ro->overlay[0] = '\0';
		return;
	}
	snprintf(ro->upper, sizeof ro->upper, "%s/upper", ro->scratch);
	snprintf(ro->work, sizeof ro->work, "%s/work", ro->scratch);
	snprintf(ro->overlay_opts, sizeof ro->overlay_opts,
	         "lowerdir=%s,upperdir=%s,workdir=%s", ro->overlay, ro->upper, ro->work);
}

/* Runs in the command's process: async-signal-safe calls only. */
static _Noreturn void child_exec(const struct child_setup *s, pid_t guard)
{
	default_signals();
	/* If the guard dies without a chance to stop us, stop too; and if it is
	 * already gone, do not start. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
		report_errno(s->errfd);
	if (getppid() != guard) {
		errno = ESRCH;
		report_errno(s->errfd);
	}
	if (dup2(s->nullfd, STDIN_FILENO) < 0 || dup2(s->outfd, STDOUT_FILENO) < 0 ||
	    dup2(s->outfd, STDERR_FILENO) < 0)
		report_errno(s->errfd);
	if (s->read_only && gp_run_enter_read_only(&s->ro) < 0)
		report_failure(s->errfd, STEP_READ_ONLY);
	if (s->root && chroot(s->root) < 0)
		report_errno(s->errfd);
	if (chdir("/") < 0)
		report_errno(s->errfd);
	close_fds_except(s->errfd, s->maxfd);
	execve(s->path, s->argv, s->envp);
	report_errno(s->errfd);
}

/* The pids in /proc/self/task/<tid>/children (the guard has one thread) into
 * pids; how many. Async-signal-safe: no stdio, no allocation. */
static size_t guard_children(pid_t *pids, size_t max)
{
	char path[64] = "/proc/self/task/", digits[16];
	size_t len = strlen(path), nd = 0, n = 0;
	pid_t self = getpid();
	char buf[4096];
	ssize_t got;
	int fd;
	long cur = -1;

	do
		digits[nd++] = (char)('0' + self % 10);
	while ((self /= 10) > 0);
	while (nd)
		path[len++] = digits[--nd];
	memcpy(path + len, "/children", sizeof("/children"));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while ((got = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < got; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				cur = (cur < 0 ? 0 : cur * 10) + (buf[i] - '0');
			} else if (cur >= 0) {
				if (n < max)
					pids[n++] = (pid_t)cur;
				cur = -1;
			}
		}
	}
	if (cur >= 0 && n < max)
		pids[n++] = (pid_t)cur;
	close(fd);
	return n;
}

/* gpuprov is gone: the command's group, and every descendant the kernel hands
 * to us (the subreaper) as its parent dies, is killed and reaped. */
static _Noreturn void guard_kill_all(void)
{
	pid_t kids[256];

	kill(-getpid(), SIGKILL);
	for (;;) {
		size_t n = guard_children(kids, ARRAY_SIZE(kids));

		for (size_t i = 0; i < n; i++) {
			kill(-kids[i], SIGKILL); /* a session or group of its own */
			kill(kids[i], SIGKILL);
		}
		if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD)
			_exit(128 + SIGKILL);
	}
}

/* Ends the guard the way the command ended, so that gpuprov's wait sees the
 * command's own status. */
static _Noreturn void guard_mirror(int status)
{
	if (WIFSIGNALED(status)) {
		const struct rlimit none = { 0, 0 };
		struct sigaction sa = { .sa_handler = SIG_DFL };
		sigset_t one;
		int sig = WTERMSIG(status);

		setrlimit(RLIMIT_CORE, &none); /* the command dumped core, if anyone */
		sigaction(sig, &sa, NULL);
		sigemptyset(&one);
		sigaddset(&one, sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		kill(getpid(), sig);
	}
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
}

/* Runs in the guard, gpuprov's child: async-signal-safe calls only. Starts the
 * command in a process group whose id is the guard's pid, leaves that group,
 * and waits for the command's end or gpuprov's. */
static _Noreturn void guard_run(const struct child_setup *s)
{
	struct sigaction ign = { .sa_handler = SIG_IGN };
	pid_t outer = getpgrp(), guard = getpid(), cmd;
	int pidfd = -1, status;

	default_signals();
	/* The stop signals are for the command: gpuprov sends them to its group
	 * (and a terminal's ^C reaches gpuprov's group, which the guard is in). */
	sigaction(SIGTERM, &ign, NULL);
	sigaction(SIGINT, &ign, NULL);
	sigaction(SIGHUP, &ign, NULL);
	close(s->life_w);
	if (setpgid(0, 0) < 0 || prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		report_errno(s->errfd);
	if (getppid() != s->parent) {
		errno = ESRCH;
		report_errno(s->errfd);
	}
	cmd = fork();
	if (cmd < 0)
		report_errno(s->errfd);
	if (cmd == 0)
		child_exec(s, guard);
	/* The group's id stays this pid (reserved while we live), but only the
	 * command's tree is in it: gpuprov's kill(-pid) never hits the guard. */
	setpgid(0, outer);
	/* Nothing of gpuprov's stays open here: not its output (a reader
	 * waiting for its end), not the lock. */
	dup2(s->nullfd, STDIN_FILENO);
	dup2(s->nullfd, STDOUT_FILENO);
	dup2(s->nullfd, STDERR_FILENO);
	close_fds_except(s->life_r, s->maxfd);
#ifdef SYS_pidfd_open
	pidfd = (int)syscall(SYS_pidfd_open, cmd, 0);
#endif
	for (;;) {
		struct pollfd p[2] = { { .fd = s->life_r, .events = POLLIN },
			               { .fd = pidfd, .events = POLLIN } };
		pid_t w;
		char b;

		poll(p, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : EXIT_POLL_MS);
		/* Reap the command, and orphans of its tree handed to us. */
		while ((w = waitpid(-1, &status, WNOHANG)) > 0)
			if (w == cmd)
				guard_mirror(status);
		if (p[0].revents && read(s->life_r, &b, 1) <= 0)
			guard_kill_all();
	}
}

struct collector {
	pid_t pid;
	int pidfd; /* -1 without pidfd_open: look for the exit every EXIT_POLL_MS */
	int outfd; /* -1 once at EOF */
	bool exited;
	struct gp_buf out;
	bool stoppable; /* a stop signal ends the wait (not while already stopping) */
	sigset_t wait_mask; /* the mask ppoll waits with: stop signals let through */
};

/* Reads what the pipe holds without waiting. */
static void drain(struct collector *c)
{
	char buf[65536];

	while (c->outfd >= 0) {
		ssize_t n = read(c->outfd, buf, sizeof(buf));

		if (n > 0) {
			gp_buf_append(&c->out, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		safe_close(&c->outfd);
	}
}

/* WNOWAIT leaves the zombie in place: its pid, which is also the group id, cannot
 * be reused before we are done signalling the group. */
static void check_exited(struct collector *c)
{
	siginfo_t si = { 0 };

	if (c->exited)
		return;
	if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0) {
		if (si.si_pid == c->pid)
			c->exited = true;
	} else if (errno != EINTR) {
		/* ECHILD (SIGCHLD ignored by the caller): nothing left to wait for. */
		c->exited = true;
	}
}

/* Reads output until the child has exited and, with want_eof, the pipe is closed,
 * or until the monotonic time until (< 0: none). False when time ran out. */
static bool pump(struct collector *c, int64_t until, bool want_eof)
{
	for (;;) {
		struct pollfd p[2];
		nfds_t nfds = 0;
		int ms = -1;

		drain(c);
		check_exited(c);
		if (c->exited && (!want_eof || c->outfd < 0))
			return true;
		if (c->stoppable && gp_run_stop_signal)
			return false;
		if (until >= 0) {
			int64_t left = until - gp_monotonic_ms();

			if (left <= 0)
				return false;
			ms = left > INT_MAX ? INT_MAX : (int)left;
		}
		if (!c->exited && c->pidfd < 0 && (ms < 0 || ms > EXIT_POLL_MS))
			ms = EXIT_POLL_MS;
		if (c->outfd >= 0)
			p[nfds++] = (struct pollfd){ .fd = c->outfd, .events = POLLIN };
		if (!c->exited && c->pidfd >= 0)
			p[nfds++] = (struct pollfd){ .fd = c->pidfd, .events = POLLIN };
		struct timespec ts = { .tv_sec = ms / 1000,
			               .tv_nsec = (ms % 1000) * 1000000L };
		ppoll(p, nfds, ms < 0 ? NULL : &ts, &c->wait_mask);
	}
}

/* Waits for the program and fills res; the child has exec'd. */
static int collect(struct collector *c, const struct gp_run_opts *opts,
                   struct gp_run_result *res)
{
	int grace = opts->kill_grace_ms > 0 ? opts->kill_grace_ms : DEFAULT_KILL_GRACE_MS;
	int64_t deadline = opts->timeout_ms > 0 ? gp_monotonic_ms() + opts->timeout_ms
	                                        : -1;
	int status = 0;

	c->stoppable = true;
	if (pump(c, deadline, false)) {
		/* Done; a background child may still hold the pipe. Read on for a
		 * while, but don't wait on a daemon forever. */
		c->stoppable = false;
		pump(c, gp_monotonic_ms() + grace, true);
	} else {
		c->stoppable = false;
		if (gp_run_stop_signal)
			res->stopped_by = gp_run_stop_signal;
		else
			res->timed_out = true;
		kill(-c->pid, SIGTERM);
		pump(c, gp_monotonic_ms() + grace, true);
		/* Even when the leader is gone: group members may ignore TERM. */
		kill(-c->pid, SIGKILL);
		/* Something outside the group may still hold the pipe: stop reading
		 * after the grace period. */
		pump(c, gp_monotonic_ms() + grace, true);
	}
	drain(c);

	while (waitpid(c->pid, &status, 0) < 0) {
		/* ECHILD: the caller ignores SIGCHLD and the status is lost. */
		if (errno != EINTR) {
			gp_buf_free(&c->out);
			return -errno;
		}
	}
	if (WIFEXITED(status)) {
		res->exit_code = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		res->exit_code = -1;
		res->signal = WTERMSIG(status);
	}
	res->output_len = c->out.len;
	res->output = gp_buf_steal(&c->out);
	return 0;
}

int gp_run(const struct gp_run_opts *opts, char *const argv[], struct gp_run_result *res)
{
	static const struct gp_run_opts defaults = { 0 };
	_cleanup_free_ char *path = NULL;
	_cleanup_strv_ char **envp = NULL;
	_cleanup_close_ int nullfd = -1, out_r = -1, out_w = -1, err_r = -1, err_w = -1;
	_cleanup_close_ int life_r = -1, life_w = -1;
	struct collector c = { .pidfd = -1, .outfd = -1 };
	struct child_setup s;
	struct child_failure failure;
	sigset_t all, old;
	long maxfd;
	int r;
	ssize_t n;
	pid_t pid;

	*res = (struct gp_run_result){ 0 };
	if (!opts)
		opts = &defaults;
	if (!argv || !argv[0])
		return -EINVAL;
	if (gp_run_stop_signal)
		return -EINTR;

	r = gp_run_resolve(opts->root, argv[0], &path);
	if (r < 0)
		return r;
	r = build_env(opts->extra_env, &envp);
	if (r < 0)
		return r;

	nullfd = fd_above_stdio(open("/dev/null", O_RDONLY | O_CLOEXEC));
	if (nullfd < 0)
		return -errno;
	if ((r = pipe_above_stdio(&out_r, &out_w)) < 0 ||
	    (r = pipe_above_stdio(&err_r, &err_w)) < 0)
		return r;
	/* Held open by gpuprov alone while the command runs (see guard_run). */
	if ((r = pipe_above_stdio(&life_r, &life_w)) < 0)
		return r;
	/* Only our end: the child's stdout stays blocking. */
	if (fcntl(out_r, F_SETFL, O_NONBLOCK) < 0)
		return -errno;

	maxfd = sysconf(_SC_OPEN_MAX);
	s = (struct child_setup){
		.root = is_host_root(opts->root) ? NULL : opts->root,
		.path = path,
		.argv = argv,
		.envp = envp,
		.nullfd = nullfd,
		.outfd = out_w,
		.errfd = err_w,
		.maxfd = maxfd > 0 && maxfd < (1 << 20) ? (int)maxfd : 1 << 20,
		.life_r = life_r,
		.life_w = life_w,
		.parent = getpid(),
		.read_only = opts->read_only,
	};
	gp_run_read_only_init(&s.ro, opts->root);
	/* Resolved here, not in the child: a link in the root may not lead
	 * the tmpfs out of it. */
	if (opts->read_only && opts->scratch_overlay)
		scratch_paths(opts->root, opts->scratch_overlay, &s.ro);

	/* No handler of ours may run in the child before it resets them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = fork();
	if (pid == 0)
		guard_run(&s);
	r = pid < 0 ? -errno : 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		return r;

	/* No setpgid from this side: the guard makes the group and then leaves it;
	 * the group exists before the error pipe's end-of-file, the first moment
	 * gpuprov may signal it. */
	safe_close(&life_r);
	safe_close(&out_w);
	safe_close(&err_w);
	safe_close(&nullfd);

	/* EOF: the exec succeeded and closed the CLOEXEC pipe. */
	do
		n = read(err_r, &failure, sizeof(failure));
	while (n < 0 && errno == EINTR);
	if (n != 0) {
		bool whole = n == (ssize_t)sizeof(failure);

		r = whole ? -failure.err : -EIO;
		res->read_only_refused = whole && failure.step == STEP_READ_ONLY;
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return r;
	}

	c.pid = pid;
	/* Stop signals stay blocked while we wait, except inside ppoll. */
	sigset_t stops, before;
	stop_signals(&stops);
	pthread_sigmask(SIG_BLOCK, &stops, &before);
	c.wait_mask = before;
	sigdelset(&c.wait_mask, SIGTERM);
	sigdelset(&c.wait_mask, SIGINT);
	sigdelset(&c.wait_mask, SIGHUP);
#ifdef SYS_pidfd_open
	c.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif
	c.outfd = TAKE_FD(out_r);
	r = collect(&c, opts, res);
	pthread_sigmask(SIG_SETMASK, &before, NULL);
	safe_close(&c.pidfd);
	safe_close(&c.outfd);
	return r;
}

bool gp_run_succeeded(const struct gp_run_result *res)
{
	return !res->timed_out && !res->stopped_by && res->signal == 0 &&
	       res->exit_code == 0;
}

char *gp_run_describe(const struct gp_run_result *res, int timeout_ms)
{
	if (res->stopped_by) {
		const char *d = sigdescr_np(res->stopped_by);
		return gp_xasprintf("stopped because gpuprov received signal %d (%s)",
		                    res->stopped_by, d ? d : "unknown signal");
	}
	if (res->timed_out) {
		if (timeout_ms >= 1000)
			return gp_xasprintf("timed out after %d s", timeout_ms / 1000);
		if (timeout_ms > 0)
			return gp_xasprintf("timed out after %d ms", timeout_ms);
		return gp_xstrdup("timed out");
	}
	if (res->signal > 0) {
		/* Unlike strsignal, sigdescr_np never writes a shared buffer. */
		const char *d = sigdescr_np(res->signal);

		return gp_xasprintf("killed by signal %d (%s)", res->signal,
		                    d ? d : "unknown signal");
	}
	return gp_xasprintf("exited with status %d", res->exit_code);
}

void gp_run_result_free(struct gp_run_result *res)
{
	if (!res)
		return;
	free(res->output);
	*res = (struct gp_run_result){ 0 };
}

int gp_run_self_chrooted(void)
{
	struct stat init_root, own_root;
	if (stat("/proc/1/root", &init_root) < 0 || stat("/", &own_root) < 0)
		return -errno;
	return init_root.st_dev != own_root.st_dev || init_root.st_ino != own_root.st_ino;
}
