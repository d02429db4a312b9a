/* Tests for the download layer against real loopback servers
 * (tests/fixtures/httpd.py): HTTPS with a test CA, plain HTTP, HTTPS that
 * ignores ranges, and HTTPS with a certificate nobody trusts. Faults are
 * injected per request through the query string; each server logs the
 * requests it saw, which is how "no network" and "resumed with a range" are
 * asserted. Backoffs are a millisecond and the low-speed window one second,
 * so the whole file runs in a few seconds. */
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include "testutil.h"

#include "gpuprov/exitcodes.h"
#include "gpuprov/fetch.h"
#include "gpuprov/prefetch.h"
#include "gpuprov/root.h"
#include "gpuprov/run.h"
#include "gpuprov/util.h"

#define HTTPD GP_SRCDIR "/tests/fixtures/httpd.py"
#define CACHE "/var/cache/gpuprov"
#define SMALL_LEN 65536
#define BIG_LEN 262144
#define HUGE_LEN (3 << 20)

struct server {
	pid_t pid;
	int in_fd; /* its stdin: closing it stops the server */
	int port;
	char cert[PATH_MAX];
	char *log;
};

/* Shared by every test: the servers and the files they serve. */
static struct {
	char *dir; /* holds www/ and the logs */
	char *www;
	struct server https, http, norange, rogue;
	char small_sha[65], big_sha[65], huge_sha[65];
	char *small, *big;
} E;

/* Per test: a fresh root with an empty cache. */
struct t {
	char *dir;
	struct gp_root root;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Deterministic bytes that do not compress or repeat in short periods. */
static char *make_data(size_t len, uint32_t seed)
{
	char *p = gp_xmalloc(len);
	uint32_t x = seed;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (char)x;
	}
	return p;
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static char *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct gp_buf b = { 0 };
	char chunk[65536];
	ssize_t n;
	while ((n = read(fd, chunk, sizeof chunk)) > 0)
		gp_buf_append(&b, chunk, (size_t)n);
	close(fd);
	*len = b.len;
	return gp_buf_steal(&b);
}

static void start_server(struct server *s, const char *name, const char *tls,
                         bool no_range)
{
	s->log = gp_xasprintf("%s/%s.log", E.dir, name);
	int in[2], out[2];
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	char *argv[12];
	int n = 0;
	argv[n++] = "python3";
	argv[n++] = HTTPD;
	argv[n++] = "--dir";
	argv[n++] = E.www;
	argv[n++] = "--log";
	argv[n++] = s->log;
	argv[n++] = "--max-seconds";
	argv[n++] = "300";
	if (tls) {
		argv[n++] = "--tls";
		argv[n++] = (char *)tls;
	}
	if (no_range)
		argv[n++] = "--no-range";
	argv[n] = NULL;
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	s->in_fd = in[1];
	/* The first run makes the certificates: allow it time. */
	char line[PATH_MAX + 32];
	size_t len = 0;
	while (len < sizeof line - 1 && !memchr(line, '\n', len)) {
		struct pollfd p = { .fd = out[0], .events = POLLIN };
		assert_int_equal(poll(&p, 1, 30000), 1);
		ssize_t r = read(out[0], line + len, sizeof line - 1 - len);
		assert_true(r > 0);
		len += (size_t)r;
	}
	line[len] = '\0';
	close(out[0]);
	char cert[PATH_MAX];
	assert_int_equal(sscanf(line, "%d %4095s", &s->port, cert), 2);
	snprintf(s->cert, sizeof s->cert, "%s", cert);
}

static void stop_server(struct server *s)
{
	if (s->pid <= 0)
		return;
	close(s->in_fd);
	int st;
	for (int i = 0; i < 100; i++) {
		if (waitpid(s->pid, &st, WNOHANG) == s->pid)
			goto done;
		poll(NULL, 0, 20);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, &st, 0);
done:
	free(s->log);
	s->pid = 0;
}

static void note_inherited_fds(void);

static int group_setup(void **state)
{
	/* Loopback only, whatever proxy the environment has. */
	setenv("no_proxy", "127.0.0.1,localhost", 1);
	setenv("NO_PROXY", "127.0.0.1,localhost", 1);
	note_inherited_fds();
	E.dir = tu_tmpdir();
	E.www = gp_xasprintf("%s/www", E.dir);
	assert_int_equal(mkdir(E.www, 0755), 0);
	E.small = make_data(SMALL_LEN, 1);
	E.big = make_data(BIG_LEN, 2);
	gp_sha256_hex(E.small, SMALL_LEN, E.small_sha);
	gp_sha256_hex(E.big, BIG_LEN, E.big_sha);
	_cleanup_free_ char *p1 = gp_xasprintf("%s/small.bin", E.www);
	_cleanup_free_ char *p2 = gp_xasprintf("%s/big.bin", E.www);
	write_file(p1, E.small, SMALL_LEN);
	write_file(p2, E.big, BIG_LEN);
	_cleanup_free_ char *p3 = gp_xasprintf("%s/huge.bin", E.www);
	_cleanup_free_ char *huge = make_data(HUGE_LEN, 3);
	write_file(p3, huge, HUGE_LEN);
	gp_sha256_hex(huge, HUGE_LEN, E.huge_sha);
	for (int i = 0; i < 6; i++) {
		_cleanup_free_ char *p = gp_xasprintf("%s/f%d.bin", E.www, i);
		_cleanup_free_ char *d = make_data(SMALL_LEN, (uint32_t)(10 + i));
		write_file(p, d, SMALL_LEN);
	}
	start_server(&E.https, "https", "ca", false);
	start_server(&E.http, "http", NULL, false);
	start_server(&E.norange, "norange", "ca", true);
	start_server(&E.rogue, "rogue", "rogue", false);
	return 0;
}

static int group_teardown(void **state)
{
	stop_server(&E.https);
	stop_server(&E.http);
	stop_server(&E.norange);
	stop_server(&E.rogue);
	tu_rmrf(E.dir);
	free(E.dir);
	free(E.www);
	free(E.small);
	free(E.big);
	return 0;
}

