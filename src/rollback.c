/* Rollback: the packages, holds and files a history entry recorded, made
 * again.
 *
 * The entry's "packages" (name -> version, stage, held) is the state to go
 * back to: each one installed at exactly its version (apt's install has
 * --allow-downgrades, src/pure/pkg_apt.c), the packages gpuprov installed
 * since and the entry did not have removed (those there before gpuprov,
 * "installed_before", are kept), and the holds as the entry's "holds" lists
 * them. An older version that no configured repository offers any more
 * refuses the rollback before anything changes: apt installs only what its
 * lists offer (or what is installed). The files gpuprov wrote since that
 * the entry did not have go back to how they were before gpuprov, as
 * uninstall puts them (src/undo.c). The rest of the entry's state (the
 * files its stages wrote, the Python environment's pins) comes from the
 * engine applying the entry's profile copy after this step, as an install
 * of it would. */
#include <string.h>

#include "gpuprov/context.h"
#include "gpuprov/error.h"
#include "gpuprov/journal.h"
#include "gpuprov/pkg.h"
#include "gpuprov/pkgdb.h"
#include "gpuprov/rollback.h"
#include "gpuprov/undo.h"
#include "gpuprov/util.h"

/* The stage a reboot follows when its packages change (as its install does). */
#define DRIVER_STAGE "driver"

static double entry_id(const cJSON *e)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
	return cJSON_IsNumber(id) ? id->valuedouble : 0;
}

const cJSON *gp_rollback_target(const cJSON *history, const cJSON *current, long to,
                                char **why, int *code)
{
	*why = NULL;
	*code = GP_EBLOCKED;
	if (!current) {
		*why = gp_xstrdup(
		    history && history->child
		        ? "the newest install was uninstalled, so there is no current "
		          "state to roll back from; install a profile"
		        : "no install recorded; there is nothing to roll back to");
		return NULL;
	}
	const cJSON *before = NULL;
	for (const cJSON *e = history ? history->child : NULL; e; e = e->next) {
		if (to > 0 && entry_id(e) == (double)to) {
			if (e != current)
				return e;
			*code = GP_EOPTION;
			*why = gp_xasprintf(
			    "--to %ld is the current entry; nothing to roll "
			    "back (gpuprov history lists the others)",
			    to);
			return NULL;
		}
		if (e->next == current)
			before = e;
	}
	if (to > 0) {
		*code = GP_EOPTION;
		*why = gp_xasprintf("--to %ld: no such history entry; gpuprov history "
		                    "lists the ids it keeps",
		                    to);
		return NULL;
	}
	if (!before)
		*why = gp_xstrdup("only one install recorded; there is nothing before it "
		                  "to roll back to");
	return before;
}

/* The entry's record of a package, or NULL. */
static const cJSON *entry_package(const cJSON *entry, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(entry, "packages"), name);
}

static bool entry_holds(const cJSON *entry, const char *name)
{
	const cJSON *holds = cJSON_GetObjectItemCaseSensitive(entry, "holds");
	for (const cJSON *h = holds ? holds->child : NULL; h; h = h->next)
		if (cJSON_IsString(h) && gp_streq(h->valuestring, name))
			return true;
	return false;
}

/* What the rollback changes in the packages. */
struct rollback {
	struct gp_pkg_want *want; /* the entry's packages not at its version */
	size_t n_want;
	char **remove; /* gpuprov's since, which the entry did not have */
	char **gone; /* "name=version" no repository offers: refused */
	char **driver; /* of those, the driver stage's */
	/* dnf could not say which versions its repositories offer: what it
	 * said (the rollback is refused) */
	char *unchecked;
};

static void rollback_free(struct rollback *r)
{
	free(r->want);
	gp_strv_free(r->remove);
	gp_strv_free(r->gone);
	gp_strv_free(r->driver);
	free(r->unchecked);
}

/* Is version of name offered by the root's apt lists? True when they were
 * never read (apt-get update not run): apt decides. */
static bool offered(struct gp_ctx *c, const char *name, const char *version)
{
	_cleanup_strv_ char **versions = NULL;
	int lists = gp_apt_candidates(&c->root, name, &versions);
	return lists <= 0 || gp_strv_contains(versions, version);
}

/* Gathers r from the journal, the entry and the package database: 0, or -1
 * with c->err set. */
