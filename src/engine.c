/* The engine: profile -> ordered stages -> check, plan, apply, verify.
 * It owns the journal, the lock, the run log and the reboot protocol:
 * a stage that needs a reboot records it, later stages that do not need
 * the new kernel state still run, and the run ends with exit 5. The next
 * install (after the reboot) finds the finished stages satisfied and goes
 * on; with --reboot=auto the engine reboots itself and gpuprov-resume.service
 * runs that install (gpuprov resume). Returns exit codes; prints through the
 * output object only. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuprov/compat.h"
#include "gpuprov/drift.h"
#include "gpuprov/deep.h"
#include "gpuprov/deeptable.h"
#include "gpuprov/engine.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/history.h"
#include "gpuprov/kernelinfo.h"
#include "gpuprov/match.h"
#include "gpuprov/osrelease.h"
#include "gpuprov/rebootsig.h"
#include "gpuprov/resumemark.h"
#include "gpuprov/pci.h"
#include "gpuprov/journal.h"
#include "gpuprov/pkg.h"
#include "gpuprov/prometheus.h"
#include "gpuprov/rollback.h"
#include "gpuprov/run.h"
#include "gpuprov/json.h"
#include "gpuprov/stages.h"
#include "gpuprov/status.h"
#include "gpuprov/textfile.h"
#include "gpuprov/undo.h"

#define DEFAULT_CMD_TIMEOUT_MS (30 * 60 * 1000)

/* Everything one command run holds; released by session_close. */
struct session {
	struct gp_ctx c;
	struct gp_err err;
	struct gp_profile *profile;
	char **search;
	int lock_fd;
	bool reboot_ineffective; /* a stage still waits for a reboot that happened */
	const char *forced_mismatch; /* shown at the top of plans */
	char **overrides; /* compatibility rules the profile overrides */
	char *profile_arg; /* --profile as given, else the journal's: for hints */
	const char *command; /* "install", "rollback": for messages */
	cJSON *rollback; /* rollback: a copy of the history entry it goes to */
	/* install: the preflight plan found nothing to change (plan_settled):
	 * the real pass keeps that plan as settled and takes each stage's
	 * result from it instead of checking the same machine again. */
	bool preflight_settled;
	struct gp_plan *settled;
};

static void session_close(struct session *s)
{
	gp_ctx_close_fetcher(&s->c);
	gp_pkg_state_free(&s->c);
	gp_strv_free(s->c.ld_cache);
	gp_lock_release(s->lock_fd);
	if (s->c.log_fd >= 0)
		close(s->c.log_fd);
	gp_plan_free(s->c.plan);
	gp_plan_free(s->settled);
	gp_journal_free(&s->c.journal);
	gp_root_close(&s->c.root);
	gp_profile_free(s->profile);
	gp_strv_free(s->search);
	gp_strv_free(s->overrides);
	free(s->profile_arg);
	cJSON_Delete(s->rollback);
}

static int report_err(struct session *s)
{
	gp_error(s->c.out, "%s", s->err.msg);
	return gp_exit_code(&s->err);
}

/* Opens the root and the journal. Exit code, 0 on success. */
static int session_open(struct session *s, const struct gp_options *o, struct gp_out *out)
{
	*s = (struct session){ .lock_fd = -1, .command = "install" };
	s->c.out = out;
	s->c.err = &s->err;
	s->c.log_fd = -1;
	s->c.root.fd = -1;
	s->c.mode = o->dry_run ? GP_MODE_PLAN : GP_MODE_APPLY;
	s->c.cmd_timeout_ms = o->cmd_timeout_ms > 0 ? o->cmd_timeout_ms
	                                            : DEFAULT_CMD_TIMEOUT_MS;
	s->c.fetch_opts = (struct gp_fetch_opts){
		.cache_dir = o->cache_dir,
		.ca_file = o->ca_file,
		.mirrors = o->mirrors,
		.n_mirrors = o->n_mirrors,
		.offline = o->offline,
	};
	/* The one callback for the run's events, downloads' included. */
	s->c.events = o->events;
	if (o->events.fn) {
		s->c.fetch_opts.progress = gp_event_fetch_progress;
		s->c.fetch_opts.progress_data = &s->c.events;
	}
	s->search = gp_profile_search_path(o->profile_dir);
	const char *root = o->root ? o->root : "/";
	int rc = gp_root_open(&s->c.root, root);
	if (rc < 0) {
		gp_error(out, "--root %s: %s; give an existing directory", root,
		         strerror(-rc));
		return GP_EXIT_USAGE;
	}
	if (gp_journal_load(&s->c.root, &s->c.journal, &s->err) < 0)
		return report_err(s);
	/* Absent is a fact the stages handle; unreadable (a FIFO, EAGAIN
	 * after every retry) must not pass for absent, or the driver stage
	 * picks another distribution's packages. */
	struct gp_os_release osr;
	rc = gp_os_release_read(&s->c.root, &osr);
	if (rc < 0 && rc != -ENOENT && rc != -EINVAL) {
		_cleanup_free_ char *why = gp_os_release_error(&s->c.root, &osr, rc);
		gp_error(out, "%s", why);
		return GP_EXIT_INVALID_INPUT;
	}
	gp_os_release_free(&osr);
	/* The stages leave such a device out; say so once per run. */
	struct gp_pci_list pci;
	if (gp_pci_scan(&s->c.root, &pci) == 0)
		for (size_t i = 0; pci.skipped[i]; i++)
			gp_warn(out, "left out a PCI device: %s", pci.skipped[i]);
	gp_pci_list_free(&pci);
	return 0;
}

/* The profile a history entry keeps a copy of (the file may be gone or
 * changed since): 0, or an exit code when the entry has none. */
static int entry_profile(struct session *s, const cJSON *e)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "profile");
	const cJSON *doc = cJSON_GetObjectItemCaseSensitive(p, "doc");
	if (!cJSON_IsObject(doc)) {
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
		gp_error(s->c.out,
		         "history entry %d in %s keeps no copy of its profile; use "
		         "--profile NAME",
		         cJSON_IsNumber(id) ? (int)id->valuedouble : 0, GP_STATE_FILE);
		return GP_EXIT_BLOCKED;
	}
	s->profile = gp_xcalloc(1, sizeof *s->profile);
	s->profile->name = gp_xstrdup(gp_json_string(p, "name", "?"));
	s->profile->path = gp_xstrdup(gp_journal_profile_path(&s->c.journal)
	                                  ? gp_journal_profile_path(&s->c.journal)
	                                  : "");
	s->profile->doc = cJSON_Duplicate(doc, true);
	snprintf(s->profile->digest, sizeof s->profile->digest, "%s",
	         gp_json_string(p, "sha256", ""));
	s->c.profile = s->profile;
	return 0;
}