static int setup(void **state)
{
	struct t *t = gp_xcalloc(1, sizeof *t);
	t->dir = tu_tmpdir();
	assert_int_equal(gp_root_open(&t->root, t->dir), 0);
	truncate(E.https.log, 0);
	truncate(E.http.log, 0);
	truncate(E.norange.log, 0);
	truncate(E.rogue.log, 0);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	gp_root_close(&t->root);
	tu_rmrf(t->dir);
	free(t->dir);
	free(t);
	return 0;
}

static char *url(const struct server *s, const char *rest)
{
	return gp_xasprintf("%s://127.0.0.1:%d/%s", s->cert[0] == '-' ? "http" : "https",
	                    s->port, rest);
}

/* The server's request log ("GET /x range=-" lines). */
static char *log_text(const struct server *s)
{
	size_t len;
	char *text = read_file(s->log, &len);
	assert_non_null(text);
	return text;
}

static size_t log_lines(const struct server *s)
{
	_cleanup_free_ char *text = log_text(s);
	size_t n = 0;
	for (const char *p = text; *p; p++)
		n += *p == '\n';
	return n;
}

/* Line i (0-based) of the log, or "". */
static char *log_line(const struct server *s, size_t i)
{
	_cleanup_free_ char *text = log_text(s);
	char *p = text;
	for (; i && p; i--) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (!p)
		return gp_xstrdup("");
	char *e = strchr(p, '\n');
	return gp_xstrndup(p, e ? (size_t)(e - p) : strlen(p));
}

static struct gp_fetch_opts opts_for(void)
{
	return (struct gp_fetch_opts){
		.cache_dir = CACHE,
		.ca_file = E.https.cert,
		.max_attempts = 4,
		.backoff_ms = 1,
		.max_backoff_ms = 20,
		.retry_after_max_ms = 20,
		.low_speed_limit = 1000,
		.low_speed_time = 1,
		.connect_timeout = 5,
	};
}

static struct gp_fetcher *new_fetcher(struct t *t, const struct gp_fetch_opts *o)
{
	struct gp_fetcher *f = NULL;
	struct gp_err err = { 0 };
	assert_int_equal(gp_fetcher_new(&t->root, o, &f, &err), 0);
	return f;
}

static char *cache_host_path(struct t *t, const char *name)
{
	return gp_xasprintf("%s%s/%s", t->dir, CACHE, name);
}

/* The cache holds exactly the file with this content and nothing else. */
static void assert_cached(struct t *t, const char *sha, const char *data, size_t len)
{
	_cleanup_free_ char *p = cache_host_path(t, sha);
	size_t got_len;
	_cleanup_free_ char *got = read_file(p, &got_len);
	assert_non_null(got);
	assert_int_equal(got_len, len);
	assert_memory_equal(got, data, len);
	char **names = NULL;
	assert_int_equal(gp_root_list_dir(&t->root, CACHE, &names), 0);
	assert_int_equal(gp_strv_len(names), 1);
	assert_string_equal(names[0], sha);
	gp_strv_free(names);
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

/* Records what the progress callback saw. */
struct prog {
	unsigned starts, dones, retries, progresses;
	unsigned active, max_active;
	uint64_t first_done, last_done, last_total;
	unsigned retry_in[8];
	char retry_msg[512];
	uint64_t cancel_at; /* nonzero: stop once this many bytes arrived */
	bool check_fds;
	int bad_fds; /* fds seen without FD_CLOEXEC during a transfer */
	char bad_fd[PATH_MAX];
};

/* fds this process had without FD_CLOEXEC before the fetcher existed (the
 * test harness may pass some down): not the fetcher's doing. */
static bool inherited_fd[1024];

static void note_inherited_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		int fd = atoi(de->d_name);
		int fl = fcntl(fd, F_GETFD);
		if (fd >= 0 && fd < 1024 && fd != dirfd(d) && fl >= 0 &&
		    !(fl & FD_CLOEXEC))
			inherited_fd[fd] = true;
	}
	closedir(d);
}

static void check_cloexec(struct prog *p)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		int fd = atoi(de->d_name);
		if (de->d_name[0] == '.' || fd < 3 || fd == dirfd(d) ||
		    (fd < 1024 && inherited_fd[fd]))
			continue;
		int fl = fcntl(fd, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC)) {
			char link[64];
			snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
			ssize_t n = readlink(link, p->bad_fd, sizeof p->bad_fd - 1);
			p->bad_fd[n > 0 ? n : 0] = '\0';
			p->bad_fds++;
		}
	}
	closedir(d);
}

static int on_progress(const struct gp_fetch_progress *ev, void *data)
{
	struct prog *p = data;
	switch (ev->event) {
	case GP_FETCH_EV_START:
		p->starts++;
		if (++p->active > p->max_active)
			p->max_active = p->active;
		break;
	case GP_FETCH_EV_PROGRESS:
		if (!p->progresses++)
			p->first_done = ev->done;
		p->last_done = ev->done;
		p->last_total = ev->total;
		assert_true(ev->total == 0 || ev->done <= ev->total);
		if (p->check_fds)
			check_cloexec(p);
		if (p->cancel_at && ev->done >= p->cancel_at)
			return 1;
		break;
	case GP_FETCH_EV_RETRY:
		if (p->active)
			p->active--;
		if (p->retries < ARRAY_SIZE(p->retry_in))
			p->retry_in[p->retries] = ev->retry_in_ms;
		p->retries++;
		snprintf(p->retry_msg, sizeof p->retry_msg, "%s", ev->message);
		break;
	case GP_FETCH_EV_DONE:
		p->dones++;
		if (p->active && ev->attempt > 0 && !ev->from_cache)
			p->active--;
		break;
	}
	return 0;
}

/* Fetches one artifact with opts o; returns the status. */
static int fetch(struct t *t, const struct gp_fetch_opts *o, const char *u,
                 const char *sha, struct gp_fetch_result *res)
{
	_cleanup_fetcher_ struct gp_fetcher *f = new_fetcher(t, o);
	struct gp_fetch_artifact a = { .url = u, .sha256 = sha };
	struct gp_err err = { 0 };
	int rc = gp_fetch_one(f, &a, res, &err);
	assert_int_equal(rc, res->status);
	if (rc)
		assert_string_equal(err.msg, res->msg);
	return rc;
}

/* ------------------------------------------------------------------ tests */

