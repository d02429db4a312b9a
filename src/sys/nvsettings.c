/* GPU settings through NVML in the child of nvprobe.h (nvsettings.h).
 * Protocol on the pipe, one fact a line: "loaded 1", "count 8",
 * "gpu 0 power_enforced_mw 700000", "set 0 ok power limit 600 W", ...,
 * "end". Missing symbols are skipped, never called. */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/nvsettings.h"
#include "gpuprov/util.h"

#define put gp_nvchild_put
#define SYM(h, name) ((name##_t *)dlsym((h), #name))
#define NVML_CLOCK_GRAPHICS 0
#define NVML_CLOCK_MEM 2

typedef int nvmlInit_v2_t(void);
typedef int nvmlShutdown_t(void);
typedef const char *nvmlErrorString_t(int);
typedef int nvmlDeviceGetCount_v2_t(unsigned *);
typedef int nvmlDeviceGetHandleByIndex_v2_t(unsigned, void **);
typedef int nvmlDeviceGetName_t(void *, char *, unsigned);
typedef int nvmlDeviceGetPersistenceMode_t(void *, int *);
typedef int nvmlDeviceGetPowerManagementLimitConstraints_t(void *, unsigned *,
                                                           unsigned *);
typedef int nvmlDeviceGetPowerManagementDefaultLimit_t(void *, unsigned *);
typedef int nvmlDeviceGetEnforcedPowerLimit_t(void *, unsigned *);
typedef int nvmlDeviceGetComputeMode_t(void *, int *);
typedef int nvmlDeviceGetEccMode_t(void *, int *, int *);
typedef int nvmlDeviceGetMigMode_t(void *, unsigned *, unsigned *);
typedef int nvmlDeviceGetApplicationsClock_t(void *, int, unsigned *);
typedef int nvmlDeviceSetPowerManagementLimit_t(void *, unsigned);
typedef int nvmlDeviceSetComputeMode_t(void *, int);
typedef int nvmlDeviceSetEccMode_t(void *, int);
typedef int nvmlDeviceSetMigMode_t(void *, unsigned, int *);
typedef int nvmlDeviceSetGpuLockedClocks_t(void *, unsigned, unsigned);
typedef int nvmlDeviceSetApplicationsClocks_t(void *, unsigned, unsigned);
typedef int nvmlDeviceGetSupportedMemoryClocks_t(void *, unsigned *, unsigned *);
typedef int nvmlDeviceGetSupportedGraphicsClocks_t(void *, unsigned, unsigned *,
                                                   unsigned *);
typedef int nvmlDeviceGetMaxClockInfo_t(void *, int, unsigned *);

#define NVML_FUNCTION_NOT_FOUND 13
#define MAX_CLOCKS 512 /* entries asked of NVML; more is refused as too many */

struct nvml {
	void *h;
	nvmlErrorString_t *errstr;
	nvmlDeviceGetHandleByIndex_v2_t *handle;
};

/* --- the child ----------------------------------------------------------- */

static const char *errstr(const struct nvml *n, int rc)
{
	const char *s = n->errstr ? n->errstr(rc) : NULL;
	return s ? s : "unknown error";
}

