/* What the backends share (pkgcmd.h): the backend a package manager
 * selects, and a want as a command-line argument. */
#include "gpuprov/pkg_apt.h"
#include "gpuprov/pkg_dnf.h"
#include "gpuprov/pkgcmd.h"
#include "gpuprov/util.h"

const struct gp_pkg_backend *gp_pkg_backend_get(enum gp_pkg_manager pm)
{
	return pm == GP_PKG_DNF ? &gp_pkg_dnf : &gp_pkg_apt;
}

char *gp_pkg_want_spec(const struct gp_pkg_want *w, char sep)
{
	return w->version ? gp_xasprintf("%s%c%s", w->name, sep, w->version)
	                  : gp_xstrdup(w->name);
}

char **gp_pkgcmd_with_names(char *const *head, char *const *names)
{
	char **argv = gp_strv_copy(head);
	for (size_t i = 0; names && names[i]; i++)
		gp_strv_push(&argv, names[i]);
	return argv;
}
