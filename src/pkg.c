/* The package layer (pkg.h): apt and dnf behind one interface.
 *
 * Design. Queries read the package database as files (pkgdb.c: dpkg status,
 * rpmdb.sqlite) and never run a command; they see the effects planned
 * earlier in this run through c->pkg, which a dry run fills with the
 * installs and holds it planned (a real run re-reads the database after each
 * command instead). The gp_effect_pkg_* functions belong to the effect door:
 * they build the backend's argv (pkg_apt.c, pkg_dnf.c) and hand every change
 * to gp_effect_run / gp_effect_write / gp_effect_download, so a dry run
 * records exactly the commands a real run makes. Before a real command they
 * probe the package manager's lock files with fcntl(F_GETLK) and wait,
 * printing once, for at most GPUPROV_LOCK_WAIT seconds; then they fail
 * naming the holder. gpuprov never removes or takes over the lock.
 *
 * Metadata is refreshed before the first install that needs it and after a
 * repository was added, at most once per run otherwise. A repository's key
 * is fingerprinted by gpuprov (openpgp.c) after the sha256-checked download
 * and before anything is written: a keyring without the pinned fingerprint
 * is refused and nothing under /etc or /usr changes. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gpuprov/arch.h"
#include "gpuprov/context.h"
#include "gpuprov/debfile.h"
#include "gpuprov/json.h"
#include "gpuprov/nvdriver.h"
#include "gpuprov/openpgp.h"
#include "gpuprov/pkg.h"
#include "gpuprov/pkg_apt.h"
#include "gpuprov/pkg_dnf.h"
#include "gpuprov/pkgcmd.h"
#include "gpuprov/pkgdb.h"
#include "gpuprov/run.h"

struct gp_pkg_state {
	char **names; /* planned installs (dry run): names[i] at versions[i] */
	char **versions; /* "" when the repository's candidate */
	char **held; /* planned holds */
	char **unheld; /* planned releases */
	char **removed; /* planned removals (dry run) */
	char **repos; /* "id fingerprint" of the repositories added (or planned)
	               * in this run: a dry run cannot read a keyring that is
	               * not downloaded yet */
	char **fresh; /* files add_repo created in this real run that no
	               * refresh has accepted yet: removed again when it fails */
	char *fresh_repo; /* the repository they belong to (the last added) */
	struct gp_pkgdb db; /* the database as last parsed ... */
	char *db_stamp; /* ... from files with these stats (db_stamp()); NULL: none */
	bool refreshed; /* metadata refreshed (or planned) in this run */
	bool stale; /* a repository was added since */
	/* apt: the lists as they were before this run's first refresh, what a
	 * plan of this run had (lists_before). */
	struct gp_apt_index before;
	bool before_read;
	/* An install of this run was recorded as a rule (deferred_install);
	 * deferred_adds: the exact dependencies it added (a real run). */
	bool deferred;
	char **deferred_adds;
	/* The database before this run's first install or removal,
	 * "name=version" each (db_before_run); NULL until asked or taken. */
	char **db_before_run;
	/* Taken with it: the held packages, and the journal's package
	 * records (a copy), what a failed upgrade puts back
	 * (restore_before_run). */
	char **held_before_run;
	cJSON *journal_before_run;
	bool dpkg_finished; /* finish_interrupted ran (or was planned) */
	/* dnf: the output of the last query of what the repositories offer
	 * (gp_pkg_dnf_missing), for the names it asked about, at this count
	 * of effects: a rollback's check and its apply ask once between two
	 * effects. */
	char *offers_out, *offers_names;
	unsigned long offers_at;
};

static struct gp_pkg_state *state(struct gp_ctx *c)
{
	if (!c->pkg) {
		c->pkg = gp_xcalloc(1, sizeof *c->pkg);
		c->pkg->names = gp_xcalloc(1, sizeof(char *));
		c->pkg->versions = gp_xcalloc(1, sizeof(char *));
		c->pkg->held = gp_xcalloc(1, sizeof(char *));
		c->pkg->unheld = gp_xcalloc(1, sizeof(char *));
		c->pkg->removed = gp_xcalloc(1, sizeof(char *));
		c->pkg->repos = gp_xcalloc(1, sizeof(char *));
		c->pkg->fresh = gp_xcalloc(1, sizeof(char *));
		c->pkg->deferred_adds = gp_xcalloc(1, sizeof(char *));
	}
	return c->pkg;
}

void gp_pkg_state_free(struct gp_ctx *c)
{
	if (!c->pkg)
		return;
	gp_strv_free(c->pkg->names);
	gp_strv_free(c->pkg->versions);
	gp_strv_free(c->pkg->held);
	gp_strv_free(c->pkg->unheld);
	gp_strv_free(c->pkg->removed);
	gp_strv_free(c->pkg->repos);
	gp_strv_free(c->pkg->fresh);
	free(c->pkg->fresh_repo);
	gp_pkgdb_free(&c->pkg->db);
	free(c->pkg->db_stamp);
	gp_apt_index_free(&c->pkg->before);
	gp_strv_free(c->pkg->deferred_adds);
	gp_strv_free(c->pkg->db_before_run);
	gp_strv_free(c->pkg->held_before_run);
	cJSON_Delete(c->pkg->journal_before_run);
	free(c->pkg->offers_out);
	free(c->pkg->offers_names);
	free(c->pkg);
	c->pkg = NULL;
}

static const char *who(const struct gp_ctx *c)
{
	return c->stage ? c->stage->name : "gpuprov";
}

int gp_pkg_manager(struct gp_ctx *c, enum gp_pkg_manager *pm)
{
	const char *m = c->profile
	                    ? gp_profile_distro_string(c->profile, "package_manager")
	                    : NULL;
	if (gp_streq(m, "apt"))
		*pm = GP_PKG_APT;
	else if (gp_streq(m, "dnf"))
		*pm = GP_PKG_DNF;
	else
		return gp_fail(c->err, GP_EINPUT,
		               "%s: the profile names no package manager; set "
		               "distro.package_manager to apt or dnf",
		               who(c));
	return 0;
}

/* The stats of the files a database is read from: dpkg rewrites its status
 * file by rename, rpm and versionlock change theirs in place. */
