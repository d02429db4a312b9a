/* NVSwitch device ids, from the NVSwitch driver in NVIDIA's open kernel
 * modules (its LR10 and LS10 tables), and the NVLink 5 HGX GPUs; sources in
 * docs/reference/fabric-manager.md section 1. */
#include "gpuprov/nvswitch.h"
#include "gpuprov/util.h"

#define NVIDIA_VENDOR 0x10de
/* PCI class "bridge, other": how an NVSwitch's management endpoint shows. */
#define CLASS_BRIDGE_OTHER 0x0680

static const unsigned nvswitch_ids[] = {
	/* LR10: the second-generation NVSwitch of HGX A100. */
	0x1ae8,
	0x1af0,
	0x1af1,
	0x1af2,
	0x1af3,
	0x1af4,
	0x1af5,
	0x1af6,
	0x1af7,
	0x1af8,
	0x1af9,
	0x1afa,
	0x1afb,
	0x1afc,
	0x1afd,
	0x1afe,
	0x1aff,
	/* LS10: the third-generation NVSwitch of HGX H100 and H200 (the
	 * endpoint that manages the switch). */
	0x22a0,
	0x22a1,
	0x22a2,
	0x22a3,
	0x22a4,
	0x22a5,
	0x22a6,
	0x22a7,
};

/* B200 and B300 SXM: sold only on HGX boards, whose NVLink 5 switches are
 * managed over InfiniBand, not PCI. */
static const unsigned nvlink5_hgx_gpu_ids[] = { 0x2901, 0x3182 };

static bool in(const unsigned *ids, size_t n, unsigned id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

bool gp_pci_is_nvswitch(const struct gp_pci_device *d)
{
	return d->vendor == NVIDIA_VENDOR && (d->class_code >> 8) == CLASS_BRIDGE_OTHER &&
	       in(nvswitch_ids, ARRAY_SIZE(nvswitch_ids), d->device);
}

bool gp_pci_is_nvlink5_hgx_gpu(const struct gp_pci_device *d)
{
	return gp_pci_is_nvidia_gpu(d) &&
	       in(nvlink5_hgx_gpu_ids, ARRAY_SIZE(nvlink5_hgx_gpu_ids), d->device);
}

void gp_fabric_hw_scan(const struct gp_pci_list *pci, struct gp_fabric_hw *hw)
{
	*hw = (struct gp_fabric_hw){ 0 };
	for (size_t i = 0; i < pci->n; i++) {
		const struct gp_pci_device *d = &pci->devs[i];
		bool sw = gp_pci_is_nvswitch(d), nvl5 = gp_pci_is_nvlink5_hgx_gpu(d);
		hw->switches += sw;
		hw->nvlink5_gpus += nvl5;
		if ((sw || nvl5) && !hw->first)
			hw->first = d->address;
	}
}

bool gp_fabric_hw_needs_fm(const struct gp_fabric_hw *hw)
{
	return hw->switches || hw->nvlink5_gpus;
}
