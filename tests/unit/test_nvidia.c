/* NVIDIA facts: the GPU table, CUDA -> minimum driver (GA and update
 * releases), minor-version compatibility floors, which CCs a CUDA release
 * targets, and PyTorch wheel tags. Expected values are copied from
 * the public sources in docs/reference/nvidia-tables.md, so a wrong table
 * row fails here. */
#include "testutil.h"

#include "gpuprov/cuda_releases.h"
#include "gpuprov/version.h"

struct gpu_case {
	unsigned device;
	const char *name;
	const char *arch;
	unsigned cc_major, cc_minor;
	const char *first_cuda;
};

/* Every id of section 2. */
static const struct gpu_case gpu_cases[] = {
	{ 0x1db1, "V100", "Volta", 7, 0, "9.0" },
	{ 0x1db4, "V100", "Volta", 7, 0, "9.0" },
	{ 0x1db5, "V100", "Volta", 7, 0, "9.0" },
	{ 0x1db6, "V100", "Volta", 7, 0, "9.0" },
	{ 0x1eb8, "T4", "Turing", 7, 5, "10.0" },
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
	{ 0x27b8, "L4", "Ada Lovelace", 8, 9, "11.8" },
	{ 0x26b9, "L40S", "Ada Lovelace", 8, 9, "11.8" },
	{ 0x26b5, "L40", "Ada Lovelace", 8, 9, "11.8" },
	{ 0x2684, "RTX 4090", "Ada Lovelace", 8, 9, "11.8" },
	{ 0x2330, "H100 SXM5", "Hopper", 9, 0, "11.8" },
	{ 0x2331, "H100 PCIe", "Hopper", 9, 0, "11.8" },
	{ 0x2321, "H100 NVL", "Hopper", 9, 0, "11.8" },
	{ 0x2339, "H100", "Hopper", 9, 0, "11.8" },
	{ 0x2335, "H200 SXM", "Hopper", 9, 0, "11.8" },
	{ 0x233b, "H200 NVL", "Hopper", 9, 0, "11.8" },
	{ 0x2329, "H20", "Hopper", 9, 0, "11.8" },
	{ 0x232c, "H20 HBM3e", "Hopper", 9, 0, "11.8" },
	{ 0x2328, "H20B", "Hopper", 9, 0, "11.8" },
	{ 0x230c, "H20 NVL16", "Hopper", 9, 0, "11.8" },
	{ 0x230e, "H20 NVL16", "Hopper", 9, 0, "11.8" },
	{ 0x2342, "GH200", "Grace Hopper", 9, 0, "11.8" },
	{ 0x2348, "GH200 144G HBM3e", "Grace Hopper", 9, 0, "11.8" },
	{ 0x2901, "B200", "Blackwell", 10, 0, "12.8" },
	{ 0x2941, "GB200", "Blackwell", 10, 0, "12.8" },
	{ 0x3182, "B300", "Blackwell", 10, 3, "12.9" },
	{ 0x31c2, "GB300", "Blackwell", 10, 3, "12.9" },
	{ 0x31c3, "GB300", "Blackwell", 10, 3, "12.9" },
	{ 0x31a1, "GB300 Max-Q", "Blackwell", 10, 3, "12.9" },
	{ 0x2b85, "RTX 5090", "Blackwell", 12, 0, "12.8" },
	{ 0x2bb5, "RTX PRO 6000 Blackwell Server Edition", "Blackwell", 12, 0, "12.8" },
	{ 0x2bb1, "RTX PRO 6000 Blackwell Workstation Edition", "Blackwell", 12, 0,
	  "12.8" },
	{ 0x2bb4, "RTX PRO 6000 Blackwell Max-Q", "Blackwell", 12, 0, "12.8" },
};

static void test_gpu_lookup(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof gpu_cases / sizeof gpu_cases[0]; i++) {
		const struct gpu_case *t = &gpu_cases[i];
		const struct gp_gpu_info *g = gp_gpu_lookup(t->device);
		if (!g)
			fail_msg("10de:%04x not found", t->device);
		assert_int_equal(g->device, t->device);
		assert_string_equal(g->name, t->name);
		assert_string_equal(g->arch, t->arch);
		assert_int_equal(g->cc_major, t->cc_major);
		assert_int_equal(g->cc_minor, t->cc_minor);
		assert_string_equal(g->first_cuda, t->first_cuda);
	}
}

