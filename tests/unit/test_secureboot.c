/* Secure Boot state from the SecureBoot EFI variable of fixture roots:
 * efivarfs (attribute header + value), the legacy sysfs data file, legacy
 * BIOS (no sys/firmware/efi) and everything in between that is unknown.
 * The MOK lists: EFI_SIGNATURE_LIST parsing of crafted buffers (valid,
 * truncated, oversized, other types, several lists, every truncation and
 * byte flip) and the enrolment answer for a certificate in a root. */
#include "testutil.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "gpuprov/secureboot.h"
#include "gpuprov/sha256.h"
#include "gpuprov/util.h"

#define EFI "sys/firmware/efi"
#define GUID "8be4df61-93ca-11d2-aa0d-00e098032b8c"
#define EFIVAR EFI "/efivars/SecureBoot-" GUID
#define SYSFSVAR EFI "/vars/SecureBoot-" GUID "/data"

#define FX_TEST(f) cmocka_unit_test_setup_teardown(f, tu_root_setup, tu_root_teardown)

/* The state of the root as written so far (opened afresh each time). */
static enum gp_secure_boot fx_state(struct tu_root_fixture *fx)
{
	if (fx->r.dir)
		gp_root_close(&fx->r);
	fx->r = (struct gp_root){ 0 };
	assert_int_equal(gp_root_open(&fx->r, fx->dir), 0);
	return gp_secure_boot_state(&fx->r);
}

/* Writes len bytes (NULs included) to dir/rel, creating the parents. */
static void fx_write_bytes(struct tu_root_fixture *fx, const char *rel, const void *data,
                           size_t len)
{
	tu_write(fx->dir, rel, "");
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", fx->dir, rel);
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void test_no_efi_is_not_uefi(void **state)
{
	struct tu_root_fixture *fx = *state;
	assert_int_equal(fx_state(fx), GP_SB_NOT_UEFI);
	/* Other firmware entries do not make it UEFI. */
	tu_mkdir(fx->dir, "sys/firmware/acpi");
	assert_int_equal(fx_state(fx), GP_SB_NOT_UEFI);
}

static void test_efivarfs_on_off(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* Attributes NV|BS|RT (0x06), then the value. */
	fx_write_bytes(fx, EFIVAR, "\x06\x00\x00\x00\x01", 5);
	assert_int_equal(fx_state(fx), GP_SB_ON);
	fx_write_bytes(fx, EFIVAR, "\x06\x00\x00\x00\x00", 5);
	assert_int_equal(fx_state(fx), GP_SB_OFF);
	/* Only bit 0 of the last byte counts. */
	fx_write_bytes(fx, EFIVAR, "\x07\x00\x00\x00\x03", 5);
	assert_int_equal(fx_state(fx), GP_SB_ON);
	fx_write_bytes(fx, EFIVAR, "\x07\x00\x00\x00\xfe", 5);
	assert_int_equal(fx_state(fx), GP_SB_OFF);
}

static void test_efi_without_variable_is_unknown(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_mkdir(fx->dir, EFI);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
	/* efivarfs mounted, but no SecureBoot variable (firmware without it). */
	tu_mkdir(fx->dir, EFI "/efivars");
	fx_write_bytes(fx, EFI "/efivars/BootOrder-8be4df61-93ca-11d2-aa0d-00e098032b8c",
	               "\x07\x00\x00\x00\x01\x00", 6);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
}

static void test_short_or_unreadable_variable_is_unknown(void **state)
{
	struct tu_root_fixture *fx = *state;
	fx_write_bytes(fx, EFIVAR, "", 0);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
	/* The header alone: no value byte. */
	fx_write_bytes(fx, EFIVAR, "\x06\x00\x00\x01", 4);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
	/* Something that cannot be read as a file. */
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", fx->dir, EFIVAR);
	assert_int_equal(unlink(path), 0);
	tu_mkdir(fx->dir, EFIVAR);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
}

static void test_efi_not_a_directory_is_unknown(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, EFI, "not a directory\n");
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
}

