/* Reads the reboot signals other tools leave (rebootsig.h). */
#include <ctype.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuprov/osrelease.h"
#include "gpuprov/rebootsig.h"
#include "gpuprov/run.h"
#include "gpuprov/util.h"

/* RHEL and its rebuilds say so in ID or ID_LIKE (Rocky: "rhel centos fedora"). */
static bool rhel_family(const struct gp_root *r)
{
	struct gp_os_release osr = { 0 };
	bool yes = false;
	if (gp_os_release_read(r, &osr) == 0) {
		_cleanup_free_ char *ids = gp_xasprintf("%s %s", osr.id ? osr.id : "",
		                                        osr.id_like ? osr.id_like : "");
		_cleanup_strv_ char **v = gp_strv_split(ids, ' ');
		yes = gp_strv_contains(v, "rhel") || gp_strv_contains(v, "fedora");
	}
	gp_os_release_free(&osr);
	return yes;
}

/* One word of printable bytes: a package name, not someone's prose or
 * terminal escapes. */
static bool package_name(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isgraph((unsigned char)*s))
			return false;
	return true;
}

char **gp_reboot_pkgs_parse(const char *text, size_t len)
{
	char **names = NULL;
	if (memchr(text, '\0', len))
		return NULL; /* not text */
	_cleanup_strv_ char **lines = gp_strv_split(text, '\n');
	for (char **l = lines; l && *l; l++)
		if (package_name(*l) && !gp_strv_contains(names, *l))
			gp_strv_push(&names, *l);
	return names;
}

static void read_pkgs(struct gp_ctx *c, struct gp_reboot_signals *sig)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (gp_root_read_max(&c->root, GP_REBOOT_REQUIRED_PKGS, GP_REBOOT_PKGS_MAX, &text,
	                     &len) == 0)
		sig->pkgs = gp_reboot_pkgs_parse(text, len);
}

static void ask_dnf(struct gp_ctx *c, struct gp_reboot_signals *sig)
{
	struct stat st;
	if (!rhel_family(&c->root) || gp_root_stat(&c->root, "/usr/bin/dnf", &st) < 0 ||
	    !S_ISREG(st.st_mode))
		return;
	char *argv[] = { "/usr/bin/dnf", "needs-restarting", "-r", NULL };
	struct gp_run_result res = { 0 };
	sig->dnf_asked = true;
	sig->dnf_reboot = -1;
	if (gp_ctx_run_readonly(c, argv, &res) == 0 && !res.signal &&
	    (res.exit_code == 0 || res.exit_code == 1))
		sig->dnf_reboot = res.exit_code;
	if (res.output)
		sig->dnf_says = gp_output_excerpt(res.output, NULL, 4, 300);
	gp_run_result_free(&res);
}

void gp_reboot_signals_read(struct gp_ctx *c, struct gp_reboot_signals *sig)
{
	*sig = (struct gp_reboot_signals){ 0 };
	struct stat st;
	sig->flag = gp_root_stat(&c->root, GP_REBOOT_REQUIRED, &st) == 0 &&
	            S_ISREG(st.st_mode);
	read_pkgs(c, sig);
	ask_dnf(c, sig);
}

void gp_reboot_signals_free(struct gp_reboot_signals *sig)
{
	gp_strv_free(sig->pkgs);
	free(sig->dnf_says);
	*sig = (struct gp_reboot_signals){ 0 };
}
