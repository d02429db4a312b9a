/* NVIDIA GPUs by PCI device id (vendor 10de): name, architecture, compute
 * capability and the first CUDA release that supports them, from the sources
 * in docs/reference/nvidia-tables.md. One row per device id, because that is
 * what the PCI bus and match.gpus name; an id not listed is unknown and is
 * never guessed from a neighbour. */
#include <stddef.h>

#include "gpuprov/gpus.h"
#include "gpuprov/util.h"

/* Where the sources give no board variant for an id, the name is the bare
 * model: a guessed "SXM2 32GB" would be printed by detect as a fact. */
static const struct gp_gpu_info gpus[] = {
	/* Volta. R580 is the last branch for V100 (unconfirmed,
	 * docs/reference/nvidia.md section 1): gp_gpu_last_branch. */
	{ 0x1db1, "V100", "Volta", 7, 0, "9.0" },
	{ 0x1db4, "V100", "Volta", 7, 0, "9.0" },
	{ 0x1db5, "V100", "Volta", 7, 0, "9.0" },
	{ 0x1db6, "V100", "Volta", 7, 0, "9.0" },
	/* Turing. */
	{ 0x1eb8, "T4", "Turing", 7, 5, "10.0" },
	/* Ampere. */
	{ 0x20b0, "A100 SXM4 40GB", "Ampere", 8, 0, "11.0" },
	{ 0x20b2, "A100 SXM4 80GB", "Ampere", 8, 0, "11.0" },
	{ 0x20b5, "A100 PCIe 80GB", "Ampere", 8, 0, "11.0" },
	{ 0x20f1, "A100 PCIe 40GB", "Ampere", 8, 0, "11.0" },
	{ 0x20b1, "A100 PCIe 40GB", "Ampere", 8, 0, "11.0" },
	{ 0x20b3, "A100", "Ampere", 8, 0, "11.0" },
	{ 0x20b7, "A30", "Ampere", 8, 0, "11.0" },
	{ 0x2236, "A10", "Ampere", 8, 6, "11.1" },
	{ 0x2237, "A10G", "Ampere", 8, 6, "11.1" },
	{ 0x2204, "RTX 3090", "Ampere", 8, 6, "11.1" },
	{ 0x2203, "RTX 3090 Ti", "Ampere", 8, 6, "11.1" },
	/* Ada Lovelace. */
	{ 0x27b8, "L4", "Ada Lovelace", 8, 9, "11.8" },
	{ 0x26b9, "L40S", "Ada Lovelace", 8, 9, "11.8" },
	{ 0x26b5, "L40", "Ada Lovelace", 8, 9, "11.8" },
	{ 0x2684, "RTX 4090", "Ada Lovelace", 8, 9, "11.8" },
	/* Hopper. */
	{ 0x2330, "H100 SXM5", "Hopper", 9, 0, "11.8" },
	{ 0x2331, "H100 PCIe", "Hopper", 9, 0, "11.8" },
	{ 0x2321, "H100 NVL", "Hopper", 9, 0, "11.8" },
	{ 0x2339, "H100", "Hopper", 9, 0, "11.8" },
	{ 0x2335, "H200 SXM", "Hopper", 9, 0, "11.8" },
	{ 0x233b, "H200 NVL", "Hopper", 9, 0, "11.8" },
	/* H20 (China market Hopper; ids and names from pci.ids,
	 * docs/reference/stack-2026.md section 7). */
	{ 0x2329, "H20", "Hopper", 9, 0, "11.8" },
	{ 0x232c, "H20 HBM3e", "Hopper", 9, 0, "11.8" },
	{ 0x2328, "H20B", "Hopper", 9, 0, "11.8" },
	{ 0x230c, "H20 NVL16", "Hopper", 9, 0, "11.8" },
	{ 0x230e, "H20 NVL16", "Hopper", 9, 0, "11.8" },
	/* Grace Hopper: Hopper's CC 9.0, but open modules only, which is why
	 * its arch is its own (gp_gpu_needs_open_modules). First CUDA taken
	 * from Hopper's 11.8 (unconfirmed for GH200 itself). */
	{ 0x2342, "GH200", "Grace Hopper", 9, 0, "11.8" },
	{ 0x2348, "GH200 144G HBM3e", "Grace Hopper", 9, 0, "11.8" },
	/* Blackwell. GB200 is listed with B200 in the sources (its id beside
	 * B200's), so it takes B200's CC and first CUDA; GB300 (CC 10.3, like
	 * B300) from pci.ids and NVIDIA's CUDA GPUs page. */
	{ 0x2901, "B200", "Blackwell", 10, 0, "12.8" },
	{ 0x2941, "GB200", "Blackwell", 10, 0, "12.8" },
	{ 0x3182, "B300", "Blackwell", 10, 3, "12.9" },
	{ 0x31c2, "GB300", "Blackwell", 10, 3, "12.9" },
	{ 0x31c3, "GB300", "Blackwell", 10, 3, "12.9" },
	{ 0x31a1, "GB300 Max-Q", "Blackwell", 10, 3, "12.9" },
	{ 0x2b85, "RTX 5090", "Blackwell", 12, 0, "12.8" },
	/* RTX PRO 6000 Blackwell (CC 12.0, sm_120 from CUDA 12.8). */
	{ 0x2bb5, "RTX PRO 6000 Blackwell Server Edition", "Blackwell", 12, 0, "12.8" },
	{ 0x2bb1, "RTX PRO 6000 Blackwell Workstation Edition", "Blackwell", 12, 0,
	  "12.8" },
	{ 0x2bb4, "RTX PRO 6000 Blackwell Max-Q", "Blackwell", 12, 0, "12.8" },
};

const struct gp_gpu_info *gp_gpu_lookup(unsigned device)
{
	for (size_t i = 0; i < ARRAY_SIZE(gpus); i++)
		if (gpus[i].device == device)
			return &gpus[i];
	return NULL;
}

/* Blackwell (CC 10.0 and later) cannot run the proprietary modules. Grace
 * Hopper needs open modules too, although its CC (9.0) is the same as H100's,
 * so it is recognised by architecture name should a row for it be added. */
bool gp_gpu_needs_open_modules(const struct gp_gpu_info *g)
{
	if (!g)
		return false;
	return g->cc_major >= 10 || gp_streq(g->arch, "Grace Hopper");
}

/* The open modules support Turing (CC 7.5) and later only; Volta, Pascal and
 * Maxwell need the proprietary ones. */
bool gp_gpu_needs_proprietary(const struct gp_gpu_info *g)
{
	if (!g)
		return false;
	return g->cc_major < 7 || (g->cc_major == 7 && g->cc_minor < 5);
}
