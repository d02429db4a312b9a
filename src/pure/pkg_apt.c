/* apt's commands and source files. Always non-interactive: -y, -q,
 * DEBIAN_FRONTEND=noninteractive (the runner's environment), and dpkg keeps
 * a changed configuration file without asking (--force-confdef,
 * --force-confold). --no-install-recommends keeps the transaction to what
 * was asked for; --allow-downgrades lets a profile pin an older version;
 * --no-remove makes apt stop rather than remove an installed package the
 * plan does not list (a conflict it would resolve by removing): gpuprov
 * removes only by its own planned remove. */
#include <string.h>

#include "gpuprov/pkg_apt.h"
#include "gpuprov/pkgcmd.h"
#include "gpuprov/pkg_dnf.h"
#include "gpuprov/util.h"

static char **apt_refresh(void)
{
	char *const argv[] = { "apt-get", "-q", "-y", "update", NULL };
	return gp_strv_copy(argv);
}

static char **apt_install(const struct gp_pkg_want *want, size_t n)
{
	char *const head[] = { "apt-get",
		               "-y",
		               "-q",
		               "-o",
		               "Dpkg::Options::=--force-confdef",
		               "-o",
		               "Dpkg::Options::=--force-confold",
		               "install",
		               "--no-install-recommends",
		               "--allow-downgrades",
		               "--no-remove",
		               NULL };
	char **argv = gp_strv_copy(head);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *s = gp_pkg_want_spec(&want[i], '=');
		gp_strv_push(&argv, s);
	}
	return argv;
}

static char **apt_hold(char *const *names, bool hold)
{
	char *const head[] = { "apt-mark", hold ? "hold" : "unhold", NULL };
	return gp_pkgcmd_with_names(head, names);
}

/* purge: the package's configuration files go too, as they came with it;
 * exact names only, so apt removes nothing else the operator has. */
static char **apt_remove(char *const *names)
{
	char *const head[] = { "apt-get", "-y", "-q", "remove", "--purge", NULL };
	return gp_pkgcmd_with_names(head, names);
}

static char *apt_repo_path(const struct gp_pkg_repo *repo)
{
	return gp_xasprintf("/etc/apt/sources.list.d/%s.%s", repo->id,
	                    repo->deb822 ? "sources" : "list");
}

/* One-line form ("deb [signed-by=K] URL SUITE [COMPONENTS]"), or the deb822
 * stanza apt 3 expects (sources.list(5), "DEB822-STYLE FORMAT"); a flat
 * repository has no Components field there. */
static char *apt_repo_text(const struct gp_pkg_repo *repo, const char *keyring,
                           const char *fpr)
{
	const char *suite = repo->suite ? repo->suite : "/";
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, ": repository %s, signed by key %s", repo->id, fpr);
	if (repo->deb822) {
		gp_buf_printf(&b, "Types: deb\nURIs: %s\nSuites: %s\n", repo->url, suite);
		if (repo->components)
			gp_buf_printf(&b, "Components: %s\n", repo->components);
		gp_buf_printf(&b, "Signed-By: %s\n", keyring);
		return gp_buf_steal(&b);
	}
	gp_buf_printf(&b, "deb [signed-by=%s] %s %s%s%s\n", keyring, repo->url, suite,
	              repo->components ? " " : "",
	              repo->components ? repo->components : "");
	return gp_buf_steal(&b);
}

static char *apt_keyring_path(const struct gp_pkg_repo *repo, bool armored)
{
	return gp_xasprintf("/usr/share/keyrings/%s-keyring.%s", repo->id,
	                    armored ? "asc" : "gpg");
}

const struct gp_pkg_backend gp_pkg_apt = {
	.name = "apt",
	.lock_files = { "/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock", NULL },
	.refresh = apt_refresh,
	.install = apt_install,
	.hold = apt_hold,
	.remove = apt_remove,
	.repo_path = apt_repo_path,
	.repo_text = apt_repo_text,
	.keyring_path = apt_keyring_path,
};
