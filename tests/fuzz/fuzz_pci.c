/* libFuzzer target: a PCI sysfs id value (vendor, device, class). Accepted
 * values are what strtoul alone would never guarantee: hex, at most 32 bits. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/pci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	unsigned id = 0;
	if (gp_pci_hex_parse(text, &id) == 0) {
		/* The value read back is the digits given, whatever surrounds them. */
		const char *s = text + strspn(text, " \t");
		if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
			s += 2;
		size_t digits = strspn(s, "0123456789abcdefABCDEF");
		if (digits == 0 || digits > 8 || strtoul(s, NULL, 16) != id)
			abort();
		struct gp_pci_device d = { .vendor = id, .class_code = id & 0xffffff };
		gp_pci_is_nvidia_gpu(&d);
	}
	return 0;
}
