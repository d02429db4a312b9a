/* gpuprov's own settings file, /etc/gpuprov/gpuprov.conf (conf.c): lines
 * of "key = value", '#' comments and blank lines. The parser touches no
 * file: the caller reads the bytes through the root layer. */
#pragma once

#include <stddef.h>

/* In the root; its bound, far above any real file, so a wrong one fails. */
#define GP_CONF_FILE "/etc/gpuprov/gpuprov.conf"
#define GP_CONF_MAX ((size_t)64 << 10) /* 64 KiB */

struct gp_conf {
	char *textfile_dir; /* textfile_dir: absolute, in the root; NULL: not set */
};

/* Parses len bytes of text into conf (zeroed first). 0, or -EINVAL with
 * *line (1-based) and *why (allocated: what is wrong there and what to
 * write instead); conf is then cleared. */
int gp_conf_parse(const char *text, size_t len, struct gp_conf *conf, size_t *line,
                  char **why);
void gp_conf_clear(struct gp_conf *conf);
