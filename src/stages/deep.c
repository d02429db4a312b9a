/* verify --deep (see deep.h): what the children measured, judged. Each
 * measurement is a finding with the measured value, the expected one
 * (the model's spec figure times the fraction a healthy GPU reaches) and
 * the fraction of it; a GPU's verdict is its worst finding; the node's
 * names the slowest GPU. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/deep.h"
#include "gpuprov/error.h"
#include "gpuprov/gpuspec.h"
#include "gpuprov/nvfabric.h"
#include "gpuprov/profile.h"
#include "gpuprov/stages.h"
#include "gpuprov/util.h"
#include "gpuprov/xid.h"

/* Clock-event reason bits (nvml.h, nvmlClocksEventReason*): the ones that
 * mean hardware trouble under load, and the power cap, a warning. */
#define REASON_SW_POWER_CAP 0x4ull
#define REASON_HW_SLOWDOWN 0x8ull
#define REASON_SW_THERMAL 0x20ull
#define REASON_HW_THERMAL 0x40ull
#define REASON_HW_POWER_BRAKE 0x80ull

/* How long the children may take: the health children (NVML only), and
 * the measurements by level; GPUPROV_DEEP_TIMEOUT_S sets both (tests). */
#define HEALTH_TIMEOUT_MS 30000
#define QUICK_TIMEOUT_MS 18000
#define FULL_TIMEOUT_MS 110000
/* The peer copies after them: all pairs in one child. */
#define P2P_QUICK_TIMEOUT_MS 10000
#define P2P_FULL_TIMEOUT_MS 60000
/* The NCCL all-reduce, one process per GPU, after the peer copies. */
#define NCCL_QUICK_TIMEOUT_MS 20000
#define NCCL_FULL_TIMEOUT_MS 60000

static int timeout_ms(int fallback)
{
	const char *s = getenv("GPUPROV_DEEP_TIMEOUT_S");
	char *end;
	long v = s ? strtol(s, &end, 10) : 0;
	return s && *s && !*end && v > 0 && v <= 3600 ? (int)v * 1000 : fallback;
}

static enum gp_level level_of(enum gp_verdict v)
{
	return v == GP_VERDICT_PASS ? GP_PASS : v == GP_VERDICT_WARN ? GP_WARN : GP_FAIL;
}

struct judged {
	enum gp_level worst; /* of this GPU's findings */
	double slowest; /* the lowest fraction of a performance figure; 2: none */
	const char *slowest_what;
};

/* A GPU's (peer -1) or a pair's subject and how its texts name it. */
struct names {
	char subject[32], who[32];
};

static struct names names_of(int gpu, int peer)
{
	struct names n;
	if (peer >= 0) {
		snprintf(n.subject, sizeof n.subject, "gpu%d_gpu%d", gpu, peer);
		snprintf(n.who, sizeof n.who, "GPU %d to GPU %d", gpu, peer);
	} else {
		snprintf(n.subject, sizeof n.subject, "gpu%d", gpu);
		snprintf(n.who, sizeof n.who, "GPU %d", gpu);
	}
	return n;
}

/* A finding about subject ("gpu0", "gpu0_gpu1"), its text the check said
 * of who ("GPU 0", "GPU 0 to GPU 1"): one text, one id. */
static void add_as(struct gp_report *rep, struct judged *j, const char *base,
                   const char *subject, const char *who, enum gp_level level,
                   const char *check, const char *hint, const char *evidence)
{
	_cleanup_free_ char *text = gp_xasprintf("%s %s", who, check);
	gp_report_add_subject(rep, base, subject, level, text, hint, "%s", evidence);
	if (level != GP_SKIP && level > j->worst)
		j->worst = level;
}

static void add(struct gp_report *rep, struct judged *j, const char *base, int gpu,
                enum gp_level level, const char *check, const char *hint,
                const char *evidence)
{
	struct names n = names_of(gpu, -1);
	add_as(rep, j, base, n.subject, n.who, level, check, hint, evidence);
}

/* dtype: the second label's value (a data type, a peer), or NULL. */
static void fact(struct gp_report *rep, const char *metric, int gpu, const char *dtype,
                 double value)
{
	_cleanup_free_ char *key = dtype
	                               ? gp_xasprintf("deep/%s/%d/%s", metric, gpu, dtype)
	                               : gp_xasprintf("deep/%s/%d", metric, gpu);
	_cleanup_free_ char *v = gp_xasprintf("%.6g", value);
	gp_report_set_fact(rep, key, v);
}

/* A measured rate against expected (0: unknown model, measured only), of
 * GPU gpu, or of the copy from it to GPU peer (-1: none). */
