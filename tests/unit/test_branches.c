/* Driver branches: the lifecycle table (type, end of life), the branch to
 * move to, the proprietary modules' end at R620, a GPU generation's last
 * branch and the date parser behind GPUPROV_TODAY. Expected values from
 * docs/reference/stack-2026.md section 3. */
#include "testutil.h"

#include "gpuprov/branches.h"

static struct gp_date day(int y, int m, int d)
{
	return (struct gp_date){ y, m, d };
}

static void test_lookup(void **state)
{
	(void)state;
	const struct gp_branch_info *b = gp_branch_lookup("535");
	assert_non_null(b);
	assert_string_equal(b->type, "long-term support");
	assert_int_equal(b->eol_year, 2026);
	assert_int_equal(b->eol_month, 6);
	assert_ptr_equal(gp_branch_lookup("535.104.05"), b);
	assert_ptr_equal(gp_branch_lookup("R535"), b);
	assert_string_equal(gp_branch_lookup("580")->type, "long-term support");
	assert_string_equal(gp_branch_lookup("595")->type, "production");
	assert_string_equal(gp_branch_lookup("610")->type, "new feature");
	assert_string_equal(gp_branch_lookup("620")->type, "long-term support");
	assert_int_equal(gp_branch_lookup("620")->eol_year, 2029);
	/* R615's type is not known; R590's end of life neither. */
	assert_null(gp_branch_lookup("615")->type);
	assert_int_equal(gp_branch_lookup("590")->eol_year, 0);
	/* Not listed, and not a neighbour's prefix. */
	assert_null(gp_branch_lookup("550"));
	assert_null(gp_branch_lookup("53"));
	assert_null(gp_branch_lookup("5350"));
	assert_null(gp_branch_lookup(""));
	assert_null(gp_branch_lookup(NULL));
}

static void test_past_eol(void **state)
{
	(void)state;
	const struct gp_branch_info *r535 = gp_branch_lookup("535");
	/* Supported to the last day of June 2026. */
	struct gp_date d = day(2026, 6, 30);
	assert_false(gp_branch_past_eol(r535, &d));
	d = day(2026, 7, 1);
	assert_true(gp_branch_past_eol(r535, &d));
	d = day(2025, 12, 31);
	assert_false(gp_branch_past_eol(r535, &d));
	d = day(2027, 1, 1);
	assert_true(gp_branch_past_eol(r535, &d));
	assert_false(gp_branch_past_eol(gp_branch_lookup("580"), &d));
	/* Unknown end of life: never past. */
	d = day(2099, 1, 1);
	assert_false(gp_branch_past_eol(gp_branch_lookup("590"), &d));
	assert_false(gp_branch_past_eol(NULL, &d));
}

static void test_successor(void **state)
{
	(void)state;
	struct gp_date d = day(2026, 12, 1);
	const struct gp_gpu_info *a100 = gp_gpu_lookup(0x20b0);
	const struct gp_gpu_info *v100 = gp_gpu_lookup(0x1db1);
	/* With the proprietary modules: R580 (R620 has none). */
	assert_string_equal(gp_branch_successor(&d, true, &a100, 1)->branch, "580");
	/* Open modules: R620, supported longest. */
	assert_string_equal(gp_branch_successor(&d, false, &a100, 1)->branch, "620");
	/* A V100 ends at R580 whatever the flavor. */
	assert_string_equal(gp_branch_successor(&d, false, &v100, 1)->branch, "580");
	const struct gp_gpu_info *unknown[] = { NULL };
	assert_string_equal(gp_branch_successor(&d, false, unknown, 1)->branch, "620");
	/* Once R580 has ended, nothing is left for a V100. */
	d = day(2028, 7, 1);
	assert_null(gp_branch_successor(&d, true, &v100, 1));
}

static void test_proprietary_and_last_branch(void **state)
{
	(void)state;
	assert_true(gp_branch_has_proprietary("580"));
	assert_true(gp_branch_has_proprietary("615.71.10"));
	assert_false(gp_branch_has_proprietary("620"));
	assert_false(gp_branch_has_proprietary("620.70.06"));
	assert_false(gp_branch_has_proprietary("625"));
	assert_string_equal(gp_gpu_last_branch(gp_gpu_lookup(0x1db1)), "580");
	assert_null(gp_gpu_last_branch(gp_gpu_lookup(0x1eb8)));
	assert_null(gp_gpu_last_branch(gp_gpu_lookup(0x2342)));
	assert_null(gp_gpu_last_branch(NULL));
}

static void test_date(void **state)
{
	(void)state;
	struct gp_date d;
	assert_int_equal(gp_date_parse("2026-12-01", &d), 0);
	assert_int_equal(d.year, 2026);
	assert_int_equal(d.month, 12);
	assert_int_equal(d.day, 1);
	static const char *const bad[] = { "2026-13-01",  "2026-00-10", "2026-1-01",
		                           "2026-01-32",  "2026/01/01", "20260101",
		                           "2026-01-01x", "",           "yyyy-mm-dd" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (gp_date_parse(bad[i], &d) == 0)
			fail_msg("\"%s\" parsed as a date", bad[i]);
	assert_int_equal(gp_date_parse(NULL, &d), -1);

	char buf[24];
	assert_string_equal(gp_branch_eol_text(gp_branch_lookup("535"), buf, sizeof buf),
	                    "June 2026");
	assert_string_equal(gp_branch_eol_text(gp_branch_lookup("615"), buf, sizeof buf),
	                    "an unknown date");

	/* GPUPROV_TODAY pins the date; a malformed one is refused. */
	assert_int_equal(setenv("GPUPROV_TODAY", "2027-03-31", 1), 0);
	assert_int_equal(gp_today(&d), 0);
	assert_int_equal(d.year, 2027);
	assert_int_equal(d.month, 3);
	assert_int_equal(d.day, 31);
	assert_int_equal(setenv("GPUPROV_TODAY", "tomorrow", 1), 0);
	assert_int_equal(gp_today(&d), -1);
	assert_int_equal(unsetenv("GPUPROV_TODAY"), 0);
	assert_int_equal(gp_today(&d), 0);
	assert_true(d.year >= 2026);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_past_eol),
		cmocka_unit_test(test_successor),
		cmocka_unit_test(test_proprietary_and_last_branch),
		cmocka_unit_test(test_date),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
