/* The GPU settings an uninstall gives back to the GPUs' defaults
 * (nvreset.h). The NVML functions are looked up, never assumed: a library
 * without one says so in the reset's line. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gpuprov/nvprobe.h"
#include "gpuprov/nvreset.h"
#include "gpuprov/util.h"

#define NVML_FUNCTION_NOT_FOUND 13
#define NVML_COMPUTEMODE_DEFAULT 0

typedef const char *nvmlErrorString_t(int);
typedef int nvmlDeviceGetPowerManagementDefaultLimit_t(void *, unsigned *);
typedef int nvmlDeviceSetPowerManagementLimit_t(void *, unsigned);
typedef int nvmlDeviceResetGpuLockedClocks_t(void *);
typedef int nvmlDeviceResetApplicationsClocks_t(void *);
typedef int nvmlDeviceSetComputeMode_t(void *, int);
#define SYM(h, name) ((name##_t *)dlsym((h), #name))

/* The words' names, in gp_gpu_reset_words' order. */
#define WORD_POWER "power_limit_w"
#define WORD_LOCKED "locked_gpu_clocks_mhz"
#define WORD_APP "application_clocks_mhz"
#define WORD_COMPUTE "compute_mode"

bool gp_gpu_reset_any(const struct gp_gpu_reset *r)
{
	return r->power_limit || r->locked_clocks || r->app_clocks || r->compute_mode;
}

int gp_gpu_reset_parse(char *const *words, size_t n, struct gp_gpu_reset *r,
                       struct gp_err *err)
{
	*r = (struct gp_gpu_reset){ 0 };
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(words[i], '=');
		size_t klen = eq ? (size_t)(eq - words[i]) : 0;
#define IS(k) (klen == strlen(k) && strncmp(words[i], k, klen) == 0)
		bool *what = !eq                ? NULL
		             : IS(WORD_POWER)   ? &r->power_limit
		             : IS(WORD_LOCKED)  ? &r->locked_clocks
		             : IS(WORD_APP)     ? &r->app_clocks
		             : IS(WORD_COMPUTE) ? &r->compute_mode
		                                : NULL;
#undef IS
		if (!what || strcmp(eq + 1, "default") != 0)
			return gp_fail(err, GP_EINPUT,
			               "setting %zu ('%.64s') is not one of " WORD_POWER
			               "=default, " WORD_LOCKED "=default, " WORD_APP
			               "=default, " WORD_COMPUTE "=default",
			               i + 1, words[i]);
		*what = true;
	}
	return 0;
}

char **gp_gpu_reset_words(const struct gp_gpu_reset *r)
{
	char **v = gp_xcalloc(1, sizeof(char *));
	if (r->power_limit)
		gp_strv_push(&v, WORD_POWER "=default");
	if (r->locked_clocks)
		gp_strv_push(&v, WORD_LOCKED "=default");
	if (r->app_clocks)
		gp_strv_push(&v, WORD_APP "=default");
	if (r->compute_mode)
		gp_strv_push(&v, WORD_COMPUTE "=default");
	return v;
}

static void said(void *h, int fd, unsigned i, int rc, const char *what)
{
	nvmlErrorString_t *errstr = SYM(h, nvmlErrorString);
	const char *word = errstr ? errstr(rc) : NULL;
	gp_nvchild_put(fd, "set %u %s %s: %s", i, rc == 0 ? "ok" : "failed", what,
	               word                            ? word
	               : rc == NVML_FUNCTION_NOT_FOUND ? "the library lacks the function"
	                                               : "unknown error");
}

void gp_nvreset_gpu(void *h, int fd, unsigned i, void *dev, const struct gp_gpu_reset *r)
{
	if (r->power_limit) {
		nvmlDeviceGetPowerManagementDefaultLimit_t *def = SYM(
		    h, nvmlDeviceGetPowerManagementDefaultLimit);
		nvmlDeviceSetPowerManagementLimit_t *set = SYM(
		    h, nvmlDeviceSetPowerManagementLimit);
		unsigned mw = 0;
		int rc = def && set ? def(dev, &mw) : NVML_FUNCTION_NOT_FOUND;
		if (rc != 0)
			said(h, fd, i, rc, "power limit back to the default limit");
		else {
			char what[96];
			snprintf(what, sizeof what,
			         "power limit back to the default %u W", mw / 1000);
			said(h, fd, i, set(dev, mw), what);
		}
	}
	nvmlDeviceResetGpuLockedClocks_t *lgc = SYM(h, nvmlDeviceResetGpuLockedClocks);
	if (r->locked_clocks)
		said(h, fd, i, lgc ? lgc(dev) : NVML_FUNCTION_NOT_FOUND,
		     "locked GPU clocks reset");
	nvmlDeviceResetApplicationsClocks_t *ac = SYM(h,
	                                              nvmlDeviceResetApplicationsClocks);
	if (r->app_clocks)
		said(h, fd, i, ac ? ac(dev) : NVML_FUNCTION_NOT_FOUND,
		     "application clocks reset to the default");
	nvmlDeviceSetComputeMode_t *cm = SYM(h, nvmlDeviceSetComputeMode);
	if (r->compute_mode)
		said(h, fd, i,
		     cm ? cm(dev, NVML_COMPUTEMODE_DEFAULT) : NVML_FUNCTION_NOT_FOUND,
		     "compute mode back to default");
}
