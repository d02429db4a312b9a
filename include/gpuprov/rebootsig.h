/* What other tools say about a pending reboot, for `gpuprov status`:
 * Debian's /var/run/reboot-required and its .pkgs list (which gpuprov's
 * gp_effect_reboot writes too), and on RHEL-family roots
 * `dnf needs-restarting -r`. Read-only. */
#pragma once

#include "gpuprov/context.h"
#include "gpuprov/status.h"

/* Largest reboot-required.pkgs read; a longer one is reported unread. */
#define GP_REBOOT_PKGS_MAX ((size_t)64 * 1024)

/* The package names in a reboot-required.pkgs text (len bytes): one word
 * of printable bytes a line, each once, in order; other lines are skipped,
 * a text holding a NUL byte has none. NULL when none. */
char **gp_reboot_pkgs_parse(const char *text, size_t len);

/* Fills *sig (zeroed first); never fails: what cannot be read is absent. */
void gp_reboot_signals_read(struct gp_ctx *c, struct gp_reboot_signals *sig);
void gp_reboot_signals_free(struct gp_reboot_signals *sig);