static char *db_stamp(const struct gp_ctx *c, enum gp_pkg_manager pm)
{
	static const char *const apt_files[] = { GP_DPKG_STATUS, NULL };
	static const char *const dnf_files[] = { GP_RPMDB_SQLITE, GP_RPMDB_SQLITE "-wal",
		                                 GP_DNF_VERSIONLOCK, NULL };
	struct gp_buf b = { 0 };
	for (const char *const *f = pm == GP_PKG_APT ? apt_files : dnf_files; *f; f++) {
		struct stat st;
		if (gp_root_stat(&c->root, *f, &st) == 0)
			gp_buf_printf(&b, "%ju:%ju:%jd:%jd.%09ld;", (uintmax_t)st.st_dev,
			              (uintmax_t)st.st_ino, (intmax_t)st.st_size,
			              (intmax_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
		else
			gp_buf_puts(&b, "-;");
	}
	return gp_buf_steal(&b);
}

/* The parsed database, borrowed from the run's state. Queries come by the
 * dozen in a run and an rpm database is read whole, so it is parsed again
 * only when its files changed (a real run's commands). 0 or -errno; no
 * database yet is an empty one. */
static int db_get(struct gp_ctx *c, enum gp_pkg_manager pm, const struct gp_pkgdb **db)
{
	struct gp_pkg_state *s = state(c);
	_cleanup_free_ char *stamp = db_stamp(c, pm);
	if (!s->db_stamp || strcmp(s->db_stamp, stamp) != 0) {
		gp_pkgdb_free(&s->db);
		free(s->db_stamp);
		s->db_stamp = NULL;
		int rc = pm == GP_PKG_APT ? gp_dpkg_status_read(&c->root, &s->db)
		                          : gp_rpmdb_read(&c->root, &s->db);
		if (rc < 0 && rc != -ENOENT) {
			gp_pkgdb_free(&s->db);
			return rc;
		}
		s->db_stamp = TAKE_PTR(stamp);
	}
	*db = &s->db;
	return 0;
}

static int read_db(struct gp_ctx *c, enum gp_pkg_manager pm, const struct gp_pkgdb **db)
{
	int rc = db_get(c, pm, db);
	if (rc < 0)
		return gp_fail(c->err, GP_EFAILED,
		               "%s: cannot read the package database %s in %s: %s",
		               who(c),
		               pm == GP_PKG_APT ? GP_DPKG_STATUS : GP_RPMDB_SQLITE,
		               c->root.dir, strerror(-rc));
	return 0;
}

/* The database without an error message: queries that answer "no" when it
 * cannot be read. */
static int read_db_quiet(struct gp_ctx *c, const struct gp_pkgdb **db)
{
	const char *m = c->profile
	                    ? gp_profile_distro_string(c->profile, "package_manager")
	                    : NULL;
	if (!m)
		return -EINVAL;
	return db_get(c, strcmp(m, "dnf") == 0 ? GP_PKG_DNF : GP_PKG_APT, db);
}

static ssize_t planned_index(struct gp_pkg_state *s, const char *name)
{
	for (size_t i = 0; s->names[i]; i++)
		if (strcmp(s->names[i], name) == 0)
			return (ssize_t)i;
	return -1;
}

int gp_pkg_installed(struct gp_ctx *c, const char *name, char **version)
{
	*version = NULL;
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	ssize_t i = planned_index(state(c), name);
	if (i >= 0) {
		*version = gp_xstrdup(c->pkg->versions[i]);
		return 0;
	}
	if (gp_strv_contains(c->pkg->removed, name))
		return 0;
	const struct gp_pkgdb *db;
	if (read_db(c, pm, &db) < 0)
		return -1;
	const struct gp_pkgdb_entry *e = gp_pkgdb_find(db, name);
	if (e)
		*version = gp_xstrdup(e->version);
	return 0;
}

bool gp_pkg_is_held(struct gp_ctx *c, const char *name)
{
	struct gp_pkg_state *s = state(c);
	if (gp_strv_contains(s->held, name))
		return true;
	if (gp_strv_contains(s->unheld, name))
		return false;
	const struct gp_pkgdb *db;
	if (read_db_quiet(c, &db) < 0)
		return false;
	const struct gp_pkgdb_entry *e = gp_pkgdb_find(db, name);
	return e && e->held;
}

static const char *const nvidia_prefixes[] = {
	"nvidia-",
	"libnvidia-",
	"linux-modules-nvidia-",
	"linux-objects-nvidia-",
	"linux-signatures-nvidia-",
	"xserver-xorg-video-nvidia-",
	"cuda-drivers",
	"libcuda1",
	"libxnvctrl",
	"kmod-nvidia",
	"nvidia",
};

static bool is_nvidia_driver_pkg(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(nvidia_prefixes); i++)
		if (gp_str_starts_with(name, nvidia_prefixes[i]))
			return true;
	return false;
}

char **gp_pkg_nvidia_set(struct gp_ctx *c)
{
	char **out = gp_xcalloc(1, sizeof(char *));
	const struct gp_pkgdb *db;
	if (read_db_quiet(c, &db) == 0)
		for (size_t i = 0; i < db->n; i++)
			if (is_nvidia_driver_pkg(db->e[i].name) &&
			    !gp_strv_contains(state(c)->removed, db->e[i].name))
				gp_strv_push(&out, db->e[i].name);
	struct gp_pkg_state *s = state(c);
	for (size_t i = 0; s->names[i]; i++)
		if (is_nvidia_driver_pkg(s->names[i]) &&
		    !gp_strv_contains(out, s->names[i]))
			gp_strv_push(&out, s->names[i]);
	gp_strv_sort(out);
	return out;
}

int gp_pkg_available(struct gp_ctx *c, const char *name)
{
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0 || pm != GP_PKG_APT)
		return -ENOENT;
	_cleanup_strv_ char **versions = NULL;
	int lists = gp_apt_candidates(&c->root, name, &versions);
	if (lists <= 0)
		return -ENOENT;
	return versions[0] != NULL;
}

#define NVIDIA_REPOS "https://developer.download.nvidia.com/compute/cuda/repos/"

void gp_pkg_nvidia_repo(const struct gp_profile *p, struct gp_pkg_nvidia_repo *r)
{
	*r = (struct gp_pkg_nvidia_repo){ 0 };
	const char *nv = gp_profile_distro_string(p, "nvidia_repo");
	const char *url = gp_profile_distro_string(p, "repo_url");
	const char *fpr = gp_profile_distro_string(p, "keyring_fingerprint");
	const char *dir = gp_arch_nvidia_dir(gp_profile_arch(p));
	r->id = nv ? gp_xasprintf("cuda-%s-%s", nv, dir) : gp_xstrdup("cuda");
	if (url)
		r->url = gp_xstrdup(url);
	else if (nv)
		r->url = gp_xasprintf(NVIDIA_REPOS "%s/%s/", nv, dir);
	if (!fpr && gp_streq(gp_profile_distro_string(p, "package_manager"), "apt"))
		fpr = GP_NVIDIA_APT_KEY;
	r->repo = (struct gp_pkg_repo){
		.id = r->id,
		.url = r->url,
		.suite = "/",
		.keyring_url = gp_profile_distro_string(p, "keyring_url"),
		.keyring_sha256 = gp_profile_distro_string(p, "keyring_sha256"),
		.fingerprint = fpr,
		.deb822 = gp_pkg_deb822(p),
	};
}

bool gp_pkg_deb822(const struct gp_profile *p)
{
	return gp_streq(gp_profile_distro_string(p, "apt_sources_format"), "deb822");
}

void gp_pkg_nvidia_repo_free(struct gp_pkg_nvidia_repo *r)
{
	free(r->id);
	free(r->url);
	*r = (struct gp_pkg_nvidia_repo){ 0 };
}

/* --- locks ---------------------------------------------------------------- */

/* Who holds an fcntl lock on path in the root: 0 with *pid (0 when unknown,
 * e.g. an OFD lock) when held, 1 when free or absent. */
