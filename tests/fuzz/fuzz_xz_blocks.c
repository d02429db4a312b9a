/* libFuzzer target: the .xz framing parser (src/pure/xzblocks.c) and the
 * block-parallel decoder that feeds on it (src/sys/xzpar.c), on bytes
 * that arrive from a download before any hash was checked. The walk over
 * block headers must stay inside the input and keep its invariants; the
 * decoder, fed in uneven pieces, must end in output, a clean error, or a
 * request for more input, never touch memory it does not own. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/xzblocks.h"
#include "gpuprov/xzpar.h"

static void walk(const uint8_t *p, size_t n)
{
	unsigned check;
	size_t need = 0;
	const char *why = NULL;
	int r = gp_xz_stream_header(p, n, &check, &need, &why);
	if (r == GP_XZ_MORE && (need <= n || need > GP_XZ_STREAM_HEADER_SIZE))
		abort();
	if (r < 0 && !why)
		abort();
	if (r != 0)
		return;
	size_t pos = GP_XZ_STREAM_HEADER_SIZE;
	while (pos < n) {
		struct gp_xz_block b;
		r = gp_xz_block_header(p + pos, n - pos, check, &b, &need, &why);
		if (r == GP_XZ_MORE && (need <= n - pos || need > GP_XZ_BLOCK_HEADER_MAX))
			abort();
		if (r != 0)
			return;
		if (b.header_size < 8 || b.header_size > GP_XZ_BLOCK_HEADER_MAX ||
		    b.header_size % 4)
			abort();
		if (b.compressed == GP_XZ_SIZE_UNKNOWN)
			return;
		if (b.total % 4 || b.unpadded > b.total ||
		    b.total < b.header_size + b.compressed)
			abort();
		if (b.total > n - pos)
			return;
		pos += (size_t)b.total;
	}
}

static void decode(const uint8_t *p, size_t n)
{
	size_t need;
	if (!gp_xzpar_suits(p, n, &need))
		return;
	struct gp_xzpar *x;
	if (gp_xzpar_new(1, 256u << 20, &x) < 0)
		abort();
	size_t pos = 0, step = 1;
	for (;;) {
		const uint8_t *out;
		ssize_t got = gp_xzpar_take(x, &out, !gp_xzpar_hungry(x));
		if (got > 0) {
			volatile uint8_t sink = out[0] ^ out[got - 1];
			(void)sink;
			continue;
		}
		if (got == 0 && !gp_xzpar_ended(x))
			abort(); /* the end comes only after the footer */
		if (got < 0 && got != -EAGAIN && !*gp_xzpar_msg(x))
			abort(); /* errors say why */
		if (got != -EAGAIN || pos == n)
			break;
		size_t len = n - pos < step ? n - pos : step;
		ssize_t used = gp_xzpar_feed(x, p + pos, len);
		if (used < 0)
			break;
		if ((size_t)used > len)
			abort();
		pos += (size_t)used;
		step = step * 3 + 1;
	}
	gp_xzpar_free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	walk(data, size);
	decode(data, size);
	return 0;
}
