/* Loaded kernel modules, read from <root>/proc/modules and <root>/sys/module.
 * libkmod's loaded-state calls hard-code the host's /proc and /sys, so under
 * --root we read the files ourselves. A missing proc/modules (container,
 * non-modular kernel, offline image) means "unknown", never "not loaded". */
#include <errno.h>
#include <string.h>

#include "gpuprov/modules.h"
#include "gpuprov/util.h"

const char *gp_tristate_name(enum gp_tristate t)
{
	switch (t) {
	case GP_NO:
		return "no";
	case GP_YES:
		return "yes";
	case GP_UNKNOWN:
		break;
	}
	return "unknown";
}

int gp_modules_parse(const char *text, struct gp_module_list *ml)
{
	*ml = (struct gp_module_list){ .available = true };
	ml->names = gp_xcalloc(1, sizeof(char *));
	size_t count = 0;

	/* "name size refcnt deps state addr": only the first field matters. */
	for (const char *s = text; *s;) {
		s += strspn(s, " \t");
		size_t n = strcspn(s, " \t\n");
		if (n > 0) {
			_cleanup_free_ char *name = gp_xstrndup(s, n);
			gp_strv_append(&ml->names, &count, name);
		}
		s += strcspn(s, "\n");
		if (*s)
			s++;
	}
	return 0;
}

int gp_modules_read(const struct gp_root *r, struct gp_module_list *ml)
{
	_cleanup_free_ char *text = NULL;
	int rc = gp_root_read_max(r, "/proc/modules", GP_ROOT_CONFIG_MAX, &text, NULL);
	if (rc == -ENOENT) {
		*ml = (struct gp_module_list){ .available = false };
		ml->names = gp_xcalloc(1, sizeof(char *));
		return 0;
	}
	if (rc < 0) {
		*ml = (struct gp_module_list){ 0 };
		return rc;
	}
	return gp_modules_parse(text, ml);
}

void gp_module_list_free(struct gp_module_list *ml)
{
	if (!ml)
		return;
	gp_strv_free(ml->names);
	*ml = (struct gp_module_list){ 0 };
}

/* The kernel treats '-' and '_' in module names alike and stores '_'. */
static char *normalize(const char *name)
{
	char *s = gp_xstrdup(name);
	for (char *p = s; *p; p++)
		if (*p == '-')
			*p = '_';
	return s;
}

static bool name_eq(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char ca = *a == '-' ? '_' : *a;
		char cb = *b == '-' ? '_' : *b;
		if (ca != cb)
			return false;
	}
	return *a == *b;
}

enum gp_tristate gp_module_loaded(const struct gp_root *r, const char *name)
{
	struct gp_module_list ml;
	bool available = false;

	if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return GP_UNKNOWN;

	if (gp_modules_read(r, &ml) == 0) {
		available = ml.available;
		for (size_t i = 0; ml.names[i]; i++) {
			if (name_eq(ml.names[i], name)) {
				gp_module_list_free(&ml);
				return GP_YES;
			}
		}
		gp_module_list_free(&ml);
	}

	/* /sys/module/<name> also exists for built-in code with parameters
	 * (nouveau built into the kernel is as loaded as it gets). The kernel
	 * names it with '_'; a fixture written with '-' is accepted as well. */
	_cleanup_free_ char *norm = normalize(name);
	_cleanup_free_ char *path = gp_xasprintf("/sys/module/%s", norm);
	if (gp_root_exists(r, path))
		return GP_YES;
	if (strcmp(norm, name) != 0) {
		_cleanup_free_ char *raw = gp_xasprintf("/sys/module/%s", name);
		if (gp_root_exists(r, raw))
			return GP_YES;
	}

	return available ? GP_NO : GP_UNKNOWN;
}