static void judge_rate(struct gp_report *rep, struct judged *j, const char *base, int gpu,
                       int peer, const char *check, double measured, double expected,
                       const char *unit, double scale, const char *how)
{
	double f;
	struct names n = names_of(gpu, peer);
	/* JSON's measurement in base units: FLOP/s, bytes per second. */
	const char *base_unit = scale == 1e12 ? "FLOP/s" : "B/s";
	if (expected <= 0) {
		_cleanup_free_ char *e = gp_xasprintf("%.1f %s (%s); no expected figure "
		                                      "for this model, not compared",
		                                      measured / scale, unit, how);
		add_as(rep, j, base, n.subject, n.who, GP_PASS, check, NULL, e);
		gp_report_measure(rep, measured, 0, base_unit);
		return;
	}
	enum gp_level l = level_of(gp_gpuspec_judge(measured, expected, &f));
	_cleanup_free_ char *e = gp_xasprintf("%.1f %s, expected %.1f, %.0f%% of it (%s)",
	                                      measured / scale, unit, expected / scale,
	                                      f * 100, how);
	add_as(rep, j, base, n.subject, n.who, l, check,
	       peer >= 0 ? "a healthy pair of this model reaches the expected figure: "
	                   "look at both GPUs' NVLink and PCIe findings and "
	                   "'nvidia-smi topo -m'"
	                 : "a healthy GPU of this model reaches the expected figure: "
	                   "look at the clock, PCIe and thermal findings of this GPU, "
	                   "then compare with the node's other GPUs",
	       e);
	gp_report_measure(rep, measured, expected, base_unit);
	if (f < j->slowest) {
		j->slowest = f;
		j->slowest_what = check;
	}
}

static void judge_health(struct gp_report *rep, struct judged *j, int i,
                         const struct gp_deep_gpu *g)
{
	if (g->ecc_volatile_unc >= 0) {
		_cleanup_free_ char *e = gp_xasprintf("%lld volatile uncorrectable ECC "
		                                      "errors since the driver loaded",
		                                      g->ecc_volatile_unc);
		add(rep, j, "deep.ecc", i, g->ecc_volatile_unc ? GP_FAIL : GP_PASS,
		    "uncorrectable ECC errors",
		    "drain the node and reset the GPU (or reboot); repeated errors: RMA",
		    e);
	}
	if (g->remap_pending >= 0)
		add(rep, j, "deep.row_remap", i,
		    g->remap_failure > 0 || g->remap_pending > 0 ? GP_FAIL : GP_PASS,
		    "remapped rows",
		    g->remap_failure > 0
		        ? "a row remap failed: the GPU needs an RMA"
		        : "a row remap is pending: reset the GPU or reboot",
		    g->remap_failure > 0   ? "a row remap failed"
		    : g->remap_pending > 0 ? "a row remap is pending"
		                           : "no remap pending or failed");
	if (g->retired_pending >= 0)
		add(rep, j, "deep.retired_pages", i,
		    g->retired_pending ? GP_FAIL : GP_PASS, "retired pages",
		    "a page retirement is pending: reboot",
		    g->retired_pending ? "a page retirement is pending"
		                       : "no page retirement pending");
	if (g->nvlink_active >= 0) {
		_cleanup_free_ char *e = gp_xasprintf(
		    "%d NVLink links active, %d inactive, "
		    "%lld replay/recovery/CRC errors",
		    g->nvlink_active, g->nvlink_inactive, g->nvlink_errors);
		add(rep, j, "deep.nvlink", i,
		    g->nvlink_inactive > 0 || g->nvlink_errors > 0 ? GP_WARN : GP_PASS,
		    "NVLink state and errors",
		    "an inactive link or link errors slow collectives: look at "
		    "nvidia-smi "
		    "nvlink -s and the kernel log",
		    e);
	}
	if (g->load_pcie_gen > 0 && g->pcie_max_gen > 0) {
		bool down = g->load_pcie_width < g->pcie_max_width ||
		            g->load_pcie_gen < g->pcie_max_gen;
		_cleanup_free_ char *e = gp_xasprintf(
		    "PCIe Gen%d x%d under load, the GPU "
		    "and slot allow Gen%d x%d",
		    g->load_pcie_gen, g->load_pcie_width, g->pcie_max_gen,
		    g->pcie_max_width);
		add(rep, j, "deep.pcie_link", i, down ? GP_FAIL : GP_PASS,
		    "PCIe link under load",
		    "the link trained below its maximum: reseat the GPU or its riser, "
		    "check "
		    "the slot's BIOS setting",
		    e);
	}
	if (g->load_reasons >= 0) {
		unsigned long long r = (unsigned long long)g->load_reasons;
		const unsigned long long bad = REASON_HW_SLOWDOWN | REASON_SW_THERMAL |
		                               REASON_HW_THERMAL | REASON_HW_POWER_BRAKE;
		_cleanup_free_ char *e = gp_xasprintf(
		    "clock-event reasons under load 0x%llx%s%s%s%s%s", r,
		    r & REASON_HW_SLOWDOWN ? " hardware-slowdown" : "",
		    r & REASON_SW_THERMAL ? " software-thermal" : "",
		    r & REASON_HW_THERMAL ? " hardware-thermal" : "",
		    r & REASON_HW_POWER_BRAKE ? " power-brake" : "",
		    r & REASON_SW_POWER_CAP ? " power-cap" : "");
		add(rep, j, "deep.clocks", i,
		    r & bad                   ? GP_FAIL
		    : r & REASON_SW_POWER_CAP ? GP_WARN
		                              : GP_PASS,
		    "clock slowdowns under load",
		    r & bad
		        ? "the GPU slows itself down: check its cooling, power supply "
		          "and the power-brake signal"
		        : "the GPU runs at its power limit: compare the limit with the "
		          "model's default",
		    e);
	}
	if (g->load_temp_c >= 0) {
		_cleanup_free_ char *e = gp_xasprintf(
		    "%d C under load (slowdown at %d C), %d W of a %d W limit",
		    g->load_temp_c, g->slowdown_temp_c, g->load_power_w,
		    g->power_limit_w);
		add(rep, j, "deep.thermal", i,
		    g->slowdown_temp_c > 0 && g->load_temp_c >= g->slowdown_temp_c - 5
		        ? GP_WARN
		        : GP_PASS,
		    "temperature and power under load",
		    "the GPU runs near its slowdown temperature: check the airflow", e);
	}
}

