/* libFuzzer target: /var/run/reboot-required.pkgs (other tools write it). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/rebootsig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	_cleanup_strv_ char **names = gp_reboot_pkgs_parse(text, size);
	for (size_t i = 0; names && names[i]; i++) {
		if (!names[i][0])
			abort();
		for (const char *p = names[i]; *p; p++)
			if (!isgraph((unsigned char)*p))
				abort();
		for (size_t j = 0; j < i; j++)
			if (strcmp(names[i], names[j]) == 0)
				abort();
	}
	return 0;
}
