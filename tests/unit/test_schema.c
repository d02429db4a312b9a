/* The schema walker (src/schema.c) on tables of its own: the number type's
 * errors (FILE:LINE:COL, what was expected, the fix) and its JSON Schema;
 * and the stage table's declarations of what each stage reads from
 * another, which gp_stage_settings enforces. */
#include "testutil.h"

#include <signal.h>

#include "gpuprov/exitcodes.h"
#include "gpuprov/json.h"
#include "gpuprov/profile.h"
#include "gpuprov/stages.h"
#include "gpuprov/schema.h"

static const struct gp_key power_keys[] = {
	GP_KEY_NUMBER_ROW("watts", 100, 700, .integer = true, .doc = "Power limit.",
	                  .example = "300"),
	GP_KEY_NUMBER_ROW("ratio", 0.5, 1, .doc = "A fraction.", .example = "0.75"),
	GP_KEY_END,
};

/* Validates text (file "p.json") against power_keys: the error, or "". */
static char *validate(const char *text)
{
	struct gp_err err = { 0 };
	struct gp_json_doc d;
	assert_int_equal(gp_json_doc_parse(&d, "p.json", text, strlen(text), &err), 0);
	struct gp_schema_walk w = { .d = &d, .err = &err };
	int rc = gp_schema_validate(&w, d.json, "", power_keys);
	gp_json_doc_free(&d);
	if (rc == 0)
		return gp_xstrdup("");
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	return gp_xstrdup(err.msg);
}

static void expect(const char *text, const char *msg)
{
	char *got = validate(text);
	if (strcmp(got, msg) != 0)
		fail_msg("for %s\n got: %s\nwant: %s", text, got, msg);
	free(got);
}

static void test_number_accepted(void **state)
{
	expect("{ \"watts\": 100, \"ratio\": 0.5 }", "");
	expect("{ \"watts\": 700, \"ratio\": 1 }", "");
	expect("{ \"watts\": 350.0 }", "");
}

static void test_number_errors(void **state)
{
	expect("{\n  \"watts\": \"300\"\n}",
	       "p.json:2:12: \"watts\" must be a whole number (got \"300\")");
	expect("{ \"ratio\": true }",
	       "p.json:1:12: \"ratio\" must be a number (got true)");
	expect("{\n  \"watts\": 299.5\n}",
	       "p.json:2:12: \"watts\" must be a whole number (got 299.5); write it "
	       "without a fraction, e.g. 299");
	expect("{\n  \"watts\": 900\n}",
	       "p.json:2:12: \"watts\" must be from 100 to 700 (got 900); use a value in "
	       "that range");
	expect("{ \"watts\": 50 }", "p.json:1:12: \"watts\" must be from 100 to 700 (got "
	                            "50); use a value in that range");
	expect("{ \"ratio\": 1.25 }", "p.json:1:12: \"ratio\" must be from 0.5 to 1 (got "
	                              "1.25); use a value in that range");
	expect("{ \"wats\": 300 }", "p.json:1:3: unknown key \"wats\"; did you mean "
	                            "\"watts\"?");
}

static void test_number_json_schema(void **state)
{
	cJSON *s = gp_schema_key_json(&power_keys[0]);
	char *text = cJSON_PrintUnformatted(s);
	assert_string_equal(text,
	                    "{\"type\":\"integer\",\"description\":\"Power limit.\","
	                    "\"minimum\":100,\"maximum\":700,\"examples\":[300]}");
	free(text);
	cJSON_Delete(s);
	assert_string_equal(gp_schema_type_word(&power_keys[1]), "number");
}

/* Every stage declares its keys, and reads only stages of the table other
 * than itself. */
static void test_stage_rows(void **state)
{
	for (size_t i = 0; i < gp_stage_count; i++) {
		const struct gp_stage *s = gp_stages[i];
		assert_non_null(s->keys);
		assert_non_null(s->doc);
		for (const char *const *r = s->reads; r && *r; r++) {
			if (!gp_stage_find(*r) || strcmp(*r, s->name) == 0)
				fail_msg("stage %s reads \"%s\", not another stage",
				         s->name, *r);
		}
	}
}

static struct gp_profile *profile_with(const char *json)
{
	struct gp_profile *p = gp_xcalloc(1, sizeof *p);
	p->doc = cJSON_Parse(json);
	assert_non_null(p->doc);
	return p;
}

static void test_settings_declared(void **state)
{
	struct gp_profile *p = profile_with(
	    "{\"stages\": {\"cuda\": {\"version\": \"12.4\"}, \"env\": false}}");
	struct gp_ctx c = { .profile = p };
	const cJSON *cuda = gp_stage_settings(&c, &gp_stage_cudnn, "cuda");
	assert_string_equal(gp_json_string(cuda, GP_CUDA_KEY_VERSION, NULL), "12.4");
	/* Declared but disabled: no settings. */
	assert_null(gp_stage_settings(&c, &gp_stage_cuda, "env"));
	gp_profile_free(p);
}

/* Reading a stage the row does not declare stops gpuprov with an internal
 * error naming both stages. */
static void test_settings_undeclared(void **state)
{
	struct gp_profile *p = profile_with("{\"stages\": {\"driver\": {}}}");
	int fds[2];
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 2);
		struct gp_ctx c = { .profile = p };
		gp_stage_settings(&c, &gp_stage_cudnn, "driver");
		_exit(0);
	}
	close(fds[1]);
	char buf[512] = { 0 };
	size_t n = 0;
	ssize_t r;
	while (n < sizeof buf - 1 && (r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0)
		n += (size_t)r;
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	assert_string_equal(buf,
	                    "gpuprov: internal error: stage cudnn reads the settings "
	                    "of stage driver, which the .reads of its row "
	                    "(gp_stage_cudnn) does not list; add it there\n");
	gp_profile_free(p);
}

int main(void)
{
	gp_profile_use_stage_keys(gp_stages_profile_keys());
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_number_accepted),
		cmocka_unit_test(test_number_errors),
		cmocka_unit_test(test_number_json_schema),
		cmocka_unit_test(test_stage_rows),
		cmocka_unit_test(test_settings_declared),
		cmocka_unit_test(test_settings_undeclared),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