static void test_gpu_unknown(void **state)
{
	(void)state;
	/* Neighbours of known ids, a GPU src/nv/gpus.c does not list (GB10,
	 * 10de:2e12), and 0. */
	static const unsigned unknown[] = { 0x0000, 0x20b4, 0x1db0, 0x2332,
		                            0x2343, 0x2902, 0x2e12, 0xffff };
	for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
		if (gp_gpu_lookup(unknown[i]))
			fail_msg("10de:%04x should be unknown", unknown[i]);
}

/* The architecture and CC of every row agree, and each arch's first CUDA is
 * one the table can name: catches a row typed into the wrong family. */
static void test_gpu_sanity(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof gpu_cases / sizeof gpu_cases[0]; i++) {
		const struct gp_gpu_info *g = gp_gpu_lookup(gpu_cases[i].device);
		unsigned cc = g->cc_major * 10 + g->cc_minor;
		const char *want = cc < 75    ? "Volta"
		                   : cc < 80  ? "Turing"
		                   : cc < 89  ? "Ampere"
		                   : cc < 90  ? "Ada Lovelace"
		                   : cc < 100 ? "Hopper"
		                              : "Blackwell";
		/* Grace Hopper is Hopper's CC on a Grace board. */
		if (strcmp(g->arch, "Grace Hopper") == 0 && cc == 90)
			want = "Grace Hopper";
		if (strcmp(g->arch, want) != 0)
			fail_msg("10de:%04x: CC %u.%u is %s, table says %s", g->device,
			         g->cc_major, g->cc_minor, want, g->arch);
		assert_true(gp_version_is_valid(g->first_cuda));
		/* A GPU is supported by its own first CUDA, not by the one before. */
		assert_true(gp_cuda_supports_cc(g->first_cuda, g));
		assert_true(g->name && *g->name);
	}
	/* No id twice. */
	for (size_t i = 0; i < sizeof gpu_cases / sizeof gpu_cases[0]; i++)
		for (size_t j = i + 1; j < sizeof gpu_cases / sizeof gpu_cases[0]; j++)
			assert_int_not_equal(gpu_cases[i].device, gpu_cases[j].device);
}

static void test_module_flavors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof gpu_cases / sizeof gpu_cases[0]; i++) {
		const struct gp_gpu_info *g = gp_gpu_lookup(gpu_cases[i].device);
		bool blackwell = strcmp(g->arch, "Blackwell") == 0 ||
		                 strcmp(g->arch, "Grace Hopper") == 0;
		bool volta = strcmp(g->arch, "Volta") == 0;
		if (gp_gpu_needs_open_modules(g) != blackwell)
			fail_msg("%s: needs open modules should be %d", g->name,
			         blackwell);
		if (gp_gpu_needs_proprietary(g) != volta)
			fail_msg("%s: needs proprietary should be %d", g->name, volta);
	}
	/* Grace Hopper needs open modules at CC 9.0; older than Volta needs
	 * proprietary; a GPU cannot need both. */
	const struct gp_gpu_info gh200 = { 0, "GH200", "Grace Hopper", 9, 0, "12.0" };
	const struct gp_gpu_info p100 = { 0, "P100", "Pascal", 6, 0, "8.0" };
	assert_true(gp_gpu_needs_open_modules(&gh200));
	assert_false(gp_gpu_needs_proprietary(&gh200));
	assert_true(gp_gpu_needs_proprietary(&p100));
	assert_false(gp_gpu_needs_open_modules(&p100));
	assert_false(gp_gpu_needs_open_modules(NULL));
	assert_false(gp_gpu_needs_proprietary(NULL));
}

struct drv_case {
	const char *cuda;
	const char *driver; /* NULL: unknown */
};

