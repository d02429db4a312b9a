/* Plan rendering: the text pasted into change reviews and the JSON for
 * machines. Both must be exact and stable. */
#include "testutil.h"

#include "gpuprov/plan.h"
#include "gpuprov/util.h"

static struct gp_plan *sample_plan(void)
{
	struct gp_plan *p = gp_plan_new("a100-ubuntu2204", "0123456789abcdef0123",
	                                "/srv/root", true);
	p->os_pretty = gp_xstrdup("Ubuntu 22.04.4 LTS");
	struct gp_stage_plan *sp = gp_plan_add_stage(p, "nouveau", "blacklist nouveau");
	gp_stage_plan_set(sp, GP_STATE_NEEDED, "nouveau is not blacklisted");
	struct gp_effect *e = gp_stage_plan_add_effect(sp, GP_EFFECT_WRITE);
	e->path = gp_xstrdup("/etc/modprobe.d/blacklist-nouveau.conf");
	e->old_exists = true;
	e->old_data = gp_xstrdup("blacklist nouveau\n");
	e->old_len = strlen(e->old_data);
	e->new_data = gp_xstrdup("blacklist nouveau\noptions nouveau modeset=0\n");
	e->new_len = strlen(e->new_data);
	e->mode = 0644;
	e = gp_stage_plan_add_effect(sp, GP_EFFECT_RUN);
	char *const argv[] = { "update-initramfs", "-u", "it's a test", NULL };
	e->argv = gp_strv_copy(argv);
	e = gp_stage_plan_add_effect(sp, GP_EFFECT_REBOOT);
	e->reason = gp_xstrdup("nouveau is loaded");
	sp = gp_plan_add_stage(p, "driver", "NVIDIA driver");
	gp_stage_plan_set(sp, GP_STATE_NOT_IMPLEMENTED, "not implemented");
	sp = gp_plan_add_stage(p, "env", "environment");
	gp_stage_plan_set(sp, GP_STATE_SATISFIED, "up to date");
	return p;
}

static char *render(const struct gp_plan *p, bool color)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	gp_plan_render_text(p, f, color);
	fclose(f);
	return buf;
}

static void test_text(void **state)
{
	struct gp_plan *p = sample_plan();
	char *text = render(p, false);
	const char *expected =
	    "gpuprov plan: profile a100-ubuntu2204 (sha256 0123456789ab)\n"
	    "root: /srv/root (Ubuntu 22.04.4 LTS)\n"
	    "\n"
	    "[1/3] nouveau: needed - nouveau is not blacklisted\n"
	    "      replace /etc/modprobe.d/blacklist-nouveau.conf (backed up first, mode "
	    "0644)\n"
	    "        --- /etc/modprobe.d/blacklist-nouveau.conf\n"
	    "        +++ /etc/modprobe.d/blacklist-nouveau.conf (planned)\n"
	    "        @@ -1 +1,2 @@\n"
	    "         blacklist nouveau\n"
	    "        +options nouveau modeset=0\n"
	    "      run update-initramfs -u 'it'\\''s a test'\n"
	    "      reboot required: nouveau is loaded\n"
	    "\n"
	    "[2/3] driver: not implemented - not implemented\n"
	    "\n"
	    "[3/3] env: satisfied - up to date\n"
	    "\n"
	    "summary: 1 satisfied, 1 needed, 1 not implemented; a reboot is required "
	    "after this "
	    "run\n";
	assert_string_equal(text, expected);
	/* Stable: the same plan renders the same bytes. */
	char *again = render(p, false);
	assert_string_equal(text, again);
	free(again);
	/* A real run says what it did, not what was needed. */
	p->dry_run = false;
	char *done = render(p, false);
	assert_non_null(strstr(done, "gpuprov install: profile"));
	assert_non_null(
	    strstr(done, "[1/3] nouveau: changed - nouveau is not blacklisted\n"));
	assert_non_null(
	    strstr(done, "summary: 1 satisfied, 1 changed, 1 not implemented;"));
	assert_null(strstr(done, "needed"));
	free(done);
	p->dry_run = true;
	free(text);
	/* Colour only when asked. */
	text = render(p, true);
	assert_non_null(strstr(text, "\033["));
	free(text);
	gp_plan_free(p);
}

static void test_binary_content_not_diffed(void **state)
{
	struct gp_plan *p = gp_plan_new("x", "00", "/", true);
	struct gp_stage_plan *sp = gp_plan_add_stage(p, "cudnn", "s");
	gp_stage_plan_set(sp, GP_STATE_NEEDED, "r");
	struct gp_effect *e = gp_stage_plan_add_effect(sp, GP_EFFECT_WRITE);
	e->path = gp_xstrdup("/usr/lib/libx.so");
	e->new_data = gp_xmalloc(4);
	memcpy(e->new_data, "\x7f\0EL", 4);
	e->new_len = 4;
	e->mode = 0755;
	char *text = render(p, false);
	assert_non_null(strstr(text, "create /usr/lib/libx.so (new file, mode 0755)"));
	assert_non_null(strstr(text, "binary content, 4 bytes, sha256 "));
	free(text);
	gp_plan_free(p);
}

