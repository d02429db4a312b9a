/* Version compare and validation: the table covers the cases a plain
 * strcmp or a naive atoi-per-part gets wrong. */
#include "testutil.h"

#include "gpuprov/version.h"

struct cmp_case {
	const char *a;
	const char *b;
	int want; /* -1, 0, 1 */
};

static const struct cmp_case cmp_cases[] = {
	{ "535.104.05", "535.54.03", 1 }, /* strcmp says less */
	{ "535.54.03", "535.104.05", -1 },
	{ "535.104.05", "535.104.05", 0 },
	{ "535.104.05", "535.104.5", 0 }, /* leading zeros ignored */
	{ "535.104.05", "535.104.005", 0 },
	{ "570.26", "570.26.0", 0 }, /* missing parts are 0 */
	{ "570.26", "570.26.0.0", 0 },
	{ "570.26", "570.26.1", -1 },
	{ "570.26.1", "570.26", 1 },
	{ "12", "12.0", 0 },
	{ "11.8", "12.0", -1 },
	{ "12.10", "12.9", 1 }, /* not decimal fractions */
	{ "9", "10", -1 }, /* not text */
	{ "0", "0.0.0", 0 },
	{ "000", "0", 0 },
	{ "", "0", 0 },
	{ "", "1", -1 },
	{ "555.58.02", "560", -1 },
	/* Longer than any integer type: compared as digit strings. */
	{ "99999999999999999999999", "99999999999999999999998", 1 },
	{ "1.00000000000000000000001", "1.1", 0 },
	{ "1.100000000000000000000000", "1.99", 1 },
	/* Non-numeric tails compare as text after the number. */
	{ "535.104.05-1ubuntu1", "535.104.05", 1 },
	{ "535.104.05-1ubuntu1", "535.104.05-1ubuntu2", -1 },
	{ "535.104.06", "535.104.05-1ubuntu9", 1 },
	{ "1.a", "1", 1 },
	{ "1.rc1", "1.rc1", 0 },
};

static void test_compare_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof cmp_cases / sizeof cmp_cases[0]; i++) {
		const struct cmp_case *t = &cmp_cases[i];
		int got = gp_version_compare(t->a, t->b);
		int sgn = (got > 0) - (got < 0);
		if (sgn != t->want)
			fail_msg("compare(\"%s\", \"%s\") = %d, want %d", t->a, t->b, got,
			         t->want);
		/* Antisymmetric. */
		int rev = gp_version_compare(t->b, t->a);
		if ((rev > 0) - (rev < 0) != -t->want)
			fail_msg("compare(\"%s\", \"%s\") = %d, want %d", t->b, t->a, rev,
			         -t->want);
	}
}

static void test_compare_null(void **state)
{
	(void)state;
	assert_int_equal(gp_version_compare(NULL, NULL), 0);
	assert_true(gp_version_compare(NULL, "1") < 0);
	assert_true(gp_version_compare("1", NULL) > 0);
}

static void test_is_valid(void **state)
{
	(void)state;
	static const char *const good[] = {
		"0", "535", "535.104.05", "570.26", "11.8", "007.1",
	};
	static const char *const bad[] = {
		"", /* nothing */
		".", /* no digits */
		"535.", /* empty last part */
		".535", /* empty first part */
		"535..104", /* empty middle part */
		"v535", /* prefix */
		"535.x", /* letters */
		"535 ", /* trailing blank */
		" 535", /* leading blank */
		"535.104.05-1", /* package revision */
		"12,4", /* wrong separator */
		"-1", /* sign */
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		if (!gp_version_is_valid(good[i]))
			fail_msg("\"%s\" should be valid", good[i]);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (gp_version_is_valid(bad[i]))
			fail_msg("\"%s\" should be invalid", bad[i]);
	assert_false(gp_version_is_valid(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compare_table),
		cmocka_unit_test(test_compare_null),
		cmocka_unit_test(test_is_valid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
