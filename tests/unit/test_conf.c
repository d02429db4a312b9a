/* The settings file's parser (src/pure/conf.c): comments, blanks and
 * spaces around key and value; every bad line refused with its number and
 * what to write. */
#include "testutil.h"

#include "gpuprov/conf.h"

static char *parse_error(const char *text, size_t *line)
{
	struct gp_conf conf;
	char *why = NULL;
	assert_int_equal(gp_conf_parse(text, strlen(text), &conf, line, &why), -EINVAL);
	assert_null(conf.textfile_dir);
	assert_non_null(why);
	return why;
}

static void test_parse(void **state)
{
	(void)state;
	struct gp_conf conf;
	size_t line;
	char *why = NULL;
	const char *text =
	    "# gpuprov\n\n\t textfile_dir\t=  /srv/node exporter \r\n# end";
	assert_int_equal(gp_conf_parse(text, strlen(text), &conf, &line, &why), 0);
	assert_null(why);
	assert_string_equal(conf.textfile_dir, "/srv/node exporter");
	gp_conf_clear(&conf);
	assert_null(conf.textfile_dir);
	assert_int_equal(gp_conf_parse("", 0, &conf, &line, &why), 0);
	assert_null(conf.textfile_dir);
}

static void test_errors(void **state)
{
	(void)state;
	size_t line;
	char *why = parse_error("#\ntextfile_dir /x\n", &line);
	assert_int_equal(line, 2);
	assert_non_null(strstr(why, "expected KEY = VALUE, got 'textfile_dir /x'"));
	free(why);
	why = parse_error("textfile = /x", &line);
	assert_int_equal(line, 1);
	assert_string_equal(why, "unknown key 'textfile'; the keys are: textfile_dir");
	free(why);
	why = parse_error("= /x", &line);
	assert_string_equal(why, "unknown key ''; the keys are: textfile_dir");
	free(why);
	why = parse_error("textfile_dir = /a\n\ntextfile_dir = /b\n", &line);
	assert_int_equal(line, 3);
	assert_string_equal(why, "textfile_dir given twice (first on line 1); keep one");
	free(why);
	why = parse_error("textfile_dir =\n", &line);
	assert_non_null(strstr(why, "needs an absolute directory, got ''"));
	free(why);
	why = parse_error("textfile_dir = x/y\n", &line);
	assert_non_null(strstr(why, "got 'x/y'"));
	free(why);
	/* A NUL inside the text: not text. */
	struct gp_conf conf;
	why = NULL;
	assert_int_equal(gp_conf_parse("#\n\0x", 4, &conf, &line, &why), -EINVAL);
	assert_int_equal(line, 2);
	assert_non_null(strstr(why, "NUL"));
	free(why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
