/* libFuzzer target: the CDI spec reader (src/pure/cdispec.c). A spec it
 * accepts has a kind, named devices and, asked about, a problem sentence or
 * none; nothing it reads may crash it or leak. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/cdispec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_err err = { 0 };
	struct gp_cdi_spec spec;
	if (gp_cdi_spec_parse("nvidia.yaml", (const char *)data, size, &spec, &err) < 0)
		return 0;
	if (!spec.kind || spec.n_devices > GP_CDI_DEVICES_MAX)
		abort();
	for (size_t i = 0; i < spec.n_devices; i++)
		if (!spec.devices[i] || !*spec.devices[i])
			abort();
	if (spec.other_version && !spec.driver_version)
		abort();
	free(gp_cdi_spec_problem(&spec, "570.86.15", 2));
	free(gp_cdi_spec_problem(&spec, NULL, 0));
	gp_cdi_spec_free(&spec);
	return 0;
}
