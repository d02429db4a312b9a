/* The download layer: verified, resumable, parallel downloads into a cache
 * keyed by sha256, over libcurl. Never prints: functions return 0 or a
 * negative code (-errno, or -GP_FETCH_E*) and say what went wrong in a
 * message buffer; progress and retries reach the caller through a callback.
 *
 * The cache is a directory inside the target root (default
 * GP_FETCH_DEFAULT_CACHE). An artifact with sha256 S lives at <cache>/S and
 * only ever appears there after its bytes hashed to S: a download is written
 * to <cache>/S.part (resumed with a Range request after re-hashing the part
 * already there) and renamed once the hash matched. A cache hit is re-hashed
 * and used without touching the network.
 *
 * Policy, which callers cannot weaken:
 * - https only; http:// only with allow_http (a local mirror); file:// for
 *   local bundles (a host path, read by libcurl). Redirects only to https.
 * - TLS peer and host are always verified; ca_file adds nothing but a CA
 *   bundle (CURLOPT_CAINFO) for private mirrors and tests.
 * - A sha256 is required, except for a file:// URL the operator marked
 *   trusted (then the file is hashed as it is copied and cached under that).
 * - Proxies come from the environment (https_proxy, no_proxy, ...), as
 *   libcurl reads them; uppercase HTTP_PROXY is ignored by libcurl by design.
 * - Retries with exponential backoff on timeouts, DNS and connect errors,
 *   partial transfers (curl 5, 6, 7, 16, 18, 28, 52, 55, 56, 92) and HTTP
 *   408/429/500/502/503/504, honouring Retry-After up to a cap; a partial
 *   file is resumed. An attempt that brought at least 1 MiB before failing
 *   does not count against max_attempts, so a big download over a flaky link
 *   is not given up while it advances. Other HTTP errors (403, 404, ...) and
 *   TLS failures are not retried. A stalled transfer is aborted by a low-speed limit (no
 *   total timeout: multi-GB files are fine on slow links).
 * - A server that answers a Range request with 200 restarts the file from
 *   zero in that same response; a 416 to a resume means the part may be
 *   complete, so the local file is hashed. A hash mismatch deletes the file
 *   and downloads it once more; a second mismatch fails naming both hashes.
 * - offline: no network access at all; artifacts missing from the cache
 *   fail at once (file:// still works: it is a local bundle).
 *
 * Not thread-safe per fetcher: use one fetcher from one thread at a time.
 * Honours gp_run_stop_signal (run.h): when set, transfers stop and the
 * remaining artifacts fail with -EINTR; their .part files are kept. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuprov/error.h"
#include "gpuprov/root.h"
#include "gpuprov/util.h"

#define GP_FETCH_DEFAULT_CACHE "/var/cache/gpuprov"

/* Failure kinds are the GP_FETCH_E* codes of error.h, returned negated
 * (-GP_FETCH_EHTTP). Local I/O failures come back as -errno instead. */

/* Rewrites URLs that start with from to start with to instead, e.g.
 * "https://developer.download.nvidia.com/compute" ->
 * "https://mirror.lan/nvidia". from matches only at a path boundary (it ends
 * with '/', or the URL continues with '/', '?', '#' or ends), so
 * "https://a.com" never matches "https://a.com.evil.net/". The longest
 * matching from wins, so the order of the list does not matter. */
struct gp_fetch_mirror {
	const char *from;
	const char *to;
};

/* One file to download. Only borrowed during a call. */
struct gp_fetch_artifact {
	const char *name; /* for messages ("cudnn 9.1.0"); NULL: the URL */
	const char *url; /* https://, http:// (allow_http) or file:// */
	const char *sha256; /* 64 hex digits (any case); NULL only if trusted */
	uint64_t size; /* expected size in bytes; 0: unknown */
	bool trusted; /* a file:// URL the operator trusts without a sha256 */
};

enum gp_fetch_event {
	GP_FETCH_EV_START, /* a transfer attempt begins (each retry too; see attempt) */
	GP_FETCH_EV_PROGRESS, /* bytes arrived (called often: throttle display) */
	GP_FETCH_EV_RETRY, /* an attempt failed; the next starts in retry_in_ms */
	GP_FETCH_EV_DONE, /* finished, one way or another: see status */
};

struct gp_fetch_progress {
	enum gp_fetch_event event;
	size_t index; /* position in gp_fetch_many's array; 0 for gp_fetch_one */
	const struct gp_fetch_artifact *artifact;
	const char *url; /* after mirror rewriting */
	uint64_t done; /* bytes of the file we have, a resumed prefix included */
	uint64_t total; /* the whole file's size; 0: not known yet */
	double rate; /* bytes per second over the current attempt */
	unsigned attempt; /* 1-based */
	unsigned retry_in_ms; /* RETRY: the wait before the next attempt */
	const char *message; /* RETRY: why; DONE: the failure message, or NULL */
	int status; /* DONE: 0 or the negative code */
	bool from_cache; /* DONE: served from the cache without any transfer */
	/* Times the file was started over from zero so far (a server that
	 * ignored a Range, a hash mismatch): bytes read from the .part before
	 * a change of this count are not the file's any more. */
	unsigned restarts;
};