/* The profile from --profile, else the one the last install recorded. */
static int session_profile(struct session *s, const struct gp_options *o,
                           const char *command)
{
	const char *want = o->profile;
	const char *path = gp_journal_profile_path(&s->c.journal);
	/* After a rollback the journal names no file: its entry's copy is
	 * what is installed. */
	if (!want && path && !*path && gp_journal_history_current(&s->c.journal))
		return entry_profile(s, gp_journal_history_current(&s->c.journal));
	/* Else install and plan apply only the profile the operator names. */
	if (!want && (gp_streq(command, "install") || gp_streq(command, "plan"))) {
		gp_error(s->c.out,
		         "%s needs --profile NAME|PATH (only after a rollback does it "
		         "go on without one, with the rollback's history entry)",
		         o->dry_run ? "plan" : "install");
		return GP_EXIT_USAGE;
	}
	if (!want) {
		want = path && access(path, R_OK) == 0
		           ? path
		           : gp_journal_profile_name(&s->c.journal);
	}
	if (!want) {
		gp_error(s->c.out,
		         "%s: no profile given and no install recorded in %s%s; use "
		         "--profile NAME",
		         command, gp_root_is_host(&s->c.root) ? "" : s->c.root.dir,
		         GP_STATE_FILE);
		return GP_EXIT_USAGE;
	}
	if (gp_profile_load(want, s->search, &s->profile, &s->err) < 0)
		return report_err(s);
	s->c.profile = s->profile;
	s->profile_arg = gp_xstrdup(want);
	s->c.profile_arg = s->profile_arg;
	s->c.profile_dir = o->profile_dir;
	return 0;
}

/* Checks --only/--skip names; exit 2 naming the stages that exist. */
static int check_stage_names(const struct gp_options *o, const struct gp_out *out)
{
	char **lists[] = { o->only, o->skip };
	for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
		for (size_t i = 0; lists[l] && lists[l][i]; i++) {
			if (gp_stage_find(lists[l][i]))
				continue;
			struct gp_buf names = { 0 };
			for (size_t j = 0; j < gp_stage_count; j++)
				gp_buf_printf(&names, "%s%s", j ? ", " : "",
				              gp_stages[j]->name);
			gp_error(out, "%s: unknown stage '%s'; stages are: %s",
			         l ? "--skip" : "--only", lists[l][i], names.data);
			gp_buf_free(&names);
			return GP_EXIT_USAGE;
		}
	}
	return 0;
}

static bool stage_selected(const struct gp_options *o, const struct gp_stage *st)
{
	if (o->only && !gp_strv_contains(o->only, st->name))
		return false;
	return !(o->skip && gp_strv_contains(o->skip, st->name));
}

/* What the engine will do with a stage before looking at the target. */
static enum gp_stage_state stage_disposition(const struct gp_options *o,
                                             const struct gp_profile *p,
                                             const struct gp_stage *st,
                                             const char **reason)
{
	if (!stage_selected(o, st)) {
		*reason = "excluded by --only/--skip";
		return GP_STATE_SKIPPED;
	}
	const cJSON *stages = cJSON_GetObjectItemCaseSensitive(p->doc, "stages");
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(stages, st->name);
	if (!cJSON_IsObject(cfg)) {
		*reason = cfg ? "disabled in the profile" : "not in the profile";
		return GP_STATE_DISABLED;
	}
	if (!gp_stage_implemented(st)) {
		*reason =
		    "not implemented in this version of gpuprov; exclude it with --skip";
		return GP_STATE_NOT_IMPLEMENTED;
	}
	*reason = NULL;
	return GP_STATE_NEEDED;
}

static char *unimplemented_selected(const struct gp_options *o,
                                    const struct gp_profile *p)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; i < gp_stage_count; i++) {
		const char *reason;
		if (stage_disposition(o, p, gp_stages[i], &reason) ==
		    GP_STATE_NOT_IMPLEMENTED)
			gp_buf_printf(&b, "%s%s", b.len ? "," : "", gp_stages[i]->name);
	}
	return b.len ? gp_buf_steal(&b) : NULL;
}

static int open_run_log(struct session *s)
{
	int rc = gp_root_mkdir_p(&s->c.root, "/var/log", 0755);
	int fd = rc < 0
	             ? rc
	             : gp_root_openat(&s->c.root, GP_LOG_FILE,
	                              O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0640);
	if (fd < 0)
		return gp_fail(&s->err, GP_EFAILED, "cannot open the run log %s: %s",
		               GP_LOG_FILE, strerror(-fd));
	s->c.log_fd = fd;
	return 0;
}

/* A stage that still waits for its reboot although the machine rebooted
 * since gpuprov asked for it: the change did not take effect. */
static bool reboot_did_not_help(struct session *s)
{
	const char *asked_in = gp_journal_reboot_boot_id(&s->c.journal);
	_cleanup_free_ char *now = gp_boot_id(&s->c.root);
	return asked_in && now && strcmp(asked_in, now) != 0;
}

/* A stage that needs the kernel state after the pending reboot waits for
 * it, unless its preflight finds it blocked already: then the install stops
 * before any stage changes the machine. Returns 0 or an exit code. */
static int wait_for_reboot(struct session *s, const struct gp_stage *st, const cJSON *cfg,
                           struct gp_stage_plan *sp)
{
	struct gp_check ck = { .state = GP_STATE_WAITING_REBOOT };
	if (st->preflight && st->preflight(&s->c, cfg, &ck) < 0) {
		free(ck.reason);
		gp_stage_plan_set(sp, GP_STATE_FAILED, "check failed");
		return report_err(s);
	}
	if (ck.state == GP_STATE_BLOCKED)
		gp_stage_plan_set(sp, GP_STATE_BLOCKED, "%s", ck.reason);
	else
		gp_stage_plan_set(
		    sp, GP_STATE_WAITING_REBOOT,
		    "runs after the pending reboot (needs the new kernel state)");
	free(ck.reason);
	return 0;
}

/* A file the stage wrote that drifted makes it needed, even where its check
 * looks only at what the file means: apply writes it again (backing the
 * edited copy up), so install repairs what verify reports. */
static void repair_drift(struct gp_ctx *c, const char *stage, struct gp_check *ck)
{
	if (ck->state != GP_STATE_SATISFIED && ck->state != GP_STATE_NEEDED)
		return;
	_cleanup_free_ char *drift = gp_drift_files_summary(c, stage);
	if (drift && ck->state == GP_STATE_SATISFIED)
		gp_check_set(ck, GP_STATE_NEEDED, "drift: %s", drift);
	else if (drift)
		gp_check_set(ck, GP_STATE_NEEDED, "%s; drift: %s", ck->reason, drift);
}

/* The stage's check with the engine's own findings: drift of its files,
 * a reboot that did not help. 0 or -1 (s->err). */
static int stage_check(struct session *s, const struct gp_stage *st, const cJSON *cfg,
                       struct gp_check *ck)
{
	struct gp_ctx *c = &s->c;
	int rc = st->check(c, cfg, ck);
	if (rc == 0)
		rc = gp_ctx_root_fault(c);
	if (rc < 0)
		return -1;
	repair_drift(c, st->name, ck);
	if (ck->state == GP_STATE_REBOOT_PENDING && reboot_did_not_help(s)) {
		s->reboot_ineffective = true;
		_cleanup_free_ char *verify = gp_hint_command(c, "verify", st->name);
		gp_check_set(
		    ck, GP_STATE_BLOCKED,
		    "%s - but the machine has rebooted since gpuprov asked for it, so "
		    "the change did not take effect; '%s' has hints",
		    ck->reason, verify);
	}
	return 0;
}

/* The preflight plan found nothing to change: every stage it ran
 * satisfied (none needed, pending or waiting for a reboot), no effect
 * planned (a reboot is one), no reboot asked for, no rollback's downgrade.
 * The real pass would then check the same machine a moment later, with the
 * lock held and nothing applied in between: it takes these results (and
 * what the plan showed is exactly what the run records). */
static bool plan_settled(const struct session *s, const struct gp_plan *p)
{
	if (s->rollback || s->c.reboot_requested)
		return false;
	for (size_t i = 0; i < p->n_stages; i++) {
		const struct gp_stage_plan *sp = &p->stages[i];
		if (sp->n_effects ||
		    (sp->state != GP_STATE_SATISFIED && sp->state != GP_STATE_DISABLED &&
		     sp->state != GP_STATE_SKIPPED))
			return false;
	}
	return true;
}

