/* Stage cudnn, method apt: cuDNN from NVIDIA's repository through the
 * package layer with the distro's apt or dnf: libcudnn<N>-cuda-<M> and
 * libcudnn<N>-dev-cuda-<M> (dnf: -devel-) pinned to the profile's version
 * (the repository's newest without one), cuDNN 9 and later only; the
 * repository is the one the cuda and driver stages add.
 *   check:  both packages installed at the version, and cudnn_version.h
 *           (/usr/include, else the versioned _v<N> header) saying it;
 *           a wrong header with the right packages blocks (reinstalling
 *           changes nothing).
 *   apply:  the repository, then both packages in one transaction; their
 *           ldconfig triggers update the linker cache.
 *   verify: package versions, headers, every libcudnn*.so.<N> of the
 *           packages' library directory resolved by the linker cache, the
 *           toolkit's CUDA major equal to the packages'. */
#include <stdio.h>
#include <string.h>

#include "gpuprov/arch.h"
#include "gpuprov/json.h"
#include "gpuprov/nvdriver.h"
#include "gpuprov/pkg.h"
#include "gpuprov/pkgdb.h"
#include "gpuprov/stages.h"

#include "cudnn.h"

/* NVIDIA's package names: libcudnn9-cuda-12 and libcudnn9-dev-cuda-12
 * (dnf: -devel-). Not the cudnn9-cuda-12 meta package: it only tracks the
 * newest version, and pulls in the static libraries too. */
void cudnn_apt_settings(struct gp_ctx *c, struct cudnn_settings *s)
{
	s->apt = true;
	s->major = s->version ? strtol(s->version, NULL, 10) : 9;
	bool dnf = gp_streq(gp_profile_distro_string(c->profile, "package_manager"),
	                    "dnf");
	s->libdir = dnf ? "/usr/lib64"
	                : gp_arch_multiarch_libdir(gp_profile_arch(c->profile));
	if (s->cuda_major) {
		s->pkgs[0] = gp_xasprintf("libcudnn%ld-cuda-%s", s->major, s->cuda_major);
		s->pkgs[1] = gp_xasprintf("libcudnn%ld-%s-cuda-%s", s->major,
		                          dnf ? "devel" : "dev", s->cuda_major);
	}
	gp_pkg_nvidia_repo(c->profile, &s->nv);
}

/* Is each package installed (at the profile's version, when it has one)?
 * Else *why says which is not; -1 when the database cannot be read. */
static int apt_installed(struct gp_ctx *c, const struct cudnn_settings *s, char **why)
{
	for (size_t i = 0; i < ARRAY_SIZE(s->pkgs); i++) {
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, s->pkgs[i], &have) < 0)
			return -1;
		if (!have)
			*why = gp_xasprintf("%s is not installed", s->pkgs[i]);
		else if (s->version && !gp_pkg_version_matches(have, s->version))
			*why = gp_xasprintf("%s %s is installed; the profile wants %s",
			                    s->pkgs[i], have, s->version);
		if (*why)
			return 0;
	}
	return 0;
}

char *cudnn_apt_blocked_reason(struct gp_ctx *c, const struct cudnn_settings *s)
{
	if (!gp_profile_distro_string(c->profile, "package_manager"))
		return gp_xstrdup("stages.cudnn.method apt needs distro.package_manager");
	if (s->major < 9)
		return gp_xasprintf(
		    "stages.cudnn.method apt installs cuDNN 9 and later (NVIDIA's "
		    "libcudnn9-cuda-<M> packages); cuDNN %ld's libcudnn%ld packages "
		    "carry "
		    "the CUDA version in the package revision (8.9.7.29-1+cuda12.2), "
		    "which gpuprov does not pin: use method tarball for cuDNN %ld",
		    s->major, s->major, s->major);
	if (s->version && strcmp(s->version, s->version3) == 0)
		return gp_xasprintf("stages.cudnn.version %s has three numbers; NVIDIA's "
		                    "packages are versioned with four (%s.N-1): set the "
		                    "full version, or leave it out to take the "
		                    "repository's newest",
		                    s->version, s->version);
	if (!s->cuda_major)
		return gp_xstrdup("NVIDIA's cuDNN packages are built per CUDA major "
		                  "(libcudnn9-cuda-12): set stages.cudnn.cuda or "
		                  "stages.cuda.version");
	_cleanup_free_ char *why = NULL;
	if (apt_installed(c, s, &why) == 0 && !why)
		return NULL; /* installed: no repository needed to check it */
	_cleanup_free_ char *problem = gp_pkg_repo_problem(&s->nv.repo);
	return problem ? gp_xasprintf("cannot add NVIDIA's repository: %s", problem)
	               : NULL;
}

/* cudnn_version.h and cudnn.h as NVIDIA's packages install them, in the
 * order looked at: the names compilers find (on Debian links through the
 * alternatives system to the versioned headers), then the versioned headers
 * themselves. The first pair whose cudnn_version.h exists, else the first. */
static void apt_headers(struct gp_ctx *c, const struct cudnn_settings *s, char **hdr,
                        char **cudnn_h)
{
	const char *const dirs[] = {
		"/usr/include",
		gp_arch_multiarch_includedir(gp_profile_arch(c->profile)),
		"/usr/include",
	};
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char v[16] = "";
		if (i > 0)
			snprintf(v, sizeof v, "_v%ld", s->major);
		free(*hdr);
		free(*cudnn_h);
		*hdr = gp_xasprintf("%s/cudnn_version%s.h", dirs[i], v);
		*cudnn_h = gp_xasprintf("%s/cudnn%s.h", dirs[i], v);
		if (gp_ctx_exists(c, *hdr))
			return;
	}
	free(*hdr);
	free(*cudnn_h);
	*hdr = gp_xasprintf("%s/cudnn_version.h", dirs[0]);
	*cudnn_h = gp_xasprintf("%s/cudnn.h", dirs[0]);
}

