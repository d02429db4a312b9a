/* Driver package selection, module flavor for a set of GPUs, the runfile's
 * command line and kernel release ordering (src/nv/nvdriver.c). */
#include "testutil.h"

#include <string.h>

#include "gpuprov/arch.h"
#include "gpuprov/nvdriver.h"
#include "gpuprov/pkg_dnf.h"
#include "gpuprov/util.h"

static char *wants(const struct gp_drv_pkgs *p)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; i < p->n_want; i++)
		gp_buf_printf(&b, "%s%s%s%s", i ? " " : "", p->want[i].name,
		              p->want[i].version ? "=" : "",
		              p->want[i].version ? p->want[i].version : "");
	return gp_buf_steal(&b);
}

static void test_canonical_dkms(void **state)
{
	(void)state;
	char *k[] = { "5.15.0-91-generic", NULL };
	struct gp_drv_choice ch = { .method = GP_DRV_APT,
		                    .source = GP_DRV_CANONICAL,
		                    .branch = "535",
		                    .version = "535.183.01",
		                    .server = true,
		                    .kernels = k };
	struct gp_drv_pkgs p;
	gp_drv_packages(&ch, &p);
	char *w = wants(&p);
	assert_string_equal(w, "nvidia-driver-535-server=535.183.01 "
	                       "nvidia-dkms-535-server=535.183.01");
	assert_string_equal(p.probe, "nvidia-driver-535-server");
	free(w);
	gp_drv_pkgs_free(&p);
}

static void test_canonical_prebuilt_open(void **state)
{
	(void)state;
	char *k[] = { "6.8.0-31-generic", "6.8.0-40-generic", NULL };
	struct gp_drv_choice ch = { .method = GP_DRV_APT,
		                    .source = GP_DRV_CANONICAL,
		                    .branch = "580",
		                    .server = true,
		                    .open = true,
		                    .prebuilt = true,
		                    .kernels = k,
		                    .kernel_flavour = "generic" };
	struct gp_drv_pkgs p;
	gp_drv_packages(&ch, &p);
	char *w = wants(&p);
	assert_string_equal(w, "nvidia-driver-580-server-open "
	                       "linux-modules-nvidia-580-server-open-6.8.0-31-generic "
	                       "linux-modules-nvidia-580-server-open-6.8.0-40-generic "
	                       "linux-modules-nvidia-580-server-open-generic");
	free(w);
	gp_drv_pkgs_free(&p);
}