static void test_download_and_cache_hit(void **state)
{
	struct t *t = *state;
	struct prog p = { 0 };
	struct gp_fetch_opts o = opts_for();
	o.progress = on_progress;
	o.progress_data = &p;
	_cleanup_free_ char *u = url(&E.https, "small.bin");
	struct gp_fetch_result res;
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), 0);
	_cleanup_free_ char *want = gp_xasprintf(CACHE "/%s", E.small_sha);
	assert_string_equal(res.path, want);
	assert_string_equal(res.sha256, E.small_sha);
	assert_int_equal(res.size, SMALL_LEN);
	assert_false(res.from_cache);
	assert_int_equal(res.attempts, 1);
	assert_int_equal(res.http_code, 200);
	assert_cached(t, E.small_sha, E.small, SMALL_LEN);
	assert_int_equal(p.starts, 1);
	assert_int_equal(p.dones, 1);
	assert_int_equal(p.last_done, SMALL_LEN);
	assert_int_equal(p.last_total, SMALL_LEN);
	assert_int_equal(log_lines(&E.https), 1);
	gp_fetch_result_clear(&res);

	/* Second time: re-hashed from the cache, no request at all. */
	_cleanup_fetcher_ struct gp_fetcher *f = new_fetcher(t, &o);
	struct gp_fetch_artifact a = { .url = u, .sha256 = E.small_sha };
	assert_true(gp_fetch_is_cached(f, &a));
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), 0);
	assert_true(res.from_cache);
	assert_int_equal(res.attempts, 0);
	assert_int_equal(res.size, SMALL_LEN);
	assert_int_equal(log_lines(&E.https), 1);
	gp_fetch_result_clear(&res);

	/* A corrupt cache entry is not used: it is replaced. */
	_cleanup_free_ char *cp = cache_host_path(t, E.small_sha);
	write_file(cp, "junk", 4);
	assert_false(gp_fetch_is_cached(f, &a));
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), 0);
	assert_false(res.from_cache);
	assert_cached(t, E.small_sha, E.small, SMALL_LEN);
	assert_int_equal(log_lines(&E.https), 2);
	gp_fetch_result_clear(&res);
	/* Upper-case hex names the same file. */
	char upper[65];
	for (int i = 0; i < 65; i++)
		upper[i] = (char)((E.small_sha[i] >= 'a' && E.small_sha[i] <= 'f')
		                      ? E.small_sha[i] - 32
		                      : E.small_sha[i]);
	a.sha256 = upper;
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), 0);
	assert_true(res.from_cache);
	gp_fetch_result_clear(&res);
}

static void test_fds_cloexec(void **state)
{
	struct t *t = *state;
	struct prog p = { .check_fds = true };
	struct gp_fetch_opts o = opts_for();
	o.progress = on_progress;
	o.progress_data = &p;
	/* A stall keeps the transfer open while progress events look at fds. */
	_cleanup_free_ char *u = url(&E.https, "small.bin?stall=2048&stall_s=1.5&t=fd");
	struct gp_fetch_result res;
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), 0);
	assert_true(p.progresses > 0);
	if (p.bad_fds)
		fail_msg("%d fds without FD_CLOEXEC, e.g. %s", p.bad_fds, p.bad_fd);
	gp_fetch_result_clear(&res);
}

static void test_http_refused_unless_allowed(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	_cleanup_free_ char *u = url(&E.http, "small.bin");
	struct gp_fetch_result res;
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), -GP_FETCH_EREFUSED);
	assert_contains(res.msg, "http:// is refused");
	assert_contains(res.msg, u);
	assert_int_equal(res.attempts, 0);
	assert_int_equal(log_lines(&E.http), 0);
	gp_fetch_result_clear(&res);

	o.allow_http = true;
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), 0);
	assert_cached(t, E.small_sha, E.small, SMALL_LEN);
	assert_int_equal(log_lines(&E.http), 1);
	gp_fetch_result_clear(&res);
}

static void test_tls_verified(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	struct gp_fetch_result res;
	/* The system CAs do not know the test CA. */
	o.ca_file = NULL;
	_cleanup_free_ char *u = url(&E.https, "small.bin");
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), -GP_FETCH_ETLS);
	assert_contains(res.msg, "TLS verification failed");
	assert_contains(res.msg, "CA");
	assert_int_equal(res.attempts, 1);
	assert_int_equal(log_lines(&E.https), 0);
	gp_fetch_result_clear(&res);

	/* The test CA does not vouch for another self-signed certificate. */
	o.ca_file = E.https.cert;
	_cleanup_free_ char *r = url(&E.rogue, "small.bin");
	assert_int_equal(fetch(t, &o, r, E.small_sha, &res), -GP_FETCH_ETLS);
	assert_int_equal(res.attempts, 1);
	assert_int_equal(log_lines(&E.rogue), 0);
	gp_fetch_result_clear(&res);

	/* With the rogue's own certificate as CA it works: the failure above
	 * was verification, not the server. */
	o.ca_file = E.rogue.cert;
	assert_int_equal(fetch(t, &o, r, E.small_sha, &res), 0);
	gp_fetch_result_clear(&res);

	/* An unreadable CA file is refused up front. */
	o.ca_file = "/nonexistent/ca.pem";
	struct gp_fetcher *f = NULL;
	struct gp_err err = { 0 };
	assert_int_equal(gp_fetcher_new(&t->root, &o, &f, &err), -EINVAL);
	assert_null(f);
	assert_contains(err.msg, "/nonexistent/ca.pem");
}

static void test_redirects_only_to_https(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	struct gp_fetch_result res;
	_cleanup_free_ char *target = url(&E.http, "small.bin");
	_cleanup_free_ char *rest = gp_xasprintf("small.bin?redirect=%s", target);
	_cleanup_free_ char *u = url(&E.https, rest);
	/* Refused even with http allowed: a redirect never downgrades. */
	o.allow_http = true;
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), -GP_FETCH_EREFUSED);
	assert_contains(res.msg, target);
	assert_contains(res.msg, "https://");
	assert_int_equal(res.attempts, 1);
	assert_int_equal(log_lines(&E.http), 0);
	gp_fetch_result_clear(&res);

	_cleanup_free_ char *good = url(&E.https, "small.bin");
	_cleanup_free_ char *rest2 = gp_xasprintf("small.bin?redirect=%s", good);
	_cleanup_free_ char *u2 = url(&E.https, rest2);
	assert_int_equal(fetch(t, &o, u2, E.small_sha, &res), 0);
	assert_cached(t, E.small_sha, E.small, SMALL_LEN);
	gp_fetch_result_clear(&res);
}

