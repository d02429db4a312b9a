/* libFuzzer target: docker's daemon.json merged with the NVIDIA runtime
 * (src/pure/dockercfg.c), with and without default-runtime. A merge that
 * succeeds must merge again to the same text, unchanged, and be seen by
 * inspect. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/dockercfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int set_default = 0; set_default < 2; set_default++) {
		const struct gp_docker_runtime rt = { "nvidia",
			                              "nvidia-container-runtime",
			                              set_default };
		struct gp_err err = { 0 };
		char *merged = NULL, *again = NULL;
		bool changed, changed_again, has, is_default;
		if (gp_docker_daemon_merge("daemon.json", (const char *)data, size, &rt,
		                           &merged, &changed, &err) < 0)
			continue;
		if (gp_docker_daemon_merge("daemon.json", merged, strlen(merged), &rt,
		                           &again, &changed_again, &err) < 0 ||
		    changed_again || strcmp(merged, again) != 0)
			abort();
		if (gp_docker_daemon_inspect("daemon.json", merged, strlen(merged), &rt,
		                             &has, &is_default, &err) < 0 ||
		    !has || (set_default && !is_default))
			abort();
		free(merged);
		free(again);
	}
	return 0;
}
