/* NVIDIA driver knowledge for the driver stage (see nvdriver.h). Package
 * names (sources in docs/reference/nvidia-tables.md): Canonical's
 * nvidia-driver-<BR>[-server][-open] with linux-modules-nvidia-* (prebuilt,
 * Canonical-signed) or nvidia-dkms-*; NVIDIA's repository's nvidia-open-<BR>
 * and cuda-drivers-<BR>, and its dnf module streams. */
#include <ctype.h>
#include <stdarg.h>
#include <string.h>

#include "gpuprov/nvdriver.h"
#include "gpuprov/util.h"
#include "gpuprov/version.h"

enum gp_flavor_need gp_gpus_flavor_need(const struct gp_gpu_info *const *gpus, size_t n,
                                        const struct gp_gpu_info **needs_open,
                                        const struct gp_gpu_info **needs_prop)
{
	const struct gp_gpu_info *o = NULL, *p = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!gpus[i])
			continue;
		if (!o && gp_gpu_needs_open_modules(gpus[i]))
			o = gpus[i];
		if (!p && gp_gpu_needs_proprietary(gpus[i]))
			p = gpus[i];
	}
	if (needs_open)
		*needs_open = o;
	if (needs_prop)
		*needs_prop = p;
	return o && p ? GP_FLAVOR_CONFLICT
	       : o    ? GP_FLAVOR_OPEN
	       : p    ? GP_FLAVOR_PROPRIETARY
	              : GP_FLAVOR_ANY;
}

bool gp_driver_open_by_default(const char *branch_or_version)
{
	return branch_or_version &&
	       gp_version_compare(branch_or_version, GP_OPEN_DEFAULT_BRANCH) >= 0;
}

int gp_driver_auto_flavor(const struct gp_gpu_info *const *gpus, size_t n,
                          const char *branch_or_version, bool *open)
{
	switch (gp_gpus_flavor_need(gpus, n, NULL, NULL)) {
	case GP_FLAVOR_CONFLICT:
		return -1;
	case GP_FLAVOR_OPEN:
		*open = true;
		return 0;
	case GP_FLAVOR_PROPRIETARY:
		*open = false;
		return 0;
	case GP_FLAVOR_ANY:
		break;
	}
	*open = gp_driver_open_by_default(branch_or_version);
	return 0;
}

char *gp_drv_suffix(const struct gp_drv_choice *ch)
{
	return gp_xasprintf("%s%s%s", ch->branch, ch->server ? "-server" : "",
	                    ch->open ? "-open" : "");
}

static void want(struct gp_drv_pkgs *p, char *name, const char *version)
{
	p->want = gp_xrealloc(p->want, (p->n_want + 1) * sizeof(*p->want));
	p->want[p->n_want++] = (struct gp_pkg_want){ .name = name, .version = version };
}

static void canonical(const struct gp_drv_choice *ch, struct gp_drv_pkgs *p)
{
	_cleanup_free_ char *sfx = gp_drv_suffix(ch);
	p->probe = gp_xasprintf("nvidia-driver-%s", sfx);
	want(p, gp_xstrdup(p->probe), ch->version);
	if (ch->prebuilt) {
		for (size_t i = 0; ch->kernels && ch->kernels[i]; i++) {
			char *m = gp_xasprintf("linux-modules-nvidia-%s-%s", sfx,
			                       ch->kernels[i]);
			want(p, m, NULL);
		}
		/* The flavour's meta package follows kernel updates. */
		if (ch->kernel_flavour) {
			char *m = gp_xasprintf("linux-modules-nvidia-%s-%s", sfx,
			                       ch->kernel_flavour);
			want(p, m, NULL);
		}
	} else {
		char *d = gp_xasprintf("nvidia-dkms-%s", sfx);
		want(p, d, ch->version);
	}
}

/* The branch field of name (gp_drv_package_branch), or NULL. */
static const char *branch_field(const char *name)
{
	for (const char *p = strchr(name, '-'); p; p = strchr(p + 1, '-')) {
		size_t n = strcspn(p + 1, "-");
		if (n == 3 && isdigit((unsigned char)p[1]) &&
		    isdigit((unsigned char)p[2]) && isdigit((unsigned char)p[3]))
			return p + 1;
	}
	return NULL;
}

char *gp_drv_package_branch(const char *name)
{
	const char *b = branch_field(name);
	return b ? gp_xstrndup(b, 3) : NULL;
}

bool gp_drv_package_leaves(const struct gp_drv_choice *ch, const char *name)
{
	if (ch->method != GP_DRV_APT || !ch->branch)
		return false;
	_cleanup_free_ char *branch = gp_drv_package_branch(name);
	if (!branch)
		return false;
	if (strcmp(branch, ch->branch) != 0)
		return true;
	return ch->source == GP_DRV_CANONICAL && ch->prebuilt &&
	       gp_str_starts_with(name, "nvidia-dkms-");
}

