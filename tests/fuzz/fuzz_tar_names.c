/* libFuzzer target: the checks on a tar entry's names (an archive's path
 * names, hardlink and symlink targets are the archive author's). The input
 * is "PATH\nTARGET". A path accepted is relative and has no "." or ".."
 * component or empty one; a symlink target accepted, resolved as text from
 * the link's directory, never leaves the destination. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/archive.h"

static void check_normal(const char *p)
{
	if (p[0] == '/' || strstr(p, "//") || (p[0] && p[strlen(p) - 1] == '/'))
		abort();
	for (const char *c = p; *c;) {
		size_t n = strcspn(c, "/");
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			abort();
		c += n + (c[n] == '/');
	}
}

/* Depth below dest reached by following target from the link's directory
 * (a link at "a/b/l" sits at depth 2); never below 0 when accepted. */
static void check_inside(const char *rel, const char *target)
{
	long depth = 0;
	for (const char *c = rel; *c; c++)
		depth += *c == '/';
	for (const char *c = target; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			depth--;
		else if (n && !(n == 1 && c[0] == '.'))
			depth++;
		if (depth < 0)
			abort();
		c += n + (c[n] == '/');
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	char *target = strchr(text, '\n');
	if (target)
		*target++ = '\0';
	const char *why = NULL;
	_cleanup_free_ char *rel = gp_archive_norm_path(text, &why);
	if (!rel) {
		if (!why)
			abort();
		return 0;
	}
	check_normal(rel);
	if (!target)
		return 0;
	_cleanup_free_ char *hardlink = gp_archive_norm_path(target, &why);
	if (hardlink)
		check_normal(hardlink);
	if (*rel && !gp_archive_symlink_check(rel, target))
		check_inside(rel, target);
	return 0;
}