static int gather(struct gp_ctx *c, const cJSON *entry, struct rollback *r)
{
	*r = (struct rollback){
		gp_xcalloc(1, sizeof *r->want), 0,
		gp_xcalloc(1, sizeof(char *)),  gp_xcalloc(1, sizeof(char *)),
		gp_xcalloc(1, sizeof(char *)),  NULL
	};
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	const cJSON *pkgs = cJSON_GetObjectItemCaseSensitive(entry, "packages");
	for (const cJSON *p = pkgs ? pkgs->child : NULL; p; p = p->next) {
		const char *version = gp_json_string(p, "version", NULL);
		_cleanup_free_ char *have = NULL;
		if (!version)
			continue;
		if (gp_pkg_installed(c, p->string, &have) < 0)
			return -1;
		if (gp_streq(have, version))
			continue;
		if (pm == GP_PKG_APT && !offered(c, p->string, version)) {
			_cleanup_free_ char *spec = gp_xasprintf("%s=%s", p->string,
			                                         version);
			gp_strv_push(&r->gone, spec);
		}
		r->want = gp_xrealloc(r->want, (r->n_want + 1) * sizeof *r->want);
		r->want[r->n_want++] = (struct gp_pkg_want){ p->string, version };
		if (gp_streq(gp_json_string(p, "stage", NULL), DRIVER_STAGE))
			gp_strv_push(&r->driver, p->string);
	}
	if (pm == GP_PKG_DNF) {
		_cleanup_strv_ char **missing = NULL;
		if (gp_pkg_dnf_missing(c, r->want, r->n_want, &missing, &r->unchecked) ==
		    0)
			for (size_t i = 0; missing[i]; i++)
				gp_strv_push(&r->gone, missing[i]);
	}
	const cJSON *now = gp_journal_packages(&c->journal);
	for (const cJSON *p = now ? now->child : NULL; p; p = p->next) {
		if (entry_package(entry, p->string) ||
		    gp_json_string(p, "installed_before", NULL))
			continue;
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, p->string, &have) < 0)
			return -1;
		if (!have)
			continue;
		gp_strv_push(&r->remove, p->string);
		if (gp_streq(gp_json_string(p, "stage", NULL), DRIVER_STAGE))
			gp_strv_push(&r->driver, p->string);
	}
	return 0;
}

/* The holds to change once the packages are back: *set the entry held that
 * are not held now, *release the held ones of gpuprov's it did not hold. */
static void hold_changes(struct gp_ctx *c, const cJSON *entry, char ***set,
                         char ***release)
{
	*set = gp_xcalloc(1, sizeof(char *));
	*release = gp_xcalloc(1, sizeof(char *));
	const cJSON *holds = cJSON_GetObjectItemCaseSensitive(entry, "holds");
	for (const cJSON *h = holds ? holds->child : NULL; h; h = h->next)
		if (cJSON_IsString(h) && !gp_pkg_is_held(c, h->valuestring))
			gp_strv_push(set, h->valuestring);
	const cJSON *now = gp_journal_packages(&c->journal);
	for (const cJSON *p = now ? now->child : NULL; p; p = p->next)
		if (!entry_holds(entry, p->string) && gp_pkg_is_held(c, p->string))
			gp_strv_push(release, p->string);
}

/* --- the files ------------------------------------------------------- */

/* Does a file record name something gpuprov put there (a file or a link)? */
static bool has_content(const cJSON *rec)
{
	return gp_json_string(rec, "sha256", NULL) || gp_json_string(rec, "link", NULL);
}

/* The files the journal records that the entry did not have: written (or
 * linked) since, or removed since where the operator's copy is in the
 * backup. Each goes back to how it was before gpuprov (gp_undo_file). The
 * files the entry had are its stages' to write again from its profile copy,
 * after this step. */
static char **files_since(struct gp_ctx *c, const cJSON *entry)
{
	char **since = gp_xcalloc(1, sizeof(char *));
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(c->journal.doc, "files");
	const cJSON *had = cJSON_GetObjectItemCaseSensitive(entry, "files");
	for (const cJSON *f = files ? files->child : NULL; f; f = f->next) {
		const cJSON *then = cJSON_GetObjectItemCaseSensitive(had, f->string);
		if (has_content(then) || gp_undo_volatile(f->string) ||
		    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "dir")))
			continue;
		bool theirs_before = gp_json_string(f, "backup", NULL) ||
		                     gp_json_string(f, "link_before", NULL);
		/* then: the entry had it removed as well */
		if (has_content(f) || (!then && theirs_before))
			gp_strv_push(&since, f->string);
	}
	return since;
}

/* The directories gpuprov made since the entry (the journal records them,
 * the entry does not) that hold nothing once files go (gp_undo_emptied_dirs:
 * never the Python environment, which a command made whole and may hold
 * what others installed since). */