static int lock_holder(struct gp_ctx *c, const char *path, pid_t *pid)
{
	/* O_NONBLOCK: a FIFO in its place must not hang the check. */
	_cleanup_close_ int fd = gp_root_openat(&c->root, path,
	                                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
	if (fd < 0)
		return 1;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	if (fcntl(fd, F_GETLK, &fl) < 0 || fl.l_type == F_UNLCK)
		return 1;
	*pid = fl.l_pid > 0 ? fl.l_pid : 0;
	return 0;
}

/* "pid 123 (/usr/bin/python3 /usr/bin/unattended-upgrade)". The pid
 * F_GETLK gives is in gpuprov's own pid namespace (locks belong to the
 * kernel, not to the root), so its command line is read from this system's
 * /proc, not the root's. */
static char *describe_holder(pid_t pid)
{
	if (!pid)
		return gp_xstrdup("another process (its pid is not known)");
	_cleanup_free_ char *path = gp_xasprintf("/proc/%d/cmdline", (int)pid);
	char buf[200];
	ssize_t n = -1;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		n = read(fd, buf, sizeof buf - 1);
	if (n <= 0)
		return gp_xasprintf("pid %d", (int)pid);
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	return gp_xasprintf("pid %d (%s)", (int)pid, buf);
}

static int lock_wait_s(void)
{
	const char *v = getenv("GPUPROV_LOCK_WAIT");
	char *end;
	long n = v ? strtol(v, &end, 10) : -1;
	if (!v || !*v || *end || n < 0 || n > 86400)
		return GP_PKG_LOCK_WAIT_DEFAULT_S;
	return (int)n;
}

/* Waits until no process holds the backend's lock files. Real runs only:
 * a dry run runs nothing. */
static int wait_for_lock(struct gp_ctx *c, const struct gp_pkg_backend *b)
{
	if (c->mode != GP_MODE_APPLY)
		return 0;
	int wait_s = lock_wait_s();
	int64_t deadline = gp_monotonic_ms() + (int64_t)wait_s * 1000;
	bool told = false;
	for (;;) {
		const char *path = NULL;
		pid_t pid = 0;
		for (size_t i = 0; b->lock_files[i] && !path; i++)
			if (lock_holder(c, b->lock_files[i], &pid) == 0)
				path = b->lock_files[i];
		if (!path) {
			if (told)
				gp_info(c->out, "%s: the %s lock is free; going on",
				        who(c), b->name);
			return 0;
		}
		_cleanup_free_ char *holder = describe_holder(pid);
		if (!told) {
			gp_info(c->out,
			        "%s: waiting for %s, held by %s (up to %d s; set "
			        "GPUPROV_LOCK_WAIT to change)",
			        who(c), path, holder, wait_s);
			gp_log(c, "waiting for %s, held by %s", path, holder);
			told = true;
		}
		if (gp_run_stop_signal || gp_monotonic_ms() >= deadline)
			return gp_fail(
			    c->err, GP_EFAILED,
			    "%s: %s is still held by %s after %d s; another "
			    "package manager run (cloud-init, "
			    "unattended-upgrades, apt) is busy: let it finish, "
			    "then run gpuprov again (gpuprov never breaks the "
			    "lock)",
			    who(c), path, holder, wait_s);
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 250 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* Runs argv (a package manager command) after the lock is free. */
static int run_pkg(struct gp_ctx *c, const struct gp_pkg_backend *b, char **argv)
{
	int rc = wait_for_lock(c, b);
	if (rc == 0)
		rc = gp_effect_run(c, argv);
	gp_strv_free(argv);
	return rc;
}

/* The first refresh after a repository was added failed (a Release signed
 * by another key, a wrong URL): left in place, its source file would make
 * every later apt-get update on the host fail. Removes, through the effect
 * door (journaled, backed up), the files adding it created in this run, and
 * says so with the package manager's own message. */
static int drop_fresh_repo(struct gp_ctx *c, const struct gp_pkg_backend *b)
{
	struct gp_pkg_state *s = state(c);
	_cleanup_free_ char *why = gp_xstrdup(c->err->msg);
	_cleanup_free_ char *files = gp_strv_join(s->fresh, ", ");
	for (size_t i = 0; s->fresh[i]; i++)
		if (gp_effect_remove(c, s->fresh[i]) < 0)
			return -1;
	return gp_fail(c->err, GP_EFAILED,
	               "%s: the first %s refresh after adding the repository %s "
	               "failed, so gpuprov removed what it had added for it (%s) and "
	               "later refreshes on this system keep working; check the "
	               "repository's URL and its signing key. It failed with: %s",
	               who(c), b->name, s->fresh_repo, files, why);
}

/* The apt lists as this run found them: read before its first refresh
 * changes them, so a real run decides what a plan could know as the plan
 * of the same root did. */
static const struct gp_apt_index *lists_before(struct gp_ctx *c)
{
	struct gp_pkg_state *s = state(c);
	if (!s->before_read && gp_apt_index_read(&c->root, &s->before) < 0) {
		gp_apt_index_free(&s->before);
		s->before = (struct gp_apt_index){ 0 };
	}
	s->before_read = true;
	return &s->before;
}

static int refresh(struct gp_ctx *c, const struct gp_pkg_backend *b)
{
	struct gp_pkg_state *s = state(c);
	if (s->refreshed && !s->stale)
		return 0;
	if (strcmp(b->name, "apt") == 0)
		lists_before(c);
	if (run_pkg(c, b, b->refresh()) < 0)
		return s->fresh[0] ? drop_fresh_repo(c, b) : -1;
	s->refreshed = true;
	s->stale = false;
	gp_strv_free(s->fresh);
	s->fresh = gp_xcalloc(1, sizeof(char *));
	return 0;
}

/* --- install and hold ------------------------------------------------------ */

/* The full apt version for a want without a revision: the newest candidate
 * in the apt lists with that upstream version; the version as given when
 * there is none (a dry run before the repository's first refresh). */
static char *resolve_version(struct gp_ctx *c, enum gp_pkg_manager pm,
                             const struct gp_pkg_want *w)
{
	if (!w->version || pm != GP_PKG_APT || strchr(w->version, '-'))
		return w->version ? gp_xstrdup(w->version) : NULL;
	_cleanup_strv_ char **cands = NULL;
	gp_apt_candidates(&c->root, w->name, &cands);
	for (size_t i = 0; cands && cands[i]; i++)
		if (gp_pkg_version_matches(cands[i], w->version))
			return gp_xstrdup(cands[i]);
	return gp_xstrdup(w->version);
}

static void strv_remove_at(char **v, size_t j)
{
	free(v[j]);
	memmove(&v[j], &v[j + 1], (gp_strv_len(v) - j) * sizeof(char *));
}

/* Takes name out of v (a string vector), when it is there. */
static void strv_drop(char **v, const char *name)
{
	for (size_t j = 0; v[j]; j++)
		if (strcmp(v[j], name) == 0) {
			strv_remove_at(v, j);
			return;
		}
}

static void plan_install(struct gp_ctx *c, const char *name, const char *version)
{
	if (c->mode != GP_MODE_PLAN)
		return;
	struct gp_pkg_state *s = state(c);
	strv_drop(s->removed, name);
	ssize_t i = planned_index(s, name);
	if (i >= 0) {
		free(s->versions[i]);
		s->versions[i] = gp_xstrdup(version ? version : "");
		return;
	}
	gp_strv_push(&s->names, name);
	gp_strv_push(&s->versions, version ? version : "");
}

static void plan_hold(struct gp_ctx *c, char *const *names, bool hold)
{
	if (c->mode != GP_MODE_PLAN)
		return;
	struct gp_pkg_state *s = state(c);
	for (size_t i = 0; names[i]; i++) {
		char ***to = hold ? &s->held : &s->unheld;
		char ***from = hold ? &s->unheld : &s->held;
		if (!gp_strv_contains(*to, names[i]))
			gp_strv_push(to, names[i]);
		strv_drop(*from, names[i]);
	}
}

static int hold_names(struct gp_ctx *c, const struct gp_pkg_backend *b,
                      char *const *names, bool hold)
{
	if (!names || !names[0])
		return 0;
	if (run_pkg(c, b, b->hold(names, hold)) < 0)
		return -1;
	plan_hold(c, names, hold);
	return 0;
}

/* The transaction: names[i] at versions[i] ("" for the candidate). */
struct txn {
	char **names, **versions;
};

static void txn_add(struct txn *t, const char *name, const char *version)
{
	for (size_t i = 0; t->names[i]; i++)
		if (strcmp(t->names[i], name) == 0) {
			if (!*t->versions[i]) { /* a pin beats the candidate */
				free(t->versions[i]);
				t->versions[i] = gp_xstrdup(version);
			}
			return;
		}
	gp_strv_push(&t->names, name);
	gp_strv_push(&t->versions, version);
}

static bool txn_has(const struct txn *t, const char *name)
{
	return gp_strv_contains(t->names, name);
}

/* The transaction's members that carry a version, in order. */
static void pinned_members(const struct txn *t, char ***names, char ***versions)
{
	*names = gp_xcalloc(1, sizeof(char *));
	*versions = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; t->names[i]; i++)
		if (*t->versions[i]) {
			gp_strv_push(names, t->names[i]);
			gp_strv_push(versions, t->versions[i]);
		}
}

/* apt: adds the exact-version dependencies of the pinned members (see
 * gp_apt_exact_closure), as the metadata just refreshed (or, in a dry run,
 * the lists the root has) describes them; those installed at that version
 * already, and members, stay out. */
static int add_exact_closure(struct gp_ctx *c, const struct gp_apt_index *ix,
                             struct txn *t)
{
	_cleanup_strv_ char **names = NULL, **versions = NULL;
	pinned_members(t, &names, &versions);
	size_t pinned = gp_strv_len(names);
	gp_apt_exact_closure(ix, &names, &versions);
	for (size_t i = pinned; names[i]; i++) {
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, names[i], &have) < 0)
			return -1;
		/* After an interrupted dpkg, what its --configure -a leaves
		 * installed is known to the run only: the whole closure then. */
		if ((gp_streq(have, versions[i]) && !state(c)->dpkg_finished) ||
		    txn_has(t, names[i]))
			continue;
		gp_log(c, "%s=%s is an exact dependency of the pinned set", names[i],
		       versions[i]);
		txn_add(t, names[i], versions[i]);
	}
	return 0;
}

/* apt: a member without a version whose newest candidate disagrees with the
 * pinned members (linux-modules-nvidia-* depends on nvidia-kernel-common
 * at exactly its own driver release) is pinned at the newest candidate
 * that agrees: left to apt, it would come at its newest and its exact
 * dependency drag the pinned set to that release. Until nothing changes
 * (a meta package depends on the per-kernel one at its version): a pass
 * pins one member or ends. true when one was pinned. */
static bool pin_agreeing(struct gp_ctx *c, const struct gp_apt_index *ix, struct txn *t)
{
	bool any = false;
	for (bool more = true; more;) {
		more = false;
		_cleanup_strv_ char **names = NULL, **versions = NULL;
		pinned_members(t, &names, &versions);
		for (size_t i = 0; !more && t->names[i]; i++) {
			if (*t->versions[i])
				continue;
			char *const none[] = { NULL };
			const char *newest = gp_apt_newest_agreeing(ix, t->names[i], none,
			                                            none);
			const char *agreeing = gp_apt_newest_agreeing(ix, t->names[i],
			                                              names, versions);
			if (!agreeing || gp_streq(agreeing, newest))
				continue;
			gp_log(
			    c,
			    "%s=%s is the newest version that agrees with the pinned set",
			    t->names[i], agreeing);
			free(t->versions[i]);
			t->versions[i] = gp_xstrdup(agreeing);
			more = any = true;
		}
	}
	return any;
}

/* The held packages of the NVIDIA driver set outside t that are installed
 * at a release t's pinned NVIDIA members leave (the same upstream version
 * as one of them is installed at), each in *out with the version of the
 * member it belongs with. Released with the whole held set (held_for) and
 * not pinned, apt or dnf would move such a package to its own newest
 * version, not the driver's (or stop, or remove it). With ix (apt), only
 * members the index offers at their version count: of another, the release
 * they move to is not known yet (a plan before the refresh). */
