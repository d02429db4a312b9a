/* The one ordered stage table. Order is run order; a stage without hooks
 * is not implemented yet and is never applied. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/json.h"
#include "gpuprov/plan.h"
#include "gpuprov/profile.h"
#include "gpuprov/stages.h"
#include "gpuprov/undo.h"

const struct gp_stage *const gp_stages[] = {
	&gp_stage_nouveau,
	&gp_stage_driver,
	/* Right after the driver: its package must be at exactly the
	 * driver's version, and no CUDA runs on an NVSwitch system without it. */
	&gp_stage_fabric_manager,
	/* After the driver: it needs NVML and the persistence daemon the
	 * driver brings, and nothing after it depends on it. */
	&gp_stage_gpu_settings,
	&gp_stage_cuda,
	&gp_stage_cudnn,
	&gp_stage_pytorch,
	&gp_stage_env,
	/* Needs only the driver before it; last, so that the cuda, cudnn,
	 * pytorch and env stages never wait on a container engine. */
	&gp_stage_container_toolkit,
};
const size_t gp_stage_count = ARRAY_SIZE(gp_stages);

const struct gp_stage *gp_stage_find(const char *name)
{
	for (size_t i = 0; i < gp_stage_count; i++)
		if (strcmp(gp_stages[i]->name, name) == 0)
			return gp_stages[i];
	return NULL;
}

bool gp_stage_implemented(const struct gp_stage *s)
{
	return s->check && s->apply && s->verify;
}

const cJSON *gp_stage_settings(const struct gp_ctx *c, const struct gp_stage *self,
                               const char *other)
{
	for (const char *const *r = self->reads; r && *r; r++)
		if (strcmp(*r, other) == 0)
			return gp_profile_stage(c->profile, other);
	/* A hook reads what its row does not say: `gpuprov stages` and the
	 * schema would tell a wrong story, so stop before that ships. */
	fprintf(stderr,
	        "gpuprov: internal error: stage %s reads the settings of stage %s, "
	        "which the .reads of its row (gp_stage_%s) does not list; add it "
	        "there\n",
	        self->name, other, self->name);
	abort();
}

void gp_check_set(struct gp_check *ck, enum gp_stage_state state, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gp_reason_vset(&ck->reason, fmt, ap);
	va_end(ap);
	ck->state = state;
}

char *gp_hint_command(const struct gp_ctx *c, const char *command, const char *stage)
{
	const char *argv[12];
	size_t n = 0;
	argv[n++] = "gpuprov";
	argv[n++] = command;
	/* A rollback's entry has no file: install goes on with it unnamed. */
	const char *profile = c->profile_arg ? c->profile_arg : c->profile->path;
	if (*profile) {
		argv[n++] = "--profile";
		argv[n++] = profile;
	}
	if (stage) {
		argv[n++] = "--only";
		argv[n++] = stage;
	}
	if (!gp_root_is_host(&c->root)) {
		argv[n++] = "--root";
		argv[n++] = c->root.dir;
	}
	if (c->profile_dir) {
		argv[n++] = "--profile-dir";
		argv[n++] = c->profile_dir;
	}
	argv[n] = NULL;
	return gp_argv_display((char *const *)argv);
}

char *gp_install_hint(const struct gp_ctx *c, const char *stage)
{
	_cleanup_free_ char *cmd = gp_hint_command(c, "install", stage);
	return gp_xasprintf("run '%s'", cmd);
}

bool gp_stage_file_is(struct gp_ctx *c, const char *path, const char *want)
{
	_cleanup_free_ char *have = NULL;
	size_t len = 0;
	return gp_ctx_read(c, path, &have, &len) == 0 && len == strlen(want) &&
	       memcmp(have, want, len) == 0;
}

bool gp_stage_mark_is(struct gp_ctx *c, const char *stage, const char *key,
                      const char *value)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(
	    gp_journal_stage_get(&c->journal, stage), key);
	return cJSON_IsString(v) && gp_streq(v->valuestring, value);
}

void gp_stage_mark_set(struct gp_ctx *c, const char *stage, const char *key,
                       const char *value)
{
	gp_json_set_string(gp_journal_stage(&c->journal, stage), key, value);
}

int gp_stage_run_once(struct gp_ctx *c, const char *stage, const char *key,
                      const char *value, char *const argv[])
{
	if (gp_stage_mark_is(c, stage, key, value))
		return 0;
	if (gp_effect_run(c, argv) < 0)
		return -1;
	gp_stage_mark_set(c, stage, key, value);
	return 0;
}

const struct gp_key *gp_stages_profile_keys(void)
{
	static const struct gp_key no_keys[] = { GP_KEY_END };
	static struct gp_key rows[ARRAY_SIZE(gp_stages) + 1];
	for (size_t i = 0; i < gp_stage_count; i++)
		rows[i] = (struct gp_key){
			.name = gp_stages[i]->name,
			.type = GP_KEY_STAGE,
			.children = gp_stages[i]->keys ? gp_stages[i]->keys : no_keys,
		};
	return rows;
}

enum gp_stage_state gp_stage_undo_check(struct gp_ctx *c, const struct gp_stage *s,
                                        char **reason)
{
	enum gp_stage_state state = gp_undo_check(c, s->name, reason);
	if (!s->undo_check || state == GP_STATE_BLOCKED)
		return state;
	_cleanup_free_ char *say = NULL;
	bool more = s->undo_check(c, gp_profile_stage(c->profile, s->name), &say);
	if (say) {
		char *both = gp_xasprintf("%s; %s", *reason, say);
		free(*reason);
		*reason = both;
	}
	return more ? GP_STATE_NEEDED : state;
}

int gp_stage_undo_apply(struct gp_ctx *c, const struct gp_stage *s)
{
	const cJSON *cfg = gp_profile_stage(c->profile, s->name);
	if ((s->undo && s->undo(c, cfg) < 0) || gp_undo_apply(c, s->name) < 0)
		return -1;
	return s->undo_after ? s->undo_after(c, cfg) : 0;
}
