/* The effect door's downloads and archives (src/download.c): the download
 * cache, extraction into place, both streamed in one pass, and background
 * downloads. context.h includes it: stages see the whole door through
 * context.h. */
#pragma once

#include <stddef.h>

#include "gpuprov/fetch.h"

struct gp_ctx;

/* Stops the prefetch thread (what it has not finished stays as .part files)
 * and frees the context's fetcher (see fetch_opts); idempotent. */
void gp_ctx_close_fetcher(struct gp_ctx *c);
/* Starts downloading the announced artifacts in the background (the engine
 * calls it after the stages' prefetch hooks, never in dry-run or offline).
 * Returns the number of artifacts it fetches; a failure to start is logged
 * and not an error (each download then happens when its stage needs it). */
size_t gp_ctx_prefetch_start(struct gp_ctx *c);

/* Makes an artifact available in the download cache (fetching it, or
 * finding it there) and sets *cache_path (free it) to its in-root path. In
 * dry-run it records the URL, size, sha256 and whether the cache has it
 * already (never the network); *cache_path is where it would be. */
int gp_effect_download(struct gp_ctx *c, const struct gp_fetch_artifact *a,
                       char **cache_path);
/* gp_effect_download, then the tarball extracted into dest (a directory in
 * the root, replaced as a whole when it exists) after the archive's sha256
 * matched; flags are GP_ARCHIVE_* (archive.h). Every regular file installed
 * is journaled with its sha256 for the current stage. Two plan entries
 * (the download, then the destination and the files under it it would
 * replace). Streaming when the artifact is not cached yet: the archive is
 * extracted while it downloads (download -> sha256 -> decompress ->
 * staging in one pass, memory bounded whatever its size), the staging
 * directory is renamed into place only after the archive's sha256 matched,
 * and the verified download still ends up in the cache. If the stream
 * breaks (the download starts over, or the extraction fails), the complete
 * verified download is extracted instead. A download already done or
 * cached is extracted from the cache file. */
int gp_effect_download_extract(struct gp_ctx *c, const struct gp_fetch_artifact *a,
                               const char *dest, unsigned flags);
/* url after --mirror rewriting (*out, free it), for URLs that a tool in the
 * root fetches from itself (pip's index, conda's channel alias). Touches
 * nothing. 0, or -1 with c->err set (a bad --ca-file). */
int gp_ctx_rewrite_url(struct gp_ctx *c, const char *url, char **out);
/* Announces a download a later step of this run will make (stage prefetch
 * hooks); the artifact is copied. Not an effect: gp_effect_download still
 * makes the artifact available, sooner when it was announced: it waits for
 * the background download of the artifact with the same sha256 and reports
 * its failure, if any, as its own. Ignored once the downloads started. */
void gp_prefetch_add(struct gp_ctx *c, const struct gp_fetch_artifact *a);
