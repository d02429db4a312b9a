/* The lines of verify --deep's children into struct gp_deep_gpu: each key,
 * numbers that are not numbers or out of range ignored, the first of a
 * string kept. */
#include "testutil.h"

#include "gpuprov/nvhealth.h"

static void parse(struct gp_deep_gpu *g, const char *text)
{
	char *copy = strdup(text), *save = NULL;
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		gp_nvhealth_parse_line(g, l);
	free(copy);
}

static void test_parse(void **state)
{
	(void)state;
	struct gp_deep_gpu g;
	gp_deep_gpu_init(&g);
	parse(&g, "name NVIDIA H100 80GB HBM3\nname other\nbusy 2\necc_unc 3\nremap 1 0\n"
	          "retired_pending 0\nnvlink 17 1 5\npcie_max 5 16\nload_pcie 4 8\n"
	          "load_reasons 64\nload_temp 81\nslowdown_temp 87\nload_power 650\n"
	          "power_limit 700\nmemory_bps 3e+12\nh2d_bps 5.2e+10\nd2h_bps 5e10\n"
	          "gemm bf16 8e+14\ngemm tf32 4e14\ngemm_skip fp8 needs cuBLASLt\n"
	          "gemm fp99 1\nunknown 1\ncublas /opt/cuda/lib64/libcublas.so.12\n"
	          "cublas other\ncublaslt /opt/cuda/lib64/libcublasLt.so.12\n");
	assert_string_equal(g.name, "NVIDIA H100 80GB HBM3");
	assert_int_equal(g.busy, 2);
	assert_int_equal(g.ecc_volatile_unc, 3);
	assert_int_equal(g.remap_pending, 1);
	assert_int_equal(g.remap_failure, 0);
	assert_int_equal(g.retired_pending, 0);
	assert_int_equal(g.nvlink_active, 17);
	assert_int_equal(g.nvlink_inactive, 1);
	assert_int_equal(g.nvlink_errors, 5);
	assert_int_equal(g.pcie_max_gen, 5);
	assert_int_equal(g.load_pcie_width, 8);
	assert_int_equal(g.load_reasons, 64);
	assert_int_equal(g.load_temp_c, 81);
	assert_int_equal(g.power_limit_w, 700);
	assert_true(g.memory_bps == 3e12);
	assert_true(g.d2h_bps == 5e10);
	assert_true(g.gemm_flops[GP_DTYPE_BF16] == 8e14);
	assert_true(g.gemm_flops[GP_DTYPE_TF32] == 4e14);
	assert_true(g.gemm_flops[GP_DTYPE_FP16] == 0);
	assert_string_equal(g.gemm_skip[GP_DTYPE_FP8], "needs cuBLASLt");
	assert_string_equal(g.cublas, "/opt/cuda/lib64/libcublas.so.12");
	assert_string_equal(g.cublaslt, "/opt/cuda/lib64/libcublasLt.so.12");
	gp_deep_gpu_free(&g);
	assert_int_equal(g.busy, -1);
}

static void test_hostile(void **state)
{
	(void)state;
	struct gp_deep_gpu g;
	gp_deep_gpu_init(&g);
	parse(&g,
	      "busy -1\necc_unc x\nremap 1\npcie_max 5 16 7\nload_temp 99999999999999\n"
	      "memory_bps inf\nh2d_bps -5\nd2h_bps nan\ngemm bf16 1e300\ngemm\nbusy\n");
	assert_int_equal(g.busy, -1);
	assert_int_equal(g.ecc_volatile_unc, -1);
	assert_int_equal(g.remap_pending, -1);
	assert_int_equal(g.pcie_max_gen, -1); /* three numbers where two belong */
	assert_int_equal(g.load_temp_c, INT_MAX);
	assert_true(g.memory_bps == 0);
	assert_true(g.h2d_bps == 0);
	assert_true(g.d2h_bps == 0);
	assert_true(g.gemm_flops[GP_DTYPE_BF16] == 0);
	gp_deep_gpu_free(&g);
}

/* The peer-to-peer child's lines: GPU I's copy to a later GPU J, I and J
 * below the count; the first reason kept. */
static void test_peer_lines(void **state)
{
	(void)state;
	struct gp_deep_gpu g[3];
	for (int i = 0; i < 3; i++)
		gp_deep_gpu_init(&g[i]);
	const char *lines[] = {
		"p2p 0 1 3.8e+11",
		"p2p_skip 0 2 cuDeviceCanAccessPeer: no",
		"p2p_skip 0 2 second reason",
		"p2p 1 2 inf",
		"p2p 2 1 1e9", /* not i < j */
		"p2p 1 3 1e9", /* no GPU 3 */
		"p2p -1 2 1e9",
		"p2p 1 2",
		"p2pp 1 2 1e9",
		"p2p_skip 1",
		"p2p 1 2 5e10 x",
	};
	for (size_t i = 0; i < ARRAY_SIZE(lines); i++) {
		char *l = strdup(lines[i]);
		gp_nvhealth_parse_peer_line(g, 3, l);
		free(l);
	}
	assert_true(g[0].peer_bps[1] == 3.8e11);
	assert_true(g[0].peer_bps[2] == 0);
	assert_string_equal(g[0].peer_skip[2], "cuDeviceCanAccessPeer: no");
	assert_true(g[1].peer_bps[2] == 0);
	assert_null(g[1].peer_skip[2]);
	assert_true(g[2].peer_bps[1] == 0);
	for (int i = 0; i < 3; i++)
		gp_deep_gpu_free(&g[i]);
}

/* The ranks' lines: the slowest rank's time counts, a hostile time is
 * dropped, the first library and reason are kept. */
static void test_nccl_lines(void **state)
{
	(void)state;
	struct gp_deep_nccl x = { 0 };
	const char *lines[] = {
		"nccl_time 0.0002", "nccl_time 0.0003",
		"nccl_time 0.0001", "nccl_time inf",
		"nccl_time -1",     "nccl_time 2 x",
		"nccl_time",        "nccl_lib /a/libnccl.so.2",
		"nccl_lib /b",      "nccl_skip no libnccl.so.2",
		"nccl_skip later",  "nccl_timeout 9",
	};
	for (size_t i = 0; i < ARRAY_SIZE(lines); i++) {
		char *l = strdup(lines[i]);
		gp_nvhealth_parse_nccl_line(&x, l);
		free(l);
	}
	assert_true(x.seconds == 0.0003);
	assert_string_equal(x.library, "/a/libnccl.so.2");
	assert_string_equal(x.skip, "no libnccl.so.2");
	gp_deep_nccl_free(&x);
	assert_null(x.library);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_peer_lines),
		cmocka_unit_test(test_nccl_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
