/* Tests for the command runner: status, output, signals, timeouts that kill the
 * whole process group, program resolution, the minimal environment, stdin, fd
 * hygiene and running chrooted in a tiny busybox root. The tests may use a shell;
 * the runner never does. Chroot needs root (CAP_SYS_CHROOT): those tests skip
 * without it. */
#include <dirent.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

#include "testutil.h"

#include "gpuprov/run.h"
#include "gpuprov/util.h"

static const char *const proxy_vars[] = {
	"http_proxy", "https_proxy", "ftp_proxy", "no_proxy",  "HTTPS_PROXY",
	"FTP_PROXY",  "NO_PROXY",    "all_proxy", "ALL_PROXY", "HTTP_PROXY",
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs argv on the host with opts (or defaults); asserts that it ran. */
static void run_ok(const struct gp_run_opts *opts, char *const argv[],
                   struct gp_run_result *res)
{
	assert_int_equal(gp_run(opts, argv, res), 0);
	assert_non_null(res->output);
	assert_int_equal(strlen(res->output), res->output_len);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ssize_t n;

	assert_true(in >= 0);
	assert_true(out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	assert_int_equal(n, 0);
	close(in);
	assert_int_equal(close(out), 0);
	assert_int_equal(chmod(to, mode), 0);
}

static void make_file(const char *dir, const char *rel, const char *text, mode_t mode)
{
	_cleanup_free_ char *p = gp_xasprintf("%s/%s", dir, rel);

	tu_write(dir, rel, text);
	assert_int_equal(chmod(p, mode), 0);
}

static void make_symlink(const char *dir, const char *rel, const char *target)
{
	_cleanup_free_ char *p = gp_xasprintf("%s/%s", dir, rel);

	assert_int_equal(symlink(target, p), 0);
}

/* A tiny root: busybox, a few scripts, absolute symlinks that only make sense inside
 * it, and a script whose interpreter is missing. */
static char *make_root(void)
{
	char *root = tu_tmpdir();
	_cleanup_free_ char *bb = gp_xasprintf("%s/bin/busybox", root);

	tu_mkdir(root, "bin");
	tu_mkdir(root, "etc/alternatives");
	tu_mkdir(root, "usr/bin");
	tu_mkdir(root, "usr/sbin");
	copy_file("/bin/busybox", bb, 0755);
	make_file(root, "bin/hello", "#!/bin/busybox sh\necho inside; ls /\n", 0755);
	make_file(root, "bin/where", "#!/bin/busybox sh\npwd\n", 0755);
	make_file(root, "usr/sbin/gp-tool", "#!/bin/busybox sh\necho tool \"$@\"\n",
	          0755);
	make_file(root, "bin/gp-noexec", "#!/bin/busybox sh\necho no\n", 0644);
	make_file(root, "bin/gp-broken", "#!/bin/gp-missing-interpreter\n", 0755);
	make_symlink(root, "etc/alternatives/gp-alt", "/usr/sbin/gp-tool");
	make_symlink(root, "usr/bin/gp-alt", "/etc/alternatives/gp-alt");
	make_symlink(root, "usr/bin/gp-rel", "../sbin/gp-tool");
	make_symlink(root, "usr/bin/gp-up", "../../../../../usr/sbin/gp-tool");
	make_symlink(root, "bin/gp-loop", "gp-loop");
	make_symlink(root, "bin/gp-dangling", "/nonexistent");
	make_symlink(root, "bin/gp-hostonly", "/usr/bin/env");
	return root;
}

static bool can_chroot(void)
{
	return geteuid() == 0;
}

static void test_exit_zero(_unused_ void **state)
{
	char *argv[] = { "/bin/true", NULL };
	struct gp_run_result res;
	_cleanup_free_ char *d = NULL;

	run_ok(NULL, argv, &res);
	assert_int_equal(res.exit_code, 0);
	assert_int_equal(res.signal, 0);
	assert_false(res.timed_out);
	assert_true(gp_run_succeeded(&res));
	d = gp_run_describe(&res, 0);
	assert_string_equal(d, "exited with status 0");
	assert_string_equal(res.output, "");
	gp_run_result_free(&res);
	assert_null(res.output);
}

static void test_exit_nonzero(_unused_ void **state)
{
	char *argv[] = { "/bin/sh", "-c", "exit 3", NULL };
	struct gp_run_opts opts = { .root = "/" };
	struct gp_run_result res;
	_cleanup_free_ char *d = NULL;

	run_ok(&opts, argv, &res);
	assert_int_equal(res.exit_code, 3);
	assert_int_equal(res.signal, 0);
	assert_false(gp_run_succeeded(&res));
	d = gp_run_describe(&res, 0);
	assert_string_equal(d, "exited with status 3");
	gp_run_result_free(&res);
}

static void test_output_capture(_unused_ void **state)
{
	char *argv[] = { "sh", "-c", "echo out; echo err >&2; printf tail", NULL };
	struct gp_run_result res;

	run_ok(NULL, argv, &res);
	assert_int_equal(res.exit_code, 0);
	assert_string_equal(res.output, "out\nerr\ntail");
	gp_run_result_free(&res);
}

/* More than a pipe holds: the parent must read while the child writes. */
static void test_large_output(_unused_ void **state)
{
	char *argv[] = { "sh", "-c", "yes abcdefghi | head -c 3000000; echo end >&2",
		         NULL };
	struct gp_run_opts opts = { .timeout_ms = 30000 };
	struct gp_run_result res;

	run_ok(&opts, argv, &res);
	assert_false(res.timed_out);
	assert_int_equal(res.exit_code, 0);
	assert_int_equal(res.output_len, 3000000 + 4);
	assert_memory_equal(res.output, "abcdefghi\n", 10);
	assert_string_equal(res.output + 3000000, "end\n");
	gp_run_result_free(&res);
}

static void test_killed_by_signal(_unused_ void **state)
{
	char *argv[] = { "/bin/sh", "-c", "kill -9 $$", NULL };
	struct gp_run_result res;
	_cleanup_free_ char *d = NULL;

	run_ok(NULL, argv, &res);
	assert_int_equal(res.signal, SIGKILL);
	assert_false(res.timed_out);
	assert_false(gp_run_succeeded(&res));
	d = gp_run_describe(&res, 0);
	assert_string_equal(d, "killed by signal 9 (Killed)");
	gp_run_result_free(&res);
}

/* Parses the pid a test script printed as the first word of its output. */
static pid_t first_pid(const char *output)
{
	long v = strtol(output, NULL, 10);

	assert_true(v > 1);
	return (pid_t)v;
}

/* Without pidfd_open (valgrind): watch /proc until pid is gone or a zombie. */
static bool dead_in_proc(pid_t pid)
{
	char path[64], buf[512], *paren;
	FILE *f;
	bool dead;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	dead = !fgets(buf, sizeof(buf), f) || !(paren = strrchr(buf, ')')) ||
	       paren[1] == '\0' || paren[2] == 'Z' || paren[2] == 'X';
	fclose(f);
	return dead;
}

/* Waits (on a pidfd, no sleeping) until pid has died; it is not our child. */
static void assert_dies(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct pollfd p;

	if (fd < 0 && errno == ENOSYS) {
		int64_t until = now_ms() + 5000;

		while (!dead_in_proc(pid))
			assert_true(now_ms() < until);
		return;
	}
	if (fd < 0) {
		assert_int_equal(errno, ESRCH); /* already gone */
		return;
	}
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 5000), 1);
	close(fd);
}

