/* `gpuprov profiles list|show|lint`: the profiles the search path offers. A
 * name found in an earlier directory hides the same name later, as for
 * loading. list shows what each profile is for (distro, GPU models); show
 * prints a profile as written or resolved; lint checks files the way
 * install would before touching a host (format, then compatibility). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/branches.h"
#include "gpuprov/catalog.h"
#include "gpuprov/compat.h"
#include "gpuprov/engine.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/gpus.h"
#include "gpuprov/json.h"
#include "gpuprov/pkg.h"
#include "gpuprov/profile.h"
#include "gpuprov/root.h"
#include "gpuprov/stages.h"

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
		_cleanup_free_ char *name = gp_xasprintf(
		    "%s%.*s", prefix, (int)(strlen(de->d_name) - strlen(".json")),
		    de->d_name);
		if (!gp_strv_contains(*names, name))
			gp_strv_push(names, name);
	}
	closedir(d);
}

char **gp_catalog_names(char *const *search)
{
	char **names = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; search[i]; i++)
		add_names(&names, search[i], "");
	gp_strv_sort(names);
	return names;
}

bool gp_catalog_enables_stage(const struct gp_profile *p)
{
	const cJSON *stages = cJSON_GetObjectItemCaseSensitive(p->doc, "stages");
	for (const cJSON *s = stages ? stages->child : NULL; s; s = s->next)
		if (cJSON_IsObject(s))
			return true;
	return false;
}

/* The stages say what they download and whether they add NVIDIA's
 * repository (.pin, .uses_nvidia_repo in their gp_stage rows), and any
 * other pin they need (.missing_pin); the downloads come first, then the
 * repository, then the others, each in run order. */
char **gp_catalog_missing_pins(const struct gp_profile *p)
{
	char **v = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < gp_stage_count; i++) {
		const struct gp_stage *s = gp_stages[i];
		const cJSON *cfg = s->pin ? gp_profile_stage(p, s->name) : NULL;
		if (!cfg ||
		    !gp_streq(gp_json_string(cfg, "method", s->pin->fallback),
		              s->pin->method) ||
		    gp_json_string(cfg, s->pin->key, NULL))
			continue;
		_cleanup_free_ char *why = gp_xasprintf(
		    "stage %s: stages.%s.%s is not set: gpuprov downloads nothing "
		    "without a pinned sha256 (%s)",
		    s->name, s->name, s->pin->key, s->pin->what);
		gp_strv_push(&v, why);
	}
	struct gp_pkg_nvidia_repo nv;
	gp_pkg_nvidia_repo(p, &nv);
	/* No repository at all is the stage's own error, not a pin. */
	_cleanup_free_ char *problem = nv.repo.url ? gp_pkg_repo_problem(&nv.repo) : NULL;
	gp_pkg_nvidia_repo_free(&nv);
	for (size_t i = 0; problem && i < gp_stage_count; i++) {
		const struct gp_stage *s = gp_stages[i];
		const cJSON *cfg = s->uses_nvidia_repo ? gp_profile_stage(p, s->name)
		                                       : NULL;
		if (!cfg || !s->uses_nvidia_repo(p, cfg))
			continue;
		_cleanup_free_ char *why = gp_xasprintf(
		    "stage %s: cannot add NVIDIA's repository: %s", s->name, problem);
		gp_strv_push(&v, why);
	}
	for (size_t i = 0; i < gp_stage_count; i++) {
		const struct gp_stage *s = gp_stages[i];
		const cJSON *cfg = s->missing_pin ? gp_profile_stage(p, s->name) : NULL;
		_cleanup_free_ char *missing = cfg ? s->missing_pin(p, cfg) : NULL;
		if (!missing)
			continue;
		_cleanup_free_ char *why = gp_xasprintf("stage %s: %s", s->name, missing);
		gp_strv_push(&v, why);
	}
	return v;
}

/* --- list --------------------------------------------------------------- */

/* The model in a board name: "A100 SXM4 80GB" -> "A100", "H200 NVL" ->
 * "H200", "RTX 3090 Ti" stays. Words from the first form factor or memory
 * size on are dropped. */
static char *gpu_model(const char *name)
{
	static const char *const form_factors[] = { "SXM", "PCIe", "NVL", "HGX" };
	const char *cut = NULL;
	for (const char *w = name; *w && !cut;
	     w += strcspn(w, " "), w += strspn(w, " ")) {
		size_t n = strcspn(w, " ");
		for (size_t i = 0; i < ARRAY_SIZE(form_factors); i++)
			if (strncmp(w, form_factors[i], strlen(form_factors[i])) == 0)
				cut = w;
		/* "80GB", "40GB" */
		size_t digits = strspn(w, "0123456789");
		if (digits && digits + 2 == n && strncmp(w + digits, "GB", 2) == 0)
			cut = w;
	}
	if (!cut || cut == name)
		return gp_xstrdup(name);
	size_t len = (size_t)(cut - name);
	while (len && name[len - 1] == ' ')
		len--;
	return gp_xstrndup(name, len);
}

