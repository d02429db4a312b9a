/* CUDA toolkit version probes; and, read-only, the real toolkit of the
 * machine running the tests (/usr/local/cuda) when it has one: every source
 * it has must agree. */
#include "testutil.h"

#include "gpuprov/cudatk.h"
#include "gpuprov/run.h"

static void test_parsers(void **state)
{
	char *v = gp_cuda_header_parse("#ifndef X\n#define CUDA_VERSION 12040\n#endif\n");
	assert_string_equal(v, "12.4");
	free(v);
	v = gp_cuda_header_parse("#define CUDA_VERSION 13000\n");
	assert_string_equal(v, "13.0");
	free(v);
	assert_null(gp_cuda_header_parse("#define CUDART_VERSION 12040\n"));
	v = gp_nvcc_version_parse("nvcc: NVIDIA (R) Cuda compiler driver\n"
	                          "Cuda compilation tools, release 11.8, V11.8.89\n"
	                          "Build cuda_11.8.r11.8/compiler.31833905_0\n");
	assert_string_equal(v, "11.8.89");
	free(v);
	assert_null(gp_nvcc_version_parse("nvidia-smi 535\n"));
	assert_true(gp_cuda_version_agrees("12.4.1", "12.4"));
	assert_true(gp_cuda_version_agrees("12.4.1", "12.4.1"));
	assert_false(gp_cuda_version_agrees("12.4.0", "12.4.1"));
	assert_false(gp_cuda_version_agrees("12.40", "12.4"));
	assert_false(gp_cuda_version_agrees("11.8", "12.4"));
	struct gp_cuda_probe p = { .json = "12.4.1",
		                   .header = "12.4",
		                   .nvcc = "11.8.89" };
	char *a, *b;
	assert_false(gp_cuda_probe_consistent(&p, &a, &b));
	assert_string_equal(a, "version.json says 12.4.1");
	assert_string_equal(b, "nvcc says 11.8.89");
	free(a);
	free(b);
}

static void test_real_toolkit(void **state)
{
	struct gp_root r;
	assert_int_equal(gp_root_open(&r, "/"), 0);
	if (!gp_root_exists(&r, "/usr/local/cuda/include/cuda.h")) {
		gp_root_close(&r);
		skip(); /* no CUDA toolkit on this machine */
	}
	struct gp_cuda_probe p;
	gp_cuda_probe_files(&r, "/usr/local/cuda", &p);
	char *const argv[] = { "/usr/local/cuda/bin/nvcc", "--version", NULL };
	struct gp_run_result res = { 0 };
	const struct gp_run_opts o = { .root = "/", .timeout_ms = 30000 };
	if (gp_run(&o, argv, &res) == 0 && gp_run_succeeded(&res))
		p.nvcc = gp_nvcc_version_parse(res.output);
	gp_run_result_free(&res);
	print_message(
	    "real toolkit: version.json %s, version.txt %s, cuda.h %s, nvcc %s\n",
	    p.json ? p.json : "-", p.txt ? p.txt : "-", p.header ? p.header : "-",
	    p.nvcc ? p.nvcc : "-");
	assert_non_null(p.header);
	char *a = NULL, *b = NULL;
	bool ok = gp_cuda_probe_consistent(&p, &a, &b);
	if (!ok)
		fail_msg("the sources disagree: %s, %s", a, b);
	gp_cuda_probe_free(&p);
	gp_root_close(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parsers),
		cmocka_unit_test(test_real_toolkit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