static void test_timeout_kills_group(_unused_ void **state)
{
	char *argv[] = { "sh", "-c", "sleep 30 & echo $!; sleep 30", NULL };
	struct gp_run_opts opts = { .timeout_ms = 200, .kill_grace_ms = 1000 };
	struct gp_run_result res;
	_cleanup_free_ char *d = NULL;
	int64_t start = now_ms(), took;

	run_ok(&opts, argv, &res);
	took = now_ms() - start;
	assert_true(res.timed_out);
	assert_int_equal(res.signal, SIGTERM);
	assert_false(gp_run_succeeded(&res));
	assert_true(took >= 200);
	assert_true(took < 5000);
	/* The grandchild got TERM with the group; output before the kill is kept. */
	assert_dies(first_pid(res.output));
	d = gp_run_describe(&res, opts.timeout_ms);
	assert_string_equal(d, "timed out after 200 ms");
	gp_run_result_free(&res);
}

/* TERM goes to the whole group, and what the group writes while it shuts down is
 * still captured. The member's trap handler proves it got TERM, not just KILL. */
static void test_timeout_term_reaches_group(_unused_ void **state)
{
	char *argv[] = { "sh", "-c",
		         "sh -c 'trap \"echo member got TERM; exit 0\" TERM; echo ready; "
		         "sleep 30 & wait' & sleep 30",
		         NULL };
	struct gp_run_opts opts = { .timeout_ms = 1000, .kill_grace_ms = 3000 };
	struct gp_run_result res;
	_cleanup_free_ char *d = NULL;

	run_ok(&opts, argv, &res);
	assert_true(res.timed_out);
	assert_string_equal(res.output, "ready\nmember got TERM\n");
	d = gp_run_describe(&res, opts.timeout_ms);
	assert_string_equal(d, "timed out after 1 s");
	gp_run_result_free(&res);
}