/* Model names for match.gpus ("10de:20b0" -> "A100"), each once, in order;
 * an id gpuprov does not know is shown as given. */
static char **gpu_models(const cJSON *match)
{
	char **models = gp_xcalloc(1, sizeof(char *));
	_cleanup_strv_ char **ids = gp_json_strv(match, "gpus");
	for (size_t i = 0; ids && ids[i]; i++) {
		unsigned vendor, device;
		char end;
		const struct gp_gpu_info *g = NULL;
		if (sscanf(ids[i], "%4x:%4x%c", &vendor, &device, &end) == 2 &&
		    vendor == 0x10de)
			g = gp_gpu_lookup(device);
		_cleanup_free_ char *model = g ? gpu_model(g->name) : gp_xstrdup(ids[i]);
		if (!gp_strv_contains(models, model))
			gp_strv_push(&models, model);
	}
	return models;
}

/* "ubuntu 22.04" from match.os_id and match.version_id; NULL when the
 * profile names no distribution. */
static char *match_distro(const cJSON *match)
{
	const char *id = gp_json_string(match, "os_id", NULL);
	const char *ver = gp_json_string(match, "version_id", NULL);
	if (!id)
		return NULL;
	return ver ? gp_xasprintf("%s %s", id, ver) : gp_xstrdup(id);
}

struct list_row {
	char *name, *distro, *gpus, *description;
};

static void print_row(struct gp_out *out, const int w[3], const char *name,
                      const char *distro, const char *gpus, const char *desc)
{
	fprintf(out->out, "%-*s  %-*s  %-*s  %s\n", w[0], name, w[1], distro, w[2], gpus,
	        desc);
}

int gp_engine_profiles_list(const struct gp_options *o, struct gp_out *out)
{
	_cleanup_strv_ char **search = gp_profile_search_path(o->profile_dir);
	_cleanup_strv_ char **names = gp_catalog_names(search);
	size_t n = gp_strv_len(names), rows_n = 0;
	struct list_row *rows = gp_xcalloc(n ? n : 1, sizeof *rows);
	cJSON *arr = cJSON_CreateArray();
	int code = GP_EXIT_OK;
	for (size_t i = 0; i < n; i++) {
		struct gp_profile *p = NULL;
		struct gp_err err = { 0 };
		if (gp_profile_load(names[i], search, &p, &err) < 0) {
			gp_warn(out, "%s", err.msg);
			code = GP_EXIT_INVALID_INPUT;
			continue;
		}
		const cJSON *match = cJSON_GetObjectItemCaseSensitive(p->doc, "match");
		const char *desc = gp_json_string(p->doc, "description", "");
		_cleanup_free_ char *distro = match_distro(match);
		_cleanup_strv_ char **models = gpu_models(match);
		_cleanup_strv_ char **pins = gp_catalog_missing_pins(p);
		if (out->format == GP_FORMAT_JSON) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "name", p->name);
			if (distro)
				cJSON_AddStringToObject(e, "distro", distro);
			else
				cJSON_AddNullToObject(e, "distro");
			cJSON_AddItemToObject(
			    e, "gpus",
			    cJSON_CreateStringArray((const char *const *)models,
			                            (int)gp_strv_len(models)));
			cJSON_AddStringToObject(e, "description", desc);
			cJSON_AddStringToObject(e, "path", p->path);
			cJSON_AddBoolToObject(e, "base", !gp_catalog_enables_stage(p));
			cJSON_AddItemToObject(
			    e, "blocked",
			    cJSON_CreateStringArray((const char *const *)pins,
			                            (int)gp_strv_len(pins)));
			cJSON_AddItemToArray(arr, e);
		} else {
			struct list_row *r = &rows[rows_n++];
			r->name = gp_xstrdup(p->name);
			r->distro = gp_xstrdup(distro ? distro : "-");
			r->gpus = models[0] ? gp_strv_join(models, ", ")
			                    : gp_xstrdup("-");
			/* Not installable as it is: say so where it is chosen. */
			r->description = pins[0] ? gp_xasprintf("[blocked: missing pin; "
			                                        "see profiles lint] %s",
			                                        desc)
			                         : gp_xstrdup(desc);
		}
		gp_profile_free(p);
	}
	if (out->format == GP_FORMAT_JSON) {
		gp_print_json(out, arr);
	} else {
		cJSON_Delete(arr);
		int w[3] = { (int)strlen("NAME"), (int)strlen("DISTRO"),
			     (int)strlen("GPUS") };
		for (size_t i = 0; i < rows_n; i++) {
			const char *cols[3] = { rows[i].name, rows[i].distro,
				                rows[i].gpus };
			for (size_t c = 0; c < 3; c++)
				if ((int)strlen(cols[c]) > w[c])
					w[c] = (int)strlen(cols[c]);
		}
		print_row(out, w, "NAME", "DISTRO", "GPUS", "DESCRIPTION");
		for (size_t i = 0; i < rows_n; i++)
			print_row(out, w, rows[i].name, rows[i].distro, rows[i].gpus,
			          rows[i].description);
	}
	for (size_t i = 0; i < rows_n; i++) {
		free(rows[i].name);
		free(rows[i].distro);
		free(rows[i].gpus);
		free(rows[i].description);
	}
	free(rows);
	return code;
}

