/* The words of the GPU settings boot unit (gpusettings.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/gpusettings.h"
#include "gpuprov/util.h"

static const struct {
	int mode;
	const char *name;
} compute_modes[] = {
	{ GP_COMPUTE_DEFAULT, "default" },
	{ GP_COMPUTE_PROHIBITED, "prohibited" },
	{ GP_COMPUTE_EXCLUSIVE_PROCESS, "exclusive_process" },
};

void gp_gpu_want_init(struct gp_gpu_want *w)
{
	*w = (struct gp_gpu_want){ .compute_mode = -1, .ecc = -1, .mig = -1 };
}

bool gp_gpu_want_any(const struct gp_gpu_want *w)
{
	return w->power_limit_w || w->power_limit_fraction > 0 || w->locked_max_mhz ||
	       w->app_gpu_mhz || w->compute_mode >= 0 || w->ecc >= 0 || w->mig >= 0;
}

const char *gp_compute_mode_name(int mode)
{
	for (size_t i = 0; i < ARRAY_SIZE(compute_modes); i++)
		if (compute_modes[i].mode == mode)
			return compute_modes[i].name;
	return NULL;
}

int gp_compute_mode_parse(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(compute_modes); i++)
		if (strcmp(compute_modes[i].name, name) == 0)
			return compute_modes[i].mode;
	return -1;
}

/* A whole number 1..max, digits only. */
static bool parse_uint(const char *s, const char *end, unsigned max, unsigned *out)
{
	unsigned long v = 0;
	if (s == end)
		return false;
	for (const char *p = s; p < end; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (unsigned long)(*p - '0');
		if (v > max)
			return false;
	}
	*out = (unsigned)v;
	return v > 0;
}

/* "A,B" with A <= B when ordered. */
static bool parse_pair(const char *s, bool ordered, unsigned *a, unsigned *b)
{
	const char *comma = strchr(s, ',');
	return comma && parse_uint(s, comma, 100000, a) &&
	       parse_uint(comma + 1, s + strlen(s), 100000, b) && (!ordered || *a <= *b);
}

static int on_off(const char *s)
{
	return strcmp(s, "on") == 0 ? 1 : strcmp(s, "off") == 0 ? 0 : -1;
}

/* A fraction 0.1..2 written as digits with at most one '.'. */
static bool parse_fraction(const char *s, double *out)
{
	if (!*s || strspn(s, "0123456789.") != strlen(s) ||
	    strchr(s, '.') != strrchr(s, '.'))
		return false;
	*out = strtod(s, NULL);
	return *out >= 0.1 && *out <= 2.0;
}

