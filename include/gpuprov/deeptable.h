/* verify --deep's per-GPU table for the text report: one row per GPU with
 * its verdict and each measurement with its fraction of the expected
 * figure, from the report's deep findings (src/deeptable.c). */
#pragma once

#include "gpuprov/report.h"
#include "gpuprov/util.h"

/* Appends the table to b; nothing when the report has no deep verdict. */
void gp_deeptable_render(const struct gp_report *r, struct gp_buf *b);
