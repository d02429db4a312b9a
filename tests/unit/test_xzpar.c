/* The block-parallel xz decoder (src/sys/xzpar.c) on streams liblzma's
 * multi-threaded encoder writes: the same bytes out for every thread count
 * and every way the input is cut, a decoder reset and reused after a
 * corrupt stream or halfway through one, and a block that records a
 * dictionary far larger than itself. `make check-tsan-xz` runs this file
 * under ThreadSanitizer. */
#include <malloc.h>
#include <sys/resource.h>

#include <lzma.h>

#include "testutil.h"

#include "gpuprov/xzpar.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#endif

#define DATA_LEN (700u << 10)
#define BLOCK_SIZE (64u << 10)

struct buf {
	uint8_t *p;
	size_t len;
};

/* Compressible bytes that differ from block to block. */
static struct buf make_data(void)
{
	struct buf d = { malloc(DATA_LEN), DATA_LEN };
	assert_non_null(d.p);
	uint32_t x = 12345;
	for (size_t i = 0; i < d.len; i++) {
		x = x * 1103515245u + 12345u;
		d.p[i] = (x >> 16) % 4 ? "gpuprov "[i % 8] : (uint8_t)(x >> 24);
	}
	return d;
}

/* d as one .xz stream of BLOCK_SIZE blocks whose headers record their
 * sizes (what `xz -T` writes). */
static struct buf xz_blocks(const struct buf *d)
{
	lzma_mt mt = { .threads = 1,
		       .block_size = BLOCK_SIZE,
		       .preset = 1,
		       .check = LZMA_CHECK_CRC64 };
	lzma_stream s = LZMA_STREAM_INIT;
	assert_int_equal(lzma_stream_encoder_mt(&s, &mt), LZMA_OK);
	struct buf out = { malloc(d->len + (1u << 16)), 0 };
	assert_non_null(out.p);
	s.next_in = d->p;
	s.avail_in = d->len;
	s.next_out = out.p;
	s.avail_out = d->len + (1u << 16);
	lzma_ret r;
	while ((r = lzma_code(&s, LZMA_FINISH)) == LZMA_OK)
		;
	assert_int_equal(r, LZMA_STREAM_END);
	out.len = s.total_out;
	lzma_end(&s);
	return out;
}

/* Feeds x in pieces of step bytes (0: growing pieces) and gathers what it
 * decodes into *got; returns the last answer (0 at the end of the stream,
 * or a negative error). */
static ssize_t decode(struct gp_xzpar *x, const struct buf *xz, size_t step,
                      struct buf *got)
{
	got->p = malloc(DATA_LEN + 1);
	got->len = 0;
	assert_non_null(got->p);
	size_t pos = 0, len = step ? step : 1;
	for (;;) {
		const uint8_t *out;
		ssize_t n = gp_xzpar_take(x, &out, !gp_xzpar_hungry(x) || pos == xz->len);
		if (n > 0) {
			assert_true(got->len + (size_t)n <= DATA_LEN);
			memcpy(got->p + got->len, out, (size_t)n);
			got->len += (size_t)n;
			continue;
		}
		if (n != -EAGAIN)
			return n;
		assert_true(pos < xz->len); /* all fed and nothing decoded: a hang */
		size_t piece = xz->len - pos < len ? xz->len - pos : len;
		ssize_t used = gp_xzpar_feed(x, xz->p + pos, piece);
		if (used < 0)
			return used;
		pos += (size_t)used;
		if (!step)
			len = len * 3 + 1;
	}
}

static void assert_same(const struct buf *a, const struct buf *b)
{
	assert_int_equal(a->len, b->len);
	assert_memory_equal(a->p, b->p, a->len);
}

static void test_threads_and_pieces(void **state)
{
	struct buf d = make_data(), xz = xz_blocks(&d);
	size_t need;
	assert_true(gp_xzpar_suits(xz.p, xz.len, &need));
	static const unsigned threads[] = { 1, 2, 4, 16 };
	static const size_t steps[] = { 0, 1, 4093, (size_t)-1 };
	for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
		for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
			if (steps[s] == 1 && threads[t] > 2)
				continue; /* byte by byte once is enough */
			struct gp_xzpar *x;
			assert_int_equal(gp_xzpar_new(threads[t], 256u << 20, &x), 0);
			struct buf got;
			assert_int_equal(decode(x, &xz, steps[s], &got), 0);
			assert_true(gp_xzpar_ended(x));
			assert_same(&got, &d);
			assert_true(gp_xzpar_peak(x) <= GP_XZPAR_BUDGET(threads[t]));
			gp_xzpar_free(x);
			free(got.p);
		}
	free(xz.p);
	free(d.p);
}

