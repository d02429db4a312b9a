/* The plan and its renderings. The text form is pasted into change
 * reviews: it is stable (no times, no pids), ordered like the run, and
 * shows every file change as a unified diff and every command as argv. */
#include <stdarg.h>
#include <string.h>

#include "gpuprov/diff.h"
#include "gpuprov/output.h"
#include "gpuprov/plan.h"
#include "gpuprov/root.h"
#include "gpuprov/util.h"

/* Each state's words for people and identifier for machines. */
static const struct {
	const char *name;
	const char *id;
} state_names[] = {
	[GP_STATE_SATISFIED] = { "satisfied", "satisfied" },
	[GP_STATE_NEEDED] = { "needed", "needed" },
	[GP_STATE_REBOOT_PENDING] = { "reboot pending", "reboot_pending" },
	[GP_STATE_WAITING_REBOOT] = { "waiting for reboot", "waiting_reboot" },
	[GP_STATE_BLOCKED] = { "blocked", "blocked" },
	[GP_STATE_NOT_IMPLEMENTED] = { "not implemented", "not_implemented" },
	[GP_STATE_DISABLED] = { "disabled", "disabled" },
	[GP_STATE_SKIPPED] = { "skipped", "skipped" },
	[GP_STATE_FAILED] = { "failed", "failed" },
};

const char *gp_stage_state_name(enum gp_stage_state s)
{
	return (unsigned)s < ARRAY_SIZE(state_names) ? state_names[s].name : "?";
}

const char *gp_stage_state_id(enum gp_stage_state s)
{
	return (unsigned)s < ARRAY_SIZE(state_names) ? state_names[s].id : "?";
}

const char *gp_change_name(enum gp_change c)
{
	return c == GP_CHANGE_CORRECTIVE ? "corrective" : "intentional";
}

const char *gp_effect_kind_name(enum gp_effect_kind k)
{
	static const char *const names[] = {
		[GP_EFFECT_WRITE] = "write",
		[GP_EFFECT_REMOVE] = "remove",
		[GP_EFFECT_SYMLINK] = "symlink",
		[GP_EFFECT_MKDIR] = "mkdir",
		[GP_EFFECT_RUN] = "run",
		[GP_EFFECT_REBOOT] = "reboot",
		[GP_EFFECT_DOWNLOAD] = "download",
		[GP_EFFECT_EXTRACT] = "extract",
		[GP_EFFECT_REMOVE_TREE] = "remove_tree",
		[GP_EFFECT_RULE] = "rule",
	};
	return (unsigned)k < ARRAY_SIZE(names) ? names[k] : "?";
}

struct gp_plan *gp_plan_new(const char *profile_name, const char *digest,
                            const char *root, bool dry_run)
{
	struct gp_plan *p = gp_xcalloc(1, sizeof *p);
	p->profile_name = gp_xstrdup(profile_name);
	p->profile_digest = gp_xstrdup(digest);
	p->root = gp_xstrdup(root);
	p->dry_run = dry_run;
	return p;
}

static void effect_free(struct gp_effect *e)
{
	free(e->path);
	free(e->old_data);
	free(e->new_data);
	free(e->target);
	gp_strv_free(e->argv);
	free(e->reason);
	free(e->url);
	free(e->sha256);
	free(e->source);
	gp_strv_free(e->replaces);
	free(e->over);
}

void gp_plan_free(struct gp_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_stages; i++) {
		struct gp_stage_plan *sp = &p->stages[i];
		for (size_t j = 0; j < sp->n_effects; j++)
			effect_free(&sp->effects[j]);
		free(sp->effects);
		free(sp->name);
		free(sp->summary);
		free(sp->reason);
	}
	free(p->stages);
	free(p->profile_name);
	free(p->profile_digest);
	free(p->root);
	free(p->os_pretty);
	free(p->mismatch);
	gp_strv_free(p->overrides);
	free(p);
}

