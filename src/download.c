/* The effect door's downloads and archives (download.h): artifacts fetched
 * into the download cache, tarballs extracted into place, the two streamed in
 * one pass, and the background downloads that stages announce. Like the rest
 * of the door (context.c) each effect records its plan entry first and, in
 * plan mode, stops there. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuprov/archive.h"
#include "gpuprov/context.h"
#include "gpuprov/json.h"
#include "gpuprov/prefetch.h"

void gp_ctx_close_fetcher(struct gp_ctx *c)
{
	gp_prefetch_free(c->prefetch);
	c->prefetch = NULL;
	gp_strv_free(c->uncached);
	c->uncached = NULL;
	gp_fetcher_free(c->fetcher);
	c->fetcher = NULL;
}

static bool allow_http(const struct gp_ctx *c)
{
	return c->profile && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
	                         c->profile->doc, "allow_insecure_http"));
}

/* The options of every fetcher of the run, the main one and the background
 * thread's: the context's (their progress callback, which the engine
 * installed, is thread-safe), with the profile's allow_insecure_http. */
static struct gp_fetch_opts fetch_opts(struct gp_ctx *c)
{
	struct gp_fetch_opts o = c->fetch_opts;
	o.allow_http = allow_http(c);
	return o;
}

static int get_fetcher(struct gp_ctx *c)
{
	if (c->fetcher)
		return 0;
	struct gp_fetch_opts o = fetch_opts(c);
	if (gp_fetcher_new(&c->root, &o, &c->fetcher, c->err) < 0)
		return -1;
	return 0;
}

/* The DOWNLOAD plan entry, after the checks every run makes (a sha256,
 * offline and not cached); NULL with c->err set when they fail. */
static struct gp_effect *plan_download(struct gp_ctx *c,
                                       const struct gp_fetch_artifact *a)
{
	if (get_fetcher(c) < 0)
		return NULL;
	if (!a->sha256) {
		gp_fail(c->err, GP_EFAILED,
		        "%s: %s has no sha256; gpuprov downloads nothing it cannot "
		        "verify",
		        gp_ctx_stage_name(c), a->name ? a->name : a->url);
		return NULL;
	}
	struct gp_effect *e = gp_ctx_add_effect(c, GP_EFFECT_DOWNLOAD);
	e->url = gp_fetch_rewrite_url(c->fetcher, a->url);
	e->sha256 = gp_xstrdup(a->sha256);
	e->size = a->size;
	e->path = gp_fetch_cache_path(c->fetcher, a->sha256);
	/* For tests (tests/e2e/cudnn.bats): let this run's background download
	 * finish before the real pass plans it, the order a slow earlier stage
	 * gives, so that the case below is reproducible. */
	struct gp_fetch_result waited = { 0 };
	if (c->mode == GP_MODE_APPLY && getenv("GPUPROV_TEST_PREFETCH_FIRST") &&
	    gp_prefetch_wait(c->prefetch, a->sha256, &waited))
		gp_fetch_result_clear(&waited);
	/* As the cache was when this run first planned it: the plan said so,
	 * and the run's record must say what the plan said (a background
	 * download of this run may have filled the cache since). */
	e->cached = !gp_strv_contains(c->uncached, a->sha256) &&
	            gp_fetch_is_cached(c->fetcher, a);
	if (!e->cached && !gp_strv_contains(c->uncached, a->sha256))
		gp_strv_push(&c->uncached, a->sha256);
	/* Offline and missing: fail in the plan pass already, before any change. */
	if (c->fetch_opts.offline && !e->cached && strncmp(e->url, "file://", 7) != 0) {
		gp_fail(c->err, GP_EFAILED,
		        "%s: offline, and %s (%s, sha256 %s) is not in the cache %s",
		        gp_ctx_stage_name(c), a->name ? a->name : a->url, e->url,
		        a->sha256,
		        c->fetch_opts.cache_dir ? c->fetch_opts.cache_dir
		                                : GP_FETCH_DEFAULT_CACHE);
		return NULL;
	}
	return e;
}

/* A download's failure, as the stage's error. */
static int download_failed(struct gp_ctx *c, struct gp_fetch_result *res)
{
	gp_log(c, "download failed: %s", res->msg);
	gp_fail(c->err, c->err->code ? c->err->code : GP_EFAILED, "%s: %s",
	        gp_ctx_stage_name(c), res->msg);
	gp_fetch_result_clear(res);
	return -1;
}

/* The real download of the planned e: from the background download when
 * there is one, else in this thread. */
static int download_real(struct gp_ctx *c, const struct gp_effect *e,
                         const struct gp_fetch_artifact *a, char **cache_path)
{
	struct gp_fetch_result res = { 0 };
	if (gp_prefetch_wait(c->prefetch, a->sha256, &res)) {
		gp_log(c, "download %s (sha256 %s): fetched in the background", e->url,
		       a->sha256);
		c->err->code = 0; /* a failure is this one's */
	} else {
		gp_log(c, "download %s (sha256 %s)%s", e->url, a->sha256,
		       e->cached ? ": in the cache" : "");
		gp_fetch_one(c->fetcher, a, &res, c->err);
	}
	if (res.status < 0)
		return download_failed(c, &res);
	gp_log(c, "%s %s: %llu bytes, sha256 %s",
	       res.from_cache ? "cached" : "downloaded", res.path,
	       (unsigned long long)res.size, res.sha256);
	*cache_path = TAKE_PTR(res.path);
	gp_fetch_result_clear(&res);
	return 0;
}

