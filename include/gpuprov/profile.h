/* Profiles: JSON files naming the stack to install. Loaded from a path or
 * by name through the search path; `extends` inherits from another profile
 * (objects merge key by key, everything else replaces). Errors name the
 * file, line and column. */
#pragma once

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "gpuprov/schema.h"
#include "gpuprov/util.h"

struct gp_profile {
	char *name; /* the profile's "name" */
	char *path; /* file it was loaded from */
	cJSON *doc; /* resolved (after extends) */
	char digest[65]; /* sha256 of the resolved document, printed unformatted */
};

/* The default search path: dir_override (may be NULL), /etc/gpuprov/profiles,
 * the installed share directory, the source tree's profiles/ (unless built
 * with an empty SRCDIR). */
char **gp_profile_search_path(const char *dir_override);

/* name_or_path: starts with '/', './' or '../', or ends in .json -> a file;
 * else a name ("distro/ubuntu2204") looked up as NAME.json in each search
 * directory. Exit code 65 on any error. */
int gp_profile_load(const char *name_or_path, char *const *search,
                    struct gp_profile **out, struct gp_err *err);
/* gp_profile_load of a file already read: text[len], NUL-terminated, named
 * path in messages (the fuzzer's way in; "extends" still reads files). */
int gp_profile_load_text(const char *path, const char *text, size_t len,
                         char *const *search, struct gp_profile **out,
                         struct gp_err *err);
void gp_profile_free(struct gp_profile *p);

/* A stage's settings: an object, or NULL when absent or false (disabled). */
const cJSON *gp_profile_stage(const struct gp_profile *p, const char *stage);
/* A string under the profile's "distro" object, or NULL. */
const char *gp_profile_distro_string(const struct gp_profile *p, const char *key);
/* The initramfs rebuild command (NULL-terminated argv, free it): the nouveau
 * stage's "initramfs" in cfg (its settings, may be NULL), else
 * distro.initramfs; NULL when neither names one. */
char **gp_profile_initramfs_command(const struct gp_profile *p, const cJSON *cfg);
/* A boolean under "distro", dflt when absent. */
bool gp_profile_distro_bool(const struct gp_profile *p, const char *key, bool dflt);
/* The architecture the profile is for: match.arch, else GP_ARCH_DEFAULT
 * (arch.h). The root's own (gp_root_arch) must equal it unless --force:
 * gp_profile_mismatch. URLs and package names derive from this one. */
const char *gp_profile_arch(const struct gp_profile *p);

/* Every key path the loader accepts, as JSON pointers ("/stages/driver/method"),
 * parents before their children; an "override" array's entries share the
 * paths of the single-object form ("/override/rule"). For tests that keep
 * docs/profile.schema.json in step. NULL-terminated; free with gp_strv_free. */
char **gp_profile_schema_keys(void);
/* Gives the loader the rows of a profile's "stages" object (one
 * GP_KEY_STAGE row per stage, ending in GP_KEY_END): the stage table's
 * gp_stages_profile_keys(). Called once before any profile is read (main(),
 * and each test that reads profiles); reading one before is an internal
 * error. */
void gp_profile_use_stage_keys(const struct gp_key *rows);
