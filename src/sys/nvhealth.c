/* verify --deep's children (see nvhealth.h). One child per GPU and phase:
 * health (NVML only, the GPU idle) and then performance (libcuda, cuBLAS,
 * and NVML sampled while the timed work runs). What each writes, one fact
 * a line:
 *   name NAME | busy N | ecc_unc N | remap PENDING FAILURE |
 *   retired_pending 0|1 | nvlink ACTIVE INACTIVE ERRORS | pcie_max GEN WIDTH |
 *   load_pcie GEN WIDTH | load_reasons BITS | load_temp C | slowdown_temp C |
 *   load_power W | power_limit W | memory_bps X | h2d_bps X | d2h_bps X |
 *   cublas PATH | cublaslt PATH |
 *   gemm DTYPE FLOPS | gemm_skip DTYPE REASON | perf_skip REASON |
 *   error REASON | end
 * and the peer-to-peer child, one for all GPUs, GPU I to GPU J:
 *   p2p I J BPS | p2p_skip I J REASON
 * The CUDA ordinals are made the NVML (PCI bus) order with
 * CUDA_DEVICE_ORDER=PCI_BUS_ID, and CUDA_VISIBLE_DEVICES is dropped, so
 * GPU i is the same GPU in both libraries. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuprov/nvhealth.h"
#include "gpuprov/util.h"

#define put gp_nvchild_put
#define SYM(h, name) ((name##_t *)dlsym((h), #name))

/* NVML's constants (nvml.h of the CUDA toolkit). */
enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
	NVML_VOLATILE_ECC = 0,
	NVML_TEMPERATURE_GPU = 0,
	NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
	NVML_NVLINK_MAX_LINKS = 18,
	NVML_NVLINK_ERROR_DL_REPLAY = 0,
	NVML_NVLINK_ERROR_DL_CRC_DATA = 3,
};

typedef int nvmlInit_v2_t(void);
typedef int nvmlShutdown_t(void);
typedef int nvmlDeviceGetHandleByIndex_v2_t(unsigned, void **);
typedef int nvmlDeviceGetName_t(void *, char *, unsigned);
typedef int nvmlDeviceGetComputeRunningProcesses_v3_t(void *, unsigned *, void *);
typedef int nvmlDeviceGetTotalEccErrors_t(void *, int, int, unsigned long long *);
typedef int nvmlDeviceGetRemappedRows_t(void *, unsigned *, unsigned *, unsigned *,
                                        unsigned *);
typedef int nvmlDeviceGetRetiredPagesPendingStatus_t(void *, int *);
typedef int nvmlDeviceGetNvLinkState_t(void *, unsigned, int *);
typedef int nvmlDeviceGetNvLinkErrorCounter_t(void *, unsigned, int,
                                              unsigned long long *);
typedef int nvmlDeviceGetMaxPcieLinkGeneration_t(void *, unsigned *);
typedef int nvmlDeviceGetMaxPcieLinkWidth_t(void *, unsigned *);
typedef int nvmlDeviceGetCurrPcieLinkGeneration_t(void *, unsigned *);
typedef int nvmlDeviceGetCurrPcieLinkWidth_t(void *, unsigned *);
typedef int nvmlDeviceGetCurrentClocksEventReasons_t(void *, unsigned long long *);
typedef int nvmlDeviceGetTemperature_t(void *, int, unsigned *);
typedef int nvmlDeviceGetTemperatureThreshold_t(void *, int, unsigned *);
typedef int nvmlDeviceGetPowerUsage_t(void *, unsigned *);
typedef int nvmlDeviceGetEnforcedPowerLimit_t(void *, unsigned *);

struct nvml {
	void *lib, *dev;
	nvmlDeviceGetMaxPcieLinkGeneration_t *max_gen;
	nvmlDeviceGetMaxPcieLinkWidth_t *max_width;
	nvmlDeviceGetCurrPcieLinkGeneration_t *cur_gen;
	nvmlDeviceGetCurrPcieLinkWidth_t *cur_width;
	nvmlDeviceGetCurrentClocksEventReasons_t *reasons;
	nvmlDeviceGetTemperature_t *temp;
	nvmlDeviceGetPowerUsage_t *power;
};

/* NVML for GPU index, or false with an "error" line written. */
static bool nvml_open(int fd, unsigned index, struct nvml *n)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		put(fd, "error cannot load libnvidia-ml.so.1: %s", dlerror());
		return false;
	}
	nvmlInit_v2_t *init = SYM(h, nvmlInit_v2);
	nvmlDeviceGetHandleByIndex_v2_t *handle = SYM(h, nvmlDeviceGetHandleByIndex_v2);
	int rc = -1;
	if (!init || !handle || (rc = init()) != NVML_SUCCESS ||
	    (rc = handle(index, &n->dev)) != NVML_SUCCESS) {
		put(fd, "error NVML cannot open GPU %u (return code %d)", index, rc);
		return false;
	}
	n->lib = h;
	n->max_gen = SYM(h, nvmlDeviceGetMaxPcieLinkGeneration);
	n->max_width = SYM(h, nvmlDeviceGetMaxPcieLinkWidth);
	n->cur_gen = SYM(h, nvmlDeviceGetCurrPcieLinkGeneration);
	n->cur_width = SYM(h, nvmlDeviceGetCurrPcieLinkWidth);
	n->reasons = SYM(h, nvmlDeviceGetCurrentClocksEventReasons);
	n->temp = SYM(h, nvmlDeviceGetTemperature);
	n->power = SYM(h, nvmlDeviceGetPowerUsage);
	return true;
}

static void health(int fd, void *arg)
{
	unsigned index = (unsigned)*(const uintptr_t *)arg;
	struct nvml n = { 0 };
	if (!nvml_open(fd, index, &n))
		return;
	void *h = n.lib, *dev = n.dev;
	char name[96];
	nvmlDeviceGetName_t *get_name = SYM(h, nvmlDeviceGetName);
	if (get_name && get_name(dev, name, sizeof name) == NVML_SUCCESS) {
		name[sizeof name - 1] = '\0';
		put(fd, "name %s", name);
	}
	nvmlDeviceGetComputeRunningProcesses_v3_t *procs = SYM(
	    h, nvmlDeviceGetComputeRunningProcesses_v3);
	unsigned count = 0;
	int rc;
	/* With no room, NVML says how many there are. */
	if (procs && ((rc = procs(dev, &count, NULL)) == NVML_SUCCESS ||
	              rc == NVML_ERROR_INSUFFICIENT_SIZE))
		put(fd, "busy %u", rc == NVML_SUCCESS ? 0 : count ? count : 1);
	nvmlDeviceGetTotalEccErrors_t *ecc = SYM(h, nvmlDeviceGetTotalEccErrors);
	unsigned long long errs;
	if (ecc && ecc(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
	               &errs) == NVML_SUCCESS)
		put(fd, "ecc_unc %llu", errs);
	nvmlDeviceGetRemappedRows_t *remap = SYM(h, nvmlDeviceGetRemappedRows);
	unsigned corr, unc, pending, failure;
	if (remap && remap(dev, &corr, &unc, &pending, &failure) == NVML_SUCCESS)
		put(fd, "remap %u %u", pending ? 1 : 0, failure ? 1 : 0);
	nvmlDeviceGetRetiredPagesPendingStatus_t *retired = SYM(
	    h, nvmlDeviceGetRetiredPagesPendingStatus);
	int on;
	if (retired && retired(dev, &on) == NVML_SUCCESS)
		put(fd, "retired_pending %d", on ? 1 : 0);
	nvmlDeviceGetNvLinkState_t *link = SYM(h, nvmlDeviceGetNvLinkState);
	nvmlDeviceGetNvLinkErrorCounter_t *link_errs = SYM(
	    h, nvmlDeviceGetNvLinkErrorCounter);
	unsigned active = 0, inactive = 0;
	unsigned long long total = 0;
	for (unsigned l = 0; link && l < NVML_NVLINK_MAX_LINKS; l++) {
		if (link(dev, l, &on) != NVML_SUCCESS)
			continue; /* no such link */
		if (!on) {
			inactive++;
			continue;
		}
		active++;
		for (int c = NVML_NVLINK_ERROR_DL_REPLAY;
		     link_errs && c <= NVML_NVLINK_ERROR_DL_CRC_DATA; c++)
			if (link_errs(dev, l, c, &errs) == NVML_SUCCESS)
				total += errs;
	}
	if (active || inactive)
		put(fd, "nvlink %u %u %llu", active, inactive, total);
	unsigned gen, width;
	if (n.max_gen && n.max_width && n.max_gen(dev, &gen) == NVML_SUCCESS &&
	    n.max_width(dev, &width) == NVML_SUCCESS)
		put(fd, "pcie_max %u %u", gen, width);
	nvmlDeviceGetTemperatureThreshold_t *thr = SYM(h,
	                                               nvmlDeviceGetTemperatureThreshold);
	unsigned t;
	if (thr && thr(dev, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &t) == NVML_SUCCESS)
		put(fd, "slowdown_temp %u", t);
	nvmlDeviceGetEnforcedPowerLimit_t *limit = SYM(h,
	                                               nvmlDeviceGetEnforcedPowerLimit);
	if (limit && limit(dev, &t) == NVML_SUCCESS)
		put(fd, "power_limit %u", t / 1000);
}

