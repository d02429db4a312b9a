/* Uninstall (src/undo.c): a stage's journal records (the files it
 * wrote, the packages it installed, the holds it set) undone through the
 * effect door and the package layer, so the plan of an uninstall is exact. */
#pragma once

#include <stdbool.h>

#include "gpuprov/plan.h"

struct gp_ctx;

/* What undoing stage would do, from the journal and the package database:
 * GP_STATE_NEEDED when there is something (*reason, free it: what goes, and
 * what cannot be undone), GP_STATE_SATISFIED when gpuprov recorded nothing
 * of it, GP_STATE_BLOCKED when removing its packages would take along
 * packages gpuprov did not install that depend on them (named in *reason).
 * Read-only. */
enum gp_stage_state gp_undo_check(struct gp_ctx *c, const char *stage, char **reason);
/* Undoes it: the packages gpuprov installed are removed (holds released
 * first), the holds it set on packages that were there before are
 * released, every file it wrote is removed or, when it replaced one, the
 * backup is written back; a driver stage whose packages went asks for the
 * reboot that unloads the module. For real, the journal then forgets the
 * stage's records. 0, or -1 with c->err set. */
int gp_undo_apply(struct gp_ctx *c, const char *stage);
/* One file recorded in the journal as it was before gpuprov: its backup
 * written back, the link it replaced made again, or removed; for real, the
 * journal then forgets it. 0, or -1 with c->err set. */
int gp_undo_file(struct gp_ctx *c, const char *path);
/* The commands that make undone files count, as the stage that wrote them
 * ran them (its profile section names the initramfs command). Effects, so
 * the plan names them. 0, or -1 with c->err set. */
int gp_undo_commands(struct gp_ctx *c, const char *stage, char *const *files);
/* Of dirs (directories the journal records gpuprov made), those that hold
 * nothing once files go (each as gp_undo_file takes it: one with a backup
 * or a link it replaced stays), deepest first; one made whole (the Python
 * environment) is never among them. Free with gp_strv_free. Read-only. */
char **gp_undo_emptied_dirs(struct gp_ctx *c, char *const *dirs, char *const *files);
/* Under /run: a boot empties it, nothing there is undone. */
bool gp_undo_volatile(const char *path);
