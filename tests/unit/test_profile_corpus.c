/* The broken-profile corpus: every *.json directly in
 * tests/fixtures/broken-profiles must fail to load with exit code 65 and
 * exactly the message in its sidecar NAME.expected (one line; the corpus
 * directory is written as "" before a '/' and "." elsewhere, so the files
 * read "bad-branch.json:7:17: ..."). The directory is the only search
 * path, so `extends` finds its siblings and parents/ (valid parents, not
 * in the corpus). A .json without a .expected, or the reverse, fails too.
 * Inputs that are better generated than stored (10,000-deep nesting) are
 * built here.
 *
 * After a deliberate change of wording, GP_UPDATE_EXPECTED=1 rewrites the
 * sidecars from the loader's output; review the diff before keeping it. */
#include <dirent.h>

#include "testutil.h"

#include "gpuprov/exitcodes.h"
#include "gpuprov/profile.h"
#include "gpuprov/stages.h"
#include "gpuprov/util.h"

#define CORPUS GP_SRCDIR "/tests/fixtures/broken-profiles"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in CORPUS ending in suffix, without it, sorted. */
static char **names_with(const char *suffix)
{
	DIR *d = opendir(CORPUS);
	if (!d)
		fail_msg("cannot open %s: %s", CORPUS, strerror(errno));
	char **v = gp_xcalloc(1, sizeof(char *));
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.' || !gp_str_ends_with(e->d_name, suffix))
			continue;
		char *stem = gp_xstrndup(e->d_name, strlen(e->d_name) - strlen(suffix));
		gp_strv_push(&v, stem);
		free(stem);
	}
	closedir(d);
	qsort(v, gp_strv_len(v), sizeof(char *), cmp_str);
	return v;
}

/* Replaces every "from" in s with "to". */
static char *replace_all(const char *s, const char *from, const char *to)
{
	struct gp_buf b = { 0 };
	size_t n = strlen(from);
	for (const char *hit; n && (hit = strstr(s, from));) {
		gp_buf_append(&b, s, (size_t)(hit - s));
		gp_buf_puts(&b, to);
		s = hit + n;
	}
	gp_buf_puts(&b, s);
	return gp_buf_steal(&b);
}

/* The message without the corpus directory, given or resolved. */
static char *strip_dir(const char *msg)
{
	char *real = realpath(CORPUS, NULL);
	assert_non_null(real);
	const char *const dirs[] = { CORPUS, real };
	char *out = gp_xstrdup(msg);
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char *with_slash = gp_xasprintf("%s/", dirs[i]);
		char *a = replace_all(out, with_slash, "");
		char *b = replace_all(a, dirs[i], ".");
		free(with_slash);
		free(a);
		free(out);
		out = b;
	}
	free(real);
	return out;
}

/* Loads path with the corpus as the search path; returns the stripped
 * message of the expected failure (exit code 65), or NULL if it loaded. */
static char *load_error(const char *path, int *exit_code)
{
	char *search[] = { (char *)CORPUS, NULL };
	struct gp_profile *p = NULL;
	struct gp_err err = { 0 };
	if (gp_profile_load(path, search, &p, &err) == 0) {
		gp_profile_free(p);
		return NULL;
	}
	assert_null(p);
	*exit_code = gp_exit_code(&err);
	return strip_dir(err.msg);
}

/* Loads path as `profiles lint` does, collecting every problem; returns
 * how many of them lack a FILE:LINE:COL in front (each is printed), and
 * sets *first to the first problem, stripped. */
static size_t lint_unplaced(const char *path, char **first)
{
	char *search[] = { (char *)CORPUS, NULL };
	struct gp_profile *p = NULL;
	struct gp_err err = { .all = gp_xcalloc(1, sizeof(char *)) };
	size_t unplaced = 0;
	*first = NULL;
	if (gp_profile_load(path, search, &p, &err) == 0)
		gp_profile_free(p);
	for (size_t i = 0; err.all[i]; i++) {
		char *msg = strip_dir(err.all[i]);
		const char *at = strstr(msg, ".json:");
		int line = 0, col = 0, used = 0;
		if (!at || sscanf(at, ".json:%d:%d: %n", &line, &col, &used) != 2 ||
		    !used || strchr(msg, ' ') < at) {
			print_error("%s: no FILE:LINE:COL: %s\n", path, msg);
			unplaced++;
		}
		if (i == 0)
			*first = gp_xstrdup(msg);
		free(msg);
	}
	gp_strv_free(err.all);
	return unplaced;
}

static void test_every_json_has_expected(void **state)
{
	(void)state;
	char **json = names_with(".json");
	char **expected = names_with(".expected");
	for (size_t i = 0; json[i]; i++)
		if (!gp_strv_contains(expected, json[i]))
			fail_msg("%s.json has no %s.expected beside it", json[i],
			         json[i]);
	for (size_t i = 0; expected[i]; i++)
		if (!gp_strv_contains(json, expected[i]))
			fail_msg("%s.expected has no %s.json beside it", expected[i],
			         expected[i]);
	/* The issue asks for at least 30 broken profiles. */
	if (gp_strv_len(json) < 30)
		fail_msg("only %zu broken profiles", gp_strv_len(json));
	gp_strv_free(json);
	gp_strv_free(expected);
}