static void test_legacy_sysfs_vars(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* No efivarfs: the old sysfs interface holds the data without a header. */
	fx_write_bytes(fx, SYSFSVAR, "\x01", 1);
	assert_int_equal(fx_state(fx), GP_SB_ON);
	fx_write_bytes(fx, SYSFSVAR, "\x00", 1);
	assert_int_equal(fx_state(fx), GP_SB_OFF);
	fx_write_bytes(fx, SYSFSVAR, "", 0);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
	/* efivarfs wins when both are there. */
	fx_write_bytes(fx, SYSFSVAR, "\x00", 1);
	fx_write_bytes(fx, EFIVAR, "\x06\x00\x00\x00\x01", 5);
	assert_int_equal(fx_state(fx), GP_SB_ON);
	/* ... even when its variable is short: a broken efivarfs entry is not
	 * answered from the other interface. */
	fx_write_bytes(fx, EFIVAR, "\x06\x00", 2);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
}

static void test_symlink_out_of_root_stays_in_root(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* An absolute link resolves inside the root, never to the host's
	 * firmware directory. */
	tu_mkdir(fx->dir, "sys/firmware");
	fx_write_bytes(fx, "elsewhere/efivars/SecureBoot-" GUID, "\x06\x00\x00\x00\x01",
	               5);
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/" EFI, fx->dir);
	assert_int_equal(symlink("/elsewhere", path), 0);
	assert_int_equal(fx_state(fx), GP_SB_ON);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/no/such/dir", path), 0);
	assert_int_equal(fx_state(fx), GP_SB_NOT_UEFI);
}

/* --- MOK lists ----------------------------------------------------------- */

#define SHIM "605dab50-e046-4300-abb6-3dd810dd8b23"
#define MOKRT EFI "/efivars/MokListRT-" SHIM
#define MOKXRT EFI "/efivars/MokListXRT-" SHIM

static const unsigned char x509_guid[16] = { 0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94,
	                                     0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15,
	                                     0x5c, 0x2b, 0xf0, 0x72 };
/* EFI_CERT_SHA256_GUID c1c41626-504c-4092-aca9-41f936934328: hashes, skipped. */
static const unsigned char sha256_guid[16] = { 0x26, 0x16, 0xc4, 0xc1, 0x4c, 0x50,
	                                       0x92, 0x40, 0xac, 0xa9, 0x41, 0xf9,
	                                       0x36, 0x93, 0x43, 0x28 };