static void read_gpu(const struct nvml *n, int fd, unsigned i, void *dev)
{
	void *h = n->h;
	char buf[96];
	unsigned a, b;
	int x, y;
	nvmlDeviceGetName_t *name = SYM(h, nvmlDeviceGetName);
	nvmlDeviceGetPersistenceMode_t *pers = SYM(h, nvmlDeviceGetPersistenceMode);
	nvmlDeviceGetPowerManagementLimitConstraints_t *cons = SYM(
	    h, nvmlDeviceGetPowerManagementLimitConstraints);
	nvmlDeviceGetPowerManagementDefaultLimit_t *def = SYM(
	    h, nvmlDeviceGetPowerManagementDefaultLimit);
	nvmlDeviceGetEnforcedPowerLimit_t *enf = SYM(h, nvmlDeviceGetEnforcedPowerLimit);
	nvmlDeviceGetComputeMode_t *cm = SYM(h, nvmlDeviceGetComputeMode);
	nvmlDeviceGetEccMode_t *ecc = SYM(h, nvmlDeviceGetEccMode);
	nvmlDeviceGetMigMode_t *mig = SYM(h, nvmlDeviceGetMigMode);
	nvmlDeviceGetApplicationsClock_t *app = SYM(h, nvmlDeviceGetApplicationsClock);
	if (name && name(dev, buf, sizeof buf) == 0) {
		buf[sizeof buf - 1] = '\0';
		put(fd, "gpu %u name %s", i, buf);
	}
	if (pers && pers(dev, &x) == 0)
		put(fd, "gpu %u persistence %d", i, x ? 1 : 0);
	if (cons && cons(dev, &a, &b) == 0)
		put(fd, "gpu %u power_limits_mw %u %u", i, a, b);
	if (def && def(dev, &a) == 0)
		put(fd, "gpu %u power_default_mw %u", i, a);
	if (enf && enf(dev, &a) == 0)
		put(fd, "gpu %u power_enforced_mw %u", i, a);
	if (cm && cm(dev, &x) == 0)
		put(fd, "gpu %u compute_mode %d", i, x);
	if (ecc && ecc(dev, &x, &y) == 0)
		put(fd, "gpu %u ecc %d %d", i, x ? 1 : 0, y ? 1 : 0);
	if (mig && mig(dev, &a, &b) == 0)
		put(fd, "gpu %u mig %u %u", i, a ? 1 : 0, b ? 1 : 0);
	if (app && app(dev, NVML_CLOCK_MEM, &a) == 0 &&
	    app(dev, NVML_CLOCK_GRAPHICS, &b) == 0)
		put(fd, "gpu %u app_clocks_mhz %u %u", i, a, b);
}

/* mhz as a short list for a reason: every entry when few, else the first
 * ones, the last and the count (NVML lists them highest first). */
static void clock_list(char *buf, size_t size, const unsigned *mhz, unsigned count)
{
	size_t len = 0;
	buf[0] = '\0';
	for (unsigned k = 0; k < count && len < size; k++) {
		if (count > 12 && k == 8) {
			len += (size_t)snprintf(buf + len, size - len,
			                        ", ..., %u (%u in all)", mhz[count - 1],
			                        count);
			break;
		}
		len += (size_t)snprintf(buf + len, size - len, "%s%u", k ? ", " : "",
		                        mhz[k]);
	}
}

static bool clock_listed(const unsigned *mhz, unsigned count, unsigned want)
{
	for (unsigned k = 0; k < count; k++)
		if (mhz[k] == want)
			return true;
	return false;
}

/* The supported clocks NVML lists: its return code (13 when the library
 * lacks the function), *count entries of mhz. */
static int supported_clocks(void *h, void *dev, bool graphics, unsigned mem_mhz,
                            unsigned *mhz, unsigned *count)
{
	nvmlDeviceGetSupportedMemoryClocks_t *mem = SYM(
	    h, nvmlDeviceGetSupportedMemoryClocks);
	nvmlDeviceGetSupportedGraphicsClocks_t *gfx = SYM(
	    h, nvmlDeviceGetSupportedGraphicsClocks);
	*count = MAX_CLOCKS;
	int rc = graphics
	             ? (gfx ? gfx(dev, mem_mhz, count, mhz) : NVML_FUNCTION_NOT_FOUND)
	             : (mem ? mem(dev, count, mhz) : NVML_FUNCTION_NOT_FOUND);
	if (rc != 0 || *count > MAX_CLOCKS)
		*count = 0;
	return rc;
}

/* Refuses, as "gpu I clocks_refused KIND REASON", the clocks w names that
 * GPU i does not support (the stage's check says what to change per KIND):
 * app_unsupported, app_memory, app_graphics, locked_unsupported,
 * locked_range. */
