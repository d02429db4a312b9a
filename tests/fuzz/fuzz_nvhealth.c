/* libFuzzer target: the lines verify --deep's children write
 * (gp_nvhealth_parse_line, gp_nvhealth_parse_peer_line and
 * gp_nvhealth_parse_nccl_line,
 * src/sys/nvhealth.c), which carry what the
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
	struct gp_deep_gpu g, pair[2];
	gp_deep_gpu_init(&g);
	gp_deep_gpu_init(&pair[0]);
	gp_deep_gpu_init(&pair[1]);
	struct gp_deep_nccl nccl = { 0 };
	char *save = NULL;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		_cleanup_free_ char *copy = strdup(l), *copy2 = strdup(l);
		gp_nvhealth_parse_line(&g, l);
		if (copy)
			gp_nvhealth_parse_peer_line(pair, 2, copy);
		if (copy2)
			gp_nvhealth_parse_nccl_line(&nccl, copy2);
	}
	if (!isfinite(nccl.seconds) || nccl.seconds < 0 ||
	    (nccl.library && strlen(nccl.library) > 200) ||
	    (nccl.skip && strlen(nccl.skip) > 200))
		abort();
	gp_deep_nccl_free(&nccl);
	/* Only GPU 0's copy to GPU 1 can be set. */
	if (!isfinite(pair[0].peer_bps[1]) || pair[0].peer_bps[1] < 0 ||
	    pair[0].peer_bps[0] != 0 || pair[1].peer_bps[0] != 0 ||
	    pair[1].peer_skip[0] ||
	    (pair[0].peer_skip[1] && strlen(pair[0].peer_skip[1]) > 200))
		abort();
	gp_deep_gpu_free(&pair[0]);
	gp_deep_gpu_free(&pair[1]);
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
	    (g.perf_skip && strlen(g.perf_skip) > 200) ||
	    (g.cublas && strlen(g.cublas) > 200) ||
	    (g.cublaslt && strlen(g.cublaslt) > 200))
		abort();
	gp_deep_gpu_free(&g);
	return 0;
}
