/* Root-relative access: atomic writes, modes, mkdir -p, containment of
 * symlinks inside the root, directory listing, sha256. */
#include "testutil.h"

#include <linux/openat2.h>
#include <sys/syscall.h>

#include "gpuprov/context.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/osrelease.h"
#include "gpuprov/output.h"
#include "gpuprov/profile.h"
#include "gpuprov/root.h"
#include "gpuprov/stages.h"
#include "gpuprov/util.h"

static void open_root(struct gp_root *r, const char *dir)
{
	assert_int_equal(gp_root_open(r, dir), 0);
}

static void test_open_missing(void **state)
{
	struct gp_root r;
	assert_int_equal(gp_root_open(&r, "/nonexistent/gpuprov-root"), -ENOENT);
	gp_root_close(&r);
}

static void test_host_path(void **state)
{
	char *dir = tu_tmpdir();
	struct gp_root r;
	open_root(&r, dir);
	char *p = gp_root_host_path(&r, "/etc/x");
	char want[512];
	snprintf(want, sizeof want, "%s/etc/x", dir);
	assert_string_equal(p, want);
	free(p);
	assert_false(gp_root_is_host(&r));
	gp_root_close(&r);
	open_root(&r, "/");
	p = gp_root_host_path(&r, "/etc/x");
	assert_string_equal(p, "/etc/x");
	free(p);
	assert_true(gp_root_is_host(&r));
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

static void test_write_atomic_and_read(void **state)
{
	char *dir = tu_tmpdir();
	struct gp_root r;
	open_root(&r, dir);
	assert_int_equal(gp_root_mkdir_p(&r, "/etc/modprobe.d", 0755), 0);
	assert_int_equal(
	    gp_root_write_atomic(&r, "/etc/modprobe.d/a.conf", "one\n", 4, 0640, 0, 0),
	    0);
	assert_int_equal(
	    gp_root_write_atomic(&r, "/etc/modprobe.d/a.conf", "two\n", 4, 0644, 0, 0),
	    0);
	char *data = NULL;
	size_t len = 0;
	assert_int_equal(gp_root_read(&r, "/etc/modprobe.d/a.conf", &data, &len), 0);
	assert_int_equal(len, 4);
	assert_string_equal(data, "two\n");
	free(data);
	struct stat st;
	assert_int_equal(gp_root_stat(&r, "/etc/modprobe.d/a.conf", &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	/* No temp files left behind. */
	char **names = NULL;
	assert_int_equal(gp_root_list_dir(&r, "/etc/modprobe.d", &names), 0);
	assert_non_null(names[0]);
	assert_string_equal(names[0], "a.conf");
	assert_null(names[1]);
	gp_strv_free(names);
	assert_int_equal(gp_root_read(&r, "/etc/missing", &data, &len), -ENOENT);
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

static void test_write_missing_parent(void **state)
{
	char *dir = tu_tmpdir();
	struct gp_root r;
	open_root(&r, dir);
	assert_int_equal(gp_root_write_atomic(&r, "/no/such/dir/f", "x", 1, 0644, 0, 0),
	                 -ENOENT);
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

/* An absolute symlink inside the root resolves inside the root: writing
 * through it must never reach the host path it names. */
static void test_symlink_stays_in_root(void **state)
{
	char *dir = tu_tmpdir();
	char *outside = tu_tmpdir();
	char link[512];
	tu_mkdir(dir, "inside");
	snprintf(link, sizeof link, "%s/etc", dir);
	assert_int_equal(symlink(outside, link), 0);
	struct gp_root r;
	open_root(&r, dir);
	/* /etc -> <outside> is looked up as <root><outside>, which does not exist. */
	assert_int_equal(gp_root_write_atomic(&r, "/etc/passwd", "x", 1, 0644, 0, 0),
	                 -ENOENT);
	char probe[512];
	snprintf(probe, sizeof probe, "%s/passwd", outside);
	assert_int_equal(access(probe, F_OK), -1);
	/* ".." cannot climb out of the root either. */
	assert_int_equal(gp_root_mkdir_p(&r, "/inside", 0755), 0);
	assert_int_equal(
	    gp_root_write_atomic(&r, "/inside/../../../escaped", "x", 1, 0644, 0, 0), 0);
	char escaped[512];
	snprintf(escaped, sizeof escaped, "%s/escaped", dir);
	assert_int_equal(access(escaped, F_OK), 0);
	gp_root_close(&r);
	tu_rmrf(dir);
	tu_rmrf(outside);
	free(dir);
	free(outside);
}

static void test_mkdir_p(void **state)
{
	char *dir = tu_tmpdir();
	struct gp_root r;
	open_root(&r, dir);
	assert_int_equal(gp_root_mkdir_p(&r, "/var/lib/gpuprov/backup", 0755), 0);
	assert_int_equal(gp_root_mkdir_p(&r, "/var/lib/gpuprov/backup", 0755), 0);
	struct stat st;
	assert_int_equal(gp_root_stat(&r, "/var/lib/gpuprov/backup", &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	tu_write(dir, "file", "x");
	assert_int_equal(gp_root_mkdir_p(&r, "/file/sub", 0755), -ENOTDIR);
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

static void test_symlink_and_readlink(void **state)
{
	char *dir = tu_tmpdir();
	struct gp_root r;
	open_root(&r, dir);
	assert_int_equal(gp_root_symlink(&r, "cuda-11.8", "/cuda"), 0);
	assert_int_equal(gp_root_symlink(&r, "cuda-12.4", "/cuda"), 0);
	char *target = NULL;
	assert_int_equal(gp_root_readlink(&r, "/cuda", &target), 0);
	assert_string_equal(target, "cuda-12.4");
	free(target);
	struct stat st;
	assert_int_equal(gp_root_lstat(&r, "/cuda", &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(gp_root_unlink(&r, "/cuda"), 0);
	assert_int_equal(gp_root_lstat(&r, "/cuda", &st), -ENOENT);
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

/* A new directory with a/one, a/two and b/three, and a link at name (in
 * it) to target. */
static char *two_dirs(const char *name, const char *target)
{
	char *dir = tu_tmpdir();
	tu_write(dir, "a/one", "1");
	tu_write(dir, "a/two", "22");
	tu_write(dir, "b/three", "333");
	char link[512];
	snprintf(link, sizeof link, "%s/%s", dir, name);
	assert_int_equal(symlink(target, link), 0);
	return dir;
}

/* gp_root_lstat_in says what gp_root_lstat says, across directories, for
 * links, absent names, an absolute link inside the root and bad names. */
static void test_lstat_in_is_lstat(void **state)
{
	char *dir = two_dirs("a/abs", "/b");
	char link[512];
	snprintf(link, sizeof link, "%s/up", dir);
	assert_int_equal(symlink("/a", link), 0);
	struct gp_root r;
	open_root(&r, dir);
	static const char *const paths[] = {
		"/a/one", "/a/two",  "/a/abs",        "/a/missing", "/b/three",
		"/a/one", "/up/two", "/up/abs/three", "/missing/x", "/a/one",
		"/a/..",  "/a/.",    "/a/",           "nothing",    "/b/three/x",
	};
	struct gp_root_dir d = GP_ROOT_DIR_INIT;
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
		struct stat want, have;
		int want_rc = gp_root_lstat(&r, paths[i], &want);
		int have_rc = gp_root_lstat_in(&r, &d, paths[i], &have);
		if (want_rc != have_rc)
			fail_msg("%s: %d, gp_root_lstat %d", paths[i], have_rc, want_rc);
		if (want_rc == 0) {
			assert_int_equal(have.st_ino, want.st_ino);
			assert_int_equal(have.st_mode, want.st_mode);
		}
	}
	gp_root_dir_close(&d);
	assert_int_equal(d.fd, -1);
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

/* gp_root_sha256_file_in says what gp_root_sha256_file says across
 * directories: the hash of a regular file; a link is not followed (one
 * pointing out of the root neither), a FIFO is refused without blocking,
 * and absent or bad names fail the same way. */
static void test_sha256_file_in_is_sha256_file(void **state)
{
	char *dir = two_dirs("a/link", "two");
	char path[512];
	snprintf(path, sizeof path, "%s/a/out", dir);
	assert_int_equal(symlink("/etc/hostname", path), 0);
	snprintf(path, sizeof path, "%s/b/fifo", dir);
	assert_int_equal(mkfifo(path, 0644), 0);
	struct gp_root r;
	open_root(&r, dir);
	static const char *const paths[] = {
		"/a/one",  "/a/two", "/a/link", "/a/out",     "/b/three",
		"/b/fifo", "/a/one", "/a/none", "/b/three/x",
	};
	struct gp_root_dir d = GP_ROOT_DIR_INIT;
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
		char want[65] = "", have[65] = "";
		int want_rc = gp_root_sha256_file(&r, paths[i], want);
		int have_rc = gp_root_sha256_file_in(&r, &d, paths[i], have);
		if (want_rc != have_rc)
			fail_msg("%s: %d, gp_root_sha256_file %d", paths[i], have_rc,
			         want_rc);
		if (want_rc == 0)
			assert_string_equal(have, want);
	}
	/* A directory's name or none: refused (how differs: the one opens
	 * the directory, the other refuses the name). */
	static const char *const bad[] = { "/a/..", "/a/.", "/a/", "nothing" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char ignored[65];
		assert_true(gp_root_sha256_file(&r, bad[i], ignored) < 0);
		assert_true(gp_root_sha256_file_in(&r, &d, bad[i], ignored) < 0);
	}
	char out[65];
	assert_int_equal(gp_root_sha256_file_in(&r, &d, "/a/two", out), 0);
	assert_string_equal(
	    out, "785f3ec7eb32f30b90cd0fcf3657d388b5ff4297f2f9716ff66e9b69c05ddd09");
	gp_root_dir_close(&d);
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

/* Links listed in one pass: each entry's target, "" for a non-link, and
 * the lookup finds links only. */
static void test_list_links(void **state)
{
	char *dir = tu_tmpdir();
	struct gp_root r;
	open_root(&r, dir);
	assert_int_equal(gp_root_mkdir_p(&r, "/lib64", 0755), 0);
	assert_int_equal(
	    gp_root_symlink(&r, "../cudnn/lib/libcudnn.so.8", "/lib64/libcudnn.so.8"), 0);
	assert_int_equal(gp_root_symlink(&r, "libcudnn.so.8", "/lib64/libcudnn.so"), 0);
	assert_int_equal(
	    gp_root_write_atomic(&r, "/lib64/libcudart.so", "x", 1, 0644, -1, -1), 0);
	char **names = NULL, **targets = NULL;
	assert_int_equal(gp_root_list_links(&r, "/lib64", &names, &targets), 0);
	assert_int_equal(gp_strv_len(names), 3);
	assert_string_equal(names[0], "libcudart.so");
	assert_string_equal(targets[0], "");
	assert_string_equal(names[1], "libcudnn.so");
	assert_string_equal(targets[1], "libcudnn.so.8");
	assert_string_equal(gp_root_link_lookup(names, targets, "libcudnn.so.8"),
	                    "../cudnn/lib/libcudnn.so.8");
	assert_null(gp_root_link_lookup(names, targets, "libcudart.so"));
	assert_null(gp_root_link_lookup(names, targets, "libcudnn.so.9"));
	gp_strv_free(names);
	gp_strv_free(targets);
	assert_int_equal(gp_root_list_links(&r, "/missing", &names, &targets), -ENOENT);
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

static void test_sha256(void **state)
{
	char out[65];
	gp_sha256_hex("abc", 3, out);
	assert_string_equal(
	    out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	gp_sha256_hex("", 0, out);
	assert_string_equal(
	    out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* openat2 that fails with EAGAIN the first eagain_left times, as when
 * renames elsewhere race a ".." in the lookup. */
static int eagain_left;
static int openat2_calls;
static long openat2_flaky(int dfd, const char *path, struct open_how *how, size_t size)
{
	openat2_calls++;
	if (eagain_left > 0) {
		eagain_left--;
		errno = EAGAIN;
		return -1;
	}
	return syscall(SYS_openat2, dfd, path, how, size);
}

/* A failed assertion leaves the test early: put the real call back. */
static gp_root_openat2_fn real_openat2;
static int save_openat2(void **state)
{
	real_openat2 = gp_root_openat2;
	return 0;
}
static int restore_openat2(void **state)
{
	gp_root_openat2 = real_openat2;
	eagain_left = 0;
	return 0;
}

static void test_openat2_eagain_is_retried(void **state)
{
	char *dir = tu_tmpdir();
	tu_write(dir, "usr/lib/os-release", "ID=ubuntu\n");
	tu_mkdir(dir, "etc");
	char link[512];
	snprintf(link, sizeof link, "%s/etc/os-release", dir);
	assert_int_equal(symlink("../usr/lib/os-release", link), 0);
	struct gp_root r;
	open_root(&r, dir);
	gp_root_openat2 = openat2_flaky; /* put back by restore_openat2 */

	/* A few races: the file is found all the same. */
	eagain_left = 5;
	openat2_calls = 0;
	char *data = NULL;
	assert_int_equal(gp_root_read(&r, "/etc/os-release", &data, NULL), 0);
	assert_string_equal(data, "ID=ubuntu\n");
	assert_int_equal(openat2_calls, 6);
	free(data);

	/* Races without end: -EAGAIN after the bound, never -ENOENT. */
	eagain_left = INT_MAX;
	openat2_calls = 0;
	assert_int_equal(gp_root_read(&r, "/etc/os-release", &data, NULL), -EAGAIN);
	assert_int_equal(openat2_calls, GP_ROOT_OPENAT2_ATTEMPTS);
	char *msg = gp_root_read_error(&r, "/etc/os-release", 0, -EAGAIN);
	assert_non_null(strstr(msg, "run gpuprov again"));
	free(msg);

	/* The same for os-release: Ubuntu through a few races; after the
	 * bound "could not read", never "absent" (which is -ENOENT). */
	struct gp_os_release osr;
	eagain_left = 3;
	assert_int_equal(gp_os_release_read(&r, &osr), 0);
	assert_string_equal(osr.id, "ubuntu");
	gp_os_release_free(&osr);
	eagain_left = INT_MAX;
	assert_int_equal(gp_os_release_read(&r, &osr), -EAGAIN);
	msg = gp_os_release_error(&r, &osr, -EAGAIN);
	assert_non_null(strstr(msg, "/etc/os-release in root "));
	free(msg);

	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

/* gp_root_exists cannot say "could not look": it answers false, keeps the
 * failure, and the effect door (and the engine after each hook) fail on it
 * with exit 65 instead of acting on "absent". */
static void test_exists_keeps_eagain(void **state)
{
	char *dir = tu_tmpdir();
	tu_write(dir, "usr/lib/os-release", "ID=ubuntu\n");
	struct gp_root r;
	open_root(&r, dir);
	gp_root_openat2 = openat2_flaky; /* put back by restore_openat2 */
	const char *path = NULL;
	eagain_left = 3;
	assert_true(gp_root_exists(&r, "/usr/lib/os-release"));
	assert_false(gp_root_exists(&r, "/usr/lib/absent"));
	assert_int_equal(gp_root_fault(&r, &path), 0); /* ENOENT is an answer */
	eagain_left = INT_MAX;
	assert_false(gp_root_exists(&r, "/usr/lib/os-release"));
	assert_int_equal(gp_root_fault(&r, &path), -EAGAIN);
	assert_string_equal(path, "/usr/lib/os-release");
	eagain_left = 0;

	struct gp_err err = { 0 };
	struct gp_ctx c = { .root = r, .err = &err, .mode = GP_MODE_PLAN, .log_fd = -1 };
	assert_int_equal(gp_ctx_root_fault(&c), -1);
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	assert_non_null(
	    strstr(err.msg, "could not look up /usr/lib/os-release in root "));
	assert_non_null(strstr(err.msg, "run gpuprov again"));
	/* No effect goes ahead on the wrong answer, in a plan either. */
	struct gp_err err2 = { 0 };
	c.err = &err2;
	c.plan = gp_plan_new("test", "0000", dir, true);
	c.stage = gp_plan_add_stage(c.plan, "env", "test stage");
	assert_int_equal(gp_effect_mkdir(&c, "/opt/x", 0755), -1);
	assert_int_equal(gp_exit_code(&err2), GP_EXIT_INVALID_INPUT);
	gp_plan_free(c.plan);

	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

/* The driver stage reads os-release itself (Ubuntu picks Canonical's
 * packages): a read that kept racing is exit 65, not "not Ubuntu". */
static void test_driver_os_release_eagain(void **state)
{
	char *dir = tu_tmpdir();
	tu_write(dir, "usr/lib/os-release", "ID=ubuntu\n");
	struct gp_root r;
	open_root(&r, dir);
	struct gp_err err = { 0 };
	struct gp_out out;
	gp_out_init(&out, stdout, stderr);
	out.verbosity = -1;
	struct gp_profile prof = { .name = "t" };
	prof.doc = cJSON_Parse("{\"distro\": {\"package_manager\": \"apt\"},"
	                       " \"stages\": {\"driver\": {\"branch\": \"535\"}}}");
	struct gp_ctx c = { .root = r,
		            .err = &err,
		            .out = &out,
		            .mode = GP_MODE_PLAN,
		            .log_fd = -1,
		            .profile = &prof };
	c.plan = gp_plan_new("t", "0000", dir, true);
	c.stage = gp_plan_add_stage(c.plan, "driver", "test");
	const cJSON *cfg = gp_profile_stage(&prof, "driver");
	gp_root_openat2 = openat2_flaky; /* put back by restore_openat2 */
	eagain_left = INT_MAX;
	struct gp_check ck = { 0 };
	assert_int_equal(gp_stage_driver.check(&c, cfg, &ck), -1);
	eagain_left = 0;
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	assert_non_null(strstr(err.msg, "driver: "));
	assert_non_null(strstr(err.msg, "os-release in root "));
	free(ck.reason);
	gp_plan_free(c.plan);
	cJSON_Delete(prof.doc);
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

/* A FIFO would block the open (and the run) forever; a device never ends. */
static void test_read_refuses_non_regular(void **state)
{
	char *dir = tu_tmpdir();
	char path[512];
	tu_mkdir(dir, "etc");
	snprintf(path, sizeof path, "%s/etc/os-release", dir);
	assert_int_equal(mkfifo(path, 0644), 0);
	struct gp_root r;
	open_root(&r, dir);
	char *data = NULL;
	assert_int_equal(gp_root_read(&r, "/etc/os-release", &data, NULL),
	                 -GP_ROOT_EFIFO);
	char *msg = gp_root_read_error(&r, "/etc/os-release", 0, -GP_ROOT_EFIFO);
	char want[600];
	snprintf(want, sizeof want,
	         "/etc/os-release in root %s is a FIFO, not a regular file", dir);
	assert_string_equal(msg, want);
	free(msg);
	assert_int_equal(gp_root_read(&r, "/etc", &data, NULL), -EISDIR);
	char out[65];
	assert_int_equal(gp_root_sha256_file(&r, "/etc/os-release", out), -GP_ROOT_EFIFO);
	gp_root_close(&r);

	open_root(&r, "/");
	assert_int_equal(gp_root_read(&r, "/dev/zero", &data, NULL), -GP_ROOT_EDEVICE);
	msg = gp_root_read_error(&r, "/dev/zero", 0, -GP_ROOT_EDEVICE);
	assert_string_equal(msg, "/dev/zero is a device, not a regular file");
	free(msg);
	/* /proc files say size 0: still read whole, within the bound. */
	assert_int_equal(
	    gp_root_read_max(&r, "/proc/self/stat", GP_ROOT_SMALL_MAX, &data, NULL), 0);
	assert_true(strlen(data) > 0);
	free(data);
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

static void test_read_bound(void **state)
{
	char *dir = tu_tmpdir();
	tu_write(dir, "big", "0123456789");
	struct gp_root r;
	open_root(&r, dir);
	char *data = NULL;
	size_t len = 0;
	assert_int_equal(gp_root_read_max(&r, "/big", 10, &data, &len), 0);
	assert_int_equal(len, 10);
	free(data);
	assert_int_equal(gp_root_read_max(&r, "/big", 9, &data, &len), -GP_ROOT_ETOOBIG);
	char *msg = gp_root_read_error(&r, "/big", 16 << 20, -GP_ROOT_ETOOBIG);
	assert_non_null(
	    strstr(msg, "is larger than 16 MiB, the most gpuprov reads of it"));
	free(msg);
	gp_root_close(&r);
	/* A file that grows past what fstat said (sysfs, proc) is cut off too. */
	open_root(&r, "/");
	assert_int_equal(gp_root_read_max(&r, "/proc/self/maps", 8, &data, NULL),
	                 -GP_ROOT_ETOOBIG);
	gp_root_close(&r);
	tu_rmrf(dir);
	free(dir);
}

/* Not root and asked for owner uid 0: the write fails and leaves nothing,
 * rather than a file owned by whoever ran gpuprov. */
static void test_write_fails_when_owner_cannot_be_set(void **state)
{
	char *dir = tu_tmpdir();
	assert_int_equal(chown(dir, 65534, 65534), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0)
			_exit(10);
		struct gp_root r;
		if (gp_root_open(&r, dir) < 0)
			_exit(11);
		int rc = gp_root_write_atomic(&r, "/f", "x", 1, 0644, 0, 0);
		if (rc != -EPERM)
			_exit(12);
		char **names = NULL;
		if (gp_root_list_dir(&r, "/", &names) < 0 || names[0])
			_exit(13); /* no file, no temp file */
		/* Its own uid is fine. */
		if (gp_root_write_atomic(&r, "/f", "x", 1, 0644, 65534, 65534) != 0)
			_exit(14);
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	tu_rmrf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_missing),
		cmocka_unit_test(test_list_links),
		cmocka_unit_test(test_lstat_in_is_lstat),
		cmocka_unit_test(test_sha256_file_in_is_sha256_file),
		cmocka_unit_test(test_host_path),
		cmocka_unit_test(test_write_atomic_and_read),
		cmocka_unit_test(test_write_missing_parent),
		cmocka_unit_test(test_symlink_stays_in_root),
		cmocka_unit_test(test_mkdir_p),
		cmocka_unit_test(test_symlink_and_readlink),
		cmocka_unit_test(test_sha256),
		cmocka_unit_test_setup_teardown(test_openat2_eagain_is_retried,
		                                save_openat2, restore_openat2),
		cmocka_unit_test_setup_teardown(test_exists_keeps_eagain, save_openat2,
		                                restore_openat2),
		cmocka_unit_test_setup_teardown(test_driver_os_release_eagain,
		                                save_openat2, restore_openat2),
		cmocka_unit_test(test_read_refuses_non_regular),
		cmocka_unit_test(test_read_bound),
		cmocka_unit_test(test_write_fails_when_owner_cannot_be_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
