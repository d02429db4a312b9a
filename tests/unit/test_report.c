/* Verify findings and their ids (src/report.c): the id in the JSON, the
 * stage taken from it, the text unchanged by it, the subject part written
 * from a name as docs/findings.md says, and an id not of the form refused
 * as an internal error. */
#include "testutil.h"

#include "gpuprov/report.h"
#include "gpuprov/util.h"

static void test_json_has_ids(void **state)
{
	(void)state;
	struct gp_report r;
	gp_report_init(&r, "p");
	gp_report_add(&r, "nouveau.blacklist", GP_PASS, "blacklist", "ignored", "ok");
	gp_report_add_subject(&r, "driver.binding", "0000:17:00.0", GP_FAIL,
	                      "binding 0000:17:00.0", "reboot", "bound to %s", "nouveau");
	gp_report_add(&r, "driver.nvml.version", GP_WARN, "NVML driver version", "h",
	              "v");
	cJSON *j = gp_report_to_json(&r);
	char *text = cJSON_PrintUnformatted(j);
	assert_string_equal(
	    text,
	    "{\"gpuprov_report\":1,\"profile\":\"p\",\"ok\":false,\"findings\":["
	    "{\"stage\":\"nouveau\",\"id\":\"nouveau.blacklist\",\"level\":\"pass\","
	    "\"check\":\"blacklist\",\"evidence\":\"ok\",\"hint\":null},"
	    "{\"stage\":\"driver\",\"id\":\"driver.binding.0000_17_00_0\","
	    "\"level\":\"fail\",\"check\":\"binding 0000:17:00.0\","
	    "\"evidence\":\"bound to nouveau\",\"hint\":\"reboot\"},"
	    "{\"stage\":\"driver\",\"id\":\"driver.nvml.version\",\"level\":\"warn\","
	    "\"check\":\"NVML driver version\",\"evidence\":\"v\",\"hint\":\"h\"}],"
	    "\"counts\":{\"pass\":1,\"warn\":1,\"fail\":1,\"skip\":0}}");
	free(text);
	cJSON_Delete(j);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	gp_report_render_text(&r, f, false);
	fclose(f);
	assert_string_equal(buf, "gpuprov verify: profile p\n"
	                         "\nnouveau:\n"
	                         "  pass  blacklist: ok\n"
	                         "\ndriver:\n"
	                         "  fail  binding 0000:17:00.0: bound to nouveau\n"
	                         "        hint: reboot\n"
	                         "  warn  NVML driver version: v\n"
	                         "        hint: h\n"
	                         "\n1 passed, 1 warnings, 1 failed, 0 skipped\n");
	free(buf);
	gp_report_free(&r);
}

static void assert_subject(const char *name, const char *want)
{
	char *got = gp_finding_subject(name);
	assert_string_equal(got, want);
	free(got);
}

static void test_subject(void **state)
{
	(void)state;
	assert_subject("/usr/local/cuda/bin", "usr_local_cuda_bin");
	assert_subject("0000:17:00.0", "0000_17_00_0");
	assert_subject("LD_LIBRARY_PATH", "ld_library_path");
	assert_subject("libcudnn_ops", "libcudnn_ops");
	assert_subject("libcudnn9-dev-cuda-12", "libcudnn9_dev_cuda_12");
	assert_subject("__a--b..c__", "a_b_c");
	assert_subject("caf\xc3\xa9 X", "caf_x");
	assert_subject("", "_");
	assert_subject("/", "_");
}

/* Runs gp_report_add(id) (or with subject) in a child: true when it
 * aborted saying "internal error". */
static bool refused(const char *id, const char *subject)
{
	int fds[2];
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		struct gp_report r;
		gp_report_init(&r, "p");
		if (subject)
			gp_report_add_subject(&r, id, subject, GP_FAIL, "c", "h", "e");
		else
			gp_report_add(&r, id, GP_FAIL, "c", "h", "e");
		gp_report_free(&r);
		_exit(0);
	}
	close(fds[1]);
	char msg[512] = "";
	size_t n = 0;
	ssize_t got;
	while (n < sizeof msg - 1 &&
	       (got = read(fds[0], msg + n, sizeof msg - 1 - n)) > 0)
		n += (size_t)got;
	msg[n] = '\0';
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status))
		return false;
	assert_int_equal(WTERMSIG(status), SIGABRT);
	assert_non_null(strstr(msg, "internal error"));
	assert_non_null(strstr(msg, id));
	return true;
}

static void test_refused(void **state)
{
	(void)state;
	assert_false(refused("env.cuda_home", NULL));
	assert_false(refused("driver.nvml.version", NULL));
	assert_false(refused("env.path", "/usr/bin"));
	assert_true(refused("nouveau", NULL)); /* a stage alone: the old call */
	assert_true(refused("", NULL));
	assert_true(refused("Nouveau.blacklist", NULL));
	assert_true(refused("env.cuda-home", NULL));
	assert_true(refused("env..x", NULL));
	assert_true(refused("env.x.", NULL));
	assert_true(refused(".env.x", NULL));
	assert_true(refused("a.b.c.d", NULL));
	assert_true(refused("env", "x"));
	assert_true(refused("env.path.x", "/usr/bin")); /* three parts and a subject */
}

/* A measurement on the last finding: in the JSON with its fraction, null
 * expected and fraction without a figure to compare with; none on the
 * others. */
static void test_measurement(void **state)
{
	(void)state;
	struct gp_report r;
	gp_report_init(&r, "p");
	gp_report_measure(&r, 1, 2, "B/s"); /* no finding yet: nothing */
	gp_report_add(&r, "deep.ecc.gpu0", GP_PASS, "GPU 0 ECC", NULL, "0");
	gp_report_add(&r, "deep.gemm_bf16.gpu0", GP_PASS, "GPU 0 BF16", NULL, "x");
	gp_report_measure(&r, 8e14, 1e15, "FLOP/s");
	gp_report_add(&r, "deep.gemm_bf16.gpu1", GP_PASS, "GPU 1 BF16", NULL, "y");
	gp_report_measure(&r, 5e14, 0, "FLOP/s");
	cJSON *j = gp_report_to_json(&r);
	const cJSON *f = cJSON_GetObjectItem(j, "findings");
	assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(f, 0), "measurement"));
	const cJSON *m = cJSON_GetObjectItem(cJSON_GetArrayItem(f, 1), "measurement");
	assert_true(cJSON_GetObjectItem(m, "measured")->valuedouble == 8e14);
	assert_true(cJSON_GetObjectItem(m, "expected")->valuedouble == 1e15);
	assert_true(cJSON_GetObjectItem(m, "fraction")->valuedouble == 0.8);
	assert_string_equal(cJSON_GetObjectItem(m, "unit")->valuestring, "FLOP/s");
	m = cJSON_GetObjectItem(cJSON_GetArrayItem(f, 2), "measurement");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(m, "expected")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(m, "fraction")));
	cJSON_Delete(j);
	gp_report_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_has_ids),
		cmocka_unit_test(test_subject),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_measurement),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
