/* SHA-256 through OpenSSL 3's EVP interface (the SHA256_* calls are
 * deprecated). struct gp_sha256 is an EVP_MD_CTX under another name. */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gpuprov/sha256.h"
#include "gpuprov/util.h"

#define FD_CHUNK (1 << 20)

static EVP_MD_CTX *ctx(const struct gp_sha256 *h)
{
	return (EVP_MD_CTX *)h;
}

/* The implementation, fetched once: EVP_sha256() makes every
 * EVP_DigestInit_ex fetch it from the provider again (OpenSSL 3), a cost
 * that showed among the largest of a no-op run (tests/bench/noop.sh),
 * which hashes the profile and each stage's settings. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256(void)
{
	pthread_once(&sha256_once, fetch_sha256);
	if (!sha256_md)
		abort();
	return sha256_md;
}

struct gp_sha256 *gp_sha256_new(void)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md || EVP_DigestInit_ex(md, sha256(), NULL) != 1)
		abort();
	return (struct gp_sha256 *)md;
}

void gp_sha256_free(struct gp_sha256 *h)
{
	EVP_MD_CTX_free(ctx(h));
}

void gp_sha256_reset(struct gp_sha256 *h)
{
	if (EVP_DigestInit_ex(ctx(h), sha256(), NULL) != 1)
		abort();
}

void gp_sha256_update(struct gp_sha256 *h, const void *data, size_t len)
{
	if (len && EVP_DigestUpdate(ctx(h), data, len) != 1)
		abort();
}

void gp_sha256_peek_hex(const struct gp_sha256 *h, char out[65])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_MD_CTX *copy = EVP_MD_CTX_new();
	if (!copy || EVP_MD_CTX_copy_ex(copy, ctx(h)) != 1 ||
	    EVP_DigestFinal_ex(copy, d, &n) != 1 || n != 32)
		abort();
	EVP_MD_CTX_free(copy);
	/* A table, not snprintf per byte: hashing is in every parser's loop
	 * that lists certificates (the EFI signature lists). */
	static const char digits[] = "0123456789abcdef";
	for (unsigned i = 0; i < 32; i++) {
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
