/* The resume marker's format. JSON, not NUL-separated words, so that the
 * plan's diff of the marker shows the command a person can read; parsed
 * with the journal's JSON parser and then held to exactly one form (an
 * array of at most GP_RESUME_ARGS_MAX non-empty strings), since anyone
 * able to write the file decides what the boot runs. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gpuprov/json.h"
#include "gpuprov/resumemark.h"

char *gp_resume_marker_format(char *const *argv)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; argv && argv[i]; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(argv[i]));
	char *compact = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	char *text = gp_xasprintf("%s\n", compact);
	cJSON_free(compact);
	return text;
}

int gp_resume_marker_parse(const char *text, size_t len, char ***argv, char **why)
{
	*argv = NULL;
	*why = NULL;
	if (len > GP_RESUME_MARKER_MAX) {
		*why = gp_xasprintf("larger than %zu bytes", GP_RESUME_MARKER_MAX);
		return -EINVAL;
	}
	struct gp_err err = { 0 };
	cJSON *doc = gp_json_parse("marker", text, len, &err);
	if (!doc) {
		*why = gp_xstrdup(err.msg[0] ? err.msg : "not JSON");
		return -EINVAL;
	}
	size_t n = 0;
	bool too_many = false;
	const char *problem = NULL;
	if (!cJSON_IsArray(doc))
		problem = "not a JSON array of strings";
	for (const cJSON *x = cJSON_IsArray(doc) ? doc->child : NULL; x && !problem;
	     x = x->next) {
		if (!cJSON_IsString(x) || !x->valuestring[0])
			problem = "holds something other than a non-empty string";
		else if (++n > GP_RESUME_ARGS_MAX)
			too_many = true, problem = "too many words";
	}
	if (!problem && n == 0)
		problem = "an empty array";
	if (problem) {
		cJSON_Delete(doc);
		*why = too_many
		           ? gp_xasprintf("holds more than %d words", GP_RESUME_ARGS_MAX)
		           : gp_xstrdup(problem);
		return -EINVAL;
	}
	char **v = gp_xcalloc(n + 1, sizeof *v);
	size_t i = 0;
	for (const cJSON *x = doc->child; x; x = x->next)
		v[i++] = gp_xstrdup(x->valuestring);
	cJSON_Delete(doc);
	*argv = v;
	return 0;
}
