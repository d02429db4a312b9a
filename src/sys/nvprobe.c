/* NVML and libcuda through dlopen in a forked, chrooted child (see
 * nvprobe.h for why a child). Protocol on the pipe, one fact a line:
 * "nvml.loaded 1", "nvml.name 0 NVIDIA A100-SXM4-40GB", ..., "end". */
#include <dlfcn.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuprov/nvprobe.h"
#include "gpuprov/run.h"
#include "gpuprov/util.h"

/* --- the child --------------------------------------------------------- */

void gp_nvchild_put(int fd, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof line - 2)
		n = sizeof line - 2;
	for (int i = 0; i < n; i++) /* one line per fact, whatever a name holds */
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[n++] = '\n';
	gp_write_all(fd, line, (size_t)n);
}

#define put gp_nvchild_put

/* dlsym into a function pointer; NULL when missing. */
#define SYM(h, name) ((name##_t *)dlsym((h), #name))

typedef int nvmlInit_v2_t(void);
typedef int nvmlShutdown_t(void);
typedef const char *nvmlErrorString_t(int);
typedef int nvmlSystemGetDriverVersion_t(char *, unsigned);
typedef int nvmlDeviceGetCount_v2_t(unsigned *);
typedef int nvmlDeviceGetHandleByIndex_v2_t(unsigned, void **);
typedef int nvmlDeviceGetName_t(void *, char *, unsigned);
typedef int nvmlDeviceGetPersistenceMode_t(void *, int *);
typedef int cuDriverGetVersion_t(int *);
typedef int cuInit_t(unsigned);
typedef int cuDeviceGetCount_t(int *);
typedef int cuDeviceGet_t(int *, int);
typedef int cuDeviceGetName_t(char *, int, int);
typedef int cuGetErrorString_t(int, const char **);

static void probe_nvml(int fd)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		put(fd, "nvml.loaded 0");
		put(fd, "nvml.load_error %s", dlerror());
		return;
	}
	put(fd, "nvml.loaded 1");
	nvmlInit_v2_t *init = SYM(h, nvmlInit_v2);
	nvmlShutdown_t *shutdown = SYM(h, nvmlShutdown);
	nvmlErrorString_t *errstr = SYM(h, nvmlErrorString);
	nvmlSystemGetDriverVersion_t *drv = SYM(h, nvmlSystemGetDriverVersion);
	nvmlDeviceGetCount_v2_t *count = SYM(h, nvmlDeviceGetCount_v2);
	nvmlDeviceGetHandleByIndex_v2_t *handle = SYM(h, nvmlDeviceGetHandleByIndex_v2);
	nvmlDeviceGetName_t *name = SYM(h, nvmlDeviceGetName);
	nvmlDeviceGetPersistenceMode_t *pers = SYM(h, nvmlDeviceGetPersistenceMode);
	if (!init) {
		put(fd, "nvml.load_error the library has no nvmlInit_v2");
		return;
	}
	int rc = init();
	put(fd, "nvml.init_rc %d", rc);
	if (errstr && errstr(rc))
		put(fd, "nvml.init_error %s", errstr(rc));
	if (rc != 0)
		return;
	char buf[96];
	if (drv && drv(buf, 80) == 0) {
		buf[80] = '\0';
		put(fd, "nvml.version %s", buf);
	}
	unsigned n = 0;
	if (count && count(&n) == 0) {
		put(fd, "nvml.count %u", n);
		for (unsigned i = 0; i < n && i < GP_PROBE_MAX_GPUS && handle; i++) {
			void *dev = NULL;
			if (handle(i, &dev) != 0)
				continue;
			if (name && name(dev, buf, sizeof buf) == 0) {
				buf[sizeof buf - 1] = '\0';
				put(fd, "nvml.name %u %s", i, buf);
			}
			int mode;
			if (pers && pers(dev, &mode) == 0)
				put(fd, "nvml.persistence %u %d", i, mode ? 1 : 0);
		}
	}
	if (shutdown)
		shutdown();
}