/* TERM is ignored by the whole group: KILL after the grace period. */
static void test_timeout_escalates_to_kill(_unused_ void **state)
{
	char *argv[] = { "sh", "-c", "trap '' TERM; sleep 30 & echo $!; sleep 30", NULL };
	struct gp_run_opts opts = { .timeout_ms = 200, .kill_grace_ms = 300 };
	struct gp_run_result res;
	int64_t start = now_ms(), took;

	run_ok(&opts, argv, &res);
	took = now_ms() - start;
	assert_true(res.timed_out);
	assert_int_equal(res.signal, SIGKILL);
	assert_true(took >= 500);
	assert_true(took < 5000);
	assert_dies(first_pid(res.output));
	gp_run_result_free(&res);
}

/* The program exits but a background child keeps the pipe: give up after the grace
 * period instead of waiting for it. */
static void test_background_holds_pipe(_unused_ void **state)
{
	char *argv[] = { "sh", "-c", "sleep 30 & echo $!; echo done", NULL };
	struct gp_run_opts opts = { .kill_grace_ms = 300 };
	struct gp_run_result res;
	int64_t start = now_ms(), took;
	pid_t bg;

	run_ok(&opts, argv, &res);
	took = now_ms() - start;
	assert_false(res.timed_out);
	assert_int_equal(res.exit_code, 0);
	assert_true(took < 5000);
	assert_non_null(strstr(res.output, "\ndone\n"));
	bg = first_pid(res.output);
	kill(bg, SIGKILL);
	assert_dies(bg);
	gp_run_result_free(&res);
}

static void test_own_process_group(_unused_ void **state)
{
	char *argv[] = { "sh", "-c", "echo $$; cut -d' ' -f4,5 /proc/$$/stat", NULL };
	struct gp_run_result res;
	long pid, ppid, pgrp;

	run_ok(NULL, argv, &res);
	assert_int_equal(sscanf(res.output, "%ld\n%ld %ld", &pid, &ppid, &pgrp), 3);
	/* The group's id is the guard's pid (the command's parent), and neither
	 * gpuprov nor the guard is in it. */
	assert_true(ppid != getpid());
	assert_int_equal(pgrp, ppid);
	assert_true(pgrp != getpgrp());
	gp_run_result_free(&res);
}

static void test_missing_program(_unused_ void **state)
{
	char *abs[] = { "/nonexistent/gp-prog", NULL };
	char *bare[] = { "gp-no-such-program", NULL };
	struct gp_run_result res;

	assert_int_equal(gp_run(NULL, abs, &res), -ENOENT);
	assert_null(res.output);
	assert_int_equal(gp_run(NULL, bare, &res), -ENOENT);
	gp_run_result_free(&res);
}

static void test_not_executable(_unused_ void **state)
{
	char *dir = tu_tmpdir();
	_cleanup_free_ char *file = gp_xasprintf("%s/script", dir);
	char *argv[] = { file, NULL };
	char *argv_dir[] = { dir, NULL };
	struct gp_run_result res;

	make_file(dir, "script", "#!/bin/sh\necho no\n", 0644);
	assert_int_equal(gp_run(NULL, argv, &res), -EACCES);
	assert_int_equal(gp_run(NULL, argv_dir, &res), -EACCES);
	tu_rmrf(dir);
	free(dir);
}

static void test_bad_arguments(_unused_ void **state)
{
	char *relative[] = { "bin/sh", NULL };
	char *empty[] = { "", NULL };
	char *none[] = { NULL };
	char *bad_env[] = { "NO_EQUALS_SIGN", NULL };
	char *argv[] = { "/bin/true", NULL };
	struct gp_run_opts opts = { .extra_env = bad_env };
	struct gp_run_result res;

	assert_int_equal(gp_run(NULL, relative, &res), -EINVAL);
	assert_int_equal(gp_run(NULL, empty, &res), -EINVAL);
	assert_int_equal(gp_run(NULL, none, &res), -EINVAL);
	assert_int_equal(gp_run(&opts, argv, &res), -EINVAL);
	gp_run_result_free(&res);
}

