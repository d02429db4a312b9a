/* libFuzzer target: an EFI signature database (MokListRT, MokListXRT), a
 * sequence of EFI_SIGNATURE_LISTs whose lengths come from the firmware. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/secureboot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	void *copy = gp_xmalloc(size ? size : 1);
	memcpy(copy, data, size);
	struct gp_efi_certs certs = { 0 };
	if (gp_efi_siglist_parse(copy, size, &certs) == 0) {
		for (size_t i = 0; certs.sha256 && certs.sha256[i]; i++)
			if (strlen(certs.sha256[i]) != 64)
				abort();
		gp_efi_certs_free(&certs);
	}
	free(copy);
	return 0;
}
