/* The GPU settings an uninstall gives back to the GPUs' own defaults
 * through NVML (`gpuprov gpu-settings reset WORD...`, which the gpu_settings
 * stage's uninstall runs on the live host): the power limit to NVML's
 * default limit, the application clocks and the locked GPU clocks reset,
 * the compute mode DEFAULT. ECC and MIG modes are not reset: the GPU keeps
 * them across reboots and a change waits for a reboot or a GPU reset, so
 * gpuprov leaves them as they are (docs/reference/gpu-settings.md). Each
 * reset is done in the NVML child of nvsettings.h (gp_nvsettings_reset);
 * this module holds the words and the child's part. Returns codes, never
 * prints. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/error.h"

/* What to give back; false: leave alone. */
struct gp_gpu_reset {
	bool power_limit; /* nvmlDeviceGetPowerManagementDefaultLimit, set */
	bool locked_clocks; /* nvmlDeviceResetGpuLockedClocks */
	bool app_clocks; /* nvmlDeviceResetApplicationsClocks */
	bool compute_mode; /* nvmlDeviceSetComputeMode DEFAULT */
};

/* Whether r resets anything. */
bool gp_gpu_reset_any(const struct gp_gpu_reset *r);
/* Parses words: the setting names of gpusettings.h's words with the value
 * "default" ("power_limit_w=default", "locked_gpu_clocks_mhz=default",
 * "application_clocks_mhz=default", "compute_mode=default"). 0, or -1 with
 * err set (GP_EINPUT) naming the word and what is allowed. */
int gp_gpu_reset_parse(char *const *words, size_t n, struct gp_gpu_reset *r,
                       struct gp_err *err);
/* The words for r, in a fixed order, as a NULL-terminated vector that
 * gp_gpu_reset_parse reads back to the same r. Free with gp_strv_free. */
char **gp_gpu_reset_words(const struct gp_gpu_reset *r);

/* The child's part (nvsettings.c): resets what r names on GPU i, dev its
 * NVML handle, h the library's dlopen handle; one "set I ok|failed WHAT:
 * NVML's word" line per reset on fd (gp_nvchild_put). */
void gp_nvreset_gpu(void *h, int fd, unsigned i, void *dev, const struct gp_gpu_reset *r);
