/* The linker cache, parsed from bytes (see ldcache.h). Read directly, the
 * file spares a no-op run the fork, namespace and exec of `ldconfig -p`
 * (issue 18); that listing stays the fallback for a file this does not
 * read. The layout is in docs/reference/ld-so-cache.md. The cache is
 * written by the host's own ldconfig, in the host's byte order: one with
 * the other order is refused, not swapped. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gpuprov/ldcache.h"
#include "gpuprov/util.h"

#define NEW_MAGIC "glibc-ld.so.cache"
#define NEW_VERSION "1.1"
#define OLD_MAGIC "ld.so-1.7.0"
#define MAGIC_LEN(m) (sizeof(m) - 1)

/* struct cache_file_new: magic, version, nlibs, len_strings, flags, 3
 * bytes of padding, extension_offset, 3 unused words; then its entries:
 * flags, key, value, osversion, hwcap (64 bits). */
#define NEW_HEADER_SIZE 48
#define NEW_NLIBS_AT 20
#define NEW_FLAGS_AT 28
#define NEW_ENTRY_SIZE 24
#define ENTRY_KEY_AT 4
#define ENTRY_VALUE_AT 8
/* struct cache_file: magic (padded to 12), nlibs; entries of flags, key,
 * value. In the compat layout the new header follows the old entries at
 * the next multiple of the new header's alignment (its 64-bit hwcap: 8 on
 * the 64-bit hosts gpuprov runs on). */
#define OLD_HEADER_SIZE 16
#define OLD_NLIBS_AT 12
#define OLD_ENTRY_SIZE 12
#define NEW_ALIGN 8

/* The header's flags byte: its low two bits say the byte order. */
#define ENDIAN_MASK 3
enum { ENDIAN_UNSET = 0, ENDIAN_INVALID = 1, ENDIAN_LITTLE = 2, ENDIAN_BIG = 3 };
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ENDIAN_HOST ENDIAN_LITTLE
#else
#define ENDIAN_HOST ENDIAN_BIG
#endif

/* Longest name or path taken (PATH_MAX): a longer one is no path ld.so
 * could open, and the bound keeps the NUL search short. */
#define STRING_MAX 4096

