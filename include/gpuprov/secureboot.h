/* Secure Boot and Machine Owner Keys of the target root (secureboot.c):
 * <root>/sys/firmware/efi. Read under the root; nothing here prints. */
#pragma once

#include <stddef.h>

#include "gpuprov/root.h"

/* Secure Boot as the firmware reports it: the SecureBoot EFI variable under
 * <root>/sys/firmware/efi/efivars (a 4-byte attribute header, then the
 * value; bit 0 of the last byte), or the legacy sysfs efivars' data file.
 * NOT_UEFI when the root has no sys/firmware/efi (legacy BIOS boot);
 * UNKNOWN when it has one but no readable, well-formed variable. */
enum gp_secure_boot { GP_SB_UNKNOWN, GP_SB_NOT_UEFI, GP_SB_OFF, GP_SB_ON };
enum gp_secure_boot gp_secure_boot_state(const struct gp_root *r);
/* "on", "off", "not UEFI", "unknown". */
const char *gp_secure_boot_name(enum gp_secure_boot s);

/* The X.509 certificates of an EFI signature database (a sequence of
 * EFI_SIGNATURE_LISTs, as in MokListRT), as the sha256 of each DER.
 * Lists of other signature types (hashes) are skipped. -EINVAL when any
 * length does not fit; on failure *out holds nothing to free. */
struct gp_efi_certs {
	char **sha256; /* lowercase hex, NULL-terminated */
};
int gp_efi_siglist_parse(const void *data, size_t len, struct gp_efi_certs *out);
void gp_efi_certs_free(struct gp_efi_certs *certs);

/* A Machine Owner Key list of the running shim, read like the kernel does:
 * the MOK configuration table (<root>/sys/firmware/efi/mok-variables/NAME),
 * else the efivarfs variable NAME-605dab50-... (attribute header first),
 * else the legacy sysfs efivars' data file. name is "MokListRT" (enrolled)
 * or "MokListXRT" (forbidden). -ENOENT when the root has none of them,
 * -EINVAL when the one found is malformed. */
int gp_mok_list_read(const struct gp_root *r, const char *name, struct gp_efi_certs *out);

/* Is the certificate at cert_path (in the root; DER, or PEM with a
 * CERTIFICATE block) enrolled? REVOKED (in MokListXRT) wins over ENROLLED;
 * UNKNOWN when MokListRT cannot be read (no efivars in the root, or a
 * malformed variable): unknown is never "not enrolled". 0, or -ENOENT /
 * -errno when the file cannot be read, -EINVAL when it holds no
 * certificate. */
enum gp_mok_state {
	GP_MOK_UNKNOWN,
	GP_MOK_ENROLLED,
	GP_MOK_NOT_ENROLLED,
	GP_MOK_REVOKED
};
int gp_mok_cert_state(const struct gp_root *r, const char *cert_path,
                      enum gp_mok_state *state);
