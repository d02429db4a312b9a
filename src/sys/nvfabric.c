/* The fabric state probe (nvfabric.h). The child asks NVML for each GPU's
 * fabric info and writes "fabric.gpu INDEX RC STATE STATUS" lines; the
 * parent reads them back, bounded to GP_PROBE_MAX_GPUS. The info structs
 * are NVML's own layout (nvml.h): the versioned one is asked first, as
 * nvidia-smi does, since the plain call is deprecated. */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/nvfabric.h"

typedef int nvmlInit_v2_t(void);
typedef int nvmlShutdown_t(void);
typedef int nvmlDeviceGetCount_v2_t(unsigned *);
typedef int nvmlDeviceGetHandleByIndex_v2_t(unsigned, void **);

/* nvml.h's nvmlGpuFabricInfo_t and nvmlGpuFabricInfo_v2_t. */
struct nvml_fabric_info {
	unsigned char cluster_uuid[16];
	int status;
	unsigned clique_id;
	unsigned char state;
};
struct nvml_fabric_info_v2 {
	unsigned version;
	unsigned char cluster_uuid[16];
	int status;
	unsigned clique_id;
	unsigned char state;
	unsigned health_mask;
};
/* NVML_STRUCT_VERSION(GpuFabricInfo, 2): the size and the version in the
 * top byte. */
#define FABRIC_INFO_V2 ((unsigned)sizeof(struct nvml_fabric_info_v2) | (2u << 24))

typedef int nvmlDeviceGetGpuFabricInfo_t(void *, struct nvml_fabric_info *);
typedef int nvmlDeviceGetGpuFabricInfoV_t(void *, struct nvml_fabric_info_v2 *);

#define SYM(h, name) ((name##_t *)dlsym((h), #name))

static void fabric_body(int fd, void *arg)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		gp_nvchild_put(fd, "nvml.load_error %s", dlerror());
		return;
	}
	gp_nvchild_put(fd, "nvml.loaded 1");
	nvmlInit_v2_t *init = SYM(h, nvmlInit_v2);
	nvmlShutdown_t *shutdown = SYM(h, nvmlShutdown);
	nvmlDeviceGetCount_v2_t *count = SYM(h, nvmlDeviceGetCount_v2);
	nvmlDeviceGetHandleByIndex_v2_t *handle = SYM(h, nvmlDeviceGetHandleByIndex_v2);
	nvmlDeviceGetGpuFabricInfoV_t *info_v = SYM(h, nvmlDeviceGetGpuFabricInfoV);
	nvmlDeviceGetGpuFabricInfo_t *info = SYM(h, nvmlDeviceGetGpuFabricInfo);
	if (!init || !count || !handle) {
		gp_nvchild_put(fd, "nvml.load_error the library lacks nvmlInit_v2, "
		                   "nvmlDeviceGetCount_v2 or "
		                   "nvmlDeviceGetHandleByIndex_v2");
		return;
	}
	int rc = init();
	gp_nvchild_put(fd, "nvml.init_rc %d", rc);
	if (rc != 0)
		return;
	gp_nvchild_put(fd, "fabric.api %d", info_v || info);
	unsigned n = 0;
	if (count(&n) == 0) {
		gp_nvchild_put(fd, "nvml.count %u", n);
		for (unsigned i = 0; i < n && i < GP_PROBE_MAX_GPUS && (info_v || info);
		     i++) {
			void *dev = NULL;
			if (handle(i, &dev) != 0)
				continue;
			if (info_v) {
				struct nvml_fabric_info_v2 v = {
					.version = FABRIC_INFO_V2
				};
				rc = info_v(dev, &v);
				gp_nvchild_put(fd, "fabric.gpu %u %d %u %d", i, rc,
				               v.state, v.status);
			} else {
				struct nvml_fabric_info v = { 0 };
				rc = info(dev, &v);
				gp_nvchild_put(fd, "fabric.gpu %u %d %u %d", i, rc,
				               v.state, v.status);
			}
		}
	}
	if (shutdown)
		shutdown();
}

/* A number of the child's, bounded to int. */
static bool parse_int(const char *s, char **end, int *out)
{
	long v = strtol(s, end, 10);
	if (*end == s || v < INT_MIN || v > INT_MAX)
		return false;
	*out = (int)v;
	return true;
}

static void parse_gpu(struct gp_nvfabric *f, const char *v)
{
	int idx, rc, state, status;
	char *end;
	if (!parse_int(v, &end, &idx) || idx < 0 || idx >= GP_PROBE_MAX_GPUS ||
	    !parse_int(end, &end, &rc) || !parse_int(end, &end, &state) ||
	    !parse_int(end, &end, &status) || *end)
		return;
	f->rc[idx] = rc;
	f->state[idx] = state;
	f->status[idx] = status;
}

static void parse_line(void *arg, const char *line, const char *v)
{
	struct gp_nvfabric *f = arg;
	char *end;
	int n;
	if (strcmp(line, "nvml.loaded") == 0)
		f->loaded = true;
	else if (strcmp(line, "nvml.load_error") == 0 && !f->load_error)
		f->load_error = gp_xstrdup(v);
	else if (strcmp(line, "nvml.init_rc") == 0 && parse_int(v, &end, &n))
		f->init_rc = n;
	else if (strcmp(line, "nvml.count") == 0 && parse_int(v, &end, &n))
		f->count = n;
	else if (strcmp(line, "fabric.api") == 0)
		f->api = strcmp(v, "1") == 0;
	else if (strcmp(line, "fabric.gpu") == 0)
		parse_gpu(f, v);
}

int gp_nvfabric_run(const struct gp_root *r, int timeout_ms, bool read_only,
                    struct gp_nvfabric *f)
{
	*f = (struct gp_nvfabric){ .init_rc = -1, .count = -1 };
	for (size_t i = 0; i < GP_PROBE_MAX_GPUS; i++)
		f->rc[i] = f->state[i] = f->status[i] = -1;
	struct gp_nvchild ch;
	int rc = gp_nvchild_run(r, timeout_ms, read_only, fabric_body, NULL, &ch);
	if (rc < 0) {
		f->read_only_refused = ch.read_only_refused;
		return rc;
	}
	f->error = gp_nvchild_each(&ch, parse_line, f);
	gp_nvchild_free(&ch);
	return 0;
}

void gp_nvfabric_clear(struct gp_nvfabric *f)
{
	free(f->load_error);
	free(f->error);
	*f = (struct gp_nvfabric){ 0 };
}

const char *gp_fabric_state_name(int state)
{
	switch (state) {
	case GP_FABRIC_NOT_SUPPORTED:
		return "Not Supported";
	case GP_FABRIC_NOT_STARTED:
		return "Not Started";
	case GP_FABRIC_IN_PROGRESS:
		return "In Progress";
	case GP_FABRIC_COMPLETED:
		return "Completed";
	}
	return "unknown";
}
