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