static void test_nvidia_repo_and_dnf(void **state)
{
	(void)state;
	struct gp_drv_choice ch = { .method = GP_DRV_APT,
		                    .source = GP_DRV_NVIDIA,
		                    .branch = "570",
		                    .open = false };
	struct gp_drv_pkgs p;
	gp_drv_packages(&ch, &p);
	assert_string_equal(p.probe, "cuda-drivers-570");
	gp_drv_pkgs_free(&p);
	ch.open = true;
	gp_drv_packages(&ch, &p);
	assert_string_equal(p.probe, "nvidia-open-570");
	gp_drv_pkgs_free(&p);
	ch = (struct gp_drv_choice){ .method = GP_DRV_DNF,
		                     .branch = "580",
		                     .version = "580.95.05" };
	gp_drv_packages(&ch, &p);
	char *w = wants(&p);
	/* An exact version pins the stream's split packages too. */
	assert_string_equal(w,
	                    "@nvidia-driver:580-dkms nvidia-driver=580.95.05 "
	                    "nvidia-driver-libs=580.95.05 nvidia-driver-cuda=580.95.05 "
	                    "nvidia-driver-cuda-libs=580.95.05 "
	                    "nvidia-kmod-common=580.95.05 "
	                    "kmod-nvidia-latest-dkms=580.95.05");
	free(w);
	/* dnf's command: each member as name-version in the one transaction. */
	char **argv = gp_pkg_dnf.install(p.want, p.n_want);
	char *cmd = gp_strv_join(argv, " ");
	assert_string_equal(cmd, "dnf -y -q install @nvidia-driver:580-dkms "
	                         "nvidia-driver-580.95.05 nvidia-driver-libs-580.95.05 "
	                         "nvidia-driver-cuda-580.95.05 "
	                         "nvidia-driver-cuda-libs-580.95.05 "
	                         "nvidia-kmod-common-580.95.05 "
	                         "kmod-nvidia-latest-dkms-580.95.05");
	free(cmd);
	gp_strv_free(argv);
	gp_drv_pkgs_free(&p);
	ch.version = NULL;
	ch.open = true;
	gp_drv_packages(&ch, &p);
	w = wants(&p);
	assert_string_equal(w, "@nvidia-driver:580-open nvidia-driver");
	free(w);
	gp_drv_pkgs_free(&p);
	/* RHEL 10: no streams; the flavor's meta package at the version, and
	 * the split packages with it. */
	ch = (struct gp_drv_choice){ .method = GP_DRV_DNF,
		                     .branch = "580",
		                     .version = "580.126.20",
		                     .open = true,
		                     .no_streams = true };
	gp_drv_packages(&ch, &p);
	assert_string_equal(p.probe, "nvidia-open");
	w = wants(&p);
	assert_string_equal(w, "nvidia-open=580.126.20 nvidia-driver-libs=580.126.20 "
	                       "nvidia-driver-cuda=580.126.20 "
	                       "nvidia-driver-cuda-libs=580.126.20 "
	                       "nvidia-kmod-common=580.126.20 "
	                       "kmod-nvidia-open-dkms=580.126.20");
	free(w);
	gp_drv_pkgs_free(&p);
	ch.open = false;
	gp_drv_packages(&ch, &p);
	assert_string_equal(p.probe, "cuda-drivers");
	gp_drv_pkgs_free(&p);
}

static void test_flavor(void **state)
{
	(void)state;
	const struct gp_gpu_info *v100 = gp_gpu_lookup(0x1db1),
	                         *b200 = gp_gpu_lookup(0x2901),
	                         *a100 = gp_gpu_lookup(0x20b0);
	assert_non_null(v100);
	assert_non_null(b200);
	bool open;
	const struct gp_gpu_info *mixed[] = { v100, b200 };
	assert_int_equal(gp_driver_auto_flavor(mixed, 2, "580", &open), -1);
	const struct gp_gpu_info *old[] = { v100, a100 };
	assert_int_equal(gp_driver_auto_flavor(old, 2, "580", &open), 0);
	assert_false(open);
	const struct gp_gpu_info *bw[] = { a100, b200 };
	assert_int_equal(gp_driver_auto_flavor(bw, 2, "550", &open), 0);
	assert_true(open);
	/* Neither decides (an A100, an unknown id): NVIDIA's default. */
	const struct gp_gpu_info *free_[] = { a100, NULL };
	assert_int_equal(gp_driver_auto_flavor(free_, 2, "550", &open), 0);
	assert_false(open);
	assert_int_equal(gp_driver_auto_flavor(free_, 2, "560.28.03", &open), 0);
	assert_true(open);
}

static void test_runfile_argv(void **state)
{
	(void)state;
	char **v = gp_drv_runfile_argv("/c/f.run", true, "/k", "/c");
	char *s = gp_strv_join(v, " ");
	assert_string_equal(s,
	                    "/bin/sh /c/f.run --silent --dkms --kernel-module-type=open "
	                    "--no-nouveau-check --no-disable-nouveau --no-x-check "
	                    "--module-signing-secret-key=/k "
	                    "--module-signing-public-key=/c");
	free(s);
	gp_strv_free(v);
	v = gp_drv_runfile_argv("/f", false, NULL, NULL);
	assert_string_equal(v[4], "--kernel-module-type=proprietary");
	assert_null(v[8]);
	gp_strv_free(v);
}