struct gp_stage_plan *gp_plan_add_stage(struct gp_plan *p, const char *name,
                                        const char *summary)
{
	p->stages = gp_xrealloc(p->stages, (p->n_stages + 1) * sizeof *p->stages);
	struct gp_stage_plan *sp = &p->stages[p->n_stages++];
	*sp = (struct gp_stage_plan){ .name = gp_xstrdup(name),
		                      .summary = gp_xstrdup(summary) };
	return sp;
}

void gp_reason_vset(char **reason, const char *fmt, va_list ap)
{
	/* Format before freeing: the old reason may be one of the arguments. */
	char *text = gp_xvasprintf(fmt, ap);
	free(*reason);
	*reason = text;
}

void gp_stage_plan_set(struct gp_stage_plan *sp, enum gp_stage_state state,
                       const char *reason_fmt, ...)
{
	va_list ap;
	va_start(ap, reason_fmt);
	gp_reason_vset(&sp->reason, reason_fmt, ap);
	va_end(ap);
	sp->state = state;
}

struct gp_effect *gp_stage_plan_add_effect(struct gp_stage_plan *sp,
                                           enum gp_effect_kind k)
{
	sp->effects = gp_xrealloc(sp->effects, (sp->n_effects + 1) * sizeof *sp->effects);
	struct gp_effect *e = &sp->effects[sp->n_effects++];
	*e = (struct gp_effect){ .kind = k, .change = sp->change };
	return e;
}

void gp_stage_plan_truncate(struct gp_stage_plan *sp, size_t n)
{
	while (sp->n_effects > n)
		effect_free(&sp->effects[--sp->n_effects]);
}

bool gp_plan_stage_needed(const struct gp_plan *p, const char *name)
{
	for (size_t i = 0; p && i < p->n_stages; i++)
		if (strcmp(p->stages[i].name, name) == 0)
			return p->stages[i].state == GP_STATE_NEEDED;
	return false;
}

bool gp_plan_reboot_required(const struct gp_plan *p)
{
	for (size_t i = 0; i < p->n_stages; i++) {
		if (p->stages[i].state == GP_STATE_REBOOT_PENDING)
			return true;
		for (size_t j = 0; j < p->stages[i].n_effects; j++)
			if (p->stages[i].effects[j].kind == GP_EFFECT_REBOOT)
				return true;
	}
	return false;
}

bool gp_plan_lookup_file(const struct gp_plan *p, const char *path, bool *exists,
                         const char **data, size_t *len)
{
	bool found = false;
	for (size_t i = 0; p && i < p->n_stages; i++) {
		const struct gp_stage_plan *sp = &p->stages[i];
		for (size_t j = 0; j < sp->n_effects; j++) {
			const struct gp_effect *e = &sp->effects[j];
			if (!e->path || strcmp(e->path, path) != 0)
				continue;
			if (e->kind == GP_EFFECT_WRITE) {
				found = *exists = true;
				*data = e->new_data;
				*len = e->new_len;
			} else if (e->kind == GP_EFFECT_REMOVE) {
				found = true;
				*exists = false;
				*data = NULL;
				*len = 0;
			} else if (e->kind == GP_EFFECT_SYMLINK) {
				found = false; /* what the link names, as it is now */
			}
		}
	}
	return found;
}

static bool is_binary(const char *data, size_t len)
{
	return data && memchr(data, '\0', len) != NULL;
}

static char *effect_diff(const struct gp_effect *e)
{
	/* Over a command's output: what the plan knew, in the run too. */
	bool known_old = e->old_exists && !e->over;
	const char *old = known_old ? e->old_data : NULL;
	size_t old_len = known_old ? e->old_len : 0;
	const char *new = e->kind == GP_EFFECT_WRITE ? e->new_data : NULL;
	size_t new_len = e->kind == GP_EFFECT_WRITE ? e->new_len : 0;
	if (e->kind == GP_EFFECT_WRITE && e->source) /* a download's bytes */
		return gp_xasprintf("content of %s%s%s\n", e->source,
		                    e->sha256 ? ", sha256 " : "",
		                    e->sha256 ? e->sha256 : "");
	if (is_binary(old, old_len) || is_binary(new, new_len)) {
		char sha[65] = "";
		if (new)
			gp_sha256_hex(new, new_len, sha);
		return gp_xasprintf("binary content, %zu bytes%s%s\n", new_len,
		                    new ? ", sha256 " : "", sha);
	}
	_cleanup_free_ char *old_label = gp_xasprintf("%s%s%s%s", e->path,
	                                              e->over     ? " (as "
	                                              : known_old ? ""
	                                                          : " (absent)",
	                                              e->over ? e->over : "",
	                                              e->over ? " leaves it)" : "");
	_cleanup_free_ char *new_label = gp_xasprintf(
	    "%s%s", e->path, e->kind == GP_EFFECT_WRITE ? " (planned)" : " (removed)");
	return gp_unified_diff(old_label, old, old_len, new_label, new, new_len);
}