/* Splits env output into lines and compares them, in any order, with want. */
static void assert_env(const char *output, const char *const *want, size_t n)
{
	char **got = gp_strv_split(output, '\n');

	assert_int_equal(gp_strv_len(got), n);
	for (size_t i = 0; i < n; i++) {
		if (!gp_strv_contains(got, want[i]))
			fail_msg("missing %s in:\n%s", want[i], output);
	}
	gp_strv_free(got);
}

static void test_minimal_environment(_unused_ void **state)
{
	static const char *const want[] = {
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"LC_ALL=C",
		"HOME=/root",
		"DEBIAN_FRONTEND=noninteractive",
		"https_proxy=http://proxy.test:3128",
		"NO_PROXY=localhost",
	};
	char *argv[] = { "/usr/bin/env", NULL };
	struct gp_run_result res;

	for (size_t i = 0; i < ARRAY_SIZE(proxy_vars); i++)
		unsetenv(proxy_vars[i]);
	setenv("LD_PRELOAD", "/nonexistent/libgp-test.so", 1);
	setenv("LD_LIBRARY_PATH", "/nonexistent", 1);
	setenv("FOO", "bar", 1);
	setenv("https_proxy", "http://proxy.test:3128", 1);
	setenv("NO_PROXY", "localhost", 1);
	/* Left out on purpose (httpoxy). */
	setenv("HTTP_PROXY", "http://evil.test", 1);

	run_ok(NULL, argv, &res);
	unsetenv("LD_PRELOAD");
	unsetenv("LD_LIBRARY_PATH");
	unsetenv("FOO");
	unsetenv("https_proxy");
	unsetenv("NO_PROXY");
	unsetenv("HTTP_PROXY");

	assert_int_equal(res.exit_code, 0);
	assert_env(res.output, want, ARRAY_SIZE(want));
	gp_run_result_free(&res);
}

static void test_extra_env(_unused_ void **state)
{
	static const char *const want[] = {
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8", "HOME=/root",
		"DEBIAN_FRONTEND=noninteractive",     "GP_TEST=1",      "GP_EMPTY=",
	};
	char *extra[] = { "GP_TEST=1", "LC_ALL=C.UTF-8", "GP_EMPTY=", NULL };
	char *argv[] = { "env", NULL };
	struct gp_run_opts opts = { .extra_env = extra };
	struct gp_run_result res;

	for (size_t i = 0; i < ARRAY_SIZE(proxy_vars); i++)
		unsetenv(proxy_vars[i]);
	run_ok(&opts, argv, &res);
	/* An override replaces the entry: no key appears twice. */
	assert_env(res.output, want, ARRAY_SIZE(want));
	gp_run_result_free(&res);
}

static void test_stdin_is_dev_null(_unused_ void **state)
{
	char *cat[] = { "/bin/cat", NULL };
	char *link[] = { "readlink", "/proc/self/fd/0", NULL };
	struct gp_run_opts opts = { .timeout_ms = 10000 };
	struct gp_run_result res;
	int p[2], saved;

	/* Our own stdin holds data: the child must not see it. */
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(write(p[1], "leak\n", 5), 5);
	close(p[1]);
	saved = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
	assert_true(saved >= 0);
	assert_int_equal(dup2(p[0], STDIN_FILENO), STDIN_FILENO);
	close(p[0]);
	run_ok(&opts, cat, &res);
	assert_int_equal(dup2(saved, STDIN_FILENO), STDIN_FILENO);
	close(saved);
	assert_false(res.timed_out);
	assert_int_equal(res.exit_code, 0);
	assert_int_equal(res.output_len, 0);
	gp_run_result_free(&res);

	run_ok(&opts, link, &res);
	assert_string_equal(res.output, "/dev/null\n");
	gp_run_result_free(&res);
}

static void test_no_inherited_fds(_unused_ void **state)
{
	char *argv[] = { "/bin/ls", "/proc/self/fd", NULL };
	struct gp_run_result res;
	int fd = open("/dev/null", O_RDONLY); /* no O_CLOEXEC on purpose */
	int high;

	assert_true(fd >= 0);
	high = dup2(fd, 200);
	assert_int_equal(high, 200);
	run_ok(NULL, argv, &res);
	/* 3 is ls's own handle on the directory. */
	assert_string_equal(res.output, "0\n1\n2\n3\n");
	gp_run_result_free(&res);
	close(fd);
	close(high);
}

