/* NVSwitch systems by PCI id (nvswitch.c): the NVSwitch chips of HGX A100
 * and HGX H100/H200 baseboards show up as NVIDIA PCI bridges (class
 * 0x0680); HGX B200/B300 (NVLink 5) switches do not appear on PCI at all, so
 * those boards are known by their GPUs. Unknown ids are never guessed.
 * Facts and sources: docs/reference/fabric-manager.md. Pure lookups. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/pci.h"

/* An NVSwitch's management endpoint (vendor 0x10de, class 0x0680, a known
 * NVSwitch device id). */
bool gp_pci_is_nvswitch(const struct gp_pci_device *d);
/* A GPU that only comes on an NVLink 5 HGX baseboard (B200, B300 SXM),
 * whose fabric manager also needs NVLSM and the mlx5_ib, ib_umad modules. */
bool gp_pci_is_nvlink5_hgx_gpu(const struct gp_pci_device *d);

/* What the PCI list says about the NVLink fabric. */
struct gp_fabric_hw {
	size_t switches; /* gp_pci_is_nvswitch devices */
	size_t nvlink5_gpus; /* gp_pci_is_nvlink5_hgx_gpu devices */
	const char *first; /* the first such device's address (points into the list) */
};
void gp_fabric_hw_scan(const struct gp_pci_list *pci, struct gp_fabric_hw *hw);
/* Whether the system needs the fabric manager: an NVSwitch or an NVLink 5
 * HGX GPU is there. */
bool gp_fabric_hw_needs_fm(const struct gp_fabric_hw *hw);