#define EDITED_TEXT                                                                      \
	"corrective: edited since gpuprov wrote it; the edited copy is backed up first"

static void render_effect(const struct gp_effect *e, FILE *f, bool color)
{
	const char *indent = "      ";
	switch (e->kind) {
	case GP_EFFECT_WRITE:
	case GP_EFFECT_REMOVE: {
		if (e->kind == GP_EFFECT_REMOVE && e->target) {
			fprintf(f, "%sremove link %s (-> %s)\n", indent, e->path,
			        e->target);
			break;
		}
		if (e->kind == GP_EFFECT_WRITE && e->over)
			fprintf(f,
			        "%swrite %s (over what %s leaves, backed up first; mode "
			        "%04o)\n",
			        indent, e->path, e->over, (unsigned)e->mode & 07777);
		else if (e->kind == GP_EFFECT_WRITE)
			fprintf(f, "%s%s %s (%s, mode %04o)\n", indent,
			        e->old_exists ? "replace" : "create", e->path,
			        e->edited       ? EDITED_TEXT
			        : e->old_exists ? "backed up first"
			                        : "new file",
			        (unsigned)e->mode & 07777);
		else
			fprintf(f, "%sremove %s (%s)\n", indent, e->path,
			        e->edited ? EDITED_TEXT : "backed up first");
		_cleanup_free_ char *diff = effect_diff(e);
		for (char *line = diff, *next; line && *line; line = next) {
			next = strchr(line, '\n');
			int n = next ? (int)(next - line) : (int)strlen(line);
			const char *col = "";
			if (color && (line[0] == '+' || line[0] == '-' || line[0] == '@'))
				col = line[0] == '+'   ? "\033[32m"
				      : line[0] == '-' ? "\033[31m"
				                       : "\033[36m";
			fprintf(f, "%s  %s%.*s%s\n", indent, col, n, line,
			        *col ? "\033[0m" : "");
			next = next ? next + 1 : NULL;
		}
		break;
	}
	case GP_EFFECT_SYMLINK:
		fprintf(f, "%ssymlink %s -> %s%s\n", indent, e->path, e->target,
		        e->old_exists ? " (replaces a file, backed up first)" : "");
		break;
	case GP_EFFECT_MKDIR:
		fprintf(f, "%smkdir %s (mode %04o)\n", indent, e->path,
		        (unsigned)e->mode & 07777);
		break;
	case GP_EFFECT_RUN: {
		_cleanup_free_ char *cmd = gp_argv_display(e->argv);
		fprintf(f, "%srun %s\n", indent, cmd);
		break;
	}
	case GP_EFFECT_REBOOT: {
		if (!e->argv) {
			fprintf(f, "%sreboot required: %s\n", indent, e->reason);
			break;
		}
		_cleanup_free_ char *cmd = gp_argv_display(e->argv);
		fprintf(f, "%sreboot now: run %s (a reboot will follow: %s)\n", indent,
		        cmd, e->reason);
		break;
	}
	case GP_EFFECT_DOWNLOAD:
		fprintf(f, "%sdownload %s\n", indent, e->url);
		if (e->size)
			fprintf(f, "%s  size %llu bytes, sha256 %s\n", indent, e->size,
			        e->sha256);
		else
			fprintf(f, "%s  size unknown, sha256 %s\n", indent, e->sha256);
		fprintf(f, "%s  %s %s\n", indent,
		        e->cached ? "already in the cache at" : "into the cache at",
		        e->path);
		break;
	case GP_EFFECT_EXTRACT: {
		size_t n = gp_strv_len(e->replaces);
		fprintf(f, "%sextract %s into %s (%s)\n", indent, e->source, e->path,
		        !e->old_exists ? "new directory"
		        : n            ? "replaces the directory"
		                       : "replaces the empty directory");
		fprintf(f, "%s  after its sha256 matched %s\n", indent, e->sha256);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s  replaces %s\n", indent, e->replaces[i]);
		break;
	}
	case GP_EFFECT_RULE:
		fprintf(f, "%s%s, by rule: %s\n", indent, e->target, e->reason);
		break;
	case GP_EFFECT_REMOVE_TREE: {
		size_t n = gp_strv_len(e->replaces);
		fprintf(f, "%sremove directory %s (%zu entr%s, installed by gpuprov)\n",
		        indent, e->path, n, n == 1 ? "y" : "ies");
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%s  removes %s\n", indent, e->replaces[i]);
		break;
	}
	}
}

