/* The journal <root>/var/lib/gpuprov/state.json: the profile and its
 * digest, each stage's state and time, every file gpuprov wrote with its
 * sha256, backups of replaced files, and a pending reboot. Plus the run
 * lock (flock) beside it. */
#pragma once

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "gpuprov/root.h"
#include "gpuprov/strmap.h"
#include "gpuprov/util.h"

#define GP_STATE_DIR "/var/lib/gpuprov"
#define GP_STATE_FILE GP_STATE_DIR "/state.json"
#define GP_LOCK_FILE GP_STATE_DIR "/lock"
#define GP_BACKUP_DIR GP_STATE_DIR "/backup"
#define GP_LOG_FILE "/var/log/gpuprov.log"

/* The format this gpuprov writes ("gpuprov_state"); it refuses newer ones. */
#define GP_STATE_FORMAT 1

struct gp_journal {
	cJSON *doc;
	/* Path -> its record in doc's "files": add, change and remove file
	 * records only through the functions below, which keep it current. */
	struct gp_strmap files;
	char *saved; /* the file's bytes as loaded or last saved; NULL: none */
	size_t saved_len;
};

/* Missing file = empty journal. One that is not what gpuprov writes (bad
 * JSON, a member of the wrong type or form, a newer format) is exit 65
 * naming the file and the place, and is never overwritten. */
int gp_journal_load(const struct gp_root *r, struct gp_journal *j, struct gp_err *err);
/* gp_journal_load's check of the bytes it read (len of them, NUL-terminated),
 * named host in errors: the same answers, from memory (the fuzzer's way in). */
int gp_journal_parse(struct gp_journal *j, const char *host, const char *text, size_t len,
                     struct gp_err *err);
/* Writes the journal unless the file already holds exactly this text. */
int gp_journal_save(const struct gp_root *r, struct gp_journal *j);
void gp_journal_free(struct gp_journal *j);
bool gp_journal_is_empty(const struct gp_journal *j);

void gp_journal_set_profile(struct gp_journal *j, const char *name, const char *path,
                            const char *digest);
/* The compatibility overrides in force for the recorded profile. */
void gp_journal_set_overrides(struct gp_journal *j, char *const *overrides);
const char *gp_journal_profile_name(const struct gp_journal *j);
const char *gp_journal_profile_path(const struct gp_journal *j);
/* Records a stage's state and its time, unless the stage is in that state
 * already (or done and now found satisfied): the time is when it got there. */
void gp_journal_set_stage(struct gp_journal *j, const char *stage, const char *state);
/* A stage's free-form record ("stages"."<name>"); created when missing. */
cJSON *gp_journal_stage(struct gp_journal *j, const char *stage);
/* The same record for reading: NULL when the stage has none. */
const cJSON *gp_journal_stage_get(const struct gp_journal *j, const char *stage);
void gp_journal_record_file(struct gp_journal *j, const char *path, const char *sha256,
                            const char *stage, const char *backup);
/* A symlink gpuprov made at path ("link": its target; NULL: gpuprov
 * removed it again), and the first link of someone else's it replaced
 * ("link_before": its target, NULL when there was none), which an
 * uninstall puts back (src/undo.c). */
void gp_journal_record_link(struct gp_journal *j, const char *path, const char *target,
                            const char *before, const char *stage);
/* A directory gpuprov created ("dir": true), with all below it that was
 * not there: an uninstall removes it once nothing of anyone else's is in
 * it (src/undo.c). */
void gp_journal_record_dir(struct gp_journal *j, const char *path, const char *stage);
/* The record of a file ("sha256", "stage", "backup", "stat", "link",
 * "link_before", "dir"), or NULL. */
cJSON *gp_journal_file(const struct gp_journal *j, const char *path);
/* The sha256 gpuprov recorded for a file it wrote, or NULL. */
const char *gp_journal_file_sha256(const struct gp_journal *j, const char *path);
void gp_journal_forget_file(struct gp_journal *j, const char *path);
/* Forgets every file recorded below dir. */
void gp_journal_forget_under(struct gp_journal *j, const char *dir);
/* A write about to start ("intents"."<path>": the sha256 it writes, the
 * stage, the backup it takes, or NULL): a run killed between the rename and
 * the journal's record leaves this, and the next run adopts the file when it
 * holds exactly that content (gp_ctx_recover). Cleared once recorded. */
void gp_journal_set_intent(struct gp_journal *j, const char *path, const char *sha256,
                           const char *stage, const char *backup);
void gp_journal_clear_intent(struct gp_journal *j, const char *path);
/* The same reason and boot id again keep the record (and its time). */
void gp_journal_set_reboot(struct gp_journal *j, const char *reason, const char *boot_id);
void gp_journal_clear_reboot(struct gp_journal *j);
/* The pending reboot's reason, or NULL. */
const char *gp_journal_reboot_reason(const struct gp_journal *j);
const char *gp_journal_reboot_boot_id(const struct gp_journal *j);

