/* The string map: FNV-1a hashes, linear probing, at most half full, and
 * removal by shifting the following run back (no tombstones, so a map that
 * sees many removals never degrades). */
#include <string.h>

#include "gpuprov/strmap.h"
#include "gpuprov/util.h"

static unsigned long long hash(const char *s)
{
	unsigned long long h = 0xcbf29ce484222325ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The slot holding key (whose hash is h), or the empty slot where it
 * would go. */
static struct gp_strmap_slot *find(const struct gp_strmap *m, const char *key,
                                   unsigned long long h)
{
	size_t mask = m->cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct gp_strmap_slot *s = &m->slots[i];
		if (!s->key || (s->hash == h && strcmp(s->key, key) == 0))
			return s;
	}
}

static void grow(struct gp_strmap *m)
{
	struct gp_strmap old = *m;
	m->cap = old.cap ? old.cap * 2 : 16;
	m->slots = gp_xcalloc(m->cap, sizeof *m->slots);
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].key)
			*find(m, old.slots[i].key, old.slots[i].hash) = old.slots[i];
	free(old.slots);
}

void *gp_strmap_get(const struct gp_strmap *m, const char *key)
{
	if (!m->n)
		return NULL;
	return find(m, key, hash(key))->value;
}

void *gp_strmap_put(struct gp_strmap *m, const char *key, void *value)
{
	if (2 * (m->n + 1) > m->cap)
		grow(m);
	unsigned long long h = hash(key);
	struct gp_strmap_slot *s = find(m, key, h);
	void *was = s->key ? s->value : NULL;
	if (!s->key)
		m->n++;
	*s = (struct gp_strmap_slot){ .key = key, .value = value, .hash = h };
	return was;
}

void *gp_strmap_remove(struct gp_strmap *m, const char *key)
{
	if (!m->n)
		return NULL;
	struct gp_strmap_slot *s = find(m, key, hash(key));
	if (!s->key)
		return NULL;
	void *was = s->value;
	m->n--;
	/* Move back each later entry of the run that the hole would hide from
	 * its home slot. */
	size_t mask = m->cap - 1;
	size_t hole = (size_t)(s - m->slots);
	for (size_t i = (hole + 1) & mask; m->slots[i].key; i = (i + 1) & mask) {
		size_t home = m->slots[i].hash & mask;
		/* Is home cyclically in (hole, i]? Then the entry stays. */
		bool stays = hole < i ? home > hole && home <= i
		                      : home > hole || home <= i;
		if (stays)
			continue;
		m->slots[hole] = m->slots[i];
		hole = i;
	}
	m->slots[hole] = (struct gp_strmap_slot){ 0 };
	return was;
}

void gp_strmap_free(struct gp_strmap *m)
{
	free(m->slots);
	*m = (struct gp_strmap){ 0 };
}
