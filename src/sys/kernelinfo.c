/* Small facts about the running kernel of the root: its boot id (did a
 * reboot happen since the journal was written?) and its release (which
 * /lib/modules/<kver> and which headers count), and its architecture. */
#include <string.h>
#include <sys/utsname.h>

#include "gpuprov/kernelinfo.h"
#include "gpuprov/util.h"

/* The file's content without surrounding whitespace; NULL when the file is
 * unreadable or blank, since callers only ever need "known" or "not known". */
static char *read_trimmed(const struct gp_root *r, const char *path)
{
	_cleanup_free_ char *text = NULL;
	if (gp_root_read_max(r, path, GP_ROOT_SMALL_MAX, &text, NULL) < 0)
		return NULL;

	static const char ws[] = " \t\r\n";
	const char *s = text + strspn(text, ws);
	size_t n = strlen(s);
	while (n > 0 && strchr(ws, s[n - 1]))
		n--;
	return n ? gp_xstrndup(s, n) : NULL;
}

char *gp_boot_id(const struct gp_root *r)
{
	return read_trimmed(r, "/proc/sys/kernel/random/boot_id");
}

char *gp_running_kernel(const struct gp_root *r)
{
	return read_trimmed(r, "/proc/sys/kernel/osrelease");
}

char *gp_root_arch(const struct gp_root *r)
{
	char *arch = read_trimmed(r, "/proc/sys/kernel/arch");
	struct utsname u;
	if (!arch && uname(&u) == 0)
		arch = gp_xstrdup(u.machine);
	/* A word, as uname -m gives it: the root's file is not trusted to be
	 * one, and messages print it. */
	size_t n = arch ? strlen(arch) : 0;
	if (arch &&
	    (n > 32 || strspn(arch, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                            "0123456789_-") != n)) {
		free(arch);
		arch = NULL;
	}
	return arch;
}

char **gp_installed_kernels(const struct gp_root *r)
{
	char **all = gp_xcalloc(1, sizeof(char *));
	_cleanup_strv_ char **mods = NULL, **boot = NULL;
	if (gp_root_list_dir(r, "/lib/modules", &mods) == 0)
		for (size_t i = 0; mods[i]; i++) {
			_cleanup_free_ char *p = gp_xasprintf("/boot/vmlinuz-%s",
			                                      mods[i]);
			/* A directory left by a removed kernel is not a kernel. */
			if (gp_root_exists(r, p))
				gp_strv_push(&all, mods[i]);
		}
	if (gp_root_list_dir(r, "/boot", &boot) == 0)
		for (size_t i = 0; boot[i]; i++)
			if (gp_str_starts_with(boot[i], "vmlinuz-") &&
			    !gp_strv_contains(all, boot[i] + 8))
				gp_strv_push(&all, boot[i] + 8);
	return all;
}