/* --- performance ------------------------------------------------------- */

typedef unsigned long long CUdeviceptr;
typedef int cuInit_t(unsigned);
typedef int cuDeviceGet_t(int *, int);
typedef int cuDevicePrimaryCtxRetain_t(void **, int);
typedef int cuCtxSetCurrent_t(void *);
typedef int cuMemAlloc_v2_t(CUdeviceptr *, size_t);
typedef int cuMemFree_v2_t(CUdeviceptr);
typedef int cuMemHostAlloc_t(void **, size_t, unsigned);
typedef int cuMemcpyDtoDAsync_v2_t(CUdeviceptr, CUdeviceptr, size_t, void *);
typedef int cuMemcpyHtoDAsync_v2_t(CUdeviceptr, const void *, size_t, void *);
typedef int cuMemcpyDtoHAsync_v2_t(void *, CUdeviceptr, size_t, void *);
typedef int cuEventCreate_t(void **, unsigned);
typedef int cuEventRecord_t(void *, void *);
typedef int cuEventSynchronize_t(void *);
typedef int cuEventElapsedTime_t(float *, void *, void *);
typedef int cuCtxSynchronize_t(void);
typedef int cuDeviceCanAccessPeer_t(int *, int, int);
typedef int cuCtxEnablePeerAccess_t(void *, unsigned);
typedef int cuMemcpyPeerAsync_t(CUdeviceptr, void *, CUdeviceptr, void *, size_t, void *);
enum { CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704 };

/* cuBLAS (cublas_api.h, library_types.h). */
typedef int cublasCreate_v2_t(void **);
typedef int cublasSetStream_v2_t(void *, void *);
typedef int cublasGemmEx_t(void *, int, int, int, int, int, const void *, const void *,
                           int, int, const void *, int, int, const void *, void *, int,
                           int, int, int);
enum {
	CUDA_R_32F = 0,
	CUDA_R_16F = 2,
	CUDA_R_16BF = 14,
	CUDA_R_8F_E4M3 = 28,
	CUBLAS_COMPUTE_32F = 68,
	CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
	CUBLAS_GEMM_DEFAULT = -1,
	CUBLAS_OP_N = 0,
	CUBLAS_OP_T = 1,
};

/* cuBLASLt (cublasLt.h): the few calls of an FP8 matmul. */
typedef int cublasLtCreate_t(void **);
typedef int cublasLtMatmulDescCreate_t(void **, int, int);
typedef int cublasLtMatmulDescSetAttribute_t(void *, int, const void *, size_t);
typedef int cublasLtMatrixLayoutCreate_t(void **, int, uint64_t, uint64_t, int64_t);
typedef int cublasLtMatmulPreferenceCreate_t(void **);
typedef int cublasLtMatmulPreferenceSetAttribute_t(void *, int, const void *, size_t);
typedef int cublasLtMatmulAlgoGetHeuristic_t(void *, void *, void *, void *, void *,
                                             void *, void *, int, void *, int *);
typedef int cublasLtMatmul_t(void *, void *, const void *, const void *, void *,
                             const void *, void *, const void *, const void *, void *,
                             void *, void *, const void *, void *, size_t, void *);
enum {
	CUBLASLT_MATMUL_DESC_TRANSA = 3,
	CUBLASLT_MATMUL_DESC_TRANSB = 4,
	CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
};
/* cublasLtMatmulHeuristicResult_t */
struct lt_heuristic {
	uint64_t algo[8]; /* cublasLtMatmulAlgo_t */
	size_t workspace_bytes;
	int state;
	float waves;
	int reserved[4];
};

struct lt {
	cublasLtMatmul_t *matmul;
	void *handle, *desc, *layout_a, *layout_b, *layout_c;
	struct lt_heuristic best;
	CUdeviceptr workspace;
	size_t workspace_bytes;
};

struct cuda {
	cuEventRecord_t *record;
	cuEventSynchronize_t *sync;
	cuEventElapsedTime_t *elapsed;
	void *start, *stop;
};

/* The driver API calls every measuring child uses, from libcuda.so.1. */
struct driver {
	void *lib;
	cuDeviceGet_t *get;
	cuDevicePrimaryCtxRetain_t *retain;
	cuCtxSetCurrent_t *set_current;
	cuMemAlloc_v2_t *alloc;
	cuEventCreate_t *event;
	struct cuda cu; /* its start and stop left NULL */
};

/* libcuda.so.1 loaded, those calls found and cuInit done, with CUDA's
 * ordinals made NVML's (the PCI bus order, every GPU visible); false with
 * why (a sentence) when not. The caller looks up its own further calls in
 * d->lib. */
static bool driver_open(struct driver *d, char *why, size_t len)
{
	setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
	unsetenv("CUDA_VISIBLE_DEVICES");
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, len, "cannot load libcuda.so.1: %s", dlerror());
		return false;
	}
	cuInit_t *init = SYM(h, cuInit);
	*d = (struct driver){ h,
		              SYM(h, cuDeviceGet),
		              SYM(h, cuDevicePrimaryCtxRetain),
		              SYM(h, cuCtxSetCurrent),
		              SYM(h, cuMemAlloc_v2),
		              SYM(h, cuEventCreate),
		              { SYM(h, cuEventRecord), SYM(h, cuEventSynchronize),
		                SYM(h, cuEventElapsedTime), NULL, NULL } };
	if (!init || !d->get || !d->retain || !d->set_current || !d->alloc || !d->event ||
	    !d->cu.record || !d->cu.sync || !d->cu.elapsed) {
		snprintf(why, len,
		         "libcuda.so.1 lacks a driver API entry point verify "
		         "--deep uses");
		return false;
	}
	int rc = init(0);
	if (rc) {
		snprintf(why, len, "cuInit failed (return code %d)", rc);
		return false;
	}
	return true;
}

/* GPU index's primary context (the one the CUDA runtime of cuBLAS and
 * NCCL uses too) made current, with two events of it: 0, or the driver's
 * return code. */
static int driver_gpu(const struct driver *d, unsigned index, int *dev, void **ctx,
                      void **start, void **stop)
{
	int rc;
	if ((rc = d->get(dev, (int)index)) || (rc = d->retain(ctx, *dev)) ||
	    (rc = d->set_current(*ctx)) || (rc = d->event(start, 0)) ||
	    (rc = d->event(stop, 0)))
		return rc;
	return 0;
}

/* The worst of what NVML shows while work is queued: the lowest link,
 * every clock-event reason, the highest temperature and power. */
struct load {
	unsigned gen, width, temp, power_mw;
	unsigned long long reasons;
	bool have_link, have_reasons;
};

