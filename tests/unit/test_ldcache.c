/* The linker cache parsers (ldcache.c): caches built here byte by byte in
 * each layout glibc's ldconfig writes, then each way a hostile one can
 * lie (cut short, counts and offsets past the end, a string without its
 * NUL, the other byte order); `ldconfig -p` listings; the lookup.
 * tests/e2e/ldcache.bats checks the same parser against caches the real
 * ldconfig wrote. */
#include "testutil.h"

#include "gpuprov/ldcache.h"

#define ENTRY_FLAGS_X86_64 0x0303u /* "libc6,x86-64" */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FLAGS_HOST 2
#define FLAGS_OTHER 3
#else
#define FLAGS_HOST 3
#define FLAGS_OTHER 2
#endif

static void put32(struct gp_buf *b, uint32_t v)
{
	gp_buf_append(b, &v, sizeof v);
}

static void put_zeros(struct gp_buf *b, size_t n)
{
	static const char zeros[64];
	gp_buf_append(b, zeros, n);
}

/* Overwrites the word at off (a field of a cache already built). */
static void set32(struct gp_buf *b, size_t off, uint32_t v)
{
	assert_true(off + sizeof v <= b->len);
	memcpy(b->data + off, &v, sizeof v);
}

/* Appends a new-format cache of the n NULL-free name/path pairs in
 * names_paths (name, path, name, path, ...) with the header's flags byte;
 * its offsets count from where it starts in b. */
static void put_new_cache(struct gp_buf *b, const char *const *names_paths, uint32_t n,
                          uint8_t flags)
{
	size_t strings = 0;
	for (uint32_t i = 0; i < 2 * n; i++)
		strings += strlen(names_paths[i]) + 1;
	gp_buf_append(b, "glibc-ld.so.cache1.1", 20);
	put32(b, n);
	put32(b, (uint32_t)strings);
	gp_buf_append(b, &flags, 1);
	put_zeros(b, 3 + 4 * 4); /* padding, extension_offset, unused[3] */
	uint32_t off = 48 + 24 * n;
	for (uint32_t i = 0; i < n; i++) {
		put32(b, ENTRY_FLAGS_X86_64);
		put32(b, off);
		off += (uint32_t)strlen(names_paths[2 * i]) + 1;
		put32(b, off);
		off += (uint32_t)strlen(names_paths[2 * i + 1]) + 1;
		put_zeros(b, 4 + 8); /* osversion, hwcap */
	}
	for (uint32_t i = 0; i < 2 * n; i++)
		gp_buf_append(b, names_paths[i], strlen(names_paths[i]) + 1);
}

static const char *const two[] = { "libz.so.1", "/opt/libs/libz.so.1", "libc.so.6",
	                           "/lib/libc.so.6" };

/* The parse of [data, data + len) must be refused, its reason holding
 * want. */
static void assert_refused(const char *data, size_t len, const char *want)
{
	char *why = NULL;
	char **pairs = gp_ldcache_parse(data, len, &why);
	if (pairs)
		fail_msg("parsed (%zu pairs), wanted a refusal saying '%s'",
		         gp_strv_len(pairs), want);
	assert_non_null(why);
	if (!strstr(why, want))
		fail_msg("refused with '%s', wanted '%s'", why, want);
	free(why);
}

static void assert_pairs(char **pairs, const char *joined)
{
	assert_non_null(pairs);
	char *have = gp_strv_join(pairs, "|");
	assert_string_equal(have, joined);
	free(have);
	gp_strv_free(pairs);
}

static void test_new_format(void **state)
{
	(void)state;
	struct gp_buf b = { 0 };
	put_new_cache(&b, two, 2, FLAGS_HOST);
	char *why = NULL;
	char **pairs = gp_ldcache_parse(b.data, b.len, &why);
	assert_null(why);
	assert_string_equal(gp_ldcache_lookup(pairs, "libc.so.6"), "/lib/libc.so.6");
	assert_pairs(pairs, "libz.so.1\t/opt/libs/libz.so.1|libc.so.6\t/lib/libc.so.6");
	/* Byte order unset: the host's. */
	b.data[28] = 0;
	assert_pairs(gp_ldcache_parse(b.data, b.len, &why),
	             "libz.so.1\t/opt/libs/libz.so.1|libc.so.6\t/lib/libc.so.6");
	/* Flag bits above the byte order are not the parser's business. */
	b.data[28] = (char)(0x40 | FLAGS_HOST);
	assert_pairs(gp_ldcache_parse(b.data, b.len, &why),
	             "libz.so.1\t/opt/libs/libz.so.1|libc.so.6\t/lib/libc.so.6");
	gp_buf_free(&b);
	/* No entries at all is a cache, an empty one. */
	put_new_cache(&b, NULL, 0, FLAGS_HOST);
	assert_pairs(gp_ldcache_parse(b.data, b.len, &why), "");
	gp_buf_free(&b);
}

/* Names and paths may share bytes: glibc's ldconfig stores a name that
 * ends a path once, as that path's tail. */
