/* libFuzzer target: /proc/modules parsing and the '-'/'_' name lookup. */
#include <stdlib.h>

#include "fuzz.h"
#include "gpuprov/modules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	struct gp_module_list ml = { 0 };
	if (gp_modules_parse(text, &ml) == 0) {
		if (!ml.available || !ml.names)
			abort();
		for (size_t i = 0; ml.names[i]; i++)
			if (!ml.names[i][0])
				abort(); /* a listed name is never empty */
	}
	gp_module_list_free(&ml);
	return 0;
}
