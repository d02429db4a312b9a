/* Parallel decoding of one .xz stream whose blocks record their sizes
 * (xzpar.c), for input that is not verified yet: each block is cut out of
 * the input with the framing parser (xzblocks.h), decoded whole by
 * liblzma's single-threaded block decoder in a worker thread, and handed
 * back in order. liblzma's own threaded decoder is avoided on such input
 * (see pick_xz_threads in src/sys/archive.c).
 *
 * The caller alone feeds input and takes output, from one thread; the
 * workers only decode. Memory: the blocks held at once (being filled,
 * waiting, decoding, or decoded and not yet taken) together stay within
 * GP_XZPAR_BUDGET(threads) bytes of block buffers (compressed plus
 * uncompressed sizes; the oldest block is always admitted), plus each
 * worker's decoder (the LZMA2 dictionary: 8 MiB at xz -6, never more than
 * the block's uncompressed size). A block whose header lacks either size, or
 * records more than GP_XZPAR_BLOCK_MAX of either, is refused: the caller
 * checks the first block with gp_xzpar_suits and decodes on one thread
 * otherwise. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GP_XZPAR_BLOCK_MAX ((uint64_t)64 << 20)
#define GP_XZPAR_BUDGET(threads) ((uint64_t)((threads) + 1) * (64u << 20))

struct gp_xzpar;

/* Whether the stream starting at p (n bytes, all that is known so far)
 * opens with a block this decoder takes. GP_XZ_MORE-like: *need > n when
 * more bytes would decide; false with *need == 0 when it cannot. */
bool gp_xzpar_suits(const uint8_t *p, size_t n, size_t *need);

/* threads: 1..16 workers. Negative errno when a thread cannot start. */
int gp_xzpar_new(unsigned threads, uint64_t mem_stop, struct gp_xzpar **out);
void gp_xzpar_free(struct gp_xzpar *p);
/* Forgets the stream (waiting for blocks being decoded) and readies p for
 * a new one on the same workers, as if just made by gp_xzpar_new. */
void gp_xzpar_reset(struct gp_xzpar *p);

/* Takes input: returns the bytes consumed (fewer than len when the stream
 * ended inside in, or when no block can be admitted until output is
 * taken: then 0), or -EBADMSG with the reason in gp_xzpar_msg. */
ssize_t gp_xzpar_feed(struct gp_xzpar *p, const uint8_t *in, size_t len);
/* Whether gp_xzpar_feed would take bytes now. */
bool gp_xzpar_hungry(const struct gp_xzpar *p);
/* The stream's footer was read and matched its index. */
bool gp_xzpar_ended(const struct gp_xzpar *p);
/* The next decoded bytes in order: > 0 with *out (valid until the next
 * call), 0 at the end of the stream, -EAGAIN when the oldest block is not
 * decoded yet (wait: true blocks until it is), or a negative error
 * (-EBADMSG corrupt data, -ENOMEM, -E2BIG dictionary above mem_stop) with
 * gp_xzpar_msg. */
ssize_t gp_xzpar_take(struct gp_xzpar *p, const uint8_t **out, bool wait);
const char *gp_xzpar_msg(const struct gp_xzpar *p);
/* The most block-buffer bytes held at once so far. */
uint64_t gp_xzpar_peak(const struct gp_xzpar *p);