static void judge_perf(struct gp_report *rep, struct judged *j, int i,
                       const struct gp_deep_gpu *g, const struct gp_gpuspec *spec)
{
	if (g->perf_skip) {
		add(rep, j, "deep.perf", i, GP_FAIL, "performance measurement",
		    "check the driver stage's verify (libcuda must load and see the GPU)",
		    g->perf_skip);
		return;
	}
	if (g->memory_bps > 0) {
		fact(rep, "memory_bps", i, NULL, g->memory_bps);
		judge_rate(rep, j, "deep.memory_bandwidth", i, -1,
		           "device memory bandwidth", g->memory_bps,
		           spec ? spec->memory_gbps * 1e9 * spec->memory_healthy : 0,
		           "GB/s", 1e9,
		           "a device-to-device copy, bytes read plus written");
	}
	double host = g->pcie_max_gen > 0
	                  ? gp_pcie_expected_gbps(g->pcie_max_gen, g->pcie_max_width) *
	                        1e9
	                  : 0;
	if (g->h2d_bps > 0) {
		fact(rep, "h2d_bps", i, NULL, g->h2d_bps);
		judge_rate(rep, j, "deep.host_to_device", i, -1,
		           "host-to-device bandwidth", g->h2d_bps, host, "GB/s", 1e9,
		           "from pinned memory, per direction");
	}
	if (g->d2h_bps > 0) {
		fact(rep, "d2h_bps", i, NULL, g->d2h_bps);
		judge_rate(rep, j, "deep.device_to_host", i, -1,
		           "device-to-host bandwidth", g->d2h_bps, host, "GB/s", 1e9,
		           "to pinned memory, per direction");
	}
	static const char *const bases[GP_DTYPE_COUNT] = {
		"deep.gemm_bf16", "deep.gemm_fp16", "deep.gemm_tf32", "deep.gemm_fp8"
	};
	static const char *const checks[GP_DTYPE_COUNT] = { "dense BF16 GEMM throughput",
		                                            "dense FP16 GEMM throughput",
		                                            "dense TF32 GEMM throughput",
		                                            "dense FP8 GEMM throughput" };
	for (int t = 0; t < GP_DTYPE_COUNT; t++) {
		double peak = spec ? spec->dense_tflops[t] * 1e12 : 0;
		if (spec && peak <= 0)
			continue; /* the model has no such tensor-core path */
		const char *check = checks[t];
		if (g->gemm_flops[t] > 0) {
			fact(rep, "gemm_flops", i, gp_dtype_name((enum gp_dtype)t),
			     g->gemm_flops[t]);
			bool lt = t == GP_DTYPE_FP8;
			const char *lib = lt ? g->cublaslt : g->cublas;
			_cleanup_free_ char *how = gp_xasprintf(
			    "%s (%s), 2*M*N*K FLOPs, median of the timed runs",
			    lt ? "cuBLASLt FP8 E4M3 GEMM, BF16 out" : "cuBLAS GEMM",
			    lib ? lib : "library not named");
			judge_rate(rep, j, bases[t], i, -1, check, g->gemm_flops[t],
			           spec ? peak * spec->gemm_healthy : 0, "TFLOPS", 1e12,
			           how);
		} else if (g->gemm_skip[t]) {
			add(rep, j, bases[t], i, GP_SKIP, check,
			    t == GP_DTYPE_FP8
			        ? "FP8 needs a GPU the model table lists with an FP8 "
			          "peak and the CUDA toolkit's cuBLASLt (the cuda stage)"
			        : "install the CUDA toolkit's cuBLAS (the cuda stage) to "
			          "measure it",
			    g->gemm_skip[t]);
		}
	}
}