/* A decoder reset after a failed stream, or halfway through a good one
 * with blocks still decoding, decodes the next stream as a new one. */
static void test_reset(void **state)
{
	struct buf d = make_data(), xz = xz_blocks(&d);
	struct buf bad = { malloc(xz.len), xz.len };
	assert_non_null(bad.p);
	memcpy(bad.p, xz.p, xz.len);
	bad.p[xz.len / 2] ^= 0x55; /* inside a block's data */
	struct gp_xzpar *x;
	assert_int_equal(gp_xzpar_new(4, 256u << 20, &x), 0);
	for (int round = 0; round < 3; round++) {
		struct buf got;
		assert_int_equal(decode(x, &bad, 0, &got), -EBADMSG);
		assert_non_null(strstr(gp_xzpar_msg(x), "corrupt xz data"));
		free(got.p);
		gp_xzpar_reset(x);
		assert_false(gp_xzpar_ended(x));
		assert_string_equal(gp_xzpar_msg(x), "");

		/* Half the stream in, nothing taken: blocks are queued, some
		 * being decoded. */
		ssize_t used = gp_xzpar_feed(x, xz.p, xz.len / 2);
		assert_true(used > 0);
		gp_xzpar_reset(x);
		assert_int_equal(gp_xzpar_peak(x), 0);

		assert_int_equal(decode(x, &xz, 4093, &got), 0);
		assert_same(&got, &d);
		free(got.p);
		gp_xzpar_reset(x);
	}
	gp_xzpar_free(x);
	free(bad.p);
	free(xz.p);
	free(d.p);
}

/* Rewrites the LZMA2 dictionary size the first block's header records. */
static void record_dictionary(struct buf *xz, uint32_t dict)
{
	uint8_t *h = xz->p + LZMA_STREAM_HEADER_SIZE;
	lzma_filter filters[LZMA_FILTERS_MAX + 1];
	lzma_block b = { .version = 1, .check = LZMA_CHECK_CRC64, .filters = filters };
	b.header_size = lzma_block_header_size_decode(h[0]);
	assert_int_equal(lzma_block_header_decode(&b, NULL, h), LZMA_OK);
	assert_true(filters[0].id == LZMA_FILTER_LZMA2);
	((lzma_options_lzma *)filters[0].options)->dict_size = dict;
	assert_int_equal(lzma_block_header_encode(&b, h), LZMA_OK);
	for (unsigned i = 0; filters[i].id != LZMA_VLI_UNKNOWN; i++)
		free(filters[i].options);
}

/* A 64 KiB block recording a 1 GiB dictionary (within the memory limit)
 * decodes with memory for its own size: the child's address space leaves
 * no room for 1 GiB. Sanitizers reserve far more address space than any
 * such limit: under them only the output is checked. */
static void test_recorded_dictionary(void **state)
{
	struct buf d = make_data(), xz = xz_blocks(&d);
	record_dictionary(&xz, 1u << 30);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
#ifndef UNDER_SANITIZER
		unsigned long pages = 0;
		FILE *f = fopen("/proc/self/statm", "re");
		if (!f || fscanf(f, "%lu", &pages) != 1)
			_exit(3);
		fclose(f);
		/* One malloc arena: a worker's own would reserve 64 MiB. */
		mallopt(M_ARENA_MAX, 1);
		struct rlimit lim;
		lim.rlim_cur = lim.rlim_max = (rlim_t)pages *
		                                  (rlim_t)sysconf(_SC_PAGESIZE) +
		                              (512u << 20);
		if (setrlimit(RLIMIT_AS, &lim) < 0)
			_exit(4);
#endif
		struct gp_xzpar *x;
		if (gp_xzpar_new(1, (uint64_t)2 << 30, &x) < 0)
			_exit(5);
		struct buf got;
		ssize_t r = decode(x, &xz, 0, &got);
		if (r < 0)
			fprintf(stderr, "decode: %zd %s\n", r, gp_xzpar_msg(x));
		_exit(r == 0 && got.len == d.len && memcmp(got.p, d.p, d.len) == 0 ? 0
		                                                                   : 1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);

	/* Above the memory limit it is still refused for what it records. */
	struct gp_xzpar *x;
	assert_int_equal(gp_xzpar_new(2, 256u << 20, &x), 0);
	struct buf got;
	assert_int_equal(decode(x, &xz, 0, &got), -E2BIG);
	assert_non_null(strstr(gp_xzpar_msg(x), "dictionary too large"));
	gp_xzpar_free(x);
	free(got.p);
	free(xz.p);
	free(d.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_and_pieces),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_recorded_dictionary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
