/* libFuzzer target: dpkg's status file (stanzas, continuation lines,
 * Status, Version, Depends, Pre-Depends and Provides fields), then the
 * lookups the package layer makes and the reverse dependencies an
 * uninstall asks for. */
#include <stdlib.h>
#include <string.h>

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
		if (db.n) {
			const char *first[] = { db.e[0].name, NULL };
			char **r = gp_pkgdb_rdepends(&db, first);
			for (size_t i = 0; r[i]; i++)
				if (!gp_pkgdb_find(&db, r[i]) ||
				    strcmp(r[i], first[0]) == 0)
					abort();
			gp_strv_free(r);
		}
	}
	gp_pkgdb_free(&db);
	return 0;
}