struct buf {
	unsigned char b[8192];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	assert_true(b->n + n <= sizeof b->b);
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put32(struct buf *b, uint32_t v)
{
	unsigned char le[4] = { v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24 };
	put(b, le, 4);
}

/* One EFI_SIGNATURE_LIST of type with n entries of the same length, each an
 * owner GUID (0x11...) and sig; header bytes of list header (0x55...). */
static void put_list(struct buf *b, const unsigned char type[16], uint32_t header,
                     const void *const *sigs, size_t sig_len, size_t n)
{
	put(b, type, 16);
	put32(b, (uint32_t)(28 + header + n * (16 + sig_len)));
	put32(b, header);
	put32(b, (uint32_t)(16 + sig_len));
	for (uint32_t i = 0; i < header; i++)
		put(b, "\x55", 1);
	for (size_t i = 0; i < n; i++) {
		put(b, "\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11",
		    16);
		put(b, sigs[i], sig_len);
	}
}

static void assert_parse_fails(const struct buf *b)
{
	struct gp_efi_certs certs = { 0 };
	assert_int_equal(gp_efi_siglist_parse(b->b, b->n, &certs), -EINVAL);
	assert_null(certs.sha256);
}

static void test_siglist_valid(void **state)
{
	(void)state;
	const void *two[] = { "cert-one", "cert-two" };
	const void *hash[] = { "0123456789abcdef0123456789abcdef" };
	const void *three[] = { "cert-333" };
	struct buf b = { .n = 0 };
	put_list(&b, x509_guid, 0, two, 8, 2);
	put_list(&b, sha256_guid, 0, hash, 32, 1); /* skipped */
	put_list(&b, x509_guid, 3, three, 8, 1); /* with a list header */
	struct gp_efi_certs certs;
	assert_int_equal(gp_efi_siglist_parse(b.b, b.n, &certs), 0);
	assert_int_equal(gp_strv_len(certs.sha256), 3);
	char hex[65];
	gp_sha256_hex("cert-one", 8, hex);
	assert_string_equal(certs.sha256[0], hex);
	gp_sha256_hex("cert-two", 8, hex);
	assert_string_equal(certs.sha256[1], hex);
	gp_sha256_hex("cert-333", 8, hex);
	assert_string_equal(certs.sha256[2], hex);
	gp_efi_certs_free(&certs);
	/* Nothing at all is an empty list, not an error. */
	assert_int_equal(gp_efi_siglist_parse("", 0, &certs), 0);
	assert_null(certs.sha256[0]);
	gp_efi_certs_free(&certs);
	/* A list of hashes only: no certificates. */
	b.n = 0;
	put_list(&b, sha256_guid, 0, hash, 32, 1);
	assert_int_equal(gp_efi_siglist_parse(b.b, b.n, &certs), 0);
	assert_null(certs.sha256[0]);
	gp_efi_certs_free(&certs);
}

/* Rewrites the u32 at off of b. */
static void set32(struct buf *b, size_t off, uint32_t v)
{
	size_t n = b->n;
	b->n = off;
	put32(b, v);
	b->n = n;
}

static void test_siglist_bad_lengths(void **state)
{
	(void)state;
	const void *one[] = { "cert-one" };
	struct buf good = { .n = 0 };
	put_list(&good, x509_guid, 0, one, 8, 1); /* 28 + 24 = 52 bytes */
	struct buf b;
	/* Shorter than a list header. */
	b = good;
	b.n = 27;
	assert_parse_fails(&b);
	/* SignatureListSize past the end, below the header, huge. */
	b = good;
	set32(&b, 16, 53);
	assert_parse_fails(&b);
	set32(&b, 16, 27);
	assert_parse_fails(&b);
	set32(&b, 16, 0);
	assert_parse_fails(&b);
	set32(&b, 16, 0xffffffff);
	assert_parse_fails(&b);
	/* SignatureHeaderSize larger than the list. */
	b = good;
	set32(&b, 20, 25);
	assert_parse_fails(&b);
	set32(&b, 20, 0xffffffff);
	assert_parse_fails(&b);
	/* SignatureSize: zero, the owner alone, not dividing the body, huge. */
	b = good;
	set32(&b, 24, 0);
	assert_parse_fails(&b);
	set32(&b, 24, 16);
	assert_parse_fails(&b);
	set32(&b, 24, 23);
	assert_parse_fails(&b);
	set32(&b, 24, 0xffffffff);
	assert_parse_fails(&b);
	/* A good list followed by a truncated one fails as a whole. */
	b = good;
	put(&b, good.b, 30);
	assert_parse_fails(&b);
	/* Other types are skipped by their size, which must still fit. */
	b = good;
	memcpy(b.b, sha256_guid, 16);
	set32(&b, 24, 0); /* not looked at */
	struct gp_efi_certs certs;
	assert_int_equal(gp_efi_siglist_parse(b.b, b.n, &certs), 0);
	gp_efi_certs_free(&certs);
	set32(&b, 16, 53);
	assert_parse_fails(&b);
}

/* Every truncation and every single-byte change of a valid sequence parses
 * or fails cleanly (ASan watches the reads); exact-size copies make any
 * overread visible. */
static void test_siglist_mutations(void **state)
{
	(void)state;
	const void *two[] = { "aaaa", "bbbb" };
	const void *hash[] = { "0123456789abcdef0123456789abcdef" };
	struct buf b = { .n = 0 };
	put_list(&b, x509_guid, 2, two, 4, 2);
	put_list(&b, sha256_guid, 0, hash, 32, 1);
	struct gp_efi_certs certs;
	for (size_t n = 0; n <= b.n; n++) {
		unsigned char *copy = malloc(n ? n : 1);
		memcpy(copy, b.b, n);
		int rc = gp_efi_siglist_parse(copy, n, &certs);
		/* Only the whole, or nothing, or the first list alone parse. */
		assert_int_equal(rc,
		                 n == 0 || n == 28 + 2 + 40 || n == b.n ? 0 : -EINVAL);
		if (rc == 0)
			gp_efi_certs_free(&certs);
		free(copy);
	}
	for (size_t i = 0; i < b.n; i++)
		for (unsigned v = 0; v < 256; v += 51) {
			unsigned char *copy = malloc(b.n);
			memcpy(copy, b.b, b.n);
			copy[i] = (unsigned char)v;
			if (gp_efi_siglist_parse(copy, b.n, &certs) == 0) {
				assert_true(gp_strv_len(certs.sha256) <= 3);
				gp_efi_certs_free(&certs);
			}
			free(copy);
		}
}

/* A self-signed certificate (EC P-256) as DER; *pem gets its PEM. */
static unsigned char *make_cert(const char *cn, size_t *len, char **pem)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	assert_non_null(key);
	X509 *x = X509_new();
	assert_non_null(x);
	assert_int_equal(X509_set_version(x, 2), 1);
	assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(x), 1), 1);
	assert_non_null(X509_gmtime_adj(X509_getm_notBefore(x), 0));
	assert_non_null(X509_gmtime_adj(X509_getm_notAfter(x), 3600));
	X509_NAME *name = X509_get_subject_name(x);
	assert_int_equal(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	                                            (const unsigned char *)cn, -1, -1, 0),
	                 1);
	assert_int_equal(X509_set_issuer_name(x, name), 1);
	assert_int_equal(X509_set_pubkey(x, key), 1);
	assert_true(X509_sign(x, key, EVP_sha256()) > 0);
	unsigned char *der = NULL;
	int n = i2d_X509(x, &der);
	assert_true(n > 0);
	*len = (size_t)n;
	BIO *bio = BIO_new(BIO_s_mem());
	/* A key first: the certificate block is looked for, not assumed. */
	assert_int_equal(PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL),
	                 1);
	assert_int_equal(PEM_write_bio_X509(bio, x), 1);
	char *p;
	long plen = BIO_get_mem_data(bio, &p);
	*pem = strndup(p, (size_t)plen);
	BIO_free(bio);
	X509_free(x);
	EVP_PKEY_free(key);
	return der;
}

