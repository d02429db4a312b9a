/* The verify --deep model table: NVML names to models (most specific row
 * first, whole words), the figures of docs/reference/gpu-health.md, the
 * PCIe expectation and the pass/warn/fail cut. */
#include "testutil.h"

#include "gpuprov/gpuspec.h"

static const char *model(const char *name)
{
	const struct gp_gpuspec *s = gp_gpuspec_lookup(name);
	return s ? s->model : "(none)";
}

static void test_lookup(void **state)
{
	(void)state;
	assert_string_equal(model("NVIDIA H100 80GB HBM3"), "H100 SXM5 80GB");
	assert_string_equal(model("NVIDIA H100 PCIe"), "H100 PCIe 80GB");
	assert_string_equal(model("NVIDIA H100 NVL"), "H100 NVL 94GB");
	assert_string_equal(model("NVIDIA H200"), "H200 SXM 141GB");
	assert_string_equal(model("NVIDIA A100-SXM4-40GB"), "A100 SXM4 40GB");
	assert_string_equal(model("NVIDIA A100-SXM4-80GB"), "A100 SXM4 80GB");
	assert_string_equal(model("NVIDIA A100-PCIE-40GB"), "A100 PCIe 40GB");
	assert_string_equal(model("NVIDIA A100 80GB PCIe"), "A100 PCIe 80GB");
	assert_string_equal(model("NVIDIA L4"), "L4");
	assert_string_equal(model("Tesla T4"), "T4");
	/* Whole words only: an L40S is no L4, an unknown model no guess. */
	assert_string_equal(model("NVIDIA L40S"), "(none)");
	assert_string_equal(model("NVIDIA GeForce RTX 4090"), "(none)");
	assert_string_equal(model(""), "(none)");
	assert_null(gp_gpuspec_lookup(NULL));
}

static void test_figures(void **state)
{
	(void)state;
	const struct gp_gpuspec *h100 = gp_gpuspec_lookup("NVIDIA H100 80GB HBM3");
	assert_true(h100->dense_tflops[GP_DTYPE_BF16] == 989);
	assert_true(h100->dense_tflops[GP_DTYPE_FP8] == 1979);
	assert_true(h100->memory_gbps == 3350);
	assert_int_equal(h100->pcie_gen, 5);
	assert_int_equal(h100->pcie_width, 16);
	assert_true(h100->gemm_healthy == 0.80);
	const struct gp_gpuspec *a100 = gp_gpuspec_lookup("NVIDIA A100-SXM4-40GB");
	assert_true(a100->gemm_healthy == 0.87);
	assert_true(a100->dense_tflops[GP_DTYPE_FP8] == 0); /* no FP8 on Ampere */
	const struct gp_gpuspec *t4 = gp_gpuspec_lookup("Tesla T4");
	assert_true(t4->dense_tflops[GP_DTYPE_BF16] == 0);
	assert_true(t4->dense_tflops[GP_DTYPE_FP16] == 65);
	assert_string_equal(gp_dtype_name(GP_DTYPE_TF32), "tf32");
	assert_string_equal(gp_dtype_name(GP_DTYPE_COUNT), "?");
}

static void test_pcie(void **state)
{
	(void)state;
	assert_true(gp_pcie_expected_gbps(5, 16) == 50);
	assert_true(gp_pcie_expected_gbps(5, 8) == 25);
	assert_true(gp_pcie_expected_gbps(4, 16) == 24);
	assert_true(gp_pcie_expected_gbps(2, 16) == 0);
	assert_true(gp_pcie_expected_gbps(7, 16) == 0);
	assert_true(gp_pcie_expected_gbps(5, 0) == 0);
}

static void test_peer(void **state)
{
	(void)state;
	const struct gp_gpuspec *h100 = gp_gpuspec_lookup("NVIDIA H100 80GB HBM3");
	const struct gp_gpuspec *a100 = gp_gpuspec_lookup("NVIDIA A100-SXM4-80GB");
	const struct gp_gpuspec *l4 = gp_gpuspec_lookup("NVIDIA L4");
	/* NVLink: half the per-GPU figure (both directions) times 0.80. */
	assert_true(gp_peer_expected_gbps(h100, h100, true, 5, 16) == 360);
	/* The slower model's links bound the pair. */
	assert_true(gp_peer_expected_gbps(h100, a100, true, 5, 16) == 240);
	/* Links not active, a model without NVLink or not in the table: PCIe. */
	assert_true(gp_peer_expected_gbps(h100, h100, false, 5, 16) == 50);
	assert_true(gp_peer_expected_gbps(l4, l4, true, 4, 16) == 24);
	assert_true(gp_peer_expected_gbps(NULL, h100, true, 5, 8) == 25);
	assert_true(gp_peer_expected_gbps(NULL, NULL, false, 0, 0) == 0);
}

static void test_judge(void **state)
{
	(void)state;
	double f;
	assert_int_equal(gp_gpuspec_judge(100, 100, &f), GP_VERDICT_PASS);
	assert_true(f == 1.0);
	assert_int_equal(gp_gpuspec_judge(85, 100, &f), GP_VERDICT_PASS);
	assert_int_equal(gp_gpuspec_judge(84, 100, &f), GP_VERDICT_WARN);
	assert_int_equal(gp_gpuspec_judge(70, 100, &f), GP_VERDICT_WARN);
	assert_int_equal(gp_gpuspec_judge(69, 100, &f), GP_VERDICT_FAIL);
	/* A slow GPU at 55% of H100's BF16 peak, against the healthy 80%. */
	assert_int_equal(gp_gpuspec_judge(0.55 * 989, 0.80 * 989, &f), GP_VERDICT_FAIL);
	assert_int_equal(gp_gpuspec_judge(1, 0, &f), GP_VERDICT_FAIL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup), cmocka_unit_test(test_figures),
		cmocka_unit_test(test_pcie),   cmocka_unit_test(test_peer),
		cmocka_unit_test(test_judge),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
