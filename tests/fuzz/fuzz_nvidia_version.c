/* libFuzzer target: /proc/driver/nvidia/version (NVRM's banner). A version
 * found is digits and dots. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/nvproc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	char *version = NULL;
	bool open = false;
	if (gp_nvidia_module_parse(text, &version, &open) == 0) {
		if (!version || !version[0] ||
		    strspn(version, "0123456789.") != strlen(version))
			abort();
	} else if (version) {
		abort(); /* a failure leaves nothing to free */
	}
	free(version);
	return 0;
}