static void probe_cuda(int fd)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		put(fd, "cuda.loaded 0");
		put(fd, "cuda.load_error %s", dlerror());
		return;
	}
	put(fd, "cuda.loaded 1");
	cuDriverGetVersion_t *ver = SYM(h, cuDriverGetVersion);
	cuInit_t *init = SYM(h, cuInit);
	cuDeviceGetCount_t *count = SYM(h, cuDeviceGetCount);
	cuDeviceGet_t *get = SYM(h, cuDeviceGet);
	cuDeviceGetName_t *name = SYM(h, cuDeviceGetName);
	cuGetErrorString_t *errstr = SYM(h, cuGetErrorString);
	int v = 0;
	if (ver) {
		int rc = ver(&v);
		put(fd, "cuda.version_rc %d", rc);
		if (rc == 0)
			put(fd, "cuda.version %d", v);
	}
	if (!init) {
		put(fd, "cuda.load_error the library has no cuInit");
		return;
	}
	int rc = init(0);
	put(fd, "cuda.init_rc %d", rc);
	const char *msg = NULL;
	if (errstr && errstr(rc, &msg) == 0 && msg)
		put(fd, "cuda.init_error %s", msg);
	if (rc != 0)
		return;
	int n = 0;
	if (count && count(&n) == 0) {
		put(fd, "cuda.count %d", n);
		for (int i = 0; i < n && i < GP_PROBE_MAX_GPUS && get && name; i++) {
			int dev;
			char buf[256];
			if (get(&dev, i) == 0 && name(buf, sizeof buf, dev) == 0) {
				buf[sizeof buf - 1] = '\0';
				put(fd, "cuda.name %d %s", i, buf);
			}
		}
	}
}

int gp_nvchild_keep_writable(const char *path)
{
	struct statx st;
	struct mount_attr rw = { .attr_clr = MOUNT_ATTR_RDONLY };

	/* Only a mount's own root: mount_setattr on any other path would act on
	 * the mount that holds it, the root itself. */
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_TYPE, &st) < 0)
		return -1;
	if (!S_ISDIR(st.stx_mode) || !(st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
	    !(st.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
		errno = ENOTDIR;
		return -1;
	}
	return mount_setattr(AT_FDCWD, path, 0, &rw, sizeof(rw));
}

/* libcuda's first use after a boot creates /dev/nvidia-uvm through
 * nvidia-modprobe; on a read-only /dev cuInit fails, and verify would fail
 * after every reboot. So the device filesystem stays writable when it is a
 * mount of its own (device nodes only: the root above it stays read-only);
 * a /dev that is a plain directory of the root is left read-only with it. */
static void keep_dev_writable(const struct gp_root *r)
{
	char dev[PATH_MAX];
	const char *top = gp_root_is_host(r) ? "" : r->dir;
	size_t n = strlen(top);

	while (n > 0 && top[n - 1] == '/')
		n--;
	if (n + sizeof("/dev") > sizeof(dev))
		return;
	memcpy(dev, top, n);
	memcpy(dev + n, "/dev", sizeof("/dev"));
	gp_nvchild_keep_writable(dev);
}

/* ro: enter the read-only namespace first (before the chroot, which leaves
 * the host's /proc behind) and say on status_fd, as an int errno, when it
 * cannot be made; status_fd is closed before any library is loaded, so
 * none can claim a refusal to have the probe run again writable. */
static _Noreturn void child(const struct gp_root *r, const struct gp_run_read_only *ro,
                            int status_fd, int fd, gp_nvchild_fn *fn, void *arg)
{
	if (ro && gp_run_enter_read_only(ro) < 0) {
		int e = errno;
		gp_write_all(status_fd, &e, sizeof e);
		_exit(1);
	}
	if (ro)
		keep_dev_writable(r);
	close(status_fd);
	if (!gp_root_is_host(r) && (chroot(r->dir) < 0 || chdir("/") < 0)) {
		put(fd, "error cannot chroot into %s: %s", r->dir, strerror(errno));
		_exit(1);
	}
	fn(fd, arg);
	put(fd, "end");
	_exit(0);
}

static void probe(int fd, void *arg)
{
	(void)arg;
	probe_nvml(fd);
	probe_cuda(fd);
}

/* --- the parent -------------------------------------------------------- */

static int index_of(const char **v)
{
	char *end;
	long i = strtol(*v, &end, 10);
	if (end == *v || *end != ' ' || i < 0 || i >= GP_PROBE_MAX_GPUS)
		return -1;
	*v = end + 1;
	return (int)i;
}

/* A number the probe printed: one that is not a number reads as 0 and one
 * out of range as the nearest int (what atoi did, without its undefined
 * overflow). */
static int probe_int(const char *v)
{
	long n = strtol(v, NULL, 10);
	return n > INT_MAX ? INT_MAX : n < INT_MIN ? INT_MIN : (int)n;
}

static void set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = gp_xstrdup(v);
}