/* An efivarfs MOK variable (attributes BS|RT) at rel holding one X.509
 * list with the given DER certificates (all of length len). */
static void write_mok_var(struct tu_root_fixture *fx, const char *rel, size_t header,
                          const void *const *ders, size_t len, size_t n)
{
	static struct buf b;
	b.n = 0;
	if (header)
		put(&b, "\x06\x00\x00\x00", 4);
	put_list(&b, x509_guid, 0, ders, len, n);
	fx_write_bytes(fx, rel, b.b, b.n);
}

static enum gp_mok_state fx_mok(struct tu_root_fixture *fx, const char *cert, int want_rc)
{
	if (fx->r.dir)
		gp_root_close(&fx->r);
	fx->r = (struct gp_root){ 0 };
	assert_int_equal(gp_root_open(&fx->r, fx->dir), 0);
	enum gp_mok_state st = GP_MOK_ENROLLED;
	assert_int_equal(gp_mok_cert_state(&fx->r, cert, &st), want_rc);
	return st;
}

static void test_mok_list_read(void **state)
{
	struct tu_root_fixture *fx = *state;
	const void *a[] = { "AAAA" }, *b[] = { "BBBB" }, *c[] = { "CCCC" };
	char ha[65], hb[65], hc[65];
	gp_sha256_hex("AAAA", 4, ha);
	gp_sha256_hex("BBBB", 4, hb);
	gp_sha256_hex("CCCC", 4, hc);
	assert_int_equal(gp_root_open(&fx->r, fx->dir), 0);
	struct gp_efi_certs certs;
	assert_int_equal(gp_mok_list_read(&fx->r, "MokListRT", &certs), -ENOENT);
	/* The legacy sysfs data file, without a header. */
	write_mok_var(fx, EFI "/vars/MokListRT-" SHIM "/data", 0, c, 4, 1);
	assert_int_equal(gp_mok_list_read(&fx->r, "MokListRT", &certs), 0);
	assert_string_equal(certs.sha256[0], hc);
	gp_efi_certs_free(&certs);
	/* efivarfs before it: the attribute header is skipped. */
	write_mok_var(fx, MOKRT, 4, b, 4, 1);
	assert_int_equal(gp_mok_list_read(&fx->r, "MokListRT", &certs), 0);
	assert_string_equal(certs.sha256[0], hb);
	assert_null(certs.sha256[1]);
	gp_efi_certs_free(&certs);
	/* The MOK configuration table before both. */
	write_mok_var(fx, EFI "/mok-variables/MokListRT", 0, a, 4, 1);
	assert_int_equal(gp_mok_list_read(&fx->r, "MokListRT", &certs), 0);
	assert_string_equal(certs.sha256[0], ha);
	gp_efi_certs_free(&certs);
	/* The other list is another name. */
	assert_int_equal(gp_mok_list_read(&fx->r, "MokListXRT", &certs), -ENOENT);
	/* A variable shorter than its header is malformed, not absent. */
	fx_write_bytes(fx, MOKXRT, "\x06\x00", 2);
	assert_int_equal(gp_mok_list_read(&fx->r, "MokListXRT", &certs), -EINVAL);
	/* An unreadable one is an error too. */
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", fx->dir, MOKXRT);
	assert_int_equal(unlink(path), 0);
	tu_mkdir(fx->dir, MOKXRT);
	assert_true(gp_mok_list_read(&fx->r, "MokListXRT", &certs) < 0);
}

