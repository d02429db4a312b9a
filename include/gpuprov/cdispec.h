/* The few facts gpuprov needs from a CDI spec that `nvidia-ctk cdi generate`
 * wrote (cdispec.c): its kind, the names of its devices, and the driver
 * version its library mounts name. Memory in, memory out; not a YAML
 * reader: a line-oriented look at the layout nvidia-ctk writes (top-level
 * keys at column 0, "devices:" a list of maps with a "name:" each). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/error.h"

/* The largest spec read: one generated for 8 GPUs with MIG is far below. */
#define GP_CDI_SPEC_MAX (1024 * 1024)
/* More device entries than this are refused (MIG on 8 GPUs is < 200). */
#define GP_CDI_DEVICES_MAX 1024

struct gp_cdi_spec {
	char *kind; /* "nvidia.com/gpu", NULL when absent */
	char **devices; /* device names in file order ("0", "all"), NULL-terminated */
	size_t n_devices;
	/* The driver version of the first library mount named
	 * libcuda.so.<version> (else libnvidia-ml.so.<version>): "570.86.15";
	 * NULL when none names one. */
	char *driver_version;
	/* Another library names another version: a spec half regenerated. */
	char *other_version;
};

/* Parses text (len bytes). 0 with *spec filled, or -1 with err set
 * (GP_EINPUT, "FILE:LINE: ..." naming the fix): larger than
 * GP_CDI_SPEC_MAX, a NUL byte, a JSON spec, no "kind:", no "devices:", a
 * device without a name, more than GP_CDI_DEVICES_MAX devices. file names
 * the spec in messages. */
int gp_cdi_spec_parse(const char *file, const char *text, size_t len,
                      struct gp_cdi_spec *spec, struct gp_err *err);
void gp_cdi_spec_free(struct gp_cdi_spec *spec);

/* Whether spec has a device named name. */
bool gp_cdi_spec_has_device(const struct gp_cdi_spec *spec, const char *name);

/* What is wrong with spec for a host with n_gpus GPUs and driver version
 * want (NULL: unknown, not compared): NULL when nothing, else an allocated
 * sentence ("it names driver 570.86.15; 575.51.03 is loaded"). */
char *gp_cdi_spec_problem(const struct gp_cdi_spec *spec, const char *want,
                          size_t n_gpus);