/* The names only, without loading the files: quick enough for shell
 * completion, and a broken profile still completes. */
int gp_engine_profiles_names(const struct gp_options *o, struct gp_out *out)
{
	_cleanup_strv_ char **search = gp_profile_search_path(o->profile_dir);
	_cleanup_strv_ char **names = gp_catalog_names(search);
	if (out->format == GP_FORMAT_JSON) {
		gp_print_json(out, cJSON_CreateStringArray((const char *const *)names,
		                                           (int)gp_strv_len(names)));
		return GP_EXIT_OK;
	}
	for (size_t i = 0; names[i]; i++)
		fprintf(out->out, "%s\n", names[i]);
	return GP_EXIT_OK;
}

/* --- show --------------------------------------------------------------- */

int gp_engine_profiles_show(const struct gp_options *o, const char *name, bool resolved,
                            struct gp_out *out)
{
	_cleanup_strv_ char **search = gp_profile_search_path(o->profile_dir);
	struct gp_profile *p = NULL;
	struct gp_err err = { 0 };
	if (gp_profile_load(name, search, &p, &err) < 0) {
		gp_error(out, "%s", err.msg);
		return gp_exit_code(&err);
	}
	if (resolved) {
		gp_print_json(out, cJSON_Duplicate(p->doc, 1));
		gp_profile_free(p);
		return GP_EXIT_OK;
	}
	/* The file as written, comments and all: what an operator reviews. */
	struct gp_root host = { .fd = -1 };
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int rc = gp_root_open(&host, "/");
	if (rc == 0)
		rc = gp_root_read_max(&host, p->path, GP_PROFILE_MAX, &text, &len);
	gp_root_close(&host);
	if (rc < 0) {
		_cleanup_free_ char *why = gp_host_read_error(p->path, GP_PROFILE_MAX,
		                                              rc);
		gp_error(out, "cannot read profile: %s", why);
		gp_profile_free(p);
		return GP_EXIT_INVALID_INPUT;
	}
	if (out->format == GP_FORMAT_JSON) {
		cJSON *doc = cJSON_CreateObject();
		cJSON_AddStringToObject(doc, "name", p->name);
		cJSON_AddStringToObject(doc, "path", p->path);
		cJSON_AddStringToObject(doc, "text", text);
		gp_print_json(out, doc);
	} else {
		fwrite(text, 1, len, out->out);
	}
	gp_profile_free(p);
	return GP_EXIT_OK;
}

/* --- lint --------------------------------------------------------------- */

/* A file argument always names a file, even without ".json" or a slash. */
static char *lint_path(const char *file)
{
	if (file[0] == '/' || gp_str_starts_with(file, "./") ||
	    gp_str_starts_with(file, "../") || gp_str_ends_with(file, ".json"))
		return gp_xstrdup(file);
	return gp_xasprintf("./%s", file);
}

/* Lints one file: prints its lines (or adds its JSON entry) and returns
 * its exit code. */
