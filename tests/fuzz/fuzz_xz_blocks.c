/* libFuzzer target: the .xz framing parser (src/pure/xzblocks.c) and the
 * block-parallel decoder that feeds on it (src/sys/xzpar.c), on bytes
 * that arrive from a download before any hash was checked. The walk over
 * block headers must stay inside the input and keep its invariants; the
 * decoder, fed in uneven pieces, must end in output, a clean error, or a
 * request for more input, never touch memory it does not own.
 *
 * The decoder runs two workers. Starting and joining threads for every
 * input made this target slow (a few hundred inputs a second under ASan),
 * so one decoder is kept, gp_xzpar_reset after each input; every
 * FRESH_EVERY-th input gets a decoder of its own, freed right after it
 * (blocks possibly still decoding), as a download's is. A crash that
 * needs a kept decoder's past does not replay alone (the first input gets
 * a fresh one): that is a gp_xzpar_reset bug, and -DFRESH_EVERY=1 builds a
 * harness that never keeps a decoder, to tell. */
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

#ifndef FRESH_EVERY
#define FRESH_EVERY 256
#endif
#define THREADS 2
#define MEM_STOP (256u << 20)

static struct gp_xzpar *kept;
static unsigned long inputs;

static void decode(const uint8_t *p, size_t n)
{
	size_t need;
	if (!gp_xzpar_suits(p, n, &need))
		return;
	bool fresh = inputs++ % FRESH_EVERY == 0;
	struct gp_xzpar *x = fresh ? NULL : kept;
	if (!x && gp_xzpar_new(THREADS, MEM_STOP, &x) < 0)
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
	/* Within this input, so that no worker runs into the next one. */
	if (fresh) {
		gp_xzpar_free(x);
	} else {
		gp_xzpar_reset(x);
		kept = x;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	walk(data, size);
	decode(data, size);
	return 0;
}