static void check_clocks(const struct nvml *n, int fd, unsigned i, void *dev,
                         const struct gp_gpu_want *w)
{
	unsigned mem[MAX_CLOCKS], gfx[MAX_CLOCKS], n_mem = 0, n_gfx = 0;
	char list[320];
	if (!w->app_gpu_mhz && !w->locked_max_mhz)
		return;
	int rc = supported_clocks(n->h, dev, false, 0, mem, &n_mem);
	if (rc == NVML_FUNCTION_NOT_FOUND) {
		/* An old library: the setter still says what it did, but the
		 * clocks cannot be held to the GPU's list; said, not skipped
		 * silently. */
		put(fd,
		    "gpu %u clocks_unchecked the NVML library lacks "
		    "nvmlDeviceGetSupportedMemoryClocks, so the profile's clocks "
		    "cannot be checked against the ones the GPU supports",
		    i);
		return;
	}
	if (rc != 0) {
		const char *kind = w->app_gpu_mhz ? "app_unsupported"
		                                  : "locked_unsupported";
		put(fd,
		    "gpu %u clocks_refused %s NVML lists no supported clocks for "
		    "this GPU (nvmlDeviceGetSupportedMemoryClocks: %s)",
		    i, kind, errstr(n, rc));
		return;
	}
	if (w->app_gpu_mhz) {
		clock_list(list, sizeof list, mem, n_mem);
		if (!clock_listed(mem, n_mem, w->app_mem_mhz)) {
			put(fd,
			    "gpu %u clocks_refused app_memory application clocks' memory "
			    "clock %u MHz is not one the GPU supports (%s MHz)",
			    i, w->app_mem_mhz, list);
			return;
		}
		rc = supported_clocks(n->h, dev, true, w->app_mem_mhz, gfx, &n_gfx);
		clock_list(list, sizeof list, gfx, n_gfx);
		if (rc != 0) {
			put(fd,
			    "gpu %u clocks_refused app_unsupported NVML lists no "
			    "graphics clocks at memory %u MHz "
			    "(nvmlDeviceGetSupportedGraphicsClocks: %s)",
			    i, w->app_mem_mhz, errstr(n, rc));
			return;
		}
		if (!clock_listed(gfx, n_gfx, w->app_gpu_mhz)) {
			put(fd,
			    "gpu %u clocks_refused app_graphics application clocks "
			    "%u,%u MHz are not a pair the GPU supports (graphics "
			    "clocks at memory %u MHz: %s)",
			    i, w->app_mem_mhz, w->app_gpu_mhz, w->app_mem_mhz, list);
			return;
		}
	}
	if (w->locked_max_mhz) {
		/* The range of graphics clocks at the highest memory clock; the
		 * GPU's max graphics clock may raise its top. */
		unsigned top_mem = 0, lo = UINT_MAX, hi = 0, max_info = 0;
		for (unsigned k = 0; k < n_mem; k++)
			top_mem = mem[k] > top_mem ? mem[k] : top_mem;
		rc = supported_clocks(n->h, dev, true, top_mem, gfx, &n_gfx);
		for (unsigned k = 0; k < n_gfx; k++) {
			lo = gfx[k] < lo ? gfx[k] : lo;
			hi = gfx[k] > hi ? gfx[k] : hi;
		}
		nvmlDeviceGetMaxClockInfo_t *maxinfo = SYM(n->h,
		                                           nvmlDeviceGetMaxClockInfo);
		if (maxinfo && maxinfo(dev, NVML_CLOCK_GRAPHICS, &max_info) == 0 &&
		    max_info > hi)
			hi = max_info;
		if (rc != 0 || !n_gfx)
			put(fd,
			    "gpu %u clocks_refused locked_unsupported NVML lists no "
			    "graphics clocks at memory %u MHz "
			    "(nvmlDeviceGetSupportedGraphicsClocks: %s)",
			    i, top_mem, errstr(n, rc));
		else if (w->locked_min_mhz < lo || w->locked_max_mhz > hi)
			put(fd,
			    "gpu %u clocks_refused locked_range locked GPU clocks "
			    "%u..%u MHz lie outside the GPU's graphics clocks, "
			    "%u..%u MHz",
			    i, w->locked_min_mhz, w->locked_max_mhz, lo, hi);
	}
}

static void said(const struct nvml *n, int fd, unsigned i, int rc, const char *what)
{
	put(fd, "set %u %s %s: %s", i, rc == 0 ? "ok" : "failed", what, errstr(n, rc));
}

/* Sets what w names on one GPU, each setting once, in the order
 * nvidia-smi's documentation gives them no dependency on. */
