/* The effect door: dry-run records and touches nothing; a real run backs
 * up, writes atomically, journals and logs; reads see planned writes. */
#include "testutil.h"

#include "gpuprov/context.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/pkg.h"
#include "gpuprov/run.h"

struct fixture {
	char *dir;
	struct gp_ctx c;
	struct gp_err err;
	struct gp_out out;
	struct gp_stage_plan *sp;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	f->dir = tu_tmpdir();
	tu_write(f->dir, "etc/existing.conf", "operator's version\n");
	tu_mkdir(f->dir, "var/log");
	assert_int_equal(gp_root_open(&f->c.root, f->dir), 0);
	gp_out_init(&f->out, stdout, stderr);
	f->c.out = &f->out;
	f->c.err = &f->err;
	f->c.log_fd = -1;
	f->c.cmd_timeout_ms = 10000;
	struct gp_err err = { 0 };
	assert_int_equal(gp_journal_load(&f->c.root, &f->c.journal, &err), 0);
	f->c.plan = gp_plan_new("test", "0000", f->dir, true);
	f->sp = gp_plan_add_stage(f->c.plan, "env", "test stage");
	f->c.stage = f->sp;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	gp_plan_free(f->c.plan);
	gp_journal_free(&f->c.journal);
	gp_root_close(&f->c.root);
	tu_rmrf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static char *slurp(const char *dir, const char *rel)
{
	char path[PATH_MAX * 2];
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return NULL;
	char *buf = calloc(1, 65536);
	size_t n = fread(buf, 1, 65535, fp);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

static void test_dry_run_records_only(void **state)
{
	struct fixture *f = *state;
	f->c.mode = GP_MODE_PLAN;
	assert_int_equal(gp_effect_write(&f->c, "/etc/new.conf", "new\n", 4, 0644), 0);
	assert_int_equal(
	    gp_effect_write(&f->c, "/etc/existing.conf", "changed\n", 8, 0644), 0);
	assert_int_equal(gp_effect_remove(&f->c, "/etc/existing.conf"), 0);
	assert_int_equal(gp_effect_symlink(&f->c, "cuda-11.8", "/usr/local/cuda"), 0);
	assert_int_equal(gp_effect_mkdir(&f->c, "/opt/conda", 0755), 0);
	char *const argv[] = { "/bin/does-not-exist", "--flag", NULL };
	assert_int_equal(gp_effect_run(&f->c, argv), 0);
	gp_effect_reboot(&f->c, "because");
	/* The reboot: Debian's flag file and package list, then the reboot. */
	assert_int_equal(f->sp->n_effects, 9);
	assert_string_equal(f->sp->effects[6].path, GP_REBOOT_REQUIRED);
	assert_string_equal(f->sp->effects[7].path, GP_REBOOT_REQUIRED_PKGS);
	assert_string_equal(f->sp->effects[7].new_data, "gpuprov\n");
	assert_int_equal(f->sp->effects[8].kind, GP_EFFECT_REBOOT);
	assert_int_equal(f->sp->effects[0].kind, GP_EFFECT_WRITE);
	assert_false(f->sp->effects[0].old_exists);
	assert_true(f->sp->effects[1].old_exists);
	assert_string_equal(f->sp->effects[1].old_data, "operator's version\n");
	assert_int_equal(f->sp->effects[5].kind, GP_EFFECT_RUN);
	assert_string_equal(f->sp->effects[5].argv[1], "--flag");
	assert_true(f->c.reboot_requested);
	assert_true(gp_plan_reboot_required(f->c.plan));
	/* Nothing on disk changed. */
	char *text = slurp(f->dir, "etc/existing.conf");
	assert_string_equal(text, "operator's version\n");
	free(text);
	assert_null(slurp(f->dir, "etc/new.conf"));
	assert_false(gp_root_exists(&f->c.root, "/opt"));
	assert_false(gp_root_exists(&f->c.root, "/var/lib/gpuprov"));
	assert_false(gp_root_exists(&f->c.root, GP_REBOOT_REQUIRED));
}

/* The effect door refuses effect, called in verify mode, with an internal
 * error (never a crash); the stage's plan entry gets nothing. */
#define assert_refused_in_verify(f, call, effect)                                        \
	do {                                                                             \
		(f)->err = (struct gp_err){ 0 };                                         \
		assert_int_equal((call), -1);                                            \
		assert_int_equal((f)->err.code, GP_EFAILED);                             \
		assert_non_null(strstr((f)->err.msg, "internal error: " effect           \
		                                     " called in verify mode"));         \
	} while (0)

static void test_verify_refuses_every_effect(void **state)
{
	struct fixture *f = *state;
	f->c.mode = GP_MODE_VERIFY;
	char *const argv[] = { "/bin/true", NULL };
	const struct gp_fetch_artifact a = {
		.url = "file:///nonexistent/cudnn.tar.xz",
		.sha256 =
		    "0000000000000000000000000000000000000000000000000000000000000000",
	};
	const struct gp_pkg_want want = { "nvidia-driver-535", NULL };
	const char *const names[] = { "nvidia-driver-535" };
	const struct gp_pkg_repo repo = { .id = "cuda" };
	/* With a current stage, and without one, as the engine's verify runs. */
	for (int pass = 0; pass < 2; pass++) {
		f->c.stage = pass ? NULL : f->sp;
		char *path = NULL;
		struct gp_run_result failed;
		assert_refused_in_verify(
		    f, gp_effect_write(&f->c, "/etc/existing.conf", "x\n", 2, 0644),
		    "gp_effect_write");
		assert_refused_in_verify(
		    f,
		    gp_effect_write_over(&f->c, "/etc/a.conf", "x\n", 2, 0644, "conda"),
		    "gp_effect_write_over");
		assert_refused_in_verify(f,
		                         gp_effect_write_download(&f->c, "/etc/k.gpg",
		                                                  NULL, 0, 0644, a.url,
		                                                  a.sha256),
		                         "gp_effect_write_download");
		assert_refused_in_verify(f, gp_effect_remove(&f->c, "/etc/existing.conf"),
		                         "gp_effect_remove");
		assert_refused_in_verify(
		    f, gp_effect_symlink(&f->c, "cuda-11.8", "/usr/local/cuda"),
		    "gp_effect_symlink");
		assert_refused_in_verify(f, gp_effect_mkdir(&f->c, "/opt/conda", 0755),
		                         "gp_effect_mkdir");
		assert_refused_in_verify(f, gp_effect_run(&f->c, argv), "gp_effect_run");
		assert_refused_in_verify(f, gp_effect_run_result(&f->c, argv, &failed),
		                         "gp_effect_run");
		assert_null(failed.output);
		assert_refused_in_verify(f, gp_effect_reboot(&f->c, "because"),
		                         "gp_effect_reboot");
		assert_refused_in_verify(f, gp_effect_download(&f->c, &a, &path),
		                         "gp_effect_download");
		assert_null(path);
		assert_refused_in_verify(
		    f, gp_effect_download_extract(&f->c, &a, "/opt/x", 0),
		    "gp_effect_download_extract");
		assert_refused_in_verify(f, gp_effect_remove_tree(&f->c, "/etc"),
		                         "gp_effect_remove_tree");
		assert_refused_in_verify(f, gp_effect_pkg_install(&f->c, &want, 1),
		                         "gp_effect_pkg_install");
		assert_refused_in_verify(f, gp_effect_pkg_hold(&f->c, names, 1, true),
		                         "gp_effect_pkg_hold");
		assert_refused_in_verify(f, gp_effect_pkg_add_repo(&f->c, &repo),
		                         "gp_effect_pkg_add_repo");
		/* Not effects: ignored outside apply mode. */
		gp_prefetch_add(&f->c, &a);
		assert_int_equal(gp_ctx_prefetch_start(&f->c), 0);
	}
	assert_int_equal(f->sp->n_effects, 0);
	assert_false(f->c.reboot_requested);
	assert_null(f->c.fetcher);
	assert_null(f->c.prefetch);
	char *text = slurp(f->dir, "etc/existing.conf");
	assert_string_equal(text, "operator's version\n");
	free(text);
	assert_false(gp_root_exists(&f->c.root, "/opt"));
	assert_false(gp_root_exists(&f->c.root, "/usr"));
	assert_false(gp_root_exists(&f->c.root, "/var/lib/gpuprov"));
	/* Outside a stage in plan mode too: an internal error, not a crash. */
	f->c.mode = GP_MODE_PLAN;
	f->c.stage = NULL;
	f->err = (struct gp_err){ 0 };
	assert_int_equal(gp_effect_mkdir(&f->c, "/opt/conda", 0755), -1);
	assert_non_null(strstr(f->err.msg, "internal error: gp_effect_mkdir called "
	                                   "outside a stage"));
	f->c.stage = f->sp;
}

static void test_reads_see_planned_writes(void **state)
{
	struct fixture *f = *state;
	f->c.mode = GP_MODE_PLAN;
	assert_int_equal(gp_effect_write(&f->c, "/etc/a.conf", "planned\n", 8, 0644), 0);
	char *data = NULL;
	size_t len = 0;
	assert_int_equal(gp_ctx_read(&f->c, "/etc/a.conf", &data, &len), 0);
	assert_string_equal(data, "planned\n");
	free(data);
	assert_true(gp_ctx_exists(&f->c, "/etc/a.conf"));
	assert_int_equal(gp_effect_remove(&f->c, "/etc/existing.conf"), 0);
	assert_int_equal(gp_ctx_read(&f->c, "/etc/existing.conf", &data, &len), -ENOENT);
	assert_false(gp_ctx_exists(&f->c, "/etc/existing.conf"));
	/* Writing what is (planned to be) there already is no effect. */
	size_t before = f->sp->n_effects;
	assert_int_equal(gp_effect_write(&f->c, "/etc/a.conf", "planned\n", 8, 0644), 0);
	assert_int_equal(f->sp->n_effects, before);
}

static void test_real_write_backs_up_and_journals(void **state)
{
	struct fixture *f = *state;
	f->c.mode = GP_MODE_APPLY;
	assert_int_equal(
	    gp_effect_write(&f->c, "/etc/existing.conf", "gpuprov's\n", 10, 0600), 0);
	char *text = slurp(f->dir, "etc/existing.conf");
	assert_string_equal(text, "gpuprov's\n");
	free(text);
	text = slurp(f->dir, "var/lib/gpuprov/backup/etc/existing.conf");
	assert_non_null(text);
	assert_string_equal(text, "operator's version\n");
	free(text);
	struct stat st;
	assert_int_equal(gp_root_stat(&f->c.root, "/etc/existing.conf", &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	char sha[65];
	gp_sha256_hex("gpuprov's\n", 10, sha);
	assert_string_equal(gp_journal_file_sha256(&f->c.journal, "/etc/existing.conf"),
	                    sha);
	/* The journal on disk says the same (saved after each effect). */
	text = slurp(f->dir, "var/lib/gpuprov/state.json");
	assert_non_null(strstr(text, sha));
	free(text);
	/* Rewriting gpuprov's own file takes no second backup. */
	assert_int_equal(gp_effect_write(&f->c, "/etc/existing.conf", "again\n", 6, 0600),
	                 0);
	assert_false(
	    gp_root_exists(&f->c.root, "/var/lib/gpuprov/backup/etc/existing.conf.1"));
	/* A write into a missing directory creates it. */
	assert_int_equal(gp_effect_write(&f->c, "/etc/profile.d/x.sh", "x\n", 2, 0644),
	                 0);
	assert_true(gp_root_exists(&f->c.root, "/etc/profile.d/x.sh"));
}

/* Binary content (an OpenPGP keyring) survives the plan and the write:
 * NUL bytes included. */
static void test_binary_write(void **state)
{
	struct fixture *f = *state;
	static const char key[] = { (char)0x99, 0, 5, 4, 0, 0, 0, 1 };
	f->c.mode = GP_MODE_PLAN;
	assert_int_equal(gp_effect_write(&f->c, "/etc/k.gpg", key, sizeof key, 0644), 0);
	char *data = NULL;
	size_t len = 0;
	assert_int_equal(gp_ctx_read(&f->c, "/etc/k.gpg", &data, &len), 0);
	assert_int_equal(len, sizeof key);
	assert_memory_equal(data, key, sizeof key);
	free(data);
	f->c.mode = GP_MODE_APPLY;
	assert_int_equal(gp_effect_write(&f->c, "/etc/k2.gpg", key, sizeof key, 0644), 0);
	assert_int_equal(gp_root_read(&f->c.root, "/etc/k2.gpg", &data, &len), 0);
	assert_int_equal(len, sizeof key);
	assert_memory_equal(data, key, sizeof key);
	free(data);
}

static void test_real_remove_backs_up(void **state)
{
	struct fixture *f = *state;
	f->c.mode = GP_MODE_APPLY;
	assert_int_equal(gp_effect_remove(&f->c, "/etc/existing.conf"), 0);
	assert_false(gp_root_exists(&f->c.root, "/etc/existing.conf"));
	char *text = slurp(f->dir, "var/lib/gpuprov/backup/etc/existing.conf");
	assert_string_equal(text, "operator's version\n");
	free(text);
	/* Removing what is not there is no effect. */
	size_t before = f->sp->n_effects;
	assert_int_equal(gp_effect_remove(&f->c, "/etc/existing.conf"), 0);
	assert_int_equal(f->sp->n_effects, before);
}

static void test_symlink_over_file_backs_up(void **state)
{
	struct fixture *f = *state;
	f->c.mode = GP_MODE_APPLY;
	assert_int_equal(gp_effect_symlink(&f->c, "other.conf", "/etc/existing.conf"), 0);
	char *target = NULL;
	assert_int_equal(gp_root_readlink(&f->c.root, "/etc/existing.conf", &target), 0);
	assert_string_equal(target, "other.conf");
	free(target);
	assert_true(f->sp->effects[0].old_exists);
	char *text = slurp(f->dir, "var/lib/gpuprov/backup/etc/existing.conf");
	assert_non_null(text);
	assert_string_equal(text, "operator's version\n");
	free(text);
}

/* Links are removed as links: nothing behind them is read or backed up, and
 * a dangling one goes too. */
static void test_remove_symlinks(void **state)
{
	struct fixture *f = *state;
	f->c.mode = GP_MODE_APPLY;
	char link[PATH_MAX * 2];
	snprintf(link, sizeof link, "%s/etc/to-existing", f->dir);
	assert_int_equal(symlink("existing.conf", link), 0);
	snprintf(link, sizeof link, "%s/etc/dangling", f->dir);
	assert_int_equal(symlink("gone.conf", link), 0);
	assert_int_equal(gp_effect_remove(&f->c, "/etc/to-existing"), 0);
	assert_int_equal(gp_effect_remove(&f->c, "/etc/dangling"), 0);
	struct stat st;
	assert_int_equal(gp_root_lstat(&f->c.root, "/etc/to-existing", &st), -ENOENT);
	assert_int_equal(gp_root_lstat(&f->c.root, "/etc/dangling", &st), -ENOENT);
	assert_true(gp_root_exists(&f->c.root, "/etc/existing.conf"));
	assert_false(gp_root_exists(&f->c.root, "/var/lib/gpuprov/backup"));
	assert_int_equal(f->sp->n_effects, 2);
	assert_string_equal(f->sp->effects[0].target, "existing.conf");
	assert_string_equal(f->sp->effects[1].target, "gone.conf");
}

/* A tree as an extraction leaves it: files journaled, links not. Outside
 * it, /keep/x, which a link inside points to. */
static void make_tree(struct fixture *f)
{
	tu_write(f->dir, "opt/t/a", "a\n");
	tu_write(f->dir, "opt/t/sub/b", "b\n");
	tu_write(f->dir, "keep/x", "keep me\n");
	char link[PATH_MAX * 2];
	snprintf(link, sizeof link, "%s/opt/t/sub/out", f->dir);
	assert_int_equal(symlink("../../../keep", link), 0);
	char sha[65];
	assert_int_equal(gp_root_sha256_file(&f->c.root, "/opt/t/a", sha), 0);
	gp_journal_record_file(&f->c.journal, "/opt/t/a", sha, "env", NULL);
	assert_int_equal(gp_root_sha256_file(&f->c.root, "/opt/t/sub/b", sha), 0);
	gp_journal_record_file(&f->c.journal, "/opt/t/sub/b", sha, "env", NULL);
}

static void test_remove_tree(void **state)
{
	struct fixture *f = *state;
	make_tree(f);
	f->c.mode = GP_MODE_PLAN;
	assert_int_equal(gp_effect_remove_tree(&f->c, "/opt/t"), 0);
	assert_true(gp_root_exists(&f->c.root, "/opt/t/a"));
	assert_int_equal(f->sp->n_effects, 1);
	assert_int_equal(f->sp->effects[0].kind, GP_EFFECT_REMOVE_TREE);
	assert_int_equal(gp_strv_len(f->sp->effects[0].replaces), 3);
	assert_string_equal(f->sp->effects[0].replaces[2], "/opt/t/sub/out");
	f->c.mode = GP_MODE_APPLY;
	assert_int_equal(gp_effect_remove_tree(&f->c, "/opt/t"), 0);
	struct stat st;
	assert_int_equal(gp_root_lstat(&f->c.root, "/opt/t", &st), -ENOENT);
	/* The link inside was removed, not followed. */
	assert_true(gp_root_exists(&f->c.root, "/keep/x"));
	assert_null(gp_journal_file_sha256(&f->c.journal, "/opt/t/a"));
	/* Gone already: nothing to do. */
	assert_int_equal(gp_effect_remove_tree(&f->c, "/opt/t"), 0);
	assert_int_equal(f->sp->n_effects, 2);
}

static void test_remove_tree_refusals(void **state)
{
	struct fixture *f = *state;
	make_tree(f);
	f->c.mode = GP_MODE_APPLY;
	/* A file gpuprov did not install. */
	tu_write(f->dir, "opt/t/sub/mine", "operator\n");
	assert_int_equal(gp_effect_remove_tree(&f->c, "/opt/t"), -1);
	assert_non_null(strstr(f->err.msg, "it holds a file gpuprov did not install: "
	                                   "/opt/t/sub/mine"));
	assert_true(gp_root_exists(&f->c.root, "/opt/t/a"));
	/* A symlink to a tree is not followed. */
	char link[PATH_MAX * 2];
	snprintf(link, sizeof link, "%s/opt/l", f->dir);
	assert_int_equal(symlink("t", link), 0);
	assert_int_equal(gp_effect_remove_tree(&f->c, "/opt/l"), -1);
	assert_non_null(strstr(f->err.msg, "it is a symlink, not a directory"));
	/* Nothing recorded: not gpuprov's. */
	tu_mkdir(f->dir, "empty");
	assert_int_equal(gp_effect_remove_tree(&f->c, "/empty"), -1);
	assert_non_null(strstr(f->err.msg, "gpuprov recorded no file in it"));
	/* Never the root, never "..". */
	assert_int_equal(gp_effect_remove_tree(&f->c, "/"), -1);
	assert_non_null(strstr(f->err.msg, "give an absolute path below /"));
	assert_int_equal(gp_effect_remove_tree(&f->c, "/opt/t/../../keep"), -1);
	assert_non_null(strstr(f->err.msg, "without '..'"));
	assert_true(gp_root_exists(&f->c.root, "/keep/x"));
	assert_true(gp_root_exists(&f->c.root, "/opt/t/sub/mine"));
	assert_int_equal(f->sp->n_effects, 0);
}

/* A tiny root where commands can run chrooted: busybox as /bin/sh. */
static void make_runnable(struct fixture *f, const char *name, const char *script)
{
	char path[PATH_MAX * 2];
	snprintf(path, sizeof path, "%s/bin", f->dir);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/bin/busybox", f->dir);
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/cp", "cp", "/bin/busybox", path, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
	assert_int_equal(st, 0);
	snprintf(path, sizeof path, "%s/bin/sh", f->dir);
	if (symlink("busybox", path) < 0)
		assert_int_equal(errno, EEXIST);
	char rel[256];
	snprintf(rel, sizeof rel, "bin/%s", name);
	tu_write(f->dir, rel, script);
	snprintf(path, sizeof path, "%s/bin/%s", f->dir, name);
	assert_int_equal(chmod(path, 0755), 0);
}

/* Read-only commands run with the root mounted read-only in every mode: a
 * probe that writes fails with EROFS and the tree keeps its files. */
static void test_readonly_commands_cannot_write(void **state)
{
	struct fixture *f = *state;
	make_runnable(f, "probe",
	              "#!/bin/sh\n/bin/busybox touch /etc/probe-wrote\n"
	              "/bin/busybox rm /etc/existing.conf\necho probed\n");
	char *const argv[] = { "probe", NULL };
	const enum gp_mode modes[] = { GP_MODE_PLAN, GP_MODE_APPLY, GP_MODE_VERIFY };
	for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
		f->c.mode = modes[i];
		struct gp_run_result res;
		assert_int_equal(gp_ctx_run_readonly(&f->c, argv, &res), 0);
		assert_non_null(strstr(res.output, "probe-wrote: Read-only file system"));
		assert_non_null(strstr(res.output, "probed"));
		gp_run_result_free(&res);
		assert_false(gp_root_exists(&f->c.root, "/etc/probe-wrote"));
		assert_true(gp_root_exists(&f->c.root, "/etc/existing.conf"));
	}
	assert_false(f->c.read_only_refused);
}

static void test_real_run_failure_message(void **state)
{
	struct fixture *f = *state;
	f->c.mode = GP_MODE_APPLY;
	make_runnable(f, "failing",
	              "#!/bin/sh\necho line one\necho 'it broke' >&2\nexit 3\n");
	char *const argv[] = { "failing", "-u", NULL };
	assert_int_equal(gp_effect_run(&f->c, argv), -1);
	assert_int_equal(gp_exit_code(&f->err), GP_EXIT_APPLY_FAILED);
	assert_non_null(strstr(f->err.msg, "'failing -u' exited with status 3"));
	assert_non_null(strstr(f->err.msg, "it broke"));
	assert_null(strstr(f->err.msg, "broke\n"));
	char *const missing[] = { "update-initramfs", "-u", NULL };
	assert_int_equal(gp_effect_run(&f->c, missing), -1);
	assert_non_null(strstr(f->err.msg, "cannot run update-initramfs"));
	assert_non_null(strstr(f->err.msg, strerror(ENOENT)));
}

/* The door reboots a root that is not / only through a stub: without one
 * it refuses before anything (a systemctl in the root must not run, it may
 * reach the host's systemd); with one it runs the stub, and a plan only
 * records the effect. */
static void test_reboot_now_only_through_a_stub(void **state)
{
	struct fixture *f = *state;
	make_runnable(f, "systemctl", "#!/bin/sh\n/bin/busybox touch /systemctl-ran\n");
	make_runnable(f, "reboot-stub", "#!/bin/sh\n/bin/busybox touch /stub-ran\n");
	f->c.mode = GP_MODE_APPLY;
	assert_int_equal(gp_effect_reboot_now(&f->c, "test", NULL), -1);
	assert_non_null(strstr(f->err.msg, "internal error: a reboot of"));
	assert_int_equal(f->sp->n_effects, 0);
	assert_false(gp_root_exists(&f->c.root, "/systemctl-ran"));
	f->c.mode = GP_MODE_PLAN;
	assert_int_equal(gp_effect_reboot_now(&f->c, "test", "/bin/reboot-stub"), 0);
	assert_false(gp_root_exists(&f->c.root, "/stub-ran"));
	f->c.mode = GP_MODE_APPLY;
	assert_int_equal(gp_effect_reboot_now(&f->c, "test", "/bin/reboot-stub"), 0);
	assert_true(gp_root_exists(&f->c.root, "/stub-ran"));
	assert_int_equal(f->sp->n_effects, 2);
	assert_int_equal(f->sp->effects[1].kind, GP_EFFECT_REBOOT);
	assert_string_equal(f->sp->effects[1].argv[0], "/bin/reboot-stub");
	assert_false(gp_root_exists(&f->c.root, "/systemctl-ran"));
}

static void test_real_run_logs(void **state)
{
	struct fixture *f = *state;
	f->c.mode = GP_MODE_APPLY;
	char logpath[PATH_MAX * 2];
	snprintf(logpath, sizeof logpath, "%s/var/log/gpuprov.log", f->dir);
	f->c.log_fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	assert_true(f->c.log_fd >= 0);
	make_runnable(f, "hello", "#!/bin/sh\necho hello from inside\n");
	char *const argv[] = { "hello", NULL };
	assert_int_equal(gp_effect_run(&f->c, argv), 0);
	close(f->c.log_fd);
	f->c.log_fd = -1;
	char *log = slurp(f->dir, "var/log/gpuprov.log");
	assert_non_null(strstr(log, "env: run hello"));
	assert_non_null(strstr(log, "hello from inside"));
	free(log);
}

/* What a sink saw, one line per event. */
struct seen {
	char *lines;
	size_t len;
	FILE *f;
};

static void record_event(const struct gp_event *ev, void *userdata)
{
	struct seen *x = userdata;
	static const char *const kinds[] = { "stage_start",   "effect",
		                             "command_start", "command_done",
		                             "stage_done",    "download" };
	fprintf(x->f, "%s %s", kinds[ev->kind], ev->stage ? ev->stage : "-");
	if (ev->effect)
		fprintf(x->f, " %s", gp_effect_kind_name(ev->effect->kind));
	if (ev->command)
		fprintf(x->f, " %s", ev->command);
	if (ev->kind == GP_EVENT_COMMAND_DONE)
		fprintf(x->f, " status %d", ev->status);
	if (ev->state)
		fprintf(x->f, " %s", ev->state);
	if (ev->failed)
		fputs(" failed", x->f);
	fputc('\n', x->f);
}

/* A real stage sends its start, each effect once made (the last at its
 * end; a rule once it ends, not what it records), each command as it
 * starts and ends, and its end; a dry run none. A failed stage's last
 * effect says so. */
static void test_events(void **state)
{
	struct fixture *f = *state;
	struct seen x = { 0 };
	x.f = open_memstream(&x.lines, &x.len);
	f->c.events = (struct gp_events){ record_event, &x };
	make_runnable(f, "hello", "#!/bin/sh\necho hello\n");
	char *const argv[] = { "hello", "-u", NULL };

	f->c.mode = GP_MODE_PLAN;
	gp_ctx_announce_stage(&f->c, f->sp, false);
	assert_int_equal(gp_effect_write(&f->c, "/etc/new.conf", "new\n", 4, 0644), 0);
	gp_ctx_announce_stage(&f->c, f->sp, true);
	fflush(x.f);
	assert_int_equal(x.len, 0);

	gp_plan_free(f->c.plan);
	f->c.plan = gp_plan_new("test", "0000", f->dir, false);
	f->sp = f->c.stage = gp_plan_add_stage(f->c.plan, "env", "test stage");
	f->c.mode = GP_MODE_APPLY;
	gp_ctx_announce_stage(&f->c, f->sp, false);
	assert_int_equal(gp_effect_write(&f->c, "/etc/new.conf", "new\n", 4, 0644), 0);
	assert_int_equal(gp_effect_run(&f->c, argv), 0);
	gp_effect_rule_begin(&f->c, "mkdir", "a directory per name");
	assert_int_equal(gp_effect_mkdir(&f->c, "/opt/a", 0755), 0);
	assert_int_equal(gp_effect_mkdir(&f->c, "/opt/b", 0755), 0);
	gp_effect_rule_end(&f->c);
	assert_int_equal(gp_effect_mkdir(&f->c, "/opt/x", 0755), 0);
	gp_stage_plan_set(f->sp, GP_STATE_NEEDED, "done");
	gp_ctx_announce_stage(&f->c, f->sp, true);
	/* The end of a stage that did not start is not an event. */
	gp_ctx_announce_stage(&f->c, f->sp, true);

	struct gp_stage_plan *cuda = gp_plan_add_stage(f->c.plan, "cuda", "test");
	f->c.stage = cuda;
	gp_ctx_announce_stage(&f->c, cuda, false);
	assert_int_equal(gp_effect_mkdir(&f->c, "/opt/y", 0755), 0);
	assert_int_equal(gp_effect_write(&f->c, "/etc/y.conf", "y\n", 2, 0644), 0);
	gp_stage_plan_set(cuda, GP_STATE_FAILED, "it failed");
	gp_ctx_announce_stage(&f->c, cuda, true);
	fclose(x.f);
	assert_string_equal(x.lines, "stage_start env\n"
	                             "effect env write\n"
	                             "command_start env /bin/hello -u\n"
	                             "command_done env /bin/hello -u status 0\n"
	                             "effect env run\n"
	                             "effect env rule\n"
	                             "effect env mkdir\n"
	                             "stage_done env needed\n"
	                             "stage_start cuda\n"
	                             "effect cuda mkdir\n"
	                             "effect cuda write failed\n"
	                             "stage_done cuda failed\n");
	free(x.lines);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dry_run_records_only, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_verify_refuses_every_effect, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_reads_see_planned_writes, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_real_write_backs_up_and_journals,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(test_binary_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_real_remove_backs_up, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_real_run_failure_message, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_real_run_logs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reboot_now_only_through_a_stub,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(test_readonly_commands_cannot_write,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_over_file_backs_up, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_remove_symlinks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_tree_refusals, setup,
		                                teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