int gp_effect_download(struct gp_ctx *c, const struct gp_fetch_artifact *a,
                       char **cache_path)
{
	*cache_path = NULL;
	if (gp_ctx_door_open(c, "gp_effect_download") < 0)
		return -1;
	struct gp_effect *e = plan_download(c, a);
	if (!e)
		return -1;
	if (c->mode == GP_MODE_PLAN) {
		*cache_path = gp_xstrdup(e->path);
		return 0;
	}
	return download_real(c, e, a, cache_path);
}

/* The sha256s the archive layer computed while writing, by path relative
 * to the destination (a later entry for the same path wins). */
struct written {
	cJSON *by_rel;
	size_t dest_len;
};

static void on_file_written(void *data, const char *rel, const char *sha256)
{
	struct written *w = data;
	cJSON_DeleteItemFromObjectCaseSensitive(w->by_rel, rel);
	cJSON_AddItemToObject(w->by_rel, rel,
	                      sha256 ? cJSON_CreateString(sha256) : cJSON_CreateNull());
}

/* Journals a regular file under an extracted tree, with the sha256 taken
 * while it was written when there is one, else read now. */
static void journal_file(struct gp_ctx *c, const char *path, const struct stat *st,
                         void *data)
{
	const struct written *w = data;
	if (!S_ISREG(st->st_mode))
		return;
	const char *known = gp_json_string(w->by_rel, path + w->dest_len + 1, NULL);
	char sha[65];
	if (known)
		snprintf(sha, sizeof sha, "%s", known);
	else if (gp_root_sha256_file(&c->root, path, sha) < 0)
		return;
	gp_journal_record_file(&c->journal, path, sha, gp_ctx_stage_name(c), NULL);
	gp_ctx_record_fingerprint(c, path);
}

/* The EXTRACT plan entry: destination and what it replaces. */
static void plan_extract(struct gp_ctx *c, const char *archive_path, const char *sha256,
                         const char *dest)
{
	struct gp_effect *e = gp_ctx_add_effect(c, GP_EFFECT_EXTRACT);
	e->source = gp_xstrdup(archive_path);
	e->sha256 = gp_xstrdup(sha256);
	e->path = gp_xstrdup(dest);
	struct stat st;
	e->old_exists = gp_root_lstat(&c->root, dest, &st) == 0;
	if (e->old_exists) {
		e->replaces = gp_xcalloc(1, sizeof(char *));
		gp_ctx_walk(c, dest, gp_ctx_collect_path, &e->replaces);
	}
}

/* After an extraction: the error, or the log line and the journal. */
static int extracted(struct gp_ctx *c, const char *what, const char *dest, int rc,
                     const struct gp_archive_result *res, const struct written *w)
{
	if (rc < 0) {
		gp_log(c, "extract failed: %s", res->msg);
		return gp_fail(
		    c->err, GP_EFAILED,
		    "%s: cannot extract %s into %s: %s: %s; nothing was installed "
		    "there",
		    gp_ctx_stage_name(c), what, dest, gp_archive_strerror(rc), res->msg);
	}
	gp_log(c, "extracted %llu entries (%llu bytes) into %s%s%s%s",
	       (unsigned long long)res->entries, (unsigned long long)res->out_bytes, dest,
	       res->replaced ? ", replacing the old one" : "",
	       res->leftover[0] ? "; the old directory could not be removed: " : "",
	       res->leftover);
	gp_journal_forget_under(&c->journal, dest);
	gp_ctx_walk(c, dest, journal_file, (void *)w);
	return gp_ctx_save_journal(c);
}

static int extract_cached(struct gp_ctx *c, const char *archive_path, const char *sha256,
                          const char *dest, unsigned flags)
{
	_cleanup_free_ char *made = gp_ctx_missing_dir(c, dest);
	if (gp_ctx_record_dir(c, made) < 0 || gp_ctx_make_parent(c, dest) < 0)
		return -1;
	_cleanup_free_ char *host = gp_root_host_path(&c->root, archive_path);
	struct written w = { .by_rel = cJSON_CreateObject(), .dest_len = strlen(dest) };
	const struct gp_archive_opts opts = { .sha256 = sha256,
		                              .flags = flags,
		                              .on_file = on_file_written,
		                              .on_file_data = &w };
	struct gp_archive_result res;
	gp_log(c, "extract %s into %s", archive_path, dest);
	int rc = gp_archive_extract_file(&c->root, dest, host, &opts, &res);
	rc = extracted(c, archive_path, dest, rc, &res, &w);
	cJSON_Delete(w.by_rel);
	return rc;
}

/* Extracts while pf downloads: the archive layer hashes what it reads and
 * renames into place only once it matched; the reader ends only after the
 * download's own check. When the stream breaks (the download started over,
 * or the archive failed on bytes that may not be the file's), the verified
 * download is extracted once it is complete. */