static void test_each_fails_as_expected(void **state)
{
	(void)state;
	bool update = getenv("GP_UPDATE_EXPECTED") != NULL;
	char **json = names_with(".json");
	size_t bad = 0;
	for (size_t i = 0; json[i]; i++) {
		char *path = gp_xasprintf("%s/%s.json", CORPUS, json[i]);
		char *side = gp_xasprintf("%s/%s.expected", CORPUS, json[i]);
		int code = 0;
		char *got = load_error(path, &code);
		if (update && got) {
			FILE *f = fopen(side, "we");
			assert_non_null(f);
			fprintf(f, "%s\n", got);
			fclose(f);
		}
		char *want = access(side, F_OK) == 0 ? tu_read_file(side, NULL)
		                                     : gp_xstrdup("");
		want[strcspn(want, "\n")] = '\0';
		if (!got) {
			print_error("%s.json loaded; want: %s\n", json[i], want);
			bad++;
		} else if (code != GP_EXIT_INVALID_INPUT) {
			print_error("%s.json: exit code %d, want %d\n", json[i], code,
			            GP_EXIT_INVALID_INPUT);
			bad++;
		} else if (strcmp(got, want) != 0) {
			print_error("%s.json:\n  got:  %s\n  want: %s\n", json[i], got,
			            want);
			bad++;
		}
		/* profiles lint collects every problem: each one placed, the
		 * first the same as install's. */
		char *first = NULL;
		bad += lint_unplaced(path, &first) > 0;
		if (got && (!first || strcmp(first, got) != 0)) {
			print_error("%s.json: lint's first problem: %s\n  want: %s\n",
			            json[i], first ? first : "(none)", got);
			bad++;
		}
		free(first);
		free(got);
		free(want);
		free(side);
		free(path);
	}
	gp_strv_free(json);
	if (bad)
		fail_msg("%zu broken profiles did not fail as expected", bad);
}

/* Writes text to a temp file NAME.json; returns the temp directory. */
static char *write_temp(const char *name, const char *text)
{
	char *dir = tu_tmpdir();
	char *rel = gp_xasprintf("%s.json", name);
	tu_write(dir, rel, text);
	free(rel);
	return dir;
}

static void expect_error(const char *dir, const char *name, const char *want)
{
	char *path = gp_xasprintf("%s/%s.json", dir, name);
	char *search[] = { (char *)dir, NULL };
	struct gp_profile *p = NULL;
	struct gp_err err = { 0 };
	int rc = gp_profile_load(path, search, &p, &err);
	if (rc == 0) {
		gp_profile_free(p);
		fail_msg("%s loaded; want: %s", path, want);
	}
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	char *prefix = gp_xasprintf("%s/", dir);
	if (!gp_str_starts_with(err.msg, prefix))
		fail_msg("message \"%s\" does not start with %s", err.msg, prefix);
	assert_string_equal(err.msg + strlen(prefix), want);
	free(prefix);
	free(path);
}

/* 10,000 levels of arrays, of objects, and both under a key: an error
 * with a position, never a crash or a stack overflow. cJSON stops at
 * 1,000 levels; the message says so. */
static void test_deep_nesting(void **state)
{
	(void)state;
	enum { DEPTH = 10000 };
	struct gp_buf b = { 0 };

	for (int i = 0; i < DEPTH; i++)
		gp_buf_puts(&b, "[");
	for (int i = 0; i < DEPTH; i++)
		gp_buf_puts(&b, "]");
	char *text = gp_buf_steal(&b);
	char *dir = write_temp("deep-arrays", text);
	expect_error(
	    dir, "deep-arrays",
	    "deep-arrays.json:1:1001: syntax error (or nesting deeper than 1000); "
	    "check for a missing comma, quote or bracket");
	tu_rmrf(dir);
	free(dir);
	free(text);

	gp_buf_puts(&b, "{\"name\": \"deep\",\n \"description\": ");
	for (int i = 0; i < DEPTH; i++)
		gp_buf_puts(&b, "{\"a\":");
	gp_buf_puts(&b, "1");
	for (int i = 0; i < DEPTH; i++)
		gp_buf_puts(&b, "}");
	gp_buf_puts(&b, "}\n");
	text = gp_buf_steal(&b);
	dir = write_temp("deep-objects", text);
	expect_error(dir, "deep-objects",
	             "deep-objects.json:2:5012: syntax error (or nesting deeper than "
	             "1000); check for a missing comma, quote or bracket");
	tu_rmrf(dir);
	free(dir);
	free(text);

	/* Just under the limit parses, and the schema refuses it at once. */
	gp_buf_puts(&b, "{\"name\": \"deep\", \"stages\": ");
	for (int i = 0; i < 990; i++)
		gp_buf_puts(&b, "[");
	for (int i = 0; i < 990; i++)
		gp_buf_puts(&b, "]");
	gp_buf_puts(&b, "}");
	text = gp_buf_steal(&b);
	dir = write_temp("nearly", text);
	expect_error(dir, "nearly",
	             "nearly.json:1:28: \"stages\" must be an object (got an array)");
	tu_rmrf(dir);
	free(dir);
	free(text);
}

int main(void)
{
	gp_profile_use_stage_keys(gp_stages_profile_keys());
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_json_has_expected),
		cmocka_unit_test(test_each_fails_as_expected),
		cmocka_unit_test(test_deep_nesting),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