static void test_mok_cert_state(void **state)
{
	struct tu_root_fixture *fx = *state;
	size_t len, other_len;
	_cleanup_free_ char *pem = NULL, *other_pem = NULL;
	unsigned char *der = make_cert("test-mok", &len, &pem);
	unsigned char *other = make_cert("other", &other_len, &other_pem);
	fx_write_bytes(fx, "mok/MOK.der", der, len);
	tu_write(fx->dir, "mok/MOK.pem", pem);
	/* No MOK list in the root: unknown, never "no". */
	assert_int_equal(fx_mok(fx, "/mok/MOK.der", 0), GP_MOK_UNKNOWN);
	tu_mkdir(fx->dir, EFI "/efivars");
	assert_int_equal(fx_mok(fx, "/mok/MOK.der", 0), GP_MOK_UNKNOWN);
	/* Another certificate enrolled. */
	const void *others[] = { other };
	write_mok_var(fx, MOKRT, 4, others, other_len, 1);
	assert_int_equal(fx_mok(fx, "/mok/MOK.der", 0), GP_MOK_NOT_ENROLLED);
	assert_int_equal(fx_mok(fx, "/mok/MOK.pem", 0), GP_MOK_NOT_ENROLLED);
	/* Ours enrolled: DER and PEM alike; trailing bytes after the DER do
	 * not matter. */
	struct buf b = { .n = 0 };
	if (len == other_len) {
		const void *both[] = { other, der };
		write_mok_var(fx, MOKRT, 4, both, len, 2);
	} else {
		const void *ours[] = { der };
		put(&b, "\x06\x00\x00\x00", 4);
		put_list(&b, x509_guid, 0, others, other_len, 1);
		put_list(&b, x509_guid, 0, ours, len, 1);
		fx_write_bytes(fx, MOKRT, b.b, b.n);
	}
	assert_int_equal(fx_mok(fx, "/mok/MOK.der", 0), GP_MOK_ENROLLED);
	assert_int_equal(fx_mok(fx, "/mok/MOK.pem", 0), GP_MOK_ENROLLED);
	b.n = 0;
	put(&b, der, len);
	put(&b, "\n", 1);
	fx_write_bytes(fx, "mok/MOK.der", b.b, b.n);
	assert_int_equal(fx_mok(fx, "/mok/MOK.der", 0), GP_MOK_ENROLLED);
	/* Revoked wins over enrolled. */
	const void *ours[] = { der };
	write_mok_var(fx, MOKXRT, 4, ours, len, 1);
	assert_int_equal(fx_mok(fx, "/mok/MOK.der", 0), GP_MOK_REVOKED);
	/* A forbidden list naming others does not matter. */
	write_mok_var(fx, MOKXRT, 4, others, other_len, 1);
	assert_int_equal(fx_mok(fx, "/mok/MOK.pem", 0), GP_MOK_ENROLLED);
	/* A malformed list is unknown, whichever it is. */
	fx_write_bytes(fx, MOKXRT, "\x06\x00\x00\x00\x01", 5);
	assert_int_equal(fx_mok(fx, "/mok/MOK.der", 0), GP_MOK_UNKNOWN);
	fx_write_bytes(fx, MOKXRT, "\x06\x00\x00\x00", 4);
	assert_int_equal(fx_mok(fx, "/mok/MOK.der", 0), GP_MOK_ENROLLED);
	fx_write_bytes(fx, MOKRT, "\x06\x00\x00\x00\x01", 5);
	assert_int_equal(fx_mok(fx, "/mok/MOK.der", 0), GP_MOK_UNKNOWN);
	/* The certificate file: missing, not a certificate, PEM without one. */
	assert_int_equal(fx_mok(fx, "/mok/none.der", -ENOENT), GP_MOK_UNKNOWN);
	tu_write(fx->dir, "mok/junk", "cert\n");
	assert_int_equal(fx_mok(fx, "/mok/junk", -EINVAL), GP_MOK_UNKNOWN);
	fx_write_bytes(fx, "mok/empty", "", 0);
	assert_int_equal(fx_mok(fx, "/mok/empty", -EINVAL), GP_MOK_UNKNOWN);
	fx_write_bytes(fx, "mok/short.der", der, len / 2);
	assert_int_equal(fx_mok(fx, "/mok/short.der", -EINVAL), GP_MOK_UNKNOWN);
	*strstr(pem, "-----BEGIN CERTIFICATE") = '\0';
	tu_write(fx->dir, "mok/key.pem", pem);
	assert_int_equal(fx_mok(fx, "/mok/key.pem", -EINVAL), GP_MOK_UNKNOWN);
	OPENSSL_free(der);
	OPENSSL_free(other);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(gp_secure_boot_name(GP_SB_ON), "on");
	assert_string_equal(gp_secure_boot_name(GP_SB_OFF), "off");
	assert_string_equal(gp_secure_boot_name(GP_SB_NOT_UEFI), "not UEFI");
	assert_string_equal(gp_secure_boot_name(GP_SB_UNKNOWN), "unknown");
	assert_string_equal(gp_secure_boot_name((enum gp_secure_boot)42), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		FX_TEST(test_no_efi_is_not_uefi),
		FX_TEST(test_efivarfs_on_off),
		FX_TEST(test_efi_without_variable_is_unknown),
		FX_TEST(test_short_or_unreadable_variable_is_unknown),
		FX_TEST(test_efi_not_a_directory_is_unknown),
		FX_TEST(test_legacy_sysfs_vars),
		FX_TEST(test_symlink_out_of_root_stays_in_root),
		cmocka_unit_test(test_siglist_valid),
		cmocka_unit_test(test_siglist_bad_lengths),
		cmocka_unit_test(test_siglist_mutations),
		FX_TEST(test_mok_list_read),
		FX_TEST(test_mok_cert_state),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
