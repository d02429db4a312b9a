/* The run context shared by the engine and the stages, and the effect door:
 * the only functions that change the target. In plan mode they record plan
 * entries and touch nothing; in apply mode they back up, write atomically,
 * journal and log; in verify mode they refuse (an internal error). Stages
 * never look at the mode. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "gpuprov/event.h"
#include "gpuprov/fetch.h"
#include "gpuprov/journal.h"
#include "gpuprov/output.h"
#include "gpuprov/plan.h"
#include "gpuprov/profile.h"
#include "gpuprov/root.h"

/* What the engine is doing with the stages; only the effect door, the
 * package layer and the engine look at it. */
enum gp_mode {
	GP_MODE_PLAN, /* effects are recorded in the plan, nothing is changed */
	GP_MODE_APPLY, /* effects are recorded and made */
	GP_MODE_VERIFY, /* read-only: every effect is refused, nothing is recorded */
};

struct gp_ctx {
	struct gp_root root;
	struct gp_out *out;
	enum gp_mode mode;
	const struct gp_profile *profile;
	struct gp_journal journal;
	struct gp_plan *plan;
	struct gp_stage_plan *stage; /* the stage whose effects are being made */
	int log_fd; /* run log, -1 when none (plan, verify) */
	int cmd_timeout_ms;
	bool reboot_requested; /* by a stage in this run */
	/* The read-only mount namespace could not be made (gp_ctx_run_readonly
	 * warned once): read-only commands run without it. */
	bool read_only_refused;
	struct gp_err *err; /* where effects report failures */
	/* Where a real run's lifecycle events go (event.h), installed by the
	 * engine; the stage whose start was sent, and how many of its effects
	 * were sent. */
	struct gp_events events;
	const struct gp_stage_plan *announced;
	size_t effects_sent;
	/* Download settings (--cache-dir, --ca-file, --mirror, --offline); the
	 * fetcher is made from them on the first download or cache lookup and
	 * freed by gp_ctx_close_fetcher. allow_http comes from the profile. */
	struct gp_fetch_opts fetch_opts;
	struct gp_fetcher *fetcher;
	/* Announced downloads (gp_prefetch_add) and, once started, the thread
	 * fetching them (prefetch.h); freed by gp_ctx_close_fetcher. */
	struct gp_prefetch *prefetch;
	/* The downloads (sha256) this run's first plan of them found absent from
	 * the cache: a later pass still reports them so (download.c), though a
	 * background download may have put them there since. */
	char **uncached;
	/* The package layer's state for this run (pkg.c): planned installs and
	 * holds, whether metadata was refreshed; freed by gp_pkg_state_free. */
	struct gp_pkg_state *pkg;
	/* The --profile argument and --profile-dir of this run, for the
	 * commands hints print (gp_hint_command); NULL: the profile's path. */
	const char *profile_arg;
	const char *profile_dir;
	/* While a rule is open (gp_effect_rule_begin): how many effects the
	 * stage had with the rule's; 0 when none is. */
	size_t rule_from;
	/* Effects added in this run (plan and apply alike), and the linker
	 * cache's "NAME\tPATH" pairs with the count they were read at: any
	 * effect since may have changed the cache (gp_ctx_linker_cache). */
	unsigned long effects_added;
	char **ld_cache;
	unsigned long ld_cache_at;
};

/* Reads a file as the target will look once the effects planned so far in
 * this run are made (identical to the root outside dry-run). */
int gp_ctx_read(struct gp_ctx *c, const char *path, char **data, size_t *len);
bool gp_ctx_exists(struct gp_ctx *c, const char *path);

/* Is the file at path still the one gpuprov recorded (journal sha256)? For
 * files an extraction installed the journal also keeps the device,
 * inode, size, mtime and ctime they had: while those are unchanged the file
 * is trusted without reading it; otherwise, or with deep (verify), it is
 * hashed. *hashed says which. */