static struct gp_plan *download_plan(void)
{
	struct gp_plan *p = gp_plan_new("x", "00", "/", true);
	struct gp_stage_plan *sp = gp_plan_add_stage(p, "cudnn", "s");
	gp_stage_plan_set(sp, GP_STATE_NEEDED, "r");
	struct gp_effect *e = gp_stage_plan_add_effect(sp, GP_EFFECT_DOWNLOAD);
	e->url = gp_xstrdup("https://m.lan/c.tar.xz");
	e->sha256 = gp_xstrdup("ab12");
	e->size = 1234;
	e->path = gp_xstrdup("/var/cache/gpuprov/ab12");
	e = gp_stage_plan_add_effect(sp, GP_EFFECT_EXTRACT);
	e->source = gp_xstrdup("/var/cache/gpuprov/ab12");
	e->sha256 = gp_xstrdup("ab12");
	e->path = gp_xstrdup("/opt/c");
	e->old_exists = true;
	e->replaces = gp_xcalloc(2, sizeof(char *));
	e->replaces[0] = gp_xstrdup("/opt/c/lib/old.so");
	return p;
}

static void test_download_extract_text(void **state)
{
	struct gp_plan *p = download_plan();
	char *text = render(p, false);
	assert_non_null(strstr(text, "      download https://m.lan/c.tar.xz\n"
	                             "        size 1234 bytes, sha256 ab12\n"
	                             "        into the cache at /var/cache/gpuprov/ab12\n"
	                             "      extract /var/cache/gpuprov/ab12 into /opt/c "
	                             "(replaces the directory)\n"
	                             "        after its sha256 matched ab12\n"
	                             "        replaces /opt/c/lib/old.so\n"));
	free(text);
	p->stages[0].effects[0].cached = true;
	p->stages[0].effects[0].size = 0;
	text = render(p, false);
	assert_non_null(strstr(text, "size unknown, sha256 ab12\n"
	                             "        already in the cache at"));
	free(text);
	gp_plan_free(p);
}

static void test_download_extract_json(void **state)
{
	struct gp_plan *p = download_plan();
	cJSON *doc = gp_plan_to_json(p);
	char *text = cJSON_PrintUnformatted(doc);
	assert_non_null(strstr(text, "{\"type\":\"download\",\"url\":\"https://m.lan/"
	                             "c.tar.xz\",\"sha256\":\"ab12\",\"size\":1234,"
	                             "\"cache_path\":\"/var/cache/gpuprov/ab12\","
	                             "\"cached\":false,\"change\":\"intentional\"}"));
	assert_non_null(strstr(text, "{\"type\":\"extract\",\"source\":\"/var/cache/"
	                             "gpuprov/ab12\",\"sha256\":\"ab12\",\"path\":\"/opt/"
	                             "c\",\"exists\":true,\"replaces\":[\"/opt/c/lib/"
	                             "old.so\"],\"change\":\"intentional\"}"));
	free(text);
	cJSON_Delete(doc);
	gp_plan_free(p);
}

static void test_json(void **state)
{
	struct gp_plan *p = sample_plan();
	cJSON *doc = gp_plan_to_json(p);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(doc, "gpuprov_plan")->valueint,
	                 1);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "dry_run")));
	assert_true(
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "reboot_required")));
	const cJSON *stages = cJSON_GetObjectItemCaseSensitive(doc, "stages");
	assert_int_equal(cJSON_GetArraySize(stages), 3);
	const cJSON *s0 = cJSON_GetArrayItem(stages, 0);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(s0, "name")->valuestring,
	                    "nouveau");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(s0, "state")->valuestring,
	                    "needed");
	assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(s0, "changed")));
	const cJSON *effects = cJSON_GetObjectItemCaseSensitive(s0, "effects");
	const cJSON *w = cJSON_GetArrayItem(effects, 0);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(w, "type")->valuestring,
	                    "write");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(w, "mode")->valuestring,
	                    "0644");
	assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(w, "diff")->valuestring,
	                       "+options nouveau modeset=0\n"));
	assert_int_equal(
	    strlen(cJSON_GetObjectItemCaseSensitive(w, "sha256")->valuestring), 64);
	const cJSON *r = cJSON_GetArrayItem(effects, 1);
	const cJSON *argv = cJSON_GetObjectItemCaseSensitive(r, "argv");
	assert_int_equal(cJSON_GetArraySize(argv), 3);
	assert_string_equal(cJSON_GetArrayItem(argv, 2)->valuestring, "it's a test");
	const cJSON *s1 = cJSON_GetArrayItem(stages, 1);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(s1, "state")->valuestring,
	                    "not_implemented");
	cJSON_Delete(doc);
	gp_plan_free(p);
}

