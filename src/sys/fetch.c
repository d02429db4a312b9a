/* The download layer (fetch.h has the policy). Each artifact is a small state
 * machine (struct job) driven by one curl multi loop; gp_fetch_one is
 * gp_fetch_many with one artifact. Bytes go to <cache>/<sha256>.part with pwrite
 * and into a streaming sha256 at the same time, so the hash is known the moment
 * a transfer ends and the rename can follow at once. Ranges are asked for with
 * CURLOPT_RANGE rather than CURLOPT_RESUME_FROM_LARGE: the latter makes libcurl
 * fail (error 33) on a server that answers 200, where we would rather take the
 * whole file from that same response. */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuprov/fetch.h"
#include "gpuprov/sha256.h"
#include "gpuprov/root.h"
#include "gpuprov/run.h"
#include "gpuprov/util.h"

#ifndef GP_VERSION
#define GP_VERSION "dev"
#endif

/* How long the loop sleeps at most, so a stop signal is seen quickly. */
#define LOOP_TICK_MS 200
#define MAX_REDIRECTS 10
/* An attempt that brought this much before failing does not count against
 * max_attempts: a big file over a flaky link is not given up while it advances. */
#define PROGRESS_REFUND (1u << 20)

struct mirror {
	char *from;
	char *to;
};

struct gp_fetcher {
	const struct gp_root *root;
	char *cache_dir;
	char *ca_file;
	struct mirror *mirrors;
	size_t n_mirrors;
	bool offline;
	bool allow_http;
	gp_fetch_progress_fn progress;
	void *progress_data;
	unsigned max_attempts;
	unsigned backoff_ms;
	unsigned max_backoff_ms;
	unsigned retry_after_max_ms;
	unsigned max_parallel;
	long low_speed_limit;
	long low_speed_time;
	long connect_timeout;
	CURLM *multi;
	atomic_bool cancelled; /* gp_fetch_cancel, from another thread */
	int dirfd; /* the cache directory during one gp_fetch_many call, else -1 */
};

enum scheme { SCHEME_HTTPS, SCHEME_HTTP, SCHEME_FILE };
enum job_state { JOB_PENDING, JOB_WAITING, JOB_RUNNING, JOB_DONE };

/* Why our own callbacks stopped a transfer (besides a negative errno). */
enum abort_why { ABORT_NONE, ABORT_CANCEL, ABORT_STOP, ABORT_TOO_BIG, ABORT_BAD_RANGE };

struct job {
	struct gp_fetcher *f;
	const struct gp_fetch_artifact *a;
	struct gp_fetch_result *res;
	size_t index;
	char *url; /* after mirror rewriting */
	char *what; /* "name (url)" for messages */
	enum scheme scheme;
	char sha[65]; /* expected, lowercase; "" for a trusted file:// */
	char *part; /* file name of the .part inside the cache directory */
	int fd; /* the open .part (flocked), or -1 */
	struct gp_sha256 *md; /* sha256 of the first `written` bytes of the .part */
	uint64_t written;
	struct gp_writeback writeback; /* of the .part, for job_commit's fsync */
	uint64_t offset; /* where the current attempt's body starts in the file */
	enum job_state state;
	int64_t start_at_ms; /* JOB_WAITING: when the next attempt may start */
	bool mismatch_retried;
	unsigned restarts; /* see gp_fetch_progress.restarts */
	unsigned tries; /* attempts since the last one that made progress */
	CURL *easy;
	/* The current response. */
	bool body_begun;
	bool discard; /* an error or redirect body: not part of the file */
	int64_t range_start; /* start of its Content-Range, -1 if none */
	char location[512]; /* its Location header, for messages */
	enum abort_why abort_why;
	int abort_errno;
	int64_t attempt_start_ms;
	uint64_t last_reported;
	int64_t last_report_ms;
	char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

/* curl_global_init is not thread-safe and must run once, before any handle. */
static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Is s a sha256 in hex (either case)? */
static bool is_hex64(const char *s)
{
	char norm[65];
	return gp_sha256_normalize(s, norm) == 0;
}

static bool has_scheme(const char *url, const char *scheme)
{
	size_t n = strlen(scheme);
	return strncasecmp(url, scheme, n) == 0 && strncmp(url + n, "://", 3) == 0;
}

/* ---------------------------------------------------------------- fetcher */

int gp_fetch_global_init(void)
{
	pthread_once(&curl_once, curl_init_once);
	return curl_init_rc == CURLE_OK ? 0 : -ENOMEM;
}

/* The fds open now without FD_CLOEXEC, as a NULL-terminated list of numbers
 * (empty when /proc is not mounted). */
static int *open_fds(void)
{
	int *v = gp_xcalloc(1, sizeof *v);
	size_t n = 0;
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		v[0] = -1;
		return v;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		int fd = (int)strtol(de->d_name, NULL, 10); /* names are fd numbers */
		if (de->d_name[0] == '.' || fd == dfd)
			continue;
		int fl = fcntl(fd, F_GETFD);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		v = gp_xrealloc(v, (n + 2) * sizeof *v);
		v[n++] = fd;
	}
	closedir(d);
	v[n] = -1;
	return v;
}

/* curl_multi_init makes a socketpair (for curl_multi_wakeup) without
 * close-on-exec and offers no way to ask for it: mark whatever fds it added. */
