/* OpenPGP packets (RFC 4880 section 4, RFC 9580 for v6), just far enough to
 * find public-key packets and fingerprint them: v4 is SHA-1 over
 * 0x99 || two-octet length || packet body, v6 SHA-256 over 0x9B ||
 * four-octet length || body. ASCII armor is base64 between the BEGIN/END
 * lines, after the armor headers; the CRC line is not checked (the
 * fingerprint comparison is what counts). */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

#include "gpuprov/openpgp.h"
#include "gpuprov/util.h"

#define TAG_PUBLIC_KEY 6

static char *hex_upper(const unsigned char *d, size_t n)
{
	static const char digits[] = "0123456789ABCDEF";
	char *s = gp_xmalloc(2 * n + 1);
	for (size_t i = 0; i < n; i++) {
		s[2 * i] = digits[d[i] >> 4];
		s[2 * i + 1] = digits[d[i] & 15];
	}
	s[2 * n] = '\0';
	return s;
}

static char *fingerprint(const unsigned char *body, size_t len)
{
	if (len < 1 || (body[0] != 4 && body[0] != 6) || (body[0] == 4 && len > 0xffff))
		return NULL;
	bool v6 = body[0] == 6;
	unsigned char pre[5];
	size_t np;
	if (v6) {
		pre[0] = 0x9b;
		pre[1] = (unsigned char)(len >> 24);
		pre[2] = (unsigned char)(len >> 16);
		pre[3] = (unsigned char)(len >> 8);
		pre[4] = (unsigned char)len;
		np = 5;
	} else {
		pre[0] = 0x99;
		pre[1] = (unsigned char)(len >> 8);
		pre[2] = (unsigned char)len;
		np = 3;
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool ok = ctx && EVP_DigestInit_ex(ctx, v6 ? EVP_sha256() : EVP_sha1(), NULL) &&
	          EVP_DigestUpdate(ctx, pre, np) && EVP_DigestUpdate(ctx, body, len) &&
	          EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	return ok ? hex_upper(md, mdlen) : NULL;
}

/* Walks the packets of a binary keyring; appends primary key fingerprints. */
static int scan_packets(const unsigned char *p, size_t n, char ***out)
{
	size_t i = 0;
	while (i < n) {
		unsigned char h = p[i++];
		if (!(h & 0x80))
			return -EINVAL;
		unsigned tag;
		size_t len;
		if (h & 0x40) { /* new format */
			tag = h & 0x3f;
			if (i >= n)
				return -EINVAL;
			unsigned o1 = p[i++];
			if (o1 < 192) {
				len = o1;
			} else if (o1 < 224) {
				if (i >= n)
					return -EINVAL;
				len = ((o1 - 192) << 8) + p[i++] + 192;
			} else if (o1 == 255) {
				if (i + 4 > n)
					return -EINVAL;
				len = (size_t)p[i] << 24 | (size_t)p[i + 1] << 16 |
				      (size_t)p[i + 2] << 8 | p[i + 3];
				i += 4;
			} else {
				return -EINVAL; /* partial lengths: not in keyrings */
			}
		} else { /* old format */
			tag = (h >> 2) & 0xf;
			unsigned lt = h & 3;
			if (lt == 3) {
				len = n - i;
			} else {
				size_t nb = lt == 0 ? 1 : lt == 1 ? 2 : 4;
				if (i + nb > n)
					return -EINVAL;
				len = 0;
				for (size_t k = 0; k < nb; k++)
					len = len << 8 | p[i + k];
				i += nb;
			}
		}
		if (len > n - i)
			return -EINVAL;
		if (tag == TAG_PUBLIC_KEY) {
			_cleanup_free_ char *f = fingerprint(p + i, len);
			if (f && !gp_strv_contains(*out, f))
				gp_strv_push(out, f);
		}
		i += len;
	}
	return 0;
}

/* Decodes the base64 body of each armored block in text into *bin. */
static int dearmor(const char *text, size_t len, struct gp_buf *bin)
{
	_cleanup_free_ char *copy = gp_xstrndup(text, len);
	_cleanup_strv_ char **lines = gp_strv_split(copy, '\n');
	enum { OUTSIDE, HEADERS, BODY } state = OUTSIDE;
	struct gp_buf b64 = { 0 };
	int blocks = 0;
	for (size_t i = 0; lines[i]; i++) {
		char *l = lines[i];
		l[strcspn(l, "\r")] = '\0';
		if (state == OUTSIDE) {
			if (strncmp(l, "-----BEGIN PGP PUBLIC KEY BLOCK-----", 36) == 0)
				state = HEADERS;
		} else if (state == HEADERS) {
			/* strv_split drops the empty line ending the headers: a
			 * header has ": ", the body does not. */
			if (!strstr(l, ": "))
				state = BODY;
		}
		if (state != BODY)
			continue;
		if (strncmp(l, "-----END PGP PUBLIC KEY BLOCK-----", 34) == 0 ||
		    (l[0] == '=' && strlen(l) == 5)) {
			if (l[0] != '=')
				state = OUTSIDE;
			if (b64.len) {
				unsigned char *out = gp_xmalloc(b64.len);
				EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
				int n1 = 0, n2 = 0;
				EVP_DecodeInit(ctx);
				int ok = EVP_DecodeUpdate(ctx, out, &n1,
				                          (unsigned char *)b64.data,
				                          (int)b64.len) >= 0 &&
				         EVP_DecodeFinal(ctx, out + n1, &n2) >= 0;
				EVP_ENCODE_CTX_free(ctx);
				if (ok)
					gp_buf_append(bin, out, (size_t)(n1 + n2));
				free(out);
				gp_buf_free(&b64);
				if (!ok)
					return -EINVAL;
				blocks++;
			}
			continue;
		}
		gp_buf_puts(&b64, l);
	}
	gp_buf_free(&b64);
	return blocks ? 0 : -EINVAL;
}

int gp_openpgp_fingerprints(const void *data, size_t len, char ***fprs)
{
	*fprs = NULL;
	char **out = gp_xcalloc(1, sizeof(char *));
	struct gp_buf bin = { 0 };
	int rc;
	if (len >= 10 && memmem(data, len, "-----BEGIN PGP", 14)) {
		rc = dearmor(data, len, &bin);
		if (rc == 0)
			rc = scan_packets((unsigned char *)bin.data, bin.len, &out);
	} else {
		rc = scan_packets(data, len, &out);
	}
	gp_buf_free(&bin);
	if (rc == 0 && !out[0])
		rc = -EINVAL;
	if (rc < 0) {
		gp_strv_free(out);
		return rc;
	}
	*fprs = out;
	return 0;
}

char *gp_openpgp_normalize(const char *fpr)
{
	struct gp_buf b = { 0 };
	for (const char *p = fpr; *p; p++) {
		if (*p == ' ')
			continue;
		if (!isxdigit((unsigned char)*p)) {
			gp_buf_free(&b);
			return NULL;
		}
		char c = (char)toupper((unsigned char)*p);
		gp_buf_append(&b, &c, 1);
	}
	if (b.len != 40 && b.len != 64) {
		gp_buf_free(&b);
		return NULL;
	}
	return gp_buf_steal(&b);
}

char *gp_openpgp_pretty(const char *fpr)
{
	struct gp_buf b = { 0 };
	size_t n = strlen(fpr);
	for (size_t i = 0; i < n; i += 4) {
		if (i)
			gp_buf_puts(&b, n == 40 && i == 20 ? "  " : " ");
		gp_buf_append(&b, fpr + i, n - i < 4 ? n - i : 4);
	}
	return gp_buf_steal(&b);
}