/* GPU i's pairs with the later GPUs: the copy from i to k against the
 * NVLink figure when both have active links, else the narrower PCIe
 * link's. A pair without peer access warns; a failed child fails each
 * pair it did not measure. The pair counts in both GPUs' verdicts. */
static void judge_peers(struct gp_report *rep, struct judged *js, int i,
                        const struct gp_deep_gpu *gpus, int n, const char *child_error)
{
	const struct gp_deep_gpu *g = &gpus[i];
	if (!gp_deep_gpu_measured(g))
		return;
	const struct gp_gpuspec *spec = gp_gpuspec_lookup(g->name);
	for (int k = i + 1; k < n; k++) {
		const struct gp_deep_gpu *p = &gpus[k];
		if (!gp_deep_gpu_measured(p))
			continue;
		struct judged pair = { GP_PASS, 2, NULL };
		struct names names = names_of(i, k);
		const char *check = "peer-to-peer bandwidth";
		if (g->peer_bps[k] > 0) {
			const struct gp_gpuspec *peer_spec = gp_gpuspec_lookup(p->name);
			bool nvlink = g->nvlink_active > 0 && p->nvlink_active > 0 &&
			              spec && peer_spec && spec->nvlink_gbps > 0 &&
			              peer_spec->nvlink_gbps > 0;
			/* The narrower of the two known links. */
			double mine = gp_pcie_expected_gbps(g->pcie_max_gen,
			                                    g->pcie_max_width),
			       theirs = gp_pcie_expected_gbps(p->pcie_max_gen,
			                                      p->pcie_max_width);
			const struct gp_deep_gpu *link = theirs > 0 && (mine <= 0 ||
			                                                theirs < mine)
			                                     ? p
			                                     : g;
			double expected = gp_peer_expected_gbps(spec, peer_spec, nvlink,
			                                        link->pcie_max_gen,
			                                        link->pcie_max_width) *
			                  1e9;
			_cleanup_free_ char *peer = gp_xasprintf("%d", k);
			fact(rep, "p2p_bps", i, peer, g->peer_bps[k]);
			judge_rate(rep, &pair, "deep.p2p", i, k, check, g->peer_bps[k],
			           expected, "GB/s", 1e9,
			           nvlink
			               ? "cuMemcpyPeerAsync one way, bytes counted once; "
			                 "NVLink: half the model's NVLink figure"
			               : "cuMemcpyPeerAsync one way, bytes counted once; "
			                 "PCIe: the narrower link's figure, no active "
			                 "NVLink on both GPUs");
		} else if (g->peer_skip[k] || !child_error) {
			add_as(
			    rep, &pair, "deep.p2p", names.subject, names.who, GP_WARN,
			    check,
			    "without peer access, collectives go through host memory: "
			    "look at 'nvidia-smi topo -m' and the IOMMU and ACS settings",
			    g->peer_skip[k] ? g->peer_skip[k]
			                    : "the peer-to-peer child said nothing of "
			                      "this pair");
		} else {
			_cleanup_free_ char *e = gp_xasprintf(
			    "the peer-to-peer child: %s", child_error);
			add_as(
			    rep, &pair, "deep.p2p", names.subject, names.who, GP_FAIL,
			    check,
			    "look at the kernel log (Xid) and nvidia-smi for both GPUs",
			    e);
		}
		for (int m = 0; m < 2; m++) {
			struct judged *j = &js[m ? k : i];
			if (pair.worst > j->worst)
				j->worst = pair.worst;
			if (pair.slowest < j->slowest) {
				j->slowest = pair.slowest;
				j->slowest_what = pair.slowest_what;
			}
		}
	}
}

