/* Drift: how the root moved away from what gpuprov left there, seen by
 * verify (findings "<stage>.drift_<kind>[.<subject>]", docs/findings.md)
 * and told apart by install (a change back to the profile is corrective,
 * one the profile asks for anew is intentional). Read-only. */
#pragma once

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "gpuprov/context.h"
#include "gpuprov/report.h"

/* Adds a finding for each drift of stage (its verify has run): the files
 * and packages the journal records for it, and the stage's own kinds (the
 * driver's kernels and libraries). Only what drifted is reported: a clean
 * root adds nothing. 0, or -1 with c->err set. */
int gp_drift_verify(struct gp_ctx *c, const char *stage, const cJSON *cfg,
                    struct gp_report *rep);
/* Did the last install leave stage done (or find it satisfied)? Drift is
 * measured against that state only. */
bool gp_drift_stage_applied(const struct gp_ctx *c, const char *stage);
/* The sha256 of a stage's settings (the profile's name and cfg printed
 * compactly); allocated. */
char *gp_drift_settings_digest(const struct gp_ctx *c, const cJSON *cfg);
/* Would a change to stage now be corrective: the stage was applied with
 * these very settings (the journal's settings_sha256, or for a journal
 * without one the whole profile's digest)? Otherwise it is intentional. */
bool gp_drift_corrective(const struct gp_ctx *c, const char *stage, const cJSON *cfg,
                         const char *profile_digest);
/* "PATH edited since gpuprov wrote it, ..." for the files of stage that
 * drifted (removed, edited, mode or owner changed), NULL when none did:
 * install then applies the stage although its check is satisfied. */
char *gp_drift_files_summary(struct gp_ctx *c, const char *stage);
/* Did the file gpuprov wrote at path drift? A stage whose check reads a
 * file's meaning (nouveau: libkmod) writes it again when it did. */
bool gp_drift_file_changed(struct gp_ctx *c, const char *path);
/* After an install left stage done or satisfied: its recorded packages at
 * the versions installed now, which the profile accepted (a newer release
 * of a branch), are the next verify's baseline. */
void gp_drift_accept_packages(struct gp_ctx *c, const char *stage);
/* The kernels newer than the running one (installed for a later boot)
 * whose /lib/modules/<kernel> has no nvidia.ko (updates/, extra/, kernel/),
 * while the running kernel has one; empty otherwise. Never NULL. */
char **gp_drift_kernels_without_module(const struct gp_ctx *c);
