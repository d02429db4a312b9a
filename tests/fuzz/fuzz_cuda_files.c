/* libFuzzer target: the version files of an installed CUDA toolkit and
 * cuDNN, each parser on the same text: include/cuda.h (CUDA_VERSION),
 * cudnn_version.h (CUDNN_MAJOR/MINOR/PATCHLEVEL), version.json
 * (.cuda.version) and version.txt ("CUDA Version X"); then the consistency
 * check that compares them. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/cudatk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	struct gp_cuda_probe p = {
		.json = gp_cuda_version_json_parse(text),
		.txt = gp_cuda_version_txt_parse(text),
		.header = gp_cuda_header_parse(text),
		.nvcc = gp_cudnn_header_parse(text), /* a fourth version string */
	};
	char *a = NULL, *b = NULL;
	if (!gp_cuda_probe_consistent(&p, &a, &b) && (!a || !b))
		abort(); /* a disagreement names both sides */
	const char *const versions[] = { p.json, p.txt, p.header, p.nvcc };
	for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
		if (versions[i])
			gp_cuda_version_agrees(versions[i], "12.4.1");
	free(a);
	free(b);
	gp_cuda_probe_free(&p);
	return 0;
}
