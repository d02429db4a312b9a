/* NVIDIA driver branches and their lifecycle (see branches.h). The table
 * is what NVIDIA's data-center driver lifecycle page and the Driver
 * Installation Guide say (docs/reference/stack-2026.md section 3): a
 * branch not listed has no known end of life, and nothing is guessed for
 * it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuprov/branches.h"
#include "gpuprov/util.h"
#include "gpuprov/version.h"

#define LTS "long-term support"
#define PB "production"
#define NFB "new feature"

/* R580's end of life: June 2028 in some copies of NVIDIA's lifecycle page,
 * August 2028 in others (unconfirmed); the earlier date warns in time.
 * R590 and R615: no end of life found; R615's type is unconfirmed. */
static const struct gp_branch_info branches[] = {
	{ "535", LTS, 2026, 6 }, { "580", LTS, 2028, 6 }, { "590", NFB, 0, 0 },
	{ "595", PB, 2027, 3 },  { "610", NFB, 2026, 8 }, { "615", NULL, 0, 0 },
	{ "620", LTS, 2029, 9 },
};

/* R580 is the last branch for Maxwell, Pascal and Volta (unconfirmed: press
 * reports of NVIDIA's Unix driver deprecation schedule). */
#define LAST_BRANCH_PRE_TURING "580"

const struct gp_branch_info *gp_branch_lookup(const char *branch_or_version)
{
	if (!branch_or_version)
		return NULL;
	if (*branch_or_version == 'R')
		branch_or_version++;
	size_t n = strcspn(branch_or_version, ".");
	for (size_t i = 0; i < ARRAY_SIZE(branches); i++)
		if (strlen(branches[i].branch) == n &&
		    memcmp(branches[i].branch, branch_or_version, n) == 0)
			return &branches[i];
	return NULL;
}

bool gp_branch_past_eol(const struct gp_branch_info *b, const struct gp_date *today)
{
	if (!b || !b->eol_year)
		return false;
	return today->year > b->eol_year ||
	       (today->year == b->eol_year && today->month > b->eol_month);
}

bool gp_branch_has_proprietary(const char *branch_or_version)
{
	char branch[16];
	snprintf(branch, sizeof branch, "%.*s", (int)strcspn(branch_or_version, "."),
	         branch_or_version);
	return gp_version_compare(branch, GP_BRANCH_NO_PROPRIETARY) < 0;
}

const char *gp_gpu_last_branch(const struct gp_gpu_info *g)
{
	return gp_gpu_needs_proprietary(g) ? LAST_BRANCH_PRE_TURING : NULL;
}

/* Does branch b drive g? */
static bool branch_supports(const struct gp_branch_info *b, const struct gp_gpu_info *g)
{
	const char *last = gp_gpu_last_branch(g);
	return !last || gp_version_compare(b->branch, last) <= 0;
}

const struct gp_branch_info *gp_branch_successor(const struct gp_date *today,
                                                 bool proprietary,
                                                 const struct gp_gpu_info *const *gpus,
                                                 unsigned n)
{
	const struct gp_branch_info *best = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(branches); i++) {
		const struct gp_branch_info *b = &branches[i];
		if (!gp_streq(b->type, LTS) || gp_branch_past_eol(b, today))
			continue;
		if (proprietary && !gp_branch_has_proprietary(b->branch))
			continue;
		bool ok = true;
		for (unsigned g = 0; g < n; g++)
			ok = ok && (!gpus[g] || branch_supports(b, gpus[g]));
		if (!ok)
			continue;
		if (!best || b->eol_year > best->eol_year ||
		    (b->eol_year == best->eol_year && b->eol_month > best->eol_month))
			best = b;
	}
	return best;
}

const char *gp_branch_eol_text(const struct gp_branch_info *b, char *buf, unsigned size)
{
	static const char *const months[] = { "January", "February", "March",
		                              "April",   "May",      "June",
		                              "July",    "August",   "September",
		                              "October", "November", "December" };
	if (!b->eol_year || b->eol_month < 1 || b->eol_month > 12)
		snprintf(buf, size, "an unknown date");
	else
		snprintf(buf, size, "%s %d", months[b->eol_month - 1], b->eol_year);
	return buf;
}

int gp_date_parse(const char *s, struct gp_date *d)
{
	if (!s || strlen(s) != 10 || s[4] != '-' || s[7] != '-')
		return -1;
	for (int i = 0; i < 10; i++)
		if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9'))
			return -1;
	int y = (int)strtol(s, NULL, 10), m = (int)strtol(s + 5, NULL, 10),
	    day = (int)strtol(s + 8, NULL, 10);
	if (m < 1 || m > 12 || day < 1 || day > 31)
		return -1;
	*d = (struct gp_date){ y, m, day };
	return 0;
}

int gp_today(struct gp_date *d)
{
	const char *pinned = getenv("GPUPROV_TODAY");
	if (pinned)
		return gp_date_parse(pinned, d);
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	*d = (struct gp_date){ tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday };
	return 0;
}
