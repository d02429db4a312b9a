/* The boot unit's words and the power limit checks (src/pure/gpusettings.c). */
#include "testutil.h"

#include "gpuprov/gpusettings.h"

/* Parses the space-separated words of line into *w: 0 or -1 (err set). */
static int parse_line(const char *line, struct gp_gpu_want *w, struct gp_err *err)
{
	_cleanup_free_ char *copy = gp_xstrdup(line);
	char *words[GP_GPU_WANT_MAX_WORDS + 4];
	size_t n = 0;
	char *save = NULL;
	for (char *t = strtok_r(copy, " ", &save); t && n < ARRAY_SIZE(words);
	     t = strtok_r(NULL, " ", &save))
		words[n++] = t;
	return gp_gpu_want_parse(words, n, w, err);
}

static void test_round_trip(void **state)
{
	struct gp_gpu_want w;
	gp_gpu_want_init(&w);
	assert_false(gp_gpu_want_any(&w));
	_cleanup_free_ char *none = gp_gpu_want_words(&w);
	assert_string_equal(none, "");
	w.power_limit_fraction = 0.85;
	w.locked_min_mhz = 1410;
	w.locked_max_mhz = 1980;
	w.app_mem_mhz = 2619;
	w.app_gpu_mhz = 1755;
	w.compute_mode = GP_COMPUTE_EXCLUSIVE_PROCESS;
	w.ecc = 1;
	w.mig = 0;
	assert_true(gp_gpu_want_any(&w));
	_cleanup_free_ char *words = gp_gpu_want_words(&w);
	assert_string_equal(words,
	                    "power_limit_fraction=0.85 locked_gpu_clocks_mhz=1410,1980 "
	                    "application_clocks_mhz=2619,1755 "
	                    "compute_mode=exclusive_process ecc=on mig=off");
	struct gp_gpu_want back;
	struct gp_err err = { 0 };
	assert_int_equal(parse_line(words, &back, &err), 0);
	_cleanup_free_ char *again = gp_gpu_want_words(&back);
	assert_string_equal(again, words);
	assert_int_equal(
	    parse_line("power_limit_w=600 compute_mode=default", &back, &err), 0);
	assert_int_equal(back.power_limit_w, 600);
	assert_int_equal(back.compute_mode, GP_COMPUTE_DEFAULT);
	assert_int_equal(back.ecc, -1);
}

static void test_refused(void **state)
{
	static const struct {
		const char *line, *msg;
	} bad[] = {
		{ "power_limit_w=0", "setting 'power_limit_w=0': the value is not one" },
		{ "power_limit_w=600W", "the value is not one" },
		{ "power_limit_w=-5", "the value is not one" },
		{ "power_limit_w=99999999999999999999", "the value is not one" },
		{ "power_limit_fraction=3", "the value is not one" },
		{ "power_limit_fraction=0.5.5", "the value is not one" },
		{ "power_limit_fraction=", "the value is not one" },
		{ "locked_gpu_clocks_mhz=1980,1410", "the value is not one" },
		{ "locked_gpu_clocks_mhz=1410", "the value is not one" },
		{ "application_clocks_mhz=1,", "the value is not one" },
		{ "compute_mode=exclusive_thread", "the value is not one" },
		{ "ecc=yes", "the value is not one" },
		{ "mig", "setting 1 is not NAME=VALUE" },
		{ "clocks=1", "unknown setting 'clocks'" },
		{ "power_limit_w=600 power_limit_fraction=0.5", "both given" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct gp_gpu_want w;
		struct gp_err err = { 0 };
		assert_int_equal(parse_line(bad[i].line, &w, &err), -1);
		assert_int_equal(err.code, GP_EINPUT);
		if (!strstr(err.msg, bad[i].msg))
			fail_msg("%s: %s", bad[i].line, err.msg);
	}
	/* Too many words, and one too long. */
	char *many[GP_GPU_WANT_MAX_WORDS + 1];
	for (size_t i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = "ecc=on";
	struct gp_gpu_want w;
	struct gp_err err = { 0 };
	assert_int_equal(gp_gpu_want_parse(many, ARRAY_SIZE(many), &w, &err), -1);
	char longword[GP_GPU_WANT_MAX_WORD + 8];
	memset(longword, '0', sizeof longword - 1);
	memcpy(longword, "ecc=", 4);
	longword[sizeof longword - 1] = '\0';
	char *one[] = { longword };
	assert_int_equal(gp_gpu_want_parse(one, 1, &w, &err), -1);
}

static void test_power_target(void **state)
{
	struct gp_gpu_want w;
	gp_gpu_want_init(&w);
	unsigned mw = 1;
	char *why = NULL;
	assert_int_equal(gp_gpu_power_target(&w, 700000, 200000, 700000, &mw, &why), 0);
	assert_int_equal(mw, 0);
	w.power_limit_w = 600;
	assert_int_equal(gp_gpu_power_target(&w, 700000, 200000, 700000, &mw, &why), 0);
	assert_int_equal(mw, 600000);
	/* The limits are inclusive. */
	w.power_limit_w = 700;
	assert_int_equal(gp_gpu_power_target(&w, 700000, 200000, 700000, &mw, &why), 0);
	w.power_limit_w = 701;
	assert_int_equal(gp_gpu_power_target(&w, 700000, 200000, 700000, &mw, &why), -1);
	assert_string_equal(why, "a power limit of 701 W lies outside the GPU's limits, "
	                         "200..700 W");
	free(why);
	w.power_limit_w = 0;
	w.power_limit_fraction = 0.85;
	assert_int_equal(gp_gpu_power_target(&w, 700000, 200000, 700000, &mw, &why), 0);
	assert_int_equal(mw, 595000);
	w.power_limit_fraction = 0.25;
	assert_int_equal(gp_gpu_power_target(&w, 700000, 200000, 700000, &mw, &why), -1);
	assert_non_null(strstr(why, "0.25 of the default 700 W (175 W)"));
	free(why);
}

static void test_compute_modes(void **state)
{
	assert_int_equal(gp_compute_mode_parse("prohibited"), GP_COMPUTE_PROHIBITED);
	assert_int_equal(gp_compute_mode_parse("exclusive_thread"), -1);
	assert_string_equal(gp_compute_mode_name(GP_COMPUTE_EXCLUSIVE_PROCESS),
	                    "exclusive_process");
	assert_null(gp_compute_mode_name(1)); /* NVML's deprecated exclusive-thread */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_power_target),
		cmocka_unit_test(test_compute_modes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