static void test_sha256_required(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	_cleanup_fetcher_ struct gp_fetcher *f = new_fetcher(t, &o);
	_cleanup_free_ char *u = url(&E.https, "small.bin");
	_cleanup_free_ char *fu = gp_xasprintf("file://%s/small.bin", E.www);
	struct gp_fetch_result res;
	struct gp_fetch_artifact a = { .name = "thing", .url = u };
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), -GP_FETCH_EINVAL);
	assert_contains(res.msg, "thing");
	assert_contains(res.msg, "no sha256");
	gp_fetch_result_clear(&res);
	/* "trusted" means nothing for a network URL. */
	a.trusted = true;
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), -GP_FETCH_EINVAL);
	gp_fetch_result_clear(&res);
	a = (struct gp_fetch_artifact){ .url = u, .sha256 = "abc123" };
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), -GP_FETCH_EINVAL);
	assert_contains(res.msg, "64 hexadecimal");
	gp_fetch_result_clear(&res);
	a = (struct gp_fetch_artifact){ .url = fu };
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), -GP_FETCH_EINVAL);
	gp_fetch_result_clear(&res);
	assert_int_equal(log_lines(&E.https), 0);

	/* A trusted local bundle is hashed on the way in and cached by hash. */
	a.trusted = true;
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), 0);
	assert_string_equal(res.sha256, E.small_sha);
	assert_cached(t, E.small_sha, E.small, SMALL_LEN);
	gp_fetch_result_clear(&res);
	/* file:// with a sha256 needs no trust, and is checked. */
	a = (struct gp_fetch_artifact){ .url = fu, .sha256 = E.big_sha };
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), -GP_FETCH_ECHECKSUM);
	gp_fetch_result_clear(&res);
	a = (struct gp_fetch_artifact){ .url = "ftp://127.0.0.1/x", .sha256 = E.big_sha };
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), -GP_FETCH_EINVAL);
	gp_fetch_result_clear(&res);
}

static void write_part(struct t *t, const char *sha, const char *data, size_t len)
{
	assert_int_equal(gp_root_mkdir_p(&t->root, CACHE, 0755), 0);
	_cleanup_free_ char *name = gp_xasprintf("%s.part", sha);
	_cleanup_free_ char *p = cache_host_path(t, name);
	write_file(p, data, len);
}

static void test_resume_with_range(void **state)
{
	struct t *t = *state;
	struct prog p = { 0 };
	struct gp_fetch_opts o = opts_for();
	o.progress = on_progress;
	o.progress_data = &p;
	write_part(t, E.big_sha, E.big, 100000);
	_cleanup_free_ char *u = url(&E.https, "big.bin");
	struct gp_fetch_result res;
	assert_int_equal(fetch(t, &o, u, E.big_sha, &res), 0);
	assert_int_equal(res.http_code, 206);
	assert_cached(t, E.big_sha, E.big, BIG_LEN);
	assert_int_equal(log_lines(&E.https), 1);
	_cleanup_free_ char *l = log_line(&E.https, 0);
	assert_string_equal(l, "GET /big.bin range=bytes=100000-");
	/* Progress counts the resumed prefix in both done and total. */
	assert_true(p.first_done >= 100000);
	assert_int_equal(p.last_total, BIG_LEN);
	gp_fetch_result_clear(&res);
}

static void test_no_range_support_restarts(void **state)
{
	struct t *t = *state;
	write_part(t, E.big_sha, E.big, 100000);
	_cleanup_free_ char *u = url(&E.norange, "big.bin");
	struct gp_fetch_opts o = opts_for();
	struct gp_fetch_result res;
	assert_int_equal(fetch(t, &o, u, E.big_sha, &res), 0);
	assert_int_equal(res.http_code, 200);
	assert_int_equal(res.attempts, 1);
	assert_cached(t, E.big_sha, E.big, BIG_LEN);
	/* One request: the 200 answer itself was taken from byte zero. */
	assert_int_equal(log_lines(&E.norange), 1);
	_cleanup_free_ char *l = log_line(&E.norange, 0);
	assert_string_equal(l, "GET /big.bin range=bytes=100000-");
	gp_fetch_result_clear(&res);
}

static void test_complete_part(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	_cleanup_free_ char *u = url(&E.https, "big.bin");
	struct gp_fetch_result res;
	/* A whole, correct .part is finished without any request. */
	write_part(t, E.big_sha, E.big, BIG_LEN);
	assert_int_equal(fetch(t, &o, u, E.big_sha, &res), 0);
	assert_int_equal(res.attempts, 0);
	assert_cached(t, E.big_sha, E.big, BIG_LEN);
	assert_int_equal(log_lines(&E.https), 0);
	gp_fetch_result_clear(&res);

	/* Whole but wrong (size unknown): the server says 416, the local file is
	 * hashed, fails, and is downloaded again from zero. */
	_cleanup_free_ char *cp = cache_host_path(t, E.big_sha);
	unlink(cp);
	_cleanup_free_ char *bad = gp_xmalloc(BIG_LEN);
	memcpy(bad, E.big, BIG_LEN);
	bad[10] ^= 1;
	write_part(t, E.big_sha, bad, BIG_LEN);
	struct prog p = { 0 };
	o.progress = on_progress;
	o.progress_data = &p;
	assert_int_equal(fetch(t, &o, u, E.big_sha, &res), 0);
	assert_cached(t, E.big_sha, E.big, BIG_LEN);
	assert_int_equal(log_lines(&E.https), 2);
	_cleanup_free_ char *l0 = log_line(&E.https, 0);
	_cleanup_free_ char *l1 = log_line(&E.https, 1);
	_cleanup_free_ char *want = gp_xasprintf("GET /big.bin range=bytes=%d-", BIG_LEN);
	assert_string_equal(l0, want);
	assert_string_equal(l1, "GET /big.bin range=-");
	assert_int_equal(p.retries, 1);
	assert_contains(p.retry_msg, "sha256 mismatch");
	gp_fetch_result_clear(&res);
}

