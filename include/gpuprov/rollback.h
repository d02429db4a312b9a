/* Rollback (src/rollback.c): the state a history entry recorded, made
 * again. The engine applies the entry's copy of the profile as an install
 * does; before its stages, one "rollback" step puts the packages back at
 * the exact versions the entry recorded (downgrades included), removes the
 * ones gpuprov installed since, sets the holds as they were and puts back
 * the files gpuprov wrote since that the entry did not have, all through
 * the package layer and the effect door, so the plan of a rollback is
 * exact. */
#pragma once

#include <stdbool.h>

#include "gpuprov/json.h"

struct gp_ctx;
struct gp_journal;

/* The plan's name of the step (and the journal's stage of the packages it
 * installs until gp_rollback_record gives them back to their stages). */
#define GP_ROLLBACK_STEP "rollback"

/* The entry a rollback goes to: the one whose "id" is to (to > 0), else
 * the entry before current (the newest, see gp_journal_history_current).
 * NULL with *why (free it) and *code (a GP_E* domain code: GP_EBLOCKED when
 * there is nothing to go back to, GP_EOPTION for an unusable --to) when
 * there is none. Pure: reads only the history array. */
const cJSON *gp_rollback_target(const cJSON *history, const cJSON *current, long to,
                                char **why, int *code);

/* What going back to entry would change in the packages and files, from
 * the journal and the package database: *reason (free it) says it, or why
 * it is refused. Returns 1 when something changes, 0 when they are as the
 * entry had them, -1 when refused (*reason: the packages and versions no
 * configured repository offers any more) and -2 with c->err set when the
 * database cannot be read. Read-only. */
int gp_rollback_check(struct gp_ctx *c, const cJSON *entry, char **reason);
/* Makes it through the package layer: the packages gpuprov installed
 * since are removed, the entry's packages installed at its versions, the
 * holds set and released as the entry had them, the files written since
 * that the entry lacks restored from their backups or removed; a change of
 * the driver's packages asks for the reboot that loads the module again. 0,
 * or -1 with c->err set. */
int gp_rollback_apply(struct gp_ctx *c, const cJSON *entry);
/* After the real pass, before its history entry ends: the packages the
 * rollback step installed are the entry's stages' again in the journal
 * (uninstall undoes them per stage), and the newest history entry says
 * which entry it rolled back to. */
void gp_rollback_record(struct gp_journal *j, const cJSON *entry);
