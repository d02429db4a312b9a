/* The .xz framing, parsed from bytes (see xzblocks.h). Field layouts from
 * the .xz file format specification, sections 2.1 (stream header and
 * footer), 3.1 (block header) and 1.2 (multibyte integers). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "gpuprov/xzblocks.h"

#define VLI_MAX (UINT64_MAX / 2) /* 2^63 - 1 */

static const uint8_t header_magic[6] = { 0xfd, '7', 'z', 'X', 'Z', 0x00 };
static const uint8_t footer_magic[2] = { 'Y', 'Z' };

uint32_t gp_xz_crc32(const uint8_t *p, size_t n)
{
	/* Bitwise: headers are at most 1 KiB, a table would buy nothing. */
	uint32_t crc = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
	}
	return ~crc;
}

unsigned gp_xz_check_size(unsigned check)
{
	static const unsigned char size[16] = { 0,  4,  4,  4,  8,  8,  8,  16,
		                                16, 16, 32, 32, 32, 64, 64, 64 };
	return check < 16 ? size[check] : 0;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static int bad(const char **why, const char *what)
{
	*why = what;
	return -EBADMSG;
}

/* Stream flags: a zero byte, then the check id in the low nibble. */
static bool flags_ok(const uint8_t *f, unsigned *check)
{
	if (f[0] != 0 || (f[1] & 0xf0) != 0)
		return false;
	*check = f[1] & 0x0f;
	return true;
}

int gp_xz_stream_header(const uint8_t *p, size_t n, unsigned *check, size_t *need,
                        const char **why)
{
	size_t have = n < sizeof header_magic ? n : sizeof header_magic;
	if (memcmp(p, header_magic, have) != 0)
		return bad(why, "not an xz stream (no xz magic)");
	if (n < GP_XZ_STREAM_HEADER_SIZE) {
		*need = GP_XZ_STREAM_HEADER_SIZE;
		return GP_XZ_MORE;
	}
	if (!flags_ok(p + 6, check))
		return bad(why, "unsupported xz stream flags");
	if (gp_xz_crc32(p + 6, 2) != le32(p + 8))
		return bad(why, "xz stream header CRC32 mismatch");
	return 0;
}

/* A multibyte integer at *pos, below end: 1..9 bytes, 7 bits each, low
 * first, no trailing zero byte (the encoding is unique). */
static bool vli(const uint8_t *p, size_t end, size_t *pos, uint64_t *out)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < 9; i++) {
		if (*pos >= end)
			return false;
		uint8_t b = p[(*pos)++];
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			if (i > 0 && b == 0)
				return false;
			*out = v;
			return v <= VLI_MAX;
		}
	}
	return false;
}

int gp_xz_block_header(const uint8_t *p, size_t n, unsigned check, struct gp_xz_block *b,
                       size_t *need, const char **why)
{
	*b = (struct gp_xz_block){ .compressed = GP_XZ_SIZE_UNKNOWN,
		                   .uncompressed = GP_XZ_SIZE_UNKNOWN };
	if (n < 1) {
		*need = 1;
		return GP_XZ_MORE;
	}
	if (p[0] == 0)
		return GP_XZ_INDEX;
	size_t size = ((size_t)p[0] + 1) * 4;
	if (n < size) {
		*need = size;
		return GP_XZ_MORE;
	}
	size_t end = size - 4; /* the CRC32 follows the fields and padding */
	if (gp_xz_crc32(p, end) != le32(p + end))
		return bad(why, "xz block header CRC32 mismatch");
	uint8_t flags = p[1];
	if (flags & 0x3c)
		return bad(why, "xz block header has reserved flags set");
	size_t pos = 2;
	if ((flags & 0x40) && (!vli(p, end, &pos, &b->compressed) || b->compressed == 0))
		return bad(why, "xz block header has an invalid compressed size");
	if ((flags & 0x80) && !vli(p, end, &pos, &b->uncompressed))
		return bad(why, "xz block header has an invalid uncompressed size");
	for (unsigned f = 0; f <= (flags & 0x03u); f++) {
		uint64_t id, props;
		if (!vli(p, end, &pos, &id) || !vli(p, end, &pos, &props) ||
		    props > end - pos)
			return bad(why, "xz block header has invalid filter flags");
		pos += (size_t)props;
	}
	for (; pos < end; pos++)
		if (p[pos] != 0)
			return bad(why, "xz block header padding is not zero");
	b->header_size = (uint32_t)size;
	if (b->compressed != GP_XZ_SIZE_UNKNOWN) {
		uint64_t csize = gp_xz_check_size(check);
		/* The index stores unpadded sizes below 2^63, multiples of four
		 * once padded: bound it before adding. */
		if (b->compressed > VLI_MAX - size - csize - 3)
			return bad(why, "xz block header has an invalid compressed size");
		b->unpadded = size + b->compressed + csize;
		b->total = size + ((b->compressed + 3) & ~(uint64_t)3) + csize;
	}
	return 0;
}

int gp_xz_stream_footer(const uint8_t *p, unsigned check, uint64_t *backward,
                        const char **why)
{
	unsigned fcheck;
	if (memcmp(p + 10, footer_magic, sizeof footer_magic) != 0)
		return bad(why, "xz stream footer magic missing");
	if (gp_xz_crc32(p + 4, 6) != le32(p))
		return bad(why, "xz stream footer CRC32 mismatch");
	if (!flags_ok(p + 8, &fcheck) || fcheck != check)
		return bad(why, "xz stream footer flags differ from the header's");
	*backward = ((uint64_t)le32(p + 4) + 1) * 4;
	return 0;
}
