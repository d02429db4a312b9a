/* The keyring file inside a cuda-keyring-style .deb (debfile.c), read in
 * memory with libarchive. Pure: no I/O, no printing. */
#pragma once

#include <stddef.h>

/* In a Debian package (ar archive; data.tar with gz, xz or zstd), the first
 * regular file under usr/share/keyrings/ or etc/apt/trusted.gpg.d/ (*.gpg or
 * *.asc): its in-root path ("/usr/share/keyrings/cuda-archive-keyring.gpg")
 * and contents. -ENOENT when there is none, -EINVAL when the data is not a
 * readable package; *msg (static) says why. */
int gp_deb_keyring(const void *deb, size_t len, char **path, char **data, size_t *dlen,
                   const char **msg);
