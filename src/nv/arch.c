/* Architecture names as vendors spell them (see arch.h). Sources:
 * docs/reference/nvidia.md section 3 (NVIDIA's x86_64 and sbsa
 * directories) and docs/reference/stack-2026.md sections 1 and 3 to 6
 * (sbsa for arm64 servers, the _sbsa runfiles, linux-sbsa cuDNN tarballs,
 * Miniforge's Linux-aarch64 installer, PyTorch's aarch64 wheels). */
#include <string.h>

#include "gpuprov/arch.h"
#include "gpuprov/util.h"

struct arch_names {
	const char *arch; /* uname -m */
	const char *nvidia_dir;
	const char *deb; /* Debian's architecture name */
	const char *libdir, *includedir;
	bool proprietary;
};

static const struct arch_names table[] = {
	{ "x86_64", "x86_64", "amd64", "/usr/lib/x86_64-linux-gnu",
	  "/usr/include/x86_64-linux-gnu", true },
	{ "aarch64", "sbsa", "arm64", "/usr/lib/aarch64-linux-gnu",
	  "/usr/include/aarch64-linux-gnu", false },
};

static const struct arch_names *find(const char *arch)
{
	for (size_t i = 0; arch && i < ARRAY_SIZE(table); i++)
		if (strcmp(table[i].arch, arch) == 0)
			return &table[i];
	return NULL;
}

bool gp_arch_known(const char *arch)
{
	return find(arch) != NULL;
}

const char *gp_arch_nvidia_dir(const char *arch)
{
	const struct arch_names *a = find(arch);
	return a ? a->nvidia_dir : NULL;
}

const char *gp_arch_deb_name(const char *arch)
{
	const struct arch_names *a = find(arch);
	return a ? a->deb : NULL;
}

const char *gp_arch_multiarch_libdir(const char *arch)
{
	const struct arch_names *a = find(arch);
	return a ? a->libdir : NULL;
}

const char *gp_arch_multiarch_includedir(const char *arch)
{
	const struct arch_names *a = find(arch);
	return a ? a->includedir : NULL;
}

bool gp_arch_has_proprietary_modules(const char *arch)
{
	const struct arch_names *a = find(arch);
	return !a || a->proprietary;
}
