/* `gpuprov status` rendered from what the engine read (status.h). */
#include <string.h>

#include "gpuprov/json.h"
#include "gpuprov/output.h"
#include "gpuprov/status.h"
#include "gpuprov/util.h"

/* {"reboot_required": bool, "packages": [...], "dnf_needs_restarting":
 * null | {"reboot": true | false | null, "says": "..."}} */
static cJSON *signals_to_json(const struct gp_reboot_signals *sig)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "reboot_required", sig->flag);
	cJSON *pkgs = cJSON_AddArrayToObject(o, "packages");
	for (char **p = sig->pkgs; p && *p; p++)
		cJSON_AddItemToArray(pkgs, cJSON_CreateString(*p));
	if (!sig->dnf_asked) {
		cJSON_AddNullToObject(o, "dnf_needs_restarting");
		return o;
	}
	cJSON *dnf = cJSON_AddObjectToObject(o, "dnf_needs_restarting");
	if (sig->dnf_reboot < 0)
		cJSON_AddNullToObject(dnf, "reboot");
	else
		cJSON_AddBoolToObject(dnf, "reboot", sig->dnf_reboot == 1);
	cJSON_AddStringToObject(dnf, "says", sig->dnf_says ? sig->dnf_says : "");
	return o;
}

static void render_signals(const struct gp_reboot_signals *sig, FILE *f)
{
	if (sig->flag || sig->pkgs) {
		_cleanup_free_ char *names = sig->pkgs ? gp_strv_join(sig->pkgs, ", ")
		                                       : gp_xstrdup("no packages named");
		fprintf(f, "reboot required (/var/run/reboot-required): %s%s\n",
		        sig->flag ? "yes, for " : "no, but the package list names ",
		        names);
	}
	if (!sig->dnf_asked)
		return;
	const char *says = sig->dnf_says && *sig->dnf_says ? sig->dnf_says : "no output";
	if (sig->dnf_reboot < 0)
		fprintf(f, "dnf needs-restarting -r: could not tell (%s)\n", says);
	else
		fprintf(f, "dnf needs-restarting -r: %s (%s)\n",
		        sig->dnf_reboot ? "reboot needed" : "no reboot needed", says);
}

cJSON *gp_status_to_json(const struct gp_status *s)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddBoolToObject(doc, "run_in_progress", s->run_in_progress);
	cJSON_AddNumberToObject(doc, "gpuprov_status", 1);
	cJSON_AddStringToObject(doc, "root", s->root);
	cJSON_AddItemToObject(doc, "profile",
	                      s->profile ? cJSON_Duplicate(s->profile, 1)
	                                 : cJSON_CreateNull());
	cJSON *arr = cJSON_AddArrayToObject(doc, "stages");
	for (size_t i = 0; i < s->n_stages; i++) {
		const struct gp_status_stage *st = &s->stages[i];
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "name", st->name);
		cJSON_AddBoolToObject(e, "implemented", st->implemented);
		cJSON_AddStringToObject(e, "state",
		                        st->state         ? st->state
		                        : st->implemented ? "never_run"
		                                          : "not_implemented");
		if (st->time)
			cJSON_AddStringToObject(e, "time", st->time);
		else
			cJSON_AddNullToObject(e, "time");
		cJSON_AddItemToArray(arr, e);
	}
	cJSON_AddItemToObject(doc, "reboot",
	                      s->reboot ? cJSON_Duplicate(s->reboot, 1)
	                                : cJSON_CreateNull());
	cJSON_AddItemToObject(doc, "resume",
	                      s->resume ? cJSON_Duplicate(s->resume, 1)
	                                : cJSON_CreateNull());
	cJSON_AddNumberToObject(doc, "files_written", s->files_written);
	if (s->signals)
		cJSON_AddItemToObject(doc, "reboot_signals", signals_to_json(s->signals));
	return doc;
}

/* A stage's state in words: identifiers read as words (reboot_pending),
 * applying says whether the run is still at it. */
static char *state_words(const struct gp_status *s, const struct gp_status_stage *st)
{
	if (!st->state)
		return gp_xstrdup(st->implemented ? "never run" : "not implemented");
	if (strcmp(st->state, "applying") == 0)
		return gp_xstrdup(s->run_in_progress ? "applying now"
		                                     : "interrupted while applying");
	return gp_str_replace_char(st->state, '_', ' ');
}

void gp_status_render_text(const struct gp_status *s, FILE *f)
{
	if (!s->recorded) {
		fprintf(f, "gpuprov status: no install recorded under %s\n", s->root);
		if (s->signals)
			render_signals(s->signals, f);
		return;
	}
	fprintf(f, "gpuprov status: %s\n", s->root);
	fprintf(f, "profile: %s (sha256 %.12s)\n  from %s\n",
	        gp_json_string(s->profile, "name", "?"),
	        gp_json_string(s->profile, "sha256", "?"),
	        gp_json_string(s->profile, "path", "?"));
	for (size_t i = 0; i < s->n_stages; i++) {
		const struct gp_status_stage *st = &s->stages[i];
		_cleanup_free_ char *state = state_words(s, st);
		fprintf(f, "  %-8s %-28s %s\n", st->name, state,
		        st->time ? st->time : "");
	}
	const cJSON *ov = cJSON_GetObjectItemCaseSensitive(s->profile, "overrides");
	for (const cJSON *x = ov ? ov->child : NULL; x; x = x->next)
		if (cJSON_IsString(x))
			fprintf(f, "override: compatibility rule %s\n", x->valuestring);
	fprintf(f, "files written: %d\n", s->files_written);
	if (s->reboot_reason)
		fprintf(f, "reboot pending: %s\n", s->reboot_reason);
	else
		fputs("reboot pending: no\n", f);
	const cJSON *boots = cJSON_GetObjectItemCaseSensitive(s->resume, "reboots");
	if (cJSON_IsNumber(boots))
		fprintf(f, "automatic reboots (--reboot=auto): %d for this install\n",
		        boots->valueint);
	const char *stopped = gp_json_string(s->resume, "stopped", NULL);
	if (stopped)
		fprintf(f, "automatic reboots stopped: %s\n", stopped);
	if (s->signals)
		render_signals(s->signals, f);
}

void gp_status_render(const struct gp_status *s, const struct gp_out *out)
{
	switch (out->format) {
	case GP_FORMAT_JSON:
		gp_print_json(out, gp_status_to_json(s));
		return;
	case GP_FORMAT_PROMETHEUS: /* verify's only: the CLI refuses it here */
	case GP_FORMAT_TEXT:
		gp_status_render_text(s, out->out);
		return;
	}
}