/* Reboots that resume themselves (--reboot=auto): "resume"."reboots"
 * counts the boots `gpuprov resume` continued an install after, "stopped"
 * says why gpuprov rebooted no more (the cap). Cleared by an install a
 * person started and by one that needs no reboot. */
#define GP_RESUME_REBOOTS_LIMIT 1000 /* what a journal may hold */
unsigned gp_journal_resume_reboots(const struct gp_journal *j);
const char *gp_journal_resume_stopped(const struct gp_journal *j);
void gp_journal_count_resume(struct gp_journal *j);
void gp_journal_stop_resume(struct gp_journal *j, const char *why);
void gp_journal_clear_resume(struct gp_journal *j);

/* Drift (src/stages/drift.c compares these with the root). The mode and
 * owner of a file just recorded ("mode": "0644", "owner": "0:0"). */
void gp_journal_record_file_stat(struct gp_journal *j, const char *path, unsigned mode,
                                 unsigned uid, unsigned gid);
/* A package an install left at this version ("packages"."<name>"), and
 * whether gpuprov holds it (recorded only for a recorded package). A
 * journal without "packages" (an older gpuprov) has nothing to compare. */
void gp_journal_record_package(struct gp_journal *j, const char *name,
                               const char *version, const char *stage);
void gp_journal_record_hold(struct gp_journal *j, const char *name, bool held);
void gp_journal_forget_package(struct gp_journal *j, const char *name);
const cJSON *gp_journal_packages(const struct gp_journal *j);
/* The sha256 of the stage's settings the last run found done or applied
 * ("settings_sha256"): a change since is intentional, not drift. */
void gp_journal_set_stage_settings(struct gp_journal *j, const char *stage,
                                   const char *sha256);

/* Uninstall (src/undo.c): what was there before gpuprov. A
 * recorded package that was installed before gpuprov's install
 * ("installed_before": that version; absent: gpuprov installed it), and one
 * whose hold gpuprov set ("hold_set": it was not held before). */
const cJSON *gp_journal_package(const struct gp_journal *j, const char *name);
void gp_journal_set_package_before(struct gp_journal *j, const char *name,
                                   const char *version);
void gp_journal_record_hold_set(struct gp_journal *j, const char *name);

/* History ("history": an array, oldest first, at most GP_HISTORY_MAX
 * entries): one entry per profile installed, with its resolved document
 * (so it can be applied again without the file), its sha256, when it
 * started and ended, how its last run ended ("result": completed,
 * reboot_pending, blocked, failed, interrupted by a signal), "running" from
 * the start of a run until it ends (left by a killed run), and, as the
 * journal had them when it ended, the packages with their versions (and
 * "installed_before"), the holds, the packages there before gpuprov
 * ("preexisting": name -> version), the files with their backups, each
 * stage's state, and "versions" (each stage's pinned version, the Python
 * environment's pins). "uninstalled": when gpuprov uninstall removed it;
 * "rollback_of": the id of the entry gpuprov rollback went back to. */
#define GP_HISTORY_MAX 16
const cJSON *gp_journal_history(const struct gp_journal *j);
/* The newest entry unless it was uninstalled, or NULL. */
const cJSON *gp_journal_history_current(const struct gp_journal *j);
/* An install starts: a new entry, or the newest goes on when it is of the
 * same profile digest and not uninstalled (a rerun after a reboot, a kill
 * or a failure). The oldest entries beyond GP_HISTORY_MAX go. */
void gp_journal_history_begin(struct gp_journal *j, const char *name, const char *digest,
                              const cJSON *doc, const cJSON *versions);
/* The install ended with result: the newest entry takes the journal's
 * packages, holds, files and stage states; "ended" changes only with them
 * or the result, so a rerun that changed nothing leaves the journal as it
 * was. */
void gp_journal_history_end(struct gp_journal *j, const char *result);
void gp_journal_history_uninstalled(struct gp_journal *j);
/* The newest entry is a rollback to entry id ("rollback_of"). */
void gp_journal_history_rollback_of(struct gp_journal *j, long id);
/* Drops a stage's record (state, time, marks, settings): uninstalled. */
void gp_journal_forget_stage(struct gp_journal *j, const char *stage);

/* Takes the run lock; exit 6 with the holder's pid when another run has it. */
int gp_lock_acquire(const struct gp_root *r, int *fd, struct gp_err *err);
void gp_lock_release(int fd);
/* Does a run hold the lock right now? Read-only; false when there is none. */
bool gp_lock_held(const struct gp_root *r);
