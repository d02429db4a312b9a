/* The libcurl, libarchive and libsqlite3 functions gpuprov calls, each
 * opening its library on first use (include/gpuprov/lazylib.h says why).
 * Linked at start-up, libcurl and libarchive bring some forty libraries
 * (TLS, Kerberos, LDAP, ICU, libstdc++) whose mapping and relocation cost
 * a no-op run most of its time and memory (tests/bench/noop.sh).
 *
 * The forwarders keep the libraries' own prototypes (their headers are
 * included), so a caller cannot tell. The handles and the resolved
 * functions are published with atomics: the prefetch thread downloads
 * (src/prefetch.c) while the main thread may extract. */
#define CURL_DISABLE_TYPECHECK /* curl.h's checking macros would rename ours */
#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/lazylib.h"

struct lazylib {
	const char *soname;
	void *handle;
	bool failed;
};

static struct lazylib curl_lib = { .soname = "libcurl.so.4" };
static struct lazylib archive_lib = { .soname = "libarchive.so.13" };
static struct lazylib sqlite_lib = { .soname = "libsqlite3.so.0" };
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

/* The library's handle, opened on the first call; NULL when it cannot be. */
static void *lib_handle(struct lazylib *l)
{
	void *h = __atomic_load_n(&l->handle, __ATOMIC_ACQUIRE);
	if (h)
		return h;
	pthread_mutex_lock(&open_lock);
	h = l->handle;
	if (!h && !l->failed) {
		h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
		l->failed = !h;
		__atomic_store_n(&l->handle, h, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&open_lock);
	return h;
}

/* A function of a library that opened but lacks it, or one called with
 * an object only the library could have made while it cannot be opened:
 * an impossible state, like running out of memory (util.c aborts too). */
static void broken(const struct lazylib *l, const char *name)
{
	fprintf(stderr, "gpuprov: %s: cannot use %s: %s\n", l->soname, name, dlerror());
	abort();
}

/* The library's function name, resolved once into *slot; NULL when the
 * library cannot be opened and may_fail, else it aborts. */
static void *resolve(struct lazylib *l, void **slot, const char *name, bool may_fail)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (f)
		return f;
	void *h = lib_handle(l);
	if (!h) {
		if (may_fail)
			return NULL;
		broken(l, name);
	}
	f = dlsym(h, name);
	if (!f)
		broken(l, name);
	__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	return f;
}