/* The settled preflight plan's result for stage; NULL: check it. */
static const struct gp_stage_plan *settled_stage(const struct session *s,
                                                 const char *stage)
{
	for (size_t i = 0; s->settled && i < s->settled->n_stages; i++)
		if (strcmp(s->settled->stages[i].name, stage) == 0)
			return &s->settled->stages[i];
	return NULL;
}

/* Runs one selected, enabled, implemented stage. Returns 0 or an exit code. */
static int run_stage(struct session *s, const struct gp_stage *st, const cJSON *cfg,
                     struct gp_stage_plan *sp, bool reboot_outstanding)
{
	struct gp_ctx *c = &s->c;
	c->stage = sp;
	if ((st->flags & GP_STAGE_NEEDS_REBOOTED_KERNEL) && reboot_outstanding)
		return wait_for_reboot(s, st, cfg, sp);
	struct gp_check ck = { 0 };
	const struct gp_stage_plan *settled = settled_stage(s, st->name);
	if (settled)
		gp_check_set(&ck, settled->state, "%s", settled->reason);
	else if (stage_check(s, st, cfg, &ck) < 0) {
		free(ck.reason);
		gp_stage_plan_set(sp, GP_STATE_FAILED, "check failed");
		return report_err(s);
	}
	gp_stage_plan_set(sp, ck.state, "%s", ck.reason);
	free(ck.reason);
	gp_log(c, "check: %s (%s)%s", gp_stage_state_name(sp->state), sp->reason,
	       settled ? ", as the preflight plan found it" : "");
	if (sp->state == GP_STATE_REBOOT_PENDING &&
	    gp_effect_reboot_required(c, NULL) < 0) {
		gp_stage_plan_set(sp, GP_STATE_FAILED, "%s", s->err.msg);
		return report_err(s);
	}
	if (sp->state != GP_STATE_NEEDED) {
		if (c->mode == GP_MODE_APPLY)
			gp_journal_set_stage(&c->journal, st->name,
			                     gp_stage_state_id(sp->state));
		return 0;
	}
	gp_log(c, "apply");
	gp_ctx_announce_stage(c, sp, false);
	if (c->mode == GP_MODE_APPLY) {
		/* Until the stage ends, status can tell a run that was killed here. */
		gp_journal_set_stage(&c->journal, st->name, "applying");
		gp_journal_save(&c->root, &c->journal);
	}
	if (st->apply(c, cfg) < 0 || gp_ctx_root_fault(c) < 0) {
		gp_stage_plan_set(sp, GP_STATE_FAILED, "%s", s->err.msg);
		if (c->mode == GP_MODE_APPLY) {
			gp_journal_set_stage(&c->journal, st->name,
			                     gp_run_stop_signal ? "interrupted"
			                                        : "failed");
			gp_journal_save(&c->root, &c->journal);
		}
		return report_err(s);
	}
	if (c->mode == GP_MODE_PLAN)
		return 0;
	/* Re-check: apply must have done the job (or left only a reboot to do). */
	struct gp_check after = { 0 };
	if (st->check(c, cfg, &after) < 0) {
		free(after.reason);
		return report_err(s);
	}
	enum gp_stage_state final = after.state;
	if (final == GP_STATE_NEEDED) {
		gp_fail(&s->err, GP_EFAILED,
		        "%s: still not done after applying its changes: %s; see %s",
		        st->name, after.reason, GP_LOG_FILE);
		free(after.reason);
		gp_stage_plan_set(sp, GP_STATE_FAILED, "%s", s->err.msg);
		gp_journal_set_stage(&c->journal, st->name, "failed");
		return report_err(s);
	}
	free(after.reason);
	gp_journal_set_stage(&c->journal, st->name,
	                     final == GP_STATE_REBOOT_PENDING ? "reboot_pending"
	                                                      : "done");
	if (gp_journal_save(&c->root, &c->journal) < 0)
		return gp_fail(&s->err, GP_EFAILED, "cannot write the journal"),
		       report_err(s);
	return 0;
}

static void record_reboot(struct session *s, const struct gp_plan *plan)
{
	struct gp_ctx *c = &s->c;
	if (s->reboot_ineffective)
		return; /* keep the record: it says when the reboot was asked for */
	if (!gp_plan_reboot_required(plan)) {
		/* Stages left out of this run may still wait for the reboot. */
		bool waiting = false;
		for (size_t i = 0; i < plan->n_stages; i++) {
			const cJSON *rec = gp_journal_stage_get(&c->journal,
			                                        plan->stages[i].name);
			waiting |= gp_streq(gp_json_string(rec, "state", NULL),
			                    gp_stage_state_id(GP_STATE_REBOOT_PENDING));
		}
		if (!waiting)
			gp_journal_clear_reboot(&c->journal);
		return;
	}
	struct gp_buf why = { 0 };
	for (size_t i = 0; i < plan->n_stages; i++) {
		const struct gp_stage_plan *sp = &plan->stages[i];
		for (size_t j = 0; j < sp->n_effects; j++)
			if (sp->effects[j].kind == GP_EFFECT_REBOOT)
				gp_buf_printf(&why, "%s%s: %s", why.len ? "; " : "",
				              sp->name, sp->effects[j].reason);
		if (sp->state == GP_STATE_REBOOT_PENDING && !sp->n_effects)
			gp_buf_printf(&why, "%s%s: %s", why.len ? "; " : "", sp->name,
			              sp->reason);
	}
	_cleanup_free_ char *now = gp_boot_id(&c->root);
	/* Keep the boot id of the first request: it is what tells a later run
	 * whether the machine rebooted since. */
	const char *asked_in = gp_journal_reboot_boot_id(&c->journal);
	_cleanup_free_ char *keep = gp_xstrdup(
	    asked_in && gp_streq(asked_in, now) ? asked_in : now);
	gp_journal_set_reboot(&c->journal, why.data, keep);
	gp_buf_free(&why);
}

static int plan_exit_code(const struct gp_plan *p)
{
	int code = GP_EXIT_OK;
	for (size_t i = 0; i < p->n_stages; i++) {
		enum gp_stage_state st = p->stages[i].state;
		if (st == GP_STATE_FAILED)
			return GP_EXIT_APPLY_FAILED;
		if (st == GP_STATE_BLOCKED || st == GP_STATE_NOT_IMPLEMENTED)
			code = GP_EXIT_BLOCKED;
	}
	if (code == GP_EXIT_OK && gp_plan_reboot_required(p))
		code = GP_EXIT_REBOOT;
	return code;
}

/* Drift (src/stages/drift.c): a stage applied before with these settings
 * is brought back (corrective); one applied with others changes because
 * the profile did (intentional); one never applied is new. */
static enum gp_change stage_change(const struct gp_ctx *c, const char *stage,
                                   const cJSON *cfg, const char *digest)
{
	if (!gp_drift_stage_applied(c, stage))
		return GP_CHANGE_NEW;
	return gp_drift_corrective(c, stage, cfg, digest) ? GP_CHANGE_CORRECTIVE
	                                                  : GP_CHANGE_INTENTIONAL;
}

/* The settings a stage is now done with, for the next run's stage_change,
 * and its packages as they are now, for the next verify. */
