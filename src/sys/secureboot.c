/* Secure Boot state from the root's EFI variables. With Secure Boot on, the
 * kernel loads only signed modules: an unsigned nvidia.ko fails with "Key
 * was rejected by service", so the driver stage needs to know. A module
 * signed with a Machine Owner Key loads only when shim has enrolled that
 * key: the MOK lists tell whether it has. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "gpuprov/secureboot.h"
#include "gpuprov/sha256.h"
#include "gpuprov/util.h"

#define EFI_DIR "/sys/firmware/efi"
#define SECURE_BOOT_GUID "8be4df61-93ca-11d2-aa0d-00e098032b8c"
/* efivarfs: 4 bytes of attributes, then the variable's data (one byte). */
#define EFIVARFS_VAR EFI_DIR "/efivars/SecureBoot-" SECURE_BOOT_GUID
/* The legacy sysfs interface (CONFIG_EFI_VARS): the data alone. */
#define SYSFS_VAR EFI_DIR "/vars/SecureBoot-" SECURE_BOOT_GUID "/data"

/* The variable's value byte from path, skipping header bytes; -errno, or
 * -EINVAL when the file is too short to hold a value. */
static int read_value(const struct gp_root *r, const char *path, size_t header)
{
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	int rc = gp_root_read(r, path, &data, &len);
	if (rc < 0)
		return rc;
	if (len < header + 1)
		return -EINVAL;
	return (unsigned char)data[len - 1];
}

enum gp_secure_boot gp_secure_boot_state(const struct gp_root *r)
{
	struct stat st;
	int rc = gp_root_stat(r, EFI_DIR, &st);
	if (rc == -ENOENT)
		return GP_SB_NOT_UEFI;
	if (rc < 0 || !S_ISDIR(st.st_mode))
		return GP_SB_UNKNOWN;
	int v = read_value(r, EFIVARFS_VAR, 4);
	if (v == -ENOENT)
		v = read_value(r, SYSFS_VAR, 0);
	if (v < 0)
		return GP_SB_UNKNOWN;
	return (v & 1) ? GP_SB_ON : GP_SB_OFF;
}

const char *gp_secure_boot_name(enum gp_secure_boot s)
{
	switch (s) {
	case GP_SB_ON:
		return "on";
	case GP_SB_OFF:
		return "off";
	case GP_SB_NOT_UEFI:
		return "not UEFI";
	case GP_SB_UNKNOWN:
		break;
	}
	return "unknown";
}

/* --- Machine Owner Key lists ------------------------------------------ */

#define SHIM_GUID "605dab50-e046-4300-abb6-3dd810dd8b23"
/* EFI_CERT_X509_GUID a5c059a1-94e4-4aa7-87b5-ab155c2bf072, as stored
 * (the first three fields little-endian). */
static const unsigned char cert_x509_guid[16] = { 0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94,
	                                          0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15,
	                                          0x5c, 0x2b, 0xf0, 0x72 };
/* EFI_SIGNATURE_LIST: SignatureType, then three u32 sizes. */
#define SIGLIST_HEADER 28
/* EFI_SIGNATURE_DATA: SignatureOwner, then the signature (here a DER cert). */
#define SIG_OWNER 16

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

void gp_efi_certs_free(struct gp_efi_certs *certs)
{
	gp_strv_free(certs->sha256);
	certs->sha256 = NULL;
}

int gp_efi_siglist_parse(const void *data, size_t len, struct gp_efi_certs *out)
{
	const unsigned char *p = data;
	out->sha256 = gp_xcalloc(1, sizeof(char *));
	size_t count = 0;
	while (len > 0) {
		if (len < SIGLIST_HEADER)
			goto bad;
		size_t list = le32(p + 16), header = le32(p + 20), size = le32(p + 24);
		if (list < SIGLIST_HEADER || list > len || header > list - SIGLIST_HEADER)
			goto bad;
		size_t body = list - SIGLIST_HEADER - header;
		if (memcmp(p, cert_x509_guid, 16) == 0) {
			/* Each entry holds an owner and at least one byte of DER,
			 * and the entries fill the body exactly. */
			if (size <= SIG_OWNER || body % size != 0)
				goto bad;
			for (size_t off = 0; off < body; off += size) {
				char hex[65];
				gp_sha256_hex(p + SIGLIST_HEADER + header + off +
				                  SIG_OWNER,
				              size - SIG_OWNER, hex);
				gp_strv_append(&out->sha256, &count, hex);
			}
		}
		p += list;
		len -= list;
	}
	return 0;
bad:
	gp_efi_certs_free(out);
	return -EINVAL;
}

