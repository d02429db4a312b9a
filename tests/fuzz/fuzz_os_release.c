/* libFuzzer target: os-release(5) parsing (quotes, escapes, continuations).
 * A parsed release always has a non-empty ID. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/osrelease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	struct gp_os_release osr = { 0 };
	if (gp_os_release_parse(text, &osr) == 0) {
		if (!osr.id || !osr.id[0])
			abort();
		gp_os_release_free(&osr);
	}
	return 0;
}
