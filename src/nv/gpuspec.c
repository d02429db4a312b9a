/* The model table behind verify --deep. Peaks are NVIDIA's datasheet
 * figures halved where NVIDIA quotes them "with sparsity" (dense = sparse
 * / 2). The healthy fractions come from the published matmul survey in
 * docs/reference/gpu-health.md ("achieved GEMM"): measured BF16 TFLOPS
 * over the dense peak, best shape searched; where a model has no
 * published figure the fraction is gpuprov's choice, marked so. Sources:
 *   A100  https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
 *   H100  https://www.nvidia.com/en-us/data-center/h100/
 *   H200  https://www.nvidia.com/en-us/data-center/h200/
 *   B200  https://www.nvidia.com/en-us/data-center/dgx-b200/
 *   L4    https://www.nvidia.com/en-us/data-center/l4/
 *   T4    https://www.nvidia.com/en-us/data-center/tesla-t4/
 *   achieved GEMM  https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md
 * Not yet measured on a real GPU by gpuprov: no figure below is from a
 * verify --deep run. */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "gpuprov/gpuspec.h"
#include "gpuprov/util.h"

static const char *const dtype_names[GP_DTYPE_COUNT] = { "bf16", "fp16", "tf32", "fp8" };

const char *gp_dtype_name(enum gp_dtype t)
{
	return (unsigned)t < GP_DTYPE_COUNT ? dtype_names[t] : "?";
}

/* gpuprov's choice where no primary or survey figure exists: 0.80 of the
 * GEMM peak, 0.80 of memory bandwidth for a copy counted read + write. */
#define CHOSEN_GEMM 0.80
#define CHOSEN_MEMORY 0.80

struct row {
	/* Words that must all appear in the NVML name, most specific rows
	 * first: "H100 PCIe" before "H100". */
	const char *words[3];
	struct gp_gpuspec spec;
};

static const struct row rows[] = {
	/* H200 SXM 141GB: same compute as H100 SXM, HBM3e 4.8 TB/s. Achieved
	 * BF16 "same as H100" in the survey. */
	{ { "H200" },
	  { "H200 SXM 141GB",
	    { 989, 989, 495, 1979 },
	    4800,
	    5,
	    16,
	    900,
	    0.80,
	    CHOSEN_MEMORY } },
	/* H100 PCIe 80GB (HBM2e 2.0 TB/s, NVLink bridge 600 GB/s). */
	{ { "H100", "PCIe" },
	  { "H100 PCIe 80GB",
	    { 756, 756, 378, 1513 },
	    2000,
	    5,
	    16,
	    600,
	    CHOSEN_GEMM,
	    CHOSEN_MEMORY } },
	/* H100 NVL 94GB (HBM3 3.9 TB/s). */
	{ { "H100", "NVL" },
	  { "H100 NVL 94GB",
	    { 835, 835, 418, 1670 },
	    3900,
	    5,
	    16,
	    600,
	    CHOSEN_GEMM,
	    CHOSEN_MEMORY } },
	/* H100 SXM5 80GB, "NVIDIA H100 80GB HBM3": BF16 794.5 of 989 measured
	 * (80.3%). */
	{ { "H100" },
	  { "H100 SXM5 80GB",
	    { 989, 989, 495, 1979 },
	    3350,
	    5,
	    16,
	    900,
	    0.80,
	    CHOSEN_MEMORY } },
	/* B200 (HGX): 2250 dense BF16; BF16 1745 measured (77.6%). */
	{ { "B200" },
	  { "B200",
	    { 2250, 2250, 1100, 4500 },
	    8000,
	    5,
	    16,
	    1800,
	    0.77,
	    CHOSEN_MEMORY } },
	/* A100 PCIe: BF16 252.9 of 312 measured (81.1%). */
	{ { "A100", "PCIE", "80GB" },
	  { "A100 PCIe 80GB",
	    { 312, 312, 156, 0 },
	    1935,
	    4,
	    16,
	    600,
	    0.81,
	    CHOSEN_MEMORY } },
	{ { "A100", "PCIE" },
	  { "A100 PCIe 40GB",
	    { 312, 312, 156, 0 },
	    1555,
	    4,
	    16,
	    600,
	    0.81,
	    CHOSEN_MEMORY } },
	/* A100 SXM4: BF16 271.2 of 312 measured (86.9%). */
	{ { "A100", "80GB" },
	  { "A100 SXM4 80GB",
	    { 312, 312, 156, 0 },
	    2039,
	    4,
	    16,
	    600,
	    0.87,
	    CHOSEN_MEMORY } },
	{ { "A100" },
	  { "A100 SXM4 40GB",
	    { 312, 312, 156, 0 },
	    1555,
	    4,
	    16,
	    600,
	    0.87,
	    CHOSEN_MEMORY } },
	/* L4: 242 BF16 / 120 TF32 / 485 FP8 with sparsity, halved. */
	{ { "L4" },
	  { "L4", { 121, 121, 60, 242 }, 300, 4, 16, 0, CHOSEN_GEMM, CHOSEN_MEMORY } },
	/* T4: FP16 tensor cores only (no BF16, TF32, FP8). */
	{ { "T4" },
	  { "T4", { 0, 65, 0, 0 }, 320, 3, 16, 0, CHOSEN_GEMM, CHOSEN_MEMORY } },
};