/* A real run applied what a needed stage needed: it says what was done. */
static const char *state_word(const struct gp_plan *p, enum gp_stage_state s)
{
	return !p->dry_run && s == GP_STATE_NEEDED ? "changed" : gp_stage_state_name(s);
}

static const char *state_color(enum gp_stage_state s)
{
	switch (s) {
	case GP_STATE_SATISFIED:
		return "\033[32m";
	case GP_STATE_NEEDED:
	case GP_STATE_REBOOT_PENDING:
	case GP_STATE_WAITING_REBOOT:
		return "\033[33m";
	case GP_STATE_BLOCKED:
	case GP_STATE_FAILED:
		return "\033[31m";
	default:
		return "\033[2m";
	}
}

/* Does the plan reboot the machine itself (a reboot effect with a command)? */
static bool plan_reboots(const struct gp_plan *p)
{
	for (size_t i = 0; i < p->n_stages; i++)
		for (size_t j = 0; j < p->stages[i].n_effects; j++)
			if (p->stages[i].effects[j].kind == GP_EFFECT_REBOOT &&
			    p->stages[i].effects[j].argv)
				return true;
	return false;
}

void gp_plan_render_text(const struct gp_plan *p, FILE *f, bool color)
{
	fprintf(f, "gpuprov %s%s: profile %s (sha256 %.12s)\n",
	        p->command   ? p->command
	        : p->dry_run ? "plan"
	                     : "install",
	        p->command && p->dry_run ? " --dry-run" : "", p->profile_name,
	        p->profile_digest);
	if (p->mismatch)
		fprintf(f,
		        "%sWARNING: forced: this host does not match the profile: %s%s\n",
		        color ? "\033[31m" : "", p->mismatch, color ? "\033[0m" : "");
	for (size_t i = 0; p->overrides && p->overrides[i]; i++)
		fprintf(f, "override: compatibility rule %s\n", p->overrides[i]);
	fprintf(f, "root: %s%s%s%s\n", p->root, p->os_pretty ? " (" : "",
	        p->os_pretty ? p->os_pretty : "", p->os_pretty ? ")" : "");
	size_t counts[GP_STATE_FAILED + 1] = { 0 };
	for (size_t i = 0; i < p->n_stages; i++) {
		const struct gp_stage_plan *sp = &p->stages[i];
		counts[sp->state]++;
		fprintf(f, "\n[%zu/%zu] %s: %s%s%s", i + 1, p->n_stages, sp->name,
		        color ? state_color(sp->state) : "", state_word(p, sp->state),
		        color ? "\033[0m" : "");
		if (sp->reason && *sp->reason)
			fprintf(f, " - %s", sp->reason);
		fputc('\n', f);
		/* A stage no install applied yet says nothing (fresh plans stay). */
		if (sp->n_effects && sp->change != GP_CHANGE_NEW)
			fprintf(f, "      %s\n",
			        sp->change == GP_CHANGE_CORRECTIVE
			            ? "corrective: drift back to the profile the last "
			              "install applied"
			            : "intentional: the profile changed since the last "
			              "install");
		for (size_t j = 0; j < sp->n_effects; j++)
			render_effect(&sp->effects[j], f, color);
	}
	fputs("\nsummary:", f);
	const char *sep = " ";
	for (enum gp_stage_state s = 0; s <= GP_STATE_FAILED; s++) {
		if (!counts[s])
			continue;
		fprintf(f, "%s%zu %s", sep, counts[s], state_word(p, s));
		sep = ", ";
	}
	if (plan_reboots(p))
		fputs("; a reboot will follow (--reboot=auto)", f);
	else if (gp_plan_reboot_required(p))
		fputs("; a reboot is required after this run", f);
	fputc('\n', f);
}

