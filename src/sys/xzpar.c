/* Parallel decoding of the blocks of one .xz stream (see xzpar.h). The
 * caller's thread parses the framing and copies each block's bytes into a
 * buffer of its recorded size; workers decode complete blocks with
 * lzma_block_buffer_decode (which checks the sizes recorded in the header
 * and the block's check); the caller takes decoded blocks oldest first.
 * The index is checked against the blocks with lzma_index_hash, the
 * footer against the index, as liblzma's stream decoder does. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lzma.h>

#include "gpuprov/xzblocks.h"
#include "gpuprov/xzpar.h"

#define MAX_WORKERS 16
#define RING (MAX_WORKERS + 2)

enum bstate { B_FREE, B_FILL, B_READY, B_BUSY, B_DONE, B_FAIL };

struct blk {
	enum bstate st;
	uint8_t *in, *out;
	uint64_t in_len, in_have, out_len;
	int err; /* B_FAIL */
	const char *why;
};

enum pstate { P_SHDR, P_BHDR, P_BDATA, P_INDEX, P_FOOTER, P_END };

struct gp_xzpar {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t th[MAX_WORKERS];
	unsigned nthreads, started;
	bool stop;
	uint64_t mem_stop, budget, held, peak;
	/* Blocks in stream order from head; all fields under the lock except a
	 * B_FILL block's buffer (the caller's) and a B_BUSY one's (its
	 * worker's). */
	struct blk ring[RING];
	unsigned head, count, nslots;
	bool taken; /* the caller holds ring[head].out */
	/* The parser: the caller's alone. */
	enum pstate ps;
	uint8_t hdr[GP_XZ_BLOCK_HEADER_MAX];
	size_t have, need;
	bool pending; /* hdr holds a parsed block header waiting for a slot */
	struct gp_xz_block next;
	unsigned check;
	uint64_t blocks;
	lzma_index_hash *ih;
	char msg[160];
};

static int set_msg(struct gp_xzpar *p, int rc, const char *why)
{
	snprintf(p->msg, sizeof p->msg, "%s", why);
	return rc;
}

/* An LZMA2 match reaches back only into what the block decoded before it,
 * so a dictionary of the block's uncompressed size decodes it exactly as
 * the recorded one would (liblzma allocates the whole dictionary up front:
 * a block of a few bytes recording 256 MiB would get all of it). The
 * memory limit is still checked against the recorded size. */
static void cap_dictionary(lzma_filter *filters, uint64_t uncompressed)
{
	uint64_t cap = uncompressed < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN
	                                                 : uncompressed;
	for (unsigned i = 0; filters[i].id != LZMA_VLI_UNKNOWN; i++) {
		lzma_options_lzma *o = filters[i].options;
		if (filters[i].id == LZMA_FILTER_LZMA2 && o->dict_size > cap)
			o->dict_size = (uint32_t)cap;
	}
}

/* A worker's job: the whole block in b->in to b->out. */
static int decode_block(const struct gp_xzpar *p, struct blk *b, const char **why)
{
	lzma_filter filters[LZMA_FILTERS_MAX + 1];
	lzma_block blk = { .version = 1,
		           .check = (lzma_check)p->check,
		           .filters = filters };
	blk.header_size = lzma_block_header_size_decode(b->in[0]);
	lzma_ret r = lzma_block_header_decode(&blk, NULL, b->in);
	if (r != LZMA_OK) {
		*why = r == LZMA_MEM_ERROR ? "out of memory"
		                           : "unsupported xz block options";
		return r == LZMA_MEM_ERROR ? -ENOMEM : -EBADMSG;
	}
	int rc = 0;
	uint64_t mem = lzma_raw_decoder_memusage(filters);
	if (mem == UINT64_MAX || mem > p->mem_stop) {
		*why =
		    "needs more than 256 MiB of memory to decode (dictionary too large)";
		rc = -E2BIG;
		goto out;
	}
	cap_dictionary(filters, b->out_len);
	b->out = malloc(b->out_len ? b->out_len : 1);
	if (!b->out) {
		*why = "out of memory";
		rc = -ENOMEM;
		goto out;
	}
	size_t in_pos = blk.header_size, out_pos = 0;
	r = lzma_block_buffer_decode(&blk, NULL, b->in, &in_pos, b->in_len, b->out,
	                             &out_pos, b->out_len);
	if (r != LZMA_OK || in_pos != b->in_len || out_pos != b->out_len) {
		*why = r == LZMA_UNSUPPORTED_CHECK ? "unsupported xz check type"
		       : r == LZMA_MEM_ERROR       ? "out of memory"
		                                   : "corrupt xz data";
		rc = r == LZMA_MEM_ERROR ? -ENOMEM : -EBADMSG;
	}
out:
	for (unsigned i = 0; filters[i].id != LZMA_VLI_UNKNOWN; i++)
		free(filters[i].options);
	return rc;
}

