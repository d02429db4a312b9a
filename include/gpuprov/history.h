/* `gpuprov history`: the journal's history entries (journal.h), newest
 * first, as text or JSON. */
#pragma once

#include <cjson/cJSON.h>

#include "gpuprov/output.h"

/* How an entry ended, as an id (completed, reboot_pending, failed,
 * interrupted, uninstalled). An entry without a result is "running" while run_in_progress (the lock is
 * held), else "interrupted" (the run was killed). */
const char *gp_history_result(const cJSON *entry, bool run_in_progress);

/* The JSON document ({"entries": [...]}, newest first), each entry with
 * "id", "current", "result", "verified", "started", "ended", "profile"
 * (name, sha256), the counts of its packages, holds and files, and the
 * whole record ("record": the resolved profile, versions, files...). */
cJSON *gp_history_to_json(const cJSON *history, const cJSON *current,
                          bool run_in_progress);
void gp_history_render(const cJSON *history, const cJSON *current, bool run_in_progress,
                       const struct gp_out *out);
