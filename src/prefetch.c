/* Background downloads (prefetch.h). One thread, one fetcher, one
 * gp_fetch_many; the progress callback's DONE event is where each result is
 * handed over, since gp_fetch_many itself returns only when all are done. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "gpuprov/prefetch.h"
#include "gpuprov/sha256.h"

struct slot {
	struct gp_fetch_artifact a; /* strings owned */
	char sha[65]; /* lowercase */
	/* From the thread's progress events, for readers (gp_prefetch_read). */
	bool started; /* a transfer began: the .part exists */
	uint64_t written; /* bytes of the .part that hold the file's bytes */
	unsigned restarts;
	bool done;
	struct gp_fetch_result res; /* once done: a copy, path owned */
};

struct gp_prefetch {
	struct slot *slots;
	size_t n;
	struct gp_fetch_artifact *list; /* gp_fetch_many's array (borrows slots) */
	struct gp_fetch_result *res; /* gp_fetch_many's results (the thread's) */
	struct gp_fetcher *fetcher;
	gp_fetch_progress_fn progress;
	void *progress_data;
	pthread_t thread;
	bool started;
	const struct gp_root *root;
	size_t index_base; /* progress indexes of this instance start here */
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

void gp_prefetch_list_add(struct gp_prefetch **pfp, const struct gp_fetch_artifact *a)
{
	char sha[65];
	if (!a->sha256 || !a->url || gp_sha256_normalize(a->sha256, sha) < 0)
		return;
	if (!*pfp) {
		*pfp = gp_xcalloc(1, sizeof **pfp);
		pthread_mutex_init(&(*pfp)->lock, NULL);
		pthread_cond_init(&(*pfp)->cond, NULL);
	}
	struct gp_prefetch *pf = *pfp;
	if (pf->started)
		return;
	for (size_t i = 0; i < pf->n; i++)
		if (strcmp(pf->slots[i].sha, sha) == 0)
			return;
	pf->slots = gp_xrealloc(pf->slots, (pf->n + 1) * sizeof *pf->slots);
	struct slot *s = &pf->slots[pf->n++];
	*s = (struct slot){
		.a = { .name = a->name ? gp_xstrdup(a->name) : NULL,
		       .url = gp_xstrdup(a->url),
		       .sha256 = gp_xstrdup(sha),
		       .size = a->size },
	};
	memcpy(s->sha, sha, sizeof sha);
}

size_t gp_prefetch_count(const struct gp_prefetch *pf)
{
	return pf ? pf->n : 0;
}

char *gp_prefetch_names(const struct gp_prefetch *pf)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; pf && i < pf->n; i++)
		gp_buf_printf(&b, "%s%s", i ? ", " : "",
		              pf->slots[i].a.name ? pf->slots[i].a.name
		                                  : pf->slots[i].a.url);
	return b.len ? gp_buf_steal(&b) : gp_xstrdup("");
}

/* In the thread: hands each finished artifact over, passes events on. */
static int on_progress(const struct gp_fetch_progress *p, void *userdata)
{
	struct gp_prefetch *pf = userdata;
	if (p->index < pf->n) {
		pthread_mutex_lock(&pf->lock);
		struct slot *s = &pf->slots[p->index];
		if (p->event == GP_FETCH_EV_DONE) {
			const struct gp_fetch_result *r = &pf->res[p->index];
			s->res = *r;
			s->res.path = r->path ? gp_xstrdup(r->path) : NULL;
			s->written = r->status == 0 ? r->size : s->written;
			s->done = true;
		} else {
			s->started = true;
			s->written = p->done;
		}
		s->restarts = p->restarts;
		pthread_cond_broadcast(&pf->cond);
		pthread_mutex_unlock(&pf->lock);
	}
	if (!pf->progress)
		return 0;
	struct gp_fetch_progress moved = *p;
	moved.index += pf->index_base;
	return pf->progress(&moved, pf->progress_data);
}