static int held_of_release(struct gp_ctx *c, const struct gp_apt_index *ix,
                           const struct txn *t, struct txn *out)
{
	_cleanup_strv_ char **from = gp_xcalloc(1, sizeof(char *));
	_cleanup_strv_ char **to = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; t->names[i]; i++) {
		const char *v = t->versions[i];
		if (!*v || !is_nvidia_driver_pkg(t->names[i]) ||
		    (ix && !gp_apt_index_find(ix, t->names[i], v)))
			continue;
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, t->names[i], &have) < 0)
			return -1;
		if (!have || gp_streq(have, v) || gp_pkg_version_matches(have, v))
			continue;
		_cleanup_free_ char *up = gp_pkg_upstream_version(have);
		if (!gp_strv_contains(from, up)) {
			gp_strv_push(&from, up);
			gp_strv_push(&to, v);
		}
	}
	if (!from[0])
		return 0;
	_cleanup_strv_ char **set = gp_pkg_nvidia_set(c);
	for (size_t i = 0; set[i]; i++) {
		if (txn_has(t, set[i]) || !gp_pkg_is_held(c, set[i]))
			continue;
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, set[i], &have) < 0)
			return -1;
		_cleanup_free_ char *up = have ? gp_pkg_upstream_version(have) : NULL;
		for (size_t j = 0; up && from[j]; j++)
			if (strcmp(from[j], up) == 0) {
				txn_add(out, set[i], to[j]);
				break;
			}
	}
	return 0;
}

/* Why a held package of the release cannot be pinned at version: what the
 * lists offer, and the operator's two ways out. */
static char *held_not_offered(struct gp_ctx *c, const struct gp_pkg_backend *b,
                              const char *name, const char *version)
{
	_cleanup_free_ char *have = NULL;
	gp_pkg_installed(c, name, &have);
	_cleanup_strv_ char **offered = NULL;
	gp_apt_candidates(&c->root, name, &offered);
	_cleanup_free_ char *list = offered && offered[0] ? gp_strv_join(offered, ", ")
	                                                  : NULL;
	char *const one[] = { (char *)name, NULL };
	_cleanup_strv_ char **release = b->hold(one, false);
	_cleanup_free_ char *cmd = gp_argv_display(release);
	return gp_xasprintf("%s is held at %s, of the NVIDIA driver release that moves "
	                    "to %s, but the root's apt lists %s%s; set "
	                    "stages.driver.version to a release it is offered at, or "
	                    "release it yourself (%s) to let %s move or remove it with "
	                    "the driver",
	                    name, have ? have : "?", version,
	                    list ? "offer it only at " : "do not offer it at all",
	                    list ? list : "", cmd, b->name);
}

/* Pins the held packages of the release the transaction leaves (see
 * held_of_release) at the version they belong with; apt: only at a version
 * the index offers, else *problem (free it) says why, and nothing is added. */
static int pin_held_release(struct gp_ctx *c, const struct gp_pkg_backend *b,
                            const struct gp_apt_index *ix, struct txn *t, char **problem)
{
	struct txn h = { gp_xcalloc(1, sizeof(char *)), gp_xcalloc(1, sizeof(char *)) };
	int rc = held_of_release(c, ix, t, &h);
	for (size_t i = 0; rc == 0 && h.names[i] && ix && !*problem; i++)
		if (!gp_apt_index_find(ix, h.names[i], h.versions[i]))
			*problem = held_not_offered(c, b, h.names[i], h.versions[i]);
	for (size_t i = 0; rc == 0 && !*problem && h.names[i]; i++) {
		gp_log(c, "%s is held at a release the driver leaves: pinned at %s",
		       h.names[i], h.versions[i]);
		txn_add(t, h.names[i], h.versions[i]);
	}
	gp_strv_free(h.names);
	gp_strv_free(h.versions);
	return rc;
}

/* The transaction for the needed wants: each at its full version (the
 * first *named members), with the held packages of the driver release it
 * leaves and (apt) the exact-version closure of the pinned members. 0 with
 * *problem (free it) when one of those cannot be pinned; -1 with c->err
 * set. */
static int build_txn(struct gp_ctx *c, enum gp_pkg_manager pm,
                     const struct gp_pkg_want *want, const bool *need, size_t n,
                     struct txn *t, size_t *named, char **problem)
{
	*problem = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!need[i])
			continue;
		_cleanup_free_ char *v = resolve_version(c, pm, &want[i]);
		txn_add(t, want[i].name, v ? v : "");
	}
	*named = gp_strv_len(t->names);
	const struct gp_pkg_backend *b = gp_pkg_backend_get(pm);
	if (pm != GP_PKG_APT)
		return pin_held_release(c, b, NULL, t, problem);
	/* The lists as they are now: those before the refresh while no real
	 * one ran (a check, a plan), else read again. */
	struct gp_apt_index fresh = { 0 };
	const struct gp_apt_index *ix = &fresh;
	if (c->mode == GP_MODE_PLAN || !state(c)->refreshed)
		ix = lists_before(c);
	else if (gp_apt_index_read(&c->root, &fresh) < 0)
		gp_apt_index_free(&fresh);
	if (!ix->n)
		return 0; /* no lists: apt resolves, the plan names what it knows */
	int rc = add_exact_closure(c, ix, t);
	/* What the members pinned that way depend on at exactly their version
	 * (the prebuilt modules' linux-objects-nvidia-* and signatures). */
	if (rc == 0 && pin_agreeing(c, ix, t))
		rc = add_exact_closure(c, ix, t);
	size_t closed = gp_strv_len(t->names);
	if (rc == 0)
		rc = pin_held_release(c, b, ix, t, problem);
	/* What the held packages depend on at exactly their version. */
	if (rc == 0 && !*problem && gp_strv_len(t->names) > closed)
		rc = add_exact_closure(c, ix, t);
	gp_apt_index_free(&fresh);
	return rc;
}

/* The held packages the transaction must release: its own members, and
 * when it touches the NVIDIA driver set, every held member of that set
 * (their exact dependencies on each other make apt change them together). */
static char **held_for(struct gp_ctx *c, const struct txn *t)
{
	char **held = gp_xcalloc(1, sizeof(char *));
	bool nvidia = false;
	for (size_t i = 0; t->names[i]; i++) {
		nvidia |= is_nvidia_driver_pkg(t->names[i]);
		if (gp_pkg_is_held(c, t->names[i]))
			gp_strv_push(&held, t->names[i]);
	}
	if (!nvidia)
		return held;
	_cleanup_strv_ char **set = gp_pkg_nvidia_set(c);
	for (size_t i = 0; set[i]; i++)
		if (gp_pkg_is_held(c, set[i]) && !gp_strv_contains(held, set[i]))
			gp_strv_push(&held, set[i]);
	return held;
}

/* Did the lists before this run's refresh offer w at its version? When they
 * did not (never refreshed, a repository this run adds), neither its full
 * version nor the packages it depends on at exactly that version can be
 * known before the run refreshes them. */
static bool pin_known_before(struct gp_ctx *c, const struct gp_pkg_want *w)
{
	const struct gp_apt_index *ix = lists_before(c);
	bool full = strchr(w->version, '-') != NULL;
	for (size_t i = 0; i < ix->n; i++)
		if (strcmp(ix->p[i].name, w->name) == 0 &&
		    (full ? strcmp(ix->p[i].version, w->version) == 0
		          : gp_pkg_version_matches(ix->p[i].version, w->version)))
			return true;
	return false;
}

/* The install's command as a plan knows it, for the rule it is recorded as
 * when a pinned want was not in the lists before the refresh (in the plan and
 * the run alike; the run's own command line is logged and shown as it runs).
 * The held packages of the release it leaves are known from the package
 * database (so this is asked before they are released), the versions they
 * can be pinned at only from the refreshed lists. NULL with c->err set. */
static char *deferred_install(struct gp_ctx *c, const struct gp_pkg_backend *b,
                              const struct gp_pkg_want *want, const bool *need, size_t n)
{
	struct gp_pkg_want *given = gp_xcalloc(n ? n : 1, sizeof *given);
	struct txn t = { gp_xcalloc(1, sizeof(char *)), gp_xcalloc(1, sizeof(char *)) };
	struct txn held = { gp_xcalloc(1, sizeof(char *)),
		            gp_xcalloc(1, sizeof(char *)) };
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (need[i]) {
			given[k++] = want[i];
			txn_add(&t, want[i].name, want[i].version ? want[i].version : "");
		}
	char *rule = NULL;
	if (held_of_release(c, NULL, &t, &held) == 0) {
		_cleanup_strv_ char **argv = b->install(given, k);
		_cleanup_free_ char *shown = gp_argv_display(argv);
		_cleanup_free_ char *names = gp_strv_join(held.names, " ");
		rule = gp_xasprintf(
		    "%s, each version taken at its newest revision in the lists the "
		    "refresh fetched, with every package these depend on at exactly "
		    "that version%s%s%s (the root's apt lists did not offer them before "
		    "this run's refresh)",
		    shown, held.names[0] ? ", and the held " : "", names,
		    held.names[0] ? " of the release these replace at that version "
		                    "too (refused when those lists do not offer it)"
		                  : "");
	}
	free(given);
	gp_strv_free(t.names);
	gp_strv_free(t.versions);
	gp_strv_free(held.names);
	gp_strv_free(held.versions);
	return rule;
}

/* need[i]: want[i] is not installed, or not at its version. How many are
 * not, or -1 with c->err set. log: say which are (an effect's record). */
