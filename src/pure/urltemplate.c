/* Architecture placeholders in profile URLs (see urltemplate.h). */
#include <string.h>

#include "gpuprov/urltemplate.h"
#include "gpuprov/util.h"

static const char *const names[GP_URL_PLACEHOLDERS] = {
	[GP_URL_ARCH] = "arch",
	[GP_URL_NVIDIA_ARCH] = "nvidia_arch",
	[GP_URL_DEB_ARCH] = "deb_arch",
};

/* The placeholder "{name}" that starts at s, or -1. */
static int placeholder_at(const char *s, size_t *len)
{
	for (int i = 0; i < GP_URL_PLACEHOLDERS; i++) {
		size_t n = strlen(names[i]);
		if (s[0] == '{' && strncmp(s + 1, names[i], n) == 0 && s[n + 1] == '}') {
			*len = n + 2;
			return i;
		}
	}
	return -1;
}

char *gp_url_template_check(const char *s)
{
	for (const char *p = s; *p; p++) {
		size_t len;
		if (*p == '{' && placeholder_at(p, &len) >= 0) {
			p += len - 1;
			continue;
		}
		if (*p == '{' || *p == '}')
			return gp_xstrdup(
			    "has a '{' or '}' that is not one of the "
			    "placeholders {arch}, {nvidia_arch}, {deb_arch}");
	}
	return NULL;
}

char *gp_url_template_expand(const char *s, const char *const values[GP_URL_PLACEHOLDERS])
{
	struct gp_buf out = { 0 };
	bool any = false;
	for (const char *p = s; *p;) {
		size_t len;
		int i = *p == '{' ? placeholder_at(p, &len) : -1;
		if (i >= 0) {
			gp_buf_printf(&out, "%s", values[i]);
			p += len;
			any = true;
		} else {
			gp_buf_append(&out, p, 1);
			p++;
		}
	}
	if (!any) {
		gp_buf_free(&out);
		return NULL;
	}
	return gp_buf_steal(&out);
}
