/* The metrics renderer (src/prometheus.c): the whole textfile of a small
 * report, drift findings counted per stage and kind, an id made twice one
 * series (failed if either failed), skipped checks left out, the driver's
 * facts, and label values escaped, cleaned of bytes that are not UTF-8 and
 * cut at a character. */
#include "testutil.h"

#include "gpuprov/prometheus.h"
#include "gpuprov/report.h"

static char *render(const struct gp_metrics *m)
{
	struct gp_buf b = { 0 };
	gp_prometheus_render(m, &b);
	return gp_buf_steal(&b);
}

static void test_textfile(void **state)
{
	(void)state;
	struct gp_report r;
	gp_report_init(&r, "p1");
	gp_report_add(&r, "nouveau.blacklist", GP_PASS, "blacklist", NULL, "ok");
	gp_report_add(&r, "nouveau.drift_file_edited.a", GP_FAIL, "edited", "h", "x");
	gp_report_add(&r, "nouveau.drift_file_edited.b", GP_WARN, "edited", "h", "x");
	gp_report_add(&r, "nouveau.drift_file_edited.c", GP_PASS, "edited", NULL, "x");
	gp_report_add(&r, "driver.drift_hold_lifted", GP_FAIL, "hold", "h", "x");
	gp_report_add(&r, "driver.probe", GP_WARN, "probe", "h", "x");
	gp_report_add(&r, "driver.probe", GP_FAIL, "probe", "h", "x");
	gp_report_add(&r, "cuda.implemented", GP_SKIP, "stage", "h", "x");
	gp_report_set_fact(&r, "driver/installed", "535.183.01");
	gp_report_set_fact(&r, "driver/loaded", NULL);
	const struct gp_metrics_stage stages[] = { { "nouveau", "done" },
		                                   { "driver", "never_run" } };
	const struct gp_metrics m = {
		.report = &r,
		.profile_sha256 = "abc",
		.stages = stages,
		.n_stages = 2,
		.reboot_pending = true,
		.timestamp_seconds = 1700000000.25,
		.duration_seconds = 0.5,
	};
	char *text = render(&m);
	assert_string_equal(
	    text,
	    "# HELP gpuprov_info gpuprov's version and the profile verified, with its "
	    "sha256 (value 1)\n"
	    "# TYPE gpuprov_info gauge\n"
	    "gpuprov_info{version=\"" GP_VERSION
	    "\",profile=\"p1\",profile_sha256=\"abc\"} 1\n"
	    "# HELP gpuprov_verify_success 1 when no verify check failed, else 0\n"
	    "# TYPE gpuprov_verify_success gauge\n"
	    "gpuprov_verify_success 0\n"
	    "# HELP gpuprov_verify_check_success 1 when the verify check (label check: "
	    "its stable id, docs/findings.md) passed or only warned, 0 when it failed; "
	    "skipped checks have no sample\n"
	    "# TYPE gpuprov_verify_check_success gauge\n"
	    "gpuprov_verify_check_success{stage=\"nouveau\",check=\"nouveau.blacklist\"} "
	    "1\n"
	    "gpuprov_verify_check_success{stage=\"nouveau\",check=\"nouveau.drift_file_"
	    "edited.a\"} 0\n"
	    "gpuprov_verify_check_success{stage=\"nouveau\",check=\"nouveau.drift_file_"
	    "edited.b\"} 1\n"
	    "gpuprov_verify_check_success{stage=\"nouveau\",check=\"nouveau.drift_file_"
	    "edited.c\"} 1\n"
	    "gpuprov_verify_check_success{stage=\"driver\",check=\"driver.drift_hold_"
	    "lifted\"} 0\n"
	    "gpuprov_verify_check_success{stage=\"driver\",check=\"driver.probe\"} 0\n"
	    "# HELP gpuprov_stage_state each stage's state in gpuprov's journal, as the "
	    "label state (done, reboot_pending, failed, never_run, ...; value 1)\n"
	    "# TYPE gpuprov_stage_state gauge\n"
	    "gpuprov_stage_state{stage=\"nouveau\",state=\"done\"} 1\n"
	    "gpuprov_stage_state{stage=\"driver\",state=\"never_run\"} 1\n"
	    "# HELP gpuprov_reboot_pending 1 while a reboot gpuprov asked for has not "
	    "happened, else 0\n"
	    "# TYPE gpuprov_reboot_pending gauge\n"
	    "gpuprov_reboot_pending 1\n"
	    "# HELP gpuprov_drift_items verify findings of drift from the journal or the "
	    "profile that did not pass, per stage and kind (file_edited, ...); no sample "
	    "when there is none\n"
	    "# TYPE gpuprov_drift_items gauge\n"
	    "gpuprov_drift_items{stage=\"nouveau\",kind=\"file_edited\"} 2\n"
	    "gpuprov_drift_items{stage=\"driver\",kind=\"hold_lifted\"} 1\n"
	    "# HELP gpuprov_driver_info the NVIDIA driver seen: installed user-space "
	    "version, loaded module version and its flavor (open, proprietary); empty "
	    "when none (value 1; no sample when the driver stage was not verified)\n"
	    "# TYPE gpuprov_driver_info gauge\n"
	    "gpuprov_driver_info{installed=\"535.183.01\",loaded=\"\",flavor=\"\"} 1\n"
	    "# HELP gpuprov_last_verify_timestamp_seconds when this verify ended, in "
	    "seconds since the Unix epoch\n"
	    "# TYPE gpuprov_last_verify_timestamp_seconds gauge\n"
	    "gpuprov_last_verify_timestamp_seconds 1700000000.250\n"
	    "# HELP gpuprov_verify_duration_seconds how long this verify took, in "
	    "seconds\n"
	    "# TYPE gpuprov_verify_duration_seconds gauge\n"
	    "gpuprov_verify_duration_seconds 0.500000\n");
	free(text);
	gp_report_free(&r);
}

