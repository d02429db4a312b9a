/* `gpuprov profiles list|show`: the profiles the search path offers. A name
 * found in an earlier directory hides the same name later, as for loading. */
#include <dirent.h>
#include <string.h>

#include "gpuprov/engine.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/json.h"
#include "gpuprov/profile.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds the NAME.json profiles in dir (as prefix + NAME) to names, and those
 * one directory level down when prefix is empty (distro/ubuntu2204). */
static void add_names(char ***names, const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (!gp_str_ends_with(de->d_name, ".json")) {
			_cleanup_free_ char *sub = gp_xasprintf("%s/%s", dir, de->d_name);
			_cleanup_free_ char *sub_prefix = gp_xasprintf("%s/", de->d_name);
			if (!*prefix && de->d_type == DT_DIR)
				add_names(names, sub, sub_prefix);
			continue;
		}
		_cleanup_free_ char *name =
		    gp_xasprintf("%s%.*s", prefix, (int)(strlen(de->d_name) - strlen(".json")),
		                 de->d_name);
		if (!gp_strv_contains(*names, name))
			gp_strv_push(names, name);
	}
	closedir(d);
}

/* Profile names in the search path, first one wins, sorted. */
static char **collect_names(char *const *search)
{
	char **names = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; search[i]; i++)
		add_names(&names, search[i], "");
	qsort(names, gp_strv_len(names), sizeof(char *), cmp_str);
	return names;
}

int gp_engine_profiles_list(const struct gp_options *o, struct gp_out *out)
{
	_cleanup_strv_ char **search = gp_profile_search_path(o->profile_dir);
	_cleanup_strv_ char **names = collect_names(search);
	cJSON *arr = cJSON_CreateArray();
	int code = GP_EXIT_OK;
	for (size_t i = 0; names[i]; i++) {
		struct gp_profile *p = NULL;
		struct gp_err err = { 0 };
		if (gp_profile_load(names[i], search, &p, &err) < 0) {
			gp_warn(out, "%s", err.msg);
			code = GP_EXIT_INVALID_INPUT;
			continue;
		}
		const char *desc = gp_json_string(p->doc, "description", "");
		if (out->json) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "name", p->name);
			cJSON_AddStringToObject(e, "description", desc);
			cJSON_AddStringToObject(e, "path", p->path);
			cJSON_AddItemToArray(arr, e);
		} else {
			fprintf(out->out, "%-24s %s\n", p->name, desc);
		}
		gp_profile_free(p);
	}
	if (out->json) {
		char *text = cJSON_Print(arr);
		fprintf(out->out, "%s\n", text);
		free(text);
	}
	cJSON_Delete(arr);
	return code;
}

int gp_engine_profiles_show(const struct gp_options *o, const char *name,
                            struct gp_out *out)
{
	_cleanup_strv_ char **search = gp_profile_search_path(o->profile_dir);
	struct gp_profile *p = NULL;
	struct gp_err err = { 0 };
	if (gp_profile_load(name, search, &p, &err) < 0) {
		gp_error(out, "%s", err.msg);
		return err.exit_code;
	}
	char *text = cJSON_Print(p->doc);
	fprintf(out->out, "%s\n", text);
	free(text);
	gp_profile_free(p);
	return GP_EXIT_OK;
}
