/* Version strings such as "535.104.05", "570.26", "11.8": dot-separated
 * integer parts compared as tuples, missing parts are 0. */
#pragma once

#include <stdbool.h>

/* <0, 0, >0 like strcmp. Leading zeros do not count ("05" == "5"). Within a
 * part the number compares first, then any text after it, bytewise
 * ("05-1ubuntu1" > "05"). NULL sorts before everything. */
int gp_version_compare(const char *a, const char *b);
/* True when s is one or more dot-separated runs of digits. */
bool gp_version_is_valid(const char *s);