/* Where the profile put an NVIDIA library (wheel: "cublas", "nccl"), for
 * the children to try first: the cuda stage's toolkit (lib64) and the
 * pytorch stage's environment's NVIDIA wheels
 * (site-packages/nvidia/WHEEL/lib of each python3.* there). */
static char **library_dirs(struct gp_ctx *c, const char *wheel)
{
	char **dirs = gp_xcalloc(1, sizeof *dirs);
	if (!c->profile)
		return dirs;
	_cleanup_free_ char *toolkit = gp_cuda_toolkit_path(
	    gp_profile_stage(c->profile, gp_stage_cuda.name));
	if (toolkit) {
		_cleanup_free_ char *lib = gp_xasprintf("%s/lib64", toolkit);
		gp_strv_push(&dirs, lib);
	}
	const cJSON *py = gp_profile_stage(c->profile, gp_stage_pytorch.name);
	_cleanup_free_ char *env = py ? gp_pytorch_envdir(py) : NULL;
	_cleanup_free_ char *lib = env ? gp_xasprintf("%s/lib", env) : NULL;
	_cleanup_strv_ char **names = NULL;
	if (!lib || gp_root_list_dir(&c->root, lib, &names) < 0)
		return dirs;
	/* A bound: an environment has one Python. */
	for (size_t i = 0, kept = 0; names[i] && kept < 4; i++)
		if (gp_str_starts_with(names[i], "python3.") && !strchr(names[i], '/')) {
			_cleanup_free_ char *d = gp_xasprintf(
			    "%s/%s/site-packages/nvidia/%s/lib", lib, names[i], wheel);
			gp_strv_push(&dirs, d);
			kept++;
		}
	return dirs;
}

/* GPU i's NVSwitch fabric state, on a box whose NVML reports one (a GPU
 * without NVSwitch says "Not Supported": nothing to judge). */
static void judge_fabric(struct gp_report *rep, struct judged *j, int i,
                         const struct gp_nvfabric *f)
{
	if (!f || i >= f->count || i >= GP_PROBE_MAX_GPUS || f->rc[i] != 0 ||
	    f->state[i] < 0 || f->state[i] == GP_FABRIC_NOT_SUPPORTED)
		return;
	bool done = f->state[i] == GP_FABRIC_COMPLETED && f->status[i] == 0;
	_cleanup_free_ char *e = gp_xasprintf("NVSwitch fabric state %s (status %d)",
	                                      gp_fabric_state_name(f->state[i]),
	                                      f->status[i]);
	add(rep, j, "deep.fabric", i, done ? GP_PASS : GP_FAIL, "NVSwitch fabric state",
	    "until the fabric manager has registered the GPU, CUDA fails with error "
	    "802 (cudaErrorSystemNotReady, \"system not yet initialized\") while "
	    "nvidia-smi looks fine: see 'gpuprov verify --only fabric_manager' and "
	    "'systemctl status nvidia-fabricmanager'",
	    e);
}

/* The NCCL all-reduce across the node (one finding, deep.nccl_allreduce):
 * its bus bandwidth against what a healthy peer link of the GPUs reaches
 * one way (gp_peer_expected_gbps: NVLink when every GPU has active links,
 * else the narrowest PCIe link). The level, for the node's verdict. */
