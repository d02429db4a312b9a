/* Background downloads: the artifacts stages announce (gp_prefetch_add) are
 * fetched by one thread while earlier stages apply; gp_effect_download of
 * an announced artifact waits for that artifact's result instead of
 * downloading it again.
 *
 * The thread owns its own fetcher (a fetcher is not thread-safe) and runs
 * gp_fetch_many over every announced artifact, one transfer at a time in
 * the order they were listed (the order of the stages that need them: on
 * one link, the file needed first then arrives first; a retry's back-off
 * lets the next one start). Results are handed over per artifact as each one finishes (mutex
 * and condition variable), so a stage never waits for an artifact it does
 * not need. Progress events go to the caller's callback from that thread,
 * with their index moved past GP_PREFETCH_INDEX_BASE so they never share a
 * progress slot with the main thread's downloads; the callback must be
 * thread-safe (gp_progress_callback is). Stop signals are blocked in the
 * thread: they reach the main thread (whose command waits must see them),
 * and the fetch loop sees gp_run_stop_signal and fails what is left with
 * -EINTR. Never prints; the caller logs. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "gpuprov/fetch.h"
#include "gpuprov/root.h"
#include "gpuprov/util.h"

#define GP_PREFETCH_INDEX_BASE 1000000

struct gp_prefetch;

/* Appends a copy of a to the list *pf (created on first use). Artifacts
 * without a valid sha256 are not added (nothing can match them later), nor
 * is one whose sha256 is listed already. Only before gp_prefetch_start. */
void gp_prefetch_list_add(struct gp_prefetch **pf, const struct gp_fetch_artifact *a);
/* How many artifacts are listed (0 for NULL). */
size_t gp_prefetch_count(const struct gp_prefetch *pf);
/* "name1, name2" of the listed artifacts (free it). */
char *gp_prefetch_names(const struct gp_prefetch *pf);

/* Starts the thread: a fetcher made from opts (copied; root is borrowed and
 * must outlive gp_prefetch_free). Returns 0, or a negative errno with err
 * set (nothing runs then, and waits find nothing). */
int gp_prefetch_start(struct gp_prefetch *pf, const struct gp_root *root,
                      const struct gp_fetch_opts *opts, struct gp_err *err);

/* When an artifact with this sha256 was listed and the thread runs: waits
 * until it is done, fills res (status, msg, path, sha256, size, from_cache,
 * attempts; clear it with gp_fetch_result_clear) and returns true.
 * Otherwise returns false and leaves res alone. */
bool gp_prefetch_wait(struct gp_prefetch *pf, const char *sha256,
                      struct gp_fetch_result *res);

/* Is an artifact with this sha256 listed (and the thread started)? Is it
 * done (successfully or not)? Neither waits. */
bool gp_prefetch_has(struct gp_prefetch *pf, const char *sha256);
bool gp_prefetch_done(struct gp_prefetch *pf, const char *sha256);

/* Reading an artifact while the thread downloads it, for streaming into
 * the archive layer: gp_prefetch_read (a gp_archive_read_fn) returns the
 * bytes as they land in <cache>/<sha256>.part, waits (condition variable)
 * for more, and returns 0 only once the download is done and its sha256
 * matched. Bytes read before that are unverified: the consumer must hash
 * what it read (the archive layer does). A resume continues where it was;
 * when the file starts over from zero (a server ignoring Range, a hash
 * mismatch) the reader fails with -ESTALE; a failed download gives -EIO
 * (the download's own result comes from gp_prefetch_wait). NULL when the
 * sha256 is not listed or the thread does not run. */
struct gp_prefetch_reader;
struct gp_prefetch_reader *gp_prefetch_reader_new(struct gp_prefetch *pf,
                                                  const char *sha256);
ssize_t gp_prefetch_read(void *reader, void *buf, size_t len);
/* Did the reader stop because the download started over? */
bool gp_prefetch_reader_restarted(const struct gp_prefetch_reader *r);
void gp_prefetch_reader_free(struct gp_prefetch_reader *r);

/* Stops what is still running (its .part files are kept), joins the thread
 * and frees everything. NULL is fine. */
void gp_prefetch_free(struct gp_prefetch *pf);
