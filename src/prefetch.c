/* Background downloads (prefetch.h). One thread, one fetcher, one
 * gp_fetch_many; the progress callback's DONE event is where each result is
 * handed over, since gp_fetch_many itself returns only when all are done. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "gpuprov/exitcodes.h"
#include "gpuprov/prefetch.h"
#include "gpuprov/sha256.h"

struct slot {
	struct gp_fetch_artifact a; /* strings owned */
	char sha[65]; /* lowercase */
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
	if (p->event == GP_FETCH_EV_DONE && p->index < pf->n) {
		const struct gp_fetch_result *r = &pf->res[p->index];
		pthread_mutex_lock(&pf->lock);
		struct slot *s = &pf->slots[p->index];
		s->res = *r;
		s->res.path = r->path ? gp_xstrdup(r->path) : NULL;
		s->done = true;
		pthread_cond_broadcast(&pf->cond);
		pthread_mutex_unlock(&pf->lock);
	}
	if (!pf->progress)
		return 0;
	struct gp_fetch_progress moved = *p;
	moved.index += GP_PREFETCH_INDEX_BASE;
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
	struct gp_fetch_opts o = *opts;
	pf->progress = o.progress;
	pf->progress_data = o.progress_data;
	o.progress = on_progress;
	o.progress_data = pf;
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
		gp_fail(err, GP_EXIT_APPLY_FAILED, "cannot start the download thread: %s",
		        strerror(rc));
		return -rc;
	}
	pf->started = true;
	return 0;
}

bool gp_prefetch_wait(struct gp_prefetch *pf, const char *sha256,
                      struct gp_fetch_result *res)
{
	char sha[65];
	if (!pf || !pf->started || !sha256 || gp_sha256_normalize(sha256, sha) < 0)
		return false;
	struct slot *s = NULL;
	for (size_t i = 0; i < pf->n && !s; i++)
		if (strcmp(pf->slots[i].sha, sha) == 0)
			s = &pf->slots[i];
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
