/* The GPU settings through NVML (libnvidia-ml.so.1, dlopen), in the forked,
 * chrooted child of nvprobe.h: read each GPU's persistence mode, power
 * limits, compute mode, ECC and MIG modes and application clocks, or set
 * the ones a gp_gpu_want names (gpusettings.h). Setting is for `gpuprov
 * gpu-settings apply`, which the gpu_settings stage's boot unit runs; an
 * install never sets anything itself. Returns codes, never prints. */
#pragma once

#include <stdbool.h>

#include "gpuprov/gpusettings.h"
#include "gpuprov/nvprobe.h"
#include "gpuprov/nvreset.h"
#include "gpuprov/root.h"

/* -1 in any field: NVML did not say (no such function, or it failed). */
struct gp_gpu_state {
	char *name;
	int persistence; /* 1 on, 0 off */
	long power_min_mw, power_max_mw, power_default_mw, power_enforced_mw;
	int compute_mode; /* NVML's value */
	int ecc_current, ecc_pending;
	int mig_current, mig_pending;
	int app_mem_mhz, app_gpu_mhz;
	/* gp_nvsettings_check only: the clocks asked for that the GPU does not
	 * support (NULL: none refused); kind names which (app_unsupported,
	 * app_memory, app_graphics, locked_unsupported, locked_range). */
	char *clocks_refused_kind, *clocks_refused;
	/* gp_nvsettings_check only: why w's clocks could not be held to the
	 * supported ones (the library lacks the getter); NULL: they were. */
	char *clocks_unchecked;
};

struct gp_nvsettings {
	bool loaded; /* dlopen succeeded */
	char *load_error;
	int init_rc; /* nvmlInit_v2's; -1 when not called */
	char *init_error;
	int count; /* GPUs; -1 unknown */
	struct gp_gpu_state gpu[GP_PROBE_MAX_GPUS];
	/* apply: one sentence per setting set or refused ("GPU 0: power limit
	 * 600 W: Success"), NULL-terminated; failed counts the refusals. */
	char **results;
	int failed;
	char *error; /* the child itself failed (chroot, crash, timeout) */
	int read_only_refused;
};

/* Reads every GPU's settings. 0 with *s filled (s->error: the child died),
 * or a negative errno as gp_nvchild_run returns. Free with
 * gp_nvsettings_free. */
int gp_nvsettings_read(const struct gp_root *r, int timeout_ms, bool read_only,
                       struct gp_nvsettings *s);
/* gp_nvsettings_read, and w's application and locked clocks held to the
 * clocks NVML lists as supported (nvmlDeviceGetSupportedMemoryClocks,
 * ...GraphicsClocks, ...MaxClockInfo): each GPU's clocks_refused. */
int gp_nvsettings_check(const struct gp_root *r, int timeout_ms, bool read_only,
                        const struct gp_gpu_want *w, struct gp_nvsettings *s);
/* Sets w on every GPU (a power limit outside a GPU's limits is refused for
 * that GPU, not clamped), then reads the settings back into *s. 0, or a
 * negative errno when no child could start. */
int gp_nvsettings_apply(const struct gp_root *r, int timeout_ms,
                        const struct gp_gpu_want *w, struct gp_nvsettings *s);
/* Gives back to every GPU what reset names (nvreset.h), then reads the
 * settings back into *s; results and failed as gp_nvsettings_apply's. */
int gp_nvsettings_reset(const struct gp_root *r, int timeout_ms,
                        const struct gp_gpu_reset *reset, struct gp_nvsettings *s);
void gp_nvsettings_free(struct gp_nvsettings *s);