static void test_kernels_and_versions(void **state)
{
	(void)state;
	assert_true(gp_kver_compare("5.15.0-101-generic", "5.15.0-91-generic") > 0);
	assert_true(gp_kver_compare("6.8.0-31-generic", "6.8.0-31-generic") == 0);
	assert_true(
	    gp_kver_compare("5.14.0-362.8.1.el9_3.x86_64", "5.14.0-427.el9.x86_64") < 0);
	char *f = gp_kernel_flavour("6.8.0-1012-aws");
	assert_string_equal(f, "aws");
	free(f);
	assert_null(gp_kernel_flavour("5.14.0-362.8.1.el9_3.x86_64"));
	/* arm64's 64k-page flavours keep their '-'. */
	f = gp_kernel_flavour("6.8.0-31-generic-64k");
	assert_string_equal(f, "generic-64k");
	free(f);
	f = gp_kernel_flavour("7.0.0-14-nvidia-64k");
	assert_string_equal(f, "nvidia-64k");
	free(f);
	assert_null(gp_kernel_flavour("6.12.48+deb13-arm64"));
	/* Vendors' names for the architectures. */
	assert_string_equal(gp_arch_nvidia_dir("x86_64"), "x86_64");
	assert_string_equal(gp_arch_nvidia_dir("aarch64"), "sbsa");
	assert_null(gp_arch_nvidia_dir("ppc64le"));
	assert_string_equal(gp_arch_multiarch_libdir("aarch64"),
	                    "/usr/lib/aarch64-linux-gnu");
	assert_string_equal(gp_arch_multiarch_includedir("x86_64"),
	                    "/usr/include/x86_64-linux-gnu");
	assert_true(gp_arch_has_proprietary_modules("x86_64"));
	assert_false(gp_arch_has_proprietary_modules("aarch64"));
	/* The runfile names the architecture as uname -m does. */
	char *r = gp_drv_runfile_name("aarch64", "580.126.20");
	assert_string_equal(r, "NVIDIA-Linux-aarch64-580.126.20.run");
	free(r);
	r = gp_drv_runfile_url("x86_64", "580.126.20");
	assert_string_equal(r, "https://us.download.nvidia.com/tesla/580.126.20/"
	                       "NVIDIA-Linux-x86_64-580.126.20.run");
	free(r);
	char *u = gp_pkg_upstream_version("3:580.95.05-1.el9");
	assert_string_equal(u, "580.95.05");
	free(u);
	assert_true(gp_driver_version_matches("535.183.01", "535", NULL));
	assert_false(gp_driver_version_matches("5350.1", "535", NULL));
	assert_false(gp_driver_version_matches("535.183.01", "535", "535.216.01"));
	assert_false(gp_driver_version_matches(NULL, "535", NULL));
}

/* The packages an upgrade or a switch to prebuilt modules takes away. */
static void test_packages_left(void **state)
{
	(void)state;
	char *b = gp_drv_package_branch(
	    "linux-modules-nvidia-580-server-5.15.0-91-generic");
	assert_string_equal(b, "580");
	free(b);
	b = gp_drv_package_branch("libnvidia-compute-535");
	assert_string_equal(b, "535");
	free(b);
	assert_null(gp_drv_package_branch("nvidia-settings"));
	assert_null(gp_drv_package_branch("nvidia-driver-pinning-535.104.05"));
	assert_null(gp_drv_package_branch("nvidia-5350-x"));
	struct gp_drv_choice ch = { .method = GP_DRV_APT,
		                    .source = GP_DRV_CANONICAL,
		                    .branch = "580",
		                    .server = true };
	assert_true(gp_drv_package_leaves(&ch, "nvidia-driver-535-server"));
	assert_true(gp_drv_package_leaves(&ch, "nvidia-fabricmanager-535"));
	assert_false(gp_drv_package_leaves(&ch, "nvidia-dkms-580-server"));
	assert_false(gp_drv_package_leaves(&ch, "nvidia-settings"));
	ch.prebuilt = true;
	assert_true(gp_drv_package_leaves(&ch, "nvidia-dkms-580-server"));
	assert_false(gp_drv_package_leaves(&ch, "nvidia-kernel-common-580-server"));
	ch.method = GP_DRV_DNF;
	assert_false(gp_drv_package_leaves(&ch, "nvidia-driver-535-server"));
}

/* The branch's other flavor: -server and plain have no package in common,
 * open and proprietary share all but the modules' own. */
