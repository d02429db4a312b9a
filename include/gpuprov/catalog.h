/* The profile catalogue (catalog.c): `profiles list|show|lint` and the
 * search path's names. Returns exit codes (exitcodes.h). */
#pragma once

#include <stdbool.h>

#include "gpuprov/engine.h"

/* `profiles list|show|lint`. show prints the file as written,
 * or with resolved the document after inheritance. lint loads each file and
 * runs the compatibility preflight on it, reporting every problem of every
 * file: exit 65 when a file does not load, else 4 when an issue blocks. */
int gp_engine_profiles_list(const struct gp_options *o, struct gp_out *out);
/* `profiles list --names`: the names of gp_catalog_names, one a line (a
 * JSON array of strings with --json). */
int gp_engine_profiles_names(const struct gp_options *o, struct gp_out *out);
int gp_engine_profiles_show(const struct gp_options *o, const char *name, bool resolved,
                            struct gp_out *out);
int gp_engine_profiles_lint(const struct gp_options *o, char *const *files,
                            struct gp_out *out);
/* The profile names the search path offers, sorted; a name in an earlier
 * directory hides the same name later. */
char **gp_catalog_names(char *const *search);
struct gp_profile;
/* Does the profile enable a stage? A distro base (distro/ubuntu2204) does
 * not: it is there to be extended, not installed. */
bool gp_catalog_enables_stage(const struct gp_profile *p);
/* What would block a stage of the profile on any fresh host because a pin
 * is missing (gpuprov downloads nothing it cannot verify): one "stage
 * NAME: why" per problem, empty when none. Free with gp_strv_free. */
char **gp_catalog_missing_pins(const struct gp_profile *p);
