/* libFuzzer target: installed Python package metadata as the pytorch stage
 * reads it without running Python: a dist-info METADATA (pip) and a
 * conda-meta record (conda), both written by tools in the environment;
 * and what `pip index versions` prints (the index's pages, through pip). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/pytorch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	_cleanup_free_ char *pip = gp_pip_metadata_version(text);
	if (pip && (strchr(pip, '\n') || strchr(pip, '\r') || strchr(pip, ' ')))
		abort();
	const char *names[] = { "torch", "python", "pytorch_cuda" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		free(gp_conda_meta_version(text, names[i]));
	/* Offered only when listed: the version is in the text, whole. */
	const char *versions[] = { "2.7.1+cu118", "1.0", "" };
	for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
		if (gp_pip_index_offers(text, versions[i]) &&
		    (!*versions[i] || !strstr(text, versions[i])))
			abort();
	return 0;
}
