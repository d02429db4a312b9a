/* libFuzzer target: an rpm header blob, one row of rpmdb.sqlite's Packages
 * table (index entries with offsets into a data area); the same bytes as
 * the output of dnf's repoquery (gp_dnf_offers). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/pkg_dnf.h"
#include "gpuprov/pkgdb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes, so ASan sees any read past the row. */
	void *blob = gp_xmalloc(size ? size : 1);
	memcpy(blob, data, size);
	char *name = NULL, *version = NULL;
	if (gp_rpm_header_parse(blob, size, &name, &version) == 0) {
		if (!name || !name[0] || !version || !version[0])
			abort();
	} else if (name || version) {
		abort();
	}
	char *requires = NULL, *provides = NULL;
	if (gp_rpm_header_relations(blob, size, &requires, &provides) == 0) {
		if (!requires || !provides)
			abort();
	} else if (requires || provides) {
		abort();
	}
	char *nvra = gp_rpm_header_nvra(blob, size);
	/* An alias is of a header that parses, and starts with its name. */
	if (nvra && (!name || strncmp(nvra, name, strlen(name)) != 0))
		abort();
	free(nvra);
	char *text = gp_xmalloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	/* What matches is a line of three fields whose second is the version,
	 * after a blank or a carriage return. */
	if (gp_dnf_offers(text, "a", "1") && !strstr(text, " 1") && !strstr(text, "\r1"))
		abort();
	free(text);
	free(requires);
	free(provides);
	free(name);
	free(version);
	free(blob);
	return 0;
}
