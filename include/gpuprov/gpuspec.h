/* Each known GPU model's spec figures (dense tensor-core peaks, memory
 * bandwidth, host link, NVLink) and the fraction of them a healthy GPU
 * reaches, for `verify --deep` (src/nv/gpuspec.c; sources there and in
 * docs/reference/gpu-health.md). */
#pragma once

#include <stdbool.h>

/* The dense GEMM data types verify --deep measures. */
enum gp_dtype {
	GP_DTYPE_BF16,
	GP_DTYPE_FP16,
	GP_DTYPE_TF32,
	GP_DTYPE_FP8,
	GP_DTYPE_COUNT
};
const char *gp_dtype_name(enum gp_dtype t); /* "bf16", ... */

struct gp_gpuspec {
	const char *model; /* "H100 SXM5 80GB" */
	/* Dense (not "with sparsity") tensor-core peaks in TFLOPS; 0 when
	 * the model has no such path. */
	double dense_tflops[GP_DTYPE_COUNT];
	double memory_gbps; /* device memory bandwidth, GB/s (10^9) */
	int pcie_gen, pcie_width; /* the host link the GPU is built for */
	double nvlink_gbps; /* NVLink per GPU, both directions, GB/s; 0 none */
	/* The fraction of the dense peak a healthy GPU's GEMM reaches, and
	 * of memory bandwidth a large device copy reaches (bytes read plus
	 * written). */
	double gemm_healthy, memory_healthy;
};

/* The model an NVML name ("NVIDIA H100 80GB HBM3") is, or NULL when it is
 * not in the table (then nothing is compared, only measured). */
const struct gp_gpuspec *gp_gpuspec_lookup(const char *nvml_name);

/* PCIe bandwidth per direction in GB/s that a healthy link of generation
 * gen and width lanes reaches for pinned host copies (0 for an unknown
 * generation). */
double gp_pcie_expected_gbps(int gen, int width);

/* What a healthy peer-to-peer copy between GPUs of models a and b reaches
 * one way, in GB/s: over NVLink (nvlink: both GPUs have active links, both
 * models have NVLink) half the smaller per-GPU NVLink figure (that one is
 * both directions) times 0.80, else what the narrower PCIe link (gen,
 * width) reaches (gp_pcie_expected_gbps); 0 when unknown. Also what an
 * NCCL all-reduce's bus bandwidth is judged against. */
double gp_peer_expected_gbps(const struct gp_gpuspec *a, const struct gp_gpuspec *b,
                             bool nvlink, int pcie_gen, int pcie_width);

enum gp_verdict { GP_VERDICT_PASS, GP_VERDICT_WARN, GP_VERDICT_FAIL };
/* A measurement against what a healthy GPU reaches (expected, already
 * times the healthy fraction): pass at >= 85% of it, warn at >= 70%, fail
 * below (gpuprov's choice: the spread between healthy GPUs of one node is
 * 5% and more, a GPU at 70% is sick). *fraction: measured / expected. */
enum gp_verdict gp_gpuspec_judge(double measured, double expected, double *fraction);
