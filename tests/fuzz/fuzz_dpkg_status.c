/* libFuzzer target: dpkg's status file (stanzas, continuation lines,
 * Status and Version fields), then the lookups the package layer makes. */
#include <stdlib.h>

#include "fuzz.h"
#include "gpuprov/pkgdb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	struct gp_pkgdb db = { 0 };
	if (gp_dpkg_status_parse(text, &db) == 0) {
		for (size_t i = 0; i < db.n; i++) {
			if (!db.e[i].name || !db.e[i].version)
				abort();
			if (gp_pkgdb_find(&db, db.e[i].name) == NULL)
				abort();
			gp_pkg_version_matches(db.e[i].version, "535.183.01");
			if (i > 0)
				gp_dpkg_vercmp(db.e[i - 1].version, db.e[i].version);
		}
	}
	gp_pkgdb_free(&db);
	return 0;
}
