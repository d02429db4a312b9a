/* libFuzzer target: the lines verify --deep's children write
 * (gp_nvhealth_parse_line, src/sys/nvhealth.c), which carry what the
 * driver libraries said. Whatever the lines, the counts stay -1 or
 * non-negative, the rates finite and non-negative, the strings bounded. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/nvhealth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	struct gp_deep_gpu g;
	gp_deep_gpu_init(&g);
	char *save = NULL;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		gp_nvhealth_parse_line(&g, l);
	if (g.busy < -1 || g.ecc_volatile_unc < -1 || g.pcie_max_width < -1 ||
	    g.load_reasons < -1 || g.nvlink_errors < -1)
		abort();
	double rates[] = { g.memory_bps,    g.h2d_bps,       g.d2h_bps,
		           g.gemm_flops[0], g.gemm_flops[1], g.gemm_flops[2],
		           g.gemm_flops[3] };
	for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
		if (!isfinite(rates[i]) || rates[i] < 0)
			abort();
	if ((g.name && strlen(g.name) > 200) ||
	    (g.perf_skip && strlen(g.perf_skip) > 200))
		abort();
	gp_deep_gpu_free(&g);
	return 0;
}
