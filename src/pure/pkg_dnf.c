/* dnf's commands and repository files (RHEL/Rocky 9). -y for every
 * transaction; versionlock needs python3-dnf-plugin-versionlock. The
 * repository file is written by gpuprov (not `dnf config-manager
 * --add-repo URL`, which would fetch it unverified) with gpgcheck=1 and the
 * key gpuprov checked. "name-version" lets dnf pick the newest release of
 * that version, as pkg.h promises for versions without a revision. */
#include "gpuprov/pkg_apt.h"
#include "gpuprov/pkgcmd.h"
#include "gpuprov/pkg_dnf.h"
#include "gpuprov/util.h"

static char **dnf_refresh(void)
{
	char *const argv[] = { "dnf", "-y", "-q", "makecache", NULL };
	return gp_strv_copy(argv);
}

static char **dnf_install(const struct gp_pkg_want *want, size_t n)
{
	char *const head[] = { "dnf", "-y", "-q", "install", NULL };
	char **argv = gp_strv_copy(head);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *s = gp_pkg_want_spec(&want[i], '-');
		gp_strv_push(&argv, s);
	}
	return argv;
}

static char **dnf_hold(char *const *names, bool hold)
{
	char *const head[] = { "dnf", "-y", "-q", "versionlock", hold ? "add" : "delete",
		               NULL };
	char **argv = gp_strv_copy(head);
	for (size_t i = 0; names && names[i]; i++)
		gp_strv_push(&argv, names[i]);
	return argv;
}

/* --noautoremove: exactly these, not what dnf thinks they left unneeded. */
static char **dnf_remove(char *const *names)
{
	char *const head[] = { "dnf", "-y", "-q", "remove", "--noautoremove", NULL };
	char **argv = gp_strv_copy(head);
	for (size_t i = 0; names && names[i]; i++)
		gp_strv_push(&argv, names[i]);
	return argv;
}

static char *dnf_repo_path(const struct gp_pkg_repo *repo)
{
	return gp_xasprintf("/etc/yum.repos.d/%s.repo", repo->id);
}

static char *dnf_repo_text(const struct gp_pkg_repo *repo, const char *keyring,
                           const char *fpr)
{
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, ": signed by key %s", fpr);
	gp_buf_printf(&b,
	              "[%s]\nname=%s\nbaseurl=%s\nenabled=1\ngpgcheck=1\n"
	              "gpgkey=file://%s\n",
	              repo->id, repo->id, repo->url, keyring);
	return gp_buf_steal(&b);
}

static char *dnf_keyring_path(const struct gp_pkg_repo *repo, bool armored)
{
	return gp_xasprintf("/etc/pki/rpm-gpg/RPM-GPG-KEY-%s", repo->id);
}

const struct gp_pkg_backend gp_pkg_dnf = {
	.name = "dnf",
	.lock_files = { "/var/lib/rpm/.rpm.lock", NULL },
	.refresh = dnf_refresh,
	.install = dnf_install,
	.hold = dnf_hold,
	.remove = dnf_remove,
	.repo_path = dnf_repo_path,
	.repo_text = dnf_repo_text,
	.keyring_path = dnf_keyring_path,
};
