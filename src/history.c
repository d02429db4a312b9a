/* `gpuprov history`: the install history the journal keeps, newest first.
 * An entry "ended verified" when its install's last run completed: every
 * stage done or satisfied after its apply was checked again, no reboot
 * left to do. */
#include <string.h>

#include "gpuprov/history.h"
#include "gpuprov/json.h"
#include "gpuprov/util.h"

const char *gp_history_result(const cJSON *entry, bool run_in_progress)
{
	if (cJSON_GetObjectItemCaseSensitive(entry, "uninstalled"))
		return "uninstalled";
	const char *r = gp_json_string(entry, "result", NULL);
	if (r && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "running")))
		return r;
	return run_in_progress ? "running" : "interrupted";
}

/* Ended verified: its last run completed (kept once uninstalled). */
static bool verified(const cJSON *entry, bool run_in_progress)
{
	const char *r = gp_history_result(entry, run_in_progress);
	return gp_streq(r, "completed") ||
	       (gp_streq(r, "uninstalled") &&
	        gp_streq(gp_json_string(entry, "result", NULL), "completed"));
}

static int count(const cJSON *e, const char *key)
{
	return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, key));
}

cJSON *gp_history_to_json(const cJSON *history, const cJSON *current,
                          bool run_in_progress)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(doc, "entries");
	for (const cJSON *e = history ? history->child : NULL; e; e = e->next) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "profile");
		cJSON *o = cJSON_CreateObject();
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
		cJSON_AddNumberToObject(o, "id",
		                        cJSON_IsNumber(id) ? id->valuedouble : 0);
		cJSON_AddBoolToObject(o, "current", e == current);
		cJSON_AddStringToObject(o, "result",
		                        gp_history_result(e, run_in_progress));
		cJSON_AddBoolToObject(o, "verified", verified(e, run_in_progress));
		cJSON_AddStringToObject(o, "started", gp_json_string(e, "started", ""));
		gp_json_set_string(o, "ended", gp_json_string(e, "ended", NULL));
		gp_json_set_string(o, "uninstalled",
		                   gp_json_string(e, "uninstalled", NULL));
		cJSON *prof = cJSON_AddObjectToObject(o, "profile");
		cJSON_AddStringToObject(prof, "name", gp_json_string(p, "name", ""));
		cJSON_AddStringToObject(prof, "sha256", gp_json_string(p, "sha256", ""));
		cJSON_AddNumberToObject(o, "packages", count(e, "packages"));
		cJSON_AddNumberToObject(o, "holds", count(e, "holds"));
		cJSON_AddNumberToObject(o, "files", count(e, "files"));
		cJSON_AddItemToObject(o, "record", cJSON_Duplicate(e, true));
		/* newest first */
		cJSON_InsertItemInArray(arr, 0, o);
	}
	return doc;
}

void gp_history_render(const cJSON *history, const cJSON *current, bool run_in_progress,
                       const struct gp_out *out)
{
	if (out->format == GP_FORMAT_JSON) {
		gp_print_json(out, gp_history_to_json(history, current, run_in_progress));
		return;
	}
	if (!history || !history->child) {
		fputs("gpuprov history: no install recorded\n", out->out);
		return;
	}
	cJSON *doc = gp_history_to_json(history, current, run_in_progress);
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "entries");
	for (const cJSON *o = arr->child; o; o = o->next) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "profile");
		bool is_current = cJSON_IsTrue(
		    cJSON_GetObjectItemCaseSensitive(o, "current"));
		const char *result = gp_json_string(o, "result", "");
		bool ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "verified"));
		_cleanup_free_ char *words = gp_str_replace_char(result, '_', ' ');
		fprintf(out->out, "%c %3d  %s  %s (sha256 %.12s)  %s%s\n",
		        is_current ? '*' : ' ',
		        (int)cJSON_GetObjectItemCaseSensitive(o, "id")->valuedouble,
		        gp_json_string(o, "started", ""), gp_json_string(p, "name", ""),
		        gp_json_string(p, "sha256", ""), words,
		        ok ? ", verified" : ", not completed");
		const cJSON *of = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(o, "record"), "rollback_of");
		fprintf(out->out, "       %d packages, %d holds, %d files",
		        (int)cJSON_GetObjectItemCaseSensitive(o, "packages")->valuedouble,
		        (int)cJSON_GetObjectItemCaseSensitive(o, "holds")->valuedouble,
		        (int)cJSON_GetObjectItemCaseSensitive(o, "files")->valuedouble);
		if (cJSON_IsNumber(of))
			fprintf(out->out, "; a rollback to entry %d",
			        (int)of->valuedouble);
		fputc('\n', out->out);
	}
	cJSON_Delete(doc);
}
