/* NVML (libnvidia-ml.so.1) and the CUDA driver API (libcuda.so.1) asked
 * through dlopen, as the target root's programs would see them. The
 * libraries are loaded in a forked child that chroots into the root first
 * (when the root is not /): gpuprov's own process never maps them, a
 * crashing or hanging library costs only the child (killed after the
 * timeout), and the root's libraries are found by the root's own loader
 * paths while the host's loader and libc, already mapped, serve them (so a
 * root without a dynamic loader, such as a mounted image or a busybox
 * fixture, can still be probed). The child writes "key value" lines on a
 * pipe; the parent parses them into the typed results below. Missing
 * symbols are reported, never called. Needs root (chroot) for another root.
 * The child sees the root read-only (gp_nvprobe_run's read_only). */
#pragma once

#include <stdbool.h>

#include "gpuprov/root.h"

/* NVIDIA's return codes the verify hints tell apart. */
#define GP_NVML_SUCCESS 0
#define GP_NVML_ERROR_DRIVER_NOT_LOADED 9
#define GP_NVML_ERROR_LIB_RM_VERSION_MISMATCH 18
#define GP_CUDA_SUCCESS 0
#define GP_CUDA_ERROR_STUB_LIBRARY 34
#define GP_CUDA_ERROR_INSUFFICIENT_DRIVER 35
#define GP_CUDA_ERROR_NO_DEVICE 100
#define GP_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH 803

#define GP_PROBE_MAX_GPUS 64

struct gp_nvml_probe {
	bool loaded; /* dlopen succeeded */
	char *load_error; /* dlerror(), or the missing symbol */
	int init_rc; /* nvmlInit_v2; -1 when not called */
	char *init_error; /* nvmlErrorString(init_rc) */
	char *driver_version; /* nvmlSystemGetDriverVersion, or NULL */
	int count; /* nvmlDeviceGetCount_v2; -1 when unknown */
	char *names[GP_PROBE_MAX_GPUS];
	int persistence[GP_PROBE_MAX_GPUS]; /* 1 on, 0 off, -1 unknown */
};

/* The CUDA driver API (libcuda.so.1) as the root sees it; not to be mixed up
 * with the toolkit probe of cudatk.h (gp_cuda_probe). */
struct gp_libcuda_probe {
	bool loaded;
	char *load_error;
	int version_rc; /* cuDriverGetVersion; -1 when not called */
	int version; /* 12040 = 12.4 */
	int init_rc; /* cuInit(0); -1 when not called */
	char *init_error; /* cuGetErrorString(init_rc) */
	int count; /* cuDeviceGetCount; -1 when unknown */
	char *names[GP_PROBE_MAX_GPUS];
};

struct gp_nvprobe {
	struct gp_nvml_probe nvml;
	struct gp_libcuda_probe cuda;
	char *error; /* the probe itself failed (fork, chroot, crash, timeout) */
	/* The read-only namespace could not be made: its errno; nothing was
	 * probed. */
	int read_only_refused;
};

/* 0 with *p filled (see p->error for a probe that died part-way), or a
 * negative errno when no probe could be started. With read_only the child
 * enters a private mount namespace where the root and every mount below it
 * are read-only before it chroots (gp_run_enter_read_only), so a library
 * that writes fails with EROFS; when that namespace cannot be made nothing
 * is probed: -errno with p->read_only_refused set (the caller decides, as
 * gp_ctx_nvprobe does, whether to probe without it). Free with
 * gp_nvprobe_free. */
int gp_nvprobe_run(const struct gp_root *r, int timeout_ms, bool read_only,
                   struct gp_nvprobe *p);
void gp_nvprobe_free(struct gp_nvprobe *p);

/* The forked child behind gp_nvprobe_run, for other NVML and libcuda
 * children (nvhealth.h): fn(fd, arg) runs in the child after it entered
 * the read-only namespace ro (NULL: none) and chrooted into r, writes
 * "key value" lines on fd with gp_nvchild_put, and the child then writes
 * "end" and exits. Several children run at once: start each, then collect
 * them together under one deadline. */
#include <sys/types.h>

#include "gpuprov/run.h"
#include "gpuprov/util.h"

#define GP_NVCHILD_OUTPUT_MAX (1u << 20) /* what is kept of one child's output */

typedef void gp_nvchild_fn(int fd, void *arg);
struct gp_nvchild {
	pid_t pid;
	int out_fd, status_fd;
	struct gp_buf out; /* what it wrote, at most GP_NVCHILD_OUTPUT_MAX */
	bool timed_out; /* killed (SIGKILL) at the deadline */
	bool ended; /* its output ends with the "end" line */
	int status; /* waitpid's */
	int read_only_refused; /* the errno the namespace failed with; 0 */
};
void gp_nvchild_put(int fd, const char *fmt, ...) _printf_(2, 3);
/* In a child of the read-only namespace: makes the mount whose root is path
 * (a tmpfs such as /dev/shm, a devtmpfs) writable again in this child's
 * namespace only. 0, or -1 with errno (ENOTDIR: path is not a mount's root,
 * which stays read-only). */
int gp_nvchild_keep_writable(const char *path);
/* 0, or a negative errno when the child could not be started. */
int gp_nvchild_start(const struct gp_root *r, const struct gp_run_read_only *ro,
                     gp_nvchild_fn *fn, void *arg, struct gp_nvchild *ch);
/* Reads the n children's output until each ends or timeout_ms passes, kills
 * the ones still running then, and reaps them all. */
void gp_nvchild_collect(struct gp_nvchild *ch, size_t n, int timeout_ms);
void gp_nvchild_free(struct gp_nvchild *ch);
/* One child, started and collected: 0 with ch->out holding what it wrote
 * (gp_nvchild_free it), or a negative errno: no child, or with
 * ch->read_only_refused set the read-only namespace (read_only) could not
 * be made and fn did not run. The probe above, the GPU settings
 * (nvsettings.h) and the fabric state (nvfabric.h) use it. */
int gp_nvchild_run(const struct gp_root *r, int timeout_ms, bool read_only,
                   gp_nvchild_fn *fn, void *arg, struct gp_nvchild *ch);
/* Hands each line of ch's output to fn split at its first blank (key,
 * value; "" without one), all but the child's own "end" and "error" lines
 * (the output is cut into the lines). Returns how the child failed as a
 * sentence (allocated): killed at the deadline, its "error" line, a crash,
 * an end without "end"; NULL when it ended well. */
char *gp_nvchild_each(struct gp_nvchild *ch,
                      void (*fn)(void *arg, const char *key, const char *value),
                      void *arg);