static const struct drv_case drv_cases[] = {
	/* GA rows, keyed X.Y. From 13.2 on the bundled driver only
	 * (docs/reference/stack-2026.md section 2). */
	{ "13.5", "620.70.06" },
	{ "13.4", "615.71.09" },
	{ "13.3", "610.43.02" },
	{ "13.2", "595.45.04" },
	{ "13.1", "590.44.01" },
	{ "13.0", "580.65.06" },
	{ "12.9", "575.51.03" },
	{ "12.8", "570.26" },
	{ "12.6", "560.28.03" },
	{ "12.5", "555.42.02" },
	{ "12.4", "550.54.14" },
	{ "12.3", "545.23.06" },
	{ "12.2", "535.54.03" },
	{ "12.1", "530.30.02" },
	{ "12.0", "525.60.13" },
	{ "11.8", "520.61.05" },
	{ "11.7", "515.43.04" },
	{ "11.6", "510.39.01" },
	{ "11.5", "495.29.05" },
	{ "11.4", "470.42.01" },
	{ "11.3", "465.19.01" },
	{ "11.2", "460.27.03" },
	{ "11.1", "455.23" },
	/* X.Y.0 is the GA release. */
	{ "12.4.0", "550.54.14" },
	{ "11.8.0", "520.61.05" },
	/* Update releases. */
	{ "13.2.2", "595.71.05" },
	{ "13.2.1", "595.58.03" },
	{ "13.1.2", "590.48.01" },
	{ "13.1.1", "590.48.01" },
	{ "13.0.3", "580.126.20" },
	{ "13.0.1", "580.82.07" },
	{ "13.0.2", "580.95.05" },
	{ "12.9.1", "575.57.08" },
	{ "12.8.1", "570.124.06" },
	{ "12.6.1", "560.35.03" },
	{ "12.6.2", "560.35.03" },
	{ "12.6.3", "560.35.05" },
	{ "12.5.1", "555.42.06" },
	{ "12.4.1", "550.54.15" },
	{ "12.3.1", "545.23.08" },
	{ "12.2.1", "535.86.09" },
	{ "12.2.2", "535.104.05" },
	{ "12.1.1", "530.30.02" },
	{ "12.0.1", "525.85.12" },
	{ "11.7.1", "515.48.07" },
	/* An update the table does not list needs at least what the listed
	 * release before it needed. */
	{ "12.2.3", "535.104.05" },
	{ "12.3.2", "545.23.08" },
	{ "11.8.89", "520.61.05" },
	{ "13.3.1", "610.43.02" },
	{ "13.4.2", "615.71.09" },
	/* Leading zeros are numbers, as everywhere in version compare. */
	{ "12.04", "550.54.14" },
	/* Unknown releases and malformed input. */
	{ "12.7", NULL },
	{ "12.7.1", NULL },
	{ "11.0", NULL },
	{ "10.2", NULL },
	{ "14.0", NULL },
	{ "12", NULL },
	{ "12.4.1.1", NULL },
	{ "12.x", NULL },
	{ "v12.4", NULL },
	{ "", NULL },
	{ NULL, NULL },
};

static void test_min_driver(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof drv_cases / sizeof drv_cases[0]; i++) {
		const struct drv_case *t = &drv_cases[i];
		const char *got = gp_cuda_min_driver(t->cuda);
		if (!t->driver && got)
			fail_msg("min_driver(%s) = %s, want NULL", t->cuda, got);
		if (t->driver && (!got || strcmp(got, t->driver) != 0))
			fail_msg("min_driver(%s) = %s, want %s", t->cuda,
			         got ? got : "NULL", t->driver);
	}
}

/* Newer toolkits never need an older driver: catches a row with its update
 * and GA swapped or a mistyped digit. The releases of section 1, oldest
 * first (not every X.Y.Z: one the table lacks reads as its GA). */
static void test_min_driver_monotonic(void **state)
{
	(void)state;
	static const char *const releases[] = {
		"11.1",   "11.2",   "11.3",   "11.4",   "11.5",   "11.6",   "11.7",
		"11.7.1", "11.8",   "12.0",   "12.0.1", "12.1",   "12.1.1", "12.2",
		"12.2.1", "12.2.2", "12.3",   "12.3.1", "12.4",   "12.4.1", "12.5",
		"12.5.1", "12.6",   "12.6.1", "12.6.2", "12.6.3", "12.8",   "12.8.1",
		"12.9",   "12.9.1", "13.0",   "13.0.1", "13.0.2", "13.0.3", "13.1",
		"13.1.1", "13.1.2", "13.2",   "13.2.1", "13.2.2", "13.3",   "13.4",
		"13.5",
	};
	for (size_t i = 0; i < sizeof releases / sizeof releases[0]; i++) {
		const char *d = gp_cuda_min_driver(releases[i]);
		if (!d)
			fail_msg("%s unknown", releases[i]);
		assert_true(gp_version_is_valid(d));
		if (i == 0)
			continue;
		const char *prev = gp_cuda_min_driver(releases[i - 1]);
		if (gp_version_compare(d, prev) < 0)
			fail_msg("%s needs %s, less than %s for %s", releases[i], d, prev,
			         releases[i - 1]);
	}
}