static void add_mode(cJSON *o, mode_t mode)
{
	char buf[8];
	snprintf(buf, sizeof buf, "%04o", (unsigned)mode & 07777);
	cJSON_AddStringToObject(o, "mode", buf);
}

cJSON *gp_effect_to_json(const struct gp_effect *e)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", gp_effect_kind_name(e->kind));
	char sha[65];
	switch (e->kind) {
	case GP_EFFECT_WRITE:
	case GP_EFFECT_REMOVE: {
		cJSON_AddStringToObject(o, "path", e->path);
		if (e->over)
			cJSON_AddStringToObject(o, "over", e->over);
		else
			cJSON_AddBoolToObject(o, "exists", e->old_exists);
		if (e->kind == GP_EFFECT_REMOVE && e->target) {
			cJSON_AddStringToObject(o, "link_target", e->target);
			break;
		}
		if (e->old_exists && !e->over) {
			gp_sha256_hex(e->old_data, e->old_len, sha);
			cJSON_AddStringToObject(o, "old_sha256", sha);
		}
		if (e->kind == GP_EFFECT_WRITE && e->source) {
			/* What the plan knew before the download, in the run too. */
			add_mode(o, e->mode);
			cJSON_AddStringToObject(o, "source", e->source);
			if (e->sha256)
				cJSON_AddStringToObject(o, "sha256", e->sha256);
			else
				cJSON_AddNullToObject(o, "sha256");
		} else if (e->kind == GP_EFFECT_WRITE) {
			add_mode(o, e->mode);
			gp_sha256_hex(e->new_data, e->new_len, sha);
			cJSON_AddStringToObject(o, "sha256", sha);
			cJSON_AddNumberToObject(o, "size", (double)e->new_len);
		}
		_cleanup_free_ char *diff = effect_diff(e);
		cJSON_AddStringToObject(o, "diff", diff);
		break;
	}
	case GP_EFFECT_SYMLINK:
		cJSON_AddStringToObject(o, "path", e->path);
		cJSON_AddStringToObject(o, "target", e->target);
		cJSON_AddBoolToObject(o, "replaces_file", e->old_exists);
		break;
	case GP_EFFECT_MKDIR:
		cJSON_AddStringToObject(o, "path", e->path);
		add_mode(o, e->mode);
		break;
	case GP_EFFECT_RUN: {
		cJSON *argv = cJSON_AddArrayToObject(o, "argv");
		for (size_t i = 0; e->argv && e->argv[i]; i++)
			cJSON_AddItemToArray(argv, cJSON_CreateString(e->argv[i]));
		break;
	}
	case GP_EFFECT_REBOOT:
		cJSON_AddStringToObject(o, "reason", e->reason);
		if (e->argv) { /* made now, by this command (--reboot=auto) */
			cJSON *argv = cJSON_AddArrayToObject(o, "argv");
			for (size_t i = 0; e->argv[i]; i++)
				cJSON_AddItemToArray(argv,
				                     cJSON_CreateString(e->argv[i]));
		}
		break;
	case GP_EFFECT_DOWNLOAD:
		cJSON_AddStringToObject(o, "url", e->url);
		cJSON_AddStringToObject(o, "sha256", e->sha256);
		if (e->size)
			cJSON_AddNumberToObject(o, "size", (double)e->size);
		else
			cJSON_AddNullToObject(o, "size");
		cJSON_AddStringToObject(o, "cache_path", e->path);
		cJSON_AddBoolToObject(o, "cached", e->cached);
		break;
	case GP_EFFECT_EXTRACT: {
		cJSON_AddStringToObject(o, "source", e->source);
		cJSON_AddStringToObject(o, "sha256", e->sha256);
		cJSON_AddStringToObject(o, "path", e->path);
		cJSON_AddBoolToObject(o, "exists", e->old_exists);
		cJSON *rep = cJSON_AddArrayToObject(o, "replaces");
		for (size_t i = 0; e->replaces && e->replaces[i]; i++)
			cJSON_AddItemToArray(rep, cJSON_CreateString(e->replaces[i]));
		break;
	}
	case GP_EFFECT_RULE:
		cJSON_AddStringToObject(o, "makes", e->target);
		cJSON_AddStringToObject(o, "rule", e->reason);
		break;
	case GP_EFFECT_REMOVE_TREE: {
		cJSON_AddStringToObject(o, "path", e->path);
		cJSON *rm = cJSON_AddArrayToObject(o, "removes");
		for (size_t i = 0; e->replaces && e->replaces[i]; i++)
			cJSON_AddItemToArray(rm, cJSON_CreateString(e->replaces[i]));
		break;
	}
	}
	cJSON_AddStringToObject(o, "change", gp_change_name(e->change));
	if (e->edited)
		cJSON_AddTrueToObject(o, "edited");
	return o;
}