static char **dirs_since(struct gp_ctx *c, const cJSON *entry, char *const *files)
{
	_cleanup_strv_ char **made = gp_xcalloc(1, sizeof(char *));
	const cJSON *all = cJSON_GetObjectItemCaseSensitive(c->journal.doc, "files");
	const cJSON *had = cJSON_GetObjectItemCaseSensitive(entry, "files");
	for (const cJSON *f = all ? all->child : NULL; f; f = f->next)
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "dir")) &&
		    !cJSON_GetObjectItemCaseSensitive(had, f->string) &&
		    !gp_undo_volatile(f->string))
			gp_strv_push(&made, f->string);
	return gp_undo_emptied_dirs(c, made, files);
}

/* What gp_undo_file does to each of files, for the plan's reason. */
static char *files_text(struct gp_ctx *c, char **files)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; files[i]; i++) {
		const cJSON *rec = gp_journal_file(&c->journal, files[i]);
		const char *backup = gp_json_string(rec, "backup", NULL);
		const char *link = gp_json_string(rec, "link_before", NULL);
		gp_buf_puts(&b, i ? ", " : "");
		if (backup)
			gp_buf_printf(&b, "restores %s from %s", files[i], backup);
		else if (link)
			gp_buf_printf(&b, "points %s back to %s", files[i], link);
		else
			gp_buf_printf(&b, "removes %s", files[i]);
	}
	return gp_buf_steal(&b);
}

/* Puts the files back (files_since), then runs what makes that count as
 * the stage that wrote each one would (ldconfig, the initramfs). */
static int apply_files(struct gp_ctx *c, const cJSON *entry)
{
	_cleanup_strv_ char **files = files_since(c, entry);
	/* The stages first: for real, gp_undo_file forgets the record. */
	_cleanup_strv_ char **stages = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; files[i]; i++)
		gp_strv_push(
		    &stages,
		    gp_json_string(gp_journal_file(&c->journal, files[i]), "stage", ""));
	_cleanup_strv_ char **dirs = dirs_since(c, entry, files);
	for (size_t i = 0; files[i]; i++)
		if (gp_undo_file(c, files[i]) < 0)
			return -1;
	for (size_t i = 0; dirs[i]; i++)
		if (gp_effect_remove_made_dir(c, dirs[i]) < 0)
			return -1;
	_cleanup_strv_ char **done = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; stages[i]; i++) {
		if (gp_strv_contains(done, stages[i]))
			continue; /* its files went with its first */
		gp_strv_push(&done, stages[i]);
		_cleanup_strv_ char **of_stage = gp_xcalloc(1, sizeof(char *));
		for (size_t k = i; files[k]; k++)
			if (gp_streq(stages[k], stages[i]))
				gp_strv_push(&of_stage, files[k]);
		if (gp_undo_commands(c, stages[i], of_stage) < 0)
			return -1;
	}
	return 0;
}

/* "name=version, ..." of the wants. */
static char *wants_text(const struct rollback *r)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; i < r->n_want; i++)
		gp_buf_printf(&b, "%s%s=%s", i ? ", " : "", r->want[i].name,
		              r->want[i].version);
	return gp_buf_steal(&b);
}

/* dnf could not be asked whether its repositories still offer the old
 * versions: refused before any change rather than left to fail half-way
 * in dnf. */
static char *unchecked_refusal(const struct rollback *r, long id)
{
	_cleanup_free_ char *wants = wants_text(r);
	return gp_xasprintf(
	    "cannot roll back to history entry %ld: it would install %s, and dnf "
	    "could not say whether the repositories in its cache still offer "
	    "these versions (dnf -C repoquery: %s); run dnf makecache, then "
	    "gpuprov rollback again",
	    id, wants, r->unchecked);
}

/* Where the versions were looked for, for the refusal. */
static const char *offers_source(struct gp_ctx *c)
{
	enum gp_pkg_manager pm;
	return gp_pkg_manager(c, &pm) == 0 && pm == GP_PKG_DNF
	           ? "the repositories in dnf's cache of the root"
	           : "apt's lists in the root";
}