static ssize_t wants_needed(struct gp_ctx *c, const struct gp_pkg_want *want, size_t n,
                            bool *need, bool log)
{
	ssize_t todo = 0;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, want[i].name, &have) < 0)
			return -1;
		need[i] = !have || (want[i].version && *have &&
		                    !gp_pkg_version_matches(have, want[i].version));
		if (need[i])
			todo++;
		else if (log)
			gp_log(c, "%s %s is installed", want[i].name, have);
	}
	return todo;
}

/* Is a needed NVIDIA driver package installed at the candidate? Then the
 * packages the install adds (the others of the set, at the version apt or
 * dnf picks) are known to the run only, and so is a hold of the set after
 * it (gp_effect_pkg_hold). */
static bool adds_unknown(const struct gp_pkg_want *want, const bool *need, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (need[i] && !want[i].version && is_nvidia_driver_pkg(want[i].name))
			return true;
	return false;
}

/* apt: is a needed pin one the lists before this run's refresh did not
 * offer (so the install is recorded as a rule)? */
static bool pins_deferred(struct gp_ctx *c, enum gp_pkg_manager pm,
                          const struct gp_pkg_want *want, const bool *need, size_t n)
{
	bool deferred = false;
	for (size_t i = 0; pm == GP_PKG_APT && i < n; i++)
		deferred |= need[i] && want[i].version && !pin_known_before(c, &want[i]);
	return deferred;
}

char *gp_pkg_install_problem(struct gp_ctx *c, const struct gp_pkg_want *want, size_t n)
{
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0 || pm != GP_PKG_APT || !n)
		return NULL;
	bool *need = gp_xcalloc(n, sizeof(bool));
	char *problem = NULL;
	size_t named;
	struct txn t = { gp_xcalloc(1, sizeof(char *)), gp_xcalloc(1, sizeof(char *)) };
	if (wants_needed(c, want, n, need, false) > 0 &&
	    !pins_deferred(c, pm, want, need, n))
		build_txn(c, pm, want, need, n, &t, &named, &problem);
	free(need);
	gp_strv_free(t.names);
	gp_strv_free(t.versions);
	return problem;
}

/* The packages in the database as "name=version" (planned ones not
 * included). */
static char **db_list(struct gp_ctx *c)
{
	char **out = gp_xcalloc(1, sizeof(char *));
	const struct gp_pkgdb *db;
	if (read_db_quiet(c, &db) < 0)
		return out;
	for (size_t i = 0; i < db->n + db->n_alias; i++) {
		const struct gp_pkgdb_entry *e = i < db->n ? &db->e[i]
		                                           : &db->alias[i - db->n];
		_cleanup_free_ char *nv = gp_xasprintf("%s=%s", e->name, e->version);
		gp_strv_push(&out, nv);
	}
	return out;
}

/* The installed packages as "name=version" (a real run, before its
 * install command): what was there before it, for uninstall. */
static char **installed_now(struct gp_ctx *c)
{
	return c->mode == GP_MODE_APPLY ? db_list(c) : gp_xcalloc(1, sizeof(char *));
}

/* The database as this run found it: taken before its first install or
 * removal changes it (a dry run changes nothing), so a real run knows
 * what the plan of the same root knew. */
static char *const *db_before_run(struct gp_ctx *c)
{
	struct gp_pkg_state *s = state(c);
	if (s->db_before_run)
		return s->db_before_run;
	s->db_before_run = db_list(c);
	s->held_before_run = gp_xcalloc(1, sizeof(char *));
	const struct gp_pkgdb *db;
	if (read_db_quiet(c, &db) == 0)
		for (size_t i = 0; i < db->n; i++)
			if (db->e[i].held)
				gp_strv_push(&s->held_before_run, db->e[i].name);
	const cJSON *pkgs = gp_journal_packages(&c->journal);
	s->journal_before_run = pkgs ? cJSON_Duplicate(pkgs, true) : NULL;
	return s->db_before_run;
}

/* The version of name in an installed_now() list, or NULL. */
static const char *version_in(char *const *list, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; list[i]; i++)
		if (strncmp(list[i], name, n) == 0 && list[i][n] == '=')
			return list[i] + n + 1;
	return NULL;
}

char *gp_pkg_installed_before(struct gp_ctx *c, const char *name)
{
	const char *v = version_in(db_before_run(c), name);
	return v ? gp_xstrdup(v) : NULL;
}

/* Did the install name one version of the package of e (an alias of it,
 * kernel-devel-6.12.0-55.9.1.el10_0.x86_64)? Then that is what it added,
 * not the package name, which stands for all its versions. */
static bool named_by_alias(const struct gp_pkgdb *db, const struct gp_pkgdb_entry *e,
                           char *const *names)
{
	for (size_t i = 0; i < db->n_alias; i++)
		if (gp_streq(db->alias[i].of, e->name) &&
		    gp_strv_contains(names, db->alias[i].name))
			return true;
	return false;
}

/* rpm's pseudo-package of each imported signing key: every key is a
 * gpg-pubkey, so only its alias (gpg-pubkey-KEYID-DATE) names the one a
 * transaction imported; `dnf remove gpg-pubkey` would take every key. */
#define RPM_KEY_PACKAGE "gpg-pubkey"

/* Pushes onto added the aliases of e's package that before lacks. */
static void push_new_aliases(const struct gp_pkgdb *db, const struct gp_pkgdb_entry *e,
                             char *const *before, char ***added)
{
	for (size_t i = 0; i < db->n_alias; i++)
		if (gp_streq(db->alias[i].of, e->name) &&
		    !version_in(before, db->alias[i].name))
			gp_strv_push(added, db->alias[i].name);
}

int gp_pkg_dnf_missing(struct gp_ctx *c, const struct gp_pkg_want *want, size_t n,
                       char ***missing, char **error)
{
	*missing = gp_xcalloc(1, sizeof(char *));
	*error = NULL;
	if (n == 0)
		return 0;
	_cleanup_strv_ char **names = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		gp_strv_push(&names, want[i].name);
	struct gp_pkg_state *s = state(c);
	_cleanup_free_ char *asked = gp_strv_join(names, " ");
	if (!s->offers_out || s->offers_at != c->effects_added ||
	    !gp_streq(s->offers_names, asked)) {
		_cleanup_strv_ char **argv = gp_dnf_offers_argv(names);
		struct gp_run_result res = { 0 };
		int rc = gp_ctx_run_query(c, argv, GP_DNF_CACHE_DIR, &res);
		if (rc < 0 || !gp_run_succeeded(&res)) {
			*error = rc < 0 ? gp_xstrdup(strerror(-rc))
			                : gp_run_describe(&res, c->cmd_timeout_ms);
			gp_run_result_free(&res);
			return -1;
		}
		free(s->offers_out);
		free(s->offers_names);
		s->offers_out = TAKE_PTR(res.output);
		s->offers_names = TAKE_PTR(asked);
		s->offers_at = c->effects_added;
		gp_run_result_free(&res);
	}
	for (size_t i = 0; i < n; i++)
		if (!gp_dnf_offers(s->offers_out, want[i].name, want[i].version)) {
			_cleanup_free_ char *nv = gp_xasprintf("%s-%s", want[i].name,
			                                       want[i].version);
			gp_strv_push(missing, nv);
		}
	return 0;
}

/* The packages installed now that were not before the install command
 * (an installed_now() list) and that it did not name: the dependencies apt
 * or dnf chose. */
static char **added_by_install(struct gp_ctx *c, char *const *names, char *const *before)
{
	char **added = gp_xcalloc(1, sizeof(char *));
	const struct gp_pkgdb *db;
	if (read_db_quiet(c, &db) < 0)
		return added;
	for (size_t i = 0; i < db->n; i++) {
		const struct gp_pkgdb_entry *e = &db->e[i];
		if (gp_streq(e->name, RPM_KEY_PACKAGE))
			push_new_aliases(db, e, before, &added);
		else if (!version_in(before, e->name) &&
		         !gp_strv_contains(names, e->name) &&
		         !named_by_alias(db, e, names))
			gp_strv_push(&added, e->name);
	}
	return added;
}

/* Records name at its version now; a package new to the records that was
 * installed before (in before) keeps that version as "installed_before". */
static void record_package(struct gp_ctx *c, const char *name, char *const *before)
{
	_cleanup_free_ char *have = NULL;
	if (gp_pkg_installed(c, name, &have) < 0 || !have)
		return;
	bool known = gp_journal_package(&c->journal, name) != NULL;
	gp_journal_record_package(&c->journal, name, have, gp_ctx_stage_name(c));
	if (!known)
		gp_journal_set_package_before(&c->journal, name,
		                              version_in(before, name));
}

/* After a real install: each package's version as the database has it
 * now, for verify's drift check (src/stages/drift.c), the packages the
 * command added besides them (dependencies apt or dnf chose), and what
 * was there before, for uninstall. A package of this stage's records that
 * is gone after its install (a conflict of another branch's) is forgotten:
 * the profile asked for that. */