static void test_hash_mismatch(void **state)
{
	struct t *t = *state;
	struct prog p = { 0 };
	struct gp_fetch_opts o = opts_for();
	o.progress = on_progress;
	o.progress_data = &p;
	struct gp_fetch_result res;
	/* Bad bytes once: deleted, fetched again, fine. */
	_cleanup_free_ char *u = url(&E.https, "small.bin?corrupt=1&t=mm");
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), 0);
	assert_cached(t, E.small_sha, E.small, SMALL_LEN);
	assert_int_equal(log_lines(&E.https), 2);
	assert_int_equal(p.retries, 1);
	assert_contains(p.retry_msg, E.small_sha);
	gp_fetch_result_clear(&res);

	/* Always the wrong file: fails after the one retry, naming both hashes,
	 * and leaves nothing behind. */
	truncate(E.https.log, 0);
	_cleanup_free_ char *u2 = url(&E.https, "small.bin");
	assert_int_equal(fetch(t, &o, u2, E.big_sha, &res), -GP_FETCH_ECHECKSUM);
	assert_contains(res.msg, E.big_sha);
	assert_contains(res.msg, E.small_sha);
	assert_contains(res.msg, "expected");
	assert_int_equal(res.attempts, 2);
	assert_int_equal(log_lines(&E.https), 2);
	_cleanup_free_ char *part = gp_xasprintf("%s.part", E.big_sha);
	_cleanup_free_ char *pp = cache_host_path(t, part);
	_cleanup_free_ char *fp = cache_host_path(t, E.big_sha);
	assert_int_equal(access(pp, F_OK), -1);
	assert_int_equal(access(fp, F_OK), -1);
	gp_fetch_result_clear(&res);

	/* More bytes than the size given: the same, as a size error. */
	_cleanup_fetcher_ struct gp_fetcher *f = new_fetcher(t, &o);
	struct gp_fetch_artifact a = { .url = u2, .sha256 = E.small_sha, .size = 1000 };
	_cleanup_free_ char *cp = cache_host_path(t, E.small_sha);
	assert_int_equal(unlink(cp), 0);
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), -GP_FETCH_ESIZE);
	assert_contains(res.msg, "1000 bytes");
	assert_int_equal(access(pp, F_OK), -1);
	gp_fetch_result_clear(&res);
}

static void test_drop_resumes(void **state)
{
	struct t *t = *state;
	struct prog p = { 0 };
	struct gp_fetch_opts o = opts_for();
	o.progress = on_progress;
	o.progress_data = &p;
	_cleanup_free_ char *u = url(&E.https, "big.bin?drop=5000&t=drop");
	struct gp_fetch_result res;
	assert_int_equal(fetch(t, &o, u, E.big_sha, &res), 0);
	assert_int_equal(res.attempts, 2);
	assert_cached(t, E.big_sha, E.big, BIG_LEN);
	assert_int_equal(log_lines(&E.https), 2);
	_cleanup_free_ char *l = log_line(&E.https, 1);
	assert_string_equal(l, "GET /big.bin?drop=5000&t=drop range=bytes=5000-");
	assert_int_equal(p.retries, 1);
	assert_int_equal(p.starts, 2);
	assert_int_equal(p.dones, 1);
	gp_fetch_result_clear(&res);
}

/* Drops that still move the file forward do not use up the attempts. */
static void test_progress_keeps_retrying(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	o.max_attempts = 2;
	_cleanup_free_ char *u = url(&E.https, "huge.bin?drop=1100000&count=3&t=pk");
	struct gp_fetch_result res;
	assert_int_equal(fetch(t, &o, u, E.huge_sha, &res), 0);
	assert_int_equal(res.attempts, 3);
	assert_int_equal(log_lines(&E.https), 3);
	_cleanup_free_ char *l = log_line(&E.https, 2);
	assert_contains(l, "range=bytes=2200000-");
	gp_fetch_result_clear(&res);

	/* Without progress the budget holds: 2 attempts, then give up. */
	_cleanup_free_ char *v = url(&E.https, "huge.bin?drop=1000&count=3&t=pk2");
	assert_int_equal(fetch(t, &o, v, E.big_sha, &res), -GP_FETCH_ENETWORK);
	assert_int_equal(res.attempts, 2);
	gp_fetch_result_clear(&res);
}

static void test_retry_after(void **state)
{
	struct t *t = *state;
	struct prog p = { 0 };
	struct gp_fetch_opts o = opts_for();
	o.progress = on_progress;
	o.progress_data = &p;
	/* Retry-After: 1 (s) capped at 150 ms, well above the 1 ms backoff. */
	o.retry_after_max_ms = 150;
	_cleanup_free_ char *u = url(&E.https,
	                             "small.bin?status=503&count=2&retry_after=1&t=ra");
	struct gp_fetch_result res;
	int64_t t0 = now_ms();
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), 0);
	int64_t dt = now_ms() - t0;
	assert_int_equal(res.attempts, 3);
	assert_int_equal(p.retries, 2);
	assert_int_equal(p.retry_in[0], 150);
	assert_int_equal(p.retry_in[1], 150);
	assert_contains(p.retry_msg, "HTTP 503");
	assert_true(dt >= 300);
	assert_true(dt < 1500);
	assert_cached(t, E.small_sha, E.small, SMALL_LEN);
	gp_fetch_result_clear(&res);

	/* Each transient status is retried. */
	static const int codes[] = { 408, 429, 500, 502, 504 };
	for (size_t i = 0; i < ARRAY_SIZE(codes); i++) {
		_cleanup_free_ char *q = gp_xasprintf("f0.bin?status=%d&count=1",
		                                      codes[i]);
		_cleanup_free_ char *v = url(&E.https, q);
		_cleanup_fetcher_ struct gp_fetcher *f = new_fetcher(t, &o);
		struct gp_fetch_artifact a = { .url = v,
			                       .sha256 = NULL,
			                       .trusted = false };
		/* No sha256 wanted here: the first request decides. */
		_cleanup_free_ char *d = make_data(SMALL_LEN, 10);
		char sha[65];
		gp_sha256_hex(d, SMALL_LEN, sha);
		a.sha256 = sha;
		assert_int_equal(gp_fetch_one(f, &a, &res, NULL), 0);
		assert_int_equal(res.attempts, 2);
		gp_fetch_result_clear(&res);
		_cleanup_free_ char *cp = cache_host_path(t, sha);
		unlink(cp);
	}
}