int gp_gpu_want_parse(char *const *words, size_t n, struct gp_gpu_want *w,
                      struct gp_err *err)
{
	gp_gpu_want_init(w);
	if (n > GP_GPU_WANT_MAX_WORDS)
		return gp_fail(err, GP_EINPUT, "%zu settings given; at most %d", n,
		               GP_GPU_WANT_MAX_WORDS);
	for (size_t i = 0; i < n; i++) {
		const char *word = words[i];
		const char *eq = strchr(word, '=');
		if (strlen(word) > GP_GPU_WANT_MAX_WORD || !eq)
			return gp_fail(
			    err, GP_EINPUT,
			    "setting %zu is not NAME=VALUE of at most %d bytes", i + 1,
			    GP_GPU_WANT_MAX_WORD);
		size_t klen = (size_t)(eq - word);
		const char *v = eq + 1;
		bool ok;
#define IS(k) (klen == strlen(k) && strncmp(word, k, klen) == 0)
		if (IS("power_limit_w"))
			ok = parse_uint(v, v + strlen(v), 100000, &w->power_limit_w);
		else if (IS("power_limit_fraction"))
			ok = parse_fraction(v, &w->power_limit_fraction);
		else if (IS("locked_gpu_clocks_mhz"))
			ok = parse_pair(v, true, &w->locked_min_mhz, &w->locked_max_mhz);
		else if (IS("application_clocks_mhz"))
			ok = parse_pair(v, false, &w->app_mem_mhz, &w->app_gpu_mhz);
		else if (IS("compute_mode"))
			ok = (w->compute_mode = gp_compute_mode_parse(v)) >= 0;
		else if (IS("ecc"))
			ok = (w->ecc = on_off(v)) >= 0;
		else if (IS("mig"))
			ok = (w->mig = on_off(v)) >= 0;
		else
			return gp_fail(err, GP_EINPUT,
			               "unknown setting '%.*s': known are power_limit_w, "
			               "power_limit_fraction, locked_gpu_clocks_mhz, "
			               "application_clocks_mhz, compute_mode, ecc, mig",
			               (int)klen, word);
#undef IS
		if (!ok)
			return gp_fail(
			    err, GP_EINPUT,
			    "setting '%s': the value is not one gpuprov writes "
			    "(watts 1..100000; a fraction 0.1..2; MHz pairs "
			    "MIN,MAX or MEMORY,GRAPHICS; default, prohibited or "
			    "exclusive_process; on or off)",
			    word);
	}
	if (w->power_limit_w && w->power_limit_fraction > 0)
		return gp_fail(err, GP_EINPUT,
		               "power_limit_w and power_limit_fraction both given; "
		               "give one");
	return 0;
}

char *gp_gpu_want_words(const struct gp_gpu_want *w)
{
	struct gp_buf b = { 0 };
	if (w->power_limit_w)
		gp_buf_printf(&b, " power_limit_w=%u", w->power_limit_w);
	if (w->power_limit_fraction > 0)
		gp_buf_printf(&b, " power_limit_fraction=%g", w->power_limit_fraction);
	if (w->locked_max_mhz)
		gp_buf_printf(&b, " locked_gpu_clocks_mhz=%u,%u", w->locked_min_mhz,
		              w->locked_max_mhz);
	if (w->app_gpu_mhz)
		gp_buf_printf(&b, " application_clocks_mhz=%u,%u", w->app_mem_mhz,
		              w->app_gpu_mhz);
	if (gp_compute_mode_name(w->compute_mode))
		gp_buf_printf(&b, " compute_mode=%s",
		              gp_compute_mode_name(w->compute_mode));
	if (w->ecc >= 0)
		gp_buf_printf(&b, " ecc=%s", w->ecc ? "on" : "off");
	if (w->mig >= 0)
		gp_buf_printf(&b, " mig=%s", w->mig ? "on" : "off");
	char *all = gp_buf_steal(&b);
	char *s = gp_xstrdup(all[0] ? all + 1 : "");
	free(all);
	return s;
}

int gp_gpu_power_target(const struct gp_gpu_want *w, unsigned default_mw, unsigned min_mw,
                        unsigned max_mw, unsigned *target_mw, char **why)
{
	*target_mw = 0;
	*why = NULL;
	double mw;
	if (w->power_limit_w)
		mw = (double)w->power_limit_w * 1000.0;
	else if (w->power_limit_fraction > 0)
		mw = (double)(unsigned long)((double)default_mw *
		                                 w->power_limit_fraction +
		                             0.5);
	else
		return 0;
	if (mw < (double)min_mw || mw > (double)max_mw) {
		if (w->power_limit_w)
			*why = gp_xasprintf(
			    "a power limit of %u W lies outside the GPU's "
			    "limits, %u..%u W",
			    w->power_limit_w, min_mw / 1000, max_mw / 1000);
		else
			*why = gp_xasprintf("a power limit of %g of the default %u W "
			                    "(%.0f W) lies outside the GPU's limits, "
			                    "%u..%u W",
			                    w->power_limit_fraction, default_mw / 1000,
			                    mw / 1000.0, min_mw / 1000, max_mw / 1000);
		return -1;
	}
	*target_mw = (unsigned)mw;
	return 0;
}