static void record_installed(struct gp_ctx *c, char *const *names, char *const *before)
{
	if (c->mode != GP_MODE_APPLY)
		return;
	for (size_t i = 0; names[i]; i++)
		record_package(c, names[i], before);
	_cleanup_strv_ char **added = added_by_install(c, names, before);
	for (size_t i = 0; added[i]; i++)
		record_package(c, added[i], before);
	const cJSON *pkgs = gp_journal_packages(&c->journal);
	for (const cJSON *p = pkgs ? pkgs->child : NULL, *next; p; p = next) {
		next = p->next; /* p may go */
		_cleanup_free_ char *have = NULL;
		if (gp_streq(gp_json_string(p, "stage", NULL), gp_ctx_stage_name(c)) &&
		    gp_pkg_installed(c, p->string, &have) == 0 && !have)
			gp_journal_forget_package(&c->journal, p->string);
	}
}

/* set: the names gpuprov's command changed from not held to held
 * (uninstall releases those, not an operator's holds). */
static void record_holds(struct gp_ctx *c, const char *const *names, size_t n, bool hold,
                         char *const *set)
{
	for (size_t i = 0; c->mode == GP_MODE_APPLY && i < n; i++) {
		bool set_now = hold && gp_strv_contains(set, names[i]);
		_cleanup_free_ char *have = NULL;
		/* A package there before, which no install of gpuprov's changed:
		 * recorded now, so that uninstall releases the hold. */
		if (set_now && !gp_journal_package(&c->journal, names[i]) &&
		    gp_pkg_installed(c, names[i], &have) == 0 && have) {
			gp_journal_record_package(&c->journal, names[i], have,
			                          gp_ctx_stage_name(c));
			gp_journal_set_package_before(&c->journal, names[i], have);
		}
		gp_journal_record_hold(&c->journal, names[i], hold);
		if (set_now)
			gp_journal_record_hold_set(&c->journal, names[i]);
	}
}

/* Was dpkg interrupted (a run killed in the middle of an install)? Its
 * updates journal then has entries, and apt refuses every install and
 * removal until 'dpkg --configure -a' finished what was left. */
static bool dpkg_interrupted(struct gp_ctx *c)
{
	_cleanup_strv_ char **names = NULL;
	if (gp_root_list_dir(&c->root, "/var/lib/dpkg/updates", &names) < 0)
		return false;
	for (size_t i = 0; names[i]; i++)
		if (names[i][0] && !names[i][strspn(names[i], "0123456789")])
			return true;
	return false;
}

/* apt: finishes what an interrupted dpkg left, once a run, before the
 * run's first install or removal (and before db_before_run, so that a
 * failed upgrade puts back a configured set). */
static int finish_interrupted(struct gp_ctx *c, const struct gp_pkg_backend *b)
{
	struct gp_pkg_state *s = state(c);
	if (strcmp(b->name, "apt") != 0 || s->dpkg_finished || !dpkg_interrupted(c))
		return 0;
	s->dpkg_finished = true;
	char *const argv[] = {
		"dpkg", "--force-confdef", "--force-confold", "--configure", "-a", NULL
	};
	gp_log(c, "dpkg was interrupted: finishing what it left first");
	return run_pkg(c, b, gp_strv_copy(argv));
}

/* A package's journal record as it was before this run's first change, when
 * a removal of this run dropped it; dropped when the package is gone and
 * had none. */
static void restore_record(struct gp_ctx *c, const char *name)
{
	const cJSON *was = cJSON_GetObjectItemCaseSensitive(state(c)->journal_before_run,
	                                                    name);
	_cleanup_free_ char *have = NULL;
	if (gp_pkg_installed(c, name, &have) < 0 || !have) {
		gp_journal_forget_package(&c->journal, name);
		return;
	}
	if (!was || gp_journal_package(&c->journal, name))
		return;
	gp_journal_record_package(&c->journal, name, have,
	                          gp_json_string(was, "stage", gp_ctx_stage_name(c)));
	gp_journal_set_package_before(&c->journal, name,
	                              gp_json_string(was, "installed_before", NULL));
	gp_journal_record_hold(
	    &c->journal, name,
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(was, "held")));
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(was, "hold_set")))
		gp_journal_record_hold_set(&c->journal, name);
}

/* A real install that failed part-way (a package whose postinst failed)
 * leaves the NVIDIA set between two releases, and the packages of the
 * branch this run removed before it (the driver stage's upgrade) gone.
 * Puts back what this run found (db_before_run): the NVIDIA packages and
 * members of the failed transaction it added removed, every other one at
 * its previous exact version (apt allows the downgrade), the holds that were
 * there held again (the install's own released ones are held by its
 * caller: released), the journal's records as they were. This is the
 * plan's error path: no plan knows that a postinst will fail, so none shows
 * these commands; the journal and the run log have them. The install's
 * failure stays the error reported, saying what was put back. */
static void restore_before_run(struct gp_ctx *c, const struct gp_pkg_backend *b,
                               char *const *txn_names, char *const *released)
{
	struct gp_pkg_state *s = state(c);
	_cleanup_free_ char *why = gp_xstrdup(c->err->msg);
	int code = c->err->code;
	char *const *before = db_before_run(c);
	_cleanup_strv_ char **now = db_list(c);
	_cleanup_strv_ char **names = gp_xcalloc(1, sizeof(char *));
	_cleanup_strv_ char **versions = gp_xcalloc(1, sizeof(char *));
	_cleanup_strv_ char **added = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; before[i]; i++) {
		_cleanup_free_ char *name = gp_xstrndup(before[i],
		                                        strcspn(before[i], "="));
		const char *was = before[i] + strlen(name) + 1;
		if ((is_nvidia_driver_pkg(name) || gp_strv_contains(txn_names, name)) &&
		    !gp_streq(version_in(now, name), was)) {
			gp_strv_push(&names, name);
			gp_strv_push(&versions, was);
		}
	}
	/* A new package that failed to configure is in no "installed" list:
	 * each new member of the transaction is removed by name. */
	for (size_t i = 0; txn_names[i]; i++)
		if (!version_in(before, txn_names[i]))
			gp_strv_push(&added, txn_names[i]);
	for (size_t i = 0; now[i]; i++) {
		_cleanup_free_ char *name = gp_xstrndup(now[i], strcspn(now[i], "="));
		if (is_nvidia_driver_pkg(name) && !version_in(before, name) &&
		    !gp_strv_contains(added, name))
			gp_strv_push(&added, name);
	}
	size_t k = gp_strv_len(names);
	struct gp_pkg_want *w = gp_xcalloc(k + 1, sizeof *w);
	for (size_t i = 0; i < k; i++)
		w[i] = (struct gp_pkg_want){ names[i], versions[i] };
	gp_info(c->out,
	        "%s: the install failed; putting the packages back as this "
	        "run found them",
	        who(c));
	/* The added ones first: another branch's packages share file names
	 * with the ones put back (nvidia-smi), which dpkg will not overwrite. */
	int rc = added[0] ? run_pkg(c, b, b->remove(added)) : 0;
	if (rc == 0 && k)
		rc = run_pkg(c, b, b->install(w, k));
	free(w);
	_cleanup_strv_ char **hold = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; rc == 0 && s->held_before_run[i]; i++) {
		const char *name = s->held_before_run[i];
		_cleanup_free_ char *have = NULL;
		if (!gp_strv_contains(released, name) && !gp_pkg_is_held(c, name) &&
		    gp_pkg_installed(c, name, &have) == 0 && have)
			gp_strv_push(&hold, name);
	}
	if (rc == 0)
		rc = hold_names(c, b, hold, true);
	for (size_t i = 0; names[i]; i++)
		restore_record(c, names[i]);
	for (size_t i = 0; added[i]; i++)
		restore_record(c, added[i]);
	struct gp_buf back = { 0 };
	for (size_t i = 0; i < k; i++)
		gp_buf_printf(&back, "%s%s=%s", i ? ", " : "", names[i], versions[i]);
	_cleanup_free_ char *put_back = k ? gp_buf_steal(&back) : gp_xstrdup("none");
	_cleanup_free_ char *gone = added[0] ? gp_strv_join(added, ", ") : NULL;
	if (rc == 0)
		gp_fail(c->err, code,
		        "%s; gpuprov put the packages back as this run found them "
		        "(reinstalled at their previous versions: %s%s%s) and held "
		        "them as they were",
		        why, put_back, gone ? "; removed: " : "", gone ? gone : "");
	else
		gp_fail(c->err, code,
		        "%s; putting the packages back as this run found them failed "
		        "too (%s): see the run log, then run gpuprov install again",
		        why, c->err->msg);
}

