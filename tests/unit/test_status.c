/* `gpuprov status` rendering: the text for people and the JSON for
 * machines, from what the engine read out of the journal. */
#include "testutil.h"

#include "gpuprov/output.h"
#include "gpuprov/status.h"
#include "gpuprov/util.h"

static const struct gp_status_stage sample_stages[] = {
	{ "nouveau", true, "reboot_pending", "2026-11-30T04:33:19Z" },
	{ "driver", true, "applying", "2026-11-30T04:34:00Z" },
	{ "cuda", true, NULL, NULL },
	{ "cudnn", false, NULL, NULL },
};

struct sample {
	cJSON *profile, *reboot;
	struct gp_status s;
};

static void sample_open(struct sample *x, bool locked)
{
	x->profile = cJSON_Parse("{\"name\": \"a100\", \"path\": \"/p/a100.json\", "
	                         "\"sha256\": \"0123456789abcdef\", \"overrides\": "
	                         "[\"driver-cuda overridden by the profile (r): m\"]}");
	x->reboot = cJSON_Parse("{\"reason\": \"nouveau: loaded\"}");
	x->s = (struct gp_status){
		.root = "/srv/img",
		.run_in_progress = locked,
		.recorded = true,
		.profile = x->profile,
		.reboot = x->reboot,
		.reboot_reason = "nouveau: loaded",
		.files_written = 3,
		.stages = sample_stages,
		.n_stages = ARRAY_SIZE(sample_stages),
	};
}

static void sample_close(struct sample *x)
{
	cJSON_Delete(x->profile);
	cJSON_Delete(x->reboot);
}

/* out->format rendered into a string. */
static char *render(const struct gp_status *s, enum gp_format format)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct gp_out out;
	gp_out_init(&out, f, stderr);
	out.format = format;
	gp_status_render(s, &out);
	fclose(f);
	return buf;
}

static void test_text(void **state)
{
	struct sample x;
	sample_open(&x, false);
	char *t = render(&x.s, GP_FORMAT_TEXT);
	assert_string_equal(
	    t,
	    "gpuprov status: /srv/img\n"
	    "profile: a100 (sha256 0123456789ab)\n"
	    "  from /p/a100.json\n"
	    "  nouveau  reboot pending               2026-11-30T04:33:19Z\n"
	    "  driver   interrupted while applying   2026-11-30T04:34:00Z\n"
	    "  cuda     never run                    \n"
	    "  cudnn    not implemented              \n"
	    "override: compatibility rule driver-cuda overridden by the profile (r): m\n"
	    "files written: 3\n"
	    "reboot pending: nouveau: loaded\n");
	free(t);
	/* While another run holds the lock, applying is going on now. */
	x.s.run_in_progress = true;
	x.s.reboot_reason = NULL;
	t = render(&x.s, GP_FORMAT_TEXT);
	assert_non_null(strstr(t, "  driver   applying now "));
	assert_non_null(strstr(t, "reboot pending: no\n"));
	free(t);
	x.s.recorded = false;
	t = render(&x.s, GP_FORMAT_TEXT);
	assert_string_equal(t, "gpuprov status: no install recorded under /srv/img\n");
	free(t);
	sample_close(&x);
}

static void test_json(void **state)
{
	struct sample x;
	sample_open(&x, true);
	char *t = render(&x.s, GP_FORMAT_JSON);
	cJSON *doc = cJSON_Parse(t);
	assert_non_null(doc);
	char *compact = cJSON_PrintUnformatted(doc);
	assert_string_equal(
	    compact,
	    "{\"run_in_progress\":true,\"gpuprov_status\":1,\"root\":\"/srv/img\","
	    "\"profile\":{\"name\":\"a100\",\"path\":\"/p/a100.json\","
	    "\"sha256\":\"0123456789abcdef\",\"overrides\":"
	    "[\"driver-cuda overridden by the profile (r): m\"]},"
	    "\"stages\":["
	    "{\"name\":\"nouveau\",\"implemented\":true,\"state\":\"reboot_pending\","
	    "\"time\":\"2026-11-30T04:33:19Z\"},"
	    "{\"name\":\"driver\",\"implemented\":true,\"state\":\"applying\","
	    "\"time\":\"2026-11-30T04:34:00Z\"},"
	    "{\"name\":\"cuda\",\"implemented\":true,\"state\":\"never_run\",\"time\":"
	    "null},"
	    "{\"name\":\"cudnn\",\"implemented\":false,\"state\":\"not_implemented\","
	    "\"time\":null}],"
	    "\"reboot\":{\"reason\":\"nouveau: "
	    "loaded\"},\"resume\":null,\"files_written\":3}");
	cJSON_free(compact);
	cJSON_Delete(doc);
	free(t);
	/* No profile or reboot recorded: null. */
	x.s.profile = x.s.reboot = NULL;
	t = render(&x.s, GP_FORMAT_JSON);
	doc = cJSON_Parse(t);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(doc, "profile")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(doc, "reboot")));
	cJSON_Delete(doc);
	free(t);
	sample_close(&x);
}

/* What other tools say about a reboot: the flag file, its package list,
 * dnf needs-restarting (could not tell: reboot null). */
static void test_reboot_signals(void **state)
{
	(void)state;
	struct sample x;
	sample_open(&x, false);
	char *pkgs[] = { "gpuprov", "nvidia-driver-580", NULL };
	struct gp_reboot_signals sig = { .flag = true,
		                         .pkgs = pkgs,
		                         .dnf_asked = true,
		                         .dnf_reboot = -1,
		                         .dnf_says = "No such command" };
	x.s.signals = &sig;
	char *t = render(&x.s, GP_FORMAT_TEXT);
	assert_non_null(strstr(t, "reboot required (/var/run/reboot-required): yes, for "
	                          "gpuprov, nvidia-driver-580\n"));
	assert_non_null(strstr(t, "dnf needs-restarting -r: could not tell (No such "
	                          "command)\n"));
	free(t);
	t = render(&x.s, GP_FORMAT_JSON);
	cJSON *doc = cJSON_Parse(t);
	char *compact = cJSON_PrintUnformatted(
	    cJSON_GetObjectItem(doc, "reboot_signals"));
	assert_string_equal(compact,
	                    "{\"reboot_required\":true,\"packages\":[\"gpuprov\","
	                    "\"nvidia-driver-580\"],\"dnf_needs_restarting\":"
	                    "{\"reboot\":null,\"says\":\"No such command\"}}");
	cJSON_free(compact);
	cJSON_Delete(doc);
	free(t);
	/* Nothing anywhere: no line; dnf not asked is null. */
	sig = (struct gp_reboot_signals){ 0 };
	t = render(&x.s, GP_FORMAT_TEXT);
	assert_null(strstr(t, "reboot required"));
	assert_null(strstr(t, "dnf"));
	free(t);
	t = render(&x.s, GP_FORMAT_JSON);
	doc = cJSON_Parse(t);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(
	    cJSON_GetObjectItem(doc, "reboot_signals"), "dnf_needs_restarting")));
	cJSON_Delete(doc);
	free(t);
	sample_close(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_reboot_signals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
