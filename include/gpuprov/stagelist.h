/* `gpuprov stages` (src/stagelist.c): the stage table as the operator and
 * the tests read it. */
#pragma once

#include "gpuprov/output.h"

/* Lists the stages in run order: name, summary, order, the profile keys
 * (name and type) and the other stages whose settings each reads. With
 * out->json one document, each key also with its JSON Schema (`make
 * schema-json` builds docs/profile.schema.json's stages from it). */
int gp_stagelist_print(struct gp_out *out);
/* "nouveau, driver, ..., env": the stage names in run order, allocated. */
char *gp_stagelist_names(const char *sep);