int gp_effect_pkg_install(struct gp_ctx *c, const struct gp_pkg_want *want, size_t n)
{
	if (gp_ctx_door_open(c, "gp_effect_pkg_install") < 0)
		return -1;
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	const struct gp_pkg_backend *b = gp_pkg_backend_get(pm);
	/* What is not there yet. */
	bool *need = gp_xcalloc(n ? n : 1, sizeof(bool));
	ssize_t todo = wants_needed(c, want, n, need, true);
	if (todo <= 0) {
		free(need);
		return (int)todo;
	}
	if (finish_interrupted(c, b) < 0) {
		free(need);
		return -1;
	}
	db_before_run(c);
	bool deferred = pins_deferred(c, pm, want, need, n);
	bool unknown_adds = adds_unknown(want, need, n);
	int rc = refresh(c, b);
	struct txn t = { gp_xcalloc(1, sizeof(char *)), gp_xcalloc(1, sizeof(char *)) };
	size_t named = 0;
	_cleanup_free_ char *problem = NULL;
	if (rc == 0)
		rc = build_txn(c, pm, want, need, n, &t, &named, &problem);
	/* Refused before anything is released: after the refresh, the lists
	 * may no longer offer what the check saw. */
	if (rc == 0 && problem)
		rc = gp_fail(c->err, GP_EBLOCKED, "%s: %s; nothing was installed", who(c),
		             problem);
	for (size_t i = named; deferred && c->mode == GP_MODE_APPLY && t.names[i]; i++)
		gp_strv_push(&state(c)->deferred_adds, t.names[i]);
	_cleanup_free_ char *rule = rc == 0 && deferred
	                                ? deferred_install(c, b, want, need, n)
	                                : NULL;
	if (rc == 0 && deferred && !rule)
		rc = -1;
	char **held = rc == 0 ? held_for(c, &t) : gp_xcalloc(1, sizeof(char *));
	if (rc == 0)
		rc = hold_names(c, b, held, false);
	bool released = rc == 0;
	size_t k = gp_strv_len(t.names);
	struct gp_pkg_want *w = gp_xcalloc(k ? k : 1, sizeof *w);
	for (size_t i = 0; i < k; i++)
		w[i] = (struct gp_pkg_want){ t.names[i],
			                     *t.versions[i] ? t.versions[i] : NULL };
	bool in_rule = rc == 0 && rule && !c->rule_from; /* rules do not nest */
	if (in_rule) {
		gp_effect_rule_begin(c, "run", "%s", rule);
		state(c)->deferred = true;
	}
	_cleanup_strv_ char **before = installed_now(c);
	bool ran = rc == 0;
	if (rc == 0)
		rc = run_pkg(c, b, b->install(w, k));
	if (rc < 0 && ran && strstr(c->err->msg, "remove is disabled")) {
		_cleanup_free_ char *why = gp_xstrdup(c->err->msg);
		gp_fail(c->err, GP_EFAILED,
		        "%s; apt would have removed installed packages that the plan "
		        "does not list, and gpuprov never lets it (apt-get install "
		        "--no-remove): 'apt-get install -s' with the same packages "
		        "shows which; remove them yourself or change the profile, "
		        "then run gpuprov again",
		        why);
	}
	if (in_rule)
		gp_effect_rule_end(c);
	if (rc < 0 && ran && c->mode == GP_MODE_APPLY && !gp_run_stop_signal)
		restore_before_run(c, b, t.names, held);
	free(need);
	for (size_t i = 0; rc == 0 && i < k; i++)
		plan_install(c, w[i].name, w[i].version);
	if (rc == 0)
		record_installed(c, t.names, before);
	if (rc == 0 && unknown_adds) {
		state(c)->deferred = true;
		_cleanup_strv_ char **added = c->mode == GP_MODE_APPLY
		                                  ? added_by_install(c, t.names, before)
		                                  : gp_xcalloc(1, sizeof(char *));
		for (size_t i = 0; added[i]; i++)
			gp_strv_push(&state(c)->deferred_adds, added[i]);
	}
	/* Hold again even when the install failed: a released driver left for
	 * unattended-upgrades is how "Driver/library version mismatch" starts.
	 * If holding fails too, that is the error reported (gp_fail keeps the
	 * latest); the failed install's output is in the run log either way. */
	if (released && hold_names(c, b, held, true) < 0)
		rc = -1;
	else if (released)
		record_holds(c, (const char *const *)held, gp_strv_len(held), true, NULL);
	gp_strv_free(held);
	gp_strv_free(t.names);
	gp_strv_free(t.versions);
	free(w);
	return rc;
}

int gp_effect_pkg_hold(struct gp_ctx *c, const char *const *names, size_t n, bool hold)
{
	if (gp_ctx_door_open(c, "gp_effect_pkg_hold") < 0)
		return -1;
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	_cleanup_strv_ char **todo = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, names[i], &have) < 0)
			return -1;
		if (!have) {
			gp_log(c, "%s is not installed: not %s", names[i],
			       hold ? "held" : "released");
			continue;
		}
		if (gp_pkg_is_held(c, names[i]) != hold &&
		    !gp_strv_contains(todo, names[i]))
			gp_strv_push(&todo, names[i]);
	}
	const struct gp_pkg_backend *b = gp_pkg_backend_get(pm);
	struct gp_pkg_state *s = state(c);
	/* After an install recorded as a rule: the packages it added are known
	 * to the run only, so the hold is a rule too, naming the others (the
	 * ones a plan has). */
	_cleanup_strv_ char **known = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; hold && s->deferred && todo[i]; i++)
		if (!gp_strv_contains(s->deferred_adds, todo[i]))
			gp_strv_push(&known, todo[i]);
	if (!known[0] || c->rule_from) {
		int rc = hold_names(c, b, todo, hold);
		if (rc == 0)
			record_holds(c, names, n, hold, todo);
		return rc;
	}
	_cleanup_strv_ char **argv = b->hold(known, true);
	_cleanup_free_ char *shown = gp_argv_display(argv);
	gp_effect_rule_begin(c, "run",
	                     "%s, and every package the install above added as an "
	                     "exact dependency",
	                     shown);
	int rc = hold_names(c, b, todo, hold);
	gp_effect_rule_end(c);
	if (rc == 0)
		record_holds(c, names, n, hold, todo);
	return rc;
}

int gp_effect_pkg_remove(struct gp_ctx *c, const char *const *names, size_t n)
{
	if (gp_ctx_door_open(c, "gp_effect_pkg_remove") < 0)
		return -1;
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	if (finish_interrupted(c, gp_pkg_backend_get(pm)) < 0)
		return -1;
	db_before_run(c);
	_cleanup_strv_ char **todo = gp_xcalloc(1, sizeof(char *));
	_cleanup_strv_ char **held = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, names[i], &have) < 0)
			return -1;
		if (!have) {
			gp_log(c, "%s is not installed: not removed", names[i]);
			continue;
		}
		if (gp_strv_contains(todo, names[i]))
			continue;
		gp_strv_push(&todo, names[i]);
		if (gp_pkg_is_held(c, names[i]))
			gp_strv_push(&held, names[i]);
	}
	if (!todo[0])
		return 0;
	const struct gp_pkg_backend *b = gp_pkg_backend_get(pm);
	/* A held package is not removed by apt (nor dnf with versionlock):
	 * released first, in its own effect. */
	if (hold_names(c, b, held, false) < 0)
		return -1;
	record_holds(c, (const char *const *)held, gp_strv_len(held), false, NULL);
	/* dnf leaves rpm's key pseudo-packages alone, saying nothing: rpm
	 * itself erases those. */
	_cleanup_strv_ char **keys = gp_xcalloc(1, sizeof(char *));
	_cleanup_strv_ char **pkgs = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; todo[i]; i++)
		gp_strv_push(pm == GP_PKG_DNF &&
		                     gp_str_starts_with(todo[i], RPM_KEY_PACKAGE "-")
		                 ? &keys
		                 : &pkgs,
		             todo[i]);
	if (pkgs[0] && run_pkg(c, b, b->remove(pkgs)) < 0)
		return -1;
	if (keys[0] && run_pkg(c, b, gp_rpm_erase_argv(keys)) < 0)
		return -1;
	struct gp_pkg_state *s = state(c);
	for (size_t i = 0; todo[i]; i++) {
		if (c->mode == GP_MODE_PLAN) {
			ssize_t at = planned_index(s, todo[i]);
			if (at >= 0) {
				strv_remove_at(s->versions, (size_t)at);
				strv_remove_at(s->names, (size_t)at);
			}
			if (!gp_strv_contains(s->removed, todo[i]))
				gp_strv_push(&s->removed, todo[i]);
		} else {
			gp_journal_forget_package(&c->journal, todo[i]);
		}
	}
	return 0;
}

/* --- repositories ----------------------------------------------------------- */

char *gp_pkg_repo_problem(const struct gp_pkg_repo *repo)
{
	if (!repo->url)
		return gp_xasprintf("no URL for the repository %s (set "
		                    "distro.nvidia_repo or distro.repo_url)",
		                    repo->id);
	if (!repo->keyring_url)
		return gp_xasprintf("no keyring URL for the repository %s (set "
		                    "distro.keyring_url)",
		                    repo->id);
	if (!repo->keyring_sha256)
		return gp_xasprintf("no sha256 for the keyring %s (set "
		                    "distro.keyring_sha256): gpuprov downloads nothing "
		                    "it cannot verify",
		                    repo->keyring_url);
	if (!repo->fingerprint)
		return gp_xasprintf(
		    "no key fingerprint pinned for the repository %s (set "
		    "distro.keyring_fingerprint)",
		    repo->id);
	_cleanup_free_ char *f = gp_openpgp_normalize(repo->fingerprint);
	if (!f)
		return gp_xasprintf("the pinned key fingerprint '%s' is not 40 (or 64) "
		                    "hex digits",
		                    repo->fingerprint);
	return NULL;
}