static void record_settings(struct gp_ctx *c, const char *stage, const cJSON *cfg)
{
	if (c->mode != GP_MODE_APPLY || !gp_drift_stage_applied(c, stage))
		return;
	_cleanup_free_ char *digest = gp_drift_settings_digest(c, cfg);
	gp_journal_set_stage_settings(&c->journal, stage, digest);
	gp_drift_accept_packages(c, stage);
}

/* Where the resume unit is installed in the root (make install-units, the
 * package), as systemd's unit search path orders them; NULL: nowhere. */
static const char *resume_unit_path(struct session *s)
{
	static const char *const paths[] = {
		"/etc/systemd/system/" GP_RESUME_UNIT,
		"/usr/local/lib/systemd/system/" GP_RESUME_UNIT,
		"/usr/lib/systemd/system/" GP_RESUME_UNIT,
		"/lib/systemd/system/" GP_RESUME_UNIT,
	};
	struct stat st;
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
		if (gp_root_stat(&s->c.root, paths[i], &st) == 0 && S_ISREG(st.st_mode))
			return paths[i];
	return NULL;
}

/* --reboot=auto, once the stages are done and a reboot is what is left:
 * one more plan entry, "reboot", owned by the engine (the door takes
 * effects inside a plan entry only), that writes the resume marker,
 * enables gpuprov-resume.service and reboots. A root that is not / is
 * armed for its next boot but never rebooted (unless a test's stub stands
 * in for the reboot). The same entry in the plan pass and the real one;
 * the real one runs after the journal is saved. Returns true on failure. */
static bool reboot_step(struct session *s, const struct gp_options *o)
{
	struct gp_ctx *c = &s->c;
	if (!o->reboot_auto || plan_exit_code(c->plan) != GP_EXIT_REBOOT)
		return false;
	struct gp_stage_plan *sp = gp_plan_add_stage(
	    c->plan, "reboot", "arm gpuprov-resume.service and reboot (--reboot=auto)");
	c->stage = sp;
	bool may_reboot = o->reboot_stub ||
	                  (gp_root_is_host(&c->root) && gp_run_self_chrooted() == 0);
	unsigned done = o->resumed ? gp_journal_resume_reboots(&c->journal) : 0;
	const char *unit = resume_unit_path(s);
	bool failed = false;
	if (done >= GP_RESUME_MAX_REBOOTS) {
		_cleanup_free_ char *install = gp_hint_command(c, "install", NULL);
		gp_stage_plan_set(
		    sp, GP_STATE_REBOOT_PENDING,
		    "not rebooting: gpuprov rebooted %u times for this install, the most "
		    "--reboot=auto makes, and a reboot is still needed; find out why it "
		    "does not take effect ('gpuprov verify' has hints), reboot, then run "
		    "'%s'",
		    done, install);
		if (c->mode == GP_MODE_APPLY) {
			gp_log(c, "%s", sp->reason);
			gp_journal_stop_resume(&c->journal, sp->reason);
			failed = gp_ctx_save_journal(c) < 0;
		}
	} else if (!unit) {
		gp_stage_plan_set(sp, GP_STATE_BLOCKED,
		                  "--reboot=auto needs %s installed in the root (make "
		                  "install-units, or gpuprov's package); install it, or "
		                  "use --reboot=never",
		                  GP_RESUME_UNIT);
	} else {
		gp_stage_plan_set(sp, GP_STATE_NEEDED, "%s",
		                  may_reboot ? "a reboot will follow; " GP_RESUME_UNIT
		                               " then runs this command again"
		                             : "armed for the next boot of the system in "
		                               "the root; no reboot: the root is not the "
		                               "host's / (or gpuprov runs chrooted)");
		gp_ctx_announce_stage(c, sp, false);
		_cleanup_free_ char *marker = gp_resume_marker_format(o->argv);
		_cleanup_free_ char *why = gp_xasprintf(
		    "--reboot=auto; %s continues after the boot", GP_RESUME_UNIT);
		failed = gp_effect_write(c, GP_RESUME_MARKER, marker, strlen(marker),
		                         0600) < 0 ||
		         gp_effect_symlink(c, unit, GP_RESUME_WANTS) < 0 ||
		         (may_reboot && gp_effect_reboot_now(c, why, o->reboot_stub) < 0);
		if (failed) {
			gp_stage_plan_set(sp, GP_STATE_FAILED, "%s", s->err.msg);
			report_err(s);
		}
	}
	gp_ctx_announce_stage(c, sp, true);
	c->stage = NULL;
	return failed;
}

/* A step the engine makes itself, a rollback's or an uninstall stage's
 * (not a stage's apply, which also keeps its journal state): logged and
 * announced before its effects; end_step takes what making it returned. */
static void begin_step(struct session *s, struct gp_stage_plan *sp, const char *command)
{
	gp_log(&s->c, "%s: %s", command, sp->reason);
	gp_ctx_announce_stage(&s->c, sp, false);
}

/* rc: the step's apply (0, or -1 with s->err set). Returns true when it
 * failed (reported; the plan says so). */
static bool end_step(struct session *s, struct gp_stage_plan *sp, int rc)
{
	bool failed = rc < 0 || gp_ctx_root_fault(&s->c) < 0;
	if (failed) {
		gp_stage_plan_set(sp, GP_STATE_FAILED, "%s", s->err.msg);
		report_err(s);
	}
	gp_ctx_announce_stage(&s->c, sp, true);
	return failed;
}

/* A rollback's first step (src/rollback.c): the packages, holds and files
 * as its history entry had them, before the stages apply the entry's profile.
 * Returns true when it failed. */
static bool rollback_step(struct session *s)
{
	struct gp_ctx *c = &s->c;
	c->plan->command = "rollback";
	struct gp_stage_plan *sp = gp_plan_add_stage(
	    c->plan, GP_ROLLBACK_STEP,
	    "the packages, holds and files of the entry rolled back to");
	c->stage = sp;
	_cleanup_free_ char *reason = NULL;
	int rc = gp_rollback_check(c, s->rollback, &reason);
	if (rc == -2) {
		gp_stage_plan_set(sp, GP_STATE_FAILED, "check failed");
		report_err(s);
	} else {
		gp_stage_plan_set(sp,
		                  rc < 0   ? GP_STATE_BLOCKED
		                  : rc > 0 ? GP_STATE_NEEDED
		                           : GP_STATE_SATISFIED,
		                  "%s", reason);
	}
	bool failed = rc == -2;
	if (rc > 0) {
		begin_step(s, sp, "rollback");
		failed = end_step(s, sp, gp_rollback_apply(c, s->rollback));
	}
	c->stage = NULL;
	return failed;
}

/* One pass over the stage table into a fresh c->plan: a plan in
 * GP_MODE_PLAN, the real thing otherwise. Returns true when a stage failed. */