static void set_gpu(const struct nvml *n, int fd, unsigned i, void *dev,
                    const struct gp_gpu_want *w)
{
	void *h = n->h;
	char what[128];
	nvmlDeviceSetPowerManagementLimit_t *setpl = SYM(
	    h, nvmlDeviceSetPowerManagementLimit);
	nvmlDeviceGetPowerManagementLimitConstraints_t *cons = SYM(
	    h, nvmlDeviceGetPowerManagementLimitConstraints);
	nvmlDeviceGetPowerManagementDefaultLimit_t *def = SYM(
	    h, nvmlDeviceGetPowerManagementDefaultLimit);
	if ((w->power_limit_w || w->power_limit_fraction > 0)) {
		unsigned lo = 0, hi = 0, dflt = 0, target = 0;
		char *why = NULL;
		if (!setpl || !cons || !def || cons(dev, &lo, &hi) != 0 ||
		    def(dev, &dflt) != 0)
			put(fd,
			    "set %u failed power limit: NVML gives no power limits "
			    "for this GPU",
			    i);
		else if (gp_gpu_power_target(w, dflt, lo, hi, &target, &why) < 0)
			put(fd, "set %u failed power limit: %s", i, why);
		else {
			snprintf(what, sizeof what, "power limit %u W", target / 1000);
			said(n, fd, i, setpl(dev, target), what);
		}
		free(why);
	}
	nvmlDeviceSetGpuLockedClocks_t *lgc = SYM(h, nvmlDeviceSetGpuLockedClocks);
	if (w->locked_max_mhz) {
		snprintf(what, sizeof what, "locked GPU clocks %u..%u MHz",
		         w->locked_min_mhz, w->locked_max_mhz);
		said(n, fd, i, lgc ? lgc(dev, w->locked_min_mhz, w->locked_max_mhz) : 13,
		     what);
	}
	nvmlDeviceSetApplicationsClocks_t *ac = SYM(h, nvmlDeviceSetApplicationsClocks);
	if (w->app_gpu_mhz) {
		snprintf(what, sizeof what,
		         "application clocks memory %u MHz, graphics %u MHz",
		         w->app_mem_mhz, w->app_gpu_mhz);
		said(n, fd, i, ac ? ac(dev, w->app_mem_mhz, w->app_gpu_mhz) : 13, what);
	}
	nvmlDeviceSetComputeMode_t *cm = SYM(h, nvmlDeviceSetComputeMode);
	if (w->compute_mode >= 0) {
		snprintf(what, sizeof what, "compute mode %s",
		         gp_compute_mode_name(w->compute_mode));
		said(n, fd, i, cm ? cm(dev, w->compute_mode) : 13, what);
	}
	/* ECC and MIG are set only when they differ: setting ECC again is
	 * harmless, but MIG may reset the GPU. */
	nvmlDeviceGetEccMode_t *gecc = SYM(h, nvmlDeviceGetEccMode);
	nvmlDeviceSetEccMode_t *ecc = SYM(h, nvmlDeviceSetEccMode);
	int cur, pend;
	if (w->ecc >= 0 && !(gecc && gecc(dev, &cur, &pend) == 0 && !!pend == w->ecc)) {
		snprintf(what, sizeof what, "ECC %s (pending until a reboot)",
		         w->ecc ? "on" : "off");
		said(n, fd, i, ecc ? ecc(dev, w->ecc) : 13, what);
	}
	nvmlDeviceGetMigMode_t *gmig = SYM(h, nvmlDeviceGetMigMode);
	nvmlDeviceSetMigMode_t *mig = SYM(h, nvmlDeviceSetMigMode);
	unsigned mcur, mpend;
	if (w->mig >= 0 &&
	    !(gmig && gmig(dev, &mcur, &mpend) == 0 && !!mpend == w->mig)) {
		int activation = 0;
		snprintf(what, sizeof what, "MIG %s", w->mig ? "on" : "off");
		int rc = mig ? mig(dev, (unsigned)w->mig, &activation) : 13;
		said(n, fd, i, rc, what);
		if (rc == 0 && activation != 0)
			put(fd, "set %u failed MIG %s needs a GPU reset or a reboot: %s",
			    i, w->mig ? "on" : "off", errstr(n, activation));
	}
}