static enum gp_level judge_nccl(struct gp_report *rep, const struct gp_deep_gpu *gpus,
                                int n, bool pytorch, const struct gp_deep_nccl *x)
{
	const char *base = "deep.nccl_allreduce", *check = "NCCL all-reduce bandwidth";
	const char *wheel_hint = "the pytorch stage's environment brings NVIDIA's NCCL "
	                         "wheel (nvidia/nccl/lib/libnccl.so.2)";
	if (!pytorch) {
		gp_report_add(rep, base, GP_SKIP, check, wheel_hint,
		              "not measured: the profile has no pytorch stage, whose "
		              "environment brings NCCL");
		return GP_PASS;
	}
	if (x->ranks < 2) {
		gp_report_add(rep, base, GP_SKIP, check, NULL,
		              n < 2
		                  ? "not measured: one GPU, nothing to all-reduce across"
		                  : "not measured: fewer than two GPUs were measured");
		return GP_PASS;
	}
	if (x->error) {
		gp_report_add(
		    rep, base, GP_FAIL, check,
		    "a rank that fails or hangs holds the others in the "
		    "collective: look at the kernel log (Xid), 'nvidia-smi topo "
		    "-m' and NCCL_DEBUG=INFO in the Python environment",
		    "%d ranks, one per GPU: %s", x->ranks, x->error);
		return GP_FAIL;
	}
	if (x->skip || x->seconds <= 0) {
		gp_report_add(rep, base, GP_SKIP, check, wheel_hint, "not measured: %s",
		              x->skip ? x->skip : "no rank reported a time");
		return GP_PASS;
	}
	double algbw = (double)x->bytes / x->seconds;
	double busbw = algbw * 2 * (x->ranks - 1) / x->ranks;
	bool nvlink = true;
	const struct gp_deep_gpu *narrow = NULL;
	for (int i = 0; i < n; i++) {
		if (!gp_deep_gpu_measured(&gpus[i]))
			continue;
		const struct gp_gpuspec *spec = gp_gpuspec_lookup(gpus[i].name);
		nvlink = nvlink && gpus[i].nvlink_active > 0 && spec &&
		         spec->nvlink_gbps > 0;
		if (!narrow ||
		    gp_pcie_expected_gbps(gpus[i].pcie_max_gen, gpus[i].pcie_max_width) <
		        gp_pcie_expected_gbps(narrow->pcie_max_gen,
		                              narrow->pcie_max_width))
			narrow = &gpus[i];
	}
	double expected = 0;
	for (int i = 0; i < n; i++) {
		if (!gp_deep_gpu_measured(&gpus[i]))
			continue;
		double e = gp_peer_expected_gbps(gp_gpuspec_lookup(narrow->name),
		                                 gp_gpuspec_lookup(gpus[i].name), nvlink,
		                                 narrow->pcie_max_gen,
		                                 narrow->pcie_max_width) *
		           1e9;
		if (expected == 0 || e < expected)
			expected = e;
	}
	_cleanup_free_ char *how = gp_xasprintf(
	    "ncclAllReduce of %zu MiB, float sum, %d ranks, the slowest rank's "
	    "median; algorithm bandwidth %.1f GB/s (bytes / time), bus bandwidth = "
	    "algorithm x 2(n-1)/n; %s; %s",
	    x->bytes >> 20, x->ranks, algbw / 1e9,
	    nvlink ? "NVLink: half the model's NVLink figure"
	           : "PCIe: the narrowest link's figure, not every GPU has active "
	             "NVLink",
	    x->library ? x->library : "library not named");
	_cleanup_free_ char *v = gp_xasprintf("%.6g", busbw);
	gp_report_set_fact(rep, "deep/nccl_allreduce/busbw", v);
	free(v);
	v = gp_xasprintf("%.6g", algbw);
	gp_report_set_fact(rep, "deep/nccl_allreduce/algbw", v);
	free(v);
	v = gp_xasprintf("%d", x->ranks);
	gp_report_set_fact(rep, "deep/nccl_allreduce/ranks", v);
	if (expected <= 0) {
		gp_report_add(rep, base, GP_PASS, check, NULL,
		              "%.1f GB/s bus bandwidth (%s); no expected figure for "
		              "these GPUs, not compared",
		              busbw / 1e9, how);
		gp_report_measure(rep, busbw, 0, "B/s");
		return GP_PASS;
	}
	double f;
	enum gp_level l = level_of(gp_gpuspec_judge(busbw, expected, &f));
	gp_report_add(rep, base, l, check,
	              "a healthy node of these GPUs reaches the expected figure: look "
	              "at the GPUs' NVLink, PCIe and peer-to-peer findings and "
	              "'nvidia-smi topo -m'",
	              "%.1f GB/s bus bandwidth, expected %.1f, %.0f%% of it (%s)",
	              busbw / 1e9, expected / 1e9, f * 100, how);
	gp_report_measure(rep, busbw, expected, "B/s");
	return l;
}

/* Xid events since boot, for the whole node: the kernel log names a GPU
 * by its PCI address, which is said as it is. */