/* Called from inside gp_fetch_one/gp_fetch_many, in the caller's thread.
 * Return nonzero to stop this artifact (it fails with -GP_FETCH_ECANCELED,
 * its .part file is kept for a later resume); the return value of DONE
 * events is ignored. */
typedef int (*gp_fetch_progress_fn)(const struct gp_fetch_progress *p, void *userdata);

/* Zero means "the default" for every number. Strings are copied. */
struct gp_fetch_opts {
	const char *cache_dir; /* absolute, inside the root; NULL: default */
	const char *ca_file; /* host path of a PEM CA bundle; NULL: system CAs */
	const struct gp_fetch_mirror *mirrors;
	size_t n_mirrors;
	bool offline;
	bool allow_http;
	gp_fetch_progress_fn progress;
	void *progress_data;
	unsigned max_attempts; /* per artifact, first try included; default 5 */
	unsigned backoff_ms; /* first retry delay, doubled each time; default 1000 */
	unsigned max_backoff_ms; /* default 60000 */
	unsigned retry_after_max_ms; /* cap on a server's Retry-After; default 60000 */
	long low_speed_limit; /* bytes/s below which ... default 1024 */
	long low_speed_time; /* ... for this many seconds aborts; default 30 */
	long connect_timeout; /* seconds; default 30 */
	unsigned max_parallel; /* gp_fetch_many's concurrent transfers; default 4 */
};

struct gp_fetch_result {
	int status; /* 0 or a negative code, as returned */
	char *path; /* in-root path of the cached file, on success (free it) */
	char sha256[65]; /* the file's sha256 (lowercase), on success */
	uint64_t size; /* bytes, on success */
	bool from_cache; /* a cache hit: no transfer happened */
	unsigned attempts; /* transfers started */
	long http_code; /* the last HTTP status seen, 0 if none */
	int curl_code; /* the last CURLcode, 0 if none */
	char msg[1024]; /* on failure: what, where, what next */
};

struct gp_fetcher;

/* curl_global_init, once (not thread-safe in libcurl): main may call it
 * before starting threads; gp_fetcher_new calls it too. 0 or -ENOMEM. */
int gp_fetch_global_init(void);

/* Creates a fetcher. root is borrowed and must outlive it; nothing is
 * created on disk until a download needs the cache directory. Fails
 * (-EINVAL, message in err with GP_EXIT_USAGE) for a relative cache_dir, a
 * ca_file that cannot be read, or an empty mirror prefix. */
int gp_fetcher_new(const struct gp_root *root, const struct gp_fetch_opts *opts,
                   struct gp_fetcher **out, struct gp_err *err);
void gp_fetcher_free(struct gp_fetcher *f); /* NULL is fine */
static inline void gp_fetcher_freep(struct gp_fetcher **f)
{
	gp_fetcher_free(*f);
}
#define _cleanup_fetcher_ _cleanup_(gp_fetcher_freep)

/* Stops the fetcher's current gp_fetch_many from another thread (the one
 * thread-safe function here): transfers end, and the artifacts not done
 * fail with -GP_FETCH_ECANCELED, their .part files kept. Later calls on
 * this fetcher fail the same way. NULL is fine. */
void gp_fetch_cancel(struct gp_fetcher *f);

/* The URL the fetcher would download for url, after mirror rewriting. */
char *gp_fetch_rewrite_url(const struct gp_fetcher *f, const char *url);

/* The in-root cache path of an artifact with this sha256 (not checked). */
char *gp_fetch_cache_path(const struct gp_fetcher *f, const char *sha256);

/* Is the artifact in the cache, with the right hash? Reads and hashes the
 * cached file (a corrupt one is left alone here). Never uses the network. */
bool gp_fetch_is_cached(const struct gp_fetcher *f, const struct gp_fetch_artifact *a);

/* Downloads one artifact into the cache (or finds it there). Returns
 * res->status; res is always reset first, free it with
 * gp_fetch_result_clear. err (may be NULL) gets the same message with an
 * exit code for the CLI. */
int gp_fetch_one(struct gp_fetcher *f, const struct gp_fetch_artifact *a,
                 struct gp_fetch_result *res, struct gp_err *err);

/* Downloads n artifacts, at most max_parallel at a time through curl multi.
 * res is an array of n results, each reset and filled in on its own: one
 * failure does not stop the others. Two artifacts with the same sha256 are
 * downloaded once. Returns 0 when all succeeded, else the first failure's
 * code, with err (may be NULL) listing every failed artifact; offline, the
 * list is that of the artifacts missing from the cache. */
int gp_fetch_many(struct gp_fetcher *f, const struct gp_fetch_artifact *a, size_t n,
                  struct gp_fetch_result *res, struct gp_err *err);

void gp_fetch_result_clear(struct gp_fetch_result *res);
/* Clears n results. */
void gp_fetch_results_clear(struct gp_fetch_result *res, size_t n);
