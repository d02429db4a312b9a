/* SHA-256 through OpenSSL's low-level SHA256_* calls. OpenSSL 3 marks them
 * deprecated in favour of EVP, but EVP's first digest fetches the
 * implementation from a provider, and loading the default provider (its
 * name tables, the configuration file) cost a no-op run about 6 million
 * instructions, more than hashing everything it hashes
 * (tests/bench/noop.sh). The low-level calls run the same assembly. */
#define OPENSSL_API_COMPAT 0x10100000L /* declare them without warnings */
#include <ctype.h>
#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuprov/sha256.h"
#include "gpuprov/util.h"

#define FD_CHUNK (1 << 20)

struct gp_sha256 {
	SHA256_CTX ctx;
};

struct gp_sha256 *gp_sha256_new(void)
{
	struct gp_sha256 *h = gp_xmalloc(sizeof *h);
	gp_sha256_reset(h);
	return h;
}

void gp_sha256_free(struct gp_sha256 *h)
{
	free(h);
}

void gp_sha256_reset(struct gp_sha256 *h)
{
	if (SHA256_Init(&h->ctx) != 1)
		abort();
}

void gp_sha256_update(struct gp_sha256 *h, const void *data, size_t len)
{
	if (len && SHA256_Update(&h->ctx, data, len) != 1)
		abort();
}

void gp_sha256_peek_hex(const struct gp_sha256 *h, char out[65])
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	SHA256_CTX copy = h->ctx;
	if (SHA256_Final(d, &copy) != 1)
		abort();
	/* A table, not snprintf per byte: hashing is in every parser's loop
	 * that lists certificates (the EFI signature lists). */
	static const char digits[] = "0123456789abcdef";
	for (unsigned i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[64] = '\0';
}

int gp_sha256_update_fd(struct gp_sha256 *h, int fd, off_t start, uint64_t *len)
{
	_cleanup_free_ char *buf = gp_xmalloc(FD_CHUNK);
	off_t off = start;
	for (;;) {
		ssize_t n = pread(fd, buf, FD_CHUNK, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		gp_sha256_update(h, buf, (size_t)n);
		off += n;
	}
	if (len)
		*len = (uint64_t)(off - start);
	return 0;
}

void gp_sha256_hex(const void *data, size_t len, char out[65])
{
	struct gp_sha256 *h = gp_sha256_new();
	gp_sha256_update(h, data, len);
	gp_sha256_peek_hex(h, out);
	gp_sha256_free(h);
}

int gp_sha256_fd_hex(int fd, off_t start, char out[65])
{
	struct gp_sha256 *h = gp_sha256_new();
	int rc = gp_sha256_update_fd(h, fd, start, NULL);
	if (rc == 0)
		gp_sha256_peek_hex(h, out);
	gp_sha256_free(h);
	return rc;
}

int gp_sha256_normalize(const char *in, char out[65])
{
	if (!in || strlen(in) != 64)
		return -EINVAL;
	for (int i = 0; i < 64; i++) {
		if (!isxdigit((unsigned char)in[i]))
			return -EINVAL;
		out[i] = (char)tolower((unsigned char)in[i]);
	}
	out[64] = '\0';
	return 0;
}