static void test_minor_compat(void **state)
{
	(void)state;
	assert_string_equal(gp_cuda_minor_compat_driver("11.8"), "450.80.02");
	assert_string_equal(gp_cuda_minor_compat_driver("11.1"), "450.80.02");
	assert_string_equal(gp_cuda_minor_compat_driver("12.0"), "525.60.13");
	assert_string_equal(gp_cuda_minor_compat_driver("12.4"), "525.60.13");
	assert_string_equal(gp_cuda_minor_compat_driver("12.9.1"), "525.60.13");
	assert_string_equal(gp_cuda_minor_compat_driver("13.0"), "580");
	assert_string_equal(gp_cuda_minor_compat_driver("13.1"), "580");
	/* Every 13.x runs on R580 through minor-version compatibility. */
	assert_string_equal(gp_cuda_minor_compat_driver("13.5"), "580");
	assert_null(gp_cuda_minor_compat_driver("10.2"));
	assert_null(gp_cuda_minor_compat_driver("14.0"));
	assert_null(gp_cuda_minor_compat_driver("twelve"));
	assert_null(gp_cuda_minor_compat_driver(NULL));
	/* The floor is never above the GA minimum of any release of the major. */
	static const char *const v[] = { "11.8", "12.0", "12.4", "12.8",
		                         "13.0", "13.1", "13.3", "13.5" };
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		assert_true(gp_version_compare(gp_cuda_minor_compat_driver(v[i]),
		                               gp_cuda_min_driver(v[i])) <= 0);
}

static void test_supports_cc(void **state)
{
	(void)state;
	const struct gp_gpu_info *v100 = gp_gpu_lookup(0x1db1);
	const struct gp_gpu_info *t4 = gp_gpu_lookup(0x1eb8);
	const struct gp_gpu_info *a10 = gp_gpu_lookup(0x2236);
	const struct gp_gpu_info *h100 = gp_gpu_lookup(0x2330);
	const struct gp_gpu_info *b200 = gp_gpu_lookup(0x2901);
	const struct gp_gpu_info *b300 = gp_gpu_lookup(0x3182);

	/* CUDA 13 dropped Volta; 12.x still has it; T4 (7.5) stays. */
	assert_true(gp_cuda_supports_cc("12.8", v100));
	assert_true(gp_cuda_supports_cc("12.9.1", v100));
	assert_false(gp_cuda_supports_cc("13.0", v100));
	assert_false(gp_cuda_supports_cc("13.1", v100));
	assert_true(gp_cuda_supports_cc("13.0", t4));
	/* Hopper from 11.8. */
	assert_false(gp_cuda_supports_cc("11.0", h100));
	assert_false(gp_cuda_supports_cc("11.7", h100));
	assert_true(gp_cuda_supports_cc("11.8", h100));
	assert_true(gp_cuda_supports_cc("13.0", h100));
	/* Compared as versions: 11.10 would be after 11.8, 11.1 before 11.8. */
	assert_true(gp_cuda_supports_cc("11.1", a10));
	assert_false(gp_cuda_supports_cc("11.0", a10));
	assert_false(gp_cuda_supports_cc("12.7", b200));
	assert_true(gp_cuda_supports_cc("12.8", b200));
	assert_false(gp_cuda_supports_cc("12.8.1", b300));
	assert_true(gp_cuda_supports_cc("12.9", b300));
	assert_true(gp_cuda_supports_cc("12.10", b300));
	/* Not a version, or no GPU. */
	assert_false(gp_cuda_supports_cc("latest", h100));
	assert_false(gp_cuda_supports_cc(NULL, h100));
	assert_false(gp_cuda_supports_cc("12.4", NULL));
}

struct tag_case {
	const char *in;
	const char *cuda; /* NULL: none */
	bool cpu;
};

static const struct tag_case tag_cases[] = {
	{ "cu118", "11.8", false },
	{ "cu121", "12.1", false },
	{ "cu124", "12.4", false },
	{ "cu126", "12.6", false },
	{ "cu128", "12.8", false },
	{ "cu129", "12.9", false },
	{ "cu130", "13.0", false },
	{ "cu132", "13.2", false },
	{ "cu92", "9.2", false },
	{ "https://download.pytorch.org/whl/cu118", "11.8", false },
	{ "https://download.pytorch.org/whl/cu130/", "13.0", false },
	{ "https://download.pytorch.org/whl/cu128//", "12.8", false },
	{ "https://mirror.example.org/pytorch/whl/cu121", "12.1", false },
	{ "cpu", NULL, true },
	{ "https://download.pytorch.org/whl/cpu", NULL, true },
	{ "https://download.pytorch.org/whl/cpu/", NULL, true },
	/* Anything else: no CUDA, and not cpu. */
	{ "https://download.pytorch.org/whl", NULL, false },
	{ "https://pypi.org/simple", NULL, false },
	{ "https://download.pytorch.org/whl/rocm6.2", NULL, false },
	{ "https://download.pytorch.org/whl/cu1180", NULL, false },
	{ "https://download.pytorch.org/whl/cu1", NULL, false },
	{ "https://download.pytorch.org/whl/cu", NULL, false },
	{ "https://download.pytorch.org/whl/cu12a", NULL, false },
	{ "https://download.pytorch.org/whl/cu018", NULL, false },
	{ "https://download.pytorch.org/whl/cpu-cxx11-abi", NULL, false },
	{ "CU118", NULL, false },
	{ "cpux", NULL, false },
	{ "", NULL, false },
	{ "/", NULL, false },
};

