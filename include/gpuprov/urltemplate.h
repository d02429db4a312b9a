/* Placeholders in profile URLs, so that one distro base serves every
 * architecture: {arch} (uname -m: x86_64, aarch64), {nvidia_arch} (NVIDIA's
 * directory: x86_64, sbsa) and {deb_arch} (Debian's name: amd64, arm64).
 * The loader replaces them with the profile's architecture's names
 * (profile.c, from nv/arch.c) once the extends chain is resolved. Pure: no
 * I/O. */
#pragma once

/* The names, in the order of the values gp_url_template_expand takes. */
enum gp_url_placeholder {
	GP_URL_ARCH,
	GP_URL_NVIDIA_ARCH,
	GP_URL_DEB_ARCH,
	GP_URL_PLACEHOLDERS
};

/* NULL when every '{' or '}' in s belongs to a known placeholder; else why
 * not, as a sentence (allocated). */
char *gp_url_template_check(const char *s);
/* s with each known {name} replaced by values[its enum], other text (and
 * braces that make no known placeholder) as it is; allocated. NULL when s
 * holds no known placeholder. */
char *gp_url_template_expand(const char *s,
                             const char *const values[GP_URL_PLACEHOLDERS]);