/* The module flavor's own packages: the open flavor has an -open twin of
 * each (nvidia-driver-535-open), and shares the rest (libnvidia-compute-535). */
static bool modules_package(const char *name)
{
	static const char *const prefixes[] = { "nvidia-driver-", "nvidia-dkms-",
		                                "nvidia-kernel-source-",
		                                "linux-modules-nvidia-",
		                                "linux-objects-nvidia-" };
	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++)
		if (gp_str_starts_with(name, prefixes[i]))
			return true;
	return false;
}

/* NVIDIA's repository's meta package of the branch's open modules
 * (nvidia-open-<BR>) or of the proprietary ones (cuda-drivers-<BR>), the
 * one nvidia_apt installs. */
static char *nvidia_meta(const struct gp_drv_choice *ch, bool open)
{
	return gp_xasprintf(open ? "nvidia-open-%s" : "cuda-drivers-%s", ch->branch);
}

/* dnf without module streams (RHEL 10): the other flavor's meta package
 * and its DKMS kernel module package, which conflicts with this one's. */
static bool dnf_other_flavor(const struct gp_drv_choice *ch, const char *name)
{
	if (ch->open)
		return gp_streq(name, "cuda-drivers") ||
		       gp_streq(name, "kmod-nvidia-latest-dkms");
	return gp_streq(name, "nvidia-open") || gp_streq(name, "kmod-nvidia-open-dkms");
}

bool gp_drv_package_other_flavor(const struct gp_drv_choice *ch, const char *name)
{
	if (ch->method == GP_DRV_DNF && ch->no_streams)
		return dnf_other_flavor(ch, name);
	if (ch->method != GP_DRV_APT || !ch->branch)
		return false;
	if (ch->source != GP_DRV_CANONICAL) {
		/* NVIDIA's repository: its two meta packages, then the
		 * Canonical-named packages they depend on (its Debian and Ubuntu
		 * repositories carry the same names), the -server ones aside. */
		_cleanup_free_ char *open_meta = nvidia_meta(ch, true);
		_cleanup_free_ char *closed_meta = nvidia_meta(ch, false);
		if (gp_streq(name, open_meta))
			return !ch->open;
		if (gp_streq(name, closed_meta))
			return ch->open;
	}
	/* The fields after the branch's: [-server][-open][-kernel flavour]. */
	const char *b = branch_field(name);
	if (!b || strncmp(b, ch->branch, 3) != 0 || strlen(ch->branch) != 3)
		return false;
	const char *rest = b + 3;
	bool server = gp_str_starts_with(rest, "-server") && (!rest[7] || rest[7] == '-');
	if (server)
		rest += 7;
	bool open = gp_str_starts_with(rest, "-open") && (!rest[5] || rest[5] == '-');
	if (server != ch->server)
		return true;
	return open ? !ch->open : ch->open && modules_package(name);
}

static void nvidia_apt(const struct gp_drv_choice *ch, struct gp_drv_pkgs *p)
{
	p->probe = nvidia_meta(ch, ch->open);
	want(p, gp_xstrdup(p->probe), ch->version);
}

static void dnf(const struct gp_drv_choice *ch, struct gp_drv_pkgs *p)
{
	if (ch->no_streams) {
		/* RHEL 10 has no module streams: the flavor's meta package
		 * (docs/reference/stack-2026.md section 1), at the exact
		 * version the stage insists on there. */
		p->probe = gp_xstrdup(ch->open ? "nvidia-open" : "cuda-drivers");
	} else {
		/* dnf install @module:stream installs the stream's default
		 * profile. */
		want(p,
		     gp_xasprintf("@nvidia-driver:%s-%s", ch->branch,
		                  ch->open ? "open" : "dkms"),
		     NULL);
		/* The probe too: a stream is no package, and naming
		 * nvidia-driver makes it installed (or planned) where the
		 * package layer looks. */
		p->probe = gp_xstrdup("nvidia-driver");
	}
	want(p, gp_xstrdup(p->probe), ch->version);
	if (!ch->version)
		return;
	/* An exact version pins the stream's split packages with it, as the
	 * apt side pins its exact-version closure: their "= version"
	 * requirements on each other would otherwise meet the stream's newest.
	 * Names as NVIDIA's RHEL 9 repository has them (unconfirmed for every
	 * branch). */
	static const char *const split[] = { "nvidia-driver-libs", "nvidia-driver-cuda",
		                             "nvidia-driver-cuda-libs",
		                             "nvidia-kmod-common" };
	for (size_t i = 0; i < ARRAY_SIZE(split); i++)
		want(p, gp_xstrdup(split[i]), ch->version);
	want(p,
	     gp_xstrdup(ch->open ? "kmod-nvidia-open-dkms" : "kmod-nvidia-latest-dkms"),
	     ch->version);
}