static void test_other_flavor(void **state)
{
	struct gp_drv_choice ch = { .method = GP_DRV_APT,
		                    .source = GP_DRV_CANONICAL,
		                    .branch = "580" };
	assert_true(gp_drv_package_other_flavor(&ch, "nvidia-driver-580-server"));
	assert_true(gp_drv_package_other_flavor(&ch, "libnvidia-compute-580-server"));
	assert_true(gp_drv_package_other_flavor(
	    &ch, "linux-modules-nvidia-580-server-5.15.0-91-generic"));
	assert_true(gp_drv_package_other_flavor(&ch, "nvidia-driver-580-open"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-driver-580"));
	assert_false(
	    gp_drv_package_other_flavor(&ch, "linux-modules-nvidia-580-generic"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-driver-535-server"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-settings"));
	ch.server = ch.open = true;
	assert_true(gp_drv_package_other_flavor(&ch, "nvidia-driver-580-server"));
	assert_true(gp_drv_package_other_flavor(&ch, "nvidia-dkms-580-server"));
	assert_true(gp_drv_package_other_flavor(
	    &ch, "linux-modules-nvidia-580-server-generic-64k"));
	assert_false(gp_drv_package_other_flavor(&ch, "libnvidia-compute-580-server"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-kernel-common-580-server"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-driver-580-server-open"));
	assert_false(gp_drv_package_other_flavor(
	    &ch, "linux-modules-nvidia-580-server-open-generic"));
	assert_true(gp_drv_package_other_flavor(&ch, "nvidia-driver-580-open"));
	/* NVIDIA's repository: the other flavor's meta package and modules
	 * packages, not the shared libraries, not another branch's. */
	ch = (struct gp_drv_choice){ .method = GP_DRV_APT,
		                     .source = GP_DRV_NVIDIA,
		                     .branch = "580",
		                     .open = true };
	assert_true(gp_drv_package_other_flavor(&ch, "cuda-drivers-580"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-open-580"));
	assert_true(gp_drv_package_other_flavor(&ch, "nvidia-driver-580"));
	assert_true(gp_drv_package_other_flavor(&ch, "nvidia-dkms-580"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-driver-580-open"));
	assert_false(gp_drv_package_other_flavor(&ch, "libnvidia-compute-580"));
	assert_false(gp_drv_package_other_flavor(&ch, "cuda-drivers-535"));
	assert_false(gp_drv_package_other_flavor(&ch, "cuda-drivers-fabricmanager-580"));
	ch.open = false;
	assert_true(gp_drv_package_other_flavor(&ch, "nvidia-open-580"));
	assert_false(gp_drv_package_other_flavor(&ch, "cuda-drivers-580"));
	assert_true(gp_drv_package_other_flavor(&ch, "nvidia-dkms-580-open"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-driver-580"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-open-5800"));
	ch.method = GP_DRV_DNF;
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-open-580"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-open"));
	/* RHEL 10: the meta package and the DKMS package of the other flavor. */
	ch.no_streams = true;
	assert_true(gp_drv_package_other_flavor(&ch, "nvidia-open"));
	assert_true(gp_drv_package_other_flavor(&ch, "kmod-nvidia-open-dkms"));
	assert_false(gp_drv_package_other_flavor(&ch, "cuda-drivers"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-kmod-common"));
	ch.open = true;
	assert_true(gp_drv_package_other_flavor(&ch, "cuda-drivers"));
	assert_true(gp_drv_package_other_flavor(&ch, "kmod-nvidia-latest-dkms"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-open"));
	assert_false(gp_drv_package_other_flavor(&ch, "nvidia-driver-libs"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_canonical_dkms),
		cmocka_unit_test(test_canonical_prebuilt_open),
		cmocka_unit_test(test_nvidia_repo_and_dnf),
		cmocka_unit_test(test_flavor),
		cmocka_unit_test(test_runfile_argv),
		cmocka_unit_test(test_kernels_and_versions),
		cmocka_unit_test(test_packages_left),
		cmocka_unit_test(test_other_flavor),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
