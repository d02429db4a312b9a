/* The run context shared by the engine and the stages, and the effect door:
 * the only functions that change the target. In dry-run they record plan
 * entries and touch nothing; for real they back up, write atomically,
 * journal and log. Stages never look at the dry-run flag. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "gpuprov/fetch.h"
#include "gpuprov/journal.h"
#include "gpuprov/output.h"
#include "gpuprov/plan.h"
#include "gpuprov/profile.h"
#include "gpuprov/root.h"

struct gp_ctx {
	struct gp_root root;
	struct gp_out *out;
	bool dry_run;
	const struct gp_profile *profile;
	struct gp_journal journal;
	struct gp_plan *plan;
	struct gp_stage_plan *stage; /* the stage whose effects are being made */
	int log_fd; /* run log, -1 when none (dry-run) */
	int cmd_timeout_ms;
	bool reboot_requested; /* by a stage in this run */
	struct gp_err *err; /* where effects report failures */
	/* Download settings (--cache-dir, --ca-file, --mirror, --offline); the
	 * fetcher is made from them on the first download or cache lookup and
	 * freed by gp_ctx_close_fetcher. allow_http comes from the profile. */
	struct gp_fetch_opts fetch_opts;
	struct gp_fetcher *fetcher;
	/* Announced downloads (gp_prefetch_add) and, once started, the thread
	 * fetching them (prefetch.h); freed by gp_ctx_close_fetcher. */
	struct gp_prefetch *prefetch;
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
};

/* Reads a file as the target will look once the effects planned so far in
 * this run are made (identical to the root outside dry-run). */
int gp_ctx_read(struct gp_ctx *c, const char *path, char **data, size_t *len);
bool gp_ctx_exists(struct gp_ctx *c, const char *path);
/* Stops the prefetch thread (what it has not finished stays as .part files)
 * and frees the context's fetcher (see fetch_opts); idempotent. */
void gp_ctx_close_fetcher(struct gp_ctx *c);
/* Starts downloading the announced artifacts in the background (the engine
 * calls it after the stages' prefetch hooks, never in dry-run or offline).
 * Returns the number of artifacts it fetches; a failure to start is logged
 * and not an error (each download then happens when its stage needs it). */
size_t gp_ctx_prefetch_start(struct gp_ctx *c);

/* Is the file at path still the one gpuprov recorded (journal sha256)? For
 * files gp_effect_extract installed the journal also keeps the device,
 * inode, size, mtime and ctime they had: while those are unchanged the file
 * is trusted without reading it; otherwise, or with deep (verify), it is
 * hashed. *hashed says which. */
bool gp_ctx_recorded_file_intact(struct gp_ctx *c, const char *path, bool deep,
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

/* --- the effect door ---------------------------------------------------- */
/* Each returns 0, or -1 with c->err set (exit code 1). A write whose
 * content is already there is not an effect. */
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
/* Makes an artifact available in the download cache (fetching it, or
 * finding it there) and sets *cache_path (free it) to its in-root path. In
 * dry-run it records the URL, size, sha256 and whether the cache has it
 * already (never the network); *cache_path is where it would be. */
int gp_effect_download(struct gp_ctx *c, const struct gp_fetch_artifact *a,
                       char **cache_path);
/* Extracts the tarball at archive_path (in the root) into dest (a directory
 * in the root, replaced as a whole when it exists) after the archive's
 * sha256 matched; flags are GP_ARCHIVE_* (archive.h). Every regular file
 * installed is journaled with its sha256 for the current stage. In dry-run
 * it records the destination and the files under it that would be replaced. */
int gp_effect_extract(struct gp_ctx *c, const char *archive_path, const char *sha256,
                      const char *dest, unsigned flags);
/* gp_effect_download and gp_effect_extract in one (the same two plan
 * entries), streaming when the artifact is not cached yet: the archive is
 * extracted while it downloads (download -> sha256 -> decompress ->
 * staging in one pass, memory bounded whatever its size), the staging
 * directory is renamed into place only after the archive's sha256 matched,
 * and the verified download still ends up in the cache. If the stream
 * breaks (the download starts over, or the extraction fails), the complete
 * verified download is extracted instead. A download already done or
 * cached is extracted from the cache file. */
int gp_effect_download_extract(struct gp_ctx *c, const struct gp_fetch_artifact *a,
                               const char *dest, unsigned flags);
/* Removes the directory path (in the root; never "/", no "..") and all
 * under it, following no symlink (path itself must be a directory, not a
 * link to one), and forgets its journal records. Only a tree gpuprov made:
 * every regular file in it must be one the journal records as written by
 * gpuprov, else it is refused naming the first other file. An absent path
 * is not an effect. In dry-run it records the directory and every entry
 * that would go. */
int gp_effect_remove_tree(struct gp_ctx *c, const char *path);
/* url after --mirror rewriting (*out, free it), for URLs that a tool in the
 * root fetches from itself (pip's index, conda's channel alias). Touches
 * nothing. 0, or -1 with c->err set (a bad --ca-file). */
int gp_ctx_rewrite_url(struct gp_ctx *c, const char *url, char **out);
/* Announces a download a later step of this run will make (stage prefetch
 * hooks); the artifact is copied. Not an effect: gp_effect_download still
 * makes the artifact available, sooner when it was announced: it waits for
 * the background download of the artifact with the same sha256 and reports
 * its failure, if any, as its own. Ignored once the downloads started. */
void gp_prefetch_add(struct gp_ctx *c, const struct gp_fetch_artifact *a);
/* Runs a command that changes the target, chrooted when the root is not /. */
int gp_effect_run(struct gp_ctx *c, char *const argv[]);
struct gp_run_result;
/* gp_effect_run, and a command that ran and failed leaves its result in
 * *failed (free it with gp_run_result_free; zeroed otherwise), for a stage
 * that explains the failure from the command's own words. */
int gp_effect_run_result(struct gp_ctx *c, char *const argv[],
                         struct gp_run_result *failed);
/* Shows a real run's stage starting (done false) or ending (see
 * progress.h); nothing in dry-run. */
void gp_ctx_announce_stage(struct gp_ctx *c, const struct gp_stage_plan *sp, bool done);
/* Records that a reboot is needed for the stage's changes to take effect
 * (for real: in the journal at once). */
void gp_effect_reboot(struct gp_ctx *c, const char *reason);
/* Before the real pass, under the lock: settles what a killed run left
 * (writes it announced but did not record, its temp files) in the
 * directories c->journal and c->plan name. 0, or -1 with c->err set. */
int gp_ctx_recover(struct gp_ctx *c);

/* Read-only command (a probe, verify): runs in dry-run too. Returns what gp_run returns. */
struct gp_run_result;
int gp_ctx_run_readonly(struct gp_ctx *c, char *const argv[], struct gp_run_result *res);