static void parse_line(void *arg, const char *line, const char *v)
{
	struct gp_nvprobe *p = arg;
	struct gp_nvml_probe *n = &p->nvml;
	struct gp_libcuda_probe *c = &p->cuda;
	int i;
	if (strcmp(line, "nvml.loaded") == 0)
		n->loaded = probe_int(v) == 1;
	else if (strcmp(line, "nvml.load_error") == 0)
		set_str(&n->load_error, v);
	else if (strcmp(line, "nvml.init_rc") == 0)
		n->init_rc = probe_int(v);
	else if (strcmp(line, "nvml.init_error") == 0)
		set_str(&n->init_error, v);
	else if (strcmp(line, "nvml.version") == 0)
		set_str(&n->driver_version, v);
	else if (strcmp(line, "nvml.count") == 0)
		n->count = probe_int(v);
	else if (strcmp(line, "nvml.name") == 0 && (i = index_of(&v)) >= 0)
		set_str(&n->names[i], v);
	else if (strcmp(line, "nvml.persistence") == 0 && (i = index_of(&v)) >= 0)
		n->persistence[i] = probe_int(v);
	else if (strcmp(line, "cuda.loaded") == 0)
		c->loaded = probe_int(v) == 1;
	else if (strcmp(line, "cuda.load_error") == 0)
		set_str(&c->load_error, v);
	else if (strcmp(line, "cuda.version_rc") == 0)
		c->version_rc = probe_int(v);
	else if (strcmp(line, "cuda.version") == 0)
		c->version = probe_int(v);
	else if (strcmp(line, "cuda.init_rc") == 0)
		c->init_rc = probe_int(v);
	else if (strcmp(line, "cuda.init_error") == 0)
		set_str(&c->init_error, v);
	else if (strcmp(line, "cuda.count") == 0)
		c->count = probe_int(v);
	else if (strcmp(line, "cuda.name") == 0 && (i = index_of(&v)) >= 0)
		set_str(&c->names[i], v);
}

int gp_nvchild_start(const struct gp_root *r, const struct gp_run_read_only *ro,
                     gp_nvchild_fn *fn, void *arg, struct gp_nvchild *ch)
{
	*ch = (struct gp_nvchild){ .pid = -1, .out_fd = -1, .status_fd = -1 };
	int fds[2], st[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(st, O_CLOEXEC) < 0) {
		int e = errno;
		close(fds[0]);
		close(fds[1]);
		return -e;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(fds[0]);
		close(fds[1]);
		close(st[0]);
		close(st[1]);
		return -e;
	}
	if (pid == 0) {
		close(fds[0]);
		close(st[0]);
		child(r, ro, st[1], fds[1], fn, arg);
	}
	close(fds[1]);
	close(st[1]);
	ch->pid = pid;
	ch->out_fd = fds[0];
	ch->status_fd = st[0];
	return 0;
}

/* Reads what one child wrote; false at its end of file (or a read error). */
static bool read_some(struct gp_nvchild *ch)
{
	char buf[4096];
	ssize_t n = read(ch->out_fd, buf, sizeof buf);
	if (n < 0 && errno == EINTR)
		return true;
	if (n <= 0)
		return false;
	/* Bounded: a child is ours, but the libraries in it are not. */
	if (ch->out.len < GP_NVCHILD_OUTPUT_MAX)
		gp_buf_append(&ch->out, buf, (size_t)n);
	return true;
}

static void reap(struct gp_nvchild *ch)
{
	close(ch->out_fd);
	ch->out_fd = -1;
	if (ch->timed_out)
		kill(ch->pid, SIGKILL);
	while (waitpid(ch->pid, &ch->status, 0) < 0 && errno == EINTR)
		;
	/* The child is gone: its errno, or end-of-file once it had entered. */
	int refused = 0;
	ssize_t got;
	while ((got = read(ch->status_fd, &refused, sizeof refused)) < 0 &&
	       errno == EINTR)
		;
	close(ch->status_fd);
	ch->status_fd = -1;
	if (got == (ssize_t)sizeof refused)
		ch->read_only_refused = refused > 0 ? refused : EIO;
	ch->ended = ch->out.len >= 4 &&
	            (strcmp(ch->out.data + ch->out.len - 4, "end\n") == 0);
}

