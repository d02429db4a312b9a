/* Does a root fit a profile's "match" section? Used by install, plan and
 * detect. */
#include <string.h>

#include "gpuprov/json.h"
#include "gpuprov/kernelinfo.h"
#include "gpuprov/match.h"
#include "gpuprov/osrelease.h"
#include "gpuprov/pci.h"
#include "gpuprov/profile.h"

/* Does the root fit the profile's "match"? NULL when it does, else what
 * was expected and what was found. Unknown facts count as a mismatch:
 * provisioning a machine we cannot identify needs --force. */
char *gp_profile_mismatch(const struct gp_profile *p, const struct gp_root *r)
{
	const cJSON *match = cJSON_GetObjectItemCaseSensitive(p->doc, "match");
	if (!match)
		return NULL;
	struct gp_buf b = { 0 };
	const char *want_id = gp_json_string(match, "os_id", NULL);
	const char *want_ver = gp_json_string(match, "version_id", NULL);
	const char *want_arch = gp_json_string(match, "arch", NULL);
	struct gp_os_release osr = { 0 };
	bool have_os = gp_os_release_read(r, &osr) == 0;
	const char *ver = have_os ? osr.version_id : NULL;
	/* "9" matches "9.3": a major version names the whole series. */
	bool ver_ok = !want_ver || (ver && (strcmp(ver, want_ver) == 0 ||
	                                    (gp_str_starts_with(ver, want_ver) &&
	                                     ver[strlen(want_ver)] == '.')));
	if ((want_id && (!have_os || !gp_streq(osr.id, want_id))) || !ver_ok)
		gp_buf_printf(&b, "expected %s %s, found %s %s",
		              want_id ? want_id : "any OS", want_ver ? want_ver : "",
		              have_os ? osr.id : "no os-release", ver ? ver : "");
	gp_os_release_free(&osr);
	_cleanup_free_ char *arch = want_arch ? gp_root_arch(r) : NULL;
	if (want_arch && !gp_streq(arch, want_arch))
		gp_buf_printf(&b, "%sexpected architecture %s, found %s",
		              b.len ? "; " : "", want_arch,
		              arch ? arch : "an unknown one");
	_cleanup_strv_ char **gpus = gp_json_strv(match, "gpus");
	if (gpus && gpus[0]) {
		struct gp_pci_list pci = { 0 };
		struct gp_buf found = { 0 };
		bool hit = false;
		int rc = gp_pci_scan(r, &pci);
		for (size_t i = 0; rc == 0 && i < pci.n; i++) {
			if (!gp_pci_is_nvidia_gpu(&pci.devs[i]))
				continue;
			_cleanup_free_ char *id = gp_xasprintf(
			    "%04x:%04x", pci.devs[i].vendor, pci.devs[i].device);
			hit |= gp_strv_contains(gpus, id);
			gp_buf_printf(&found, "%s%s", found.len ? ", " : "", id);
		}
		if (!hit)
			gp_buf_printf(&b,
			              "%sno GPU of the profile's match.gpus; found %s",
			              b.len ? "; " : "",
			              rc < 0      ? "no sys/bus/pci/devices in the root"
			              : found.len ? found.data
			                          : "no NVIDIA GPU");
		gp_buf_free(&found);
		gp_pci_list_free(&pci);
	}
	return b.len ? gp_buf_steal(&b) : NULL;
}