static void test_torch_tags(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof tag_cases / sizeof tag_cases[0]; i++) {
		const struct tag_case *t = &tag_cases[i];
		char buf[16];
		bool cpu = !t->cpu; /* must be written either way */
		const char *got = gp_torch_tag_cuda(t->in, &cpu, buf);
		if (!t->cuda && got)
			fail_msg("tag(%s) = %s, want NULL", t->in, got);
		if (t->cuda && (!got || strcmp(got, t->cuda) != 0))
			fail_msg("tag(%s) = %s, want %s", t->in, got ? got : "NULL",
			         t->cuda);
		if (cpu != t->cpu)
			fail_msg("tag(%s): cpu = %d, want %d", t->in, cpu, t->cpu);
	}
	char buf[16];
	bool cpu = true;
	assert_null(gp_torch_tag_cuda(NULL, &cpu, buf));
	assert_false(cpu);
	assert_null(gp_torch_tag_cuda("cpu", NULL, buf)); /* cpu may be NULL */
}

/* Which wheel tags a GPU can use, per tag, newest first (cu132 cu130 cu129
 * cu128 cu126 cu124 cu121 cu118): 1 targets it, 0 not. */
static void expect_tags(unsigned device, const char *want)
{
	const struct gp_gpu_info *g = gp_gpu_lookup(device);
	assert_non_null(g);
	char got[16] = "";
	for (size_t i = 0; gp_torch_cuda_tags[i]; i++)
		strcat(got, gp_torch_tag_targets(gp_torch_cuda_tags[i], g) ? "1" : "0");
	if (strcmp(got, want) != 0)
		fail_msg("10de:%04x (%s): tags %s, want %s", device, g->name, got, want);
}

static void test_torch_tags_for_gpu(void **state)
{
	(void)state;
	/* The tags, in order, each with its CUDA. */
	static const char *const want[] = { "cu132", "cu130", "cu129", "cu128",
		                            "cu126", "cu124", "cu121", "cu118" };
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		assert_string_equal(gp_torch_cuda_tags[i], want[i]);
	assert_null(gp_torch_cuda_tags[sizeof want / sizeof want[0]]);
	/* V100: no cu13x. T4 and H100: every tag (Hopper from 11.8). */
	expect_tags(0x1db1, "00111111");
	expect_tags(0x1eb8, "11111111");
	expect_tags(0x2330, "11111111");
	expect_tags(0x2342, "11111111");
	/* Blackwell from cu128; B300 and GB300 (sm_103) from cu129. */
	expect_tags(0x2901, "11110000");
	expect_tags(0x2bb5, "11110000");
	expect_tags(0x3182, "11100000");
	expect_tags(0x31c2, "11100000");
	/* An index URL works as the tag; cpu and NULL target nothing. */
	const struct gp_gpu_info *v100 = gp_gpu_lookup(0x1db1);
	assert_true(
	    gp_torch_tag_targets("https://download.pytorch.org/whl/cu126/", v100));
	assert_false(
	    gp_torch_tag_targets("https://download.pytorch.org/whl/cu132", v100));
	assert_false(gp_torch_tag_targets("cpu", v100));
	assert_false(gp_torch_tag_targets("cu130", NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_lookup),
		cmocka_unit_test(test_gpu_unknown),
		cmocka_unit_test(test_gpu_sanity),
		cmocka_unit_test(test_module_flavors),
		cmocka_unit_test(test_min_driver),
		cmocka_unit_test(test_min_driver_monotonic),
		cmocka_unit_test(test_minor_compat),
		cmocka_unit_test(test_supports_cc),
		cmocka_unit_test(test_torch_tags),
		cmocka_unit_test(test_torch_tags_for_gpu),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
