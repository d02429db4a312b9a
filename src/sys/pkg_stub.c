/* TEMPORARY: replaced by the pkg branch at merge; delete this file.
 *
 * A minimal stand-in for the package layer (pkg.h) so that the pytorch stage
 * (which installs python3-venv through gp_effect_pkg_install) links and can
 * be tested on this branch. Only what that stage needs does anything:
 * - gp_pkg_manager: the profile's distro.package_manager;
 * - gp_pkg_installed: apt only, from <root>/var/lib/dpkg/status
 *   ("Status: install ok installed"); planned installs are not seen; dnf
 *   reports nothing installed;
 * - gp_effect_pkg_install: wants already installed (any version when the
 *   want has none, else that exact version) are not effects; the rest go
 *   into one `apt-get install -y --no-install-recommends NAME[=VERSION]...`
 *   or `dnf install -y NAME[-VERSION]...` through gp_effect_run; no metadata
 *   refresh, no lock wait, no hold handling;
 * - gp_pkg_is_held: false; gp_effect_pkg_add_repo and gp_effect_pkg_hold
 *   fail as not implemented. */
#include <string.h>

#include "gpuprov/context.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/pkg.h"

int gp_pkg_manager(struct gp_ctx *c, enum gp_pkg_manager *pm)
{
	const char *name = gp_profile_distro_string(c->profile, "package_manager");
	if (gp_streq(name, "apt"))
		*pm = GP_PKG_APT;
	else if (gp_streq(name, "dnf"))
		*pm = GP_PKG_DNF;
	else
		return gp_fail(c->err, GP_EXIT_BLOCKED,
		               "the profile names no distro.package_manager");
	return 0;
}

/* Version of name in a dpkg status file, or NULL. */
static char *dpkg_version(const char *status, const char *name)
{
	_cleanup_strv_ char **lines = gp_strv_split(status, '\n');
	bool mine = false, installed = false;
	const char *version = NULL;
	for (size_t i = 0;; i++) {
		const char *l = lines[i];
		if (!l || gp_str_starts_with(l, "Package: ")) {
			if (mine && installed && version)
				return gp_xstrdup(version);
			if (!l)
				return NULL;
			mine = strcmp(l + 9, name) == 0;
			installed = false;
			version = NULL;
		} else if (gp_str_starts_with(l, "Status: "))
			installed = gp_str_ends_with(l, " installed") &&
			            !gp_str_ends_with(l, " not-installed");
		else if (gp_str_starts_with(l, "Version: "))
			version = l + 9;
	}
}

int gp_pkg_installed(struct gp_ctx *c, const char *name, char **version)
{
	*version = NULL;
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	if (pm != GP_PKG_APT)
		return 0;
	_cleanup_free_ char *status = NULL;
	if (gp_root_read(&c->root, "/var/lib/dpkg/status", &status, NULL) < 0)
		return 0;
	*version = dpkg_version(status, name);
	return 0;
}

bool gp_pkg_is_held(struct gp_ctx *c, const char *name)
{
	return false;
}

int gp_effect_pkg_add_repo(struct gp_ctx *c, const struct gp_pkg_repo *repo)
{
	return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
	               "package repositories are not implemented in this build");
}

int gp_effect_pkg_install(struct gp_ctx *c, const struct gp_pkg_want *want, size_t n)
{
	enum gp_pkg_manager pm;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	char **argv = gp_xcalloc(1, sizeof(char *));
	if (pm == GP_PKG_APT) {
		gp_strv_push(&argv, "apt-get");
		gp_strv_push(&argv, "install");
		gp_strv_push(&argv, "-y");
		gp_strv_push(&argv, "--no-install-recommends");
	} else {
		gp_strv_push(&argv, "dnf");
		gp_strv_push(&argv, "install");
		gp_strv_push(&argv, "-y");
	}
	size_t fixed = gp_strv_len(argv);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, want[i].name, &have) < 0) {
			gp_strv_free(argv);
			return -1;
		}
		if (have && (!want[i].version || strcmp(have, want[i].version) == 0))
			continue;
		_cleanup_free_ char *arg = want[i].version
		                               ? gp_xasprintf("%s%s%s", want[i].name,
		                                              pm == GP_PKG_APT ? "="
		                                                               : "-",
		                                              want[i].version)
		                               : gp_xstrdup(want[i].name);
		gp_strv_push(&argv, arg);
	}
	int rc = gp_strv_len(argv) > fixed ? gp_effect_run(c, argv) : 0;
	gp_strv_free(argv);
	return rc;
}

int gp_effect_pkg_hold(struct gp_ctx *c, const char *const *names, size_t n, bool hold)
{
	return gp_fail(c->err, GP_EXIT_APPLY_FAILED,
	               "package holds are not implemented in this build");
}
