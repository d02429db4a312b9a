/* libcurl, libarchive and libsqlite3 loaded on first use.
 *
 * src/sys/lazylib.c defines the functions of those libraries that gpuprov
 * calls; each opens its library (dlopen, by soname) the first time one of
 * them is called and forwards to it. The binary does not link them
 * (-Wl,--as-needed in the Makefile), so a run that downloads, extracts
 * and reads no rpm database (a no-op install, plan, verify, status) maps
 * none of them nor the forty libraries they pull in. A library that cannot
 * be opened makes its first function fail as the library itself would
 * without memory (curl_easy_init, archive_read_new: NULL). */
#ifndef GPUPROV_LAZYLIB_H
#define GPUPROV_LAZYLIB_H

#include <stdbool.h>

/* Has this process opened the library (soname, e.g. "libcurl.so.4")? */
bool gp_lazylib_loaded(const char *soname);

#endif