static void test_shared_strings(void **state)
{
	(void)state;
	struct gp_buf b = { 0 };
	put_new_cache(&b, two, 1, FLAGS_HOST);
	size_t path_at = 48 + 24 + strlen("libz.so.1") + 1;
	set32(&b, 48 + 4, (uint32_t)(path_at + strlen("/opt/libs/")));
	char *why = NULL;
	assert_pairs(gp_ldcache_parse(b.data, b.len, &why),
	             "libz.so.1\t/opt/libs/libz.so.1");
	gp_buf_free(&b);
}

/* The old header and entries, then the new format at the next multiple of
 * 8; the old entries' offsets count from the end of their table. */
static void put_compat_cache(struct gp_buf *b, uint32_t nold)
{
	gp_buf_append(b, "ld.so-1.7.0", 12); /* with its NUL: the padding byte */
	put32(b, nold);
	for (uint32_t i = 0; i < nold; i++) {
		put32(b, ENTRY_FLAGS_X86_64);
		put32(b, 1000 + i);
		put32(b, 2000 + i);
	}
	while (b->len % 8)
		put_zeros(b, 1);
	put_new_cache(b, two, 2, FLAGS_HOST);
}

static void test_compat_format(void **state)
{
	(void)state;
	char *why = NULL;
	/* 16 + 12 * 2 = 40: aligned already; 16 + 12 * 1 = 28: padded to 32. */
	for (uint32_t nold = 0; nold < 4; nold++) {
		struct gp_buf b = { 0 };
		put_compat_cache(&b, nold);
		assert_pairs(gp_ldcache_parse(b.data, b.len, &why),
		             "libz.so.1\t/opt/libs/libz.so.1|libc.so.6\t/lib/libc.so.6");
		gp_buf_free(&b);
	}
	/* The old table claims more than the file holds. */
	struct gp_buf b = { 0 };
	put_compat_cache(&b, 2);
	set32(&b, 12, 0xffffffffu);
	assert_refused(b.data, b.len, "run past the end");
	/* A count that puts the new header elsewhere: nothing there. */
	set32(&b, 12, 3);
	assert_refused(b.data, b.len, "old format");
	gp_buf_free(&b);
}

static void test_old_format_only(void **state)
{
	(void)state;
	struct gp_buf b = { 0 };
	gp_buf_append(&b, "ld.so-1.7.0", 12);
	put32(&b, 1);
	put32(&b, ENTRY_FLAGS_X86_64);
	put32(&b, 0);
	put32(&b, 10);
	gp_buf_append(&b, "libz.so.1\0/lib/libz.so.1", 25);
	assert_refused(b.data, b.len, "old format");
	/* Its header, the entry cut off; less than the header. */
	assert_refused(b.data, 16, "run past the end");
	assert_refused(b.data, 14, "truncated header");
	/* An old cache of no entries, nothing after it. */
	set32(&b, 12, 0);
	assert_refused(b.data, 16, "old format");
	gp_buf_free(&b);
}

static void test_truncated(void **state)
{
	(void)state;
	struct gp_buf b = { 0 };
	put_new_cache(&b, two, 2, FLAGS_HOST);
	/* Every cut short of the whole file loses at least the last NUL. */
	for (size_t len = 1; len < b.len; len++) {
		char *why = NULL;
		char *copy = gp_xmemdup0(b.data, len);
		char **pairs = gp_ldcache_parse(copy, len, &why);
		if (pairs)
			fail_msg("a cache cut to %zu of %zu bytes parsed", len, b.len);
		assert_non_null(why);
		free(why);
		free(copy);
	}
	assert_refused(b.data, 30, "truncated header");
	assert_refused(b.data, 5, "truncated header");
	assert_refused(b.data, 0, "empty");
	assert_refused("# a text file\n/usr/lib\n", 23, "not a glibc linker cache");
	gp_buf_free(&b);
}

static void test_counts_and_offsets(void **state)
{
	(void)state;
	struct gp_buf b = { 0 };
	put_new_cache(&b, two, 2, FLAGS_HOST);
	/* nlibs: above the bound, where 24 * nlibs wraps 32 bits, one more
	 * than the table holds. */
	set32(&b, 20, 0xffffffffu);
	assert_refused(b.data, b.len, "more than");
	set32(&b, 20, 0x0aaaaaabu);
	assert_refused(b.data, b.len, "more than");
	set32(&b, 20, GP_LDCACHE_MAX_ENTRIES);
	assert_refused(b.data, b.len, "run past the end");
	set32(&b, 20, 6); /* 48 + 6 * 24 > the file's 48 + 2 * 24 + strings */
	assert_refused(b.data, b.len, "run past the end");
	set32(&b, 20, 2);
	/* A key or value at or past the end. */
	set32(&b, 48 + 4, (uint32_t)b.len);
	assert_refused(b.data, b.len, "entry 0: its name");
	set32(&b, 48 + 4, 0xffffffffu);
	assert_refused(b.data, b.len, "entry 0: its name");
	set32(&b, 48 + 4, 48 + 48);
	set32(&b, 48 + 24 + 8, 0x7fffffffu);
	assert_refused(b.data, b.len, "entry 1: its path");
	gp_buf_free(&b);
}

