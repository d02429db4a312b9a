/* libFuzzer target: an apt Packages list (what apt downloaded from a
 * repository), scanned for the versions of a package as the driver and
 * cuDNN stages ask, and those versions ordered as dpkg orders them. The
 * order must be consistent: a < b exactly when b > a. */
#include <stdlib.h>

#include "fuzz.h"
#include "gpuprov/pkgdb.h"

static int sign(int v)
{
	return (v > 0) - (v < 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	const char *names[] = { "nvidia-driver-535", "cuda-drivers",
		                "libcudnn9-cuda-12" };
	for (size_t k = 0; k < ARRAY_SIZE(names); k++) {
		_cleanup_strv_ char **versions = gp_xcalloc(1, sizeof(char *));
		gp_apt_packages_scan(text, names[k], &versions);
		size_t n = gp_strv_len(versions);
		for (size_t i = 0; i < n && i < 16; i++)
			for (size_t j = 0; j < n && j < 16; j++)
				if (sign(gp_dpkg_vercmp(versions[i], versions[j])) !=
				    -sign(gp_dpkg_vercmp(versions[j], versions[i])))
					abort();
	}
	return 0;
}
