/* The driver stage's verify hints by return code (src/stages/driver_hints.c):
 * each code NVIDIA documents gets its hint, word for word as verify prints
 * it; a code without one falls back as the stage expects (NVML: dmesg;
 * NULL: the stage's own guess why the module is not loaded). */
#include "testutil.h"

#include "gpuprov/driver_hints.h"
#include "gpuprov/nvprobe.h"

static void test_nvml_hints(void **state)
{
	(void)state;
	assert_null(gp_driver_nvml_hint(GP_NVML_ERROR_DRIVER_NOT_LOADED));
	assert_string_equal(gp_driver_nvml_hint(GP_NVML_ERROR_LIB_RM_VERSION_MISMATCH),
	                    "Driver/library version mismatch: user space was upgraded "
	                    "under the running module; reboot");
	assert_string_equal(gp_driver_nvml_hint(999), "see dmesg for NVRM errors");
	assert_string_equal(gp_driver_nvml_hint(2), "see dmesg for NVRM errors");
}

static void test_cuinit_hints(void **state)
{
	(void)state;
	assert_string_equal(gp_driver_cuinit_hint(GP_CUDA_ERROR_STUB_LIBRARY),
	                    "the libcuda.so.1 found is the CUDA toolkit's stub "
	                    "(lib64/stubs), not the driver's: remove the stubs "
	                    "directory from /etc/ld.so.conf.d and LD_LIBRARY_PATH");
	assert_string_equal(gp_driver_cuinit_hint(GP_CUDA_ERROR_INSUFFICIENT_DRIVER),
	                    "libcuda is older than the CUDA runtime asking for it: "
	                    "install a driver that supports the toolkit, or a "
	                    "toolkit the driver supports");
	assert_string_equal(gp_driver_cuinit_hint(GP_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH),
	                    "library mismatch: libcuda is from another driver than "
	                    "the loaded module; reboot");
	assert_null(gp_driver_cuinit_hint(GP_CUDA_ERROR_NO_DEVICE));
	assert_null(gp_driver_cuinit_hint(3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nvml_hints),
		cmocka_unit_test(test_cuinit_hints),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
