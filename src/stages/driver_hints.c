/* The driver stage's verify hints: what a failed nvmlInit_v2 or cuInit
 * means and what to do, by return code. A NULL hint stands for the
 * likeliest reason the module is not loaded, which the driver stage works
 * out from the root (nouveau, headers, Secure Boot: src/stages/driver.c). */
#include <stddef.h>

#include "gpuprov/driver_hints.h"
#include "gpuprov/nvprobe.h"
#include "gpuprov/util.h"

struct code_hint {
	int code;
	const char *hint;
};

static const struct code_hint nvml_hints[] = {
	{ GP_NVML_ERROR_DRIVER_NOT_LOADED, NULL },
	{ GP_NVML_ERROR_LIB_RM_VERSION_MISMATCH,
	  "Driver/library version mismatch: user space was upgraded under the running "
	  "module; reboot" },
};
static const char nvml_other[] = "see dmesg for NVRM errors";

static const struct code_hint cuinit_hints[] = {
	{ GP_CUDA_ERROR_STUB_LIBRARY,
	  "the libcuda.so.1 found is the CUDA toolkit's stub (lib64/stubs), not the "
	  "driver's: remove the stubs directory from /etc/ld.so.conf.d and "
	  "LD_LIBRARY_PATH" },
	{ GP_CUDA_ERROR_INSUFFICIENT_DRIVER,
	  "libcuda is older than the CUDA runtime asking for it: install a driver that "
	  "supports the toolkit, or a toolkit the driver supports" },
	{ GP_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
	  "library mismatch: libcuda is from another driver than the loaded module; "
	  "reboot" },
};

static const char *lookup(const struct code_hint *table, size_t n, int rc,
                          const char *other)
{
	for (size_t i = 0; i < n; i++)
		if (table[i].code == rc)
			return table[i].hint;
	return other;
}

const char *gp_driver_nvml_hint(int rc)
{
	return lookup(nvml_hints, ARRAY_SIZE(nvml_hints), rc, nvml_other);
}

const char *gp_driver_cuinit_hint(int rc)
{
	return lookup(cuinit_hints, ARRAY_SIZE(cuinit_hints), rc, NULL);
}
