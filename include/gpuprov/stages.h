/* The stage contract and the one ordered stage table (src/stages/stages.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "gpuprov/context.h"
#include "gpuprov/plan.h"
#include "gpuprov/report.h"
#include "gpuprov/schema.h"

/* The stage needs the kernel state after a pending reboot (a driver cannot
 * be installed while nouveau still holds the GPU). */
#define GP_STAGE_NEEDS_REBOOTED_KERNEL (1u << 0)

struct gp_check {
	enum gp_stage_state state; /* SATISFIED, NEEDED, REBOOT_PENDING or BLOCKED */
	char *reason; /* one line: why */
};
void gp_check_set(struct gp_check *ck, enum gp_stage_state state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A download a stage makes with one method and the key of its settings that
 * pins it: `profiles lint` and `detect` call a profile without that key
 * blocked (src/catalog.c). */
struct gp_stage_pin {
	const char *method; /* the "method" that downloads */
	const char *fallback; /* the method when the profile names none, or NULL */
	const char *key; /* the pinning key, e.g. "sha256" */
	const char *what; /* the download in a message: "the driver runfile" */
};

struct gp_stage {
	const char *name;
	const char *summary;
	unsigned flags;
	/* The profile keys of stages.<name> (GP_KEY_END terminated), declared
	 * in the stage file; doc is the stage's line in
	 * docs/profile.schema.json. */
	const struct gp_key *keys;
	const char *doc;
	/* The other stages whose settings the hooks read (gp_stage_settings),
	 * NULL-terminated; NULL for none. */
	const char *const *reads;
	/* Read-only. Returns 0, or -1 with c->err set when it could not look. */
	int (*check)(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck);
	/* Makes the changes through the effect door. 0 or -1 with c->err set. */
	int (*apply)(struct gp_ctx *c, const cJSON *cfg);
	/* Read-only findings. 0, or -1 with c->err set when it could not look. */
	int (*verify)(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep);
	/* Optional, read-only, no network: announces the downloads apply will
	 * need that the profile alone determines (gp_prefetch_add for each), so
	 * the engine can fetch them while earlier stages apply. */
	int (*prefetch)(struct gp_ctx *c, const cJSON *cfg);
	/* Optional, read-only: for a stage that waits for a pending reboot, the
	 * blockers that need only the profile and the machine as it is now
	 * (sets ck BLOCKED, or leaves it alone), so that an install is blocked
	 * before an earlier stage changes anything. 0, or -1 with c->err set. */
	int (*preflight)(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck);
	/* Optional: the download that must be pinned (see struct gp_stage_pin). */
	const struct gp_stage_pin *pin;
	/* Optional, read-only: whether the stage adds NVIDIA's package
	 * repository on a fresh host with these settings, so that `profiles
	 * lint` and `detect` hold it to that repository's pins. */
	bool (*uses_nvidia_repo)(const struct gp_profile *p, const cJSON *cfg);
	/* Optional, read-only: a pin other than those two that the stage
	 * cannot run without (another vendor repository's key), as a sentence
	 * (allocated), or NULL when it is there; `profiles lint` and `detect`
	 * call a profile without it blocked. */
	char *(*missing_pin)(const struct gp_profile *p, const cJSON *cfg);
	/* Optional: what an uninstall gives back besides the journal's
	 * records (a value the stage set on the running machine, outside any
	 * file), cfg the settings of the install being undone. undo_check is
	 * read-only: it appends its sentence to *say (NULL: nothing to say)
	 * and returns whether undo makes effects; undo makes them through the
	 * effect door, before the records are undone. 0, or -1 with c->err
	 * set. */
	bool (*undo_check)(struct gp_ctx *c, const cJSON *cfg, char **say);
	int (*undo)(struct gp_ctx *c, const cJSON *cfg);
	/* Optional: effects after the records are undone (a daemon restarted
	 * without the configuration that went); its sentence is undo_check's. */
	int (*undo_after)(struct gp_ctx *c, const cJSON *cfg);
};

/* gp_stages[0..gp_stage_count), in run order. A stage whose hooks
 * are NULL is not implemented yet. */
extern const struct gp_stage *const gp_stages[];
extern const size_t gp_stage_count;
const struct gp_stage *gp_stage_find(const char *name);
bool gp_stage_implemented(const struct gp_stage *s);
/* gp_undo_check and gp_undo_apply (undo.h) of stage s, with its undo_check
 * and undo hooks when it has them: what the engine's uninstall calls. */
enum gp_stage_state gp_stage_undo_check(struct gp_ctx *c, const struct gp_stage *s,
                                        char **reason);
int gp_stage_undo_apply(struct gp_ctx *c, const struct gp_stage *s);
/* The settings of stage other as the profile gives them (NULL when absent
 * or false), for stage self, which must list other in its .reads: reading
 * an undeclared stage is a programming error, reported as an internal
 * error before gpuprov aborts. */
const cJSON *gp_stage_settings(const struct gp_ctx *c, const struct gp_stage *self,
                               const char *other);

/* Keys one stage reads from another's settings: spelled once, here, and
 * used by the owner's key table and by the reader. */
#define GP_CUDA_KEY_VERSION "version"
#define GP_DRIVER_KEY_BRANCH "branch"
#define GP_DRIVER_KEY_HOLD "hold"
#define GP_CUDA_KEY_PATH "path"
#define GP_ENV_KEY_CUDA_HOME "cuda_home"
#define GP_ENV_KEY_PATH "path"
#define GP_PYTORCH_KEY_METHOD "method"
#define GP_PYTORCH_KEY_PREFIX "prefix"
/* Where the cuda stage's settings (stages.cuda, may be NULL) put the
 * toolkit: its path, else /usr/local/cuda-X.Y of its version; NULL when
 * neither is given. Free it. */
char *gp_cuda_toolkit_path(const cJSON *cfg);
/* The pytorch stage's environment directory for its settings: conda
 * <prefix>/envs/<env>, venv <prefix>. Free it. */
char *gp_pytorch_envdir(const cJSON *cfg);

extern const struct gp_stage gp_stage_nouveau;
extern const struct gp_stage gp_stage_driver;
extern const struct gp_stage gp_stage_env;
extern const struct gp_stage gp_stage_cudnn;
extern const struct gp_stage gp_stage_cuda;
extern const struct gp_stage gp_stage_pytorch;
extern const struct gp_stage gp_stage_container_toolkit;
extern const struct gp_stage gp_stage_gpu_settings;
extern const struct gp_stage gp_stage_fabric_manager;

/* The command a hint tells the operator to type, as it works when typed:
 * "gpuprov COMMAND --profile P --only STAGE [--root R] [--profile-dir D]"
 * with the profile, root and profile directory of this run (stage NULL: no
 * --only). gp_install_hint: "run 'gpuprov install ...'". Both allocated. */
char *gp_hint_command(const struct gp_ctx *c, const char *command, const char *stage);
char *gp_install_hint(const struct gp_ctx *c, const char *stage);

/* Whether path reads (gp_ctx_read: as planned so far) exactly as want. */
bool gp_stage_file_is(struct gp_ctx *c, const char *path, const char *want);

/* Marks in the journal that tie a follow-up command to the input it ran
 * for (the initramfs rebuilt for this blacklist, ldconfig run for this
 * ld.so.conf.d file), so an interrupted run redoes exactly what is missing. */
bool gp_stage_mark_is(struct gp_ctx *c, const char *stage, const char *key,
                      const char *value);
void gp_stage_mark_set(struct gp_ctx *c, const char *stage, const char *key,
                       const char *value);
/* Runs argv (gp_effect_run) unless the mark key says it already ran for
 * value (a digest of the input it acts on), and sets the mark when it
 * succeeds: update-initramfs for a blacklist, ldconfig for a file. 0 or -1. */
int gp_stage_run_once(struct gp_ctx *c, const char *stage, const char *key,
                      const char *value, char *const argv[]);
/* The rows of a profile's "stages" object, one per stage in run order, each
 * with the stage's key table: what main() hands the profile loader
 * (gp_profile_use_stage_keys). */
const struct gp_key *gp_stages_profile_keys(void);