static void test_chroot(_unused_ void **state)
{
	char *root;
	char *hello[] = { "/bin/hello", NULL };
	char *bare[] = { "hello", NULL };
	char *where[] = { "where", NULL };
	char *alt[] = { "gp-alt", "a", "b", NULL };
	char *up[] = { "gp-up", NULL };
	struct gp_run_opts opts = { .timeout_ms = 10000 };
	struct gp_run_result res;

	if (!can_chroot())
		skip();
	root = make_root();
	opts.root = root;

	run_ok(&opts, hello, &res);
	assert_int_equal(res.exit_code, 0);
	assert_string_equal(res.output, "inside\nbin\netc\nusr\n");
	gp_run_result_free(&res);

	run_ok(&opts, bare, &res);
	assert_string_equal(res.output, "inside\nbin\netc\nusr\n");
	gp_run_result_free(&res);

	run_ok(&opts, where, &res);
	assert_string_equal(res.output, "/\n");
	gp_run_result_free(&res);

	/* Absolute symlinks resolve inside the root, in the check and the exec. */
	run_ok(&opts, alt, &res);
	assert_string_equal(res.output, "tool a b\n");
	gp_run_result_free(&res);

	run_ok(&opts, up, &res);
	assert_string_equal(res.output, "tool\n");
	gp_run_result_free(&res);

	tu_rmrf(root);
	free(root);
}