struct job {
	const struct gp_gpu_want *want; /* NULL: only read */
	const struct gp_gpu_want *check; /* clocks to refuse when unsupported */
	const struct gp_gpu_reset *reset; /* NULL: nothing to give back */
};

static void body(int fd, void *data)
{
	const struct job *job = data;
	struct nvml n = { .h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL) };
	if (!n.h) {
		put(fd, "loaded 0");
		put(fd, "load_error %s", dlerror());
		return;
	}
	put(fd, "loaded 1");
	nvmlInit_v2_t *init = SYM(n.h, nvmlInit_v2);
	nvmlShutdown_t *shutdown = SYM(n.h, nvmlShutdown);
	nvmlDeviceGetCount_v2_t *count = SYM(n.h, nvmlDeviceGetCount_v2);
	n.errstr = SYM(n.h, nvmlErrorString);
	n.handle = SYM(n.h, nvmlDeviceGetHandleByIndex_v2);
	if (!init || !count || !n.handle) {
		put(fd, "load_error the library lacks nvmlInit_v2, nvmlDeviceGetCount_v2 "
		        "or nvmlDeviceGetHandleByIndex_v2");
		return;
	}
	int rc = init();
	put(fd, "init_rc %d", rc);
	if (rc != 0) {
		put(fd, "init_error %s", errstr(&n, rc));
		return;
	}
	unsigned gpus = 0;
	if (count(&gpus) == 0) {
		put(fd, "count %u", gpus);
		for (unsigned i = 0; i < gpus && i < GP_PROBE_MAX_GPUS; i++) {
			void *dev = NULL;
			if (n.handle(i, &dev) != 0)
				continue;
			if (job->want)
				set_gpu(&n, fd, i, dev, job->want);
			if (job->reset)
				gp_nvreset_gpu(n.h, fd, i, dev, job->reset);
			read_gpu(&n, fd, i, dev);
			if (job->check)
				check_clocks(&n, fd, i, dev, job->check);
		}
	}
	if (shutdown)
		shutdown();
}

/* --- the parent ---------------------------------------------------------- */

static long num(const char **v)
{
	long n = strtol(*v, (char **)v, 10);
	return n > INT_MAX ? INT_MAX : n < INT_MIN ? INT_MIN : n;
}

static void parse_gpu(struct gp_nvsettings *s, const char *v)
{
	long i = num(&v);
	if (i < 0 || i >= GP_PROBE_MAX_GPUS || *v != ' ')
		return;
	struct gp_gpu_state *g = &s->gpu[i];
	const char *key = v + 1;
	const char *sp = strchr(key, ' ');
	if (!sp)
		return;
	size_t klen = (size_t)(sp - key);
	v = sp + 1;
#define IS(k) (klen == strlen(k) && strncmp(key, k, klen) == 0)
	if (IS("name")) {
		free(g->name);
		g->name = gp_xstrdup(v);
	} else if (IS("persistence"))
		g->persistence = (int)num(&v);
	else if (IS("power_limits_mw")) {
		g->power_min_mw = num(&v);
		g->power_max_mw = num(&v);
	} else if (IS("power_default_mw"))
		g->power_default_mw = num(&v);
	else if (IS("power_enforced_mw"))
		g->power_enforced_mw = num(&v);
	else if (IS("compute_mode"))
		g->compute_mode = (int)num(&v);
	else if (IS("ecc")) {
		g->ecc_current = (int)num(&v);
		g->ecc_pending = (int)num(&v);
	} else if (IS("mig")) {
		g->mig_current = (int)num(&v);
		g->mig_pending = (int)num(&v);
	} else if (IS("app_clocks_mhz")) {
		g->app_mem_mhz = (int)num(&v);
		g->app_gpu_mhz = (int)num(&v);
	} else if (IS("clocks_unchecked") && !g->clocks_unchecked) {
		g->clocks_unchecked = gp_xstrdup(v);
	} else if (IS("clocks_refused") && !g->clocks_refused) {
		const char *reason = strchr(v, ' ');
		if (reason) {
			g->clocks_refused_kind = gp_xstrndup(v, (size_t)(reason - v));
			g->clocks_refused = gp_xstrdup(reason + 1);
		}
	}
#undef IS
}

