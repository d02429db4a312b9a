/* dnf's commands and repository files (RHEL/Rocky 9). -y for every
 * transaction; versionlock needs python3-dnf-plugin-versionlock. The
 * repository file is written by gpuprov (not `dnf config-manager
 * --add-repo URL`, which would fetch it unverified) with gpgcheck=1 and the
 * key gpuprov checked. "name-version" lets dnf pick the newest release of
 * that version, as pkg.h promises for versions without a revision. */
#include <string.h>

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
	return gp_pkgcmd_with_names(head, names);
}

/* --noautoremove: exactly these, not what dnf thinks they left unneeded. */
static char **dnf_remove(char *const *names)
{
	char *const head[] = { "dnf", "-y", "-q", "remove", "--noautoremove", NULL };
	return gp_pkgcmd_with_names(head, names);
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

char **gp_dnf_offers_argv(char *const *names)
{
	/* -C: the repositories as dnf's cache has them (its last makecache),
	 * even expired, so that a plan downloads nothing; --available: an
	 * installed version no repository has any more does not count; the
	 * versionlock plugin off, as a lock hides every other version; the
	 * logs dnf insists on writing go to the scratch /tmp
	 * (gp_ctx_run_query). */
	char *const head[] = { "dnf",
		               "-q",
		               "-C",
		               "--setopt=logdir=/tmp",
		               "--disableplugin=versionlock",
		               "repoquery",
		               "--available",
		               "--showduplicates",
		               "--queryformat",
		               "%{name} %{evr} %{name}-%{version}-%{release}.%{arch}",
		               NULL };
	return gp_pkgcmd_with_names(head, names);
}

/* Is field (of len bytes) exactly s? */
static bool field_is(const char *field, size_t len, const char *s)
{
	return strlen(s) == len && strncmp(field, s, len) == 0;
}

bool gp_dnf_offers(const char *out, const char *name, const char *version)
{
	for (const char *line = out; line && *line;) {
		size_t len = strcspn(line, "\n");
		/* "NAME EVR NAME-VERSION-RELEASE.ARCH", exactly three fields (not
		 * a warning's words): the third is how an install-only package's
		 * one version is named (kernel-devel-...). */
		const char *f[4];
		size_t n[4], k = 0;
		for (const char *p = line; k < 4 && p < line + len; k++) {
			f[k] = p;
			n[k] = strcspn(p, " \r\n");
			if (p + n[k] > line + len)
				n[k] = (size_t)(line + len - p);
			p += n[k];
			while (p < line + len && (*p == ' ' || *p == '\r'))
				p++;
		}
		if (k == 3 && field_is(f[1], n[1], version) &&
		    (field_is(f[0], n[0], name) || field_is(f[2], n[2], name)))
			return true;
		line += len;
		if (*line)
			line++;
	}
	return false;
}

char **gp_rpm_erase_argv(char *const *names)
{
	char *const head[] = { "rpm", "-e", NULL };
	return gp_pkgcmd_with_names(head, names);
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