/* The JSON of one write as a plan made before a download or a command
 * sees it (no bytes, nothing there) and as the run does (bytes, an old
 * file): it must not depend on what the plan could not know. */
static char *write_json(bool run, const char *source, const char *over)
{
	struct gp_plan *p = gp_plan_new("x", "d", "/", !run);
	struct gp_stage_plan *sp = gp_plan_add_stage(p, "cuda", "toolkit");
	struct gp_effect *e = gp_stage_plan_add_effect(sp, GP_EFFECT_WRITE);
	e->path = gp_xstrdup("/usr/share/keyrings/k.gpg");
	e->old_exists = run && over;
	e->old_data = gp_xstrdup(run && over ? "what the installer left\n" : "");
	e->old_len = strlen(e->old_data);
	e->new_data = gp_xmemdup0(run || over ? "key\0bytes" : "", run || over ? 9 : 0);
	e->new_len = run || over ? 9 : 0;
	e->mode = 0644;
	e->source = source ? gp_xstrdup(source) : NULL;
	e->sha256 = source ? gp_xstrdup("ab12") : NULL;
	e->over = over ? gp_xstrdup(over) : NULL;
	cJSON *doc = gp_plan_to_json(p);
	char *text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "stages"), 0),
	    "effects"));
	cJSON_Delete(doc);
	gp_plan_free(p);
	return text;
}

static void test_write_unknown_before_run(void **state)
{
	char *plan = write_json(false, "https://k.lan/k.gpg", NULL);
	char *run = write_json(true, "https://k.lan/k.gpg", NULL);
	assert_string_equal(plan, run);
	assert_string_equal(plan, "[{\"type\":\"write\",\"path\":\"/usr/share/keyrings/"
	                          "k.gpg\",\"exists\":false,\"mode\":\"0644\",\"source\":"
	                          "\"https://k.lan/k.gpg\",\"sha256\":\"ab12\",\"diff\":"
	                          "\"content of https://k.lan/k.gpg, sha256 ab12\\n\","
	                          "\"change\":\"intentional\"}]");
	free(plan);
	free(run);
	plan = write_json(false, NULL, "the installer");
	run = write_json(true, NULL, "the installer");
	assert_string_equal(plan, run);
	assert_non_null(strstr(plan, "\"over\":\"the installer\""));
	assert_null(strstr(plan, "exists"));
	free(plan);
	free(run);
}

/* Drift: a stage brought back to the profile says so once; a file edited
 * since gpuprov wrote it says it is backed up; JSON marks every effect. */
static void test_corrective(void **state)
{
	struct gp_plan *p = sample_plan();
	struct gp_stage_plan *sp = &p->stages[0];
	for (size_t i = 0; i < sp->n_effects; i++)
		sp->effects[i].change = GP_CHANGE_CORRECTIVE;
	sp->change = GP_CHANGE_CORRECTIVE;
	sp->effects[0].edited = true;
	char *text = render(p, false);
	assert_non_null(strstr(text,
	                       "[1/3] nouveau: needed - nouveau is not blacklisted\n"
	                       "      corrective: drift back to the profile the last "
	                       "install applied\n"
	                       "      replace /etc/modprobe.d/blacklist-nouveau.conf "
	                       "(corrective: edited since gpuprov wrote it; the "
	                       "edited copy is backed up first, mode 0644)\n"));
	free(text);
	cJSON *doc = gp_plan_to_json(p);
	char *json = cJSON_PrintUnformatted(doc);
	assert_non_null(strstr(json, "\"change\":\"corrective\",\"edited\":true}"));
	assert_null(strstr(json, "intentional"));
	free(json);
	cJSON_Delete(doc);
	sp->change = GP_CHANGE_INTENTIONAL;
	text = render(p, false);
	assert_non_null(strstr(text,
	                       "      intentional: the profile changed since the last "
	                       "install\n"));
	free(text);
	gp_plan_free(p);
}

static void test_lookup_file(void **state)
{
	struct gp_plan *p = sample_plan();
	bool exists = false;
	const char *data = NULL;
	size_t len = 0;
	assert_true(gp_plan_lookup_file(p, "/etc/modprobe.d/blacklist-nouveau.conf",
	                                &exists, &data, &len));
	assert_true(exists);
	assert_int_equal(len, strlen("blacklist nouveau\noptions nouveau modeset=0\n"));
	assert_false(gp_plan_lookup_file(p, "/etc/other", &exists, &data, &len));
	gp_plan_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_binary_content_not_diffed),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_download_extract_text),
		cmocka_unit_test(test_download_extract_json),
		cmocka_unit_test(test_lookup_file),
		cmocka_unit_test(test_corrective),
		cmocka_unit_test(test_write_unknown_before_run),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
