/* The loaded NVIDIA kernel module, as <root>/proc/driver/nvidia/version
 * describes it: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05 ..."
 * (proprietary) or "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64
 * 555.58.02 ..." (open). The version is the first numeric token after
 * "Module" (skipping "for <arch>"). */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "gpuprov/nvproc.h"
#include "gpuprov/util.h"

int gp_nvidia_module_parse(const char *text, char **version, bool *open)
{
	*version = NULL;
	size_t line_len = strcspn(text, "\n");
	_cleanup_free_ char *line = gp_xstrndup(text, line_len);
	if (strncmp(line, "NVRM version:", 13) != 0)
		return -EINVAL;
	const char *mod = strstr(line, " Module");
	if (!mod)
		return -EINVAL;
	if (open)
		*open = strstr(line, " Open Kernel Module") != NULL;
	for (const char *s = mod + 7; *s;) {
		s += strspn(s, " \t");
		size_t n = strcspn(s, " \t");
		if (n > 0 && isdigit((unsigned char)s[0]) &&
		    strspn(s, "0123456789.") == n) {
			*version = gp_xstrndup(s, n);
			return 0;
		}
		s += n;
	}
	return -EINVAL;
}

int gp_nvidia_module_read(const struct gp_root *r, char **version, bool *open)
{
	*version = NULL;
	_cleanup_free_ char *text = NULL;
	int rc = gp_root_read(r, "/proc/driver/nvidia/version", &text, NULL);
	if (rc < 0)
		return rc;
	return gp_nvidia_module_parse(text, version, open);
}
