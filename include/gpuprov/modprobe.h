/* The target root's modprobe configuration through libkmod (modprobe.c).
 * Read under the root; nothing here prints or decides. */
#pragma once

#include <stdbool.h>

#include "gpuprov/root.h"

/* What the root's modprobe configuration says about a module, read with
 * libkmod from <root>/etc/modprobe.d, <root>/run/modprobe.d,
 * <root>/usr/local/lib/modprobe.d and <root>/lib/modprobe.d, each file
 * resolved inside the root (an absolute symlink never reaches the host) and
 * copied for libkmod to read (modprobe's
 * precedence: a file hides one of the same name in a later directory; only
 * *.conf and *.alias count). The kernel command line (modprobe.blacklist=,
 * <module>.<param>=) counts only when the root is the host: libkmod reads the
 * host's /proc/cmdline, which says nothing about another root. Never prints. */
struct gp_modprobe_facts {
	bool blacklisted;
	char *options; /* all "options <module> ..." values joined by ' ', or NULL */
	/* On failure, when a file could not be read: what and where ("/etc/
	 * modprobe.d/x.conf in root /r is a FIFO, not a regular file"). */
	char *error;
};
/* The directories libkmod reads *.conf files from, in precedence order (no
 * /usr/lib/modprobe.d in libkmod 30). */
#define GP_MODPROBE_DIRS 4
extern const char *const gp_modprobe_dirs[GP_MODPROBE_DIRS];
int gp_modprobe_query(const struct gp_root *r, const char *module,
                      struct gp_modprobe_facts *f);
/* The same for each module of the NULL-terminated list at once (facts has
 * one element per module; on failure facts[0].error says why). One copy of
 * the configuration serves them all, and a query of a configuration the
 * previous query read byte for byte gets the previous answer without
 * libkmod (modprobe.c says why that is exact). */
int gp_modprobe_query_modules(const struct gp_root *r, const char *const *modules,
                              struct gp_modprobe_facts *facts);
/* Keeps libkmod quiet: its kmod_new() reports bad modprobe.d lines on stderr
 * before gp_modprobe_query can set a log function, unless KMOD_LOG=0 is in
 * the environment (set here, unless the user set KMOD_LOG to debug libkmod).
 * It changes the environment, so a program calls it once at its start,
 * before any thread (gpuprov's main()); gp_modprobe_query never does. */
void gp_modprobe_env_init(void);
void gp_modprobe_facts_free(struct gp_modprobe_facts *f);
/* Is "key=value" among the options (last one for key wins, like the kernel;
 * key names compare with '-' and '_' equal; double quotes around the value
 * are dropped)? */
bool gp_modprobe_option_is(const struct gp_modprobe_facts *f, const char *key,
                           const char *value);
