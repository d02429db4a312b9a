/* TEMPORARY: replaced by the pkg branch's layer at merge; delete this file.
 *
 * A minimal stand-in for the package layer (include/gpuprov/pkg.h) so the
 * driver stage builds and its tests run on the driver branch. What it
 * assumes of the real layer, and what the driver stage relies on:
 * - gp_pkg_installed: apt reads <root>/var/lib/dpkg/status ("install ok
 *   installed" or "hold ok installed" stanzas); dnf reads the text file
 *   <root>/var/lib/rpm-stub/installed ("NAME VERSION" lines; the stub dnf
 *   command of the fixtures writes it) instead of the rpm database. Packages
 *   planned earlier in the run (dry-run) count as installed at the wanted
 *   version (or "candidate" when none was given).
 * - gp_pkg_is_held: apt: a "hold ok installed" status; dnf: the name in
 *   /etc/dnf/plugins/versionlock.list; planned holds count.
 * - gp_effect_pkg_install: wants already installed at a matching version
 *   (exact, or upstream part equal) are not effects; the rest go to one
 *   "apt-get install -y NAME=VERSION..." or "dnf install -y NAME-VERSION...",
 *   after one "apt-get update" / "dnf makecache" per process, through
 *   gp_effect_run. Held wants are not unheld (the stub apt-get ignores holds).
 * - gp_effect_pkg_hold: "apt-mark hold|unhold NAMES" / "dnf versionlock
 *   add|delete NAMES" for the names not already in that state.
 * - gp_effect_pkg_add_repo: writes the source list only (no keyring, no
 *   fingerprint check). */
#include <errno.h>
#include <string.h>

#include "gpuprov/context.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/json.h"
#include "gpuprov/nvdriver.h"
#include "gpuprov/pkg.h"

struct planned {
	char *name;
	char *version;
	bool held;
};
/* Planned state belongs to one dry-run pass (one plan): install's
 * preflight pass must not leak into the real pass. */
static struct planned *planned;
static size_t n_planned;
static const struct gp_plan *planned_for;
static bool refreshed_real;
static const struct gp_plan *refreshed_dry;

static void planned_reset(struct gp_ctx *c)
{
	if (planned_for == c->plan)
		return;
	for (size_t i = 0; i < n_planned; i++) {
		free(planned[i].name);
		free(planned[i].version);
	}
	free(planned);
	planned = NULL;
	n_planned = 0;
	planned_for = c->plan;
}

static struct planned *find_planned(const char *name)
{
	for (size_t i = 0; i < n_planned; i++)
		if (strcmp(planned[i].name, name) == 0)
			return &planned[i];
	return NULL;
}

static struct planned *plan_pkg(const char *name)
{
	struct planned *p = find_planned(name);
	if (p)
		return p;
	planned = gp_xrealloc(planned, (n_planned + 1) * sizeof(*planned));
	planned[n_planned] = (struct planned){ .name = gp_xstrdup(name) };
	return &planned[n_planned++];
}

int gp_pkg_manager(struct gp_ctx *c, enum gp_pkg_manager *pm)
{
	const cJSON *distro = cJSON_GetObjectItemCaseSensitive(c->profile->doc, "distro");
	const char *m = gp_json_string(distro, "package_manager", NULL);
	if (gp_streq(m, "apt") || gp_streq(m, "dnf")) {
		*pm = strcmp(m, "apt") == 0 ? GP_PKG_APT : GP_PKG_DNF;
		return 0;
	}
	return gp_fail(c->err, GP_EXIT_INVALID_INPUT,
	               "%s: set \"distro\": {\"package_manager\": \"apt\" or \"dnf\"}",
	               c->profile->path);
}

/* From dpkg's status: the version of name and whether it is held. */
static void dpkg_status(const char *text, const char *name, char **version, bool *held)
{
	const char *p = text;
	while (p && *p) {
		const char *end = strstr(p, "\n\n");
		size_t len = end ? (size_t)(end - p) : strlen(p);
		_cleanup_free_ char *st = gp_xstrndup(p, len);
		char pkg[256] = "", status[128] = "", ver[256] = "";
		for (char *line = strtok(st, "\n"); line; line = strtok(NULL, "\n")) {
			if (sscanf(line, "Package: %255s", pkg) == 1)
				continue;
			if (gp_str_starts_with(line, "Status: "))
				snprintf(status, sizeof status, "%s", line + 8);
			sscanf(line, "Version: %255s", ver);
		}
		if (strcmp(pkg, name) == 0 && gp_str_ends_with(status, "ok installed")) {
			*version = gp_xstrdup(ver);
			*held = gp_str_starts_with(status, "hold");
			return;
		}
		p = end ? end + 2 : NULL;
	}
}

