/* libFuzzer target: an apt Packages list (what apt downloaded from a
 * repository), scanned for the versions of a package as the driver and
 * cuDNN stages ask, and those versions ordered as dpkg orders them. The
 * order must be consistent: v = v, and a < b exactly when b > a.
 *
 * One scan per input, for one name (three scans of each input tripled its
 * cost and reached no other code); each pair is compared once both ways. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/pkgdb.h"

static int sign(int v)
{
	return (v > 0) - (v < 0);
}

/* The first name the text holds, going round from the one its first byte
 * picks: a seed is scanned for its own package, a mutation for any. */
static const char *pick_name(const char *text, size_t size)
{
	static const char *const names[] = { "nvidia-driver-535", "cuda-drivers",
		                             "libcudnn9-cuda-12" };
	size_t first = size ? (unsigned char)text[0] % ARRAY_SIZE(names) : 0;
	for (size_t k = 0; k < ARRAY_SIZE(names); k++) {
		const char *name = names[(first + k) % ARRAY_SIZE(names)];
		if (strstr(text, name))
			return name;
	}
	return names[first];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	const char *name = pick_name(text, size);
	_cleanup_strv_ char **versions = gp_xcalloc(1, sizeof(char *));
	gp_apt_packages_scan(text, name, &versions);
	size_t n = gp_strv_len(versions);
	for (size_t i = 0; i < n && i < 16; i++) {
		if (gp_dpkg_vercmp(versions[i], versions[i]) != 0)
			abort();
		for (size_t j = i + 1; j < n && j < 16; j++)
			if (sign(gp_dpkg_vercmp(versions[i], versions[j])) !=
			    -sign(gp_dpkg_vercmp(versions[j], versions[i])))
				abort();
	}
	return 0;
}