/* The host-order word at p (the cache's order, checked before). */
static uint32_t word_at(const char *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static bool has_magic(const char *p, size_t len, const char *magic, size_t magic_len)
{
	return len >= magic_len && memcmp(p, magic, magic_len) == 0;
}

/* Is [p, p + len) all of magic's first bytes (a file cut inside it)? */
static bool is_cut_magic(const char *p, size_t len, const char *magic, size_t magic_len)
{
	return len > 0 && len < magic_len && memcmp(p, magic, len) == 0;
}

static char **refuse(char **why, char *reason)
{
	*why = reason;
	return NULL;
}

/* The NUL-terminated string at off in [base, base + len), at most
 * STRING_MAX bytes before its NUL and at most *budget bytes; NULL when it
 * does not lie wholly inside. Takes its length off *budget. */
static const char *string_at(const char *base, size_t len, uint32_t off, size_t *budget)
{
	if (off >= len)
		return NULL;
	size_t room = len - off;
	size_t bound = STRING_MAX + 1;
	if (*budget < bound)
		bound = *budget + 1;
	const char *s = base + off;
	const char *nul = memchr(s, '\0', room < bound ? room : bound);
	if (!nul)
		return NULL;
	*budget -= (size_t)(nul - s);
	return s;
}

/* A name or path worth keeping: not empty, no control byte (a tab or
 * newline would split the pair or the listing). */
static bool printable(const char *s)
{
	if (!*s)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

/* Where the new-format header starts: 0, or past the compat layout's old
 * part. SIZE_MAX with *why when there is none. */
static size_t new_header_at(const char *data, size_t len, char **why)
{
	if (len == 0) {
		*why = gp_xstrdup("empty");
		return SIZE_MAX;
	}
	if (has_magic(data, len, NEW_MAGIC, MAGIC_LEN(NEW_MAGIC)))
		return 0;
	if (!has_magic(data, len, OLD_MAGIC, MAGIC_LEN(OLD_MAGIC))) {
		bool cut = is_cut_magic(data, len, NEW_MAGIC, MAGIC_LEN(NEW_MAGIC)) ||
		           is_cut_magic(data, len, OLD_MAGIC, MAGIC_LEN(OLD_MAGIC));
		*why = gp_xstrdup(cut ? "truncated header" : "not a glibc linker cache");
		return SIZE_MAX;
	}
	if (len < OLD_HEADER_SIZE) {
		*why = gp_xstrdup("truncated header");
		return SIZE_MAX;
	}
	/* 64-bit arithmetic: a 32-bit count times 12 cannot wrap it. */
	uint64_t old_end = OLD_HEADER_SIZE +
	                   (uint64_t)word_at(data + OLD_NLIBS_AT) * OLD_ENTRY_SIZE;
	uint64_t at = (old_end + NEW_ALIGN - 1) / NEW_ALIGN * NEW_ALIGN;
	if (old_end > len) {
		*why = gp_xstrdup("the old format's entries run past the end");
		return SIZE_MAX;
	}
	if (at >= len ||
	    !has_magic(data + at, len - (size_t)at, NEW_MAGIC, MAGIC_LEN(NEW_MAGIC))) {
		*why = gp_xstrdup("old format");
		return SIZE_MAX;
	}
	return (size_t)at;
}

char **gp_ldcache_parse(const char *data, size_t len, char **why)
{
	*why = NULL;
	size_t at = new_header_at(data, len, why);
	if (at == SIZE_MAX)
		return NULL;
	/* Offsets count from the new header, the compat layout's too. */
	const char *h = data + at;
	size_t hlen = len - at;
	if (hlen < NEW_HEADER_SIZE)
		return refuse(why, gp_xstrdup("truncated header"));
	if (memcmp(h + MAGIC_LEN(NEW_MAGIC), NEW_VERSION, MAGIC_LEN(NEW_VERSION)) != 0)
		return refuse(why, gp_xstrdup("unknown format version"));
	unsigned endian = (unsigned char)h[NEW_FLAGS_AT] & ENDIAN_MASK;
	if (endian == ENDIAN_INVALID)
		return refuse(why, gp_xstrdup("invalid byte order flag"));
	if (endian != ENDIAN_UNSET && endian != ENDIAN_HOST)
		return refuse(why, gp_xasprintf("%s-endian, not this host's byte order",
		                                endian == ENDIAN_BIG ? "big" : "little"));
	uint32_t nlibs = word_at(h + NEW_NLIBS_AT);
	if (nlibs > GP_LDCACHE_MAX_ENTRIES)
		return refuse(why, gp_xasprintf("%u entries, more than the %u read",
		                                nlibs, GP_LDCACHE_MAX_ENTRIES));
	if ((uint64_t)nlibs * NEW_ENTRY_SIZE > hlen - NEW_HEADER_SIZE)
		return refuse(why, gp_xasprintf("%u entries run past the end", nlibs));
	size_t budget = GP_LDCACHE_MAX_TEXT;
	_cleanup_strv_ char **pairs = gp_xcalloc((size_t)nlibs + 1, sizeof(char *));
	size_t kept = 0;
	for (uint32_t i = 0; i < nlibs; i++) {
		const char *e = h + NEW_HEADER_SIZE + (size_t)i * NEW_ENTRY_SIZE;
		const char *name = string_at(h, hlen, word_at(e + ENTRY_KEY_AT), &budget);
		const char *path = string_at(h, hlen, word_at(e + ENTRY_VALUE_AT),
		                             &budget);
		if (!name || !path)
			return refuse(why,
			              gp_xasprintf("entry %u: its %s is not a string "
			                           "inside the file (offset out of "
			                           "range, no NUL, or too long)",
			                           i, name ? "path" : "name"));
		if (printable(name) && printable(path))
			pairs[kept++] = gp_xasprintf("%s\t%s", name, path);
	}
	return TAKE_PTR(pairs);
}

char **gp_ldcache_parse_listing(const char *text)
{
	char **pairs = NULL;
	size_t n = 0;
	for (const char *line = text; *line;) {
		const char *end = strchrnul(line, '\n');
		_cleanup_free_ char *l = gp_xstrndup(line, (size_t)(end - line));
		line = *end ? end + 1 : end;
		/* Entries are indented; the count line and the "Cache generated
		 * by" line after them are not. */
		if (*l != '\t' && *l != ' ')
			continue;
		const char *name = l + strspn(l, " \t");
		const char *arrow = strstr(name, " => ");
		size_t name_len = strcspn(name, " \t");
		if (!arrow || !name_len || !arrow[4])
			continue;
		_cleanup_free_ char *pair = gp_xasprintf("%.*s\t%s", (int)name_len, name,
		                                         arrow + 4);
		gp_strv_append(&pairs, &n, pair);
	}
	return pairs ? pairs : gp_xcalloc(1, sizeof(char *));
}

const char *gp_ldcache_lookup(char *const *pairs, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; pairs && pairs[i]; i++)
		if (strncmp(pairs[i], name, n) == 0 && pairs[i][n] == '\t')
			return pairs[i] + n + 1;
	return NULL;
}
