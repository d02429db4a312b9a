/* NVIDIA driver branches (branches.c): each branch's type and end of life,
 * whether it still ships the proprietary kernel modules, the last branch a
 * GPU generation gets, and the date lint and verify judge end of life by.
 * Sources: docs/reference/stack-2026.md section 3; pure lookups. */
#pragma once

#include <stdbool.h>

#include "gpuprov/gpus.h"

struct gp_date {
	int year, month, day;
};

struct gp_branch_info {
	const char *branch; /* "535" */
	const char
	    *type; /* "long-term support", "production", "new feature"; NULL: unknown */
	int eol_year, eol_month; /* supported to the end of that month; 0: unknown */
};

/* The branch of "535", "535.104.05" or "R535"; NULL when the table does not
 * list it. */
const struct gp_branch_info *gp_branch_lookup(const char *branch_or_version);
/* Is b past its end of life on today (after the last day of its EOL
 * month)? False when its end of life is unknown. */
bool gp_branch_past_eol(const struct gp_branch_info *b, const struct gp_date *today);
/* The long-term support branch to move to on today: the one supported
 * longest that ships the proprietary modules when proprietary is set and
 * supports every GPU of gpus[0..n) (a NULL entry is skipped). NULL when
 * none is. */
const struct gp_branch_info *gp_branch_successor(const struct gp_date *today,
                                                 bool proprietary,
                                                 const struct gp_gpu_info *const *gpus,
                                                 unsigned n);
/* Does the branch (or version) still ship the proprietary kernel modules?
 * R620 removed them. */
#define GP_BRANCH_NO_PROPRIETARY "620"
bool gp_branch_has_proprietary(const char *branch_or_version);
/* The last branch that supports g ("580" for Volta and older), NULL when
 * none is known to end its support. */
const char *gp_gpu_last_branch(const struct gp_gpu_info *g);

/* "YYYY-MM-DD" into *d: 0, or -1 when s is not such a date. */
int gp_date_parse(const char *s, struct gp_date *d);
/* "June 2026" for a branch's end of life into buf (size >= 24). */
const char *gp_branch_eol_text(const struct gp_branch_info *b, char *buf, unsigned size);
/* Today (UTC), or GPUPROV_TODAY=YYYY-MM-DD when set, which the tests use
 * to pin the date: 0, or -1 when GPUPROV_TODAY is set but not a date. */
int gp_today(struct gp_date *d);