static int lint_one(const char *file, char *const *search, const struct gp_date *today,
                    struct gp_out *out, cJSON *files_json)
{
	_cleanup_free_ char *path = lint_path(file);
	struct gp_profile *p = NULL;
	_cleanup_strv_ char **all = gp_xcalloc(1, sizeof(char *));
	struct gp_err err = { .all = all };
	cJSON *e = out->format == GP_FORMAT_JSON ? cJSON_CreateObject() : NULL;
	if (e) {
		cJSON_AddStringToObject(e, "file", file);
		cJSON_AddItemToArray(files_json, e);
	}
	int rc = gp_profile_load(path, search, &p, &err);
	all = err.all; /* the loader may have grown it */
	if (rc < 0) {
		cJSON *errors = e ? cJSON_CreateArray() : NULL;
		for (size_t i = 0; all[i]; i++) {
			/* Errors from the loader name their file (this one or a
			 * parent); others ("cannot open ...") get it in front. */
			bool named = gp_str_starts_with(all[i], path) ||
			             gp_str_starts_with(all[i], file);
			if (errors)
				cJSON_AddItemToArray(errors, cJSON_CreateString(all[i]));
			else if (named)
				fprintf(out->out, "%s\n", all[i]);
			else
				fprintf(out->out, "%s: %s\n", file, all[i]);
		}
		if (e) {
			cJSON_AddStringToObject(e, "status", "invalid");
			cJSON_AddStringToObject(e, "error", err.msg);
			cJSON_AddItemToObject(e, "errors", errors);
			cJSON_AddItemToObject(e, "issues", cJSON_CreateArray());
			cJSON_AddItemToObject(e, "warnings", cJSON_CreateArray());
		}
		return GP_EXIT_INVALID_INPUT;
	}
	struct gp_compat_report rep;
	gp_compat_check(p->doc, &rep);
	size_t blocking = gp_compat_blocking(&rep);
	_cleanup_strv_ char **pins = gp_catalog_missing_pins(p);
	cJSON *blocked = e ? cJSON_CreateArray() : NULL;
	for (size_t i = 0; pins[i]; i++) {
		if (blocked)
			cJSON_AddItemToArray(blocked, cJSON_CreateString(pins[i]));
		else
			fprintf(out->out, "%s: would be blocked: %s\n", file, pins[i]);
	}
	cJSON *issues = e ? cJSON_CreateArray() : NULL;
	for (size_t i = 0; i < rep.n; i++) {
		const struct gp_compat_issue *is = &rep.issues[i];
		if (issues) {
			cJSON *ij = cJSON_CreateObject();
			cJSON_AddStringToObject(ij, "rule", is->rule);
			cJSON_AddStringToObject(ij, "message", is->message);
			if (is->override)
				cJSON_AddStringToObject(ij, "override", is->override);
			else
				cJSON_AddNullToObject(ij, "override");
			cJSON_AddItemToArray(issues, ij);
		} else if (is->override) {
			fprintf(out->out, "%s: rule %s overridden: %s\n", file, is->rule,
			        is->override);
		} else {
			fprintf(out->out, "%s: rule %s: %s\n", file, is->rule,
			        is->message);
		}
	}
	/* A warning, not a refusal: an unsupported branch still works. */
	_cleanup_free_ char *eol = gp_compat_branch_eol(p->doc, today);
	cJSON *warnings = e ? cJSON_CreateArray() : NULL;
	if (eol && warnings) {
		cJSON *w = cJSON_CreateObject();
		cJSON_AddStringToObject(w, "id", "driver.branch_eol");
		cJSON_AddStringToObject(w, "message", eol);
		cJSON_AddItemToArray(warnings, w);
	} else if (eol) {
		fprintf(out->out, "%s: warning: %s\n", file, eol);
	}
	if (e) {
		cJSON_AddStringToObject(e, "status",
		                        blocking  ? "incompatible"
		                        : pins[0] ? "blocked"
		                                  : "ok");
		cJSON_AddNullToObject(e, "error");
		cJSON_AddItemToObject(e, "issues", issues);
		cJSON_AddItemToObject(e, "blocked", blocked);
		cJSON_AddItemToObject(e, "warnings", warnings);
	} else if (!blocking && !pins[0] && out->verbosity >= 0) {
		fprintf(out->out, "%s: ok\n", file);
	}
	gp_compat_report_free(&rep);
	gp_profile_free(p);
	return blocking || pins[0] ? GP_EXIT_BLOCKED : GP_EXIT_OK;
}

int gp_engine_profiles_lint(const struct gp_options *o, char *const *files,
                            struct gp_out *out)
{
	struct gp_date today;
	if (gp_today(&today) < 0) {
		gp_error(out,
		         "GPUPROV_TODAY must be a date, YYYY-MM-DD (got \"%s\"); "
		         "unset it to use today's",
		         getenv("GPUPROV_TODAY"));
		return GP_EXIT_USAGE;
	}
	_cleanup_strv_ char **search = gp_profile_search_path(o->profile_dir);
	cJSON *doc = out->format == GP_FORMAT_JSON ? cJSON_CreateObject() : NULL;
	cJSON *files_json = doc ? cJSON_AddArrayToObject(doc, "files") : NULL;
	bool invalid = false, blocked = false;
	for (size_t i = 0; files[i]; i++) {
		int rc = lint_one(files[i], search, &today, out, files_json);
		invalid |= rc == GP_EXIT_INVALID_INPUT;
		blocked |= rc == GP_EXIT_BLOCKED;
	}
	int code = invalid   ? GP_EXIT_INVALID_INPUT
	           : blocked ? GP_EXIT_BLOCKED
	                     : GP_EXIT_OK;
	if (doc) {
		cJSON_AddNumberToObject(doc, "exit_code", code);
		gp_print_json(out, doc);
	}
	return code;
}