cJSON *gp_plan_to_json(const struct gp_plan *p)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddNumberToObject(root, "gpuprov_plan", 1);
	cJSON_AddBoolToObject(root, "dry_run", p->dry_run);
	cJSON *prof = cJSON_AddObjectToObject(root, "profile");
	cJSON_AddStringToObject(prof, "name", p->profile_name);
	cJSON_AddStringToObject(prof, "sha256", p->profile_digest);
	cJSON_AddStringToObject(root, "root", p->root);
	if (p->os_pretty)
		cJSON_AddStringToObject(root, "os", p->os_pretty);
	else
		cJSON_AddNullToObject(root, "os");
	if (p->mismatch)
		cJSON_AddStringToObject(root, "forced_mismatch", p->mismatch);
	else
		cJSON_AddNullToObject(root, "forced_mismatch");
	cJSON *overrides = cJSON_AddArrayToObject(root, "overrides");
	for (size_t i = 0; p->overrides && p->overrides[i]; i++)
		cJSON_AddItemToArray(overrides, cJSON_CreateString(p->overrides[i]));
	cJSON *stages = cJSON_AddArrayToObject(root, "stages");
	for (size_t i = 0; i < p->n_stages; i++) {
		const struct gp_stage_plan *sp = &p->stages[i];
		cJSON *s = cJSON_CreateObject();
		cJSON_AddStringToObject(s, "name", sp->name);
		cJSON_AddStringToObject(s, "summary", sp->summary);
		cJSON_AddStringToObject(s, "state", gp_stage_state_id(sp->state));
		/* What this run did to the stage ("state" stays what check said). */
		cJSON_AddBoolToObject(s, "changed",
		                      !p->dry_run && sp->state == GP_STATE_NEEDED);
		cJSON_AddStringToObject(s, "reason", sp->reason ? sp->reason : "");
		cJSON *effects = cJSON_AddArrayToObject(s, "effects");
		for (size_t j = 0; j < sp->n_effects; j++)
			cJSON_AddItemToArray(effects, gp_effect_to_json(&sp->effects[j]));
		cJSON_AddItemToArray(stages, s);
	}
	cJSON_AddBoolToObject(root, "reboot_required", gp_plan_reboot_required(p));
	return root;
}

void gp_plan_render(const struct gp_plan *p, const struct gp_out *out)
{
	switch (out->format) {
	case GP_FORMAT_JSON:
		gp_print_json(out, gp_plan_to_json(p));
		return;
	case GP_FORMAT_PROMETHEUS: /* verify's only: the CLI refuses it here */
	case GP_FORMAT_TEXT:
		gp_plan_render_text(p, out->out, out->color);
		return;
	}
}
