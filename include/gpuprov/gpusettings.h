/* The GPU settings the gpu_settings stage has applied through NVML at every
 * boot (src/stages/gpu_settings.c): they travel as the words of the boot
 * unit's ExecStart (`gpuprov gpu-settings apply WORD...`), so the plan
 * shows the values themselves. This module parses and writes those words
 * and works out the power limit to set from NVML's constraints. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/error.h"

/* What `gpuprov gpu-settings apply` leaves once every setting is set: its
 * words and a newline. Under /run, so a boot forgets it, and verify can
 * tell a value changed since the boot unit set it (drift) from one the
 * unit has not set since the boot. */
#define GP_GPU_SETTINGS_APPLIED "/run/gpuprov/gpu-settings.applied"

/* NVML's nvmlComputeMode_t values gpuprov sets. */
#define GP_COMPUTE_DEFAULT 0
#define GP_COMPUTE_PROHIBITED 2
#define GP_COMPUTE_EXCLUSIVE_PROCESS 3

/* The words are bounded: a unit line gpuprov did not write is refused. */
#define GP_GPU_WANT_MAX_WORDS 16
#define GP_GPU_WANT_MAX_WORD 64

struct gp_gpu_want {
	unsigned power_limit_w; /* 0: leave alone */
	double power_limit_fraction; /* of the default limit; 0: leave alone */
	unsigned locked_min_mhz, locked_max_mhz; /* both 0: leave alone */
	unsigned app_mem_mhz, app_gpu_mhz; /* both 0: leave alone */
	int compute_mode; /* GP_COMPUTE_*, -1: leave alone */
	int ecc; /* 1 on, 0 off, -1 leave alone */
	int mig; /* 1 on, 0 off, -1 leave alone */
};

void gp_gpu_want_init(struct gp_gpu_want *w);
/* Whether w sets anything. */
bool gp_gpu_want_any(const struct gp_gpu_want *w);
/* "default", "prohibited", "exclusive_process"; NULL for another value. */
const char *gp_compute_mode_name(int mode);
/* The mode named so, or -1. */
int gp_compute_mode_parse(const char *name);
/* Parses words ("power_limit_w=700", "compute_mode=default", "ecc=on",
 * "locked_gpu_clocks_mhz=1410,1980", ...) into *w (initialised first). 0,
 * or -1 with err set (GP_EINPUT) naming the word and what is allowed. */
int gp_gpu_want_parse(char *const *words, size_t n, struct gp_gpu_want *w,
                      struct gp_err *err);
/* The words for w, in a fixed order, space-separated ("" for nothing);
 * gp_gpu_want_parse reads them back to the same w. Allocated. */
char *gp_gpu_want_words(const struct gp_gpu_want *w);
/* The power limit to set, in milliwatts, for a GPU whose NVML limits are
 * default_mw and min_mw..max_mw: 0 in *target_mw when w sets none. 0, or -1
 * with *why (allocated) when the wanted limit lies outside min..max. */
int gp_gpu_power_target(const struct gp_gpu_want *w, unsigned default_mw, unsigned min_mw,
                        unsigned max_mw, unsigned *target_mw, char **why);