static CURLM *multi_init_cloexec(void)
{
	_cleanup_free_ int *before = open_fds();
	CURLM *m = curl_multi_init();
	_cleanup_free_ int *after = open_fds();
	for (int *a = after; *a >= 0; a++) {
		bool old = false;
		for (int *b = before; *b >= 0 && !old; b++)
			old = *a == *b;
		if (!old)
			fcntl(*a, F_SETFD, FD_CLOEXEC);
	}
	return m;
}

int gp_fetcher_new(const struct gp_root *root, const struct gp_fetch_opts *opts,
                   struct gp_fetcher **out, struct gp_err *err)
{
	static const struct gp_fetch_opts none;
	if (!opts)
		opts = &none;
	*out = NULL;
	const char *cache = opts->cache_dir ? opts->cache_dir : GP_FETCH_DEFAULT_CACHE;
	if (cache[0] != '/') {
		gp_fail(err, GP_EOPTION,
		        "cache directory %s: must be an absolute path inside the root",
		        cache);
		return -EINVAL;
	}
	if (opts->ca_file && access(opts->ca_file, R_OK) < 0) {
		int e = errno;
		gp_fail(err, GP_EOPTION, "CA file %s: %s; give a readable PEM bundle",
		        opts->ca_file, strerror(e));
		return -EINVAL;
	}
	for (size_t i = 0; i < opts->n_mirrors; i++) {
		const struct gp_fetch_mirror *m = &opts->mirrors[i];
		if (!m->from || !m->to || !m->from[0] || !m->to[0]) {
			gp_fail(
			    err, GP_EOPTION,
			    "mirror %zu: both FROM and TO must be non-empty URL prefixes",
			    i + 1);
			return -EINVAL;
		}
	}
	if (gp_fetch_global_init() < 0) {
		gp_fail(err, ENOMEM, "libcurl initialisation failed: %s",
		        curl_easy_strerror(curl_init_rc));
		return -ENOMEM;
	}

	struct gp_fetcher *f = gp_xcalloc(1, sizeof *f);
	f->root = root;
	f->dirfd = -1;
	f->cache_dir = gp_xstrdup(cache);
	/* "/var/cache/gpuprov/" and "/var/cache/gpuprov" name the same place. */
	for (size_t n = strlen(f->cache_dir); n > 1 && f->cache_dir[n - 1] == '/'; n--)
		f->cache_dir[n - 1] = '\0';
	f->ca_file = opts->ca_file ? gp_xstrdup(opts->ca_file) : NULL;
	f->n_mirrors = opts->n_mirrors;
	f->mirrors = gp_xcalloc(opts->n_mirrors + 1, sizeof *f->mirrors);
	for (size_t i = 0; i < opts->n_mirrors; i++) {
		f->mirrors[i].from = gp_xstrdup(opts->mirrors[i].from);
		f->mirrors[i].to = gp_xstrdup(opts->mirrors[i].to);
	}
	f->offline = opts->offline;
	f->allow_http = opts->allow_http;
	f->progress = opts->progress;
	f->progress_data = opts->progress_data;
	f->max_attempts = opts->max_attempts ? opts->max_attempts : 5;
	f->backoff_ms = opts->backoff_ms ? opts->backoff_ms : 1000;
	f->max_backoff_ms = opts->max_backoff_ms ? opts->max_backoff_ms : 60000;
	f->retry_after_max_ms = opts->retry_after_max_ms ? opts->retry_after_max_ms
	                                                 : 60000;
	f->max_parallel = opts->max_parallel ? opts->max_parallel : 4;
	f->low_speed_limit = opts->low_speed_limit > 0 ? opts->low_speed_limit : 1024;
	f->low_speed_time = opts->low_speed_time > 0 ? opts->low_speed_time : 30;
	f->connect_timeout = opts->connect_timeout > 0 ? opts->connect_timeout : 30;
	f->multi = multi_init_cloexec();
	if (!f->multi)
		abort();
	*out = f;
	return 0;
}

void gp_fetcher_free(struct gp_fetcher *f)
{
	if (!f)
		return;
	if (f->multi)
		curl_multi_cleanup(f->multi);
	for (size_t i = 0; i < f->n_mirrors; i++) {
		free(f->mirrors[i].from);
		free(f->mirrors[i].to);
	}
	free(f->mirrors);
	free(f->cache_dir);
	free(f->ca_file);
	if (f->dirfd >= 0)
		close(f->dirfd);
	free(f);
}

void gp_fetch_cancel(struct gp_fetcher *f)
{
	if (!f)
		return;
	atomic_store(&f->cancelled, true);
	curl_multi_wakeup(f->multi);
}

char *gp_fetch_rewrite_url(const struct gp_fetcher *f, const char *url)
{
	const struct mirror *best = NULL;
	size_t best_len = 0;
	for (size_t i = 0; i < f->n_mirrors; i++) {
		const struct mirror *m = &f->mirrors[i];
		size_t n = strlen(m->from);
		if (strncmp(url, m->from, n) != 0 || n <= best_len)
			continue;
		/* Only at a path boundary: "https://a.com" must not take
		 * "https://a.com.evil.net/x". */
		char next = url[n];
		if (m->from[n - 1] != '/' && next && !strchr("/?#", next))
			continue;
		best = m;
		best_len = n;
	}
	if (!best)
		return gp_xstrdup(url);
	const char *rest = url + best_len;
	size_t tl = strlen(best->to);
	/* Keep exactly one slash where the two parts meet. */
	if (tl && best->to[tl - 1] == '/' && rest[0] == '/')
		rest++;
	else if (tl && best->to[tl - 1] != '/' && best->from[best_len - 1] == '/' &&
	         rest[0] && rest[0] != '/')
		return gp_xasprintf("%s/%s", best->to, rest);
	return gp_xasprintf("%s%s", best->to, rest);
}