/* Only the report: every family still has HELP and TYPE, the samples that
 * need the journal or the clock are left out. */
static void test_report_only(void **state)
{
	(void)state;
	struct gp_report r;
	gp_report_init(&r, "p");
	gp_report_add(&r, "env.cuda_home", GP_PASS, "CUDA_HOME", NULL, "ok");
	char *text = render(&(struct gp_metrics){ .report = &r });
	assert_non_null(strstr(text, "gpuprov_verify_success 1\n"));
	assert_non_null(strstr(text, "profile_sha256=\"\"} 1\n"));
	assert_non_null(strstr(text, "# TYPE gpuprov_drift_items gauge\n# HELP"));
	assert_non_null(strstr(text, "# TYPE gpuprov_driver_info gauge\n# HELP"));
	assert_null(strstr(text, "gpuprov_driver_info{"));
	assert_true(
	    gp_str_ends_with(text, "# TYPE gpuprov_verify_duration_seconds gauge\n"));
	free(text);
	gp_report_free(&r);
}

static char *label(const char *value)
{
	struct gp_buf b = { 0 };
	gp_prometheus_label_value(&b, value);
	return gp_buf_steal(&b);
}

static void test_label_value(void **state)
{
	(void)state;
	char *s = label("a\"b\\c\nd\te");
	assert_string_equal(s, "a\\\"b\\\\c\\nd?e");
	free(s);
	/* Valid UTF-8 kept; a lone continuation byte, an overlong form, a
	 * surrogate and a cut sequence are not. */
	s = label("\xc3\xa9|\x80|\xc0\xaf|\xed\xa0\x80|\xe2\x82");
	assert_string_equal(s, "\xc3\xa9|?|??|???|??");
	free(s);
	/* 255 x and a two-byte character: cut before it. */
	char long_value[300];
	memset(long_value, 'x', 255);
	strcpy(long_value + 255, "\xc3\xa9yy");
	s = label(long_value);
	assert_int_equal(strlen(s), 255 + 3);
	assert_true(gp_str_ends_with(s, "x..."));
	free(s);
	memset(long_value, 'x', 256);
	long_value[256] = '\0';
	s = label(long_value);
	assert_int_equal(strlen(s), 256);
	free(s);
}

static void test_facts(void **state)
{
	(void)state;
	struct gp_report r;
	gp_report_init(&r, "p");
	assert_null(gp_report_fact(&r, "driver/loaded"));
	gp_report_set_fact(&r, "driver/loaded", NULL);
	assert_string_equal(gp_report_fact(&r, "driver/loaded"), "");
	gp_report_set_fact(&r, "driver/loaded", "550.1");
	gp_report_set_fact(&r, "driver/flavor", "open");
	assert_string_equal(gp_report_fact(&r, "driver/loaded"), "550.1");
	assert_string_equal(gp_report_fact(&r, "driver/flavor"), "open");
	gp_report_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_textfile),
		cmocka_unit_test(test_report_only),
		cmocka_unit_test(test_label_value),
		cmocka_unit_test(test_facts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