static bool run_pass(struct session *s, const struct gp_options *o)
{
	struct gp_ctx *c = &s->c;
	if (s->preflight_settled && c->mode == GP_MODE_APPLY && !s->settled)
		s->settled = TAKE_PTR(c->plan);
	gp_plan_free(c->plan);
	c->plan = gp_plan_new(s->profile->name, s->profile->digest, c->root.dir,
	                      c->mode == GP_MODE_PLAN);
	c->reboot_requested = false;
	c->plan->mismatch = gp_xstrdup(s->forced_mismatch);
	c->plan->overrides = gp_strv_copy(s->overrides);
	struct gp_os_release osr = { 0 };
	if (gp_os_release_read(&c->root, &osr) == 0 && osr.pretty_name)
		c->plan->os_pretty = gp_xstrdup(osr.pretty_name);
	gp_os_release_free(&osr);

	bool failed = s->rollback && rollback_step(s);
	for (size_t i = 0; i < gp_stage_count; i++) {
		const struct gp_stage *st = gp_stages[i];
		struct gp_stage_plan *sp = gp_plan_add_stage(c->plan, st->name,
		                                             st->summary);
		const char *reason;
		enum gp_stage_state disp = stage_disposition(o, s->profile, st, &reason);
		if (disp != GP_STATE_NEEDED) {
			gp_stage_plan_set(sp, disp, "%s", reason);
			continue;
		}
		if (failed) {
			gp_stage_plan_set(sp, GP_STATE_SKIPPED,
			                  "not run: an earlier stage failed");
			continue;
		}
		bool outstanding = c->reboot_requested ||
		                   gp_plan_reboot_required(c->plan);
		const cJSON *cfg = gp_profile_stage(s->profile, st->name);
		sp->change = stage_change(c, st->name, cfg, s->profile->digest);
		if (run_stage(s, st, cfg, sp, outstanding))
			failed = true;
		record_settings(c, st->name, cfg);
		gp_ctx_announce_stage(c, sp, true);
		c->stage = NULL;
	}
	/* A real run reboots only after the journal is saved (the caller). */
	if (!failed && c->mode == GP_MODE_PLAN)
		failed = reboot_step(s, o);
	return failed;
}

/* The plan is the result of a plan command; for install it is a report
 * that -q hides in text (a document asked for, such as JSON, stays). */
static void render_plan(const struct session *s, const struct gp_options *o,
                        struct gp_out *out)
{
	if (out->format != GP_FORMAT_TEXT || o->dry_run || out->verbosity >= 0)
		gp_plan_render(s->c.plan, out);
}

/* "nouveau: reason; env: reason" for the stages in state st. */
static char *stages_in_state(const struct gp_plan *p, enum gp_stage_state st)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; i < p->n_stages; i++)
		if (p->stages[i].state == st)
			gp_buf_printf(&b, "%s%s: %s", b.len ? "; " : "",
			              p->stages[i].name, p->stages[i].reason);
	return gp_buf_steal(&b);
}

/* Everything before the first change: the stages exist, the root is
 * writable, the lock is ours, and a full plan shows nothing blocked or
 * invalid. Returns 0 or the exit code to stop with. */
static int preflight(struct session *s, const struct gp_options *o, struct gp_out *out)
{
	struct gp_ctx *c = &s->c;
	_cleanup_free_ char *missing = unimplemented_selected(o, s->profile);
	if (missing) {
		gp_error(out,
		         "%s: stages not implemented yet: %s; nothing was changed; "
		         "exclude them with --skip %s (or pick stages with --only)",
		         s->command, missing, missing);
		return GP_EXIT_BLOCKED;
	}
	if (!gp_root_writable(&c->root)) {
		gp_error(out,
		         "%s: the root %s is not writable; run as root or use "
		         "--dry-run",
		         s->command, c->root.dir);
		return GP_EXIT_BLOCKED;
	}
	if (gp_lock_acquire(&c->root, &s->lock_fd, &s->err) < 0)
		return report_err(s);
	c->mode = GP_MODE_PLAN;
	bool failed = run_pass(s, o);
	int code = failed ? gp_exit_code(&s->err) : plan_exit_code(c->plan);
	if (code == GP_EXIT_BLOCKED) {
		render_plan(s, o, out);
		_cleanup_free_ char *why = stages_in_state(c->plan, GP_STATE_BLOCKED);
		gp_error(out, "%s: nothing was changed: %s", s->command, why);
		return code;
	}
	if (failed) /* the error was reported; nothing was changed */
		return code;
	s->preflight_settled = plan_settled(s, c->plan);
	/* The plan pass may have noted marks in the in-memory journal: start
	 * the real pass from what is on disk. */
	c->mode = GP_MODE_APPLY;
	gp_pkg_state_free(c); /* the plan pass's planned packages */
	gp_journal_free(&c->journal);
	if (gp_journal_load(&c->root, &c->journal, &s->err) < 0)
		return report_err(s);
	return 0;
}

/* Downloads for later stages start while earlier stages apply: the
 * prefetch hooks of the stages the preflight plan found needed announce
 * what they will download, and a background thread fetches it. Never in
 * dry-run or offline (offline only ever looks at the cache). */
static void start_prefetch(struct session *s, const struct gp_options *o)
{
	struct gp_ctx *c = &s->c;
	if (c->mode != GP_MODE_APPLY || o->offline)
		return;
	for (size_t i = 0; i < c->plan->n_stages && i < gp_stage_count; i++) {
		const struct gp_stage *st = gp_stages[i];
		struct gp_stage_plan *sp = &c->plan->stages[i];
		if (!st->prefetch || sp->state != GP_STATE_NEEDED)
			continue;
		c->stage = sp;
		if (st->prefetch(c, gp_profile_stage(s->profile, st->name)) < 0) {
			/* Only a head start is lost: apply downloads it itself. */
			gp_log(c, "prefetch: %s", s->err.msg);
			s->err = (struct gp_err){ 0 };
		}
		c->stage = NULL;
	}
	gp_ctx_prefetch_start(c);
}

/* What install, plan and verify start with: the root, the journal, valid
 * stage names and the profile. Returns 0 or an exit code. */
static int session_start(struct session *s, const struct gp_options *o,
                         struct gp_out *out, const char *command)
{
	int code = session_open(s, o, out);
	if (!code)
		code = check_stage_names(o, out);
	if (!code)
		code = session_profile(s, o, command);
	return code;
}

/* The compatibility preflight: every blocking issue is reported and the
 * run stops (exit 4) before anything else; overridden ones go into the
 * plan and the journal. */
static int check_compat(struct session *s, struct gp_out *out)
{
	struct gp_compat_report rep;
	gp_compat_check(s->profile->doc, &rep);
	s->overrides = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < rep.n; i++) {
		const struct gp_compat_issue *x = &rep.issues[i];
		if (x->override) {
			_cleanup_free_ char *line = gp_xasprintf(
			    "%s overridden by the profile (%s): %s", x->rule, x->override,
			    x->message);
			gp_strv_push(&s->overrides, line);
		} else {
			gp_error(out, "profile %s: compatibility rule %s: %s",
			         s->profile->name, x->rule, x->message);
		}
	}
	size_t blocking = gp_compat_blocking(&rep);
	gp_compat_report_free(&rep);
	if (!blocking)
		return 0;
	gp_error(out, "nothing was changed: fix the profile, or override a rule you have "
	              "checked with \"override\": {\"rule\": ID, \"reason\": TEXT}");
	return GP_EXIT_BLOCKED;
}

/* The exact versions the profile pins, for the history entry: each
 * stage's "version" and the Python environment's packages. */
static cJSON *pinned_versions(const struct gp_profile *p)
{
	cJSON *v = cJSON_CreateObject();
	for (size_t i = 0; i < gp_stage_count; i++) {
		const cJSON *cfg = gp_profile_stage(p, gp_stages[i]->name);
		const char *version = gp_json_string(cfg, "version", NULL);
		if (version)
			cJSON_AddStringToObject(v, gp_stages[i]->name, version);
	}
	const cJSON *pins = cJSON_GetObjectItemCaseSensitive(
	    gp_profile_stage(p, "pytorch"), "packages");
	if (pins)
		cJSON_AddItemToObject(v, "pytorch_packages", cJSON_Duplicate(pins, true));
	return v;
}