static void test_exponential_backoff(void **state)
{
	struct t *t = *state;
	struct prog p = { 0 };
	struct gp_fetch_opts o = opts_for();
	o.progress = on_progress;
	o.progress_data = &p;
	o.backoff_ms = 40;
	o.max_backoff_ms = 1000;
	_cleanup_free_ char *u = url(&E.https, "small.bin?status=500&count=3&t=bo");
	struct gp_fetch_result res;
	int64_t t0 = now_ms();
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), 0);
	assert_true(now_ms() - t0 >= 40 + 80 + 160);
	assert_int_equal(res.attempts, 4);
	assert_int_equal(p.retries, 3);
	assert_int_equal(p.retry_in[0], 40);
	assert_int_equal(p.retry_in[1], 80);
	assert_int_equal(p.retry_in[2], 160);
	gp_fetch_result_clear(&res);

	/* The cap holds. */
	memset(&p, 0, sizeof p);
	o.max_backoff_ms = 50;
	_cleanup_free_ char *u2 = url(&E.https, "small.bin?status=500&count=3&t=bo2");
	_cleanup_free_ char *cp = cache_host_path(t, E.small_sha);
	unlink(cp);
	assert_int_equal(fetch(t, &o, u2, E.small_sha, &res), 0);
	assert_int_equal(p.retry_in[2], 50);
	gp_fetch_result_clear(&res);
}

static void test_no_retry_on_client_errors(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	struct gp_fetch_result res;
	_cleanup_free_ char *u = url(&E.https, "missing.bin");
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), -GP_FETCH_EHTTP);
	assert_int_equal(res.http_code, 404);
	assert_int_equal(res.attempts, 1);
	assert_contains(res.msg, "HTTP 404");
	assert_contains(res.msg, u);
	gp_fetch_result_clear(&res);
	_cleanup_free_ char *u2 = url(&E.https, "small.bin?status=403");
	assert_int_equal(fetch(t, &o, u2, E.small_sha, &res), -GP_FETCH_EHTTP);
	assert_int_equal(res.http_code, 403);
	assert_int_equal(res.attempts, 1);
	gp_fetch_result_clear(&res);
	assert_int_equal(log_lines(&E.https), 2);
	/* Nothing unverified is left under the final name. */
	_cleanup_free_ char *fp = cache_host_path(t, E.small_sha);
	assert_int_equal(access(fp, F_OK), -1);
}

static void test_retries_run_out(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	o.max_attempts = 3;
	struct gp_fetch_result res;
	_cleanup_free_ char *u = url(&E.https, "small.bin?status=503&t=out");
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res), -GP_FETCH_EHTTP);
	assert_int_equal(res.attempts, 3);
	assert_contains(res.msg, "gave up after 3 attempts");
	assert_int_equal(log_lines(&E.https), 3);
	gp_fetch_result_clear(&res);

	/* Connection refused: a port nobody listens on. */
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
		                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sa;
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
	close(s);
	_cleanup_free_ char *cu = gp_xasprintf("https://127.0.0.1:%d/small.bin",
	                                       ntohs(sa.sin_port));
	assert_int_equal(fetch(t, &o, cu, E.small_sha, &res), -GP_FETCH_ENETWORK);
	assert_int_equal(res.attempts, 3);
	assert_int_equal(res.curl_code, 7);
}

static void test_stall_aborted_by_low_speed(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	/* Few bytes before the stall: libcurl averages the speed over the last
	 * seconds, so a big burst would hide the stall for a while. */
	_cleanup_free_ char *u = url(&E.https, "big.bin?stall=512&stall_s=10&t=stall");
	struct gp_fetch_result res;
	int64_t t0 = now_ms();
	assert_int_equal(fetch(t, &o, u, E.big_sha, &res), 0);
	int64_t dt = now_ms() - t0;
	assert_true(dt >= 900);
	assert_true(dt < 6000);
	assert_int_equal(res.attempts, 2);
	assert_cached(t, E.big_sha, E.big, BIG_LEN);
	_cleanup_free_ char *l = log_line(&E.https, 1);
	assert_contains(l, "range=bytes=512-");
	gp_fetch_result_clear(&res);
}

static void test_offline(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	struct gp_fetch_result res[3];
	_cleanup_free_ char *u = url(&E.https, "small.bin");
	assert_int_equal(fetch(t, &o, u, E.small_sha, &res[0]), 0);
	gp_fetch_result_clear(&res[0]);
	truncate(E.https.log, 0);

	o.offline = true;
	_cleanup_fetcher_ struct gp_fetcher *f = new_fetcher(t, &o);
	_cleanup_free_ char *missing = url(&E.https, "big.bin");
	_cleanup_free_ char *fu = gp_xasprintf("file://%s/f1.bin", E.www);
	struct gp_fetch_artifact a[3] = {
		{ .name = "small", .url = u, .sha256 = E.small_sha },
		{ .name = "big", .url = missing, .sha256 = E.big_sha },
		{ .name = "bundle", .url = fu, .trusted = true },
	};
	struct gp_err err = { 0 };
	int64_t t0 = now_ms();
	assert_int_equal(gp_fetch_many(f, a, 3, res, &err), -GP_FETCH_EOFFLINE);
	assert_true(now_ms() - t0 < 1000);
	assert_int_equal(res[0].status, 0);
	assert_true(res[0].from_cache);
	assert_int_equal(res[1].status, -GP_FETCH_EOFFLINE);
	assert_int_equal(res[1].attempts, 0);
	assert_int_equal(res[2].status, 0); /* a local bundle needs no network */
	assert_contains(err.msg, "offline");
	assert_contains(err.msg, "1 of 3");
	assert_contains(err.msg, missing);
	assert_null(strstr(err.msg, "small"));
	assert_int_equal(gp_exit_code(&err), 4);
	assert_int_equal(log_lines(&E.https), 0);
	gp_fetch_results_clear(res, 3);

	/* Nothing cached and no cache directory at all: still no network. */
	struct gp_fetch_artifact b = { .url = "https://downloads.invalid/x.tar.xz",
		                       .sha256 = E.big_sha };
	_cleanup_fetcher_ struct gp_fetcher *g = NULL;
	o.cache_dir = "/var/cache/other";
	g = new_fetcher(t, &o);
	assert_int_equal(gp_fetch_one(g, &b, res, &err), -GP_FETCH_EOFFLINE);
	assert_contains(res[0].msg, "downloads.invalid/x.tar.xz");
	assert_false(gp_root_exists(&t->root, "/var/cache/other"));
	gp_fetch_result_clear(&res[0]);
}

