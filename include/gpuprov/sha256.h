/* SHA-256 for files, downloads and archives (OpenSSL), as lowercase
 * hex. One module so every place hashes the same way; allocation or
 * library failure aborts, like the gp_x* allocators. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gp_sha256; /* an incremental digest */

struct gp_sha256 *gp_sha256_new(void);
void gp_sha256_free(struct gp_sha256 *h); /* NULL is fine */
void gp_sha256_reset(struct gp_sha256 *h);
void gp_sha256_update(struct gp_sha256 *h, const void *data, size_t len);
/* The digest of what h has seen so far; h stays usable. */
void gp_sha256_peek_hex(const struct gp_sha256 *h, char out[65]);
/* Feeds fd from offset start to its end into h with pread (the fd's own
 * offset is left alone); *len, when not NULL, gets the byte count. */
int gp_sha256_update_fd(struct gp_sha256 *h, int fd, off_t start, uint64_t *len);

static inline void gp_sha256_freep(struct gp_sha256 **h)
{
	gp_sha256_free(*h);
}

/* Checks that in is 64 hex digits (either case) and writes it lowercase to
 * out; -EINVAL otherwise. */
int gp_sha256_normalize(const char *in, char out[65]);

/* One buffer, one fd (from start to its end). */
void gp_sha256_hex(const void *data, size_t len, char out[65]);
int gp_sha256_fd_hex(int fd, off_t start, char out[65]);
