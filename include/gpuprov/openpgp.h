/* OpenPGP key fingerprints, computed by gpuprov itself so that a repository
 * key is checked against the profile's pin before apt or rpm ever sees it
 * (openpgp.c). Pure functions: no I/O, no printing. */
#pragma once

#include <stddef.h>

/* Fingerprints (upper-case hex: 40 digits for v4 keys, 64 for v6) of the
 * primary public keys (packet tag 6) in a keyring: binary packets, or one or
 * more ASCII-armored blocks. -EINVAL when the data holds no public key or a
 * malformed packet; *fprs is then NULL. */
int gp_openpgp_fingerprints(const void *data, size_t len, char ***fprs);
/* The fingerprint with spaces dropped and upper-cased, or NULL when it is
 * not 40 or 64 hex digits. */
char *gp_openpgp_normalize(const char *fpr);
/* "EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC", as gpg shows it. */
char *gp_openpgp_pretty(const char *fpr);