bool gp_ctx_recorded_file_intact(struct gp_ctx *c, const char *path, bool deep,
                                 bool *hashed);
/* The same for a file the caller has looked at already (st: its lstat),
 * with gp_root_lstat_in's d when it has one (NULL: none), which hashing
 * then opens the file in. */
bool gp_ctx_recorded_stat_intact(struct gp_ctx *c, struct gp_root_dir *d,
                                 const char *path, const struct stat *st, bool deep,
                                 bool *hashed);

/* A rule effect (GP_EFFECT_RULE): the effects made until gp_effect_rule_end
 * are recorded as this one entry, in a dry run and a real run alike, so a
 * plan made before the run can know their operands lists what the run
 * records. makes is the kind of effect ("symlink", "run"), the rule says
 * which ones in terms known before the run. Each is still made, logged and
 * journaled as usual. Rules do not nest. */
void gp_effect_rule_begin(struct gp_ctx *c, const char *makes, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void gp_effect_rule_end(struct gp_ctx *c);
/* A directory the open rule's effects write in: a rerun after a kill looks
 * there for gpuprov's stale temp files (not shown in the plan). */
void gp_effect_rule_dir(struct gp_ctx *c, const char *dir);

/* -1 with c->err set (exit 65) once a lookup in the root could not be made
 * (gp_root_fault: EAGAIN after every retry), which its caller took for
 * "absent"; else 0. Every effect checks it first; the engine after each
 * stage hook. */
int gp_ctx_root_fault(struct gp_ctx *c);

/* Appends a timestamped line to the run log (when there is one) and shows
 * it on stderr with -v. */
void gp_log(struct gp_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The door's own helpers, shared by its files (context.c, download.c); not
 * for stages. */
const char *gp_ctx_stage_name(const struct gp_ctx *c); /* "gpuprov" outside one */
/* Saves the journal: 0, or -1 with c->err set. */
int gp_ctx_save_journal(struct gp_ctx *c);
/* Creates the directory path is in (in the root): 0, or -1 with c->err set. */
int gp_ctx_make_parent(struct gp_ctx *c, const char *path);
/* The highest of path and its parents that does not exist yet (free it), or
 * NULL: the directory a mkdir -p of path makes first. */
char *gp_ctx_missing_dir(struct gp_ctx *c, const char *path);
/* Journals dir (gp_ctx_missing_dir's; NULL: none) as one the stage
 * creates, for an uninstall (src/undo.c), and saves the journal: before the
 * mkdir, so a run killed after it leaves the record (an absent directory's
 * record is dropped by the uninstall). Not gpuprov's own state directory,
 * nor one under /run. 0, or -1 with c->err set. */
int gp_ctx_record_dir(struct gp_ctx *c, const char *dir);
/* Adds the file's fingerprint (device, inode, size, times), mode and owner
 * to its journal record, just written (see gp_ctx_recorded_file_intact). */
void gp_ctx_record_fingerprint(struct gp_ctx *c, const char *path);
/* Calls fn for every non-directory entry under dir (in-root path), sorted,
 * depth first; gp_ctx_collect_path pushes each path onto the string vector
 * data points to. */
void gp_ctx_walk(struct gp_ctx *c, const char *dir,
                 void (*fn)(struct gp_ctx *c, const char *path, const struct stat *st,
                            void *data),
                 void *data);
void gp_ctx_collect_path(struct gp_ctx *c, const char *path, const struct stat *st,
                         void *data);

/* --- the effect door ---------------------------------------------------- */
/* Each returns 0, or -1 with c->err set (exit code 1). A write whose
 * content is already there is not an effect. Each first asks
 * gp_ctx_door_open, so in verify mode it refuses before looking at
 * anything. */
/* 0 when an effect may be planned (plan mode) or made (apply mode) now;
 * -1 with c->err set when not: in verify mode or outside a stage (internal
 * errors: a bug in gpuprov, reported as such), or once a stop signal arrived
 * (apply mode). effect names the caller ("gp_effect_write") for the
 * message. Also the first step of the package layer's effects. */
int gp_ctx_door_open(struct gp_ctx *c, const char *effect);
int gp_effect_write(struct gp_ctx *c, const char *path, const void *data, size_t len,
                    mode_t mode);
/* gp_effect_write of a file that a command of this run (maker: "the
 * Miniforge installer") may have just made, which a plan cannot know: the
 * plan and the run both record the write as over what maker leaves (no
 * exists, no old sha256; the diff is against nothing). */
int gp_effect_write_over(struct gp_ctx *c, const char *path, const void *data, size_t len,
                         mode_t mode, const char *maker);
int gp_effect_remove(struct gp_ctx *c, const char *path);
/* gp_effect_write of bytes that come from a verified download, planned by
 * their source (a text naming it, e.g. the URL) and their sha256 when known
 * before the download (a pinned one), not by the bytes: a plan made before
 * the download (data NULL, dry-run only) lists the same effect as the run.
 * Without data an existing file whose sha256 is sha256 (and mode) is not an
 * effect, as gp_effect_write decides with the bytes. */
int gp_effect_write_download(struct gp_ctx *c, const char *path, const void *data,
                             size_t len, mode_t mode, const char *source,
                             const char *sha256);
int gp_effect_symlink(struct gp_ctx *c, const char *target, const char *path);
int gp_effect_mkdir(struct gp_ctx *c, const char *path, mode_t mode);
/* Removes the directory path (in the root; never "/", no "..") and all
 * under it, following no symlink (path itself must be a directory, not a
 * link to one), and forgets its journal records. Only a tree gpuprov made:
 * every regular file in it must be one the journal records as written by
 * gpuprov, else it is refused naming the first other file. An absent path
 * is not an effect. In dry-run it records the directory and every entry
 * that would go. */
int gp_effect_remove_tree(struct gp_ctx *c, const char *path);
/* Removes a directory the journal records as made by gpuprov
 * (gp_ctx_record_dir) and forgets its records; the caller (src/undo.c) has
 * made sure nothing but directories is left in it as this run sees it. An
 * absent one is not an effect (its record is dropped). */
int gp_effect_remove_made_dir(struct gp_ctx *c, const char *path);
/* Runs a command that changes the target, chrooted when the root is not /. */
int gp_effect_run(struct gp_ctx *c, char *const argv[]);
struct gp_run_result;
/* gp_effect_run of a command that creates the directory dir and fills it
 * (an installer's prefix): when dir does not exist yet, it is journaled
 * before the command runs as one gpuprov made whole
 * (gp_journal_record_whole_dir; its missing parents as gp_ctx_record_dir
 * does), so an uninstall removes it with all in it; an existing dir is
 * never journaled, so never removed, nor is one inside a directory so
 * journaled (that one goes whole). */
int gp_effect_run_creating(struct gp_ctx *c, char *const argv[], const char *dir);
/* gp_effect_run, and a command that ran and failed leaves its result in
 * *failed (free it with gp_run_result_free; zeroed otherwise), for a stage
 * that explains the failure from the command's own words. */
int gp_effect_run_result(struct gp_ctx *c, char *const argv[],
                         struct gp_run_result *failed);
/* Appends an effect of kind k to the current stage's plan entry, after
 * sending the EFFECT events of the ones made before it (event.h): how every
 * effect of the door, downloads and extractions included, is recorded. */
struct gp_effect *gp_ctx_add_effect(struct gp_ctx *c, enum gp_effect_kind k);
/* Sends a real run's STAGE_START (done false) or, for the stage started,
 * its last EFFECT events and STAGE_DONE (event.h); nothing in dry-run. */
void gp_ctx_announce_stage(struct gp_ctx *c, const struct gp_stage_plan *sp, bool done);
/* Records that a reboot is needed for the stage's changes to take effect
 * (for real: in the journal at once) and says so where other tools look
 * (Debian's convention, which update-notifier and unattended-upgrades
 * follow): writes GP_REBOOT_REQUIRED and adds the packages that need the
 * reboot to GP_REBOOT_REQUIRED_PKGS, one name a line, each once; NULL pkgs:
 * "gpuprov" (a change of gpuprov's own, no package's). 0, or -1 with c->err
 * set when the door is closed (gp_ctx_door_open) or a write failed. */
#define GP_REBOOT_REQUIRED "/var/run/reboot-required"
#define GP_REBOOT_REQUIRED_PKGS "/var/run/reboot-required.pkgs"
int gp_effect_reboot(struct gp_ctx *c, const char *reason);
int gp_effect_reboot_for(struct gp_ctx *c, const char *reason, const char *const *pkgs);
/* Reboots the machine now (--reboot=auto, after the engine armed
 * gpuprov-resume.service): `systemctl --no-block reboot`, or the program stub (an
 * in-root path, GPUPROV_REBOOT_STUB: tests) instead. Refused, as an
 * internal error, when the root is not / and there is no stub: a chrooted
 * systemctl may reach the host's systemd. In plan mode only recorded. */
int gp_effect_reboot_now(struct gp_ctx *c, const char *reason, const char *stub);
/* Only the two files, for a stage whose check says it still waits for its
 * reboot: a run killed between its effects leaves them written the next
 * time (nothing, when they are there; a list that names anything is kept
 * as it is). */
int gp_effect_reboot_required(struct gp_ctx *c, const char *const *pkgs);
/* Before the real pass, under the lock: settles what a killed run left
 * (writes it announced but did not record, its temp files) in the
 * directories c->journal and c->plan name. 1 when that changed the
 * journal (saved), 0 when there was nothing to settle, -1 with c->err set. */
int gp_ctx_recover(struct gp_ctx *c);

/* Read-only command (a probe, verify): runs in every mode, in a private
 * mount namespace where the root is mounted read-only (gp_run_opts's
 * read_only), so a command that tries to write fails with EROFS. When the
 * namespace cannot be made it warns once and runs the command without it.
 * Returns what gp_run returns. */
struct gp_run_result;
int gp_ctx_run_readonly(struct gp_ctx *c, char *const argv[], struct gp_run_result *res);
/* gp_ctx_run_readonly for a query whose program must write to run at all
 * (dnf's lock in its cache, its logs): a private tmpfs on the root's /tmp
 * and scratch_dir seen writable through an overlay on it, every write
 * thrown away (gp_run_opts.scratch_overlay). */
int gp_ctx_run_query(struct gp_ctx *c, char *const argv[], const char *scratch_dir,
                     struct gp_run_result *res);
/* The root's linker cache as "NAME\tPATH" pairs (ldcache.h), read once per
 * run and again only after an effect: from /etc/ld.so.cache, or, where
 * that cannot be read or is in a form the parser does not read (the
 * reason goes to the log), from `ldconfig -p` run in the root
 * (read-only). Borrowed from c, valid until the next effect; 0, or -1
 * with *error when `ldconfig -p` failed too. */
int gp_ctx_linker_cache(struct gp_ctx *c, char *const **pairs, char **error);
/* The NVML and libcuda probe (gp_nvprobe_run) the same way: its child sees
 * the root read-only, or, where the namespace cannot be made, the same one
 * warning and a writable root. Returns what gp_nvprobe_run returns. */
struct gp_nvprobe;
int gp_ctx_nvprobe(struct gp_ctx *c, int timeout_ms, struct gp_nvprobe *p);
/* The fabric state probe (gp_nvfabric_run, nvfabric.h) the same way. */
struct gp_nvfabric;
int gp_ctx_nvfabric(struct gp_ctx *c, int timeout_ms, struct gp_nvfabric *f);

#include "gpuprov/download.h"