void gp_nvchild_collect(struct gp_nvchild *ch, size_t n, int timeout_ms)
{
	int64_t deadline = gp_monotonic_ms() + timeout_ms;
	struct pollfd *pfd = gp_xcalloc(n ? n : 1, sizeof *pfd);
	for (;;) {
		size_t open = 0;
		for (size_t i = 0; i < n; i++)
			if (ch[i].out_fd >= 0)
				pfd[open++] = (struct pollfd){ .fd = ch[i].out_fd,
					                       .events = POLLIN };
		int64_t left = deadline - gp_monotonic_ms();
		if (!open)
			break;
		if (left <= 0) {
			for (size_t i = 0; i < n; i++)
				if (ch[i].out_fd >= 0) {
					ch[i].timed_out = true;
					reap(&ch[i]);
				}
			break;
		}
		int rc = poll(pfd, open, (int)left);
		if (rc < 0 && errno != EINTR)
			deadline = 0; /* cannot wait: end them all */
		for (size_t i = 0, k = 0; rc > 0 && i < n; i++) {
			if (ch[i].out_fd < 0)
				continue;
			if (pfd[k++].revents && !read_some(&ch[i]))
				reap(&ch[i]);
		}
	}
	free(pfd);
}

void gp_nvchild_free(struct gp_nvchild *ch)
{
	gp_buf_free(&ch->out);
}

int gp_nvchild_run(const struct gp_root *r, int timeout_ms, bool read_only,
                   gp_nvchild_fn *fn, void *arg, struct gp_nvchild *ch)
{
	struct gp_run_read_only ro;
	gp_run_read_only_init(&ro, r->dir);
	int rc = gp_nvchild_start(r, read_only ? &ro : NULL, fn, arg, ch);
	if (rc < 0)
		return rc;
	gp_nvchild_collect(ch, 1, timeout_ms);
	if (ch->read_only_refused) {
		gp_nvchild_free(ch);
		return -ch->read_only_refused;
	}
	return 0;
}

char *gp_nvchild_each(struct gp_nvchild *ch,
                      void (*fn)(void *arg, const char *key, const char *value),
                      void *arg)
{
	bool ended = false;
	char *error = NULL;
	char *save = NULL;
	for (char *l = ch->out.data ? strtok_r(ch->out.data, "\n", &save) : NULL; l;
	     l = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(l, ' ');
		if (sp)
			*sp = '\0';
		const char *v = sp ? sp + 1 : "";
		if (strcmp(l, "end") == 0) {
			ended = true;
		} else if (strcmp(l, "error") == 0) {
			free(error);
			error = gp_xstrdup(v);
		} else {
			fn(arg, l, v);
		}
	}
	if (ch->timed_out) {
		free(error);
		return gp_xstrdup("the probe did not finish in time and was killed "
		                  "(a hung driver library?)");
	}
	if (error || ended)
		return error;
	if (WIFSIGNALED(ch->status))
		return gp_xasprintf("the probe crashed in the driver libraries "
		                    "(signal %d, %s)",
		                    WTERMSIG(ch->status),
		                    strsignal(WTERMSIG(ch->status)));
	return gp_xstrdup("the probe ended without a result");
}

int gp_nvprobe_run(const struct gp_root *r, int timeout_ms, bool read_only,
                   struct gp_nvprobe *p)
{
	*p = (struct gp_nvprobe){ 0 };
	p->nvml.init_rc = p->nvml.count = -1;
	p->cuda.version_rc = p->cuda.init_rc = p->cuda.count = -1;
	for (size_t i = 0; i < GP_PROBE_MAX_GPUS; i++)
		p->nvml.persistence[i] = -1;
	struct gp_nvchild ch;
	int rc = gp_nvchild_run(r, timeout_ms, read_only, probe, NULL, &ch);
	if (rc < 0) {
		p->read_only_refused = ch.read_only_refused;
		return rc;
	}
	p->error = gp_nvchild_each(&ch, parse_line, p);
	gp_nvchild_free(&ch);
	return 0;
}

void gp_nvprobe_free(struct gp_nvprobe *p)
{
	free(p->nvml.load_error);
	free(p->nvml.init_error);
	free(p->nvml.driver_version);
	free(p->cuda.load_error);
	free(p->cuda.init_error);
	for (size_t i = 0; i < GP_PROBE_MAX_GPUS; i++) {
		free(p->nvml.names[i]);
		free(p->cuda.names[i]);
	}
	free(p->error);
	*p = (struct gp_nvprobe){ 0 };
}