/* How a real install ended, for its history entry. */
static const char *history_result(int code, bool failed)
{
	if (failed)
		return gp_run_stop_signal ? "interrupted" : "failed";
	return code == GP_EXIT_REBOOT    ? "reboot_pending"
	       : code == GP_EXIT_BLOCKED ? "blocked"
	       : code == GP_EXIT_OK      ? "completed"
	                                 : "failed";
}

/* install (or rollback) of the session's profile: the compatibility and
 * host checks, the preflight plan, the real pass, the history entry.
 * Closes the session; returns the exit code. */
static int install_session(struct session *s, int code, const struct gp_options *o,
                           struct gp_out *out)
{
	if (!code)
		code = check_compat(s, out);
	_cleanup_free_ char *mismatch = code
	                                    ? NULL
	                                    : gp_profile_mismatch(s->profile, &s->c.root);
	if (mismatch && !o->force) {
		gp_error(
		    out,
		    "profile %s does not fit this host: %s; nothing was changed; use "
		    "another profile, or --force if you are sure",
		    s->profile->name, mismatch);
		code = GP_EXIT_BLOCKED;
	}
	s->forced_mismatch = mismatch;
	if (!code && !o->dry_run)
		code = preflight(s, o, out);
	if (!code && !o->dry_run && open_run_log(s) < 0)
		code = report_err(s);
	int recovered = code || o->dry_run ? 0 : gp_ctx_recover(&s->c);
	if (recovered < 0)
		code = report_err(s);
	else if (recovered) /* the journal changed since the preflight plan */
		s->preflight_settled = false;
	if (code) {
		session_close(s);
		return code;
	}
	struct gp_ctx *c = &s->c;
	if (c->mode == GP_MODE_APPLY) {
		gp_log(c, "install: profile %s (%s, sha256 %s)", s->profile->name,
		       s->profile->path, s->profile->digest);
		/* A rollback's profile is its entry's copy: no file names it. */
		gp_journal_set_profile(&c->journal, s->profile->name,
		                       s->rollback ? "" : s->profile->path,
		                       s->profile->digest);
		gp_journal_set_overrides(&c->journal, s->overrides);
		cJSON *versions = pinned_versions(s->profile);
		gp_journal_history_begin(&c->journal, s->profile->name,
		                         s->profile->digest, s->profile->doc, versions);
		cJSON_Delete(versions);
		/* The cap counts the reboots of one install: a person's starts anew. */
		if (!o->resumed)
			gp_journal_clear_resume(&c->journal);
		start_prefetch(s, o);
	}
	bool failed = run_pass(s, o);
	/* Background downloads no stage took any more stop before the report. */
	gp_ctx_close_fetcher(c);
	if (c->mode == GP_MODE_APPLY) {
		record_reboot(s, c->plan);
		if (s->rollback)
			gp_rollback_record(&c->journal, s->rollback);
		gp_journal_history_end(&c->journal,
		                       history_result(plan_exit_code(c->plan), failed));
		if (!gp_journal_reboot_reason(&c->journal))
			gp_journal_clear_resume(&c->journal); /* the install got there */
		if (gp_journal_save(&c->root, &c->journal) < 0) {
			gp_error(out, "cannot write the journal %s", GP_STATE_FILE);
			failed = true;
		}
		gp_log(c, "install: finished");
		if (!failed)
			failed = reboot_step(s, o);
	}
	render_plan(s, o, out);
	code = failed ? gp_exit_code(&s->err) : plan_exit_code(c->plan);
	const struct gp_stage_plan *step = &c->plan->stages[c->plan->n_stages - 1];
	bool stepped = strcmp(step->name, "reboot") == 0;
	if (code == GP_EXIT_REBOOT && c->mode == GP_MODE_APPLY && stepped &&
	    step->state == GP_STATE_NEEDED)
		gp_error(out, "reboot required (%s); %s: %s runs '%s' after the boot",
		         gp_journal_reboot_reason(&c->journal),
		         step->n_effects && step->effects[step->n_effects - 1].kind ==
		                                GP_EFFECT_REBOOT
		             ? "rebooting now (--reboot=auto)"
		             : "armed, not rebooted (the root is not the host's /)",
		         GP_RESUME_UNIT, o->rerun ? o->rerun : "gpuprov install");
	else if (code == GP_EXIT_REBOOT && c->mode == GP_MODE_APPLY && stepped)
		gp_error(out, "reboot required (%s); %s",
		         gp_journal_reboot_reason(&c->journal), step->reason);
	else if (code == GP_EXIT_REBOOT && c->mode == GP_MODE_APPLY)
		gp_error(out,
		         "reboot required (%s); reboot, then run '%s' again to continue",
		         gp_journal_reboot_reason(&c->journal),
		         o->rerun ? o->rerun : "gpuprov install");
	if (code == GP_EXIT_BLOCKED && c->mode == GP_MODE_APPLY) {
		/* A failed stage has reported its own error already. */
		_cleanup_free_ char *why = stages_in_state(c->plan, GP_STATE_BLOCKED);
		if (*why)
			gp_error(out, "install blocked: %s", why);
	}
	session_close(s);
	return code;
}

int gp_engine_install(const struct gp_options *o, struct gp_out *out)
{
	struct session s;
	int code = session_start(&s, o, out, o->dry_run ? "plan" : "install");
	return install_session(&s, code, o, out);
}

/* The command the resume marker records for a rollback (src/main.c has
 * made its command word "install"): after the boot an install of the
 * current entry, the rollback's own (its profile copy), goes on where the
 * rollback stopped; --to, which install does not take, is left out. A
 * "rollback" again would go back one entry more. Free the array only. */
static char **rollback_resume_argv(char *const *argv)
{
	size_t n = 0;
	while (argv && argv[n])
		n++;
	char **out = gp_xcalloc(n + 1, sizeof *out);
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (gp_streq(argv[i], "--to") && i + 1 < n)
			i++;
		else if (!gp_str_starts_with(argv[i], "--to="))
			out[w++] = argv[i];
	}
	return out;
}

int gp_engine_rollback(const struct gp_options *o, struct gp_out *out)
{
	struct session s;
	int code = session_open(&s, o, out);
	s.command = "rollback";
	if (!code)
		code = check_stage_names(o, out);
	const struct gp_journal *j = &s.c.journal;
	_cleanup_free_ char *why = NULL;
	int refused = 0;
	const cJSON *e = code ? NULL
	                      : gp_rollback_target(gp_journal_history(j),
	                                           gp_journal_history_current(j),
	                                           o->rollback_to, &why, &refused);
	if (!code && !e) {
		gp_fail(&s.err, refused, "rollback: %s; nothing was changed", why);
		code = report_err(&s);
	}
	if (!code) {
		s.rollback = cJSON_Duplicate(e, true);
		code = entry_profile(&s, e);
	}
	/* After a reboot the rollback is the current entry: going on means
	 * the same target again, by its id (not "the previous" any more). */
	const cJSON *id = e ? cJSON_GetObjectItemCaseSensitive(e, "id") : NULL;
	struct gp_options ro = *o;
	_cleanup_free_ char *rerun = gp_xasprintf(
	    "gpuprov rollback --to %ld", cJSON_IsNumber(id) ? (long)id->valuedouble : 0L);
	ro.rerun = rerun;
	_cleanup_free_ char **resume = rollback_resume_argv(o->argv);
	ro.argv = resume;
	return install_session(&s, code, &ro, out);
}

/* The report as metrics, with the journal's view of every stage (as
 * status shows it) and the run's time. */