static void *run(void *data)
{
	struct gp_prefetch *pf = data;
	gp_fetch_many(pf->fetcher, pf->list, pf->n, pf->res, NULL);
	/* Whatever gp_fetch_many ended without a DONE event for (none
	 * expected) must not keep a waiter waiting. */
	pthread_mutex_lock(&pf->lock);
	for (size_t i = 0; i < pf->n; i++) {
		struct slot *s = &pf->slots[i];
		if (s->done)
			continue;
		s->res = pf->res[i];
		s->res.path = pf->res[i].path ? gp_xstrdup(pf->res[i].path) : NULL;
		if (!s->res.path && !s->res.status)
			s->res.status = -EINTR;
		s->done = true;
	}
	pthread_cond_broadcast(&pf->cond);
	pthread_mutex_unlock(&pf->lock);
	return NULL;
}

int gp_prefetch_start(struct gp_prefetch *pf, const struct gp_root *root,
                      const struct gp_fetch_opts *opts, struct gp_err *err)
{
	if (!pf || pf->started || !pf->n)
		return 0;
	/* Each instance its own range of progress indexes. */
	static atomic_size_t instances;
	pf->index_base = GP_PREFETCH_INDEX_BASE * (atomic_fetch_add(&instances, 1) + 1);
	pf->root = root;
	struct gp_fetch_opts o = *opts;
	pf->progress = o.progress;
	pf->progress_data = o.progress_data;
	o.progress = on_progress;
	o.progress_data = pf;
	/* One at a time, in the order the stages announced them, which is the
	 * order they apply in: the downloads share one link, and shared four
	 * ways the file the next stage waits for would arrive with the others,
	 * late, instead of first (tests/bench/overlap.sh). */
	o.max_parallel = 1;
	int rc = gp_fetcher_new(root, &o, &pf->fetcher, err);
	if (rc < 0)
		return rc;
	pf->list = gp_xcalloc(pf->n, sizeof *pf->list);
	pf->res = gp_xcalloc(pf->n, sizeof *pf->res);
	for (size_t i = 0; i < pf->n; i++)
		pf->list[i] = pf->slots[i].a;
	/* The thread inherits this mask: every signal goes to the main thread. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&pf->thread, NULL, run, pf);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		gp_fetcher_free(pf->fetcher);
		pf->fetcher = NULL;
		gp_fail(err, rc, "cannot start the download thread: %s", strerror(rc));
		return -rc;
	}
	pf->started = true;
	return 0;
}

static struct slot *find_slot(struct gp_prefetch *pf, const char *sha256)
{
	char sha[65];
	if (!pf || !pf->started || !sha256 || gp_sha256_normalize(sha256, sha) < 0)
		return NULL;
	for (size_t i = 0; i < pf->n; i++)
		if (strcmp(pf->slots[i].sha, sha) == 0)
			return &pf->slots[i];
	return NULL;
}

bool gp_prefetch_has(struct gp_prefetch *pf, const char *sha256)
{
	return find_slot(pf, sha256) != NULL;
}

bool gp_prefetch_done(struct gp_prefetch *pf, const char *sha256)
{
	struct slot *s = find_slot(pf, sha256);
	if (!s)
		return false;
	pthread_mutex_lock(&pf->lock);
	bool done = s->done;
	pthread_mutex_unlock(&pf->lock);
	return done;
}

bool gp_prefetch_wait(struct gp_prefetch *pf, const char *sha256,
                      struct gp_fetch_result *res)
{
	struct slot *s = find_slot(pf, sha256);
	if (!s)
		return false;
	pthread_mutex_lock(&pf->lock);
	while (!s->done)
		pthread_cond_wait(&pf->cond, &pf->lock);
	*res = s->res;
	res->path = s->res.path ? gp_xstrdup(s->res.path) : NULL;
	pthread_mutex_unlock(&pf->lock);
	return true;
}

/* ---- reading along ---- */

struct gp_prefetch_reader {
	struct gp_prefetch *pf;
	struct slot *s;
	int fd;
	uint64_t pos;
	unsigned restarts; /* the slot's count when fd was opened */
	int status; /* the read error returned, once there was one */
};

struct gp_prefetch_reader *gp_prefetch_reader_new(struct gp_prefetch *pf,
                                                  const char *sha256)
{
	struct slot *s = find_slot(pf, sha256);
	if (!s)
		return NULL;
	struct gp_prefetch_reader *r = gp_xcalloc(1, sizeof *r);
	*r = (struct gp_prefetch_reader){ .pf = pf, .s = s, .fd = -1 };
	return r;
}

/* Under the lock: opens the .part (or, once done, the cached file). */
static int reader_open(struct gp_prefetch_reader *r)
{
	struct slot *s = r->s;
	_cleanup_free_ char *path = gp_fetch_cache_path(r->pf->fetcher, s->sha);
	_cleanup_free_ char *part = gp_xasprintf("%s.part", path);
	int fd = -ENOENT;
	if (!s->done)
		fd = gp_root_openat(r->pf->root, part, O_RDONLY | O_NOFOLLOW, 0);
	if (fd == -ENOENT && s->done && s->res.status == 0)
		fd = gp_root_openat(r->pf->root, path, O_RDONLY | O_NOFOLLOW, 0);
	if (fd >= 0) {
		r->fd = fd;
		r->restarts = s->restarts;
	}
	return fd;
}

ssize_t gp_prefetch_read(void *userdata, void *buf, size_t len)
{
	struct gp_prefetch_reader *r = userdata;
	struct slot *s = r->s;
	struct gp_prefetch *pf = r->pf;
	if (r->status)
		return r->status;
	uint64_t avail = 0;
	pthread_mutex_lock(&pf->lock);
	for (;;) {
		if (r->fd >= 0 && s->restarts != r->restarts) {
			r->status = -ESTALE; /* what we read may be another file's */
			break;
		}
		if (r->fd < 0 && (s->started || s->done)) {
			int fd = reader_open(r);
			if (fd < 0 && fd != -ENOENT) {
				r->status = fd;
				break;
			}
		}
		if (r->fd >= 0 && s->written > r->pos) {
			avail = s->written - r->pos;
			break;
		}
		if (s->done) {
			/* The end, once every byte was read: only after the
			 * download's own sha256 check passed. */
			if (s->res.status < 0)
				r->status = -EIO;
			break;
		}
		pthread_cond_wait(&pf->cond, &pf->lock);
	}
	pthread_mutex_unlock(&pf->lock);
	if (r->status)
		return r->status;
	if (!avail)
		return 0;
	ssize_t n = pread(r->fd, buf, len < avail ? len : (size_t)avail, (off_t)r->pos);
	if (n < 0)
		return r->status = -errno;
	if (n == 0) /* shorter than the thread said: the file was replaced */
		return r->status = -ESTALE;
	r->pos += (uint64_t)n;
	return n;
}

bool gp_prefetch_reader_restarted(const struct gp_prefetch_reader *r)
{
	return r && r->status == -ESTALE;
}

void gp_prefetch_reader_free(struct gp_prefetch_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

void gp_prefetch_free(struct gp_prefetch *pf)
{
	if (!pf)
		return;
	if (pf->started) {
		gp_fetch_cancel(pf->fetcher);
		pthread_join(pf->thread, NULL);
	}
	gp_fetcher_free(pf->fetcher);
	gp_fetch_results_clear(pf->res, pf->n);
	for (size_t i = 0; i < pf->n; i++) {
		struct slot *s = &pf->slots[i];
		free((char *)s->a.name);
		free((char *)s->a.url);
		free((char *)s->a.sha256);
		gp_fetch_result_clear(&s->res);
	}
	free(pf->slots);
	free(pf->list);
	free(pf->res);
	pthread_mutex_destroy(&pf->lock);
	pthread_cond_destroy(&pf->cond);
	free(pf);
}
