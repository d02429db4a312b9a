/* libFuzzer target: OpenPGP keyrings, binary packets or ASCII armor (a
 * repository's key, before apt or rpm sees it). Every fingerprint found is
 * 40 or 64 upper-case hex digits. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/openpgp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	void *copy = gp_xmalloc(size ? size : 1);
	memcpy(copy, data, size);
	char **fprs = NULL;
	if (gp_openpgp_fingerprints(copy, size, &fprs) == 0) {
		if (!fprs || !fprs[0])
			abort();
		for (size_t i = 0; fprs[i]; i++) {
			size_t n = strlen(fprs[i]);
			if ((n != 40 && n != 64) ||
			    strspn(fprs[i], "0123456789ABCDEF") != n)
				abort();
			_cleanup_free_ char *pretty = gp_openpgp_pretty(fprs[i]);
			_cleanup_free_ char *back = gp_openpgp_normalize(pretty);
			if (!back || strcmp(back, fprs[i]) != 0)
				abort();
		}
	} else if (fprs) {
		abort();
	}
	gp_strv_free(fprs);
	free(copy);
	return 0;
}