char *gp_fetch_cache_path(const struct gp_fetcher *f, const char *sha256)
{
	_cleanup_free_ char *lower = gp_xstrdup(sha256);
	for (char *p = lower; *p; p++)
		if (*p >= 'A' && *p <= 'F')
			*p = (char)(*p - 'A' + 'a');
	return gp_xasprintf("%s/%s", strcmp(f->cache_dir, "/") ? f->cache_dir : "",
	                    lower);
}

/* Opens the cache directory (creating it if asked) as a real directory fd: the
 * O_PATH kind cannot be fsynced. */
static int open_cache_dir(const struct gp_fetcher *f, bool create)
{
	if (create) {
		int rc = gp_root_mkdir_p(f->root, f->cache_dir, 0755);
		if (rc < 0)
			return rc;
	}
	return gp_root_openat(f->root, f->cache_dir, O_RDONLY | O_DIRECTORY, 0);
}

/* Hashes <dirfd>/<sha> and compares; false when absent, unreadable or wrong
 * (*corrupt says which). *size gets the file's size. */
static bool cache_entry_ok(int dirfd, const char *sha, bool *corrupt, uint64_t *size)
{
	*corrupt = false;
	_cleanup_close_ int fd = openat(dirfd, sha,
	                                O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0)
		return false;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		*corrupt = true;
		return false;
	}
	struct gp_sha256 *md = gp_sha256_new();
	char hex[65];
	int rc = gp_sha256_update_fd(md, fd, 0, size);
	gp_sha256_peek_hex(md, hex);
	gp_sha256_free(md);
	if (rc < 0 || strcmp(hex, sha) != 0) {
		*corrupt = true;
		return false;
	}
	return true;
}

bool gp_fetch_is_cached(const struct gp_fetcher *f, const struct gp_fetch_artifact *a)
{
	if (!a->sha256 || !is_hex64(a->sha256))
		return false;
	_cleanup_free_ char *path = gp_fetch_cache_path(f, a->sha256);
	const char *sha = strrchr(path, '/') + 1;
	_cleanup_close_ int dirfd = open_cache_dir(f, false);
	bool corrupt;
	uint64_t size;
	return dirfd >= 0 && cache_entry_ok(dirfd, sha, &corrupt, &size);
}

void gp_fetch_result_clear(struct gp_fetch_result *res)
{
	if (!res)
		return;
	free(res->path);
	memset(res, 0, sizeof *res);
}

void gp_fetch_results_clear(struct gp_fetch_result *res, size_t n)
{
	for (size_t i = 0; res && i < n; i++)
		gp_fetch_result_clear(&res[i]);
}

/* -------------------------------------------------------------------- jobs */

/* Tells the caller; true when it asked to stop this artifact. */
static bool emit(struct job *j, enum gp_fetch_event ev, unsigned retry_in_ms,
                 const char *message)
{
	struct gp_fetcher *f = j->f;
	if (!f->progress)
		return false;
	int64_t t = gp_monotonic_ms() - j->attempt_start_ms;
	uint64_t got = j->written > j->offset ? j->written - j->offset : 0;
	struct gp_fetch_progress p = {
		.event = ev,
		.index = j->index,
		.artifact = j->a,
		.url = j->url,
		.done = j->written,
		.total = j->a->size,
		.rate = t > 0 ? (double)got * 1000.0 / (double)t : 0.0,
		.attempt = j->res->attempts,
		.retry_in_ms = retry_in_ms,
		.restarts = j->restarts,
		.message = message,
		.status = j->res->status,
		.from_cache = j->res->from_cache,
	};
	if (ev == GP_FETCH_EV_DONE && j->res->status == 0)
		p.done = p.total = j->res->size;
	return f->progress(&p, f->progress_data) != 0 && ev != GP_FETCH_EV_DONE;
}

static void job_fail(struct job *j, int code, const char *fmt, ...) _printf_(3, 4);

static void job_cancelled(struct job *j)
{
	job_fail(j, -GP_FETCH_ECANCELED,
	         "%s: download cancelled; a partial file is kept and resumes next time",
	         j->what);
}

static void job_close(struct job *j)
{
	if (j->fd >= 0)
		close(j->fd);
	j->fd = -1;
	gp_sha256_free(j->md);
	j->md = NULL;
	j->written = 0;
	j->writeback.started = 0;
}

static void job_fail(struct job *j, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(j->res->msg, sizeof j->res->msg, fmt, ap);
	va_end(ap);
	j->res->status = code;
	j->state = JOB_DONE;
	job_close(j);
	emit(j, GP_FETCH_EV_DONE, 0, j->res->msg);
}

static void job_succeed(struct job *j, const char *sha, uint64_t size, bool from_cache)
{
	struct gp_fetch_result *r = j->res;
	r->status = 0;
	r->msg[0] = '\0';
	snprintf(r->sha256, sizeof r->sha256, "%s", sha);
	free(r->path);
	r->path = gp_fetch_cache_path(j->f, sha);
	r->size = size;
	r->from_cache = from_cache;
	j->state = JOB_DONE;
	job_close(j);
	emit(j, GP_FETCH_EV_DONE, 0, NULL);
}

