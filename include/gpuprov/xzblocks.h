/* The framing of an .xz stream (xzblocks.c): stream header and footer,
 * block headers, from the .xz file format specification 1.1.0
 * (https://tukaani.org/xz/xz-file-format.txt). Enough to cut a stream into
 * its blocks as the bytes arrive, so that blocks whose headers record their
 * sizes (every block of a multi-threaded xz) can be decoded in parallel
 * (src/sys/xzpar.c). Reads hostile bytes: every length is bounded by the
 * buffer given, every field is checked, nothing is allocated. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define GP_XZ_STREAM_HEADER_SIZE 12
#define GP_XZ_STREAM_FOOTER_SIZE 12
#define GP_XZ_BLOCK_HEADER_MAX 1024
#define GP_XZ_SIZE_UNKNOWN UINT64_MAX

/* Results besides 0 (parsed) and -EBADMSG (*why says what is wrong). */
enum {
	GP_XZ_MORE = 1, /* give at least *need bytes */
	GP_XZ_INDEX = 2, /* not a block header: the index starts here */
};

struct gp_xz_block {
	uint32_t header_size; /* bytes of the block header, 8..1024 */
	uint64_t compressed; /* GP_XZ_SIZE_UNKNOWN when the header has none */
	uint64_t uncompressed; /* GP_XZ_SIZE_UNKNOWN when the header has none */
	/* With a known compressed size: the index's "unpadded size" (header,
	 * data, check) and the block's bytes in the stream (padding to a
	 * multiple of four included); else 0. */
	uint64_t unpadded;
	uint64_t total;
};

/* CRC-32 (IEEE 802.3, as xz uses it for headers and the index). */
uint32_t gp_xz_crc32(const uint8_t *p, size_t n);
/* Bytes of the check (CRC32, CRC64, SHA-256 or a reserved id) of check id
 * 0..15 after each block's data. */
unsigned gp_xz_check_size(unsigned check);
/* The stream header in p (n bytes so far): 0 with *check, GP_XZ_MORE with
 * *need, or -EBADMSG. */
int gp_xz_stream_header(const uint8_t *p, size_t n, unsigned *check, size_t *need,
                        const char **why);
/* A block header at p (n bytes so far; p[0] must be there): 0 with *b,
 * GP_XZ_INDEX when p[0] is the index indicator, GP_XZ_MORE with *need, or
 * -EBADMSG. check: the stream's check id. */
int gp_xz_block_header(const uint8_t *p, size_t n, unsigned check, struct gp_xz_block *b,
                       size_t *need, const char **why);
/* The 12-byte stream footer: 0 when it is valid and its flags match the
 * header's check, with *backward = the index's size; else -EBADMSG. */
int gp_xz_stream_footer(const uint8_t *p, unsigned check, uint64_t *backward,
                        const char **why);