/* The keyring path an existing repository file names, or NULL. */
static char *named_keyring(const char *text)
{
	static const char *const keys[] = { "signed-by=", "Signed-By: ",
		                            "gpgkey=file://" };
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		const char *p = strstr(text, keys[i]);
		if (p) {
			p += strlen(keys[i]);
			return gp_xstrndup(p, strcspn(p, " ]\n"));
		}
	}
	return NULL;
}

static bool keyring_has(struct gp_ctx *c, const char *path, const char *fpr)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	_cleanup_strv_ char **fprs = NULL;
	return gp_ctx_read(c, path, &data, &len) == 0 &&
	       gp_openpgp_fingerprints(data, len, &fprs) == 0 &&
	       gp_strv_contains(fprs, fpr);
}

/* Is the repository file there with this content and its keyring with the key? */
static bool repo_configured(struct gp_ctx *c, const struct gp_pkg_backend *b,
                            const struct gp_pkg_repo *repo, const char *fpr,
                            const char *pretty)
{
	_cleanup_free_ char *path = b->repo_path(repo);
	_cleanup_free_ char *text = NULL;
	if (gp_ctx_read(c, path, &text, NULL) < 0)
		return false;
	_cleanup_free_ char *kpath = named_keyring(text);
	if (!kpath)
		return false;
	_cleanup_free_ char *want = b->repo_text(repo, kpath, pretty);
	return strcmp(want, text) == 0 && keyring_has(c, kpath, fpr);
}

/* Checks a downloaded keyring (or keyring package) against the pin; sets
 * *kpath and *kdata to the keyring file to write (a package's own keyring
 * file: gpuprov writes it itself rather than dpkg -i, whose source list
 * the plan could not see and gpuprov would replace). */
static int check_keyring(struct gp_ctx *c, const struct gp_pkg_backend *b,
                         const struct gp_pkg_repo *repo, const char *fpr,
                         const char *data, size_t len, bool is_deb, char **kpath,
                         char **kdata, size_t *klen)
{
	if (is_deb) {
		const char *msg = NULL;
		if (gp_deb_keyring(data, len, kpath, kdata, klen, &msg) < 0)
			return gp_fail(c->err, GP_EFAILED,
			               "%s: the keyring package %s: %s; nothing was "
			               "written",
			               who(c), repo->keyring_url, msg);
	} else {
		*kpath = b->keyring_path(repo, memmem(data, len, "-----BEGIN PGP", 14));
		*kdata = gp_xmemdup0(data, len);
		*klen = len;
	}
	_cleanup_strv_ char **fprs = NULL;
	_cleanup_free_ char *pretty = gp_openpgp_pretty(fpr);
	if (gp_openpgp_fingerprints(*kdata, *klen, &fprs) < 0)
		return gp_fail(c->err, GP_EFAILED,
		               "%s: %s holds no readable OpenPGP public key; nothing "
		               "was written",
		               who(c), repo->keyring_url);
	if (!gp_strv_contains(fprs, fpr)) {
		_cleanup_free_ char *found = gp_strv_join(fprs, ", ");
		return gp_fail(c->err, GP_EFAILED,
		               "%s: the keyring %s (sha256 %s) holds key %s, not the "
		               "pinned %s; refusing the repository %s, nothing was "
		               "written. Check distro.keyring_fingerprint against the "
		               "vendor's published fingerprint",
		               who(c), repo->keyring_url, repo->keyring_sha256, found,
		               pretty, repo->id);
	}
	gp_log(c, "key %s found in %s", pretty, repo->keyring_url);
	return 0;
}

int gp_effect_pkg_add_repo(struct gp_ctx *c, const struct gp_pkg_repo *repo)
{
	if (gp_ctx_door_open(c, "gp_effect_pkg_add_repo") < 0)
		return -1;
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	_cleanup_free_ char *problem = gp_pkg_repo_problem(repo);
	if (problem)
		return gp_fail(c->err, GP_EFAILED, "%s: %s", who(c), problem);
	const struct gp_pkg_backend *b = gp_pkg_backend_get(pm);
	_cleanup_free_ char *fpr = gp_openpgp_normalize(repo->fingerprint);
	_cleanup_free_ char *pretty = gp_openpgp_pretty(fpr);
	_cleanup_free_ char *added = gp_xasprintf("%s %s", repo->id, fpr);
	if (gp_strv_contains(state(c)->repos, added) ||
	    repo_configured(c, b, repo, fpr, pretty)) {
		gp_log(c, "repository %s is configured with key %s", repo->id, pretty);
		return 0;
	}
	_cleanup_free_ char *base = gp_xstrndup(repo->keyring_url,
	                                        strcspn(repo->keyring_url, "?#"));
	bool is_deb = gp_str_ends_with(base, ".deb");
	if (is_deb && pm != GP_PKG_APT)
		return gp_fail(c->err, GP_EFAILED,
		               "%s: %s is a Debian package; dnf needs the key file "
		               "itself",
		               who(c), repo->keyring_url);
	_cleanup_free_ char *name = gp_xasprintf("key of repository %s", repo->id);
	const struct gp_fetch_artifact a = { .name = name,
		                             .url = repo->keyring_url,
		                             .sha256 = repo->keyring_sha256 };
	_cleanup_free_ char *cached = NULL, *data = NULL, *kpath = NULL, *kdata = NULL;
	size_t len = 0, klen = 0;
	if (gp_effect_download(c, &a, &cached) < 0)
		return -1;
	if (gp_root_read(&c->root, cached, &data, &len) == 0) {
		if (check_keyring(c, b, repo, fpr, data, len, is_deb, &kpath, &kdata,
		                  &klen) < 0)
			return -1;
	} else {
		/* A dry run before the download: the key is checked when it is.
		 * Only a .gpg name is taken for a binary keyring: vendors publish
		 * armored keys under other names too (NVIDIA's container
		 * toolkit "gpgkey"), and the run names the file by its content. */
		kpath = is_deb ? gp_xstrdup(GP_CUDA_KEYRING_PATH)
		               : b->keyring_path(repo, !gp_str_ends_with(base, ".gpg"));
		gp_log(c, "%s is not downloaded yet; key %s is checked once it is",
		       repo->keyring_url, pretty);
	}
	_cleanup_free_ char *path = b->repo_path(repo);
	bool had_list = gp_root_exists(&c->root, path);
	bool had_keyring = gp_root_exists(&c->root, kpath);
	/* A package's keyring is not pinned by its own sha256: planned by the
	 * package's URL and the file's name in it. */
	_cleanup_free_ char *source = is_deb ? gp_xasprintf("%s in %s", kpath,
	                                                    repo->keyring_url)
	                                     : gp_xstrdup(repo->keyring_url);
	int rc = gp_effect_write_download(c, kpath, kdata, klen, 0644, source,
	                                  is_deb ? NULL : repo->keyring_sha256);
	_cleanup_free_ char *text = b->repo_text(repo, kpath, pretty);
	if (rc == 0)
		rc = gp_effect_write(c, path, text, strlen(text), 0644);
	if (rc == 0) {
		struct gp_pkg_state *s = state(c);
		s->stale = true;
		gp_strv_push(&s->repos, added);
		if (c->mode == GP_MODE_APPLY) {
			if (!had_list)
				gp_strv_push(&s->fresh, path);
			if (!had_keyring)
				gp_strv_push(&s->fresh, kpath);
			free(s->fresh_repo);
			s->fresh_repo = gp_xstrdup(repo->id);
		}
	}
	return rc;
}

int gp_pkg_rdepends(struct gp_ctx *c, const char *const *names, char ***out)
{
	*out = gp_xcalloc(1, sizeof(char *));
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	/* rpm's Requires and Provides come as dpkg-shaped lists
	 * (gp_rpm_header_relations): the same closure, as dnf remove goes.
	 * A root without an rpm database (an older rpm's) names none. */
	if (pm == GP_PKG_DNF && !gp_root_exists(&c->root, GP_RPMDB_SQLITE))
		return 0;
	const struct gp_pkgdb *db;
	if (read_db(c, pm, &db) < 0)
		return -1;
	/* What this run already removed goes with names. */
	_cleanup_strv_ char **gone = gp_strv_copy(state(c)->removed);
	for (size_t i = 0; names[i]; i++)
		gp_strv_push(&gone, names[i]);
	_cleanup_strv_ char **all = gp_pkgdb_rdepends(db, (const char *const *)gone);
	for (size_t i = 0; all[i]; i++)
		if (!gp_strv_contains(state(c)->removed, all[i]))
			gp_strv_push(out, all[i]);
	return 0;
}