static struct blk *at(struct gp_xzpar *p, unsigned i)
{
	return &p->ring[(p->head + i) % RING];
}

static void *worker(void *data)
{
	struct gp_xzpar *p = data;
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct blk *b = NULL;
		for (unsigned i = 0; i < p->count && !b; i++)
			if (at(p, i)->st == B_READY)
				b = at(p, i);
		if (!b) {
			pthread_cond_wait(&p->cond, &p->lock);
			continue;
		}
		b->st = B_BUSY;
		pthread_mutex_unlock(&p->lock);
		const char *why = NULL;
		int rc = decode_block(p, b, &why);
		free(b->in);
		b->in = NULL;
		pthread_mutex_lock(&p->lock);
		p->held -= b->in_len;
		b->st = rc ? B_FAIL : B_DONE;
		b->err = rc;
		b->why = why;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

bool gp_xzpar_suits(const uint8_t *p, size_t n, size_t *need)
{
	unsigned check;
	const char *why;
	*need = 0;
	int r = gp_xz_stream_header(p, n, &check, need, &why);
	if (r != 0)
		return false; /* GP_XZ_MORE sets *need */
	struct gp_xz_block b;
	size_t bneed = 0;
	r = gp_xz_block_header(p + GP_XZ_STREAM_HEADER_SIZE, n - GP_XZ_STREAM_HEADER_SIZE,
	                       check, &b, &bneed, &why);
	if (r == GP_XZ_MORE)
		*need = GP_XZ_STREAM_HEADER_SIZE + bneed;
	return r == 0 && b.compressed <= GP_XZPAR_BLOCK_MAX &&
	       b.uncompressed <= GP_XZPAR_BLOCK_MAX;
}

int gp_xzpar_new(unsigned threads, uint64_t mem_stop, struct gp_xzpar **out)
{
	*out = NULL;
	if (threads < 1)
		threads = 1;
	if (threads > MAX_WORKERS)
		threads = MAX_WORKERS;
	struct gp_xzpar *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->nthreads = threads;
	p->nslots = threads + 2;
	p->budget = GP_XZPAR_BUDGET(threads);
	p->mem_stop = mem_stop;
	p->need = GP_XZ_STREAM_HEADER_SIZE;
	p->ih = lzma_index_hash_init(NULL, NULL);
	if (!p->ih) {
		gp_xzpar_free(p);
		return -ENOMEM;
	}
	/* Signals stay with the caller's thread (its waits must see them). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = 0;
	for (; p->started < threads; p->started++) {
		rc = pthread_create(&p->th[p->started], NULL, worker, p);
		if (rc)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		gp_xzpar_free(p);
		return -rc;
	}
	*out = p;
	return 0;
}

/* With no worker on a block: every block's buffers. */
static void free_blocks(struct gp_xzpar *p)
{
	for (unsigned i = 0; i < RING; i++) {
		free(p->ring[i].in);
		free(p->ring[i].out);
		p->ring[i] = (struct blk){ .st = B_FREE };
	}
}

void gp_xzpar_reset(struct gp_xzpar *p)
{
	pthread_mutex_lock(&p->lock);
	/* No worker starts on a block now; those decoding one finish. */
	for (unsigned i = 0; i < p->count; i++)
		if (at(p, i)->st == B_READY)
			at(p, i)->st = B_FILL;
	for (;;) {
		bool busy = false;
		for (unsigned i = 0; i < p->count; i++)
			busy = busy || at(p, i)->st == B_BUSY;
		if (!busy)
			break;
		pthread_cond_wait(&p->cond, &p->lock);
	}
	free_blocks(p);
	p->head = p->count = 0;
	p->taken = false;
	p->held = p->peak = 0;
	pthread_mutex_unlock(&p->lock);
	p->ps = P_SHDR;
	p->have = 0;
	p->need = GP_XZ_STREAM_HEADER_SIZE;
	p->pending = false;
	p->blocks = 0;
	p->msg[0] = '\0';
	p->ih = lzma_index_hash_init(p->ih, NULL); /* given one: resets it, never NULL */
}

void gp_xzpar_free(struct gp_xzpar *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->started; i++)
		pthread_join(p->th[i], NULL);
	free_blocks(p);
	lzma_index_hash_end(p->ih, NULL);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}

/* Under the lock: whether the parsed block header in p->next gets a slot. */
static bool admissible(const struct gp_xzpar *p)
{
	uint64_t cost = p->next.total + p->next.uncompressed;
	return p->count == 0 || (p->count < p->nslots && p->held + cost <= p->budget);
}

bool gp_xzpar_hungry(const struct gp_xzpar *p)
{
	if (p->ps == P_END)
		return false;
	if (!p->pending)
		return true;
	pthread_mutex_lock((pthread_mutex_t *)&p->lock);
	bool ok = admissible(p);
	pthread_mutex_unlock((pthread_mutex_t *)&p->lock);
	return ok;
}

bool gp_xzpar_ended(const struct gp_xzpar *p)
{
	return p->ps == P_END;
}

/* Gives the pending block a slot, its header copied in. */
static int admit(struct gp_xzpar *p)
{
	uint8_t *in = malloc(p->next.total);
	if (!in)
		return set_msg(p, -ENOMEM, "out of memory");
	memcpy(in, p->hdr, p->next.header_size);
	pthread_mutex_lock(&p->lock);
	struct blk *b = at(p, p->count);
	*b = (struct blk){ .st = B_FILL,
		           .in = in,
		           .in_len = p->next.total,
		           .in_have = p->next.header_size,
		           .out_len = p->next.uncompressed };
	p->count++;
	p->held += p->next.total + p->next.uncompressed;
	if (p->held > p->peak)
		p->peak = p->held;
	pthread_mutex_unlock(&p->lock);
	p->pending = false;
	p->blocks++;
	p->ps = P_BDATA;
	return 0;
}

/* A complete block header in hdr. */
static int block_header(struct gp_xzpar *p)
{
	const char *why;
	size_t need;
	if (gp_xz_block_header(p->hdr, p->have, p->check, &p->next, &need, &why) != 0)
		return set_msg(p, -EBADMSG, why);
	if (p->next.compressed == GP_XZ_SIZE_UNKNOWN ||
	    p->next.uncompressed == GP_XZ_SIZE_UNKNOWN) {
		snprintf(p->msg, sizeof p->msg,
		         "xz block %llu records no sizes in its header (the first did): "
		         "cannot decode it in parallel",
		         (unsigned long long)p->blocks + 1);
		return -EBADMSG;
	}
	if (p->next.compressed > GP_XZPAR_BLOCK_MAX ||
	    p->next.uncompressed > GP_XZPAR_BLOCK_MAX) {
		snprintf(p->msg, sizeof p->msg,
		         "xz block %llu is larger than %llu MiB: cannot decode it in "
		         "parallel",
		         (unsigned long long)p->blocks + 1,
		         (unsigned long long)(GP_XZPAR_BLOCK_MAX >> 20));
		return -EBADMSG;
	}
	if (lzma_index_hash_append(p->ih, p->next.unpadded, p->next.uncompressed) !=
	    LZMA_OK)
		return set_msg(p, -EBADMSG, "corrupt xz data (index too large)");
	p->pending = true;
	return 0;
}

/* Feeds the index (which starts with the byte in hdr). */
static int index_bytes(struct gp_xzpar *p, const uint8_t *in, size_t len, size_t *used)
{
	size_t pos = 0;
	lzma_ret r = lzma_index_hash_decode(p->ih, in, &pos, len);
	*used += pos;
	if (r == LZMA_OK)
		return 0;
	if (r != LZMA_STREAM_END)
		return set_msg(p, -EBADMSG,
		               "corrupt xz data (the index does not match "
		               "the blocks)");
	p->ps = P_FOOTER;
	p->have = 0;
	p->need = GP_XZ_STREAM_FOOTER_SIZE;
	return 0;
}

ssize_t gp_xzpar_feed(struct gp_xzpar *p, const uint8_t *in, size_t len)
{
	size_t used = 0;
	int rc = 0;
	while (rc == 0 && p->ps != P_END) {
		if (p->pending) {
			pthread_mutex_lock(&p->lock);
			bool ok = admissible(p);
			pthread_mutex_unlock(&p->lock);
			if (!ok)
				break;
			rc = admit(p);
			continue;
		}
		if (p->ps == P_BDATA) {
			struct blk *b = at(p, p->count - 1); /* only the caller adds */
			uint64_t n = b->in_len - b->in_have;
			if (n > len - used)
				n = len - used;
			memcpy(b->in + b->in_have, in + used, n);
			b->in_have += n;
			used += n;
			if (b->in_have < b->in_len)
				break;
			pthread_mutex_lock(&p->lock);
			b->st = B_READY;
			pthread_cond_broadcast(&p->cond);
			pthread_mutex_unlock(&p->lock);
			p->ps = P_BHDR;
			p->have = 0;
			p->need = 1;
			continue;
		}
		if (p->ps == P_INDEX) {
			if (used == len)
				break;
			rc = index_bytes(p, in + used, len - used, &used);
			continue;
		}
		/* Headers and the footer: gather p->need bytes in hdr. */
		size_t n = p->need - p->have;
		if (n > len - used)
			n = len - used;
		memcpy(p->hdr + p->have, in + used, n);
		p->have += n;
		used += n;
		if (p->have < p->need)
			break;
		const char *why = "";
		size_t need = 0;
		if (p->ps == P_SHDR) {
			if (gp_xz_stream_header(p->hdr, p->have, &p->check, &need,
			                        &why) != 0)
				rc = set_msg(p, -EBADMSG, why);
			p->ps = P_BHDR;
			p->have = 0;
			p->need = 1;
		} else if (p->ps == P_BHDR && p->have == 1) {
			if (p->hdr[0] == 0) {
				p->ps = P_INDEX;
				size_t one = 0;
				rc = index_bytes(p, p->hdr, 1, &one);
			} else {
				p->need = ((size_t)p->hdr[0] + 1) * 4;
			}
		} else if (p->ps == P_BHDR) {
			rc = block_header(p);
		} else { /* P_FOOTER */
			uint64_t backward;
			if (gp_xz_stream_footer(p->hdr, p->check, &backward, &why) != 0)
				rc = set_msg(p, -EBADMSG, why);
			else if (backward != lzma_index_hash_size(p->ih))
				rc = set_msg(p, -EBADMSG,
				             "corrupt xz data (the footer does not match "
				             "the index)");
			p->ps = P_END;
		}
	}
	return rc < 0 ? rc : (ssize_t)used;
}

ssize_t gp_xzpar_take(struct gp_xzpar *p, const uint8_t **out, bool wait)
{
	pthread_mutex_lock(&p->lock);
	if (p->taken) {
		struct blk *b = at(p, 0);
		free(b->out);
		p->held -= b->out_len;
		*b = (struct blk){ .st = B_FREE };
		p->head = (p->head + 1) % RING;
		p->count--;
		p->taken = false;
	}
	for (;;) {
		struct blk *b = at(p, 0);
		if (p->count == 0 || b->st == B_FILL ||
		    (!wait && b->st != B_DONE && b->st != B_FAIL)) {
			bool end = p->count == 0 && p->ps == P_END;
			pthread_mutex_unlock(&p->lock);
			return end ? 0 : -EAGAIN;
		}
		if (b->st == B_FAIL) {
			int rc = b->err;
			set_msg(p, rc, b->why);
			pthread_mutex_unlock(&p->lock);
			return rc;
		}
		if (b->st == B_DONE) {
			p->taken = true;
			if (b->out_len == 0) { /* an empty block: nothing to hand on */
				pthread_mutex_unlock(&p->lock);
				return gp_xzpar_take(p, out, wait);
			}
			*out = b->out;
			ssize_t n = (ssize_t)b->out_len;
			pthread_mutex_unlock(&p->lock);
			return n;
		}
		pthread_cond_wait(&p->cond, &p->lock);
	}
}

const char *gp_xzpar_msg(const struct gp_xzpar *p)
{
	return p->msg;
}

uint64_t gp_xzpar_peak(const struct gp_xzpar *p)
{
	return p->peak;
}
