/* libFuzzer target: the output of `nvcc --version`, and the version
 * comparison it feeds. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/cudatk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	_cleanup_free_ char *v = gp_nvcc_version_parse(text);
	if (v) {
		if (!v[0] || strspn(v, "0123456789.") != strlen(v))
			abort();
		gp_cuda_version_agrees(v, "12.4");
		gp_cuda_version_agrees(v, "12.4.1");
		gp_cuda_version_agrees("12.4.1", v);
	}
	return 0;
}