static void parse_set(struct gp_nvsettings *s, const char *v)
{
	long i = num(&v);
	if (i < 0 || i >= GP_PROBE_MAX_GPUS || *v != ' ')
		return;
	v++;
	bool ok = strncmp(v, "ok ", 3) == 0;
	if (!ok && strncmp(v, "failed ", 7) != 0)
		return;
	s->failed += !ok;
	char *line = gp_xasprintf("GPU %ld: %s%s", i,
	                          ok ? "" : "not set: ", v + (ok ? 3 : 7));
	gp_strv_push(&s->results, line);
	free(line);
}

static void parse_line(void *arg, const char *line, const char *v)
{
	struct gp_nvsettings *s = arg;
	if (strcmp(line, "loaded") == 0)
		s->loaded = strcmp(v, "1") == 0;
	else if (strcmp(line, "load_error") == 0) {
		free(s->load_error);
		s->load_error = gp_xstrdup(v);
	} else if (strcmp(line, "init_rc") == 0)
		s->init_rc = (int)num(&v);
	else if (strcmp(line, "init_error") == 0) {
		free(s->init_error);
		s->init_error = gp_xstrdup(v);
	} else if (strcmp(line, "count") == 0)
		s->count = (int)num(&v);
	else if (strcmp(line, "gpu") == 0)
		parse_gpu(s, v);
	else if (strcmp(line, "set") == 0)
		parse_set(s, v);
}

static int run(const struct gp_root *r, int timeout_ms, bool read_only,
               const struct job *job, struct gp_nvsettings *s)
{
	*s = (struct gp_nvsettings){ .init_rc = -1, .count = -1 };
	for (size_t i = 0; i < GP_PROBE_MAX_GPUS; i++)
		s->gpu[i] = (struct gp_gpu_state){
			.persistence = -1,
			.power_min_mw = -1,
			.power_max_mw = -1,
			.power_default_mw = -1,
			.power_enforced_mw = -1,
			.compute_mode = -1,
			.ecc_current = -1,
			.ecc_pending = -1,
			.mig_current = -1,
			.mig_pending = -1,
			.app_mem_mhz = -1,
			.app_gpu_mhz = -1,
		};
	struct gp_nvchild res;
	int rc = gp_nvchild_run(r, timeout_ms, read_only, body, (void *)job, &res);
	if (rc < 0) {
		s->read_only_refused = res.read_only_refused;
		return rc;
	}
	s->error = gp_nvchild_each(&res, parse_line, s);
	gp_nvchild_free(&res);
	return 0;
}

int gp_nvsettings_read(const struct gp_root *r, int timeout_ms, bool read_only,
                       struct gp_nvsettings *s)
{
	return run(r, timeout_ms, read_only, &(struct job){ 0 }, s);
}

int gp_nvsettings_check(const struct gp_root *r, int timeout_ms, bool read_only,
                        const struct gp_gpu_want *w, struct gp_nvsettings *s)
{
	return run(r, timeout_ms, read_only, &(struct job){ .check = w }, s);
}

int gp_nvsettings_apply(const struct gp_root *r, int timeout_ms,
                        const struct gp_gpu_want *w, struct gp_nvsettings *s)
{
	return run(r, timeout_ms, false, &(struct job){ .want = w }, s);
}

int gp_nvsettings_reset(const struct gp_root *r, int timeout_ms,
                        const struct gp_gpu_reset *reset, struct gp_nvsettings *s)
{
	return run(r, timeout_ms, false, &(struct job){ .reset = reset }, s);
}

void gp_nvsettings_free(struct gp_nvsettings *s)
{
	free(s->load_error);
	free(s->init_error);
	free(s->error);
	for (size_t i = 0; i < GP_PROBE_MAX_GPUS; i++) {
		free(s->gpu[i].name);
		free(s->gpu[i].clocks_refused_kind);
		free(s->gpu[i].clocks_refused);
		free(s->gpu[i].clocks_unchecked);
	}
	gp_strv_free(s->results);
	*s = (struct gp_nvsettings){ 0 };
}
