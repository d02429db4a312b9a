/* libFuzzer target: dnf's versionlock.list (which packages are held). */
#include <stdlib.h>

#include "fuzz.h"
#include "gpuprov/pkgdb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	_cleanup_strv_ char **names = gp_dnf_versionlock_names(text);
	for (size_t i = 0; names && names[i]; i++)
		if (!names[i][0])
			abort();
	return 0;
}
