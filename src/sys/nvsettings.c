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
			read_gpu(&n, fd, i, dev);
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
               const struct gp_gpu_want *w, struct gp_nvsettings *s)
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
	struct job job = { w };
	struct gp_nvchild res;
	int rc = gp_nvchild_run(r, timeout_ms, read_only, body, &job, &res);
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
	return run(r, timeout_ms, read_only, NULL, s);
}

int gp_nvsettings_apply(const struct gp_root *r, int timeout_ms,
                        const struct gp_gpu_want *w, struct gp_nvsettings *s)
{
	return run(r, timeout_ms, false, w, s);
}

void gp_nvsettings_free(struct gp_nvsettings *s)
{
	free(s->load_error);
	free(s->init_error);
	free(s->error);
	for (size_t i = 0; i < GP_PROBE_MAX_GPUS; i++)
		free(s->gpu[i].name);
	gp_strv_free(s->results);
	*s = (struct gp_nvsettings){ 0 };
}
