/* gp_rollback_target: which history entry a rollback goes to, and the
 * refusals when there is none (src/rollback.c). */
#include "testutil.h"

#include "gpuprov/error.h"
#include "gpuprov/rollback.h"

/* A history array of entries with these ids, oldest first. */
static cJSON *history_of(const int *ids, size_t n)
{
	cJSON *h = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddNumberToObject(e, "id", ids[i]);
		cJSON_AddItemToArray(h, e);
	}
	return h;
}

static const cJSON *newest(const cJSON *h)
{
	const cJSON *e = h->child;
	while (e && e->next)
		e = e->next;
	return e;
}

static int id_of(const cJSON *e)
{
	return (int)cJSON_GetObjectItem(e, "id")->valuedouble;
}

static void test_previous_and_to(void **state)
{
	static const int ids[] = { 4, 5, 7 };
	cJSON *h = history_of(ids, 3);
	char *why = NULL;
	int code = 0;
	const cJSON *e = gp_rollback_target(h, newest(h), 0, &why, &code);
	assert_non_null(e);
	assert_int_equal(id_of(e), 5);
	assert_null(why);
	e = gp_rollback_target(h, newest(h), 4, &why, &code);
	assert_non_null(e);
	assert_int_equal(id_of(e), 4);
	cJSON_Delete(h);
}

static void test_refusals(void **state)
{
	static const int ids[] = { 1, 2 };
	cJSON *h = history_of(ids, 2);
	char *why = NULL;
	int code = 0;
	/* --to the current entry, or one that is not there: the option. */
	assert_null(gp_rollback_target(h, newest(h), 2, &why, &code));
	assert_int_equal(code, GP_EOPTION);
	assert_non_null(strstr(why, "--to 2 is the current entry"));
	free(why);
	assert_null(gp_rollback_target(h, newest(h), 9, &why, &code));
	assert_int_equal(code, GP_EOPTION);
	assert_non_null(strstr(why, "--to 9: no such history entry"));
	free(why);
	/* The newest was uninstalled: no current state. */
	assert_null(gp_rollback_target(h, NULL, 0, &why, &code));
	assert_int_equal(code, GP_EBLOCKED);
	assert_non_null(strstr(why, "uninstalled"));
	free(why);
	cJSON_Delete(h);
	/* One entry only, and none at all. */
	static const int one[] = { 1 };
	h = history_of(one, 1);
	assert_null(gp_rollback_target(h, newest(h), 0, &why, &code));
	assert_int_equal(code, GP_EBLOCKED);
	assert_non_null(strstr(why, "only one install recorded"));
	free(why);
	cJSON_Delete(h);
	assert_null(gp_rollback_target(NULL, NULL, 0, &why, &code));
	assert_int_equal(code, GP_EBLOCKED);
	assert_non_null(strstr(why, "no install recorded"));
	free(why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_previous_and_to),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
