/* libFuzzer target: containerd's config.toml imports edit
 * (src/pure/containerdcfg.c). An edit that succeeds keeps every byte of the
 * input but the one line, and edited again changes nothing. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/containerdcfg.h"

#define PATTERN "/etc/containerd/conf.d/*.toml"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_err err = { 0 };
	struct gp_containerd_config cfg, again_cfg;
	char *out = NULL, *again = NULL;
	bool changed, again_changed;
	if (gp_containerd_imports_edit("config.toml", (const char *)data, size, PATTERN,
	                               &out, &changed, &cfg, &err) < 0)
		return 0;
	size_t len = strlen(out);
	if (len < size || (!changed && (len != size || memcmp(out, data, size))))
		abort();
	if (gp_containerd_imports_edit("config.toml", out, len, PATTERN, &again,
	                               &again_changed, &again_cfg, &err) < 0 ||
	    again_changed || strcmp(out, again) != 0 ||
	    (cfg.version && again_cfg.version != cfg.version))
		abort();
	free(out);
	free(again);
	return 0;
}
