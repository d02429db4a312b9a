/* NVIDIA GPUs by PCI device id (gpus.c): name, architecture, compute
 * capability, first CUDA release, module flavours. Sources:
 * docs/reference/nvidia-tables.md; pure lookups, no I/O. */
#pragma once

#include <stdbool.h>

struct gp_gpu_info {
	unsigned device; /* PCI device id, vendor 0x10de */
	const char *name; /* "A100 SXM4 80GB" */
	const char *arch; /* "Ampere", "Hopper", "Blackwell", ... */
	unsigned cc_major; /* compute capability */
	unsigned cc_minor;
	const char *first_cuda; /* first CUDA release that supports it: "11.0" */
};

/* NULL for an id gpuprov does not know (never guessed). */
const struct gp_gpu_info *gp_gpu_lookup(unsigned device);
/* Module flavours the GPU can use. */
bool gp_gpu_needs_open_modules(const struct gp_gpu_info *g); /* Blackwell, Grace Hopper */
bool gp_gpu_needs_proprietary(const struct gp_gpu_info *g); /* Volta and older */