/* Validates the artifact and works out the URL; false when it failed. */
static bool job_init(struct job *j)
{
	const struct gp_fetch_artifact *a = j->a;
	struct gp_fetcher *f = j->f;
	j->fd = -1;
	j->range_start = -1;
	if (!a->url || !a->url[0]) {
		j->url = gp_xstrdup("");
		j->what = gp_xstrdup(a->name ? a->name : "(unnamed artifact)");
		job_fail(j, -GP_FETCH_EINVAL, "%s: no URL given", j->what);
		return false;
	}
	j->url = gp_fetch_rewrite_url(f, a->url);
	if (strcmp(j->url, a->url) != 0)
		j->what = a->name ? gp_xasprintf("%s (%s, mirror of %s)", a->name, j->url,
		                                 a->url)
		                  : gp_xasprintf("%s (mirror of %s)", j->url, a->url);
	else
		j->what = a->name ? gp_xasprintf("%s (%s)", a->name, j->url)
		                  : gp_xstrdup(j->url);

	if (has_scheme(j->url, "https")) {
		j->scheme = SCHEME_HTTPS;
	} else if (has_scheme(j->url, "http")) {
		j->scheme = SCHEME_HTTP;
		if (!f->allow_http) {
			job_fail(
			    j, -GP_FETCH_EREFUSED,
			    "%s: plain http:// is refused (no TLS); use an https:// URL, "
			    "or allow http explicitly for a trusted local mirror",
			    j->what);
			return false;
		}
	} else if (has_scheme(j->url, "file")) {
		j->scheme = SCHEME_FILE;
	} else {
		job_fail(
		    j, -GP_FETCH_EINVAL,
		    "%s: unsupported URL scheme; use https://, http:// (local mirror) "
		    "or file://",
		    j->what);
		return false;
	}

	if (a->sha256) {
		if (!is_hex64(a->sha256)) {
			job_fail(j, -GP_FETCH_EINVAL,
			         "%s: sha256 \"%s\" is not 64 hexadecimal digits",
			         j->what, a->sha256);
			return false;
		}
		for (int i = 0; i < 64; i++)
			j->sha[i] = (char)(a->sha256[i] |
			                   0x20); /* hex digits: lowercase */
		j->sha[64] = '\0';
		j->part = gp_xasprintf("%s.part", j->sha);
	} else if (a->trusted && j->scheme == SCHEME_FILE && has_scheme(a->url, "file")) {
		/* No name to key the .part by: use the URL's hash, so two
		 * different trusted files never share one. */
		char h[65];
		gp_sha256_hex(j->url, strlen(j->url), h);
		j->part = gp_xasprintf("url-%s.part", h);
	} else {
		job_fail(
		    j, -GP_FETCH_EINVAL,
		    "%s: no sha256 given; every download must name its sha256 (only a "
		    "file:// bundle marked trusted may omit it)",
		    j->what);
		return false;
	}
	return true;
}

/* A cache hit ends the job. A corrupt entry is deleted so it gets replaced. */
static bool job_try_cache(struct job *j)
{
	struct gp_fetcher *f = j->f;
	if (!j->sha[0])
		return false;
	int dirfd = f->dirfd;
	_cleanup_close_ int own = -1;
	if (dirfd < 0)
		dirfd = own = open_cache_dir(f, false);
	if (dirfd < 0)
		return false;
	bool corrupt;
	uint64_t size = 0;
	if (cache_entry_ok(dirfd, j->sha, &corrupt, &size)) {
		job_succeed(j, j->sha, size, true);
		return true;
	}
	if (corrupt)
		unlinkat(dirfd, j->sha, 0);
	return false;
}

/* Makes the finished .part the cache entry: fsync, rename, fsync(dir). */
static void job_commit(struct job *j, const char *sha)
{
	struct gp_fetcher *f = j->f;
	if (fsync(j->fd) < 0 || renameat(f->dirfd, j->part, f->dirfd, sha) < 0) {
		int e = errno;
		_cleanup_free_ char *dir = gp_root_host_path(f->root, f->cache_dir);
		job_fail(j, -e, "%s: cannot store the download in %s: %s", j->what, dir,
		         strerror(e));
		return;
	}
	fsync(f->dirfd);
	job_succeed(j, sha, j->written, false);
}

/* Starts the next attempt right away (after a hash mismatch). */
static void job_restart(struct job *j)
{
	j->state = JOB_PENDING;
	j->start_at_ms = 0;
}

/* The file is not what was asked for: delete it and download once more, then
 * give up naming both hashes. */
static void job_mismatch(struct job *j, int code, const char *actual, const char *why)
{
	struct gp_fetcher *f = j->f;
	char msg[512];
	if (actual)
		snprintf(msg, sizeof msg, "sha256 mismatch: expected %s, got %s", j->sha,
		         actual);
	else
		snprintf(msg, sizeof msg, "%s", why);
	unlinkat(f->dirfd, j->part, 0);
	job_close(j);
	j->restarts++;
	if (!j->mismatch_retried) {
		j->mismatch_retried = true;
		j->tries = 0; /* a fresh download, with a fresh retry budget */
		if (emit(j, GP_FETCH_EV_RETRY, 0, msg))
			job_cancelled(j);
		else
			job_restart(j);
		return;
	}
	job_fail(j, code,
	         "%s: %s, twice; the download was deleted. The server's file is not the "
	         "one the profile names: check the sha256 and the URL (or its mirror)",
	         j->what, msg);
}