/* The function pointer of type ret (*)params for name in lib. */
#define LAZY_FN(lib, ret, name, params, may_fail)                                        \
	({                                                                               \
		static void *slot_;                                                      \
		(ret(*) params) resolve(&(lib), &slot_, #name, may_fail);                \
	})

/* A forwarder that the library must be open for (an object of it in hand). */
#define FORWARD(lib, ret, name, params, args)                                            \
	ret name params                                                                  \
	{                                                                                \
		return LAZY_FN(lib, ret, name, params, false) args;                      \
	}

bool gp_lazylib_loaded(const char *soname)
{
	const struct lazylib *libs[] = { &curl_lib, &archive_lib, &sqlite_lib };
	for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
		if (strcmp(libs[i]->soname, soname) == 0)
			return __atomic_load_n(&libs[i]->handle, __ATOMIC_ACQUIRE) !=
			       NULL;
	return false;
}

/* --- libcurl ------------------------------------------------------------ */

CURLcode curl_global_init(long flags)
{
	CURLcode (*fn)(long) = LAZY_FN(curl_lib, CURLcode, curl_global_init, (long),
	                               true);
	return fn ? fn(flags) : CURLE_FAILED_INIT;
}

CURL *curl_easy_init(void)
{
	CURL *(*fn)(void) = LAZY_FN(curl_lib, CURL *, curl_easy_init, (void), true);
	return fn ? fn() : NULL;
}

CURLM *curl_multi_init(void)
{
	CURLM *(*fn)(void) = LAZY_FN(curl_lib, CURLM *, curl_multi_init, (void), true);
	return fn ? fn() : NULL;
}

const char *curl_easy_strerror(CURLcode code)
{
	const char *(*fn)(CURLcode) = LAZY_FN(curl_lib, const char *, curl_easy_strerror,
	                                      (CURLcode), true);
	return fn ? fn(code) : "libcurl.so.4 cannot be loaded";
}

void curl_easy_cleanup(CURL *h)
{
	if (h)
		LAZY_FN(curl_lib, void, curl_easy_cleanup, (CURL *), false)(h);
}

/* The one argument after the option, read as curl reads it: its type
 * follows from the option's number (CURLOPTTYPE_* in curl.h). */
CURLcode curl_easy_setopt(CURL *h, CURLoption opt, ...)
{
	CURLcode (*fn)(CURL *, CURLoption, ...) = LAZY_FN(
	    curl_lib, CURLcode, curl_easy_setopt, (CURL *, CURLoption, ...), false);
	va_list ap;
	va_start(ap, opt);
	CURLcode rc;
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		rc = fn(h, opt, va_arg(ap, long));
	else if (opt < CURLOPTTYPE_FUNCTIONPOINT || opt >= CURLOPTTYPE_BLOB)
		rc = fn(h, opt, va_arg(ap, void *));
	else if (opt < CURLOPTTYPE_OFF_T)
		rc = fn(h, opt, va_arg(ap, void (*)(void)));
	else
		rc = fn(h, opt, va_arg(ap, curl_off_t));
	va_end(ap);
	return rc;
}

/* Every CURLINFO takes a pointer to where the answer goes. */
CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
	CURLcode (*fn)(CURL *, CURLINFO, ...) = LAZY_FN(
	    curl_lib, CURLcode, curl_easy_getinfo, (CURL *, CURLINFO, ...), false);
	va_list ap;
	va_start(ap, info);
	CURLcode rc = fn(h, info, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

CURLMcode curl_multi_cleanup(CURLM *m)
{
	if (!m)
		return CURLM_OK;
	return LAZY_FN(curl_lib, CURLMcode, curl_multi_cleanup, (CURLM *), false)(m);
}

FORWARD(curl_lib, CURLMcode, curl_multi_add_handle, (CURLM * m, CURL *h), (m, h))
FORWARD(curl_lib, CURLMcode, curl_multi_remove_handle, (CURLM * m, CURL *h), (m, h))
FORWARD(curl_lib, CURLMsg *, curl_multi_info_read, (CURLM * m, int *n), (m, n))
FORWARD(curl_lib, CURLMcode, curl_multi_perform, (CURLM * m, int *running), (m, running))
FORWARD(curl_lib, CURLMcode, curl_multi_poll,
        (CURLM * m, struct curl_waitfd *fds, unsigned int n, int ms, int *ret),
        (m, fds, n, ms, ret))
FORWARD(curl_lib, CURLMcode, curl_multi_wakeup, (CURLM * m), (m))

/* --- libarchive --------------------------------------------------------- */

struct archive *archive_read_new(void)
{
	struct archive *(*fn)(void) = LAZY_FN(archive_lib, struct archive *,
	                                      archive_read_new, (void), true);
	return fn ? fn() : NULL;
}

int archive_read_free(struct archive *a)
{
	if (!a)
		return ARCHIVE_OK;
	return LAZY_FN(archive_lib, int, archive_read_free, (struct archive *), false)(a);
}

/* Formatted here: a va_list cannot be handed on to a variadic function. */
void archive_set_error(struct archive *a, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	LAZY_FN(archive_lib, void, archive_set_error,
	        (struct archive *, int, const char *, ...), false)
	(a, err, "%s", msg);
}

FORWARD(archive_lib, int, archive_errno, (struct archive * a), (a))
FORWARD(archive_lib, const char *, archive_error_string, (struct archive * a), (a))
FORWARD(archive_lib, int, archive_filter_code, (struct archive * a, int n), (a, n))
FORWARD(archive_lib, int, archive_filter_count, (struct archive * a), (a))
FORWARD(archive_lib, int, archive_format, (struct archive * a), (a))
FORWARD(archive_lib, la_ssize_t, archive_read_data,
        (struct archive * a, void *buf, size_t len), (a, buf, len))
FORWARD(archive_lib, int, archive_read_data_block,
        (struct archive * a, const void **buf, size_t *len, la_int64_t *off),
        (a, buf, len, off))
FORWARD(archive_lib, int, archive_read_next_header,
        (struct archive * a, struct archive_entry **e), (a, e))
FORWARD(archive_lib, int, archive_read_open,
        (struct archive * a, void *data, archive_open_callback *open,
         archive_read_callback *read, archive_close_callback *close),
        (a, data, open, read, close))
FORWARD(archive_lib, int, archive_read_open_memory,
        (struct archive * a, const void *buf, size_t len), (a, buf, len))
FORWARD(archive_lib, int, archive_read_support_filter_gzip, (struct archive * a), (a))
FORWARD(archive_lib, int, archive_read_support_filter_xz, (struct archive * a), (a))
FORWARD(archive_lib, int, archive_read_support_filter_zstd, (struct archive * a), (a))
FORWARD(archive_lib, int, archive_read_support_format_ar, (struct archive * a), (a))
FORWARD(archive_lib, int, archive_read_support_format_tar, (struct archive * a), (a))
FORWARD(archive_lib, __LA_MODE_T, archive_entry_filetype, (struct archive_entry * e), (e))
FORWARD(archive_lib, const char *, archive_entry_hardlink, (struct archive_entry * e),
        (e))
FORWARD(archive_lib, time_t, archive_entry_mtime, (struct archive_entry * e), (e))
FORWARD(archive_lib, long, archive_entry_mtime_nsec, (struct archive_entry * e), (e))
FORWARD(archive_lib, const char *, archive_entry_pathname, (struct archive_entry * e),
        (e))
FORWARD(archive_lib, __LA_MODE_T, archive_entry_perm, (struct archive_entry * e), (e))
FORWARD(archive_lib, la_int64_t, archive_entry_size, (struct archive_entry * e), (e))
FORWARD(archive_lib, int, archive_entry_size_is_set, (struct archive_entry * e), (e))
FORWARD(archive_lib, const char *, archive_entry_symlink, (struct archive_entry * e), (e))

/* --- libsqlite3 (the rpm database) -------------------------------------- */

int sqlite3_open_v2(const char *name, sqlite3 **db, int flags, const char *vfs)
{
	int (*fn)(const char *, sqlite3 **, int, const char *) = LAZY_FN(
	    sqlite_lib, int, sqlite3_open_v2,
	    (const char *, sqlite3 **, int, const char *), true);
	if (!fn) {
		*db = NULL;
		return SQLITE_CANTOPEN;
	}
	return fn(name, db, flags, vfs);
}

int sqlite3_close(sqlite3 *db)
{
	if (!db)
		return SQLITE_OK;
	return LAZY_FN(sqlite_lib, int, sqlite3_close, (sqlite3 *), false)(db);
}

FORWARD(sqlite_lib, int, sqlite3_busy_timeout, (sqlite3 * db, int ms), (db, ms))
FORWARD(sqlite_lib, const void *, sqlite3_column_blob, (sqlite3_stmt * s, int col),
        (s, col))
FORWARD(sqlite_lib, int, sqlite3_column_bytes, (sqlite3_stmt * s, int col), (s, col))
FORWARD(sqlite_lib, int, sqlite3_finalize, (sqlite3_stmt * s), (s))
FORWARD(sqlite_lib, int, sqlite3_prepare_v2,
        (sqlite3 * db, const char *sql, int n, sqlite3_stmt **s, const char **tail),
        (db, sql, n, s, tail))
FORWARD(sqlite_lib, int, sqlite3_step, (sqlite3_stmt * s), (s))