int gp_rollback_check(struct gp_ctx *c, const cJSON *entry, char **reason)
{
	*reason = NULL;
	struct rollback r;
	int rc = gather(c, entry, &r);
	if (rc < 0) {
		rollback_free(&r);
		return -2;
	}
	long id = (long)entry_id(entry);
	if (r.unchecked) {
		*reason = unchecked_refusal(&r, id);
		rollback_free(&r);
		return -1;
	}
	if (r.gone[0]) {
		_cleanup_free_ char *gone = gp_strv_join(r.gone, ", ");
		*reason = gp_xasprintf(
		    "cannot roll back to history entry %ld: no configured repository "
		    "offers %s any more (%s); add a repository or mirror that has "
		    "them, or roll back to another entry (--to N)",
		    id, gone, offers_source(c));
		rollback_free(&r);
		return -1;
	}
	_cleanup_strv_ char **set = NULL, **release = NULL;
	hold_changes(c, entry, &set, &release);
	struct gp_buf b = { 0 };
	if (r.n_want) {
		_cleanup_free_ char *w = wants_text(&r);
		gp_buf_printf(&b, "installs %s", w);
	}
	if (r.remove[0]) {
		_cleanup_free_ char *names = gp_strv_join(r.remove, " ");
		gp_buf_printf(&b, "%sremoves %s", b.len ? "; " : "", names);
	}
	if (set[0] || release[0])
		gp_buf_printf(&b, "%sholds as they were", b.len ? "; " : "");
	_cleanup_strv_ char **files = files_since(c, entry);
	if (files[0]) {
		_cleanup_free_ char *f = files_text(c, files);
		gp_buf_printf(&b, "%s%s", b.len ? "; " : "", f);
	}
	_cleanup_strv_ char **dirs = dirs_since(c, entry, files);
	if (dirs[0]) {
		_cleanup_free_ char *d = gp_strv_join(dirs, ", ");
		gp_buf_printf(&b, "%sremoves the director%s it made since, %s",
		              b.len ? "; " : "", dirs[1] ? "ies" : "y", d);
	}
	rc = b.len != 0;
	_cleanup_free_ char *what = gp_buf_steal(&b);
	*reason = rc ? gp_xasprintf("back to history entry %ld: %s", id, what)
	             : gp_xasprintf("the packages, holds and files are as history "
	                            "entry %ld had them",
	                            id);
	rollback_free(&r);
	return rc;
}

static int apply_holds(struct gp_ctx *c, const cJSON *entry)
{
	_cleanup_strv_ char **set = NULL, **release = NULL;
	hold_changes(c, entry, &set, &release);
	if (release[0] && gp_effect_pkg_hold(c, (const char *const *)release,
	                                     gp_strv_len(release), false) < 0)
		return -1;
	if (set[0] &&
	    gp_effect_pkg_hold(c, (const char *const *)set, gp_strv_len(set), true) < 0)
		return -1;
	return 0;
}

int gp_rollback_apply(struct gp_ctx *c, const cJSON *entry)
{
	struct rollback r;
	int rc = gather(c, entry, &r);
	if (rc == 0 && r.unchecked) {
		_cleanup_free_ char *why = unchecked_refusal(&r, (long)entry_id(entry));
		rc = gp_fail(c->err, GP_EBLOCKED, "rollback: %s; nothing was changed",
		             why);
	}
	if (rc == 0 && r.gone[0]) {
		_cleanup_free_ char *gone = gp_strv_join(r.gone, ", ");
		rc = gp_fail(c->err, GP_EBLOCKED,
		             "rollback: no configured repository offers %s any more; "
		             "nothing was changed",
		             gone);
	}
	if (rc == 0 && r.remove[0])
		rc = gp_effect_pkg_remove(c, (const char *const *)r.remove,
		                          gp_strv_len(r.remove));
	if (rc == 0 && r.n_want)
		rc = gp_effect_pkg_install(c, r.want, r.n_want);
	if (rc == 0)
		rc = apply_holds(c, entry);
	if (rc == 0)
		rc = apply_files(c, entry);
	if (rc == 0 && r.driver[0]) {
		_cleanup_free_ char *why = gp_xasprintf(
		    "the NVIDIA driver's packages went back to history entry %ld",
		    (long)entry_id(entry));
		rc = gp_effect_reboot_for(c, why, (const char *const *)r.driver);
	}
	rollback_free(&r);
	return rc;
}

static bool of_step(const cJSON *rec)
{
	return gp_streq(gp_json_string(rec, "stage", NULL), GP_ROLLBACK_STEP);
}

void gp_rollback_record(struct gp_journal *j, const cJSON *entry)
{
	const cJSON *pkgs = gp_journal_packages(j);
	/* A package the step's install brought that the entry did not have (a
	 * dependency apt chose) goes to the stage of the first one it
	 * installed that the entry had, so that uninstall finds it. */
	const char *fallback = NULL;
	for (const cJSON *p = pkgs ? pkgs->child : NULL; p && !fallback; p = p->next)
		if (of_step(p))
			fallback = gp_json_string(entry_package(entry, p->string),
			                          "stage", NULL);
	for (const cJSON *p = pkgs ? pkgs->child : NULL; p; p = p->next) {
		const char *stage = gp_json_string(entry_package(entry, p->string),
		                                   "stage", fallback);
		const char *version = gp_json_string(p, "version", NULL);
		if (stage && version && of_step(p))
			gp_journal_record_package(j, p->string, version, stage);
	}
	gp_journal_history_rollback_of(j, (long)entry_id(entry));
}