static void render_metrics(const struct session *s, const struct gp_report *rep,
                           int64_t started_ms, struct gp_buf *b)
{
	const struct gp_journal *j = &s->c.journal;
	_cleanup_free_ struct gp_metrics_stage *stages = gp_xcalloc(gp_stage_count,
	                                                            sizeof *stages);
	for (size_t i = 0; i < gp_stage_count; i++) {
		const cJSON *rec = gp_journal_stage_get(j, gp_stages[i]->name);
		const char *never = gp_stage_implemented(gp_stages[i])
		                        ? "never_run"
		                        : "not_implemented";
		stages[i] = (struct gp_metrics_stage){
			gp_stages[i]->name, gp_json_string(rec, "state", never)
		};
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	const struct gp_metrics m = {
		.report = rep,
		.profile_sha256 = s->profile->digest,
		.stages = stages,
		.n_stages = gp_stage_count,
		.reboot_pending = gp_journal_reboot_reason(j) != NULL,
		.timestamp_seconds = (double)now.tv_sec + (double)now.tv_nsec / 1e9,
		.duration_seconds = (double)(gp_monotonic_ms() - started_ms) / 1000,
	};
	gp_prometheus_render(&m, b);
}

int gp_engine_verify(const struct gp_options *o, struct gp_out *out)
{
	int64_t started_ms = gp_monotonic_ms();
	struct session s;
	int code = session_start(&s, o, out, "verify");
	/* Where the textfile goes is settled before the checks, which take a
	 * while, so a wrong directory fails at once. */
	_cleanup_free_ char *textfile = NULL;
	if (!code && o->textfile &&
	    gp_textfile_path(&s.c.root, o->textfile_dir, &textfile, &s.err) < 0)
		code = report_err(&s);
	if (code) {
		session_close(&s);
		return code;
	}
	struct gp_ctx *c = &s.c;
	c->mode = GP_MODE_VERIFY; /* the effect door refuses every effect */
	struct gp_report rep;
	gp_report_init(&rep, s.profile->name);
	bool unimplemented = false;
	for (size_t i = 0; i < gp_stage_count && !code; i++) {
		const struct gp_stage *st = gp_stages[i];
		const char *reason;
		enum gp_stage_state disp = stage_disposition(o, s.profile, st, &reason);
		if (disp == GP_STATE_NOT_IMPLEMENTED) {
			unimplemented = true;
			_cleanup_free_ char *id = gp_xasprintf("%s.implemented",
			                                       st->name);
			gp_report_add(
			    &rep, id, GP_SKIP, "stage",
			    "exclude it with --skip or choose stages with --only",
			    "not implemented in this version of gpuprov: nothing "
			    "verified");
		}
		if (disp != GP_STATE_NEEDED)
			continue;
		const cJSON *cfg = gp_profile_stage(s.profile, st->name);
		if (st->verify(c, cfg, &rep) < 0 ||
		    gp_drift_verify(c, st->name, cfg, &rep) < 0 ||
		    gp_ctx_root_fault(c) < 0)
			code = report_err(&s);
	}
	const char *stopped = gp_journal_resume_stopped(&c->journal);
	if (stopped)
		gp_report_add(
		    &rep, "gpuprov.resume_stopped", GP_FAIL, "automatic reboots",
		    "the install waits for a person: see the reason", "%s", stopped);
	if (!code && o->deep && gp_deep_verify(c, o->deep, o->force, &rep) < 0)
		code = report_err(&s);
	const char *pending = gp_journal_reboot_reason(&c->journal);
	if (pending) {
		_cleanup_free_ char *install = gp_hint_command(c, "install", NULL);
		_cleanup_free_ char *hint = gp_xasprintf("reboot, then run '%s'",
		                                         install);
		gp_report_add(&rep, "gpuprov.pending_reboot", GP_WARN, "pending reboot",
		              hint, "%s", pending);
	}
	if (!code) {
		struct gp_buf metrics = { 0 };
		if (textfile || out->format == GP_FORMAT_PROMETHEUS)
			render_metrics(&s, &rep, started_ms, &metrics);
		if (out->format == GP_FORMAT_PROMETHEUS)
			fputs(metrics.data, out->out);
		else
			gp_report_render(&rep, out);
		if (out->format == GP_FORMAT_TEXT && o->deep) {
			struct gp_buf table = { 0 };
			gp_deeptable_render(&rep, &table);
			if (table.data)
				fputs(table.data, out->out);
			gp_buf_free(&table);
		}
		code = gp_report_count(&rep, GP_FAIL) ? GP_EXIT_VERIFY_FAILED
		       : unimplemented                ? GP_EXIT_BLOCKED
		                                      : GP_EXIT_OK;
		/* Also after a failed check: the metrics say which. */
		if (textfile && gp_textfile_write(&s.c.root, textfile, metrics.data,
		                                  metrics.len, &s.err) < 0)
			code = report_err(&s);
		gp_buf_free(&metrics);
	}
	gp_report_free(&rep);
	session_close(&s);
	return code;
}

/* The files and links the journal records, not the directories gpuprov
 * made for them (their "dir" records). */
static int files_written(const struct gp_journal *j)
{
	int n = 0;
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(j->doc, "files");
	for (const cJSON *f = files ? files->child : NULL; f; f = f->next)
		n += !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "dir"));
	return n;
}

int gp_engine_status(const struct gp_options *o, struct gp_out *out)
{
	struct session s;
	int code = session_open(&s, o, out);
	if (code) {
		session_close(&s);
		return code;
	}
	const struct gp_journal *j = &s.c.journal;
	const cJSON *records = cJSON_GetObjectItemCaseSensitive(j->doc, "stages");
	_cleanup_free_ struct gp_status_stage *stages = gp_xcalloc(gp_stage_count,
	                                                           sizeof *stages);
	for (size_t i = 0; i < gp_stage_count; i++) {
		const cJSON *rec = cJSON_GetObjectItemCaseSensitive(records,
		                                                    gp_stages[i]->name);
		stages[i] = (struct gp_status_stage){
			.name = gp_stages[i]->name,
			.implemented = gp_stage_implemented(gp_stages[i]),
			.state = gp_json_string(rec, "state", NULL),
			.time = gp_json_string(rec, "time", NULL),
		};
	}
	struct gp_reboot_signals signals;
	gp_reboot_signals_read(&s.c, &signals);
	const struct gp_status status = {
		.root = s.c.root.dir,
		.run_in_progress = gp_lock_held(&s.c.root),
		.recorded = !gp_journal_is_empty(j),
		.profile = cJSON_GetObjectItemCaseSensitive(j->doc, "profile"),
		.reboot = cJSON_GetObjectItemCaseSensitive(j->doc, "reboot"),
		.reboot_reason = gp_journal_reboot_reason(j),
		.resume = cJSON_GetObjectItemCaseSensitive(j->doc, "resume"),
		.files_written = files_written(j),
		.signals = &signals,
		.stages = stages,
		.n_stages = gp_stage_count,
	};
	gp_status_render(&status, out);
	gp_reboot_signals_free(&signals);
	session_close(&s);
	return GP_EXIT_OK;
}

int gp_engine_history(const struct gp_options *o, struct gp_out *out)
{
	struct session s;
	int code = session_open(&s, o, out);
	if (!code) {
		const struct gp_journal *j = &s.c.journal;
		gp_history_render(gp_journal_history(j), gp_journal_history_current(j),
		                  gp_lock_held(&s.c.root), out);
	}
	session_close(&s);
	return code;
}