int gp_mok_list_read(const struct gp_root *r, const char *name, struct gp_efi_certs *out)
{
	*out = (struct gp_efi_certs){ 0 };
	/* The configuration table is what the kernel trusts first; efivarfs
	 * prefixes the data with 4 bytes of attributes; the legacy sysfs
	 * interface gives the data alone. */
	_cleanup_free_ char *table = gp_xasprintf(EFI_DIR "/mok-variables/%s", name);
	_cleanup_free_ char *var = gp_xasprintf(EFI_DIR "/efivars/%s-" SHIM_GUID, name);
	_cleanup_free_ char *legacy = gp_xasprintf(EFI_DIR "/vars/%s-" SHIM_GUID "/data",
	                                           name);
	const struct {
		const char *path;
		size_t header;
	} where[] = { { table, 0 }, { var, 4 }, { legacy, 0 } };
	for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
		_cleanup_free_ char *data = NULL;
		size_t len = 0;
		int rc = gp_root_read(r, where[i].path, &data, &len);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return rc;
		if (len < where[i].header)
			return -EINVAL;
		return gp_efi_siglist_parse(data + where[i].header, len - where[i].header,
		                            out);
	}
	return -ENOENT;
}

/* The sha256 of the DER certificate in data (DER itself, or the first PEM
 * CERTIFICATE block); -EINVAL when there is none. */
static int cert_sha256(const char *data, size_t len, char hex[65])
{
	const unsigned char *der = (const unsigned char *)data;
	unsigned char *pem_der = NULL;
	long der_len = (long)len;
	if (len > 0 && der[0] != 0x30) { /* not a DER SEQUENCE: PEM? */
		BIO *bio = BIO_new_mem_buf(data, len > INT32_MAX ? INT32_MAX : (int)len);
		if (!bio)
			return -ENOMEM;
		char *name = NULL, *header = NULL;
		while (PEM_read_bio(bio, &name, &header, &pem_der, &der_len) == 1) {
			bool cert = strcmp(name, PEM_STRING_X509) == 0;
			OPENSSL_free(name);
			OPENSSL_free(header);
			if (cert)
				break;
			OPENSSL_free(pem_der);
			pem_der = NULL;
		}
		BIO_free(bio);
		ERR_clear_error();
		if (!pem_der)
			return -EINVAL;
		der = pem_der;
	}
	/* Only what parses as a certificate counts (trailing bytes do not). */
	const unsigned char *end = der;
	X509 *x = d2i_X509(NULL, &end, der_len);
	int rc = -EINVAL;
	if (x) {
		gp_sha256_hex(der, (size_t)(end - der), hex);
		rc = 0;
	}
	X509_free(x);
	ERR_clear_error();
	OPENSSL_free(pem_der);
	return rc;
}

int gp_mok_cert_state(const struct gp_root *r, const char *cert_path,
                      enum gp_mok_state *state)
{
	*state = GP_MOK_UNKNOWN;
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	char hex[65];
	int rc = gp_root_read(r, cert_path, &data, &len);
	if (rc < 0)
		return rc;
	rc = cert_sha256(data, len, hex);
	if (rc < 0)
		return rc;
	/* No forbidden list is an empty one; a broken one leaves it unknown. */
	struct gp_efi_certs list;
	rc = gp_mok_list_read(r, "MokListXRT", &list);
	if (rc < 0 && rc != -ENOENT)
		return 0;
	if (rc == 0) {
		bool revoked = gp_strv_contains(list.sha256, hex);
		gp_efi_certs_free(&list);
		if (revoked) {
			*state = GP_MOK_REVOKED;
			return 0;
		}
	}
	if (gp_mok_list_read(r, "MokListRT", &list) < 0)
		return 0; /* unknown */
	*state = gp_strv_contains(list.sha256, hex) ? GP_MOK_ENROLLED
	                                            : GP_MOK_NOT_ENROLLED;
	gp_efi_certs_free(&list);
	return 0;
}
