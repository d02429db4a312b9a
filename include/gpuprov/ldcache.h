/* The dynamic linker's cache (ldcache.c): glibc's binary /etc/ld.so.cache,
 * as its ldconfig writes it (docs/reference/ld-so-cache.md), and the
 * listing `ldconfig -p` prints of it, where the file cannot be read. Both
 * give the same "NAME\tPATH" pairs, in the cache's order (the order
 * `ldconfig -p` lists them in). The parsers touch no file: the caller
 * reads the bytes through the root layer. They read hostile bytes: every
 * count and offset is checked against the buffer given. */
#pragma once

#include <stddef.h>

/* In the root, and its bound: a real cache is some 100 KiB. */
#define GP_LDCACHE_FILE "/etc/ld.so.cache"
#define GP_LDCACHE_MAX ((size_t)64 << 20) /* 64 MiB */
/* Bounds on what one cache may hold: entries, and the bytes of all its
 * pairs together (names and paths may share bytes in the file, so the
 * pairs can outgrow it). */
#define GP_LDCACHE_MAX_ENTRIES 1000000u
#define GP_LDCACHE_MAX_TEXT ((size_t)64 << 20) /* 64 MiB */

/* The pairs of a binary cache (the new format, or the compat layout's new
 * part), in a NULL-terminated vector; an entry whose name or path is empty
 * or holds a control byte is left out. NULL, with *why (allocated, a short
 * reason: "old format", "empty", ...), when data is not a cache this
 * reads. */
char **gp_ldcache_parse(const char *data, size_t len, char **why);
/* The pairs of `ldconfig -p` output: its lines "\tNAME (FLAGS) => PATH". */
char **gp_ldcache_parse_listing(const char *text);
/* The PATH of the first pair for name, or NULL (also for pairs NULL). */
const char *gp_ldcache_lookup(char *const *pairs, const char *name);
