/* The compatibility preflight: the whole tuple a profile pins (driver,
 * CUDA, cuDNN, PyTorch wheel, module flavour, the GPUs it matches) checked
 * before anything touches a host. Each rule has a stable id that an
 * explicit profile override can name. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* Rule ids. */
#define GP_RULE_DRIVER_CUDA "driver-cuda" /* driver >= CUDA toolkit's minimum */
#define GP_RULE_GPU_CUDA "gpu-cuda" /* CUDA can target every matched GPU */
#define GP_RULE_CUDNN_CUDA "cudnn-cuda" /* cuDNN built for the toolkit's major */
#define GP_RULE_TORCH_DRIVER "torch-driver" /* wheel's CUDA tag runs on the driver */
#define GP_RULE_MODULE_FLAVOR "module-flavor" /* open/proprietary vs GPU generation */
#define GP_RULE_DRIVER_GPU "driver-gpu" /* the branch still supports every matched GPU */

struct gp_compat_issue {
	const char *rule; /* one of the ids above */
	char *message; /* names both sides and the fix */
	char *override; /* the profile's reason when overridden, else NULL */
};

struct gp_compat_report {
	struct gp_compat_issue *issues;
	size_t n;
};

/* Checks a resolved profile document. GPUs are the profile's match.gpus
 * ("10de:20b0"); unknown ids are skipped by the GPU rules. A rule runs only
 * when both of its sides are set (a stage set to false or a missing key
 * skips it). Issues come in the order of the ids above, then of match.gpus.
 * Overrides from the profile's "override" (one {"rule", "reason"} object or
 * an array of them) are applied: the issue is kept, with the reason. */
void gp_compat_check(const cJSON *profile, struct gp_compat_report *rep);
/* The profile's reason for overriding rule, or NULL (stages that check the
 * same rule against the live host honour it too). */
const char *gp_compat_override(const cJSON *profile, const char *rule);
/* Issues not overridden. */
size_t gp_compat_blocking(const struct gp_compat_report *rep);
void gp_compat_report_free(struct gp_compat_report *rep);
/* The warning for a profile whose driver branch is past its end of life on
 * today (docs/reference/stack-2026.md section 3): the branch, its end, and
 * the supported long-term branch to move to (one that ships the module
 * flavor the profile or its GPUs need and drives every matched GPU). NULL
 * when the branch is supported, unknown, or no driver is pinned. Lint prints
 * it, verify reports it as the warning driver.branch_eol. */
struct gp_date;
char *gp_compat_branch_eol(const cJSON *profile, const struct gp_date *today);
/* Is id one of the rule ids (for validating "override")? */
bool gp_compat_rule_known(const char *id);