void gp_drv_packages(const struct gp_drv_choice *ch, struct gp_drv_pkgs *out)
{
	*out = (struct gp_drv_pkgs){ 0 };
	if (ch->method == GP_DRV_DNF)
		dnf(ch, out);
	else if (ch->method == GP_DRV_APT && ch->source == GP_DRV_CANONICAL)
		canonical(ch, out);
	else if (ch->method == GP_DRV_APT)
		nvidia_apt(ch, out);
}

void gp_drv_pkgs_free(struct gp_drv_pkgs *p)
{
	for (size_t i = 0; i < p->n_want; i++)
		free((char *)p->want[i].name);
	free(p->want);
	free(p->probe);
	*p = (struct gp_drv_pkgs){ 0 };
}

char *gp_drv_runfile_name(const char *arch, const char *version)
{
	return gp_xasprintf("NVIDIA-Linux-%s-%s.run", arch, version);
}

char *gp_drv_runfile_url(const char *arch, const char *version)
{
	return gp_xasprintf(
	    "https://us.download.nvidia.com/tesla/%s/NVIDIA-Linux-%s-%s.run", version,
	    arch, version);
}

char **gp_drv_runfile_argv(const char *path, bool open, const char *key, const char *cert)
{
	char **v = gp_xcalloc(1, sizeof(char *));
	gp_strv_push(&v, "/bin/sh");
	gp_strv_push(&v, path);
	/* --silent implies --ui=none --no-questions --accept-license. */
	gp_strv_push(&v, "--silent");
	gp_strv_push(&v, "--dkms");
	gp_strv_push(&v, open ? "--kernel-module-type=open"
	                      : "--kernel-module-type=proprietary");
	/* The nouveau stage owns the blacklist and the initramfs. */
	gp_strv_push(&v, "--no-nouveau-check");
	gp_strv_push(&v, "--no-disable-nouveau");
	gp_strv_push(&v, "--no-x-check");
	if (key && cert) {
		_cleanup_free_ char *k = gp_xasprintf("--module-signing-secret-key=%s",
		                                      key);
		_cleanup_free_ char *c = gp_xasprintf("--module-signing-public-key=%s",
		                                      cert);
		gp_strv_push(&v, k);
		gp_strv_push(&v, c);
	}
	return v;
}

char *gp_kernel_flavour(const char *kver)
{
	/* <version>-<abi>-<flavour>: what follows the number after the first
	 * '-'; the flavour may hold a '-' itself (arm64's "generic-64k"). */
	const char *abi = strchr(kver, '-');
	if (!abi || !isdigit((unsigned char)abi[1]))
		return NULL;
	const char *p = abi + 1;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p != '-' || !p[1] || isdigit((unsigned char)p[1]))
		return NULL;
	return gp_xstrdup(p + 1);
}

int gp_kver_compare(const char *a, const char *b)
{
	while (*a || *b) {
		while (*a && !isalnum((unsigned char)*a))
			a++;
		while (*b && !isalnum((unsigned char)*b))
			b++;
		if (!*a || !*b)
			break;
		bool num = isdigit((unsigned char)*a);
		if (num != (bool)isdigit((unsigned char)*b))
			return num ? 1 : -1; /* rpmvercmp: numbers are newer */
		const char *ea = a, *eb = b;
		if (num) {
			while (*a == '0')
				a++;
			while (*b == '0')
				b++;
			for (ea = a; isdigit((unsigned char)*ea); ea++)
				;
			for (eb = b; isdigit((unsigned char)*eb); eb++)
				;
			if (ea - a != eb - b)
				return ea - a < eb - b ? -1 : 1;
		} else {
			for (; isalpha((unsigned char)*ea); ea++)
				;
			for (; isalpha((unsigned char)*eb); eb++)
				;
		}
		size_t la = (size_t)(ea - a), lb = (size_t)(eb - b);
		int r = strncmp(a, b, la < lb ? la : lb);
		if (r)
			return r < 0 ? -1 : 1;
		if (la != lb)
			return la < lb ? -1 : 1;
		a = ea;
		b = eb;
	}
	return *a ? 1 : *b ? -1 : 0;
}

char *gp_pkg_upstream_version(const char *v)
{
	const char *colon = strchr(v, ':');
	if (colon)
		v = colon + 1;
	const char *dash = strrchr(v, '-');
	return gp_xstrndup(v, dash ? (size_t)(dash - v) : strlen(v));
}

bool gp_driver_version_matches(const char *upstream, const char *branch,
                               const char *version)
{
	if (!upstream)
		return false;
	if (version)
		return gp_version_compare(upstream, version) == 0;
	if (!branch)
		return true;
	size_t n = strlen(branch);
	return strncmp(upstream, branch, n) == 0 && (!upstream[n] || upstream[n] == '.');
}
