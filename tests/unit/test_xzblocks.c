/* The .xz framing parser (xzblocks.c): real files from the xz tool walked
 * block by block to the index and footer, and hand-made headers for each
 * refusal and each "give me more bytes". */
#include <fcntl.h>
#include <sys/wait.h>

#include "testutil.h"

#include "gpuprov/xzblocks.h"

/* Compresses len bytes of data with `xz -c` and the given options into a
 * buffer (*out, *out_len). false without the xz tool. */
static bool xz_bytes(const uint8_t *data, size_t len, const char *opt1, const char *opt2,
                     uint8_t **out, size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	if (access("/usr/bin/xz", X_OK) < 0)
		return false;
	char *dir = tu_tmpdir();
	char *in = gp_xasprintf("%s/in", dir), *res = gp_xasprintf("%s/out.xz", dir);
	int fd = open(in, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	pid_t pid = fork();
	if (pid == 0) {
		int i = open(in, O_RDONLY | O_CLOEXEC);
		int o = open(res, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (i < 0 || o < 0 || dup2(i, 0) < 0 || dup2(o, 1) < 0)
			_exit(126);
		execl("/usr/bin/xz", "xz", "-c", opt1, opt2, (char *)NULL);
		_exit(127);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	*out = (uint8_t *)tu_read_file(res, out_len);
	tu_rmrf(dir);
	free(in);
	free(res);
	free(dir);
	return true;
}

/* Walks a whole stream: returns the number of blocks, with the sums of
 * their uncompressed sizes; asserts the index and footer line up. */
static unsigned walk(const uint8_t *p, size_t len, uint64_t *uncompressed, bool *sized)
{
	unsigned check;
	size_t need = 0;
	const char *why = NULL;
	assert_int_equal(gp_xz_stream_header(p, len, &check, &need, &why), 0);
	assert_int_equal(check, 4); /* xz's default: CRC64 */
	size_t pos = GP_XZ_STREAM_HEADER_SIZE;
	unsigned blocks = 0;
	*uncompressed = 0;
	*sized = true;
	for (;;) {
		struct gp_xz_block b;
		int r = gp_xz_block_header(p + pos, len - pos, check, &b, &need, &why);
		if (r == GP_XZ_INDEX)
			break;
		assert_int_equal(r, 0);
		blocks++;
		if (b.compressed == GP_XZ_SIZE_UNKNOWN) {
			*sized = false;
			return blocks;
		}
		assert_true(b.uncompressed != GP_XZ_SIZE_UNKNOWN);
		assert_int_equal(b.unpadded, b.header_size + b.compressed + 8);
		assert_int_equal(b.total % 4, 0);
		*uncompressed += b.uncompressed;
		pos += b.total;
		assert_true(pos < len);
	}
	uint64_t backward;
	assert_int_equal(gp_xz_stream_footer(p + len - GP_XZ_STREAM_FOOTER_SIZE, check,
	                                     &backward, &why),
	                 0);
	assert_int_equal(pos + backward + GP_XZ_STREAM_FOOTER_SIZE, len);
	return blocks;
}

static void test_real_streams(void **state)
{
	(void)state;
	size_t len = 300000;
	uint8_t *data = gp_xmalloc(len);
	uint32_t s = 1;
	for (size_t i = 0; i < len; i++) {
		s = s * 1103515245u + 12345u;
		data[i] = (s >> 24) % 7 ? 'a' + (s >> 16) % 16 : (uint8_t)(s >> 8);
	}
	uint8_t *xz;
	size_t xz_len;
	if (!xz_bytes(data, len, "-T2", "--block-size=64KiB", &xz, &xz_len)) {
		free(data);
		skip();
	}
	uint64_t un;
	bool sized;
	assert_int_equal(walk(xz, xz_len, &un, &sized), 5);
	assert_true(sized);
	assert_int_equal(un, len);
	free(xz);
	xz = NULL;
	/* One thread: one block without sizes. */
	bool made = xz_bytes(data, len, "-T1", "-6", &xz, &xz_len);
	assert_true(made);
	assert_int_equal(walk(xz, xz_len, &un, &sized), 1);
	assert_false(sized);
	/* Each prefix of the stream header and of a block header asks for more. */
	unsigned check;
	size_t need;
	const char *why;
	for (size_t n = 0; n < GP_XZ_STREAM_HEADER_SIZE; n++) {
		assert_int_equal(gp_xz_stream_header(xz, n, &check, &need, &why),
		                 GP_XZ_MORE);
		assert_int_equal(need, GP_XZ_STREAM_HEADER_SIZE);
	}
	struct gp_xz_block b;
	const uint8_t *h = xz + GP_XZ_STREAM_HEADER_SIZE;
	size_t hsize = ((size_t)h[0] + 1) * 4;
	assert_int_equal(gp_xz_block_header(h, 0, 4, &b, &need, &why), GP_XZ_MORE);
	assert_int_equal(need, 1);
	for (size_t n = 1; n < hsize; n++) {
		assert_int_equal(gp_xz_block_header(h, n, 4, &b, &need, &why),
		                 GP_XZ_MORE);
		assert_int_equal(need, hsize);
	}
	free(xz);
	free(data);
}

/* A block header with the given fields after the size byte, padded and
 * CRC'd. Returns its size. */
static size_t make_header(uint8_t *h, const uint8_t *fields, size_t n)
{
	size_t size = (2 + n + 4 + 3) / 4 * 4;
	memset(h, 0, size);
	h[0] = (uint8_t)(size / 4 - 1);
	memcpy(h + 1, fields, n);
	uint32_t crc = gp_xz_crc32(h, size - 4);
	for (int i = 0; i < 4; i++)
		h[size - 4 + i] = (uint8_t)(crc >> (8 * i));
	return size;
}

static void refused(const uint8_t *fields, size_t n, const char *sub)
{
	uint8_t h[64];
	size_t size = make_header(h, fields, n);
	struct gp_xz_block b;
	size_t need;
	const char *why = NULL;
	assert_int_equal(gp_xz_block_header(h, size, 4, &b, &need, &why), -EBADMSG);
	assert_non_null(strstr(why, sub));
}

static void test_refusals(void **state)
{
	(void)state;
	/* flags 0xc0 (both sizes), compressed 100, uncompressed 200, LZMA2
	 * (id 0x21, one property byte). */
	const uint8_t good[] = { 0xc0, 100, 0xc8, 0x01, 0x21, 0x01, 0x16 };
	uint8_t h[64];
	size_t size = make_header(h, good, sizeof good);
	struct gp_xz_block b;
	size_t need;
	const char *why;
	assert_int_equal(gp_xz_block_header(h, size, 10, &b, &need, &why), 0);
	assert_int_equal(b.compressed, 100);
	assert_int_equal(b.uncompressed, 200);
	assert_int_equal(b.unpadded, size + 100 + 32); /* SHA-256 check */
	assert_int_equal(b.total, size + 100 + 32);
	h[3] ^= 1; /* the CRC no longer matches */
	assert_int_equal(gp_xz_block_header(h, size, 10, &b, &need, &why), -EBADMSG);
	assert_non_null(strstr(why, "CRC32"));

	refused((const uint8_t[]){ 0xc4, 100, 0xc8, 0x01, 0x21, 0x01, 0x16 }, 7,
	        "reserved");
	/* 0x80 0x00: a non-minimal multibyte integer. */
	refused((const uint8_t[]){ 0x40, 0x80, 0x00, 0x21, 0x01, 0x16 }, 6,
	        "compressed size");
	refused((const uint8_t[]){ 0x40, 0x00, 0x21, 0x01, 0x16 }, 5, "compressed size");
	/* Properties running past the header. */
	refused((const uint8_t[]){ 0x00, 0x21, 0x7f }, 3, "filter flags");
	/* Four filters, only one there. */
	refused((const uint8_t[]){ 0x03, 0x21, 0x01, 0x16 }, 4, "filter flags");
	/* A nonzero byte in the padding. */
	refused((const uint8_t[]){ 0x00, 0x21, 0x01, 0x16, 0x00, 0x00, 0x01 }, 7,
	        "padding");

	/* The index indicator; stream header and footer refusals. */
	const uint8_t zero = 0;
	assert_int_equal(gp_xz_block_header(&zero, 1, 4, &b, &need, &why), GP_XZ_INDEX);
	unsigned check;
	const uint8_t notxz[12] = "\xfd"
	                          "7zXY";
	assert_int_equal(gp_xz_stream_header(notxz, 12, &check, &need, &why), -EBADMSG);
	uint8_t sh[12] = { 0xfd, '7', 'z', 'X', 'Z', 0, 0, 0x04 };
	uint32_t crc = gp_xz_crc32(sh + 6, 2);
	for (int i = 0; i < 4; i++)
		sh[8 + i] = (uint8_t)(crc >> (8 * i));
	assert_int_equal(gp_xz_stream_header(sh, 12, &check, &need, &why), 0);
	sh[7] = 0x14; /* a reserved flag bit (and the CRC is wrong too) */
	assert_int_equal(gp_xz_stream_header(sh, 12, &check, &need, &why), -EBADMSG);
	uint8_t foot[12] = { 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x04, 'Y', 'Z' };
	crc = gp_xz_crc32(foot + 4, 6);
	for (int i = 0; i < 4; i++)
		foot[i] = (uint8_t)(crc >> (8 * i));
	uint64_t backward;
	assert_int_equal(gp_xz_stream_footer(foot, 4, &backward, &why), 0);
	assert_int_equal(backward, 8);
	assert_int_equal(gp_xz_stream_footer(foot, 1, &backward, &why), -EBADMSG);
	assert_non_null(strstr(why, "flags"));
	foot[10] = 'Z';
	assert_int_equal(gp_xz_stream_footer(foot, 4, &backward, &why), -EBADMSG);
	/* The check sizes of the specification's table. */
	assert_int_equal(gp_xz_check_size(0), 0);
	assert_int_equal(gp_xz_check_size(1), 4);
	assert_int_equal(gp_xz_check_size(4), 8);
	assert_int_equal(gp_xz_check_size(10), 32);
	assert_int_equal(gp_xz_check_size(15), 64);
	/* The CRC-32 check value of "123456789". */
	assert_int_equal(gp_xz_crc32((const uint8_t *)"123456789", 9), 0xcbf43926u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_streams),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
