/* verify --deep's measurements: each GPU's health from NVML and its
 * performance through the CUDA driver API and cuBLAS, in forked children
 * (gp_nvchild_start, nvprobe.h), one per GPU, all running at once so the
 * GPUs are measured together. Libraries are dlopen'd in the child, never
 * in gpuprov's process; nothing is compiled on the target and no GPU
 * setting is changed. Protocol on the pipe: "key value" lines (see
 * nvhealth.c), parsed into struct gp_deep_gpu. */
#pragma once

#include <stdbool.h>

#include "gpuprov/gpuspec.h"
#include "gpuprov/nvprobe.h"
#include "gpuprov/root.h"

enum gp_deep_level { GP_DEEP_OFF, GP_DEEP_QUICK, GP_DEEP_FULL };

/* What was seen of one GPU; -1 (or 0 for the rates) where unknown or not
 * supported. */
struct gp_deep_gpu {
	char *name;
	int busy; /* compute processes on it (nvmlDeviceGetComputeRunningProcesses) */
	long long ecc_volatile_unc; /* volatile uncorrectable ECC errors */
	int remap_pending, remap_failure; /* remapped rows (Ampere and later) */
	int retired_pending; /* retired pages pending (before Ampere) */
	int nvlink_active, nvlink_inactive;
	long long nvlink_errors; /* replay + recovery + CRC counters, all links */
	int pcie_max_gen, pcie_max_width; /* of the GPU and the slot */
	/* Sampled under load (during the timed copies and GEMMs): the worst. */
	int load_pcie_gen, load_pcie_width;
	long long load_reasons; /* clock-event reason bits seen, OR-ed; -1 */
	int load_temp_c, slowdown_temp_c;
	int load_power_w, power_limit_w;
	/* Bytes per second; memory: a device-to-device copy counted read +
	 * write; host: bytes moved per direction from pinned memory. */
	double memory_bps, h2d_bps, d2h_bps;
	double gemm_flops[GP_DTYPE_COUNT]; /* FLOP/s, 2*M*N*K per GEMM */
	char *gemm_skip[GP_DTYPE_COUNT]; /* why a dtype was not measured */
	char *perf_skip; /* why nothing was measured (libcuda missing, ...) */
	char *cublas; /* the cuBLAS library the GEMMs used, as loaded */
	char *cublaslt; /* the cuBLASLt library of the FP8 GEMM */
	/* A child that failed: "killed after 30 s (a hung driver?)", ... */
	char *health_error, *perf_error;
	/* Peer-to-peer copies from this GPU to GPU j > its index, bytes
	 * moved one way per second (gp_nvhealth_p2p); 0 with peer_skip[j]
	 * set when not measured: no peer access, a failed call. */
	double peer_bps[GP_PROBE_MAX_GPUS];
	char *peer_skip[GP_PROBE_MAX_GPUS];
};

/* Asks NVML about gpus[0..n) (the NVML indexes), one child per GPU, all
 * at once, each killed at timeout_ms. ro: the read-only namespace, NULL for
 * none. 0, or a negative errno when no child could be started. */
int gp_nvhealth_health(const struct gp_root *r, const struct gp_run_read_only *ro,
                       struct gp_deep_gpu *gpus, int n, int timeout_ms);
/* Measures them the same way (level: how long), sampling NVML under load.
 * cuBLAS comes from cublas_dirs (NULL-terminated, may be NULL) first, then
 * the loader paths and /usr/local/cuda/lib64. */
int gp_nvhealth_perf(const struct gp_root *r, const struct gp_run_read_only *ro,
                     struct gp_deep_gpu *gpus, int n, enum gp_deep_level level,
                     const char *const *cublas_dirs, int timeout_ms);
/* Whether GPU g's performance child ended with a result (no perf_error
 * or perf_skip): only such GPUs take part in the peer-to-peer copies. */
bool gp_deep_gpu_measured(const struct gp_deep_gpu *g);
/* Peer-to-peer bandwidth of each pair of measured GPUs, in one child that
 * holds every GPU's primary context: for i < j a copy from GPU i to GPU j
 * (cuMemcpyPeerAsync, one direction, bytes counted once), when
 * cuDeviceCanAccessPeer allows it, into gpus[i].peer_bps[j] or
 * peer_skip[j]. *error: the child's failure (killed, crashed), NULL when it
 * ended well; free it. 0, or a negative errno when no child started. */
int gp_nvhealth_p2p(const struct gp_root *r, const struct gp_run_read_only *ro,
                    struct gp_deep_gpu *gpus, int n, enum gp_deep_level level,
                    int timeout_ms, char **error);
/* The NCCL all-reduce across the measured GPUs (gp_nvhealth_nccl). */
struct gp_deep_nccl {
	int ranks; /* GPUs taking part, one process each; 0: not run */
	size_t bytes; /* the message each rank all-reduces */
	double seconds; /* the slowest rank's median all-reduce time; 0 */
	char *library; /* the libnccl.so.2 loaded (dladdr) */
	char *skip; /* why it was not measured (no libnccl, ...) */
	/* A rank that failed: "rank 1 (GPU 1): killed after 15 s ...". */
	char *error;
};
/* ncclAllReduce (float sum, in place) of a large message across the GPUs
 * whose performance child ended well (gp_deep_gpu_measured), one child per
 * GPU as NCCL's one process per GPU: rank 0's child makes the
 * communicator's id (ncclGetUniqueId) and hands it to the others on a
 * pipe; each joins with ncclCommInitRank, warms up and times the
 * all-reduce with CUDA events, the median of several runs. libnccl.so.2
 * comes from nccl_dirs (NULL-terminated, may be NULL) first, then by
 * soname. All are killed at timeout_ms (one hung rank holds the others
 * in the collective). 0 with *out filled (ranks 0 when fewer than two GPUs
 * were measured), or a negative errno when no child could be started.
 * Clear with gp_deep_nccl_free. */
int gp_nvhealth_nccl(const struct gp_root *r, const struct gp_run_read_only *ro,
                     const struct gp_deep_gpu *gpus, int n, enum gp_deep_level level,
                     const char *const *nccl_dirs, int timeout_ms,
                     struct gp_deep_nccl *out);
void gp_deep_nccl_free(struct gp_deep_nccl *x);
/* One line of a rank's output ("nccl_time S", "nccl_lib PATH",
 * "nccl_skip WHY") into x (exposed for the fuzz target). */
void gp_nvhealth_parse_nccl_line(struct gp_deep_nccl *x, char *line);
/* The kernel log since boot, for its Xid events (xid.h): on the host the
 * records of /dev/kmsg, read without blocking; in another root its
 * /dev/kmsg only when that is a regular file (a test's fixture: an image
 * has no log of this boot). At most GP_KERNEL_LOG_MAX bytes, the newest
 * kept. 0 with *text (NUL-terminated, free it), or a negative errno. */
#define GP_KERNEL_LOG_MAX ((size_t)8 << 20)
int gp_nvhealth_kernel_log(const struct gp_root *r, char **text, size_t *len);
/* One line of a child's output into g (exposed for the fuzz target). */
void gp_nvhealth_parse_line(struct gp_deep_gpu *g, char *line);
/* One line of the peer-to-peer child ("p2p I J BPS", "p2p_skip I J WHY")
 * into gpus[I] of n; others ignored. */
void gp_nvhealth_parse_peer_line(struct gp_deep_gpu *gpus, int n, char *line);
void gp_deep_gpu_init(struct gp_deep_gpu *g);
void gp_deep_gpu_free(struct gp_deep_gpu *g);