static void test_mirror_rewrite(void **state)
{
	struct t *t = *state;
	_cleanup_free_ char *base = gp_xasprintf("https://127.0.0.1:%d", E.https.port);
	struct gp_fetch_mirror m[] = {
		{ "https://downloads.invalid/pub", base },
		{ "https://a.invalid/", "https://m1.invalid" },
		{ "https://a.invalid/x", "https://m2.invalid/" },
	};
	struct gp_fetch_opts o = opts_for();
	o.mirrors = m;
	o.n_mirrors = ARRAY_SIZE(m);
	_cleanup_fetcher_ struct gp_fetcher *f = new_fetcher(t, &o);
	static const char *const cases[][2] = {
		{ "https://downloads.invalid/pub/small.bin", NULL },
		{ "https://downloads.invalid/pubx/small.bin", "=" },
		{ "https://downloads.invalid/pub", NULL },
		{ "https://a.invalid/x/y", "https://m2.invalid/y" },
		{ "https://a.invalid/z", "https://m1.invalid/z" },
		{ "https://a.invalid.evil/z", "=" },
		{ "https://other.invalid/a", "=" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		_cleanup_free_ char *got = gp_fetch_rewrite_url(f, cases[i][0]);
		_cleanup_free_ char *want = NULL;
		if (!cases[i][1])
			want = gp_xasprintf("%s%s", base, cases[i][0] + 29);
		else
			want = gp_xstrdup(strcmp(cases[i][1], "=") ? cases[i][1]
			                                           : cases[i][0]);
		assert_string_equal(got, want);
	}

	/* The unreachable host is never contacted: the mirror serves it. */
	struct gp_fetch_artifact a = { .url = "https://downloads.invalid/pub/small.bin",
		                       .sha256 = E.small_sha };
	struct gp_fetch_result res;
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), 0);
	assert_cached(t, E.small_sha, E.small, SMALL_LEN);
	_cleanup_free_ char *l = log_line(&E.https, 0);
	assert_string_equal(l, "GET /small.bin range=-");
	gp_fetch_result_clear(&res);

	/* Messages name both URLs. */
	a = (struct gp_fetch_artifact){ .url = "https://downloads.invalid/pub/nope.bin",
		                        .sha256 = E.big_sha };
	assert_int_equal(gp_fetch_one(f, &a, &res, NULL), -GP_FETCH_EHTTP);
	assert_contains(res.msg, "mirror of https://downloads.invalid/pub/nope.bin");
	gp_fetch_result_clear(&res);

	/* Bad mirror options are refused. */
	struct gp_fetch_mirror bad = { "", "https://x.invalid" };
	o.mirrors = &bad;
	o.n_mirrors = 1;
	struct gp_fetcher *g = NULL;
	assert_int_equal(gp_fetcher_new(&t->root, &o, &g, NULL), -EINVAL);
}

static void test_fetch_many(void **state)
{
	struct t *t = *state;
	struct prog p = { 0 };
	struct gp_fetch_opts o = opts_for();
	o.progress = on_progress;
	o.progress_data = &p;
	o.max_parallel = 2;
	enum { N = 7 };
	struct gp_fetch_artifact a[N];
	char *urls[N];
	char shas[N][65];
	for (int i = 0; i < 6; i++) {
		/* Each transfer stalls a moment, so they overlap. */
		_cleanup_free_ char *q = gp_xasprintf("f%d.bin?stall=1024&stall_s=0.3",
		                                      i);
		urls[i] = url(&E.https, q);
		_cleanup_free_ char *d = make_data(SMALL_LEN, (uint32_t)(10 + i));
		gp_sha256_hex(d, SMALL_LEN, shas[i]);
		a[i] = (struct gp_fetch_artifact){ .url = urls[i], .sha256 = shas[i] };
	}
	free(urls[3]);
	a[3].url = urls[3] = url(&E.https, "f3-missing.bin");
	/* The same file twice is fetched once. */
	urls[6] = NULL;
	a[6] = a[0];
	struct gp_fetch_result res[N];
	struct gp_err err = { 0 };
	_cleanup_fetcher_ struct gp_fetcher *f = new_fetcher(t, &o);
	assert_int_equal(gp_fetch_many(f, a, 0, res, &err), 0);
	assert_int_equal(gp_fetch_many(f, a, N, res, &err), -GP_FETCH_EHTTP);
	for (int i = 0; i < N; i++) {
		if (i == 3) {
			assert_int_equal(res[i].status, -GP_FETCH_EHTTP);
			assert_int_equal(res[i].http_code, 404);
			continue;
		}
		assert_int_equal(res[i].status, 0);
		assert_string_equal(res[i].sha256, shas[i == 6 ? 0 : i]);
	}
	assert_true(res[6].from_cache);
	assert_contains(err.msg, "1 of 7 downloads failed");
	assert_contains(err.msg, "f3-missing.bin");
	assert_int_equal(p.max_active, 2);
	assert_int_equal(p.dones, N);
	/* f0..f5 minus f3: 5 files, each stalled once then resumed; f3: 1; the
	 * duplicate: none. */
	assert_int_equal(log_lines(&E.https), 5 * 2 + 1);
	gp_fetch_results_clear(res, N);
	for (int i = 0; i < 6; i++)
		free(urls[i]);
}

static void test_proxy_from_environment(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	o.allow_http = true;
	_cleanup_free_ char *proxy = gp_xasprintf("http://127.0.0.1:%d", E.http.port);
	setenv("http_proxy", proxy, 1);
	struct gp_fetch_result res;
	int rc = fetch(t, &o, "http://mirror.invalid/small.bin", E.small_sha, &res);
	unsetenv("http_proxy");
	assert_int_equal(rc, 0);
	assert_cached(t, E.small_sha, E.small, SMALL_LEN);
	_cleanup_free_ char *l = log_line(&E.http, 0);
	assert_string_equal(l, "GET http://mirror.invalid/small.bin range=-");
	gp_fetch_result_clear(&res);
}

