/* verify --deep: each GPU's health and performance against what its model
 * should reach (gpuspec.h), measured in forked children (nvhealth.h) and
 * reported as findings "deep.<check>.gpu<N>" (docs/findings.md), with the
 * figures as report facts for the metrics ("deep/<metric>/<gpu>[/<dtype>]"). */
#pragma once

#include <stdbool.h>

#include "gpuprov/context.h"
#include "gpuprov/nvhealth.h"
#include "gpuprov/report.h"

/* Adds the findings to rep. Refuses to measure (a failed deep.idle) while
 * compute processes run on a GPU, unless force. 0, or -1 with c's error
 * set when gpuprov itself failed (not when a GPU did). */
int gp_deep_verify(struct gp_ctx *c, enum gp_deep_level level, bool force,
                   struct gp_report *rep);
