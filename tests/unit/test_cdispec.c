/* The CDI spec reader (src/pure/cdispec.c): the facts of a spec laid out as
 * `nvidia-ctk cdi generate` writes it (tests/unit/cdispec/two-gpus.yaml),
 * what makes it stale, and the input it refuses. */
#include "testutil.h"

#include "gpuprov/cdispec.h"
#include "gpuprov/util.h"

#define SPEC GP_SRCDIR "/tests/unit/cdispec/two-gpus.yaml"

static void parse_ok(const char *text, struct gp_cdi_spec *s)
{
	struct gp_err err = { 0 };
	if (gp_cdi_spec_parse("nvidia.yaml", text, strlen(text), s, &err) < 0)
		fail_msg("refused: %s", err.msg);
}

/* The message a refused text gets. */
static char *refused(const char *text, size_t len)
{
	struct gp_err err = { 0 };
	struct gp_cdi_spec s;
	assert_int_equal(gp_cdi_spec_parse("nvidia.yaml", text, len, &s, &err), -1);
	assert_null(s.devices);
	assert_null(s.kind);
	return gp_xstrdup(err.msg);
}

static void assert_refused(const char *text, const char *want)
{
	char *msg = refused(text, strlen(text));
	if (!strstr(msg, want))
		fail_msg("refused with \"%s\", not \"%s\"", msg, want);
	free(msg);
}

static void test_generated_spec(void **state)
{
	size_t len;
	char *text = tu_read_file(SPEC, &len);
	struct gp_cdi_spec s;
	parse_ok(text, &s);
	assert_string_equal(s.kind, "nvidia.com/gpu");
	assert_int_equal(s.n_devices, 3);
	assert_string_equal(s.devices[0], "0");
	assert_string_equal(s.devices[1], "1");
	assert_string_equal(s.devices[2], "all");
	/* libcuda.so.1 (the soname link in the hook) is not a version. */
	assert_string_equal(s.driver_version, "570.86.15");
	assert_null(s.other_version);
	assert_null(gp_cdi_spec_problem(&s, "570.86.15", 2));
	assert_null(gp_cdi_spec_problem(&s, NULL, 2));
	char *why = gp_cdi_spec_problem(&s, "575.51.03", 2);
	assert_string_equal(why, "it was generated for driver 570.86.15; 575.51.03 is "
	                         "loaded: containers fail with \"unresolvable CDI "
	                         "devices\" or miss libraries");
	free(why);
	why = gp_cdi_spec_problem(&s, "570.86.15", 4);
	assert_string_equal(why, "it has no device 2, 3 (4 GPUs here)");
	free(why);
	gp_cdi_spec_free(&s);
	free(text);
}

/* Names in the dash line, indented lists, CRLF, uuid names beside index
 * ones, and only libnvidia-ml naming the version. */
static void test_other_layouts(void **state)
{
	struct gp_cdi_spec s;
	parse_ok("kind: 'nvidia.com/gpu'\r\n"
	         "devices:\r\n"
	         "  - name: \"0\"\r\n"
	         "    containerEdits:\r\n"
	         "      deviceNodes:\r\n"
	         "        - path: /dev/nvidia0\r\n"
	         "  - name: GPU-4a1b\r\n"
	         "  - name: all\r\n"
	         "containerEdits:\r\n"
	         "  mounts:\r\n"
	         "  - hostPath: /usr/lib64/libnvidia-ml.so.580.65.06\r\n",
	         &s);
	assert_int_equal(s.n_devices, 3);
	assert_string_equal(s.devices[0], "0");
	assert_string_equal(s.devices[1], "GPU-4a1b");
	assert_string_equal(s.devices[2], "all");
	assert_string_equal(s.driver_version, "580.65.06");
	assert_null(gp_cdi_spec_problem(&s, "580.65.06", 1));
	gp_cdi_spec_free(&s);
}

static void test_problems(void **state)
{
	struct gp_cdi_spec s;
	parse_ok("kind: nvidia.com/gpu\ndevices:\n- name: all\n", &s);
	char *why = gp_cdi_spec_problem(&s, NULL, 1);
	assert_string_equal(why, "it names no driver library (libcuda.so.<version>)");
	free(why);
	gp_cdi_spec_free(&s);
	parse_ok("kind: nvidia.com/gpu\ndevices:\n- name: all\n"
	         "  p: /lib/libcuda.so.570.86.15 /lib/libnvidia-ml.so.575.51.03\n",
	         &s);
	why = gp_cdi_spec_problem(&s, NULL, 0);
	assert_string_equal(why, "it names two driver versions, 570.86.15 and "
	                         "575.51.03 (a spec half regenerated)");
	free(why);
	gp_cdi_spec_free(&s);
	parse_ok("kind: example.com/net\ndevices: []\n", &s);
	why = gp_cdi_spec_problem(&s, NULL, 0);
	assert_string_equal(why,
	                    "it is for kind \"example.com/net\", not nvidia.com/gpu");
	free(why);
	gp_cdi_spec_free(&s);
}

static void test_refused(void **state)
{
	assert_refused("{\"kind\": \"nvidia.com/gpu\"}", "nvidia.yaml:1: a JSON spec");
	assert_refused("cdiVersion: 0.5.0\ndevices:\n- name: all\n", "no \"kind:\" line");
	assert_refused("kind: nvidia.com/gpu\n", "no \"devices:\" list");
	assert_refused("kind: nvidia.com/gpu\ndevices:\n- name: all\n"
	               "- containerEdits: {}\nkind: x\n",
	               "nvidia.yaml:4: the device entry has no name");
	assert_refused("kind: nvidia.com/gpu\ndevices:\n- name: all\n- path: x\n",
	               "nvidia.yaml:4: the device entry has no name");
	assert_refused("kind: nvidia.com/gpu\ndevices:\n- name: all\n  name: 0\n",
	               "nvidia.yaml:4: a second device name");
	assert_refused("kind: nvidia.com/gpu\ndevices:\n- name: \"\"\n",
	               "nvidia.yaml:3: an empty device name");
	char *msg = refused("kind: a\0b", 9);
	assert_non_null(strstr(msg, "NUL byte"));
	free(msg);
	struct gp_buf many = { 0 };
	gp_buf_puts(&many, "kind: nvidia.com/gpu\ndevices:\n");
	for (int i = 0; i <= GP_CDI_DEVICES_MAX; i++)
		gp_buf_printf(&many, "- name: \"%d\"\n", i);
	msg = refused(many.data, many.len);
	assert_non_null(strstr(msg, "more than 1024 devices"));
	free(msg);
	gp_buf_free(&many);
	char *big = gp_xcalloc(GP_CDI_SPEC_MAX + 2, 1);
	memset(big, ' ', GP_CDI_SPEC_MAX + 1);
	msg = refused(big, GP_CDI_SPEC_MAX + 1);
	assert_non_null(strstr(msg, "larger than"));
	free(msg);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_generated_spec),
		cmocka_unit_test(test_other_layouts),
		cmocka_unit_test(test_problems),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
