/* CUDA releases (cuda_releases.c): toolkit -> minimum driver, which compute
 * capabilities a CUDA release can target, and PyTorch wheel tags. Sources:
 * docs/reference/nvidia-tables.md; pure lookups, no I/O. */
#pragma once

#include <stdbool.h>

#include "gpuprov/gpus.h"

/* Minimum driver for a CUDA toolkit "X.Y" (GA release) or "X.Y.Z" (update
 * releases where the table has them: 12.2.2 is 12.2 Update 2; X.Y.0 and an
 * X.Y.Z the table lacks read as X.Y GA), NULL when X.Y is unknown. */
const char *gp_cuda_min_driver(const char *cuda_version);
/* The weaker minor-version-compatibility floor for CUDA major X ("450.80.02"
 * for 11, "525.60.13" for 12, "580" for 13), NULL when unknown. */
const char *gp_cuda_minor_compat_driver(const char *cuda_version);
/* Can CUDA cuda_version build for and run on compute capability cc? (Not
 * before the arch's first CUDA; CUDA 13 dropped Volta and older.) */
bool gp_cuda_supports_cc(const char *cuda_version, const struct gp_gpu_info *g);

/* CUDA version of a PyTorch wheel tag or index URL ("cu118" or
 * ".../whl/cu118/" -> "11.8", written into buf; "cpu" -> NULL with *cpu set;
 * anything else -> NULL with *cpu cleared). */
const char *gp_torch_tag_cuda(const char *tag_or_url, bool *cpu, char buf[16]);
/* The CUDA wheel tags gpuprov knows, newest first, NULL-terminated. */
extern const char *const gp_torch_cuda_tags[];
/* Can the wheels of tag (or index URL) run on g: does their CUDA target its
 * compute capability? (cu126 cannot target Blackwell, cu13x not Volta.) */
bool gp_torch_tag_targets(const char *tag, const struct gp_gpu_info *g);