static void rpm_stub(const char *text, const char *name, char **version)
{
	for (const char *p = text; p && *p;) {
		char n[256], v[256];
		if (sscanf(p, "%255s %255s", n, v) == 2 && strcmp(n, name) == 0) {
			free(*version);
			*version = gp_xstrdup(v);
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
}

static int lookup(struct gp_ctx *c, const char *name, char **version, bool *held)
{
	*version = NULL;
	*held = false;
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	_cleanup_free_ char *text = NULL;
	int rc = gp_root_read(&c->root,
	                      pm == GP_PKG_APT ? "/var/lib/dpkg/status"
	                                       : "/var/lib/rpm-stub/installed",
	                      &text, NULL);
	if (rc < 0 && rc != -ENOENT)
		return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
		               "cannot read the package database under %s: %s",
		               c->root.dir, strerror(-rc));
	if (text && pm == GP_PKG_APT) {
		dpkg_status(text, name, version, held);
	} else if (text) {
		rpm_stub(text, name, version);
		_cleanup_free_ char *locks = NULL;
		if (gp_root_read(&c->root, "/etc/dnf/plugins/versionlock.list", &locks,
		                 NULL) == 0)
			for (char *l = strtok(locks, "\n"); l; l = strtok(NULL, "\n"))
				*held |= strcmp(l, name) == 0;
	}
	planned_reset(c);
	const struct planned *p = c->dry_run ? find_planned(name) : NULL;
	if (p && p->version) {
		free(*version);
		*version = gp_xstrdup(p->version);
	}
	if (p && p->held)
		*held = true;
	return 0;
}

int gp_pkg_installed(struct gp_ctx *c, const char *name, char **version)
{
	bool held;
	return lookup(c, name, version, &held);
}

bool gp_pkg_is_held(struct gp_ctx *c, const char *name)
{
	_cleanup_free_ char *v = NULL;
	bool held = false;
	return lookup(c, name, &v, &held) == 0 && held;
}

int gp_effect_pkg_add_repo(struct gp_ctx *c, const struct gp_pkg_repo *repo)
{
	_cleanup_free_ char *path = gp_xasprintf("/etc/apt/sources.list.d/%s.list",
	                                         repo->id);
	_cleanup_free_ char *line = gp_xasprintf(
	    "deb [signed-by=/usr/share/keyrings/%s.gpg] %s %s%s%s\n", repo->id, repo->url,
	    repo->suite, repo->components ? " " : "",
	    repo->components ? repo->components : "");
	return gp_effect_write(c, path, line, strlen(line), 0644);
}

static bool satisfied(struct gp_ctx *c, const struct gp_pkg_want *w)
{
	_cleanup_free_ char *have = NULL;
	if (gp_pkg_installed(c, w->name, &have) < 0 || !have)
		return false;
	if (!w->version)
		return true;
	_cleanup_free_ char *up = gp_pkg_upstream_version(have);
	return strcmp(have, w->version) == 0 || strcmp(up, w->version) == 0;
}

int gp_effect_pkg_install(struct gp_ctx *c, const struct gp_pkg_want *want, size_t n)
{
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	_cleanup_strv_ char **argv = gp_xcalloc(1, sizeof(char *));
	gp_strv_push(&argv, pm == GP_PKG_APT ? "apt-get" : "dnf");
	gp_strv_push(&argv, "install");
	gp_strv_push(&argv, "-y");
	size_t todo = 0;
	for (size_t i = 0; i < n; i++) {
		if (satisfied(c, &want[i]))
			continue;
		_cleanup_free_ char *arg = want[i].version
		                               ? gp_xasprintf("%s%s%s", want[i].name,
		                                              pm == GP_PKG_APT ? "="
		                                                               : "-",
		                                              want[i].version)
		                               : gp_xstrdup(want[i].name);
		gp_strv_push(&argv, arg);
		todo++;
	}
	if (!todo)
		return 0;
	if (c->dry_run ? refreshed_dry != c->plan : !refreshed_real) {
		char *up_apt[] = { "apt-get", "update", NULL };
		char *up_dnf[] = { "dnf", "makecache", NULL };
		if (gp_effect_run(c, pm == GP_PKG_APT ? up_apt : up_dnf) < 0)
			return -1;
		if (c->dry_run)
			refreshed_dry = c->plan;
		else
			refreshed_real = true;
	}
	if (gp_effect_run(c, argv) < 0)
		return -1;
	if (c->dry_run)
		for (size_t i = 0; i < n; i++) {
			struct planned *p = plan_pkg(want[i].name);
			free(p->version);
			p->version = gp_xstrdup(want[i].version ? want[i].version
			                                        : "candidate");
		}
	return 0;
}

int gp_effect_pkg_hold(struct gp_ctx *c, const char *const *names, size_t n, bool hold)
{
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	_cleanup_strv_ char **argv = gp_xcalloc(1, sizeof(char *));
	if (pm == GP_PKG_APT) {
		gp_strv_push(&argv, "apt-mark");
		gp_strv_push(&argv, hold ? "hold" : "unhold");
	} else {
		gp_strv_push(&argv, "dnf");
		gp_strv_push(&argv, "versionlock");
		gp_strv_push(&argv, hold ? "add" : "delete");
	}
	size_t todo = 0;
	for (size_t i = 0; i < n; i++) {
		if (gp_pkg_is_held(c, names[i]) == hold)
			continue;
		gp_strv_push(&argv, names[i]);
		todo++;
	}
	if (!todo)
		return 0;
	if (gp_effect_run(c, argv) < 0)
		return -1;
	if (c->dry_run)
		for (size_t i = 0; i < n; i++)
			plan_pkg(names[i])->held = hold;
	return 0;
}
