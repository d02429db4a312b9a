/* The pytorch stage's readers of what pip prints and writes: the versions
 * `pip index versions` lists, a dist-info METADATA's Version. */
#include "testutil.h"

#include "gpuprov/pytorch.h"

static void test_index_offers(void **state)
{
	(void)state;
	const char *out = "WARNING: pip index is currently an experimental command.\n"
	                  "torch (2.8.0+cu128)\n"
	                  "Available versions: 2.8.0+cu128, 2.7.1+cu128, 2.7.0\n"
	                  "  INSTALLED: 2.7.1+cu118\n"
	                  "  LATEST:    2.8.0+cu128\n";
	assert_true(gp_pip_index_offers(out, "2.8.0+cu128"));
	assert_true(gp_pip_index_offers(out, "2.7.1+cu128"));
	assert_true(gp_pip_index_offers(out, "2.7.0"));
	/* Whole versions only: a prefix, a longer one, the installed one. */
	assert_false(gp_pip_index_offers(out, "2.7"));
	assert_false(gp_pip_index_offers(out, "2.7.0.1"));
	assert_false(gp_pip_index_offers(out, "2.7.1+cu118"));
	assert_false(gp_pip_index_offers(out, "2.8.0"));
	/* The label only at the start of a line, CRLF line ends. */
	assert_false(gp_pip_index_offers("x Available versions: 1.0\n", "1.0"));
	assert_true(gp_pip_index_offers("Available versions: 1.0, 2.0\r\n", "2.0"));
	assert_true(gp_pip_index_offers("Available versions: 1.0", "1.0"));
	assert_false(gp_pip_index_offers("Available versions: \n", ""));
	assert_false(
	    gp_pip_index_offers("ERROR: No matching distribution found for x\n", "1.0"));
	assert_false(gp_pip_index_offers("", "1.0"));
}

static void test_metadata_version(void **state)
{
	(void)state;
	char *v = gp_pip_metadata_version("Metadata-Version: 2.1\nName: torch\n"
	                                  "Version: 2.7.1+cu118\r\n\nVersion: 9\n");
	assert_string_equal(v, "2.7.1+cu118");
	free(v);
	/* The headers end at the first empty line. */
	assert_null(gp_pip_metadata_version("Name: torch\n\nVersion: 1.0\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_index_offers),
		cmocka_unit_test(test_metadata_version),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
