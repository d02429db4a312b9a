/* `gpuprov stages`: the stage table (src/stages/stages.c) listed, each
 * stage with the keys its file declares and the stages it reads. The
 * tests take the stage list from here rather than keep their own. */
#include <stdio.h>

#include "gpuprov/exitcodes.h"
#include "gpuprov/stages.h"
#include "gpuprov/stagelist.h"

char *gp_stagelist_names(const char *sep)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; i < gp_stage_count; i++)
		gp_buf_printf(&b, "%s%s", i ? sep : "", gp_stages[i]->name);
	return gp_buf_steal(&b);
}

static cJSON *stage_json(const struct gp_stage *s, size_t order)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", s->name);
	cJSON_AddStringToObject(o, "summary", s->summary);
	cJSON_AddNumberToObject(o, "order", (double)order);
	cJSON_AddStringToObject(o, "doc", s->doc ? s->doc : "");
	cJSON *keys = cJSON_AddArrayToObject(o, "keys");
	for (const struct gp_key *k = s->keys; k && k->name; k++) {
		cJSON *key = cJSON_CreateObject();
		cJSON_AddStringToObject(key, "name", k->name);
		cJSON_AddStringToObject(key, "type", gp_schema_type_word(k));
		cJSON_AddItemToObject(key, "schema", gp_schema_key_json(k));
		cJSON_AddItemToArray(keys, key);
	}
	cJSON *reads = cJSON_AddArrayToObject(o, "reads");
	for (const char *const *r = s->reads; r && *r; r++)
		cJSON_AddItemToArray(reads, cJSON_CreateString(*r));
	return o;
}

static void print_text(FILE *f, const struct gp_stage *s, size_t order)
{
	fprintf(f, "%zu %s: %s\n", order, s->name, s->summary);
	fputs("  keys:", f);
	for (const struct gp_key *k = s->keys; k && k->name; k++)
		fprintf(f, "%s %s (%s)", k == s->keys ? "" : ",", k->name,
		        gp_schema_type_word(k));
	fputs(s->keys && s->keys->name ? "\n" : " none\n", f);
	if (s->reads && *s->reads) {
		fputs("  reads the settings of:", f);
		for (const char *const *r = s->reads; *r; r++)
			fprintf(f, "%s %s", r == s->reads ? "" : ",", *r);
		fputs("\n", f);
	}
}

int gp_stagelist_print(struct gp_out *out)
{
	if (out->format != GP_FORMAT_JSON) {
		for (size_t i = 0; i < gp_stage_count; i++)
			print_text(out->out, gp_stages[i], i + 1);
		return GP_EXIT_OK;
	}
	cJSON *doc = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(doc, "stages");
	for (size_t i = 0; i < gp_stage_count; i++)
		cJSON_AddItemToArray(arr, stage_json(gp_stages[i], i + 1));
	gp_print_json(out, doc);
	return GP_EXIT_OK;
}