static bool is_alnum(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* word as a whole word of name, case-insensitive: NVML says
 * "A100-PCIE-40GB" and "A100 80GB PCIe"; "L4" is not in "L40S". */
static bool has_word(const char *name, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = name; *p; p++)
		if ((p == name || !is_alnum(p[-1])) && strncasecmp(p, word, n) == 0 &&
		    !is_alnum(p[n]))
			return true;
	return false;
}

const struct gp_gpuspec *gp_gpuspec_lookup(const char *nvml_name)
{
	if (!nvml_name)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		bool all = true;
		for (size_t w = 0; w < ARRAY_SIZE(rows[i].words) && rows[i].words[w]; w++)
			all = all && has_word(nvml_name, rows[i].words[w]);
		if (all)
			return &rows[i].spec;
	}
	return NULL;
}

double gp_pcie_expected_gbps(int gen, int width)
{
	/* Pinned host copies per direction on x16, as published for
	 * nvbandwidth and bandwidthTest (docs/reference/gpu-health.md):
	 * Gen3 ~11-12, Gen4 ~24-26, Gen5 ~50-55 GB/s; the lower end, scaled by
	 * the lanes. */
	static const double x16[] = { [3] = 11, [4] = 24, [5] = 50, [6] = 100 };
	if (gen < 3 || gen >= (int)ARRAY_SIZE(x16) || width <= 0)
		return 0;
	return x16[gen] * width / 16;
}

double gp_peer_expected_gbps(const struct gp_gpuspec *a, const struct gp_gpuspec *b,
                             bool nvlink, int pcie_gen, int pcie_width)
{
	/* H100 SXM peer copies over NVLink reach about 380 of the 450 GB/s
	 * one way (84%, docs/reference/gpu-health.md); 0.80 is gpuprov's
	 * choice below it. verify --deep's NCCL all-reduce is judged by its
	 * bus bandwidth against the same figure: 8 H100 SXM reach about 370
	 * GB/s in a ring, 82% of 450
	 * (https://github.com/NVIDIA/nccl-tests/issues/212), 480 with NVLink
	 * SHARP. */
	if (nvlink && a && b && a->nvlink_gbps > 0 && b->nvlink_gbps > 0) {
		double link = a->nvlink_gbps < b->nvlink_gbps ? a->nvlink_gbps
		                                              : b->nvlink_gbps;
		return link / 2 * 0.80;
	}
	return gp_pcie_expected_gbps(pcie_gen, pcie_width);
}

enum gp_verdict gp_gpuspec_judge(double measured, double expected, double *fraction)
{
	double f = expected > 0 ? measured / expected : 0;
	if (fraction)
		*fraction = f;
	return f >= 0.85   ? GP_VERDICT_PASS
	       : f >= 0.70 ? GP_VERDICT_WARN
	                   : GP_VERDICT_FAIL;
}