static void test_string_without_nul(void **state)
{
	(void)state;
	struct gp_buf b = { 0 };
	put_new_cache(&b, two, 2, FLAGS_HOST);
	/* The last path's NUL is the file's last byte: without it the path
	 * runs off the end. */
	b.data[b.len - 1] = 'x';
	assert_refused(b.data, b.len, "entry 1: its path");
	gp_buf_free(&b);
	/* A path longer than any path ld.so opens. */
	char *long_path = gp_xmalloc(5000);
	memset(long_path, 'a', 4999);
	long_path[0] = '/';
	long_path[4999] = '\0';
	const char *const one[] = { "libz.so.1", long_path };
	put_new_cache(&b, one, 1, FLAGS_HOST);
	assert_refused(b.data, b.len, "entry 0: its path");
	gp_buf_free(&b);
	free(long_path);
}

static void test_byte_order(void **state)
{
	(void)state;
	struct gp_buf b = { 0 };
	put_new_cache(&b, two, 2, FLAGS_OTHER);
	assert_refused(b.data, b.len, "not this host's byte order");
	b.data[28] = 1;
	assert_refused(b.data, b.len, "invalid byte order");
	b.data[28] = FLAGS_HOST;
	memcpy(b.data + 17, "1.0", 3);
	assert_refused(b.data, b.len, "unknown format version");
	gp_buf_free(&b);
}

static void test_control_bytes_skipped(void **state)
{
	(void)state;
	const char *const odd[] = { "lib\tz.so.1",
		                    "/lib/libz.so.1",
		                    "libm.so.6",
		                    "/lib/libm\n.so.6",
		                    "",
		                    "/lib/libe.so.1",
		                    "libp.so.1",
		                    "",
		                    "libq.so.1",
		                    "/lib/libq\x7f.so.1",
		                    "libc.so.6",
		                    "/lib/libc.so.6",
		                    "libü.so.1",
		                    "/lib/libü.so.1" };
	struct gp_buf b = { 0 };
	put_new_cache(&b, odd, 7, FLAGS_HOST);
	char *why = NULL;
	assert_pairs(gp_ldcache_parse(b.data, b.len, &why),
	             "libc.so.6\t/lib/libc.so.6|libü.so.1\t/lib/libü.so.1");
	gp_buf_free(&b);
}

static void test_listing(void **state)
{
	(void)state;
	const char *text =
	    "5 libs found in cache `/etc/ld.so.cache'\n"
	    "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n"
	    "\tlibz.so.1 (libc6,x86-64, hwcap: \"x86-64-v3\") => "
	    "/lib/glibc-hwcaps/x86-64-v3/libz.so.1\n"
	    "\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/libc.so.6\n"
	    "\tno-arrow (libc6)\n"
	    "    libm.so.6 (libc6,x86-64) => /lib/libm.so.6\n"
	    "\tlibx.so.1 (libc6) => \n"
	    "Cache generated by: ldconfig (GNU libc) stable release version 2.36\n"
	    "\tlibend.so.1 (libc6) => /lib/libend.so.1";
	assert_pairs(gp_ldcache_parse_listing(text),
	             "libz.so.1\t/lib/x86_64-linux-gnu/libz.so.1|"
	             "libz.so.1\t/lib/glibc-hwcaps/x86-64-v3/libz.so.1|"
	             "libc.so.6\t/lib/libc.so.6|libm.so.6\t/lib/libm.so.6|"
	             "libend.so.1\t/lib/libend.so.1");
	assert_pairs(gp_ldcache_parse_listing(""), "");
	assert_pairs(gp_ldcache_parse_listing("libs found in cache\n"), "");
}

static void test_lookup(void **state)
{
	(void)state;
	char **pairs = gp_ldcache_parse_listing("\tlibz.so.1 (x) => /a/libz.so.1\n"
	                                        "\tlibz.so.1 (x) => /b/libz.so.1\n"
	                                        "\tlibz.so (x) => /a/libz.so\n");
	/* The first of a name wins, as in `ldconfig -p`'s order. */
	assert_string_equal(gp_ldcache_lookup(pairs, "libz.so.1"), "/a/libz.so.1");
	assert_string_equal(gp_ldcache_lookup(pairs, "libz.so"), "/a/libz.so");
	assert_null(gp_ldcache_lookup(pairs, "libz"));
	assert_null(gp_ldcache_lookup(pairs, "libz.so.1.2"));
	assert_null(gp_ldcache_lookup(pairs, ""));
	assert_null(gp_ldcache_lookup(NULL, "libz.so.1"));
	gp_strv_free(pairs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_format),
		cmocka_unit_test(test_shared_strings),
		cmocka_unit_test(test_compat_format),
		cmocka_unit_test(test_old_format_only),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_counts_and_offsets),
		cmocka_unit_test(test_string_without_nul),
		cmocka_unit_test(test_byte_order),
		cmocka_unit_test(test_control_bytes_skipped),
		cmocka_unit_test(test_listing),
		cmocka_unit_test(test_lookup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
