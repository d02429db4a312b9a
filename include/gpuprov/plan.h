/* The plan: per stage, its check result and the effects it would make (or
 * made). One structure serves the dry-run and the record of a real run;
 * render it as text (with unified diffs) or JSON. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

enum gp_stage_state {
	GP_STATE_SATISFIED, /* nothing to do */
	GP_STATE_NEEDED, /* changes planned (or made) */
	GP_STATE_REBOOT_PENDING, /* done, takes effect after a reboot */
	GP_STATE_WAITING_REBOOT, /* needs the state after a pending reboot */
	GP_STATE_BLOCKED, /* a precondition is not met */
	GP_STATE_NOT_IMPLEMENTED, /* stage not built yet: never applied */
	GP_STATE_DISABLED, /* absent from the profile or set to false */
	GP_STATE_SKIPPED, /* excluded with --only/--skip */
	GP_STATE_FAILED, /* apply failed */
};
/* For people ("reboot pending") and for machines ("reboot_pending"). */
const char *gp_stage_state_name(enum gp_stage_state s);
const char *gp_stage_state_id(enum gp_stage_state s);

enum gp_effect_kind {
	GP_EFFECT_WRITE, /* create or replace a file */
	GP_EFFECT_REMOVE, /* remove a file */
	GP_EFFECT_SYMLINK, /* create or replace a symlink */
	GP_EFFECT_MKDIR, /* create a directory */
	GP_EFFECT_RUN, /* run a mutating command */
	GP_EFFECT_REBOOT, /* a reboot is needed (with argv: made now) */
	GP_EFFECT_DOWNLOAD, /* fetch an artifact into the download cache */
	GP_EFFECT_EXTRACT, /* extract a verified tarball into a directory */
	GP_EFFECT_REMOVE_TREE, /* remove a directory tree gpuprov installed */
	/* Effects whose operands only the run can know (names in an archive
	 * not extracted yet, package versions in apt lists not refreshed yet),
	 * recorded as one rule in the plan and the run alike: target is the
	 * kind of effect it makes ("symlink", "run"), reason the rule,
	 * replaces the directories it writes in (for stale temp files). */
	GP_EFFECT_RULE,
};
const char *gp_effect_kind_name(enum gp_effect_kind k);

/* Why a change is made, as Puppet's reports tell them apart: corrective
 * brings drift back to the profile the last install applied (a hand edit,
 * an upgrade), intentional makes what the profile asks for anew. NEW is
 * intentional too, on a stage no install has applied yet (plain in text). */
enum gp_change { GP_CHANGE_NEW, GP_CHANGE_INTENTIONAL, GP_CHANGE_CORRECTIVE };
/* "corrective" or "intentional" (NEW included). */
const char *gp_change_name(enum gp_change c);

struct gp_effect {
	enum gp_effect_kind kind;
	char *path; /* WRITE, REMOVE, SYMLINK, MKDIR */
	bool old_exists; /* WRITE, REMOVE: what was there */
	char *old_data; /* WRITE, REMOVE */
	size_t old_len;
	char *new_data; /* WRITE */
	size_t new_len;
	mode_t mode; /* WRITE, MKDIR */
	char *target; /* SYMLINK */
	char **argv; /* RUN; REBOOT made now (--reboot=auto): its command */
	char *reason; /* REBOOT */
	/* DOWNLOAD: path is the cache path, url the URL after mirror rewriting,
	 * size 0 when unknown, cached when the cache already holds it (no
	 * network). EXTRACT: path is the destination directory, source the
	 * archive, old_exists whether the destination exists, replaces the
	 * files under it that the extraction would replace (NULL: none).
	 * REMOVE_TREE: path is the directory, replaces what goes with it. */
	char *url; /* DOWNLOAD */
	char *sha256; /* DOWNLOAD, EXTRACT */
	unsigned long long size; /* DOWNLOAD */
	bool cached; /* DOWNLOAD */
	char *source; /* EXTRACT */
	char **replaces; /* EXTRACT; REMOVE_TREE: every entry removed */
	/* WRITE: what is at path comes from this command of the same run,
	 * unknown to a plan (gp_effect_write_over). */
	char *over;
	enum gp_change change; /* the stage's, or corrective when edited */
	/* WRITE, REMOVE: gpuprov wrote the file and it was changed since; the
	 * edited copy is backed up before it is replaced. */
	bool edited;
};

struct gp_stage_plan {
	char *name;
	char *summary;
	enum gp_stage_state state;
	char *reason; /* why this state, one line */
	enum gp_change change; /* of its effects (the engine sets it) */
	struct gp_effect *effects;
	size_t n_effects;
};

struct gp_plan {
	char *profile_name;
	char *profile_digest;
	char *root;
	char *os_pretty; /* may be NULL */
	bool dry_run;
	const char *command; /* "uninstall" (its header); NULL: plan or install */
	char *mismatch; /* how the host differs from the profile's match (forced) */
	char **overrides; /* "rule: reason" for each compatibility rule overridden */
	struct gp_stage_plan *stages;
	size_t n_stages;
};

struct gp_plan *gp_plan_new(const char *profile_name, const char *digest,
                            const char *root, bool dry_run);
void gp_plan_free(struct gp_plan *p);
struct gp_stage_plan *gp_plan_add_stage(struct gp_plan *p, const char *name,
                                        const char *summary);
/* Replaces *reason (freed) with the formatted text, which may use the old
 * reason as an argument; shared by gp_stage_plan_set and gp_check_set. */
void gp_reason_vset(char **reason, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
void gp_stage_plan_set(struct gp_stage_plan *sp, enum gp_stage_state state,
                       const char *reason_fmt, ...) __attribute__((format(printf, 3, 4)));
/* Appends an effect (the plan takes ownership of its fields). */
struct gp_effect *gp_stage_plan_add_effect(struct gp_stage_plan *sp,
                                           enum gp_effect_kind k);
/* Drops the effects after the first n (gp_effect_rule_end). */
void gp_stage_plan_truncate(struct gp_stage_plan *sp, size_t n);
bool gp_plan_reboot_required(const struct gp_plan *p);
/* Is stage name in this plan with changes to make (state NEEDED), i.e. will
 * it have applied before a later stage of the same run? */
bool gp_plan_stage_needed(const struct gp_plan *p, const char *name);
/* Latest planned content of path across the plan (for reads that must see
 * earlier planned writes). Returns true when the plan writes or removes it;
 * *exists tells which. */
bool gp_plan_lookup_file(const struct gp_plan *p, const char *path, bool *exists,
                         const char **data, size_t *len);

struct gp_out;
/* Prints the plan on out->out in out->format. */
void gp_plan_render(const struct gp_plan *p, const struct gp_out *out);
/* Text rendering; color from the output object. */
void gp_plan_render_text(const struct gp_plan *p, FILE *f, bool color);
cJSON *gp_plan_to_json(const struct gp_plan *p);
/* One effect as the JSON plan lists it (its "effects" entries); the event
 * stream's effect events carry the same object (src/progress.c). */
cJSON *gp_effect_to_json(const struct gp_effect *e);
