/* Every GPU's NVLink fabric state as NVML reports it
 * (nvmlDeviceGetGpuFabricInfoV, else nvmlDeviceGetGpuFabricInfo), asked in
 * the forked, chrooted, read-only child of nvprobe.h (gp_nvchild_run): on
 * an NVSwitch system a GPU is usable for CUDA only once the fabric manager
 * has registered it ("Completed"); before that CUDA fails with error 802,
 * system not yet initialized. */
#pragma once

#include <stdbool.h>

#include "gpuprov/nvprobe.h"

/* NVML's nvmlGpuFabricState_t values. */
#define GP_FABRIC_NOT_SUPPORTED 0
#define GP_FABRIC_NOT_STARTED 1
#define GP_FABRIC_IN_PROGRESS 2
#define GP_FABRIC_COMPLETED 3

struct gp_nvfabric {
	bool loaded; /* dlopen of libnvidia-ml.so.1 succeeded */
	char *load_error; /* dlerror(), or the missing symbol */
	int init_rc; /* nvmlInit_v2; -1 when not called */
	int count; /* nvmlDeviceGetCount_v2; -1 when unknown */
	bool api; /* the library has one of the two fabric calls */
	int rc[GP_PROBE_MAX_GPUS]; /* the fabric call's return; -1 not asked */
	int state[GP_PROBE_MAX_GPUS]; /* GP_FABRIC_*; -1 unknown */
	int status[GP_PROBE_MAX_GPUS]; /* the info's own status (an NVML code) */
	char *error; /* the probe itself failed (fork, chroot, crash, timeout) */
	int read_only_refused; /* as gp_nvprobe's */
};

/* 0 with *f filled (f->error for a probe that died part-way), or a negative
 * errno when none could be started (f->read_only_refused: the read-only
 * namespace could not be made, see gp_nvprobe_run). Clear with
 * gp_nvfabric_clear. */
int gp_nvfabric_run(const struct gp_root *r, int timeout_ms, bool read_only,
                    struct gp_nvfabric *f);
void gp_nvfabric_clear(struct gp_nvfabric *f);
/* "Completed", "In Progress", "Not Started", "Not Supported", as
 * nvidia-smi -q words them; "unknown" for anything else. */
const char *gp_fabric_state_name(int state);
