/* A hash map from strings to pointers (open addressing, linear probing).
 * Keys are not copied: each must stay valid, unchanged, while its entry is
 * in the map (typically the key lives in the value). Lookups, additions
 * and removals take constant time on average, so per-item lookups in a
 * large journal or profile stay linear overall. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct gp_strmap_slot {
	const char *key;
	void *value;
	unsigned long long hash; /* of key: compared first, kept when growing */
};

struct gp_strmap {
	struct gp_strmap_slot *slots;
	size_t cap; /* 0 or a power of two */
	size_t n;
};

/* The value stored under key, or NULL. */
void *gp_strmap_get(const struct gp_strmap *m, const char *key);
/* Stores value under key, replacing (and returning) the value that was
 * there, else NULL. The key of an existing entry is replaced by key too. */
void *gp_strmap_put(struct gp_strmap *m, const char *key, void *value);
/* Removes key; returns its value, or NULL when it was not there. */
void *gp_strmap_remove(struct gp_strmap *m, const char *key);
void gp_strmap_free(struct gp_strmap *m);