/* The A.B.C the header must say: the profile's, else the installed library
 * package's. NULL when neither is known. */
static char *apt_want3(struct gp_ctx *c, const struct cudnn_settings *s)
{
	if (s->version3)
		return gp_xstrdup(s->version3);
	_cleanup_free_ char *have = NULL;
	if (gp_pkg_installed(c, s->pkgs[0], &have) < 0 || !have || !*have)
		return NULL;
	_cleanup_free_ char *up = gp_pkg_upstream_version(have);
	return cudnn_first3(up);
}

int cudnn_apt_check(struct gp_ctx *c, const struct cudnn_settings *s, struct gp_check *ck)
{
	_cleanup_free_ char *why = NULL;
	if (apt_installed(c, s, &why) < 0)
		return -1;
	if (why) {
		gp_check_set(ck, GP_STATE_NEEDED, "%s", why);
		return 0;
	}
	_cleanup_free_ char *hdr = NULL, *cudnn_h = NULL;
	apt_headers(c, s, &hdr, &cudnn_h);
	_cleanup_free_ char *have = cudnn_header_version(c, hdr);
	_cleanup_free_ char *want = apt_want3(c, s);
	/* The packages are right, so installing them again changes nothing:
	 * what is wrong is for the operator to resolve. */
	if (!have)
		gp_check_set(ck, GP_STATE_BLOCKED,
		             "%s and %s are installed, but %s is missing or has no "
		             "CUDNN_MAJOR/MINOR/PATCHLEVEL: reinstall %s",
		             s->pkgs[0], s->pkgs[1], hdr, s->pkgs[1]);
	else if (want && strcmp(have, want) != 0)
		gp_check_set(ck, GP_STATE_BLOCKED,
		             "%s says cuDNN %s, but %s is installed for %s: another "
		             "cuDNN's header shadows the package's; remove it, or "
		             "reinstall %s",
		             hdr, have, s->pkgs[1], want, s->pkgs[1]);
	else
		gp_check_set(ck, GP_STATE_SATISFIED, "cuDNN %s from %s and %s (%s)", have,
		             s->pkgs[0], s->pkgs[1], hdr);
	return 0;
}

/* Both packages at the profile's version (the repository's candidate
 * without one), in one transaction; the repository is added first when
 * something is to install. The packages' own ldconfig triggers update the
 * linker cache. */
int cudnn_apt_apply(struct gp_ctx *c, const struct cudnn_settings *s)
{
	_cleanup_free_ char *why = NULL;
	if (apt_installed(c, s, &why) < 0)
		return -1;
	if (!why)
		return 0;
	const struct gp_pkg_want w[] = { { s->pkgs[0], s->version },
		                         { s->pkgs[1], s->version } };
	if (gp_effect_pkg_add_repo(c, &s->nv.repo) < 0)
		return -1;
	return gp_effect_pkg_install(c, w, ARRAY_SIZE(w));
}

/* The CUDA toolkit directory the cuda stage installs: its path, else
 * /usr/local/cuda-X.Y, else /usr/local/cuda. */
static char *cuda_stage_dir(struct gp_ctx *c)
{
	const cJSON *cuda = gp_stage_settings(c, &gp_stage_cudnn, "cuda");
	const char *path = gp_json_string(cuda, GP_CUDA_KEY_PATH, NULL);
	const char *v = gp_json_string(cuda, GP_CUDA_KEY_VERSION, NULL);
	if (path)
		return gp_xstrdup(path);
	if (!v)
		return gp_xstrdup("/usr/local/cuda");
	const char *dot = strchr(v, '.');
	size_t n = dot ? (size_t)(dot - v) + 1 + strcspn(dot + 1, ".") : strlen(v);
	return gp_xasprintf("/usr/local/cuda-%.*s", (int)n, v);
}

int cudnn_apt_verify(struct gp_ctx *c, const struct cudnn_settings *s,
                     struct gp_report *rep)
{
	_cleanup_free_ char *install = gp_install_hint(c, "cudnn");
	for (size_t i = 0; i < ARRAY_SIZE(s->pkgs); i++) {
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, s->pkgs[i], &have) < 0)
			return -1;
		bool ok = have &&
		          (!s->version || gp_pkg_version_matches(have, s->version));
		_cleanup_free_ char *check = gp_xasprintf("package %s", s->pkgs[i]);
		gp_report_add_subject(rep, "cudnn.package", s->pkgs[i],
		                      ok ? GP_PASS : GP_FAIL, check, install, "%s %s%s%s",
		                      s->pkgs[i], have ? have : "is not installed",
		                      ok || !have ? "" : "; the profile wants ",
		                      ok || !have ? "" : s->version);
	}
	_cleanup_free_ char *hdr = NULL, *cudnn_h = NULL;
	apt_headers(c, s, &hdr, &cudnn_h);
	_cleanup_free_ char *want = apt_want3(c, s);
	cudnn_verify_headers(c, rep, hdr, cudnn_h, want, install);
	cudnn_verify_sonames(c, rep, s->libdir, s->libdir, s->major, install);
	_cleanup_free_ char *tkdir = cuda_stage_dir(c);
	cudnn_verify_cuda_major(c, rep, tkdir, s->cuda_major, hdr);
	return 0;
}