static void judge_xid(struct gp_ctx *c, struct gp_report *rep)
{
	_cleanup_free_ char *log = NULL;
	size_t len = 0;
	int rc = gp_nvhealth_kernel_log(&c->root, &log, &len);
	if (rc == -ENOENT && !gp_root_is_host(&c->root))
		return; /* an image: no log of this boot */
	if (rc < 0) {
		gp_report_add(rep, "deep.xid", GP_WARN, "Xid events since boot",
		              "run as root, or read 'dmesg | grep Xid' yourself",
		              "cannot read the kernel log (/dev/kmsg): %s",
		              strerror(-rc));
		return;
	}
	struct gp_xid_event ev[64];
	size_t n = gp_xid_scan(log, len, ev, ARRAY_SIZE(ev));
	size_t kept = n < ARRAY_SIZE(ev) ? n : ARRAY_SIZE(ev), critical = 0;
	struct gp_buf seen = { 0 };
	for (size_t i = 0; i < kept; i++) {
		bool bad = gp_xid_is_critical(ev[i].xid);
		critical += bad;
		if (bad && critical <= 8)
			gp_buf_printf(&seen, "%sXid %d on %s", critical > 1 ? ", " : "",
			              ev[i].xid, ev[i].pci);
	}
	if (critical)
		gp_report_add(
		    rep, "deep.xid", GP_FAIL, "Xid events since boot",
		    "drain the node and look up the codes in NVIDIA's Xid catalog "
		    "(docs/reference/gpu-health.md); a reboot clears the log",
		    "%zu critical Xid event%s in the kernel log: %s%s", critical,
		    critical == 1 ? "" : "s", seen.data, critical > 8 ? ", ..." : "");
	else
		gp_report_add(
		    rep, "deep.xid", GP_PASS, "Xid events since boot", NULL,
		    "no critical Xid event in the kernel log (%zu other%s, such as "
		    "an application's fault)",
		    n, n == 1 ? "" : "s");
	gp_buf_free(&seen);
}

static int no_child(struct gp_ctx *c)
{
	return gp_fail(c->err, GP_EFAILED,
	               "verify --deep: cannot start a measuring child process: out of "
	               "processes or memory?");
}

