/* NVSwitch systems by PCI id (src/nv/nvswitch.c): an HGX H100 board's
 * bridges count, their other functions, another vendor's bridge, a PCIe
 * GPU and an NVLink 5 GPU do as docs/reference/fabric-manager.md says. */
#include "testutil.h"

#include "gpuprov/nvswitch.h"

static struct gp_pci_device dev(const char *address, unsigned vendor, unsigned device,
                                unsigned class_code)
{
	return (struct gp_pci_device){ .address = (char *)address,
		                       .vendor = vendor,
		                       .device = device,
		                       .class_code = class_code };
}

static void test_ids(void **state)
{
	(void)state;
	struct gp_pci_device ls10 = dev("0000:c5:00.0", 0x10de, 0x22a3, 0x068000);
	struct gp_pci_device lr10 = dev("0000:c5:00.0", 0x10de, 0x1af1, 0x068000);
	/* The switch's own PCI-PCI bridge function, not its endpoint. */
	struct gp_pci_device bridge_fn = dev("0000:c5:00.1", 0x10de, 0x22a8, 0x060400);
	struct gp_pci_device other = dev("0000:c5:00.0", 0x8086, 0x22a3, 0x068000);
	struct gp_pci_device as_gpu = dev("0000:c5:00.0", 0x10de, 0x22a3, 0x030200);
	struct gp_pci_device h100 = dev("0000:17:00.0", 0x10de, 0x2330, 0x030200);
	struct gp_pci_device b200 = dev("0000:17:00.0", 0x10de, 0x2901, 0x030200);
	assert_true(gp_pci_is_nvswitch(&ls10));
	assert_true(gp_pci_is_nvswitch(&lr10));
	assert_false(gp_pci_is_nvswitch(&bridge_fn));
	assert_false(gp_pci_is_nvswitch(&other));
	assert_false(gp_pci_is_nvswitch(&as_gpu));
	assert_false(gp_pci_is_nvswitch(&h100));
	assert_false(gp_pci_is_nvlink5_hgx_gpu(&h100));
	assert_true(gp_pci_is_nvlink5_hgx_gpu(&b200));
	assert_false(gp_pci_is_nvlink5_hgx_gpu(&ls10));
}

static void test_scan(void **state)
{
	(void)state;
	struct gp_pci_device devs[] = {
		dev("0000:00:00.0", 0x8086, 0x09a2, 0x060000),
		dev("0000:17:00.0", 0x10de, 0x2330, 0x030200),
		dev("0000:c5:00.0", 0x10de, 0x22a3, 0x068000),
		dev("0000:c6:00.0", 0x10de, 0x22a3, 0x068000),
	};
	struct gp_pci_list pci = { .devs = devs, .n = 4 };
	struct gp_fabric_hw hw;
	gp_fabric_hw_scan(&pci, &hw);
	assert_int_equal(hw.switches, 2);
	assert_int_equal(hw.nvlink5_gpus, 0);
	assert_string_equal(hw.first, "0000:c5:00.0");
	assert_true(gp_fabric_hw_needs_fm(&hw));
	pci.n = 2; /* the host bridge and a GPU: a PCIe card */
	gp_fabric_hw_scan(&pci, &hw);
	assert_false(gp_fabric_hw_needs_fm(&hw));
	assert_null(hw.first);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_scan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
