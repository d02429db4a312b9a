/* libFuzzer target: the linker cache parsers (src/pure/ldcache.c) on the
 * root's /etc/ld.so.cache, bytes gpuprov does not control, and on the same
 * bytes as `ldconfig -p` output. A parse either refuses with a reason or
 * gives pairs of a non-empty name and path, one tab between them and no
 * other control byte, each found again by its name; it reads nothing
 * outside the input (ASan). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/ldcache.h"

static void check_pairs(char **pairs, bool binary)
{
	for (size_t i = 0; pairs[i]; i++) {
		const char *p = pairs[i];
		const char *tab = strchr(p, '\t');
		if (!tab || tab == p || !tab[1])
			abort();
		if (binary && (strchr(tab + 1, '\t') || strpbrk(p, "\n\r\x7f")))
			abort();
		_cleanup_free_ char *name = gp_xstrndup(p, (size_t)(tab - p));
		const char *found = gp_ldcache_lookup(pairs, name);
		if (!found)
			abort();
		/* The first pair of that name, never a later one. */
		size_t first = i;
		for (size_t j = 0; j < i && first == i; j++)
			if (found == pairs[j] + (tab - p) + 1)
				first = j;
		if (first == i && found != tab + 1)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes, so that ASan sees a read past them. */
	char *bytes = gp_xmalloc(size ? size : 1);
	memcpy(bytes, data, size);
	char *why = NULL;
	char **pairs = gp_ldcache_parse(bytes, size, &why);
	if (!pairs == !why)
		abort();
	if (pairs)
		check_pairs(pairs, true);
	gp_strv_free(pairs);
	free(why);
	free(bytes);

	_cleanup_free_ char *text = fuzz_text(data, size);
	_cleanup_strv_ char **listed = gp_ldcache_parse_listing(text);
	if (!listed)
		abort();
	check_pairs(listed, false);
	return 0;
}