static void job_verify(struct job *j)
{
	char hex[65];
	gp_sha256_peek_hex(j->md, hex);
	if (j->sha[0] && strcmp(hex, j->sha) != 0) {
		job_mismatch(j, -GP_FETCH_ECHECKSUM, hex, NULL);
		return;
	}
	job_commit(j, hex);
}

/* Opens and locks the .part, re-hashes what it holds. May end the job: a
 * complete .part needs no network at all. */
static int job_open_part(struct job *j)
{
	struct gp_fetcher *f = j->f;
	if (f->dirfd < 0) {
		f->dirfd = open_cache_dir(f, true);
		if (f->dirfd < 0) {
			int e = -f->dirfd;
			_cleanup_free_ char *dir = gp_root_host_path(f->root,
			                                             f->cache_dir);
			job_fail(j, -e, "%s: cannot create the cache directory %s: %s",
			         j->what, dir, strerror(e));
			return -e;
		}
	}
	j->fd = openat(f->dirfd, j->part, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	               0644);
	if (j->fd < 0) {
		int e = errno;
		_cleanup_free_ char *dir = gp_root_host_path(f->root, f->cache_dir);
		job_fail(j, -e, "%s: cannot open %s/%s: %s", j->what, dir, j->part,
		         strerror(e));
		return -e;
	}
	/* Another gpuprov appending to the same .part would corrupt it. */
	if (flock(j->fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		job_fail(
		    j, e == EWOULDBLOCK ? -GP_FETCH_EBUSY : -e,
		    "%s: another process is downloading the same file (%s is locked); "
		    "wait for it to finish",
		    j->what, j->part);
		return -1;
	}
	struct stat st;
	if (fstat(j->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		job_fail(j, -EINVAL, "%s: %s in the cache is not a regular file", j->what,
		         j->part);
		return -1;
	}
	j->md = gp_sha256_new();
	j->written = 0;
	j->writeback.started = 0;
	const struct gp_fetch_artifact *a = j->a;
	bool keep = st.st_size > 0 && j->sha[0] && j->scheme != SCHEME_FILE &&
	            !(a->size && (uint64_t)st.st_size > a->size);
	if (keep) {
		int rc = gp_sha256_update_fd(j->md, j->fd, 0, &j->written);
		if (rc < 0) {
			job_fail(j, rc, "%s: cannot read %s: %s", j->what, j->part,
			         strerror(-rc));
			return rc;
		}
		char hex[65];
		gp_sha256_peek_hex(j->md, hex);
		if (strcmp(hex, j->sha) == 0) {
			job_commit(j, hex);
			return 0;
		}
		/* Full length but the wrong bytes: no range can fix that. */
		keep = !(a->size && j->written == a->size);
	}
	if (!keep && st.st_size > 0) {
		if (ftruncate(j->fd, 0) < 0) {
			int e = errno;
			job_fail(j, -e, "%s: cannot truncate %s: %s", j->what, j->part,
			         strerror(e));
			return -e;
		}
		gp_sha256_reset(j->md);
		j->written = 0;
		j->writeback.started = 0;
	}
	return 0;
}

/* Puts the .part back to zero bytes (a server without ranges, a bad range). */
static int job_truncate(struct job *j)
{
	j->restarts++;
	if (ftruncate(j->fd, 0) < 0)
		return -errno;
	gp_sha256_reset(j->md);
	j->written = 0;
	j->writeback.started = 0;
	j->offset = 0;
	return 0;
}

/* ------------------------------------------------------- curl callbacks */

/* The first body bytes of a response: decide where they belong. */
static int body_begin(struct job *j)
{
	j->body_begun = true;
	if (j->scheme == SCHEME_FILE)
		return 0;
	long code = 0;
	curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code == 206) {
		if (j->range_start != (int64_t)j->offset) {
			j->abort_why = ABORT_BAD_RANGE;
			return -1;
		}
	} else if (code == 200) {
		/* The server ignored our Range: the whole file follows. */
		if (j->offset > 0) {
			int rc = job_truncate(j);
			if (rc < 0) {
				j->abort_errno = rc;
				return -1;
			}
		}
	} else {
		j->discard = true;
	}
	return 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct job *j = userdata;
	size_t len = size * nmemb;
	if (!j->body_begun && body_begin(j) < 0)
		return 0;
	if (j->discard)
		return len;
	if (j->a->size && j->written + len > j->a->size) {
		j->abort_why = ABORT_TOO_BIG;
		return 0;
	}
	int rc = gp_pwrite_all(j->fd, data, len, j->written);
	if (rc < 0) {
		j->abort_errno = rc;
		return 0;
	}
	gp_sha256_update(j->md, data, len);
	j->written += len;
	gp_writeback_kick(&j->writeback, j->fd, (off_t)j->written, false);
	return len;
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *userdata)
{
	struct job *j = userdata;
	size_t len = size * nmemb;
	/* A new response (after a redirect or a 100): forget the last one. */
	if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		j->body_begun = false;
		j->discard = false;
		j->range_start = -1;
		j->location[0] = '\0';
	} else if (len > 9 && strncasecmp(line, "Location:", 9) == 0) {
		const char *v = line + 9;
		size_t n = len - 9;
		while (n && (*v == ' ' || *v == '\t'))
			v++, n--;
		while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
			n--;
		snprintf(j->location, sizeof j->location, "%.*s", (int)n, v);
	} else if (len > 14 && strncasecmp(line, "Content-Range:", 14) == 0) {
		char buf[128];
		snprintf(buf, sizeof buf, "%.*s", (int)(len - 14), line + 14);
		unsigned long long start;
		if (sscanf(buf, " bytes %llu-", &start) == 1)
			j->range_start = (int64_t)start;
	}
	return len;
}