int gp_deep_verify(struct gp_ctx *c, enum gp_deep_level level, bool force,
                   struct gp_report *rep)
{
	struct gp_nvprobe p;
	int rc = gp_ctx_nvprobe(c, HEALTH_TIMEOUT_MS, &p);
	int n = rc == 0 && !p.error && p.nvml.init_rc == 0 ? p.nvml.count : 0;
	if (n > GP_PROBE_MAX_GPUS)
		n = GP_PROBE_MAX_GPUS;
	if (n <= 0) {
		gp_report_add(rep, "deep.gpus", GP_FAIL, "GPUs to measure",
		              "run 'gpuprov verify --only driver' for why NVML sees none",
		              "NVML sees no GPU%s%s", p.error ? ": " : "",
		              p.error ? p.error : "");
		gp_nvprobe_free(&p);
		return 0;
	}
	gp_nvprobe_free(&p);
	struct gp_run_read_only ro;
	gp_run_read_only_init(&ro, c->root.dir);
	const struct gp_run_read_only *rop = c->read_only_refused ? NULL : &ro;
	struct gp_deep_gpu *gpus = gp_xcalloc((size_t)n, sizeof *gpus);
	for (int i = 0; i < n; i++)
		gp_deep_gpu_init(&gpus[i]);
	int ret = 0;
	char *p2p_error = NULL;
	struct judged *js = NULL;
	char **dirs = NULL, **nccl_dirs = NULL;
	struct gp_deep_nccl nccl = { 0 };
	struct gp_nvfabric fabric;
	bool have_fabric = false;
	const cJSON *pytorch = c->profile
	                           ? gp_profile_stage(c->profile, gp_stage_pytorch.name)
	                           : NULL;
	if (gp_nvhealth_health(&c->root, rop, gpus, n, timeout_ms(HEALTH_TIMEOUT_MS)) <
	    0) {
		ret = no_child(c);
		goto out;
	}
	int busy_gpu = -1;
	for (int i = 0; i < n && busy_gpu < 0; i++)
		if (gpus[i].busy > 0)
			busy_gpu = i;
	if (busy_gpu >= 0) {
		gp_report_add(rep, "deep.idle", force ? GP_WARN : GP_FAIL, "GPUs idle",
		              "run again when the GPUs are idle, or with --force",
		              "GPU %d runs %d compute process%s: %s", busy_gpu,
		              gpus[busy_gpu].busy, gpus[busy_gpu].busy == 1 ? "" : "es",
		              force ? "measured anyway (--force): the figures are low"
		                    : "not measured (it would be wrong and would disturb "
		                      "them)");
	} else {
		gp_report_add(rep, "deep.idle", GP_PASS, "GPUs idle", NULL,
		              "no compute process on %d GPU%s", n, n == 1 ? "" : "s");
	}
	judge_xid(c, rep);
	/* NVSwitch boxes: a GPU the fabric manager has not registered. */
	if (gp_ctx_nvfabric(c, HEALTH_TIMEOUT_MS, &fabric) == 0) {
		have_fabric = !fabric.error && fabric.loaded && fabric.init_rc == 0 &&
		              fabric.api;
		if (!have_fabric)
			gp_nvfabric_clear(&fabric);
	}
	bool measure = busy_gpu < 0 || force;
	dirs = library_dirs(c, "cublas");
	if (measure &&
	    gp_nvhealth_perf(&c->root, rop, gpus, n, level, (const char *const *)dirs,
	                     timeout_ms(level == GP_DEEP_FULL ? FULL_TIMEOUT_MS
	                                                      : QUICK_TIMEOUT_MS)) < 0) {
		ret = no_child(c);
		goto out;
	}
	if (measure &&
	    gp_nvhealth_p2p(&c->root, rop, gpus, n, level,
	                    timeout_ms(level == GP_DEEP_FULL ? P2P_FULL_TIMEOUT_MS
	                                                     : P2P_QUICK_TIMEOUT_MS),
	                    &p2p_error) < 0) {
		ret = no_child(c);
		goto out;
	}
	nccl_dirs = library_dirs(c, "nccl");
	if (measure && pytorch &&
	    gp_nvhealth_nccl(&c->root, rop, gpus, n, level,
	                     (const char *const *)nccl_dirs,
	                     timeout_ms(level == GP_DEEP_FULL ? NCCL_FULL_TIMEOUT_MS
	                                                      : NCCL_QUICK_TIMEOUT_MS),
	                     &nccl) < 0) {
		ret = no_child(c);
		goto out;
	}
	js = gp_xcalloc((size_t)n, sizeof *js);
	for (int i = 0; i < n; i++)
		js[i] = (struct judged){ GP_PASS, 2, NULL };
	enum gp_level node = GP_PASS, nccl_level = GP_PASS;
	int slowest_gpu = -1;
	double slowest = 2;
	const char *slowest_what = NULL;
	for (int i = 0; i < n; i++) {
		const struct gp_deep_gpu *g = &gpus[i];
		struct judged *j = &js[i];
		const struct gp_gpuspec *spec = gp_gpuspec_lookup(g->name);
		const char *err = g->health_error ? g->health_error : g->perf_error;
		if (err)
			add(rep, j, "deep.child", i, GP_FAIL, "measuring child process",
			    "look at the kernel log (Xid) and nvidia-smi for this GPU",
			    err);
		judge_fabric(rep, j, i, have_fabric ? &fabric : NULL);
		judge_health(rep, j, i, g);
		if (measure && !g->perf_error) {
			judge_perf(rep, j, i, g, spec);
			judge_peers(rep, js, i, gpus, n, p2p_error);
		}
		_cleanup_free_ char *e = gp_xasprintf(
		    "%s (%s): %s%s%s", g->name ? g->name : "unknown",
		    spec ? spec->model : "not in the model table",
		    gp_level_name(j->worst), j->slowest_what ? ", slowest: " : "",
		    j->slowest_what ? j->slowest_what : "");
		add(rep, j, "deep.verdict", i, j->worst,
		    "the GPU's verdict (its worst finding)",
		    "see this GPU's other deep findings", e);
		if (j->worst > node)
			node = j->worst;
		if (j->slowest < slowest) {
			slowest = j->slowest;
			slowest_gpu = i;
			slowest_what = j->slowest_what;
		}
	}
	if (measure) {
		nccl_level = judge_nccl(rep, gpus, n, pytorch != NULL, &nccl);
		if (nccl_level > node)
			node = nccl_level;
	}
	if (slowest_gpu >= 0)
		gp_report_add(rep, "deep.node", node, "the node's verdict",
		              "see the slowest GPU's findings",
		              "%d GPU%s, %s; slowest: GPU %d at %.0f%% of expected "
		              "(%s)%s%s",
		              n, n == 1 ? "" : "s", gp_level_name(node), slowest_gpu,
		              slowest * 100, slowest_what,
		              nccl_level > GP_PASS ? "; NCCL all-reduce: " : "",
		              nccl_level > GP_PASS ? gp_level_name(nccl_level) : "");
	else
		gp_report_add(rep, "deep.node", node, "the node's verdict",
		              "see the GPUs' findings", "%d GPU%s, %s; nothing measured",
		              n, n == 1 ? "" : "s", gp_level_name(node));
out:
	if (have_fabric)
		gp_nvfabric_clear(&fabric);
	gp_deep_nccl_free(&nccl);
	gp_strv_free(nccl_dirs);
	gp_strv_free(dirs);
	free(p2p_error);
	free(js);
	for (int i = 0; i < n; i++)
		gp_deep_gpu_free(&gpus[i]);
	free(gpus);
	return ret;
}