static void test_cancel_keeps_part(void **state)
{
	struct t *t = *state;
	struct prog p = { .cancel_at = 1 };
	struct gp_fetch_opts o = opts_for();
	o.progress = on_progress;
	o.progress_data = &p;
	_cleanup_free_ char *u = url(&E.https, "big.bin?stall=8192&stall_s=3&t=cancel");
	struct gp_fetch_result res;
	assert_int_equal(fetch(t, &o, u, E.big_sha, &res), -GP_FETCH_ECANCELED);
	assert_contains(res.msg, "cancelled");
	_cleanup_free_ char *part = gp_xasprintf("%s.part", E.big_sha);
	_cleanup_free_ char *pp = cache_host_path(t, part);
	struct stat st;
	assert_int_equal(stat(pp, &st), 0);
	assert_true(st.st_size > 0 && st.st_size <= 8192);
	gp_fetch_result_clear(&res);
	/* The next run resumes where it stopped. */
	p.cancel_at = 0;
	assert_int_equal(fetch(t, &o, u, E.big_sha, &res), 0);
	assert_cached(t, E.big_sha, E.big, BIG_LEN);
	_cleanup_free_ char *l = log_line(&E.https, 1);
	_cleanup_free_ char *want = gp_xasprintf("range=bytes=%lld-",
	                                         (long long)st.st_size);
	assert_contains(l, want);
	gp_fetch_result_clear(&res);
}

static void test_stop_signal(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	_cleanup_free_ char *u = url(&E.https, "small.bin");
	struct gp_fetch_result res;
	gp_run_stop_signal = SIGTERM;
	int rc = fetch(t, &o, u, E.small_sha, &res);
	gp_run_stop_signal = 0;
	assert_int_equal(rc, -EINTR);
	gp_fetch_result_clear(&res);
}

/* A background download read along while it runs: the reader gets every
 * byte once, across a stall and the resume after it, and its end only after
 * the download's own check. */
static void test_prefetch_read_along(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	o.low_speed_time = 30; /* the stall ends with the server closing */
	_cleanup_free_ char *u = url(&E.https, "big.bin?stall=8192&stall_s=0.5&t=along");
	struct gp_prefetch *pf = NULL;
	gp_prefetch_list_add(
	    &pf, &(struct gp_fetch_artifact){ .url = u, .sha256 = E.big_sha });
	assert_int_equal(gp_prefetch_count(pf), 1);
	struct gp_err err = { 0 };
	assert_int_equal(gp_prefetch_start(pf, &t->root, &o, &err), 0);
	assert_true(gp_prefetch_has(pf, E.big_sha));
	struct gp_prefetch_reader *r = gp_prefetch_reader_new(pf, E.big_sha);
	assert_non_null(r);
	char *got = gp_xmalloc(BIG_LEN + 1);
	size_t len = 0;
	for (;;) {
		ssize_t n = gp_prefetch_read(r, got + len, BIG_LEN + 1 - len);
		assert_true(n >= 0);
		if (n == 0)
			break;
		len += (size_t)n;
	}
	assert_int_equal(len, BIG_LEN);
	assert_memory_equal(got, E.big, BIG_LEN);
	assert_true(gp_prefetch_done(pf, E.big_sha));
	struct gp_fetch_result res;
	assert_true(gp_prefetch_wait(pf, E.big_sha, &res));
	assert_int_equal(res.status, 0);
	assert_int_equal(res.attempts, 2);
	gp_fetch_result_clear(&res);
	gp_prefetch_reader_free(r);
	free(got);
	gp_prefetch_free(pf);
	assert_cached(t, E.big_sha, E.big, BIG_LEN);
}

/* Freeing a prefetch whose download stalls stops it at once (no waiting for
 * the stall to end), keeps the .part, and a read started before fails. */
static void test_prefetch_free_cancels(void **state)
{
	struct t *t = *state;
	struct gp_fetch_opts o = opts_for();
	o.low_speed_time = 30;
	_cleanup_free_ char *u = url(&E.https,
	                             "big.bin?stall=8192&stall_s=20&t=cancelpf");
	struct gp_prefetch *pf = NULL;
	gp_prefetch_list_add(
	    &pf, &(struct gp_fetch_artifact){ .url = u, .sha256 = E.big_sha });
	struct gp_err err = { 0 };
	assert_int_equal(gp_prefetch_start(pf, &t->root, &o, &err), 0);
	struct gp_prefetch_reader *r = gp_prefetch_reader_new(pf, E.big_sha);
	char buf[8192];
	size_t len = 0;
	while (len < sizeof buf) { /* the bytes before the stall */
		ssize_t n = gp_prefetch_read(r, buf + len, sizeof buf - len);
		assert_true(n > 0);
		len += (size_t)n;
	}
	gp_prefetch_reader_free(r);
	int64_t t0 = now_ms();
	gp_prefetch_free(pf);
	assert_true(now_ms() - t0 < 5000);
	_cleanup_free_ char *part = gp_xasprintf("%s.part", E.big_sha);
	_cleanup_free_ char *pp = cache_host_path(t, part);
	struct stat st;
	assert_int_equal(stat(pp, &st), 0);
	assert_int_equal(st.st_size, 8192);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_download_and_cache_hit),
		T(test_fds_cloexec),
		T(test_http_refused_unless_allowed),
		T(test_tls_verified),
		T(test_redirects_only_to_https),
		T(test_sha256_required),
		T(test_resume_with_range),
		T(test_no_range_support_restarts),
		T(test_complete_part),
		T(test_hash_mismatch),
		T(test_drop_resumes),
		T(test_progress_keeps_retrying),
		T(test_retry_after),
		T(test_exponential_backoff),
		T(test_no_retry_on_client_errors),
		T(test_retries_run_out),
		T(test_stall_aborted_by_low_speed),
		T(test_offline),
		T(test_mirror_rewrite),
		T(test_fetch_many),
		T(test_proxy_from_environment),
		T(test_prefetch_read_along),
		T(test_prefetch_free_cancels),
		T(test_cancel_keeps_part),
		T(test_stop_signal),
#undef T
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