static int on_xferinfo(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                       curl_off_t ultotal, curl_off_t ulnow)
{
	struct job *j = userdata;
	struct gp_fetcher *f = j->f;
	if (gp_run_stop_signal) {
		j->abort_why = ABORT_STOP;
		return 1;
	}
	if (j->abort_why)
		return 1;
	if (!f->progress)
		return 0;
	int64_t t = gp_monotonic_ms();
	if (j->written == j->last_reported && t - j->last_report_ms < 1000)
		return 0;
	j->last_reported = j->written;
	j->last_report_ms = t;
	/* dltotal is what this response carries; the file is that past offset. */
	uint64_t total = j->a->size;
	if (j->body_begun && !j->discard && dltotal > 0)
		total = j->offset + (uint64_t)dltotal;
	struct gp_fetch_progress p = {
		.event = GP_FETCH_EV_PROGRESS,
		.index = j->index,
		.artifact = j->a,
		.url = j->url,
		.done = j->written,
		.total = total,
		.attempt = j->res->attempts,
		.restarts = j->restarts,
	};
	int64_t dt = t - j->attempt_start_ms;
	if (dt > 0 && j->written > j->offset)
		p.rate = (double)(j->written - j->offset) * 1000.0 / (double)dt;
	if (f->progress(&p, f->progress_data)) {
		j->abort_why = ABORT_CANCEL;
		return 1;
	}
	return 0;
}

/* Every socket libcurl opens is close-on-exec, so no command we run inherits it. */
static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose,
                                    struct curl_sockaddr *addr)
{
	return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

/* ----------------------------------------------------------- attempts */

static CURL *job_easy(struct job *j)
{
	struct gp_fetcher *f = j->f;
	CURL *e = curl_easy_init();
	if (!e)
		abort();
	j->errbuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_URL, j->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, j);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, j->errbuf);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, j);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, j);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, j);
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR,
	                 f->allow_http ? "https,http,file" : "https,file");
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(e, CURLOPT_MAXREDIRS, (long)MAX_REDIRECTS);
	/* The defaults, stated so that no later edit can quietly lose them. */
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	if (f->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, f->ca_file);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, f->low_speed_limit);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, f->low_speed_time);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, f->connect_timeout);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "gpuprov/" GP_VERSION);
	/* No CURLOPT_ACCEPT_ENCODING: the hash is of the bytes as served. No
	 * CURLOPT_PROXY: libcurl takes proxies from the environment. */
	if (j->offset > 0) {
		char range[32];
		snprintf(range, sizeof range, "%" PRIu64 "-", j->offset);
		curl_easy_setopt(e, CURLOPT_RANGE, range);
	}
	return e;
}

static void job_start(struct job *j)
{
	struct gp_fetcher *f = j->f;
	if (j->fd < 0) {
		if (job_open_part(j) < 0 || j->state == JOB_DONE)
			return;
	}
	/* file:// is local: start over rather than trust a range on it. */
	if (j->scheme == SCHEME_FILE && j->written > 0) {
		int rc = job_truncate(j);
		if (rc < 0) {
			job_fail(j, rc, "%s: cannot truncate %s: %s", j->what, j->part,
			         strerror(-rc));
			return;
		}
	}
	j->offset = j->written;
	j->body_begun = j->discard = false;
	j->range_start = -1;
	j->abort_why = ABORT_NONE;
	j->abort_errno = 0;
	j->attempt_start_ms = gp_monotonic_ms();
	j->last_reported = UINT64_MAX;
	j->res->attempts++;
	j->tries++;
	if (emit(j, GP_FETCH_EV_START, 0, NULL)) {
		job_cancelled(j);
		return;
	}
	j->easy = job_easy(j);
	if (curl_multi_add_handle(f->multi, j->easy) != CURLM_OK)
		abort();
	j->state = JOB_RUNNING;
}

static bool retryable_http(long code)
{
	return code == 408 || code == 429 || code == 500 || code == 502 || code == 503 ||
	       code == 504;
}

static bool retryable_curl(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_HTTP2:
	case CURLE_PARTIAL_FILE:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_HTTP2_STREAM:
		return true;
	default:
		return false;
	}
}

static bool tls_error(CURLcode rc)
{
	switch (rc) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
		return true;
	default:
		return false;
	}
}