/* A failed exec in the child (here: missing interpreter) comes back as -errno. */
static void test_chroot_exec_failure(_unused_ void **state)
{
	char *root;
	char *broken[] = { "gp-broken", NULL };
	char *sh[] = { "sh", NULL };
	struct gp_run_opts opts = { 0 };
	struct gp_run_result res;

	if (!can_chroot())
		skip();
	root = make_root();
	opts.root = root;
	assert_int_equal(gp_run(&opts, broken, &res), -ENOENT);
	assert_null(res.output);
	/* On the host, but not in this root. */
	assert_int_equal(gp_run(&opts, sh, &res), -ENOENT);
	tu_rmrf(root);
	free(root);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* gp_run reaped what it started, on every path. */
static void assert_no_children(void)
{
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

/* Every path through gp_run, failures included, closes what it opened. */
static void test_no_fd_leak(_unused_ void **state)
{
	char *ok[] = { "sh", "-c", "echo hi; exit 1", NULL };
	char *missing[] = { "gp-no-such-program", NULL };
	char *slow[] = { "sleep", "30", NULL };
	char *broken[] = { "gp-broken", NULL };
	struct gp_run_opts opts = { .timeout_ms = 100, .kill_grace_ms = 100 };
	struct gp_run_result res;
	int before = count_fds();
	char *root = NULL;

	run_ok(NULL, ok, &res);
	gp_run_result_free(&res);
	assert_int_equal(gp_run(NULL, missing, &res), -ENOENT);
	run_ok(&opts, slow, &res);
	assert_true(res.timed_out);
	gp_run_result_free(&res);
	if (can_chroot()) {
		root = make_root();
		opts.root = root;
		assert_int_equal(gp_run(&opts, broken, &res), -ENOENT);
		assert_no_children();
		tu_rmrf(root);
		free(root);
	}
	assert_int_equal(count_fds(), before);
	assert_no_children();
}

/* With SIGCHLD ignored the kernel reaps the child: its status is lost, and
 * gp_run must say so rather than report success. */
static void test_sigchld_ignored(_unused_ void **state)
{
	char *argv[] = { "sh", "-c", "exit 7", NULL };
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;
	struct gp_run_result res;

	assert_int_equal(sigaction(SIGCHLD, &ign, &old), 0);
	assert_int_equal(gp_run(NULL, argv, &res), -ECHILD);
	assert_int_equal(sigaction(SIGCHLD, &old, NULL), 0);
	assert_null(res.output);
}

static void expect_resolve(const char *root, const char *name, int want_r,
                           const char *want_path)
{
	char *path = (char *)"unset";
	int r = gp_run_resolve(root, name, &path);

	if (r != want_r)
		fail_msg("resolve %s: got %d, want %d", name, r, want_r);
	if (want_path)
		assert_string_equal(path, want_path);
	else
		assert_null(path);
	free(path);
}

static void test_resolve(_unused_ void **state)
{
	char *root = make_root();
	char *path = NULL;

	expect_resolve(root, "gp-tool", 0, "/usr/sbin/gp-tool");
	expect_resolve(root, "hello", 0, "/bin/hello");
	expect_resolve(root, "gp-alt", 0, "/usr/bin/gp-alt");
	expect_resolve(root, "gp-rel", 0, "/usr/bin/gp-rel");
	/* Too many ".." in a link target stop at the root, as in the chroot. */
	expect_resolve(root, "gp-up", 0, "/usr/bin/gp-up");
	expect_resolve(root, "/bin/gp-loop", -ELOOP, NULL);
	expect_resolve(root, "/bin/gp-dangling", -ENOENT, NULL);
	/* Absolute targets are looked up in the root, not on the host. */
	expect_resolve(root, "gp-hostonly", -ENOENT, NULL);
	expect_resolve(root, "/bin/hello/x", -ENOTDIR, NULL);
	expect_resolve(root, "/usr/./sbin//gp-tool", 0, "/usr/./sbin//gp-tool");
	expect_resolve(root, "/bin/busybox", 0, "/bin/busybox");
	expect_resolve(root, "gp-noexec", -EACCES, NULL);
	expect_resolve(root, "/bin/gp-noexec", -EACCES, NULL);
	expect_resolve(root, "/bin", -EACCES, NULL);
	expect_resolve(root, "env", -ENOENT, NULL);
	expect_resolve(root, "/usr/bin/env", -ENOENT, NULL);
	/* ".." stops at the root, as in the chroot. */
	expect_resolve(root, "/../../bin/hello", 0, "/../../bin/hello");
	expect_resolve(root, "bin/hello", -EINVAL, NULL);
	expect_resolve(root, "", -EINVAL, NULL);

	/* The host: the first match in GP_RUN_PATH. */
	assert_int_equal(gp_run_resolve(NULL, "env", &path), 0);
	assert_true(gp_streq(path, "/usr/bin/env") || gp_streq(path, "/bin/env"));
	free(path);
	assert_int_equal(gp_run_resolve("/", "sh", &path), 0);
	assert_true(gp_str_ends_with(path, "/sh"));
	free(path);

	tu_rmrf(root);
	free(root);
}

static void test_describe(_unused_ void **state)
{
	struct gp_run_result res = { .timed_out = true,
		                     .signal = SIGTERM,
		                     .exit_code = -1 };
	char *d;

	d = gp_run_describe(&res, 5000);
	assert_string_equal(d, "timed out after 5 s");
	free(d);
	d = gp_run_describe(&res, 250);
	assert_string_equal(d, "timed out after 250 ms");
	free(d);
	res.timed_out = false;
	res.signal = SIGSEGV;
	d = gp_run_describe(&res, 0);
	assert_string_equal(d, "killed by signal 11 (Segmentation fault)");
	free(d);
	res = (struct gp_run_result){ .exit_code = 100 };
	d = gp_run_describe(&res, 5000);
	assert_string_equal(d, "exited with status 100");
	free(d);
	gp_run_result_free(NULL);
}

/* Once gpuprov has been asked to stop, no new command starts. */
static void test_no_start_after_stop_signal(void **state)
{
	(void)state;
	char *argv[] = { "/bin/true", NULL };
	struct gp_run_result res;
	gp_run_stop_signal = SIGTERM;
	int rc = gp_run(NULL, argv, &res);
	gp_run_stop_signal = 0;
	assert_int_equal(rc, -EINTR);
	assert_int_equal(gp_run(NULL, argv, &res), 0);
	assert_true(gp_run_succeeded(&res));
	gp_run_result_free(&res);
}

/* A script that tries to change its root three ways; busybox says why each
 * failed. */
static char writer[] = "/bin/writer";

static void make_writer(const char *root, const char *dir)
{
	_cleanup_free_ char *text = gp_xasprintf("#!/bin/busybox sh\n"
	                                         "/bin/busybox touch %s/new\n"
	                                         "/bin/busybox mkdir %s/newdir\n"
	                                         "/bin/busybox rm %s/hello\n"
	                                         "exit 0\n",
	                                         dir, dir, dir);
	make_file(root, "bin/writer", text, 0755);
}

static size_t count_of(const char *text, const char *what)
{
	size_t n = 0;
	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static bool exists_in(const char *dir, const char *rel)
{
	_cleanup_free_ char *p = gp_xasprintf("%s/%s", dir, rel);
	return access(p, F_OK) == 0;
}

/* Runs the writer in root, read-only; 0 when all three writes failed with
 * EROFS and nothing changed in host_dir (the writer's directory as seen from
 * here), else which check failed. For the forked tests too: no cmocka
 * assertion in a child. */
static int writer_refused(const char *root, const char *host_dir)
{
	char *argv[] = { writer, NULL };
	struct gp_run_opts opts = { .root = root,
		                    .timeout_ms = 10000,
		                    .read_only = true };
	struct gp_run_result res;
	if (gp_run(&opts, argv, &res) < 0)
		return 10;
	int rc = count_of(res.output, "Read-only file system") != 3            ? 11
	         : exists_in(host_dir, "new") || exists_in(host_dir, "newdir") ? 12
	         : !exists_in(host_dir, "hello")                               ? 13
	                                                                       : 0;
	gp_run_result_free(&res);
	return rc;
}

/* fn(arg) in a child process: its exit status. */
static int in_child(int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn(arg));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* read_only: every write under the root fails with EROFS, the same command
 * without it writes. */
static void test_read_only_chroot(_unused_ void **state)
{
	if (!can_chroot())
		skip();
	char *root = make_root();
	_cleanup_free_ char *bin = gp_xasprintf("%s/bin", root);
	make_writer(root, "/bin");
	assert_int_equal(writer_refused(root, bin), 0);
	char *argv[] = { writer, NULL };
	struct gp_run_opts opts = { .root = root, .timeout_ms = 10000 };
	struct gp_run_result res;
	run_ok(&opts, argv, &res);
	assert_int_equal(count_of(res.output, "Read-only file system"), 0);
	assert_true(exists_in(bin, "new"));
	assert_false(exists_in(bin, "hello"));
	gp_run_result_free(&res);
	tu_rmrf(root);
	free(root);
}

/* The mounts below the root are read-only too: a tmpfs on /mnt, mounted in
 * a mount namespace of the test's own. */
static int submount_refused(void *root)
{
	_cleanup_free_ char *mnt = gp_xasprintf("%s/mnt", (char *)root);
	_cleanup_free_ char *hello = gp_xasprintf("%s/hello", mnt);
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", mnt, "tmpfs", 0, "mode=0755") < 0)
		return 20;
	int fd = open(hello, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || close(fd) < 0)
		return 21;
	return writer_refused(root, mnt);
}

static void test_read_only_submounts(_unused_ void **state)
{
	if (!can_chroot())
		skip();
	char *root = make_root();
	tu_mkdir(root, "mnt");
	make_writer(root, "/mnt");
	assert_int_equal(in_child(submount_refused, root), 0);
	tu_rmrf(root);
	free(root);
}

/* With the host's root ("/") the whole host is read-only for the command. */
static void test_read_only_host(_unused_ void **state)
{
	if (!can_chroot())
		skip();
	char *dir = tu_tmpdir();
	tu_write(dir, "hello", "keep me\n");
	_cleanup_free_ char *script = gp_xasprintf(
	    "touch %s/new; mkdir %s/newdir; rm %s/hello; exit 0", dir, dir, dir);
	char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct gp_run_opts opts = { .timeout_ms = 10000, .read_only = true };
	struct gp_run_result res;
	run_ok(&opts, argv, &res);
	assert_int_equal(count_of(res.output, "Read-only file system"), 3);
	assert_false(exists_in(dir, "new"));
	assert_false(exists_in(dir, "newdir"));
	assert_true(exists_in(dir, "hello"));
	gp_run_result_free(&res);
	tu_rmrf(dir);
	free(dir);
}

/* Not root: the namespace is made inside a user namespace of the command's
 * own. Skipped where unprivileged user namespaces are off. */
static int become_nobody(void)
{
	/* A process that changed its ids is not dumpable, so its /proc files
	 * (uid_map) stay root's; an exec'd gpuprov run by nobody would be. */
	return setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
	               setresuid(65534, 65534, 65534) < 0 || prctl(PR_SET_DUMPABLE, 1) < 0
	           ? -1
	           : 0;
}

static int unprivileged_userns(_unused_ void *unused)
{
	if (become_nobody() < 0)
		return 30;
	return unshare(CLONE_NEWUSER) < 0 ? 77 : 0;
}

static int unprivileged_writer_refused(void *root)
{
	_cleanup_free_ char *bin = gp_xasprintf("%s/bin", (char *)root);
	if (become_nobody() < 0)
		return 30;
	return writer_refused(root, bin);
}

static void test_read_only_unprivileged(_unused_ void **state)
{
	if (!can_chroot())
		skip();
	char *root = make_root();
	assert_int_equal(chmod(root, 0755), 0);
	make_writer(root, "/bin");
	_cleanup_free_ char *bin = gp_xasprintf("%s/bin", root);
	assert_int_equal(chmod(bin, 0777), 0); /* nobody could write but for read_only */
	if (in_child(unprivileged_userns, NULL) == 77) {
		tu_rmrf(root);
		free(root);
		skip();
	}
	assert_int_equal(in_child(unprivileged_writer_refused, root), 0);
	tu_rmrf(root);
	free(root);
}

/* gp_run_enter_read_only in a process of gpuprov's own (the NVML probe's
 * child): its writes under the root fail with EROFS, the parent's do not. */
static int enter_and_write(void *root)
{
	struct gp_run_read_only ro;
	gp_run_read_only_init(&ro, root);
	if (gp_run_enter_read_only(&ro) < 0)
		return 50;
	_cleanup_free_ char *path = gp_xasprintf("%s/new", (char *)root);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		close(fd);
		return 51;
	}
	return errno == EROFS ? 0 : 52;
}

static void test_enter_read_only(_unused_ void **state)
{
	if (!can_chroot())
		skip();
	char *root = make_root();
	assert_int_equal(in_child(enter_and_write, root), 0);
	assert_false(exists_in(root, "new"));
	tu_write(root, "new", "the parent still writes\n");
	tu_rmrf(root);
	free(root);
}

/* Where no namespace can be made (here: a user namespace allowing none),
 * gp_run runs nothing and says why; without read_only the command runs. */
static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : write(fd, text, strlen(text));
	if (fd >= 0)
		close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int refused_without_namespaces(void *root)
{
	char *argv[] = { writer, NULL };
	struct gp_run_opts opts = { .root = root,
		                    .timeout_ms = 10000,
		                    .read_only = true };
	struct gp_run_result res;
	if (unshare(CLONE_NEWUSER) < 0 ||
	    write_text("/proc/self/setgroups", "deny") < 0 ||
	    write_text("/proc/self/uid_map", "0 0 1\n") < 0 ||
	    write_text("/proc/self/gid_map", "0 0 1\n") < 0)
		return 40;
	if (write_text("/proc/sys/user/max_mnt_namespaces", "0\n") < 0 ||
	    write_text("/proc/sys/user/max_user_namespaces", "0\n") < 0)
		return 41;
	int rc = gp_run(&opts, argv, &res);
	if (rc >= 0 || !res.read_only_refused || res.output)
		return 42;
	opts.read_only = false;
	if (gp_run(&opts, argv, &res) < 0 || res.read_only_refused)
		return 43;
	gp_run_result_free(&res);
	return 0;
}

static void test_read_only_refused(_unused_ void **state)
{
	if (!can_chroot())
		skip();
	char *root = make_root();
	make_writer(root, "/bin");
	assert_int_equal(in_child(refused_without_namespaces, root), 0);
	tu_rmrf(root);
	free(root);
}

/* gpuprov's own chroot: not in this test's process (or cannot tell), yes
 * or cannot tell in a child chrooted into an empty directory (no /proc):
 * either way no reboot is asked for there (context.c). */
static void test_self_chrooted(_unused_ void **state)
{
	if (!can_chroot())
		skip();
	/* 0, or -EACCES where PID 1 may not be looked at (a sandbox). */
	assert_int_not_equal(gp_run_self_chrooted(), 1);
	char *dir = tu_tmpdir();
	pid_t pid = fork();
	if (pid == 0)
		_exit(chroot(dir) == 0 && gp_run_self_chrooted() != 0 ? 0 : 1);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	tu_rmrf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_zero),
		cmocka_unit_test(test_exit_nonzero),
		cmocka_unit_test(test_output_capture),
		cmocka_unit_test(test_large_output),
		cmocka_unit_test(test_killed_by_signal),
		cmocka_unit_test(test_timeout_kills_group),
		cmocka_unit_test(test_timeout_term_reaches_group),
		cmocka_unit_test(test_timeout_escalates_to_kill),
		cmocka_unit_test(test_background_holds_pipe),
		cmocka_unit_test(test_own_process_group),
		cmocka_unit_test(test_missing_program),
		cmocka_unit_test(test_not_executable),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_minimal_environment),
		cmocka_unit_test(test_extra_env),
		cmocka_unit_test(test_stdin_is_dev_null),
		cmocka_unit_test(test_no_inherited_fds),
		cmocka_unit_test(test_chroot),
		cmocka_unit_test(test_chroot_exec_failure),
		cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_no_fd_leak),
		cmocka_unit_test(test_sigchld_ignored),
		cmocka_unit_test(test_describe),
		cmocka_unit_test(test_no_start_after_stop_signal),
		cmocka_unit_test(test_read_only_chroot),
		cmocka_unit_test(test_read_only_submounts),
		cmocka_unit_test(test_read_only_host),
		cmocka_unit_test(test_read_only_unprivileged),
		cmocka_unit_test(test_read_only_refused),
		cmocka_unit_test(test_enter_read_only),
		cmocka_unit_test(test_self_chrooted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
