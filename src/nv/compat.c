/* The compatibility preflight (see compat.h). */
#include <string.h>

#include "gpuprov/compat.h"
#include "gpuprov/util.h"

static const char *const rule_ids[] = {
	GP_RULE_DRIVER_CUDA, GP_RULE_GPU_CUDA,      GP_RULE_CUDNN_CUDA,
	GP_RULE_TORCH_DRIVER, GP_RULE_MODULE_FLAVOR,
};

bool gp_compat_rule_known(const char *id)
{
	for (size_t i = 0; i < ARRAY_SIZE(rule_ids); i++)
		if (strcmp(rule_ids[i], id) == 0)
			return true;
	return false;
}

/* TODO(nv): the rules themselves. */
void gp_compat_check(const cJSON *profile, struct gp_compat_report *rep)
{
	(void)profile;
	*rep = (struct gp_compat_report){ 0 };
}

size_t gp_compat_blocking(const struct gp_compat_report *rep)
{
	size_t n = 0;
	for (size_t i = 0; i < rep->n; i++)
		n += rep->issues[i].override == NULL;
	return n;
}

void gp_compat_report_free(struct gp_compat_report *rep)
{
	for (size_t i = 0; i < rep->n; i++) {
		free(rep->issues[i].message);
		free(rep->issues[i].override);
	}
	free(rep->issues);
	*rep = (struct gp_compat_report){ 0 };
}