/* The profile uninstall works with: the current history entry's copy (the
 * file may be gone or changed since), else the one the journal names. */
static int uninstall_profile(struct session *s, const struct gp_options *o)
{
	const cJSON *e = gp_journal_history_current(&s->c.journal);
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "profile");
	if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(p, "doc")))
		return session_profile(s, o, "uninstall");
	return entry_profile(s, e);
}

/* One uninstall pass into a fresh c->plan, the stages in reverse order.
 * Returns true when a stage failed. */
static bool undo_pass(struct session *s, const struct gp_options *o)
{
	struct gp_ctx *c = &s->c;
	gp_plan_free(c->plan);
	c->plan = gp_plan_new(s->profile->name, s->profile->digest, c->root.dir,
	                      c->mode == GP_MODE_PLAN);
	c->plan->command = "uninstall";
	c->reboot_requested = false;
	bool failed = false;
	for (size_t i = gp_stage_count; i-- > 0;) {
		const struct gp_stage *st = gp_stages[i];
		struct gp_stage_plan *sp = gp_plan_add_stage(c->plan, st->name,
		                                             "uninstall");
		if (!stage_selected(o, st)) {
			gp_stage_plan_set(sp, GP_STATE_SKIPPED,
			                  "excluded by --only/--skip");
			continue;
		}
		if (failed) {
			gp_stage_plan_set(sp, GP_STATE_SKIPPED,
			                  "not run: an earlier stage failed");
			continue;
		}
		c->stage = sp;
		_cleanup_free_ char *reason = NULL;
		enum gp_stage_state state = gp_stage_undo_check(c, st, &reason);
		gp_stage_plan_set(sp, state, "%s", reason);
		if (sp->state == GP_STATE_NEEDED) {
			begin_step(s, sp, "uninstall");
			failed = end_step(s, sp, gp_stage_undo_apply(c, st));
		}
		c->stage = NULL;
	}
	return failed;
}

int gp_engine_uninstall(const struct gp_options *o, struct gp_out *out)
{
	struct session s;
	int code = session_open(&s, o, out);
	if (!code)
		code = check_stage_names(o, out);
	if (!code && gp_journal_is_empty(&s.c.journal)) {
		gp_info(out, "uninstall: no install recorded in %s%s; nothing to do",
		        gp_root_is_host(&s.c.root) ? "" : s.c.root.dir, GP_STATE_FILE);
		session_close(&s);
		return GP_EXIT_OK;
	}
	if (!code)
		code = uninstall_profile(&s, o);
	struct gp_ctx *c = &s.c;
	if (!code && !o->dry_run) {
		if (!gp_root_writable(&c->root)) {
			gp_error(out,
			         "uninstall: the root %s is not writable; run as root or "
			         "use --dry-run",
			         c->root.dir);
			code = GP_EXIT_BLOCKED;
		} else if (gp_lock_acquire(&c->root, &s.lock_fd, &s.err) < 0 ||
		           open_run_log(&s) < 0 || gp_ctx_recover(c) < 0) {
			code = report_err(&s);
		}
	}
	bool failed = false;
	if (!code) {
		/* The plan first, as install's preflight: a real run makes what
		 * it shows, from the journal as it is on disk. */
		c->mode = GP_MODE_PLAN;
		failed = undo_pass(&s, o);
		/* A blocked stage changes nothing, neither do the others. */
		if (!failed && !o->dry_run &&
		    plan_exit_code(c->plan) != GP_EXIT_BLOCKED) {
			c->mode = GP_MODE_APPLY;
			gp_pkg_state_free(c);
			gp_journal_free(&c->journal);
			if (gp_journal_load(&c->root, &c->journal, &s.err) < 0) {
				code = report_err(&s);
			} else {
				gp_log(c, "uninstall: profile %s", s.profile->name);
				failed = undo_pass(&s, o);
				record_reboot(&s, c->plan);
				if (!failed && !o->only && !o->skip)
					gp_journal_history_uninstalled(&c->journal);
				if (gp_journal_save(&c->root, &c->journal) < 0) {
					gp_error(out, "cannot write the journal %s",
					         GP_STATE_FILE);
					failed = true;
				}
				gp_log(c, "uninstall: finished");
			}
		}
	}
	if (!code) {
		render_plan(&s, o, out);
		code = failed ? gp_exit_code(&s.err) : plan_exit_code(c->plan);
	}
	if (code == GP_EXIT_REBOOT && c->mode == GP_MODE_APPLY)
		gp_error(out, "reboot required (%s); reboot to unload the driver",
		         gp_journal_reboot_reason(&c->journal));
	session_close(&s);
	return code;
}

int gp_engine_resume_take(const struct gp_options *o, struct gp_out *out, char ***argv)
{
	*argv = NULL;
	struct session s;
	int code = session_open(&s, o, out);
	if (!code && gp_lock_acquire(&s.c.root, &s.lock_fd, &s.err) < 0)
		code = report_err(&s);
	if (!code && open_run_log(&s) < 0)
		code = report_err(&s);
	if (code) {
		session_close(&s);
		return code;
	}
	struct gp_ctx *c = &s.c;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int rc = gp_root_read_max(&c->root, GP_RESUME_MARKER, GP_RESUME_MARKER_MAX, &text,
	                          &len);
	if (rc == -ENOENT) {
		gp_info(out, "resume: no %s: nothing to resume", GP_RESUME_MARKER);
		session_close(&s);
		return GP_EXIT_OK;
	}
	/* First, whatever the marker holds: a bad one, or a run that dies
	 * (a crash, a power cut), must not come back at every boot. */
	int gone = gp_root_unlink(&c->root, GP_RESUME_MARKER);
	if (gone < 0 && gone != -ENOENT) {
		gp_error(out,
		         "resume: cannot remove %s: %s; nothing was run (it would run "
		         "again at every boot); remove it, then run the install by hand",
		         GP_RESUME_MARKER, strerror(-gone));
		session_close(&s);
		return GP_EXIT_APPLY_FAILED;
	}
	gp_journal_forget_file(&c->journal, GP_RESUME_MARKER);
	struct stat st;
	if (gp_root_lstat(&c->root, GP_RESUME_WANTS, &st) == 0 && S_ISLNK(st.st_mode) &&
	    gp_root_unlink(&c->root, GP_RESUME_WANTS) == 0)
		gp_journal_forget_file(&c->journal, GP_RESUME_WANTS);
	char *why = NULL;
	if (rc < 0)
		why = gp_root_read_error(&c->root, GP_RESUME_MARKER, GP_RESUME_MARKER_MAX,
		                         rc);
	else
		gp_resume_marker_parse(text, len, argv, &why); /* why: when not */
	code = GP_EXIT_OK;
	if (why) {
		gp_error(out,
		         "resume: %s: %s; removed it, nothing was run; run the install "
		         "by hand",
		         GP_RESUME_MARKER, why);
		free(why);
		code = GP_EXIT_INVALID_INPUT;
	} else {
		gp_journal_count_resume(&c->journal);
		_cleanup_free_ char *shown = gp_argv_display(*argv);
		gp_log(c, "resume: boot %u of this install: %s",
		       gp_journal_resume_reboots(&c->journal), shown);
	}
	if (gp_journal_save(&c->root, &c->journal) < 0 && !code) {
		gp_error(out, "resume: cannot write the journal %s", GP_STATE_FILE);
		code = GP_EXIT_APPLY_FAILED;
	}
	if (code) {
		gp_strv_free(*argv);
		*argv = NULL;
	}
	session_close(&s);
	return code;
}