/* The next attempt after a transient failure, or the end of the road. */
static void job_retry(struct job *j, int final_code, long retry_after_s, const char *why)
{
	struct gp_fetcher *f = j->f;
	unsigned n = j->tries;
	if (n >= f->max_attempts) {
		job_fail(j, final_code,
		         "%s: %s (gave up after %u attempt%s); check the network, "
		         "the proxy settings and the server",
		         j->what, why, j->res->attempts,
		         j->res->attempts == 1 ? "" : "s");
		return;
	}
	uint64_t delay = f->backoff_ms;
	for (unsigned i = 1; i < n && delay < f->max_backoff_ms; i++)
		delay *= 2;
	if (delay > f->max_backoff_ms)
		delay = f->max_backoff_ms;
	if (retry_after_s > 0) {
		uint64_t ra = (uint64_t)retry_after_s * 1000;
		if (ra > f->retry_after_max_ms)
			ra = f->retry_after_max_ms;
		if (ra > delay)
			delay = ra;
	}
	j->state = JOB_WAITING;
	j->start_at_ms = gp_monotonic_ms() + (int64_t)delay;
	if (emit(j, GP_FETCH_EV_RETRY, (unsigned)delay, why))
		job_cancelled(j);
}

/* A transfer ended: done, retry, resume, restart or fail. */
static void job_attempt_done(struct job *j, CURLcode rc)
{
	struct gp_fetcher *f = j->f;
	long code = 0;
	curl_off_t retry_after = 0;
	curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_getinfo(j->easy, CURLINFO_RETRY_AFTER, &retry_after);
	const char *redirect = j->location[0] ? j->location : NULL;
	_cleanup_free_ char *curl_msg = gp_xstrdup(j->errbuf[0] ? j->errbuf
	                                                        : curl_easy_strerror(rc));
	curl_multi_remove_handle(f->multi, j->easy);
	curl_easy_cleanup(j->easy);
	j->easy = NULL;
	j->state = JOB_PENDING;
	if (j->scheme == SCHEME_FILE)
		code = 0;
	if (j->written >= j->offset + PROGRESS_REFUND)
		j->tries = 1;
	j->res->http_code = code;
	j->res->curl_code = (int)rc;

	/* Our own callbacks stopped it. */
	if (j->abort_errno) {
		job_fail(j, j->abort_errno, "%s: cannot write %s: %s", j->what, j->part,
		         strerror(-j->abort_errno));
		return;
	}
	switch (j->abort_why) {
	case ABORT_CANCEL:
		job_cancelled(j);
		return;
	case ABORT_STOP:
		job_fail(j, -EINTR,
		         "%s: download stopped by a signal; the partial file is "
		         "kept and resumes next time",
		         j->what);
		return;
	case ABORT_TOO_BIG: {
		char why[128];
		snprintf(why, sizeof why,
		         "the server sent more than the expected %" PRIu64 " bytes",
		         j->a->size);
		job_mismatch(j, -GP_FETCH_ESIZE, NULL, why);
		return;
	}
	case ABORT_BAD_RANGE: {
		int e = job_truncate(j);
		if (e < 0) {
			job_fail(j, e, "%s: cannot truncate %s: %s", j->what, j->part,
			         strerror(-e));
			return;
		}
		job_retry(j, -GP_FETCH_ENETWORK, 0,
		          "the server answered the range request with the wrong range");
		return;
	}
	case ABORT_NONE:
		break;
	}

	char why[CURL_ERROR_SIZE + 64];
	if (retryable_http(code)) {
		snprintf(why, sizeof why, "HTTP %ld from the server", code);
		job_retry(j, -GP_FETCH_EHTTP, (long)retry_after, why);
		return;
	}
	if (code == 416 && j->offset > 0) {
		/* Nothing past our offset: the .part may already be whole. */
		job_verify(j);
		return;
	}
	if (code >= 400) {
		job_fail(j, -GP_FETCH_EHTTP, "%s: HTTP %ld from the server%s", j->what,
		         code,
		         code == 404 ? "; check the URL (and the mirror rewriting it)"
		         : code == 401 || code == 403
		             ? "; the server refuses access: check the URL and the mirror"
		             : "");
		return;
	}
	if (rc == CURLE_OK) {
		if (code >= 300) {
			job_fail(j, -GP_FETCH_EHTTP,
			         "%s: HTTP %ld redirect not followed%s%s", j->what, code,
			         redirect ? " to " : "", redirect ? redirect : "");
			return;
		}
		job_verify(j);
		return;
	}
	if (rc == CURLE_UNSUPPORTED_PROTOCOL && redirect) {
		job_fail(j, -GP_FETCH_EREFUSED,
		         "%s: the server redirects to %s; only redirects to https:// are "
		         "followed",
		         j->what, redirect);
		return;
	}
	if (tls_error(rc)) {
		job_fail(
		    j, -GP_FETCH_ETLS,
		    "%s: TLS verification failed: %s; for a private mirror, give its CA "
		    "bundle (--ca-file)",
		    j->what, curl_msg);
		return;
	}
	if (retryable_curl(rc)) {
		snprintf(why, sizeof why, "%s (curl error %d)", curl_msg, (int)rc);
		job_retry(j, -GP_FETCH_ENETWORK, 0, why);
		return;
	}
	if (j->scheme == SCHEME_FILE) {
		job_fail(j, -ENOENT, "%s: cannot read the file: %s", j->what, curl_msg);
		return;
	}
	job_fail(j, -GP_FETCH_ENETWORK, "%s: %s (curl error %d)", j->what, curl_msg,
	         (int)rc);
}

