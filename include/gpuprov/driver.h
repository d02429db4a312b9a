/* What the driver stage (src/stages/driver.c) tells other stages; its
 * hooks are in its row, gp_stage_driver (stages.h). */
#pragma once

#include <cjson/cJSON.h>

struct gp_ctx;

/* The driver's user-space version (upstream, "535.104.05") as the target
 * will have it once the effects planned so far are made: the installed
 * package's (or the runfile's library), else the exact stages.driver.version
 * the driver stage installs; NULL when neither is known (a plan of a branch
 * not installed yet) or cfg (the driver's settings) is NULL. Allocated. */
char *gp_driver_target_version(struct gp_ctx *c, const cJSON *cfg);
/* The driver's version as a plan of this run knows it, in the plan and the
 * run alike: the exact stages.driver.version, or the version installed
 * before this run when it is of the profile's branch (the driver stage
 * keeps it); NULL when only the run's own install resolves it (a branch
 * not installed before) or cfg is NULL. Allocated. */
char *gp_driver_known_version(struct gp_ctx *c, const cJSON *cfg);