static void sample(const struct nvml *n, struct load *l)
{
	unsigned g, w, v;
	unsigned long long r;
	if (n->cur_gen && n->cur_width && n->cur_gen(n->dev, &g) == NVML_SUCCESS &&
	    n->cur_width(n->dev, &w) == NVML_SUCCESS) {
		l->gen = l->have_link && l->gen < g ? l->gen : g;
		l->width = l->have_link && l->width < w ? l->width : w;
		l->have_link = true;
	}
	if (n->reasons && n->reasons(n->dev, &r) == NVML_SUCCESS) {
		l->reasons |= r;
		l->have_reasons = true;
	}
	if (n->temp && n->temp(n->dev, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS &&
	    v > l->temp)
		l->temp = v;
	if (n->power && n->power(n->dev, &v) == NVML_SUCCESS && v > l->power_mw)
		l->power_mw = v;
}

struct work {
	int (*enqueue)(struct work *w);
	void *fn;
	void *handle;
	CUdeviceptr a, b, c;
	void *host;
	void *src_ctx, *dst_ctx; /* a peer copy's contexts */
	const struct lt *lt; /* a cuBLASLt matmul's */
	size_t bytes;
	int m, dtype_in, compute;
};

static int enqueue_dtod(struct work *w)
{
	return ((cuMemcpyDtoDAsync_v2_t *)w->fn)(w->b, w->a, w->bytes, NULL);
}

static int enqueue_htod(struct work *w)
{
	return ((cuMemcpyHtoDAsync_v2_t *)w->fn)(w->a, w->host, w->bytes, NULL);
}

static int enqueue_dtoh(struct work *w)
{
	return ((cuMemcpyDtoHAsync_v2_t *)w->fn)(w->host, w->a, w->bytes, NULL);
}

static int enqueue_peer(struct work *w)
{
	return ((cuMemcpyPeerAsync_t *)w->fn)(w->b, w->dst_ctx, w->a, w->src_ctx,
	                                      w->bytes, NULL);
}

static int enqueue_gemm(struct work *w)
{
	static const float one = 1, zero = 0;
	return ((cublasGemmEx_t *)w->fn)(w->handle, CUBLAS_OP_N, CUBLAS_OP_N, w->m, w->m,
	                                 w->m, &one, (void *)(uintptr_t)w->a, w->dtype_in,
	                                 w->m, (void *)(uintptr_t)w->b, w->dtype_in, w->m,
	                                 &zero, (void *)(uintptr_t)w->c, w->dtype_in,
	                                 w->m, w->compute, CUBLAS_GEMM_DEFAULT);
}

/* D = A^T B in FP8 E4M3 with BF16 out, C and D the same buffer. */
static int enqueue_lt(struct work *w)
{
	static const float one = 1, zero = 0;
	const struct lt *t = w->lt;
	void *a = (void *)(uintptr_t)w->a, *b = (void *)(uintptr_t)w->b,
	     *c = (void *)(uintptr_t)w->c;
	return t->matmul(t->handle, t->desc, &one, a, t->layout_a, b, t->layout_b, &zero,
	                 c, t->layout_c, c, t->layout_c, t->best.algo,
	                 (void *)(uintptr_t)t->workspace, t->workspace_bytes, NULL);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The median over runs of batch enqueues each, timed by events, in
 * seconds per enqueue, after warmup enqueues; NVML sampled while each run
 * is queued. 0 when a call failed. */
static double timed(const struct cuda *cu, const struct nvml *n, struct load *l,
                    struct work *w, int warmup, int runs, int batch)
{
	double t[16];
	if (runs > (int)ARRAY_SIZE(t))
		runs = ARRAY_SIZE(t);
	for (int i = 0; i < warmup; i++)
		if (w->enqueue(w) != 0)
			return 0;
	for (int r = 0; r < runs; r++) {
		if (cu->record(cu->start, NULL) != 0)
			return 0;
		for (int i = 0; i < batch; i++)
			if (w->enqueue(w) != 0)
				return 0;
		float ms = 0;
		if (cu->record(cu->stop, NULL) != 0)
			return 0;
		sample(n, l);
		if (cu->sync(cu->stop) != 0 ||
		    cu->elapsed(&ms, cu->start, cu->stop) != 0 || ms <= 0)
			return 0;
		t[r] = ms / 1000.0 / batch;
	}
	qsort(t, (size_t)runs, sizeof t[0], cmp_double);
	return t[runs / 2];
}

/* "no LIBRARY in DIR, DIR, REST": where a library was looked for. */
static void not_found(char *why, size_t len, const char *library, const char *const *dirs,
                      const char *rest)
{
	size_t n = (size_t)snprintf(why, len, "no %s in ", library);
	for (size_t d = 0; dirs && dirs[d] && n < len; d++)
		n += (size_t)snprintf(why + n, len - n, "%s, ", dirs[d]);
	if (n < len)
		snprintf(why + n, len - n, "%s", rest);
}

/* cuBLAS from dirs first (where the profile provisioned it: the cuda
 * stage's toolkit, the Python environment's NVIDIA wheels), then the loader
 * paths, then the toolkit's usual directory (the cuda stage's link). */
static void *open_cublas(const char *const *dirs, char *why, size_t len)
{
	static const char *const sonames[] = { "libcublas.so.13", "libcublas.so.12",
		                               "libcublas.so.11" };
	char path[PATH_MAX];
	void *h = NULL;
	for (size_t d = 0; !h && dirs && dirs[d]; d++)
		for (size_t k = 0; !h && k < ARRAY_SIZE(sonames); k++)
			if ((size_t)snprintf(path, sizeof path, "%s/%s", dirs[d],
			                     sonames[k]) < sizeof path)
				h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	for (size_t k = 0; !h && k < ARRAY_SIZE(sonames); k++)
		h = dlopen(sonames[k], RTLD_NOW | RTLD_LOCAL);
	for (size_t k = 0; !h && k < ARRAY_SIZE(sonames); k++) {
		snprintf(path, sizeof path, "/usr/local/cuda/lib64/%s", sonames[k]);
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	if (h)
		return h;
	not_found(why, len, "libcublas.so.13, .12 or .11", dirs,
	          "the loader paths or /usr/local/cuda/lib64");
	return NULL;
}

struct level {
	size_t copy_bytes, host_bytes, peer_bytes, nccl_bytes;
	int gemm_m, warmup, runs, batch;
	double soak_s; /* BF16 GEMMs first, for boost and heat to settle */
};

static const struct level levels[] = {
	[GP_DEEP_QUICK] = { 1ul << 30, 256ul << 20, 64ul << 20, 64ul << 20, 4096, 20, 3,
	                    10, 2 },
	[GP_DEEP_FULL] = { 2ul << 30, 1ul << 30, 512ul << 20, 256ul << 20, 8192, 200, 7,
	                   20, 30 },
};

/* Random inputs in [-2, -1] and [1, 2] for the GEMMs: zeros would draw
 * less power and flatter the clocks. in: CUDA_R_32F, CUDA_R_16BF,
 * CUDA_R_8F_E4M3, else FP16. Bits from a xorshift generator. */
static void fill_random(void *host, size_t elems, int in)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < elems; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		unsigned r = (unsigned)x;
		if (in == CUDA_R_32F)
			((uint32_t *)host)[i] = (r & 0x80000000u) | 0x3f800000u |
			                        (r & 0x7fffffu);
		else if (in == CUDA_R_8F_E4M3) /* exponent 7 (bias 7), 3 bits */
			((uint8_t *)host)[i] = (uint8_t)((r & 0x80u) | 0x38u |
			                                 (r & 0x7u));
		else if (in == CUDA_R_16BF)
			((uint16_t *)host)[i] = (uint16_t)((r & 0x8000u) | 0x3f80u |
			                                   (r & 0x7fu));
		else
			((uint16_t *)host)[i] = (uint16_t)((r & 0x8000u) | 0x3c00u |
			                                   (r & 0x3ffu));
	}
}

/* Runs w for at least seconds of GPU time by the events (at most 100000
 * batches), sampling NVML after each batch is queued. */
static void soak(const struct cuda *cu, const struct nvml *n, struct load *l,
                 struct work *w, int batch, double seconds)
{
	double done = 0;
	for (int k = 0; k < 100000 && done < seconds; k++) {
		float ms = 0;
		if (cu->record(cu->start, NULL) != 0)
			return;
		for (int i = 0; i < batch; i++)
			if (w->enqueue(w) != 0)
				return;
		if (cu->record(cu->stop, NULL) != 0)
			return;
		sample(n, l);
		if (cu->sync(cu->stop) != 0 ||
		    cu->elapsed(&ms, cu->start, cu->stop) != 0 || ms <= 0)
			return;
		done += ms / 1000.0;
	}
}

struct perf_arg {
	unsigned index;
	enum gp_deep_level level;
	bool fp8; /* the model table lists an FP8 peak for the GPU */
	const char *const *cublas_dirs; /* the parent's, NULL-terminated */
};

/* cuBLASLt next to the cuBLAS loaded (cublas_path: its file, or NULL),
 * else by soname. */
static void *open_cublaslt(const char *cublas_path, char *why, size_t len)
{
	static const char *const sonames[] = { "libcublasLt.so.13", "libcublasLt.so.12",
		                               "libcublasLt.so.11" };
	const char *base = cublas_path ? strrchr(cublas_path, '/') : NULL;
	void *h = NULL;
	char path[PATH_MAX];
	if (base && strncmp(base, "/libcublas.so.", 14) == 0 &&
	    (size_t)snprintf(path, sizeof path, "%.*s/libcublasLt.so.%s",
	                     (int)(base - cublas_path), cublas_path,
	                     base + 14) < sizeof path)
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	for (size_t k = 0; !h && k < ARRAY_SIZE(sonames); k++)
		h = dlopen(sonames[k], RTLD_NOW | RTLD_LOCAL);
	if (!h)
		snprintf(why, len,
		         "no libcublasLt.so.13, .12 or .11 next to %s or in the loader "
		         "paths",
		         cublas_path ? cublas_path : "cuBLAS");
	return h;
}

/* FP8 (E4M3 inputs, BF16 out, FP32 accumulate) through cublasLtMatmul in
 * the "TN" layout FP8 needs (A transposed), on buffers a, b, c of at least
 * m*m*2 bytes. */
static void fp8_gemm(int fd, const struct cuda *cu, const struct nvml *n, struct load *l,
                     const struct level *lv, const char *cublas_path,
                     cuMemAlloc_v2_t *alloc, void *htod, void *host, CUdeviceptr a,
                     CUdeviceptr b, CUdeviceptr c)
{
	char why[512];
	void *h = open_cublaslt(cublas_path, why, sizeof why);
	if (!h) {
		put(fd, "gemm_skip fp8 %s", why);
		return;
	}
	Dl_info info;
	cublasLtCreate_t *create = SYM(h, cublasLtCreate);
	cublasLtMatmulDescCreate_t *desc_create = SYM(h, cublasLtMatmulDescCreate);
	cublasLtMatmulDescSetAttribute_t *desc_set = SYM(h,
	                                                 cublasLtMatmulDescSetAttribute);
	cublasLtMatrixLayoutCreate_t *layout = SYM(h, cublasLtMatrixLayoutCreate);
	cublasLtMatmulPreferenceCreate_t *pref_create = SYM(
	    h, cublasLtMatmulPreferenceCreate);
	cublasLtMatmulPreferenceSetAttribute_t *pref_set = SYM(
	    h, cublasLtMatmulPreferenceSetAttribute);
	cublasLtMatmulAlgoGetHeuristic_t *heuristic = SYM(h,
	                                                  cublasLtMatmulAlgoGetHeuristic);
	struct lt t = { .matmul = SYM(h, cublasLtMatmul), .workspace_bytes = 32ul << 20 };
	if (!create || !desc_create || !desc_set || !layout || !pref_create ||
	    !pref_set || !heuristic || !t.matmul) {
		put(fd, "gemm_skip fp8 cuBLASLt lacks an entry point of its matmul");
		return;
	}
	if (dladdr((void *)t.matmul, &info) && info.dli_fname)
		put(fd, "cublaslt %s", info.dli_fname);
	const int op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
	const uint64_t m = (uint64_t)lv->gemm_m;
	void *pref = NULL;
	int rc, found = 0;
	if (alloc(&t.workspace, t.workspace_bytes))
		t.workspace_bytes = 0;
	if ((rc = create(&t.handle)) ||
	    (rc = desc_create(&t.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
	    (rc = desc_set(t.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t)) ||
	    (rc = desc_set(t.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n)) ||
	    (rc = layout(&t.layout_a, CUDA_R_8F_E4M3, m, m, (int64_t)m)) ||
	    (rc = layout(&t.layout_b, CUDA_R_8F_E4M3, m, m, (int64_t)m)) ||
	    (rc = layout(&t.layout_c, CUDA_R_16BF, m, m, (int64_t)m)) ||
	    (rc = pref_create(&pref)) ||
	    (rc = pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
	                   &t.workspace_bytes, sizeof t.workspace_bytes))) {
		put(fd, "gemm_skip fp8 cuBLASLt's matmul setup failed (status %d)", rc);
		return;
	}
	if ((rc = heuristic(t.handle, t.desc, t.layout_a, t.layout_b, t.layout_c,
	                    t.layout_c, pref, 1, &t.best, &found)) ||
	    found < 1) {
		put(fd,
		    "gemm_skip fp8 cuBLASLt has no FP8 E4M3 algorithm for this GPU "
		    "(status %d)",
		    rc);
		return;
	}
	size_t elems = (size_t)m * (size_t)m;
	fill_random(host, elems, CUDA_R_8F_E4M3);
	struct work fill = {
		.enqueue = enqueue_htod, .fn = htod, .a = a, .host = host, .bytes = elems
	};
	if (fill.enqueue(&fill) != 0 || (fill.a = b, fill.enqueue(&fill)) != 0) {
		put(fd, "gemm_skip fp8 cannot copy the inputs to the GPU");
		return;
	}
	struct work w = { .enqueue = enqueue_lt, .lt = &t, .a = a, .b = b, .c = c };
	double s = timed(cu, n, l, &w, lv->warmup, lv->runs, lv->batch);
	if (s > 0)
		put(fd, "gemm fp8 %.6g", 2.0 * (double)m * (double)m * (double)m / s);
	else
		put(fd, "gemm_skip fp8 a cuBLASLt or event call failed");
}

static void gemms(int fd, const struct cuda *cu, const struct nvml *n, struct load *l,
                  const struct level *lv, const struct perf_arg *pa,
                  cuMemAlloc_v2_t *alloc, void *htod, void *host)
{
	static const struct {
		enum gp_dtype t;
		int in, compute, size;
	} kinds[] = {
		{ GP_DTYPE_BF16, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2 },
		{ GP_DTYPE_FP16, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2 },
		{ GP_DTYPE_TF32, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4 },
	};
	char why[512];
	void *h = open_cublas(pa->cublas_dirs, why, sizeof why);
	cublasCreate_v2_t *create = h ? SYM(h, cublasCreate_v2) : NULL;
	Dl_info info;
	const char *path = NULL;
	if (create && dladdr((void *)create, &info) && info.dli_fname) {
		path = info.dli_fname;
		put(fd, "cublas %s", path);
	}
	cublasGemmEx_t *gemm = h ? SYM(h, cublasGemmEx) : NULL;
	void *handle = NULL;
	int rc = 0;
	if (h && (!create || !gemm))
		snprintf(why, sizeof why,
		         "cuBLAS has no cublasCreate_v2 or cublasGemmEx");
	else if (h && (rc = create(&handle)) != 0)
		snprintf(why, sizeof why, "cublasCreate_v2 failed (status %d)", rc);
	size_t bytes = (size_t)lv->gemm_m * (size_t)lv->gemm_m * 4;
	CUdeviceptr a = 0, b = 0, c = 0;
	if (handle && (alloc(&a, bytes) || alloc(&b, bytes) || alloc(&c, bytes))) {
		snprintf(why, sizeof why, "cannot allocate 3 x %zu MiB", bytes >> 20);
		handle = NULL;
	}
	if (handle && !host) {
		snprintf(why, sizeof why, "no pinned host memory for the inputs");
		handle = NULL;
	}
	size_t elems = (size_t)lv->gemm_m * (size_t)lv->gemm_m;
	for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
		const char *dt = gp_dtype_name(kinds[k].t);
		if (!handle) {
			put(fd, "gemm_skip %s %s", dt, why);
			continue;
		}
		fill_random(host, elems, kinds[k].in);
		struct work fill = { .enqueue = enqueue_htod,
			             .fn = htod,
			             .a = a,
			             .host = host,
			             .bytes = elems * (size_t)kinds[k].size };
		if (fill.enqueue(&fill) != 0 || (fill.a = b, fill.enqueue(&fill)) != 0) {
			put(fd, "gemm_skip %s cannot copy the inputs to the GPU", dt);
			continue;
		}
		struct work w = { .enqueue = enqueue_gemm,
			          .fn = (void *)gemm,
			          .handle = handle,
			          .a = a,
			          .b = b,
			          .c = c,
			          .m = lv->gemm_m,
			          .dtype_in = kinds[k].in,
			          .compute = kinds[k].compute };
		if (k == 0)
			soak(cu, n, l, &w, lv->batch, lv->soak_s);
		double s = timed(cu, n, l, &w, lv->warmup, lv->runs, lv->batch);
		double flops = 2.0 * lv->gemm_m * lv->gemm_m * lv->gemm_m;
		if (s > 0)
			put(fd, "gemm %s %.6g", dt, flops / s);
		else
			put(fd, "gemm_skip %s a cuBLAS or event call failed", dt);
	}
	if (!pa->fp8)
		put(fd, "gemm_skip fp8 the model table lists no FP8 peak for this GPU");
	else if (!handle)
		put(fd, "gemm_skip fp8 %s", why);
	else
		fp8_gemm(fd, cu, n, l, lv, path, alloc, htod, host, a, b, c);
}

static void perf(int fd, void *arg)
{
	const struct perf_arg *pa = arg;
	const struct level *lv = &levels[pa->level];
	struct nvml n = { 0 };
	if (!nvml_open(fd, pa->index, &n))
		return;
	struct driver d;
	char why[200];
	if (!driver_open(&d, why, sizeof why)) {
		put(fd, "perf_skip %s", why);
		return;
	}
	void *h = d.lib;
	cuMemAlloc_v2_t *alloc = d.alloc;
	cuMemHostAlloc_t *host_alloc = SYM(h, cuMemHostAlloc);
	struct cuda cu = d.cu;
	void *dtod = SYM(h, cuMemcpyDtoDAsync_v2), *htod = SYM(h, cuMemcpyHtoDAsync_v2),
	     *dtoh = SYM(h, cuMemcpyDtoHAsync_v2);
	if (!host_alloc || !dtod || !htod || !dtoh) {
		put(fd, "perf_skip libcuda.so.1 lacks a driver API entry point verify "
		        "--deep uses");
		return;
	}
	int dev, rc;
	void *ctx = NULL;
	if ((rc = driver_gpu(&d, pa->index, &dev, &ctx, &cu.start, &cu.stop))) {
		put(fd, "perf_skip the CUDA driver API failed on GPU %u (return code %d)",
		    pa->index, rc);
		return;
	}
	struct load l = { 0 };
	CUdeviceptr a, b;
	void *host = NULL;
	if (alloc(&a, lv->copy_bytes) || alloc(&b, lv->copy_bytes)) {
		put(fd, "perf_skip cannot allocate 2 x %zu MiB on GPU %u",
		    lv->copy_bytes >> 20, pa->index);
		return;
	}
	struct work w = { .enqueue = enqueue_dtod,
		          .fn = dtod,
		          .a = a,
		          .b = b,
		          .bytes = lv->copy_bytes };
	double s = timed(&cu, &n, &l, &w, 2, lv->runs, 2);
	if (s > 0) /* each byte is read once and written once */
		put(fd, "memory_bps %.6g", 2.0 * (double)lv->copy_bytes / s);
	if (host_alloc(&host, lv->host_bytes, 0) == 0) {
		w = (struct work){ .enqueue = enqueue_htod,
			           .fn = htod,
			           .a = a,
			           .host = host,
			           .bytes = lv->host_bytes };
		if ((s = timed(&cu, &n, &l, &w, 2, lv->runs, 2)) > 0)
			put(fd, "h2d_bps %.6g", (double)lv->host_bytes / s);
		w.enqueue = enqueue_dtoh;
		w.fn = dtoh;
		if ((s = timed(&cu, &n, &l, &w, 2, lv->runs, 2)) > 0)
			put(fd, "d2h_bps %.6g", (double)lv->host_bytes / s);
	}
	gemms(fd, &cu, &n, &l, lv, pa, alloc, htod, host);
	if (l.have_link)
		put(fd, "load_pcie %u %u", l.gen, l.width);
	if (l.have_reasons)
		put(fd, "load_reasons %llu", l.reasons);
	if (l.temp)
		put(fd, "load_temp %u", l.temp);
	if (l.power_mw)
		put(fd, "load_power %u", l.power_mw / 1000);
}

/* --- peer to peer ------------------------------------------------------ */

struct p2p_arg {
	int n; /* GPUs taking part */
	unsigned index[GP_PROBE_MAX_GPUS]; /* their NVML indexes */
	enum gp_deep_level level;
};

/* One GPU's part in the peer copies: its primary context, a buffer and the
 * events its copies are timed by (an event belongs to one context). */
struct peer_gpu {
	int dev;
	void *ctx, *start, *stop;
	CUdeviceptr buf;
	char why[120]; /* empty when usable */
};

static void p2p(int fd, void *arg)
{
	const struct p2p_arg *pa = arg;
	const struct level *lv = &levels[pa->level];
	struct driver d;
	char why[200];
	if (!driver_open(&d, why, sizeof why)) {
		put(fd, "error %s", why);
		return;
	}
	cuDeviceCanAccessPeer_t *can_access = SYM(d.lib, cuDeviceCanAccessPeer);
	cuCtxEnablePeerAccess_t *enable = SYM(d.lib, cuCtxEnablePeerAccess);
	struct cuda cu = d.cu;
	void *copy = SYM(d.lib, cuMemcpyPeerAsync);
	if (!can_access || !enable || !copy) {
		put(fd, "error libcuda.so.1 lacks a driver API entry point of the "
		        "peer-to-peer copies");
		return;
	}
	int rc;
	struct peer_gpu *g = calloc((size_t)pa->n, sizeof *g);
	if (!g) {
		put(fd, "error out of memory");
		return;
	}
	for (int k = 0; k < pa->n; k++)
		if ((rc = driver_gpu(&d, pa->index[k], &g[k].dev, &g[k].ctx, &g[k].start,
		                     &g[k].stop)) ||
		    (rc = d.alloc(&g[k].buf, lv->peer_bytes)))
			snprintf(g[k].why, sizeof g[k].why,
			         "GPU %u: the driver API failed (return code %d)",
			         pa->index[k], rc);
	const struct nvml none = { 0 }; /* nothing sampled: the GEMMs did */
	struct load l = { 0 };
	for (int i = 0; i < pa->n; i++)
		for (int k = i + 1; k < pa->n; k++) {
			unsigned a = pa->index[i], b = pa->index[k];
			int yes = 0;
			if (g[i].why[0] || g[k].why[0]) {
				put(fd, "p2p_skip %u %u %s", a, b,
				    g[i].why[0] ? g[i].why : g[k].why);
				continue;
			}
			if ((rc = can_access(&yes, g[i].dev, g[k].dev)) || !yes) {
				put(fd,
				    "p2p_skip %u %u cuDeviceCanAccessPeer: GPU %u cannot "
				    "reach GPU %u's memory directly (no NVLink or PCIe "
				    "peer "
				    "path; return code %d)",
				    a, b, a, b, rc);
				continue;
			}
			/* GPU i's context may then use GPU k's memory. */
			if ((rc = d.set_current(g[i].ctx)) ||
			    ((rc = enable(g[k].ctx, 0)) &&
			     rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)) {
				put(fd,
				    "p2p_skip %u %u cuCtxEnablePeerAccess failed (return "
				    "code %d)",
				    a, b, rc);
				continue;
			}
			cu.start = g[i].start;
			cu.stop = g[i].stop;
			struct work w = { .enqueue = enqueue_peer,
				          .fn = copy,
				          .a = g[i].buf,
				          .b = g[k].buf,
				          .src_ctx = g[i].ctx,
				          .dst_ctx = g[k].ctx,
				          .bytes = lv->peer_bytes };
			double s = timed(&cu, &none, &l, &w, 2, lv->runs, 2);
			if (s > 0) /* one way: each byte counted once */
				put(fd, "p2p %u %u %.6g", a, b,
				    (double)lv->peer_bytes / s);
			else
				put(fd, "p2p_skip %u %u a copy or event call failed", a,
				    b);
		}
	free(g);
}

/* --- NCCL all-reduce ---------------------------------------------------- */

/* nccl.h: ncclUniqueId is 128 opaque bytes, passed by value. */
typedef struct {
	char internal[128];
} nccl_id;
typedef int ncclGetUniqueId_t(nccl_id *);
typedef int ncclCommInitRank_t(void **, int, nccl_id, int);
typedef int ncclAllReduce_t(const void *, void *, size_t, int, int, void *, void *);
typedef const char *ncclGetErrorString_t(int);
enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

struct nccl_arg {
	int rank, ranks;
	unsigned index; /* the rank's GPU, its NVML index */
	enum gp_deep_level level;
	int id_in, id_out; /* the pipe rank 0 hands the id on */
	const char *const *dirs; /* where libnccl.so.2 is tried first */
};

/* libnccl.so.2 from dirs, then by soname; NULL with why. */
static void *open_nccl(const char *const *dirs, char *why, size_t len)
{
	char path[PATH_MAX];
	void *h = NULL;
	for (size_t d = 0; !h && dirs && dirs[d]; d++)
		if ((size_t)snprintf(path, sizeof path, "%s/libnccl.so.2", dirs[d]) <
		    sizeof path)
			h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
	if (h)
		return h;
	not_found(why, len, "libnccl.so.2", dirs, "or the loader paths");
	return NULL;
}

static int enqueue_allreduce(struct work *w)
{
	void *buf = (void *)(uintptr_t)w->a;
	return ((ncclAllReduce_t *)w->fn)(buf, buf, w->bytes / 4, NCCL_FLOAT32, NCCL_SUM,
	                                  w->handle, NULL);
}

/* Whole writes of the id, one for each other rank (128 bytes: atomic on a
 * pipe). */
static bool hand_on(int fd, const nccl_id *id, int times)
{
	for (int k = 0; k < times; k++) {
		ssize_t n;
		while ((n = write(fd, id, sizeof *id)) < 0 && errno == EINTR)
			;
		if (n != (ssize_t)sizeof *id)
			return false;
	}
	return true;
}

static bool take_id(int fd, nccl_id *id)
{
	size_t got = 0;
	while (got < sizeof *id) {
		ssize_t n = read(fd, id->internal + got, sizeof *id - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

/* One rank: writes nccl_lib, nccl_time (seconds per all-reduce, the
 * median) or nccl_skip, or an error line. */
static void nccl_rank(int fd, void *arg)
{
	const struct nccl_arg *na = arg;
	const struct level *lv = &levels[na->level];
	/* Rank 0 writes the id, the others read it; each end of the file
	 * then ends when rank 0 ends, whatever happens to it. */
	close(na->rank == 0 ? na->id_in : na->id_out);
	int id_fd = na->rank == 0 ? na->id_out : na->id_in;
	/* NCCL's ranks share buffers through segments in /dev/shm (its SHM
	 * transport and proxy buffers, NVLink boxes too): the host's tmpfs is
	 * writable for them, as for any NCCL job; the root stays read-only. */
	gp_nvchild_keep_writable("/dev/shm");
	char why[512];
	void *h = open_nccl(na->dirs, why, sizeof why);
	if (!h) {
		put(fd, "nccl_skip %s", why);
		return;
	}
	ncclGetUniqueId_t *unique_id = SYM(h, ncclGetUniqueId);
	ncclCommInitRank_t *init_rank = SYM(h, ncclCommInitRank);
	ncclGetErrorString_t *error_string = SYM(h, ncclGetErrorString);
	void *all_reduce = SYM(h, ncclAllReduce);
	Dl_info info;
	if (!unique_id || !init_rank || !all_reduce) {
		put(fd,
		    "nccl_skip libnccl.so.2 lacks ncclGetUniqueId, ncclCommInitRank or "
		    "ncclAllReduce");
		return;
	}
	if (dladdr((void *)init_rank, &info) && info.dli_fname)
		put(fd, "nccl_lib %s", info.dli_fname);
	nccl_id id;
	int rc;
	if (na->rank == 0) {
		if ((rc = unique_id(&id))) {
			put(fd, "error ncclGetUniqueId failed: %s",
			    error_string ? error_string(rc) : "?");
			return;
		}
		if (!hand_on(id_fd, &id, na->ranks - 1)) {
			put(fd, "error cannot hand the NCCL id to the other ranks");
			return;
		}
		close(id_fd);
	} else if (!take_id(id_fd, &id)) {
		put(fd, "error rank 0 handed on no NCCL id (it failed first)");
		return;
	}
	struct driver d;
	int dev;
	void *ctx;
	struct cuda cu;
	if (!driver_open(&d, why, sizeof why)) {
		put(fd, "error %s", why);
		return;
	}
	cu = d.cu;
	if ((rc = driver_gpu(&d, na->index, &dev, &ctx, &cu.start, &cu.stop))) {
		put(fd, "error the CUDA driver API failed on GPU %u (return code %d)",
		    na->index, rc);
		return;
	}
	CUdeviceptr buf;
	if (d.alloc(&buf, lv->nccl_bytes)) {
		put(fd, "error cannot allocate %zu MiB on GPU %u", lv->nccl_bytes >> 20,
		    na->index);
		return;
	}
	void *comm = NULL;
	/* Collective: returns once every rank has joined. */
	if ((rc = init_rank(&comm, na->ranks, id, na->rank))) {
		put(fd, "error ncclCommInitRank failed: %s",
		    error_string ? error_string(rc) : "?");
		return;
	}
	const struct nvml none = { 0 };
	struct load l = { 0 };
	struct work w = { .enqueue = enqueue_allreduce,
		          .fn = all_reduce,
		          .handle = comm,
		          .a = buf,
		          .bytes = lv->nccl_bytes };
	double s = timed(&cu, &none, &l, &w, 5, lv->runs, 2);
	if (s > 0)
		put(fd, "nccl_time %.6g", s);
	else
		put(fd, "error an ncclAllReduce or event call failed");
}

/* --- the parent -------------------------------------------------------- */

void gp_deep_gpu_init(struct gp_deep_gpu *g)
{
	*g = (struct gp_deep_gpu){
		.busy = -1,
		.ecc_volatile_unc = -1,
		.remap_pending = -1,
		.remap_failure = -1,
		.retired_pending = -1,
		.nvlink_active = -1,
		.nvlink_inactive = -1,
		.nvlink_errors = -1,
		.pcie_max_gen = -1,
		.pcie_max_width = -1,
		.load_pcie_gen = -1,
		.load_pcie_width = -1,
		.load_reasons = -1,
		.load_temp_c = -1,
		.slowdown_temp_c = -1,
		.load_power_w = -1,
		.power_limit_w = -1,
	};
}

void gp_deep_gpu_free(struct gp_deep_gpu *g)
{
	free(g->name);
	for (size_t i = 0; i < GP_DTYPE_COUNT; i++)
		free(g->gemm_skip[i]);
	free(g->perf_skip);
	free(g->cublas);
	free(g->cublaslt);
	free(g->health_error);
	free(g->perf_error);
	for (size_t i = 0; i < GP_PROBE_MAX_GPUS; i++)
		free(g->peer_skip[i]);
	gp_deep_gpu_init(g);
}

/* Up to max non-negative integers from v; the count read. */
static int ints(const char *v, long long *out, int max)
{
	int k = 0;
	while (k < max) {
		char *end;
		errno = 0;
		long long x = strtoll(v, &end, 10);
		if (end == v || errno || x < 0 || (*end && *end != ' '))
			break;
		out[k++] = x;
		v = end + strspn(end, " ");
	}
	return k;
}

static int as_int(long long x)
{
	return x > INT_MAX ? INT_MAX : (int)x;
}

static double rate(const char *v)
{
	char *end;
	double x = strtod(v, &end);
	return end != v && *end == '\0' && x > 0 && x < 1e18 ? x : 0;
}

static void set_once(char **dst, const char *v)
{
	if (!*dst)
		*dst = gp_xstrndup(v, 200);
}

static int dtype_of(const char **v)
{
	for (int t = 0; t < GP_DTYPE_COUNT; t++) {
		const char *n = gp_dtype_name((enum gp_dtype)t);
		size_t len = strlen(n);
		if (strncmp(*v, n, len) == 0 && ((*v)[len] == ' ' || !(*v)[len])) {
			*v += len + ((*v)[len] == ' ');
			return t;
		}
	}
	return -1;
}

void gp_nvhealth_parse_line(struct gp_deep_gpu *g, char *line)
{
	char *sp = strchr(line, ' ');
	const char *v = sp ? sp + 1 : "";
	if (sp)
		*sp = '\0';
	long long x[3];
	int n = ints(v, x, 3), t;
	if (strcmp(line, "name") == 0)
		set_once(&g->name, v);
	else if (strcmp(line, "busy") == 0 && n == 1)
		g->busy = as_int(x[0]);
	else if (strcmp(line, "ecc_unc") == 0 && n == 1)
		g->ecc_volatile_unc = x[0];
	else if (strcmp(line, "remap") == 0 && n == 2)
		g->remap_pending = x[0] != 0, g->remap_failure = x[1] != 0;
	else if (strcmp(line, "retired_pending") == 0 && n == 1)
		g->retired_pending = x[0] != 0;
	else if (strcmp(line, "nvlink") == 0 && n == 3)
		g->nvlink_active = as_int(x[0]), g->nvlink_inactive = as_int(x[1]),
		g->nvlink_errors = x[2];
	else if (strcmp(line, "pcie_max") == 0 && n == 2)
		g->pcie_max_gen = as_int(x[0]), g->pcie_max_width = as_int(x[1]);
	else if (strcmp(line, "load_pcie") == 0 && n == 2)
		g->load_pcie_gen = as_int(x[0]), g->load_pcie_width = as_int(x[1]);
	else if (strcmp(line, "load_reasons") == 0 && n == 1)
		g->load_reasons = x[0];
	else if (strcmp(line, "load_temp") == 0 && n == 1)
		g->load_temp_c = as_int(x[0]);
	else if (strcmp(line, "slowdown_temp") == 0 && n == 1)
		g->slowdown_temp_c = as_int(x[0]);
	else if (strcmp(line, "load_power") == 0 && n == 1)
		g->load_power_w = as_int(x[0]);
	else if (strcmp(line, "power_limit") == 0 && n == 1)
		g->power_limit_w = as_int(x[0]);
	else if (strcmp(line, "memory_bps") == 0)
		g->memory_bps = rate(v);
	else if (strcmp(line, "h2d_bps") == 0)
		g->h2d_bps = rate(v);
	else if (strcmp(line, "d2h_bps") == 0)
		g->d2h_bps = rate(v);
	else if (strcmp(line, "gemm") == 0 && (t = dtype_of(&v)) >= 0)
		g->gemm_flops[t] = rate(v);
	else if (strcmp(line, "gemm_skip") == 0 && (t = dtype_of(&v)) >= 0)
		set_once(&g->gemm_skip[t], v);
	else if (strcmp(line, "perf_skip") == 0)
		set_once(&g->perf_skip, v);
	else if (strcmp(line, "cublas") == 0)
		set_once(&g->cublas, v);
	else if (strcmp(line, "cublaslt") == 0)
		set_once(&g->cublaslt, v);
}

void gp_nvhealth_parse_peer_line(struct gp_deep_gpu *gpus, int n, char *line)
{
	bool skip = strncmp(line, "p2p_skip ", 9) == 0;
	if (!skip && strncmp(line, "p2p ", 4) != 0)
		return;
	char *v = line + (skip ? 9 : 4);
	long long x[2];
	if (ints(v, x, 2) != 2 || x[0] >= n || x[1] >= n || x[0] >= x[1] ||
	    x[1] >= GP_PROBE_MAX_GPUS)
		return;
	/* Past the two numbers: the rate or the reason. */
	for (int k = 0; k < 2; k++) {
		v += strspn(v, "0123456789");
		v += strspn(v, " ");
	}
	struct gp_deep_gpu *g = &gpus[x[0]];
	if (skip)
		set_once(&g->peer_skip[x[1]], v);
	else
		g->peer_bps[x[1]] = rate(v);
}

int gp_nvhealth_kernel_log(const struct gp_root *r, char **text, size_t *len)
{
	if (!gp_root_is_host(r))
		return gp_root_read_max(r, "/dev/kmsg", GP_KERNEL_LOG_MAX, text, len);
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct gp_buf b = { 0 };
	char rec[8192];
	/* One record a read; EPIPE: a record was overwritten while we read,
	 * go on; EAGAIN: no more. The count bounds a log that keeps growing. */
	for (size_t records = 0; records < 1000000; records++) {
		ssize_t n = read(fd, rec, sizeof rec);
		if (n < 0 && (errno == EPIPE || errno == EINTR))
			continue;
		if (n <= 0)
			break;
		if (b.len + (size_t)n > GP_KERNEL_LOG_MAX) {
			/* Keep the newest half. */
			size_t drop = b.len / 2;
			memmove(b.data, b.data + drop, b.len - drop);
			b.len -= drop;
		}
		gp_buf_append(&b, rec, (size_t)n);
	}
	close(fd);
	*len = b.len;
	*text = gp_buf_steal(&b);
	return 0;
}

/* What a child's end says, as an error to keep; NULL when it ended well. */
static char *child_error(const struct gp_nvchild *ch, int timeout_ms, const char *error)
{
	if (ch->timed_out)
		return gp_xasprintf("killed after %d s without a result (a hung GPU or "
		                    "driver?)",
		                    timeout_ms / 1000);
	if (error)
		return gp_xstrndup(error, 200);
	if (!ch->ended && WIFSIGNALED(ch->status))
		return gp_xasprintf("crashed in the driver libraries (signal %d, %s)",
		                    WTERMSIG(ch->status),
		                    strsignal(WTERMSIG(ch->status)));
	if (!ch->ended)
		return gp_xstrdup("ended without a result");
	return NULL;
}

/* Hands each line of ch's output but its first "error" line to fn(arg,
 * line); returns how the child failed (child_error, else the read-only
 * namespace it could not enter), NULL when it ended well. */
static char *child_lines(struct gp_nvchild *ch, int timeout_ms,
                         void (*fn)(void *arg, char *line), void *arg)
{
	const char *said = NULL;
	char *save = NULL;
	for (char *l = ch->out.data ? strtok_r(ch->out.data, "\n", &save) : NULL; l;
	     l = strtok_r(NULL, "\n", &save)) {
		if (strncmp(l, "error ", 6) == 0 && !said)
			said = l + 6;
		else
			fn(arg, l);
	}
	char *e = child_error(ch, timeout_ms, said);
	if (!e && ch->read_only_refused)
		e = gp_xasprintf("cannot enter the read-only namespace: %s",
		                 strerror(ch->read_only_refused));
	return e;
}

static void gpu_line(void *arg, char *line)
{
	gp_nvhealth_parse_line(arg, line);
}

struct peers {
	struct gp_deep_gpu *gpus;
	int n;
};

static void peer_line(void *arg, char *line)
{
	const struct peers *p = arg;
	gp_nvhealth_parse_peer_line(p->gpus, p->n, line);
}

static void nccl_line(void *arg, char *line)
{
	gp_nvhealth_parse_nccl_line(arg, line);
}

static int run_all(const struct gp_root *r, const struct gp_run_read_only *ro,
                   struct gp_deep_gpu *gpus, int n, int timeout_ms, gp_nvchild_fn *fn,
                   void *args, size_t arg_size, bool perf_phase)
{
	struct gp_nvchild *ch = gp_xcalloc((size_t)(n ? n : 1), sizeof *ch);
	int rc = 0, started = 0;
	for (; started < n; started++)
		if ((rc = gp_nvchild_start(r, ro, fn,
		                           (char *)args + arg_size * (size_t)started,
		                           &ch[started])) < 0)
			break;
	gp_nvchild_collect(ch, (size_t)started, timeout_ms);
	for (int i = 0; i < started; i++) {
		char *e = child_lines(&ch[i], timeout_ms, gpu_line, &gpus[i]);
		char **dst = perf_phase ? &gpus[i].perf_error : &gpus[i].health_error;
		if (!*dst)
			*dst = e;
		else
			free(e);
		gp_nvchild_free(&ch[i]);
	}
	free(ch);
	return rc;
}

int gp_nvhealth_health(const struct gp_root *r, const struct gp_run_read_only *ro,
                       struct gp_deep_gpu *gpus, int n, int timeout_ms)
{
	_cleanup_free_ uintptr_t *idx = gp_xcalloc((size_t)(n ? n : 1), sizeof *idx);
	for (int i = 0; i < n; i++)
		idx[i] = (uintptr_t)i;
	return run_all(r, ro, gpus, n, timeout_ms, health, idx, sizeof *idx, false);
}

bool gp_deep_gpu_measured(const struct gp_deep_gpu *g)
{
	return !g->perf_error && !g->perf_skip;
}

int gp_nvhealth_p2p(const struct gp_root *r, const struct gp_run_read_only *ro,
                    struct gp_deep_gpu *gpus, int n, enum gp_deep_level level,
                    int timeout_ms, char **error)
{
	*error = NULL;
	_cleanup_free_ struct p2p_arg *arg = gp_xcalloc(1, sizeof *arg);
	arg->level = level == GP_DEEP_FULL ? GP_DEEP_FULL : GP_DEEP_QUICK;
	for (int i = 0; i < n && i < GP_PROBE_MAX_GPUS; i++)
		if (gp_deep_gpu_measured(&gpus[i]))
			arg->index[arg->n++] = (unsigned)i;
	if (arg->n < 2)
		return 0;
	struct gp_nvchild ch;
	int rc = gp_nvchild_start(r, ro, p2p, arg, &ch);
	if (rc < 0)
		return rc;
	gp_nvchild_collect(&ch, 1, timeout_ms);
	struct peers p = { gpus, n };
	*error = child_lines(&ch, timeout_ms, peer_line, &p);
	gp_nvchild_free(&ch);
	return 0;
}

int gp_nvhealth_perf(const struct gp_root *r, const struct gp_run_read_only *ro,
                     struct gp_deep_gpu *gpus, int n, enum gp_deep_level level,
                     const char *const *cublas_dirs, int timeout_ms)
{
	_cleanup_free_ struct perf_arg *args = gp_xcalloc((size_t)(n ? n : 1),
	                                                  sizeof *args);
	for (int i = 0; i < n; i++) {
		const struct gp_gpuspec *spec = gp_gpuspec_lookup(gpus[i].name);
		args[i] = (struct perf_arg){
			.index = (unsigned)i,
			.level = level == GP_DEEP_FULL ? GP_DEEP_FULL : GP_DEEP_QUICK,
			.fp8 = spec && spec->dense_tflops[GP_DTYPE_FP8] > 0,
			.cublas_dirs = cublas_dirs,
		};
	}
	return run_all(r, ro, gpus, n, timeout_ms, perf, args, sizeof *args, true);
}

void gp_deep_nccl_free(struct gp_deep_nccl *x)
{
	free(x->library);
	free(x->skip);
	free(x->error);
	*x = (struct gp_deep_nccl){ 0 };
}

void gp_nvhealth_parse_nccl_line(struct gp_deep_nccl *x, char *line)
{
	char *sp = strchr(line, ' ');
	const char *v = sp ? sp + 1 : "";
	if (sp)
		*sp = '\0';
	double t;
	if (strcmp(line, "nccl_time") == 0 && (t = rate(v)) > 0) {
		if (t > x->seconds) /* the slowest rank's */
			x->seconds = t;
	} else if (strcmp(line, "nccl_lib") == 0) {
		set_once(&x->library, v);
	} else if (strcmp(line, "nccl_skip") == 0) {
		set_once(&x->skip, v);
	}
}

int gp_nvhealth_nccl(const struct gp_root *r, const struct gp_run_read_only *ro,
                     const struct gp_deep_gpu *gpus, int n, enum gp_deep_level level,
                     const char *const *nccl_dirs, int timeout_ms,
                     struct gp_deep_nccl *out)
{
	*out = (struct gp_deep_nccl){ 0 };
	int ids[2];
	_cleanup_free_ struct nccl_arg *args = gp_xcalloc((size_t)(n ? n : 1),
	                                                  sizeof *args);
	int ranks = 0;
	for (int i = 0; i < n && i < GP_PROBE_MAX_GPUS; i++)
		if (gp_deep_gpu_measured(&gpus[i]))
			args[ranks++].index = (unsigned)i;
	if (ranks < 2)
		return 0;
	if (pipe2(ids, O_CLOEXEC) < 0)
		return -errno;
	for (int k = 0; k < ranks; k++) {
		args[k].rank = k;
		args[k].ranks = ranks;
		args[k].level = level == GP_DEEP_FULL ? GP_DEEP_FULL : GP_DEEP_QUICK;
		args[k].id_in = ids[0];
		args[k].id_out = ids[1];
		args[k].dirs = nccl_dirs;
	}
	struct gp_nvchild *ch = gp_xcalloc((size_t)ranks, sizeof *ch);
	int rc = 0, started = 0;
	for (; started < ranks; started++)
		if ((rc = gp_nvchild_start(r, ro, nccl_rank, &args[started],
		                           &ch[started])) < 0)
			break;
	/* Only the ranks hold the pipe now: a rank waiting for the id sees
	 * its end when rank 0 ends. */
	close(ids[0]);
	close(ids[1]);
	gp_nvchild_collect(ch, (size_t)started, timeout_ms);
	out->ranks = started == ranks ? ranks : 0;
	out->bytes = levels[args[0].level].nccl_bytes;
	int killed = 0, own_error_from = -1;
	for (int k = 0; k < started; k++) {
		_cleanup_free_ char *e = child_lines(&ch[k], timeout_ms, nccl_line, out);
		/* The first rank that failed by its own account or crashed, else
		 * the first one killed: a killed rank may have waited for a
		 * failed one in the collective. */
		killed += ch[k].timed_out;
		if (e && (!out->error || (own_error_from < 0 && !ch[k].timed_out))) {
			free(out->error);
			out->error = gp_xasprintf("rank %d (GPU %u): %s", k,
			                          args[k].index, e);
			if (!ch[k].timed_out)
				own_error_from = k;
		}
		gp_nvchild_free(&ch[k]);
	}
	free(ch);
	if (killed > 1 && own_error_from < 0) {
		char *e = gp_xasprintf("%s; %d of the %d ranks were killed", out->error,
		                       killed, ranks);
		free(out->error);
		out->error = e;
	}
	if (out->skip || out->error)
		out->seconds = 0;
	return rc;
}