/* Jobs are started in order; one that shares its sha256 with an earlier
 * unfinished job waits, then finds the file in the cache. */
static bool job_blocked(const struct job *jobs, size_t i)
{
	if (!jobs[i].sha[0])
		return false;
	for (size_t k = 0; k < i; k++)
		if (jobs[k].state != JOB_DONE && strcmp(jobs[k].sha, jobs[i].sha) == 0)
			return true;
	return false;
}

static void stop_all(struct job *jobs, size_t n, bool cancelled)
{
	for (size_t i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		if (j->state == JOB_DONE)
			continue;
		if (j->easy) {
			curl_multi_remove_handle(j->f->multi, j->easy);
			curl_easy_cleanup(j->easy);
			j->easy = NULL;
		}
		if (cancelled)
			job_cancelled(j);
		else
			job_fail(j, -EINTR, "%s: stopped by a signal before it finished",
			         j->what);
	}
}

static void run_jobs(struct gp_fetcher *f, struct job *jobs, size_t n)
{
	for (;;) {
		if (gp_run_stop_signal || atomic_load(&f->cancelled)) {
			stop_all(jobs, n, !gp_run_stop_signal);
			return;
		}
		int64_t now = gp_monotonic_ms();
		int64_t wake = now + LOOP_TICK_MS;
		size_t running = 0, open = 0;
		for (size_t i = 0; i < n; i++)
			running += jobs[i].state == JOB_RUNNING;
		for (size_t i = 0; i < n; i++) {
			struct job *j = &jobs[i];
			if (j->state == JOB_DONE)
				continue;
			open++;
			if (j->state == JOB_RUNNING)
				continue;
			if (j->start_at_ms > now) {
				if (j->start_at_ms < wake)
					wake = j->start_at_ms;
				continue;
			}
			if (running >= f->max_parallel || job_blocked(jobs, i))
				continue;
			if (job_try_cache(j))
				continue;
			job_start(j);
			running += j->state == JOB_RUNNING;
		}
		if (!open)
			return;
		int still = 0;
		curl_multi_perform(f->multi, &still);
		CURLMsg *m;
		int left;
		bool finished = false;
		while ((m = curl_multi_info_read(f->multi, &left))) {
			if (m->msg != CURLMSG_DONE)
				continue;
			char *priv = NULL;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
			job_attempt_done((struct job *)priv, m->data.result);
			finished = true;
		}
		if (finished)
			continue;
		int timeout = (int)(wake - gp_monotonic_ms());
		if (timeout < 0)
			timeout = 0;
		if (running)
			curl_multi_poll(f->multi, NULL, 0, timeout, NULL);
		else if (timeout)
			poll(NULL, 0, timeout);
	}
}

int gp_fetch_many(struct gp_fetcher *f, const struct gp_fetch_artifact *a, size_t n,
                  struct gp_fetch_result *res, struct gp_err *err)
{
	struct job *jobs = gp_xcalloc(n ? n : 1, sizeof *jobs);
	for (size_t i = 0; i < n; i++) {
		memset(&res[i], 0, sizeof res[i]);
		jobs[i] = (struct job){
			.f = f, .a = &a[i], .res = &res[i], .index = i, .fd = -1
		};
	}
	/* Cache hits and refusals first, so that offline fails at once. */
	for (size_t i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		if (!job_init(j) || job_try_cache(j))
			continue;
		if (f->offline && j->scheme != SCHEME_FILE)
			job_fail(j, -GP_FETCH_EOFFLINE,
			         "%s: not in the cache and offline mode forbids "
			         "downloading it",
			         j->what);
	}
	run_jobs(f, jobs, n);
	if (f->dirfd >= 0)
		close(f->dirfd);
	f->dirfd = -1;

	int first = 0;
	size_t failed = 0, offline = 0;
	for (size_t i = 0; i < n; i++) {
		if (res[i].status == 0)
			continue;
		failed++;
		offline += res[i].status == -GP_FETCH_EOFFLINE;
		if (!first)
			first = res[i].status;
	}
	if (failed == 1 && n == 1) {
		gp_fail(err, first, "%s", res[0].msg);
	} else if (failed) {
		struct gp_buf b = { 0 };
		_cleanup_free_ char *dir = gp_root_host_path(f->root, f->cache_dir);
		if (offline == failed)
			gp_buf_printf(
			    &b, "offline: %zu of %zu artifacts are not in the cache %s:",
			    failed, n, dir);
		else
			gp_buf_printf(&b, "%zu of %zu downloads failed:", failed, n);
		for (size_t i = 0; i < n; i++)
			if (res[i].status)
				gp_buf_printf(&b, "\n  %s",
				              offline == failed ? jobs[i].what
				                                : res[i].msg);
		if (offline == failed)
			gp_buf_puts(&b,
			            "\nfetch them once with network access, or point a "
			            "mirror at a local bundle");
		gp_fail(err, first, "%s", b.data);
		gp_buf_free(&b);
	}
	for (size_t i = 0; i < n; i++) {
		job_close(&jobs[i]);
		free(jobs[i].url);
		free(jobs[i].what);
		free(jobs[i].part);
	}
	free(jobs);
	return first;
}

int gp_fetch_one(struct gp_fetcher *f, const struct gp_fetch_artifact *a,
                 struct gp_fetch_result *res, struct gp_err *err)
{
	return gp_fetch_many(f, a, 1, res, err);
}
