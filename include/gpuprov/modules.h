/* Loaded modules of the target root (modules.c): <root>/proc/modules and
 * <root>/sys/module. Read under the root; nothing here prints or decides. */
#pragma once

#include <stdbool.h>

#include "gpuprov/root.h"

/* Tri-state for facts that may be unavailable (no /proc/modules in a
 * container or non-modular kernel): unknown is never "no". */
enum gp_tristate { GP_NO = 0, GP_YES = 1, GP_UNKNOWN = -1 };
const char *gp_tristate_name(enum gp_tristate t);

/* Loaded modules from <root>/proc/modules ("name size refcnt deps state addr").
 * A missing file is not an error: 0 with available=false and no names. */
struct gp_module_list {
	bool available; /* false when proc/modules is missing */
	char **names; /* NULL-terminated */
};
int gp_modules_read(const struct gp_root *r, struct gp_module_list *ml);
int gp_modules_parse(const char *text, struct gp_module_list *ml);
void gp_module_list_free(struct gp_module_list *ml);
/* Is module loaded? YES when proc/modules lists it or /sys/module/<name>
 * exists (also true of built-in code with parameters), NO when proc/modules
 * is readable and neither holds it, UNKNOWN otherwise. Names compare with '-'
 * and '_' equal, as the kernel does. */
enum gp_tristate gp_module_loaded(const struct gp_root *r, const char *name);