static int stream_extract(struct gp_ctx *c, struct gp_prefetch *pf,
                          const struct gp_effect *dl, const char *dest, unsigned flags)
{
	_cleanup_free_ char *made = gp_ctx_missing_dir(c, dest);
	if (gp_ctx_record_dir(c, made) < 0 || gp_ctx_make_parent(c, dest) < 0)
		return -1;
	struct gp_prefetch_reader *r = gp_prefetch_reader_new(pf, dl->sha256);
	struct written w = { .by_rel = cJSON_CreateObject(), .dest_len = strlen(dest) };
	const struct gp_archive_opts opts = { .sha256 = dl->sha256,
		                              .flags = flags,
		                              .on_file = on_file_written,
		                              .on_file_data = &w };
	struct gp_archive_result ares;
	gp_log(c, "extract %s into %s while it downloads", dl->url, dest);
	int rc = gp_archive_extract(&c->root, dest, gp_prefetch_read, r, &opts, &ares);
	bool restarted = gp_prefetch_reader_restarted(r);
	gp_prefetch_reader_free(r);
	struct gp_fetch_result res = { 0 };
	gp_prefetch_wait(pf, dl->sha256, &res);
	c->err->code = 0;
	if (res.status < 0) {
		cJSON_Delete(w.by_rel);
		return download_failed(c, &res);
	}
	gp_log(c, "downloaded %s: %llu bytes, sha256 %s", res.path,
	       (unsigned long long)res.size, res.sha256);
	gp_fetch_result_clear(&res);
	if (rc == 0) {
		rc = extracted(c, dl->url, dest, rc, &ares, &w);
		cJSON_Delete(w.by_rel);
		return rc;
	}
	cJSON_Delete(w.by_rel);
	gp_log(c,
	       "extracting while downloading failed (%s); extracting the verified "
	       "download instead",
	       restarted ? "the download started over" : ares.msg);
	return extract_cached(c, dl->path, dl->sha256, dest, flags);
}

int gp_effect_download_extract(struct gp_ctx *c, const struct gp_fetch_artifact *a,
                               const char *dest, unsigned flags)
{
	if (gp_ctx_door_open(c, "gp_effect_download_extract") < 0)
		return -1;
	struct gp_effect *dl = plan_download(c, a);
	if (!dl)
		return -1;
	bool cached = dl->cached;
	plan_extract(c, dl->path, a->sha256, dest);
	if (c->mode == GP_MODE_PLAN)
		return 0;
	/* plan_extract may have moved the plan's effects array. */
	dl = &c->stage->effects[c->stage->n_effects - 2];
	struct gp_prefetch *own = NULL;
	struct gp_prefetch *pf = c->prefetch;
	if (!cached && !gp_prefetch_has(pf, a->sha256)) {
		gp_prefetch_list_add(&own, a);
		struct gp_fetch_opts o = fetch_opts(c);
		struct gp_err err = { 0 };
		if (gp_prefetch_start(own, &c->root, &o, &err) < 0)
			gp_log(c, "cannot download in the background: %s", err.msg);
		pf = own;
	}
	int rc;
	if (!cached && gp_prefetch_has(pf, a->sha256) &&
	    !gp_prefetch_done(pf, a->sha256)) {
		rc = stream_extract(c, pf, dl, dest, flags);
	} else {
		/* In the cache already, or the download is over: extract the
		 * verified file (hashed before the decoder sees a byte). */
		_cleanup_free_ char *path = NULL;
		rc = download_real(c, dl, a, &path);
		if (rc == 0)
			rc = extract_cached(c, path, a->sha256, dest, flags);
	}
	gp_prefetch_free(own);
	return rc;
}

int gp_ctx_rewrite_url(struct gp_ctx *c, const char *url, char **out)
{
	*out = NULL;
	if (get_fetcher(c) < 0)
		return -1;
	*out = gp_fetch_rewrite_url(c->fetcher, url);
	return 0;
}

void gp_prefetch_add(struct gp_ctx *c, const struct gp_fetch_artifact *a)
{
	if (c->mode != GP_MODE_APPLY)
		return;
	gp_prefetch_list_add(&c->prefetch, a);
}

size_t gp_ctx_prefetch_start(struct gp_ctx *c)
{
	size_t n = gp_prefetch_count(c->prefetch);
	if (!n || c->mode != GP_MODE_APPLY || c->fetch_opts.offline)
		return 0;
	/* The main fetcher first: the thread's is made from the same options,
	 * so options it refuses are logged once, here. */
	if (get_fetcher(c) < 0) {
		gp_log(c, "no background downloads: %s", c->err->msg);
		return 0;
	}
	struct gp_fetch_opts o = fetch_opts(c);
	struct gp_err err = { 0 };
	if (gp_prefetch_start(c->prefetch, &c->root, &o, &err) < 0) {
		gp_log(c, "no background downloads: %s", err.msg);
		return 0;
	}
	_cleanup_free_ char *names = gp_prefetch_names(c->prefetch);
	gp_log(c, "downloading in the background: %s", names);
	return n;
}
