/* Stage driver: the NVIDIA kernel modules and user-space libraries.
 * check:  preflight first (before any change; BLOCKED names the way out):
 *         an NVIDIA GPU is present (unless --force made the run go on
 *         without one), the module flavor drives every GPU present
 *         ("modules": "auto" resolved here), prebuilt modules or kernel
 *         headers exist (installed, or in the root's apt lists) for the
 *         running kernel and every newer installed kernel, and Secure Boot
 *         on is met by signed modules (Canonical's prebuilt ones, or MOK
 *         keys from the profile for DKMS/runfile whose certificate shim's
 *         MokListRT holds and MokListXRT does not), and every held NVIDIA
 *         package of the release an exact version replaces is offered at
 *         the new one (pkg.h, gp_pkg_install_problem). Then: the installed
 *         user-space version (package database, or libnvidia-ml.so.<ver>
 *         for the runfile) against the profile's branch/version, the
 *         driver's packages present, the set held; the loaded module
 *         (/proc/driver/nvidia/version) against the installed version: a
 *         difference means reboot pending (exit 5), not broken. A newer
 *         kernel without an nvidia module (DKMS-built modules) is needed.
 * apply:  NVIDIA's repository when the source is nvidia, the DKMS MOK
 *         signing configuration, the packages (or the runfile, downloaded
 *         with its sha256 and run chrooted), missing kernel headers, the
 *         hold, 'dkms autoinstall -k KERNEL' for such a newer kernel, and a
 *         reboot request while the loaded module is not the installed one.
 * verify: the branch is not past its end of life (a warning), module
 *         loaded with the expected version and flavor, user space
 *         equal to it, NVML and libcuda (dlopen in a chrooted child,
 *         nvprobe.h) agreeing with it and with PCI, every NVIDIA GPU bound
 *         to nvidia; each failure with its likely cause. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "gpuprov/arch.h"
#include "gpuprov/branches.h"
#include "gpuprov/compat.h"
#include "gpuprov/drift.h"
#include "gpuprov/driver.h"
#include "gpuprov/driver_hints.h"
#include "gpuprov/json.h"
#include "gpuprov/kernelinfo.h"
#include "gpuprov/modules.h"
#include "gpuprov/nvdriver.h"
#include "gpuprov/nvprobe.h"
#include "gpuprov/nvproc.h"
#include "gpuprov/nvswitch.h"
#include "gpuprov/osrelease.h"
#include "gpuprov/pci.h"
#include "gpuprov/pkg.h"
#include "gpuprov/secureboot.h"
#include "gpuprov/stages.h"
#include "gpuprov/version.h"

#define MOK_CONF "/etc/dkms/framework.conf.d/gpuprov-mok.conf"
#define PROBE_TIMEOUT_MS 30000

/* --- profile keys (stages.driver) ---------------------------------------- */

#define KEY_METHOD "method"
#define KEY_BRANCH GP_DRIVER_KEY_BRANCH
#define KEY_FLAVOR "flavor"
#define KEY_MODULES "modules"
#define KEY_VERSION "version"
#define KEY_HOLD GP_DRIVER_KEY_HOLD
#define KEY_URL "url"
#define KEY_SHA256 "sha256"
#define KEY_SOURCE "source"
#define KEY_KERNEL_MODULES "kernel_modules"
#define KEY_MOK_KEY "mok_key"
#define KEY_MOK_CERT "mok_cert"

static char *branch_check(const cJSON *v, size_t i)
{
	const char *s = v->valuestring;
	size_t n = strlen(s);
	if (n >= 2 && n <= 3 && gp_schema_only(s, GP_DIGITS))
		return NULL;
	return gp_schema_why_got(s,
	                         "must be a driver branch: 2 or 3 digits, e.g. \"535\"");
}

static char *version_check(const cJSON *v, size_t i)
{
	if (gp_schema_numeric_parts(v->valuestring, 2, 3))
		return NULL;
	return gp_schema_why_got(v->valuestring,
	                         "must be a driver version: 2 or 3 numbers "
	                         "separated by dots, e.g. \"535.104.05\"");
}

static const struct gp_value_check check_branch = {
	.check = branch_check,
	.schema = "{\"pattern\": \"^[0-9]{2,3}$\"}",
};
static const struct gp_value_check check_version = {
	.check = version_check,
	.schema = "{\"pattern\": \"^[0-9]+(?:\\\\.[0-9]+){1,2}$\"}",
};

static const char *const methods[] = { "apt", "dnf", "runfile", NULL };
static const char *const flavors[] = { "server", "desktop", NULL };
static const char *const sources[] = { "canonical", "nvidia", NULL };
static const char *const kernel_module_kinds[] = { "auto", "prebuilt", "dkms", NULL };
static const char *const module_kinds[] = { "open", "proprietary", "auto", NULL };

static const struct gp_key driver_keys[] = {
	GP_KEY_ENUM_ROW(KEY_METHOD, methods, .doc = "How the driver is installed.",
	                .example = "\"apt\""),
	GP_KEY_STRING_ROW(KEY_BRANCH, &check_branch,
	                  .doc = "Driver branch: 2 or 3 digits.", .example = "\"535\""),
	GP_KEY_ENUM_ROW(KEY_FLAVOR, flavors,
	                .doc = "Data-center (server) or desktop packages.",
	                .example = "\"server\""),
	GP_KEY_ENUM_ROW(KEY_MODULES, module_kinds, .doc = "Kernel module flavor.",
	                .example = "\"open\""),
	GP_KEY_STRING_ROW(KEY_VERSION, &check_version,
	                  .doc = "Exact driver version: 2 or 3 dot-separated numbers.",
	                  .example = "\"535.104.05\""),
	GP_KEY_BOOL_ROW(KEY_HOLD,
	                .doc = "Hold the driver packages at the installed version.",
	                .example = "true"),
	GP_KEY_STRING_ROW(KEY_URL, &gp_check_url,
	                  .doc = "The driver runfile (method runfile).",
	                  .example = "\"https://us.download.nvidia.com/tesla/535.104.05/"
	                             "NVIDIA-Linux-x86_64-535.104.05.run\""),
	GP_KEY_STRING_ROW(
	    KEY_SHA256, &gp_check_sha256, .doc = "sha256 of url.",
	    .example = "\"0f6d806ddd87230d2adbe8a6006a9d20144fdbda9de2d6acc6"
	               "77daa5d036417a\""),
	GP_KEY_ENUM_ROW(KEY_SOURCE, sources,
	                .doc = "Package source for method apt: Canonical's archive "
	                       "(nvidia-driver-<BR>[-server][-open], the default on "
	                       "Ubuntu) or NVIDIA's CUDA repository (nvidia-open-<BR>, "
	                       "cuda-drivers-<BR>; the default elsewhere).",
	                .example = "\"canonical\""),
	GP_KEY_ENUM_ROW(KEY_KERNEL_MODULES, kernel_module_kinds,
	                .doc = "Canonical's prebuilt signed linux-modules-nvidia-* or "
	                       "DKMS; auto: prebuilt when the root's apt lists have them "
	                       "for every kernel.",
	                .example = "\"auto\""),
	GP_KEY_STRING_ROW(KEY_MOK_KEY, &gp_check_file_path,
	                  .doc = "Machine Owner Key (private) in the root that signs "
	                         "DKMS/runfile-built modules for Secure Boot.",
	                  .example = "\"/var/lib/shim-signed/mok/MOK.priv\""),
	GP_KEY_STRING_ROW(KEY_MOK_CERT, &gp_check_file_path,
	                  .doc = "The MOK certificate (DER or PEM) enrolled with mokutil "
	                         "--import; with Secure Boot on, the driver stage blocks "
	                         "unless the firmware's MokListRT holds it (or it cannot "
	                         "be read).",
	                  .example = "\"/var/lib/shim-signed/mok/MOK.der\""),
	GP_KEY_END,
};

/* Both multiarch directories: the user-space libraries are looked for,
 * whatever the profile's architecture says. */
static const char *const lib_dirs[] = { "/usr/lib/x86_64-linux-gnu",
	                                "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
	                                "/usr/lib" };

struct drv {
	struct gp_drv_choice ch;
	struct gp_drv_pkgs pkgs;
	const char *modules; /* the profile's: open, proprietary, auto */
	const char *kernel_modules; /* auto, prebuilt, dkms */
	const char *mok_key, *mok_cert;
	const char *url, *sha256;
	bool hold;
	char *branch; /* the profile's, or the version's major */
	char **kernels; /* running first (when known), then newer */
	char *flavour;
	enum gp_secure_boot sb;
	enum gp_mok_state mok; /* of mok_cert, looked at with Secure Boot on */
	struct gp_pci_list pci;
	bool pci_known;
	size_t n_nvidia;
	char **header_pkgs; /* headers to install */
	char *blocked; /* why the stage cannot go on, or NULL */
	char *note; /* said with the check's reason and as a verify warning */
};

static void drv_free(struct drv *d)
{
	gp_drv_pkgs_free(&d->pkgs);
	free(d->branch);
	gp_strv_free(d->kernels);
	free(d->flavour);
	gp_pci_list_free(&d->pci);
	gp_strv_free(d->header_pkgs);
	free(d->blocked);
	free(d->note);
}

static void block(struct drv *d, const char *fmt, ...) _printf_(2, 3);
static void block(struct drv *d, const char *fmt, ...)
{
	if (d->blocked)
		return; /* the first reason is the one to fix first */
	va_list ap;
	va_start(ap, fmt);
	d->blocked = gp_xvasprintf(fmt, ap);
	va_end(ap);
}

static void find_kernels(struct gp_ctx *c, struct drv *d)
{
	_cleanup_free_ char *running = gp_running_kernel(&c->root);
	_cleanup_strv_ char **all = gp_installed_kernels(&c->root);
	d->kernels = gp_xcalloc(1, sizeof(char *));
	if (running)
		gp_strv_push(&d->kernels, running);
	/* Without a running kernel (an image) the newest installed one boots. */
	const char *floor = running;
	for (size_t i = 0; all[i]; i++)
		if (!floor &&
		    (!d->kernels[0] || gp_kver_compare(all[i], d->kernels[0]) > 0)) {
			gp_strv_free(d->kernels);
			d->kernels = gp_xcalloc(1, sizeof(char *));
			gp_strv_push(&d->kernels, all[i]);
		}
	for (size_t i = 0; all[i]; i++)
		if (floor && gp_kver_compare(all[i], floor) > 0)
			gp_strv_push(&d->kernels, all[i]);
	if (d->kernels[0])
		d->flavour = gp_kernel_flavour(d->kernels[0]);
}

static bool headers_installed(struct gp_ctx *c, const char *kver)
{
	_cleanup_free_ char *a = gp_xasprintf("/usr/src/linux-headers-%s", kver);
	_cleanup_free_ char *b = gp_xasprintf("/lib/modules/%s/build", kver);
	_cleanup_free_ char *k = gp_xasprintf("/usr/src/kernels/%s", kver);
	return gp_root_exists(&c->root, a) || gp_root_exists(&c->root, b) ||
	       gp_root_exists(&c->root, k);
}

static char *headers_package(struct gp_ctx *c, const char *kver)
{
	const cJSON *distro = cJSON_GetObjectItemCaseSensitive(c->profile->doc, "distro");
	const char *pat = gp_json_string(distro, "kernel_headers", NULL);
	if (!pat)
		return NULL;
	const char *at = strstr(pat, "{kernel}");
	return gp_xasprintf("%.*s%s%s", (int)(at - pat), pat, kver, at + 8);
}

/* Headers for every kernel: installed, or installable (apt lists name the
 * package; with no lists, or with dnf, whose metadata gpuprov does not
 * read, installability is left to the package manager in apply). */
static void check_headers(struct gp_ctx *c, struct drv *d)
{
	d->header_pkgs = gp_xcalloc(1, sizeof(char *));
	if (!d->kernels[0]) {
		block(d, "cannot tell which kernel the driver must be built for: the "
		         "root has no proc/sys/kernel/osrelease and no kernel under "
		         "/boot");
		return;
	}
	for (size_t i = 0; d->kernels[i]; i++) {
		const char *k = d->kernels[i];
		if (headers_installed(c, k))
			continue;
		_cleanup_free_ char *pkg = headers_package(c, k);
		_cleanup_free_ char *have = NULL;
		if (pkg && gp_pkg_installed(c, pkg, &have) == 0 && have)
			continue;
		const char *which = i == 0 ? "the running kernel"
		                           : "the newer installed kernel";
		if (!pkg) {
			block(
			    d,
			    "kernel headers for %s %s are not installed and the profile "
			    "names no headers package (distro.kernel_headers); install "
			    "them, or use prebuilt modules",
			    which, k);
			return;
		}
		if (gp_pkg_available(c, pkg) == 0) {
			block(
			    d,
			    "kernel headers for %s %s are not installed and %s is not "
			    "in the root's package lists, so DKMS cannot build the "
			    "module for it; install the headers (or remove the kernel), "
			    "or use prebuilt modules where the distribution has them",
			    which, k, pkg);
			return;
		}
		gp_strv_push(&d->header_pkgs, pkg);
	}
}

/* Canonical's prebuilt, signed modules: for every kernel, installed or in
 * the apt lists. */
static bool prebuilt_available(struct gp_ctx *c, const struct drv *d)
{
	_cleanup_free_ char *sfx = gp_drv_suffix(&d->ch);
	for (size_t i = 0; d->kernels[i]; i++) {
		_cleanup_free_ char *pkg = gp_xasprintf("linux-modules-nvidia-%s-%s", sfx,
		                                        d->kernels[i]);
		_cleanup_free_ char *have = NULL;
		if (gp_pkg_installed(c, pkg, &have) == 0 && have)
			continue;
		if (gp_pkg_available(c, pkg) != 1)
			return false;
	}
	return d->kernels[0] != NULL;
}

static const char *flavor_name(bool open)
{
	return open ? "open" : "proprietary";
}

/* The module flavor against the GPUs present (or, without PCI facts, the
 * profile's match.gpus, as the compatibility preflight sees them). */
static void resolve_flavor(struct gp_ctx *c, struct drv *d)
{
	const struct gp_gpu_info *gpus[GP_PROBE_MAX_GPUS];
	const char *where[GP_PROBE_MAX_GPUS];
	size_t n = 0;
	for (size_t i = 0; i < d->pci.n && n < GP_PROBE_MAX_GPUS; i++)
		if (gp_pci_is_nvidia_gpu(&d->pci.devs[i])) {
			where[n] = d->pci.devs[i].address;
			gpus[n++] = gp_gpu_lookup(d->pci.devs[i].device);
		}
	const char *ref = d->ch.version ? d->ch.version : d->branch;
	const struct gp_gpu_info *o, *p;
	enum gp_flavor_need need = gp_gpus_flavor_need(gpus, n, &o, &p);
	bool overridden = gp_compat_override(c->profile->doc, GP_RULE_MODULE_FLAVOR);
	if (strcmp(d->modules, "auto") == 0) {
		if (gp_driver_auto_flavor(gpus, n, ref, &d->ch.open) < 0)
			block(d,
			      "\"modules\": \"auto\": no single flavor drives %s "
			      "(10de:%04x, "
			      "%s), which needs the proprietary modules, and %s "
			      "(10de:%04x, "
			      "%s), which needs the open ones; give these GPUs separate "
			      "machines or profiles",
			      p->name, p->device, p->arch, o->name, o->device, o->arch);
		/* aarch64 has no proprietary modules to choose. */
		else if (!gp_arch_has_proprietary_modules(gp_profile_arch(c->profile)))
			d->ch.open = true;
		return;
	}
	d->ch.open = strcmp(d->modules, "open") == 0;
	const struct gp_gpu_info *bad = d->ch.open ? p : o;
	if (!bad || overridden ||
	    need == (d->ch.open ? GP_FLAVOR_OPEN : GP_FLAVOR_PROPRIETARY))
		return;
	const char *at = "";
	for (size_t i = 0; i < n; i++)
		if (gpus[i] == bad)
			at = where[i];
	block(d,
	      "%s kernel modules cannot drive the %s at %s (10de:%04x, %s), which "
	      "needs the %s modules; use \"modules\": \"%s\" (or \"auto\")",
	      flavor_name(d->ch.open), bad->name, at, bad->device, bad->arch,
	      flavor_name(!d->ch.open), flavor_name(!d->ch.open));
}

/* The branch against the GPUs present, as the driver-gpu rule checks it
 * against match.gpus: Volta and older end at R580. */
static void branch_drives_gpus(struct gp_ctx *c, struct drv *d)
{
	if (!d->branch || gp_compat_override(c->profile->doc, GP_RULE_DRIVER_GPU))
		return;
	for (size_t i = 0; i < d->pci.n && !d->blocked; i++) {
		const struct gp_pci_device *p = &d->pci.devs[i];
		const struct gp_gpu_info *g = gp_pci_is_nvidia_gpu(p)
		                                  ? gp_gpu_lookup(p->device)
		                                  : NULL;
		const char *last = gp_gpu_last_branch(g);
		if (last && gp_version_compare(d->branch, last) > 0)
			block(d,
			      "driver branch %s no longer supports the %s at %s "
			      "(10de:%04x, "
			      "%s): branch %s is the last for Maxwell, Pascal and Volta; "
			      "use \"branch\": \"%s\"",
			      d->branch, g->name, p->address, g->device, g->arch, last,
			      last);
	}
}

/* With Secure Boot on, modules signed with the profile's MOK load only when
 * shim has the certificate enrolled (and not revoked): otherwise the next
 * boot rejects them, so that is found out before anything changes. */
static void mok_enrolment(struct gp_ctx *c, struct drv *d)
{
	int rc = gp_mok_cert_state(&c->root, d->mok_cert, &d->mok);
	if (rc == -EINVAL)
		block(d,
		      "the MOK certificate %s named by the profile is not an X.509 "
		      "certificate (DER, or PEM with a CERTIFICATE block); name the "
		      "certificate of the MOK in stages.driver.mok_cert",
		      d->mok_cert);
	else if (rc < 0)
		block(d, "cannot read the MOK certificate %s in %s: %s", d->mok_cert,
		      c->root.dir, strerror(-rc));
	else if (d->mok == GP_MOK_NOT_ENROLLED)
		block(
		    d,
		    "Secure Boot is on and the MOK certificate %s is not enrolled in "
		    "the firmware's MOK list (MokListRT): the kernel would reject the "
		    "modules signed with it (\"Key was rejected by service\"); run "
		    "'mokutil --import %s', reboot and confirm the enrolment in the MOK "
		    "manager on the console, then run gpuprov install again",
		    d->mok_cert, d->mok_cert);
	else if (d->mok == GP_MOK_REVOKED)
		block(
		    d,
		    "Secure Boot is on and the MOK certificate %s is revoked (listed in "
		    "the firmware's forbidden MOK list, MokListXRT): the kernel rejects "
		    "the modules signed with it; create a new key pair, enrol its "
		    "certificate with 'mokutil --import CERT', reboot and confirm it in "
		    "the MOK manager, and name it in stages.driver.mok_key and mok_cert",
		    d->mok_cert);
	else if (d->mok == GP_MOK_UNKNOWN)
		d->note = gp_xasprintf(
		    "Secure Boot is on and whether the MOK certificate %s is enrolled "
		    "could not be checked (no readable MokListRT under "
		    "/sys/firmware/efi in the root); 'mokutil --test-key %s' on the "
		    "machine tells",
		    d->mok_cert, d->mok_cert);
}

static void secure_boot(struct gp_ctx *c, struct drv *d)
{
	if (d->ch.method != GP_DRV_RUNFILE && d->ch.prebuilt)
		return; /* Canonical-signed */
	if (d->mok_key && d->mok_cert) {
		const char *paths[] = { d->mok_key, d->mok_cert };
		bool present = true;
		for (size_t i = 0; i < 2; i++)
			if (!gp_root_exists(&c->root, paths[i])) {
				present = false;
				block(
				    d,
				    "the MOK %s %s named by the profile does not exist "
				    "in "
				    "%s; create the key pair and enrol the certificate "
				    "(mokutil --import CERT, then reboot to confirm it)",
				    i ? "certificate" : "signing key", paths[i],
				    c->root.dir);
			}
		if (present && d->sb == GP_SB_ON)
			mok_enrolment(c, d);
		return;
	}
	if (d->sb != GP_SB_ON)
		return;
	block(d,
	      "Secure Boot is on and %s would build unsigned kernel modules, which the "
	      "kernel rejects (\"Key was rejected by service\"); either use Canonical's "
	      "signed prebuilt modules (apt, source canonical, \"kernel_modules\": "
	      "\"prebuilt\": linux-modules-nvidia-*), or set \"mok_key\" and "
	      "\"mok_cert\" in stages.driver to a Machine Owner Key enrolled with "
	      "'mokutil --import CERT' and a reboot (Ubuntu's is "
	      "/var/lib/shim-signed/mok/MOK.priv and MOK.der), or turn Secure Boot off",
	      d->ch.method == GP_DRV_RUNFILE ? "the runfile installer" : "DKMS");
}

static char *installed_version(struct gp_ctx *c, const struct drv *d);

/* An NVSwitch system runs no CUDA without the fabric manager (error 802),
 * so a profile without that stage is blocked here, before any change: the
 * driver is the one stage every GPU profile has, and its preflight runs
 * even while it waits for a reboot. Only switches seen on PCI count: a
 * B200 or B300 alone (NVLink 5 switches are not on PCI) may be a virtual
 * machine given one GPU of a board, whose fabric is managed elsewhere. */
static char *fabric_manager_missing(struct gp_ctx *c, const struct drv *d)
{
	struct gp_fabric_hw hw;
	gp_fabric_hw_scan(&d->pci, &hw);
	if (!hw.switches || gp_stage_settings(c, &gp_stage_driver, "fabric_manager"))
		return NULL;
	return gp_xasprintf(
	    "this is an NVSwitch system (%zu NVSwitch bridges, the first at %s) and "
	    "the profile has no stages.fabric_manager: without NVIDIA's fabric "
	    "manager, at exactly the driver's version, CUDA fails with error 802 "
	    "(system not yet initialized); add \"fabric_manager\": {} to the "
	    "profile's stages",
	    hw.switches, hw.first);
}

/* NVIDIA's repository must be addable before a driver from it is
 * installed: a keyring without sha256 or pin would fail in apply. */
static void repo_preflight(struct gp_ctx *c, struct drv *d)
{
	if (d->ch.source != GP_DRV_NVIDIA || d->ch.method == GP_DRV_RUNFILE)
		return;
	_cleanup_free_ char *have = installed_version(c, d);
	if (gp_driver_version_matches(have, d->branch, d->ch.version))
		return; /* installed: the repository is not needed to keep it */
	struct gp_pkg_nvidia_repo nv;
	gp_pkg_nvidia_repo(c->profile, &nv);
	_cleanup_free_ char *problem = gp_pkg_repo_problem(&nv.repo);
	if (problem)
		block(d, "cannot add NVIDIA's repository: %s", problem);
	gp_pkg_nvidia_repo_free(&nv);
}

static int gather(struct gp_ctx *c, const cJSON *cfg, struct drv *d)
{
	*d = (struct drv){ 0 };
	const cJSON *distro = cJSON_GetObjectItemCaseSensitive(c->profile->doc, "distro");
	const char *pmname = gp_json_string(distro, "package_manager", "apt");
	const char *method = gp_json_string(cfg, KEY_METHOD, pmname);
	d->ch.method = strcmp(method, "runfile") == 0 ? GP_DRV_RUNFILE
	               : strcmp(method, "dnf") == 0   ? GP_DRV_DNF
	                                              : GP_DRV_APT;
	d->ch.version = gp_json_string(cfg, KEY_VERSION, NULL);
	const char *branch = gp_json_string(cfg, KEY_BRANCH, NULL);
	if (branch)
		d->branch = gp_xstrdup(branch);
	else if (d->ch.version)
		d->branch = gp_xstrndup(d->ch.version, strcspn(d->ch.version, "."));
	d->ch.branch = d->branch;
	d->ch.server = gp_streq(gp_json_string(cfg, KEY_FLAVOR, NULL), "server");
	d->modules = gp_json_string(cfg, KEY_MODULES, "auto");
	d->kernel_modules = gp_json_string(cfg, KEY_KERNEL_MODULES, "auto");
	d->mok_key = gp_json_string(cfg, KEY_MOK_KEY, NULL);
	d->mok_cert = gp_json_string(cfg, KEY_MOK_CERT, NULL);
	d->url = gp_json_string(cfg, KEY_URL, NULL);
	d->sha256 = gp_json_string(cfg, KEY_SHA256, NULL);
	d->hold = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, KEY_HOLD));
	d->ch.no_streams = !gp_profile_distro_bool(c->profile, "dnf_module_streams",
	                                           true);
	/* Absent or malformed is a fact (not Ubuntu); unreadable (EAGAIN after
	 * every retry, a FIFO) is not, or the stage picks another
	 * distribution's packages. */
	struct gp_os_release osr = { 0 };
	int osrc = gp_os_release_read(&c->root, &osr);
	if (osrc < 0 && osrc != -ENOENT && osrc != -EINVAL) {
		_cleanup_free_ char *why = gp_os_release_error(&c->root, &osr, osrc);
		return gp_fail(c->err, GP_EINPUT, "driver: %s", why);
	}
	bool ubuntu = osrc == 0 && gp_streq(osr.id, "ubuntu");
	gp_os_release_free(&osr);
	const char *source = gp_json_string(cfg, KEY_SOURCE, NULL);
	d->ch.source = gp_streq(source, "nvidia") || (!source && !ubuntu)
	                   ? GP_DRV_NVIDIA
	                   : GP_DRV_CANONICAL;
	d->sb = gp_secure_boot_state(&c->root);
	d->pci_known = gp_pci_scan(&c->root, &d->pci) == 0;
	for (size_t i = 0; i < d->pci.n; i++)
		d->n_nvidia += gp_pci_is_nvidia_gpu(&d->pci.devs[i]);
	find_kernels(c, d);
	d->ch.kernels = d->kernels;
	d->ch.kernel_flavour = d->flavour;

	enum gp_pkg_manager pm = GP_PKG_APT;
	if (gp_pkg_manager(c, &pm) < 0)
		return -1;
	if (!d->branch)
		block(d,
		      "set stages.driver.branch (e.g. \"535\") or stages.driver.version");
	else if (d->ch.method == GP_DRV_RUNFILE && !d->ch.version)
		block(d, "the runfile method needs an exact stages.driver.version (the "
		         "file is NVIDIA-Linux-<arch>-<version>.run)");
	else if (d->ch.method == GP_DRV_RUNFILE && !d->sha256)
		block(d,
		      "stages.driver.sha256 is not set: gpuprov downloads nothing "
		      "without a pinned sha256; pin the sha256 of %s",
		      d->url ? d->url : "the runfile");
	else if (d->ch.method == GP_DRV_APT && pm != GP_PKG_APT)
		block(d, "method apt on a dnf system; use \"method\": \"dnf\"");
	else if (d->ch.method == GP_DRV_DNF && pm != GP_PKG_DNF)
		block(d, "method dnf on an apt system; use \"method\": \"apt\"");
	else if (d->ch.method == GP_DRV_DNF && d->ch.no_streams && !d->ch.version)
		block(d,
		      "this distribution's NVIDIA repository has no dnf module streams "
		      "(distro.dnf_module_streams false: RHEL 10), so dnf would install "
		      "the repository's newest driver (nvidia-open or cuda-drivers), not "
		      "branch %s; pin an exact stages.driver.version of branch %s",
		      d->branch, d->branch);
	else if (d->ch.method == GP_DRV_APT && d->ch.source == GP_DRV_CANONICAL &&
	         !ubuntu)
		block(d, "\"source\": \"canonical\" needs Ubuntu (Canonical's archive); "
		         "use \"source\": \"nvidia\"");
	if (d->pci_known && !d->n_nvidia && (!c->plan || !c->plan->mismatch))
		block(d,
		      "no NVIDIA GPU in %s%s (no PCI display or 3D controller of "
		      "vendor 10de); check that the GPU is seated and visible "
		      "(lspci -d 10de:), or run with --force to install for a GPU "
		      "that is not there yet",
		      gp_root_is_host(&c->root) ? "" : c->root.dir,
		      "/sys/bus/pci/devices");
	if (!d->blocked) {
		_cleanup_free_ char *fm = fabric_manager_missing(c, d);
		if (fm)
			block(d, "%s", fm);
	}
	if (!d->blocked)
		resolve_flavor(c, d);
	if (!d->blocked)
		branch_drives_gpus(c, d);
	if (d->blocked)
		return 0;

	bool canonical = d->ch.method == GP_DRV_APT && d->ch.source == GP_DRV_CANONICAL;
	if (strcmp(d->kernel_modules, "prebuilt") == 0 && !canonical)
		block(d, "\"kernel_modules\": \"prebuilt\" needs Canonical's packages "
		         "(method apt, source canonical)");
	else if (canonical && strcmp(d->kernel_modules, "dkms") != 0)
		d->ch.prebuilt = prebuilt_available(c, d);
	if (canonical && !d->ch.prebuilt && strcmp(d->kernel_modules, "prebuilt") == 0)
		block(d,
		      "\"kernel_modules\": \"prebuilt\", but linux-modules-nvidia-* "
		      "for kernel %s is neither installed nor in the root's package "
		      "lists; use \"kernel_modules\": \"dkms\" (or \"auto\")",
		      d->kernels[0] ? d->kernels[0] : "(unknown)");
	secure_boot(c, d);
	if (!d->ch.prebuilt || d->ch.method == GP_DRV_RUNFILE)
		check_headers(c, d);
	if (!d->header_pkgs)
		d->header_pkgs = gp_xcalloc(1, sizeof(char *));
	if (d->ch.method != GP_DRV_RUNFILE)
		gp_drv_packages(&d->ch, &d->pkgs);
	repo_preflight(c, d);
	if (!d->blocked && d->ch.method != GP_DRV_RUNFILE) {
		/* A held package of the release the driver leaves that the lists
		 * do not offer at the new one: blocked before any change. */
		_cleanup_free_ char *held = gp_pkg_install_problem(c, d->pkgs.want,
		                                                   d->pkgs.n_want);
		if (held)
			block(d, "%s", held);
	}
	return 0;
}

/* --- installed state --------------------------------------------------- */

/* The installed user-space version (upstream), or NULL. */
static char *installed_version(struct gp_ctx *c, const struct drv *d)
{
	if (d->ch.method != GP_DRV_RUNFILE) {
		_cleanup_free_ char *v = NULL;
		if (gp_pkg_installed(c, d->pkgs.probe, &v) < 0 || !v)
			return NULL;
		return gp_pkg_upstream_version(v);
	}
	/* The runfile installs libnvidia-ml.so.<version>: the newest found. */
	char *best = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(lib_dirs); i++) {
		_cleanup_strv_ char **names = NULL;
		if (gp_root_list_dir(&c->root, lib_dirs[i], &names) < 0)
			continue;
		for (size_t j = 0; names[j]; j++) {
			const char *v = names[j] + strlen("libnvidia-ml.so.");
			if (!gp_str_starts_with(names[j], "libnvidia-ml.so.") ||
			    !strchr(v, '.') || !gp_version_is_valid(v))
				continue;
			if (!best || gp_version_compare(v, best) > 0) {
				free(best);
				best = gp_xstrdup(v);
			}
		}
	}
	return best;
}

/* Wants not installed (at their version), headers included: "a, b". */
static char *missing_packages(struct gp_ctx *c, const struct drv *d)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; i < d->pkgs.n_want; i++) {
		const struct gp_pkg_want *w = &d->pkgs.want[i];
		if (w->name[0] == '@')
			continue; /* a dnf module stream: the probe package says it */
		_cleanup_free_ char *v = NULL;
		gp_pkg_installed(c, w->name, &v);
		_cleanup_free_ char *up = v ? gp_pkg_upstream_version(v) : NULL;
		if (v &&
		    (!w->version || gp_streq(up, w->version) || gp_streq(v, w->version)))
			continue;
		gp_buf_printf(&b, "%s%s", b.len ? ", " : "", w->name);
	}
	for (size_t i = 0; d->header_pkgs[i]; i++)
		gp_buf_printf(&b, "%s%s", b.len ? ", " : "", d->header_pkgs[i]);
	return b.len ? gp_buf_steal(&b) : NULL;
}

static char *not_held(struct gp_ctx *c, const struct drv *d)
{
	if (!d->hold || d->ch.method == GP_DRV_RUNFILE)
		return NULL;
	_cleanup_strv_ char **set = gp_pkg_nvidia_set(c);
	struct gp_buf b = { 0 };
	for (size_t i = 0; set[i]; i++)
		if (!gp_pkg_is_held(c, set[i]))
			gp_buf_printf(&b, "%s%s", b.len ? ", " : "", set[i]);
	return b.len ? gp_buf_steal(&b) : NULL;
}

/* Did this stage's install bring name (journaled without
 * "installed_before")? */
static bool installed_by_driver_stage(struct gp_ctx *c, const char *name)
{
	const cJSON *rec = gp_journal_package(&c->journal, name);
	return rec && gp_streq(gp_json_string(rec, "stage", NULL), "driver") &&
	       !gp_json_string(rec, "installed_before", NULL);
}

/* The installed NVIDIA packages the profile's driver leaves behind
 * (gp_drv_package_leaves), and those of the branch's other flavor that
 * the stage installed (gp_drv_package_other_flavor; only those: the fabric
 * manager's nvidia-fabricmanager-535 carries no -server either): removed
 * before the install, not left installed and held beside the new set. */
static char **packages_left(struct gp_ctx *c, const struct drv *d)
{
	char **out = gp_xcalloc(1, sizeof(char *));
	_cleanup_strv_ char **set = gp_pkg_nvidia_set(c);
	for (size_t i = 0; set[i]; i++) {
		_cleanup_free_ char *have = NULL;
		if ((gp_drv_package_leaves(&d->ch, set[i]) ||
		     (gp_drv_package_other_flavor(&d->ch, set[i]) &&
		      installed_by_driver_stage(c, set[i]))) &&
		    gp_pkg_installed(c, set[i], &have) == 0 && have)
			gp_strv_push(&out, set[i]);
	}
	return out;
}

/* An upgrade's package moves, for the check's reason (and so the plan):
 * "NAME OLD -> NEW" for each named package, "NAME OLD -> removed" for each
 * it leaves; the install's exact dependencies follow the named ones (its
 * command pins them). NULL when nothing moves. */
static char *package_moves(struct gp_ctx *c, const struct drv *d, char *const *left)
{
	struct gp_buf b = { 0 };
	for (size_t i = 0; i < d->pkgs.n_want; i++) {
		const struct gp_pkg_want *w = &d->pkgs.want[i];
		_cleanup_free_ char *v = NULL;
		if (w->name[0] == '@' || gp_pkg_installed(c, w->name, &v) < 0)
			continue;
		_cleanup_free_ char *up = v ? gp_pkg_upstream_version(v) : NULL;
		if (v &&
		    (!w->version || gp_streq(up, w->version) || gp_streq(v, w->version)))
			continue;
		gp_buf_printf(&b, "%s%s %s -> %s", b.len ? ", " : "", w->name,
		              v ? v : "(none)", w->version ? w->version : "its newest");
	}
	for (size_t i = 0; left[i]; i++) {
		_cleanup_free_ char *v = NULL;
		gp_pkg_installed(c, left[i], &v);
		gp_buf_printf(&b, "%s%s %s -> removed", b.len ? ", " : "", left[i],
		              v ? v : "?");
	}
	return b.len ? gp_buf_steal(&b) : NULL;
}

struct module_state {
	int rc; /* gp_nvidia_module_read: 0, -ENOENT, -EINVAL */
	char *version;
	bool open;
	bool proc; /* the root has /proc facts at all */
};

static void module_state(struct gp_ctx *c, struct module_state *m)
{
	*m = (struct module_state){ 0 };
	m->rc = gp_nvidia_module_read(&c->root, &m->version, &m->open);
	struct gp_module_list ml = { 0 };
	m->proc = gp_modules_read(&c->root, &ml) == 0 && ml.available;
	gp_module_list_free(&ml);
}

/* Why the loaded module is not the installed driver, or NULL. */
static char *module_differs(const struct drv *d, const struct module_state *m,
                            const char *installed)
{
	if (m->rc == -ENOENT)
		return m->proc ? gp_xstrdup("the nvidia module is not loaded") : NULL;
	if (m->rc < 0)
		return gp_xstrdup("/proc/driver/nvidia/version is unreadable");
	if (installed && gp_version_compare(m->version, installed) != 0)
		return gp_xasprintf(
		    "the loaded nvidia module is %s, the installed driver "
		    "%s (until a reboot: \"Driver/library version "
		    "mismatch\")",
		    m->version, installed);
	if (m->open != d->ch.open)
		return gp_xasprintf("the loaded nvidia module is the %s flavor, the "
		                    "profile's is %s",
		                    flavor_name(m->open), flavor_name(d->ch.open));
	return NULL;
}

static char *describe_target(const struct drv *d)
{
	if (d->ch.method == GP_DRV_RUNFILE)
		return gp_xasprintf("driver %s (%s modules, runfile)", d->ch.version,
		                    flavor_name(d->ch.open));
	return gp_xasprintf("%s%s%s (%s modules%s)", d->pkgs.probe,
	                    d->ch.version ? " " : "", d->ch.version ? d->ch.version : "",
	                    flavor_name(d->ch.open),
	                    d->ch.method == GP_DRV_DNF ? ", DKMS"
	                    : d->ch.prebuilt           ? ", prebuilt signed"
	                                               : ", DKMS");
}

/* The modules are built by DKMS (not Canonical's prebuilt packages, which
 * the want list names per kernel): a newer kernel installed after the
 * driver gets its module from 'dkms autoinstall -k KERNEL'. */
static bool dkms_builds(const struct drv *d)
{
	return !d->ch.prebuilt && d->ch.method != GP_DRV_RUNFILE;
}

static int driver_check(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	struct drv d;
	if (gather(c, cfg, &d) < 0) {
		drv_free(&d);
		return -1;
	}
	if (d.blocked) {
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", d.blocked);
		drv_free(&d);
		return 0;
	}
	_cleanup_free_ char *target = describe_target(&d);
	_cleanup_free_ char *have = installed_version(c, &d);
	_cleanup_free_ char *missing = d.ch.method == GP_DRV_RUNFILE
	                                   ? NULL
	                                   : missing_packages(c, &d);
	_cleanup_free_ char *unheld = not_held(c, &d);
	_cleanup_strv_ char **left = packages_left(c, &d);
	struct module_state m;
	module_state(c, &m);
	_cleanup_free_ char *differs = module_differs(&d, &m, have);
	_cleanup_strv_ char **unbuilt = dkms_builds(&d)
	                                    ? gp_drift_kernels_without_module(c)
	                                    : gp_xcalloc(1, sizeof(char *));
	if (!gp_driver_version_matches(have, d.branch, d.ch.version)) {
		_cleanup_free_ char *moves = have || left[0] ? package_moves(c, &d, left)
		                                             : NULL;
		if (have || left[0])
			gp_check_set(ck, GP_STATE_NEEDED,
			             "installed driver %s, the profile "
			             "wants %s%s%s",
			             have ? have : "of another branch or flavor", target,
			             moves ? "; " : "", moves ? moves : "");
		else
			gp_check_set(ck, GP_STATE_NEEDED,
			             "no NVIDIA driver installed; will "
			             "install %s",
			             target);
	} else if (missing) {
		gp_check_set(ck, GP_STATE_NEEDED, "driver %s installed, but not: %s",
		             have, missing);
	} else if (d.ch.method == GP_DRV_RUNFILE && d.header_pkgs[0]) {
		gp_check_set(ck, GP_STATE_NEEDED, "kernel headers missing: %s",
		             d.header_pkgs[0]);
	} else if (left[0]) {
		_cleanup_free_ char *list = gp_strv_join(left, ", ");
		gp_check_set(ck, GP_STATE_NEEDED,
		             "driver %s installed, but so is what it replaces: %s", have,
		             list);
	} else if (unheld) {
		gp_check_set(ck, GP_STATE_NEEDED, "driver %s installed, not held: %s",
		             have, unheld);
	} else if (differs) {
		gp_check_set(ck, GP_STATE_REBOOT_PENDING,
		             "driver %s installed, but %s; reboot to load it", have,
		             differs);
	} else if (unbuilt[0]) {
		_cleanup_free_ char *list = gp_strv_join(unbuilt, ", ");
		gp_check_set(ck, GP_STATE_NEEDED,
		             "driver %s installed, but no nvidia module for the newer "
		             "kernel %s; DKMS builds it",
		             have, list);
	} else if (!m.proc) {
		gp_check_set(ck, GP_STATE_SATISFIED,
		             "driver %s installed%s; whether its module is loaded is "
		             "unknown (no proc/modules in the root)",
		             have, d.hold ? " and held" : "");
	} else {
		gp_check_set(ck, GP_STATE_SATISFIED,
		             "driver %s (%s) installed%s and loaded", have,
		             flavor_name(d.ch.open), d.hold ? ", held" : "");
	}
	if (d.note)
		gp_check_set(ck, ck->state, "%s; %s", ck->reason, d.note);
	free(m.version);
	drv_free(&d);
	return 0;
}

/* Every blocker gather finds needs only the profile and the machine as it
 * is (nouveau still loaded included): the engine asks for them while the
 * driver waits for the reboot nouveau needs. */
static int driver_preflight(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	struct drv d;
	int rc = gather(c, cfg, &d);
	if (rc == 0 && d.blocked)
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", d.blocked);
	drv_free(&d);
	return rc;
}

/* --- apply ------------------------------------------------------------- */

static int add_nvidia_repo(struct gp_ctx *c)
{
	struct gp_pkg_nvidia_repo nv;
	gp_pkg_nvidia_repo(c->profile, &nv);
	int rc = gp_effect_pkg_add_repo(c, &nv.repo);
	gp_pkg_nvidia_repo_free(&nv);
	return rc;
}

static int mok_config(struct gp_ctx *c, const struct drv *d)
{
	if (!d->mok_key || !d->mok_cert || d->ch.method == GP_DRV_RUNFILE ||
	    d->ch.prebuilt)
		return 0;
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage driver): DKMS signs the NVIDIA modules with");
	gp_buf_printf(&b,
	              "# this Machine Owner Key so that Secure Boot loads them.\n"
	              "mok_signing_key=%s\nmok_certificate=%s\n",
	              d->mok_key, d->mok_cert);
	_cleanup_free_ char *text = gp_buf_steal(&b);
	return gp_effect_write(c, MOK_CONF, text, strlen(text), 0644);
}

static int run_installer(struct gp_ctx *c, const struct drv *d)
{
	const char *arch = gp_profile_arch(c->profile);
	_cleanup_free_ char *name = gp_drv_runfile_name(arch, d->ch.version);
	_cleanup_free_ char *url = d->url ? gp_xstrdup(d->url)
	                                  : gp_drv_runfile_url(arch, d->ch.version);
	const struct gp_fetch_artifact a = { .name = name,
		                             .url = url,
		                             .sha256 = d->sha256 };
	_cleanup_free_ char *path = NULL;
	if (gp_effect_download(c, &a, &path) < 0)
		return -1;
	_cleanup_strv_ char **argv = gp_drv_runfile_argv(path, d->ch.open, d->mok_key,
	                                                 d->mok_cert);
	return gp_effect_run(c, argv);
}

static int apply_steps(struct gp_ctx *c, const struct drv *d)
{
	_cleanup_free_ char *have = installed_version(c, d);
	bool want_install = !gp_driver_version_matches(have, d->branch, d->ch.version);
	_cleanup_free_ char *missing = d->ch.method == GP_DRV_RUNFILE
	                                   ? NULL
	                                   : missing_packages(c, d);
	if (d->ch.source == GP_DRV_NVIDIA && d->ch.method != GP_DRV_RUNFILE &&
	    (want_install || missing) && add_nvidia_repo(c) < 0)
		return -1;
	if (mok_config(c, d) < 0)
		return -1;
	/* Headers first: DKMS builds when the driver's packages configure. */
	size_t nh = gp_strv_len(d->header_pkgs);
	size_t np = d->ch.method != GP_DRV_RUNFILE ? d->pkgs.n_want : 0;
	struct gp_pkg_want *w = gp_xcalloc(nh + np + 1, sizeof(*w));
	size_t n = 0;
	for (size_t i = 0; i < nh; i++)
		w[n++].name = d->header_pkgs[i];
	/* A dnf module stream is no package the layer can find installed: it
	 * is wanted while its probe package is not there at the version. */
	for (size_t i = 0; i < np; i++)
		if (d->pkgs.want[i].name[0] != '@' || want_install)
			w[n++] = d->pkgs.want[i];
	/* The other branch's packages (or the DKMS package prebuilt modules
	 * replace) go first: held, they would stay beside the new ones. A
	 * failed install after puts them back (gp_effect_pkg_install). */
	_cleanup_strv_ char **left = packages_left(c, d);
	int rc = left[0] ? gp_effect_pkg_remove(c, (const char *const *)left,
	                                        gp_strv_len(left))
	                 : 0;
	if (rc == 0 && n)
		rc = gp_effect_pkg_install(c, w, n);
	free(w);
	if (rc < 0)
		return -1;
	if (d->ch.method == GP_DRV_RUNFILE && want_install && run_installer(c, d) < 0)
		return -1;
	if (d->hold && d->ch.method != GP_DRV_RUNFILE) {
		_cleanup_strv_ char **set = gp_pkg_nvidia_set(c);
		if (gp_effect_pkg_hold(c, (const char *const *)set, gp_strv_len(set),
		                       true) < 0)
			return -1;
	}
	/* A kernel installed after the driver (drift, src/stages/drift.c):
	 * its headers are in the install above, DKMS builds the module. */
	_cleanup_strv_ char **unbuilt = dkms_builds(d)
	                                    ? gp_drift_kernels_without_module(c)
	                                    : gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; unbuilt[i]; i++) {
		char *const argv[] = { "dkms", "autoinstall", "-k", unbuilt[i], NULL };
		if (gp_effect_run(c, argv) < 0)
			return -1;
	}
	_cleanup_free_ char *now = installed_version(c, d);
	struct module_state m;
	module_state(c, &m);
	/* In a plan the version a branch resolves to is not known yet. */
	const char *expect = d->ch.version                     ? d->ch.version
	                     : now && gp_version_is_valid(now) ? now
	                                                       : NULL;
	_cleanup_free_ char *differs = module_differs(d, &m, expect);
	if (differs || want_install) {
		_cleanup_free_ char *target = describe_target(d);
		_cleanup_free_ char *why = gp_xasprintf(
		    "%s; %s loads at the next boot",
		    differs ? differs : "the driver was (re)installed", target);
		/* The packages that want the reboot (reboot-required.pkgs);
		 * a dnf module stream ("@nvidia-driver:580-open") is none. */
		_cleanup_free_ const char **pkgs = gp_xcalloc(d->pkgs.n_want + 1,
		                                              sizeof *pkgs);
		size_t named = 0;
		for (size_t i = 0; i < d->pkgs.n_want; i++)
			if (d->pkgs.want[i].name[0] != '@')
				pkgs[named++] = d->pkgs.want[i].name;
		gp_effect_reboot_for(c, why, pkgs);
	}
	free(m.version);
	return 0;
}

static int driver_apply(struct gp_ctx *c, const cJSON *cfg)
{
	struct drv d;
	int rc = gather(c, cfg, &d);
	if (rc == 0 && d.blocked)
		rc = gp_fail(c->err, GP_EBLOCKED, "driver: %s", d.blocked);
	if (rc == 0)
		rc = apply_steps(c, &d);
	drv_free(&d);
	return rc;
}

/* --- verify ------------------------------------------------------------ */

#define STAGE "driver"

/* dlerror() already names the library ("libcuda.so.1: cannot open shared
 * object file: ..."); a missing symbol does not. Returns a static buffer. */
static const char *load_failure(const char *lib, const char *err)
{
	static char buf[512];
	if (!err)
		err = "cannot be loaded";
	if (strncmp(err, lib, strlen(lib)) == 0)
		return err;
	snprintf(buf, sizeof buf, "%s: %s", lib, err);
	return buf;
}

/* The likeliest reason the module is not loaded, as a hint. */
static char *not_loaded_hint(struct gp_ctx *c, const struct drv *d)
{
	for (size_t i = 0; i < d->pci.n; i++) {
		const char *drvname = d->pci.devs[i].driver;
		if (gp_pci_is_nvidia_gpu(&d->pci.devs[i]) && drvname &&
		    (strcmp(drvname, "nouveau") == 0 ||
		     gp_str_starts_with(drvname, "nova"))) {
			_cleanup_free_ char *nouveau = gp_install_hint(c, "nouveau");
			return gp_xasprintf("%s holds %s: %s and reboot", drvname,
			                    d->pci.devs[i].address, nouveau);
		}
	}
	if (d->kernels[0] && !d->ch.prebuilt && !headers_installed(c, d->kernels[0])) {
		_cleanup_free_ char *driver = gp_hint_command(c, "install", STAGE);
		return gp_xasprintf("the kernel headers for %s are missing, so DKMS "
		                    "could not build the module: install them, then "
		                    "'dkms autoinstall' (or '%s')",
		                    d->kernels[0], driver);
	}
	bool unsigned_build = !d->ch.prebuilt || d->ch.method == GP_DRV_RUNFILE;
	if (d->sb == GP_SB_ON && unsigned_build && d->mok_cert &&
	    d->mok == GP_MOK_NOT_ENROLLED)
		return gp_xasprintf(
		    "Secure Boot is on and the MOK certificate %s that signs the module "
		    "is not enrolled (not in MokListRT), so the kernel rejected it "
		    "(dmesg: \"Key was rejected by service\"): run 'mokutil --import "
		    "%s', reboot and confirm the enrolment in the MOK manager on the "
		    "console",
		    d->mok_cert, d->mok_cert);
	if (d->sb == GP_SB_ON && unsigned_build && d->mok_cert &&
	    d->mok == GP_MOK_REVOKED)
		return gp_xasprintf(
		    "Secure Boot is on and the MOK certificate %s that signs the module "
		    "is revoked (in MokListXRT), so the kernel rejected it: sign with a "
		    "new, enrolled MOK",
		    d->mok_cert);
	if (d->sb == GP_SB_ON && unsigned_build)
		return gp_xstrdup(
		    "Secure Boot is on: the kernel rejected the module's "
		    "signature (dmesg: \"Key was rejected by service\"); "
		    "enrol the signing key with 'mokutil --import CERT' and "
		    "reboot, or use Canonical's signed linux-modules-nvidia-*");
	return gp_xstrdup("reboot: the driver was installed after the last boot; if it "
	                  "still does not load, see dmesg for NVRM errors");
}

static void verify_module(struct gp_ctx *c, const struct drv *d, struct gp_report *rep,
                          const struct module_state *m, const char *have)
{
	if (m->rc == -ENOENT && !m->proc) {
		gp_report_add(rep, "driver.module.loaded", GP_WARN, "module loaded",
		              "run verify on the live system to see the loaded module",
		              "unknown: the root has no proc facts");
		return;
	}
	if (m->rc < 0) {
		/* Nothing installed: the module cannot be loaded, whatever else. */
		_cleanup_free_ char *install = gp_install_hint(c, STAGE);
		_cleanup_free_ char *hint =
		    have ? not_loaded_hint(c, d)
		         : gp_xasprintf("no NVIDIA driver is installed: %s", install);
		gp_report_add(rep, "driver.module.loaded", GP_FAIL, "module loaded", hint,
		              "the nvidia module is not loaded (no "
		              "/proc/driver/nvidia/version)");
		return;
	}
	if (have && gp_version_compare(m->version, have) != 0)
		gp_report_add(rep, "driver.module.version", GP_FAIL, "module version",
		              "reboot to load the installed module (user space was "
		              "upgraded under the running module)",
		              "loaded module %s, installed user space %s", m->version,
		              have);
	else
		gp_report_add(rep, "driver.module.version", GP_PASS, "module version",
		              NULL, "loaded module %s equals the installed user space",
		              m->version);
	_cleanup_free_ char *driver = gp_hint_command(c, "install", STAGE);
	_cleanup_free_ char *flavor_hint = gp_xasprintf(
	    "reboot to load the installed flavor; if it persists, reinstall with "
	    "'%s'",
	    driver);
	if (m->open != d->ch.open)
		gp_report_add(rep, "driver.module.flavor", GP_FAIL, "module flavor",
		              flavor_hint, "loaded: %s modules, expected: %s",
		              flavor_name(m->open), flavor_name(d->ch.open));
	else
		gp_report_add(rep, "driver.module.flavor", GP_PASS, "module flavor", NULL,
		              "%s modules", flavor_name(m->open));
}

static void verify_nvml(struct gp_ctx *c, const struct drv *d, struct gp_report *rep,
                        const struct gp_nvml_probe *n, const struct module_state *m)
{
	if (!n->loaded || n->init_rc < 0) {
		_cleanup_free_ char *install = gp_install_hint(c, STAGE);
		_cleanup_free_ char *hint = gp_xasprintf(
		    "the driver's user-space libraries are missing: %s", install);
		gp_report_add(rep, "driver.nvml", GP_FAIL, "NVML", hint, "%s",
		              load_failure("libnvidia-ml.so.1", n->load_error));
		return;
	}
	if (n->init_rc != GP_NVML_SUCCESS) {
		const char *known = gp_driver_nvml_hint(n->init_rc);
		_cleanup_free_ char *hint = known ? gp_xstrdup(known)
		                                  : not_loaded_hint(c, d);
		gp_report_add(rep, "driver.nvml", GP_FAIL, "NVML", hint,
		              "nvmlInit_v2: %d (%s)", n->init_rc,
		              n->init_error ? n->init_error : "?");
		return;
	}
	if (m->rc == 0 && !gp_streq(n->driver_version, m->version))
		gp_report_add(rep, "driver.nvml.version", GP_FAIL, "NVML driver version",
		              "library mismatch: the NVML library is from another driver "
		              "than the loaded module; reboot, or reinstall the driver",
		              "NVML %s, module %s",
		              n->driver_version ? n->driver_version : "?", m->version);
	else
		gp_report_add(rep, "driver.nvml.version", GP_PASS, "NVML driver version",
		              NULL, "%s", n->driver_version ? n->driver_version : "?");
	struct gp_buf names = { 0 };
	size_t off = 0;
	for (int i = 0; i < n->count && i < GP_PROBE_MAX_GPUS; i++) {
		gp_buf_printf(&names, "%s%s", i ? ", " : "",
		              n->names[i] ? n->names[i] : "?");
		off += n->persistence[i] == 0;
	}
	if (d->pci_known && n->count != (int)d->n_nvidia)
		gp_report_add(
		    rep, "driver.nvml.gpus", GP_FAIL, "NVML GPUs",
		    n->count == 0 ? "no GPU initialised: see dmesg for NVRM "
		                    "errors (a GPU the driver does not support, "
		                    "or one that fell off the bus)"
		                  : "a GPU is missing: see dmesg (Xid 79: fell off "
		                    "the bus) and the PCI binding below",
		    "NVML sees %d GPU(s), PCI has %zu%s%s", n->count, d->n_nvidia,
		    names.len ? ": " : "", names.len ? names.data : "");
	else
		gp_report_add(rep, "driver.nvml.gpus", GP_PASS, "NVML GPUs", NULL,
		              "%d: %s", n->count, names.len ? names.data : "none");
	gp_buf_free(&names);
	if (off)
		gp_report_add(rep, "driver.nvml.persistence", GP_WARN, "persistence mode",
		              "enable nvidia-persistenced (systemctl enable --now "
		              "nvidia-persistenced) so the driver stays initialised",
		              "off on %zu GPU(s)", off);
}

static void verify_cuda(struct gp_ctx *c, const struct drv *d, struct gp_report *rep,
                        const struct gp_nvprobe *p)
{
	const struct gp_libcuda_probe *cu = &p->cuda;
	if (!cu->loaded) {
		_cleanup_free_ char *install = gp_install_hint(c, STAGE);
		_cleanup_free_ char *hint = gp_xasprintf(
		    "the driver's libcuda.so.1 is missing: %s", install);
		gp_report_add(rep, "driver.libcuda", GP_FAIL, "libcuda", hint, "%s",
		              load_failure("libcuda.so.1", cu->load_error));
		return;
	}
	if (cu->version_rc == 0)
		gp_report_add(rep, "driver.libcuda.version", GP_PASS, "libcuda version",
		              NULL, "cuDriverGetVersion: CUDA %d.%d", cu->version / 1000,
		              cu->version % 1000 / 10);
	const cJSON *cuda = gp_stage_settings(c, &gp_stage_driver, "cuda");
	const char *tk = gp_json_string(cuda, GP_CUDA_KEY_VERSION, NULL);
	if (tk && cu->version_rc == 0) {
		char have[16];
		snprintf(have, sizeof have, "%d.%d", cu->version / 1000,
		         cu->version % 1000 / 10);
		char *const lint_argv[] = { "gpuprov", "profiles", "lint",
			                    c->profile->path, NULL };
		_cleanup_free_ char *lint = gp_argv_display(lint_argv);
		/* A rollback's profile copy has no file to lint. */
		_cleanup_free_ char *hint = gp_xasprintf(
		    "the CUDA toolkit needs a newer driver: raise "
		    "stages.driver.branch%s%s%s",
		    *c->profile->path ? " (see '" : "", *c->profile->path ? lint : "",
		    *c->profile->path ? "')" : "");
		if (gp_version_compare(have, tk) < 0)
			gp_report_add(
			    rep, "driver.libcuda.toolkit", GP_FAIL, "driver vs toolkit",
			    hint,
			    "the driver supports CUDA %s, the profile's toolkit is %s",
			    have, tk);
	}
	const char *why = cu->init_error ? cu->init_error : "?";
	if (cu->init_rc != GP_CUDA_SUCCESS) {
		const char *known = gp_driver_cuinit_hint(cu->init_rc);
		_cleanup_free_ char *hint = known ? gp_xstrdup(known)
		                                  : not_loaded_hint(c, d);
		gp_report_add(rep, "driver.cuinit", GP_FAIL, "cuInit", hint,
		              "cuInit: %d (%s)", cu->init_rc, why);
		return;
	}
	if (p->nvml.count >= 0 && cu->count != p->nvml.count)
		gp_report_add(rep, "driver.libcuda.devices", GP_FAIL, "CUDA devices",
		              "CUDA_VISIBLE_DEVICES may hide GPUs, or a GPU failed to "
		              "initialise (dmesg)",
		              "libcuda sees %d device(s), NVML %d", cu->count,
		              p->nvml.count);
	else
		gp_report_add(rep, "driver.libcuda.devices", GP_PASS, "CUDA devices",
		              NULL, "cuInit ok, %d device(s)", cu->count);
}

static void verify_binding(struct gp_ctx *c, const struct drv *d, struct gp_report *rep)
{
	if (!d->pci_known)
		return;
	_cleanup_free_ char *nouveau = gp_hint_command(c, "install", "nouveau");
	_cleanup_free_ char *nouveau_hint = gp_xasprintf(
	    "nouveau or nova_core holds the GPU: '%s', then reboot", nouveau);
	for (size_t i = 0; i < d->pci.n; i++) {
		const struct gp_pci_device *g = &d->pci.devs[i];
		if (!gp_pci_is_nvidia_gpu(g))
			continue;
		_cleanup_free_ char *check = gp_xasprintf("binding %s", g->address);
		if (gp_streq(g->driver, "nvidia"))
			gp_report_add_subject(rep, "driver.binding", g->address, GP_PASS,
			                      check, NULL, "bound to nvidia");
		else if (g->driver)
			gp_report_add_subject(rep, "driver.binding", g->address, GP_FAIL,
			                      check, nouveau_hint,
			                      "bound to %s, not nvidia", g->driver);
		else
			gp_report_add_subject(
			    rep, "driver.binding", g->address, GP_FAIL, check,
			    "no driver bound: the nvidia module is not loaded or "
			    "refused the GPU (dmesg)",
			    "not bound to any driver");
	}
}

/* A warning only while it holds: an unsupported branch still drives the
 * GPUs, it just gets no more fixes. */
static void verify_branch_eol(struct gp_ctx *c, struct gp_report *rep)
{
	struct gp_date today;
	if (gp_today(&today) < 0) {
		gp_report_add(rep, "driver.branch_eol", GP_WARN, "branch end of life",
		              "unset GPUPROV_TODAY, or set it to YYYY-MM-DD",
		              "not checked: GPUPROV_TODAY is not a date");
		return;
	}
	_cleanup_free_ char *eol = gp_compat_branch_eol(c->profile->doc, &today);
	if (eol)
		gp_report_add(rep, "driver.branch_eol", GP_WARN, "branch end of life",
		              "raise stages.driver.branch in the profile", "%s", eol);
}

static int driver_verify(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep)
{
	struct drv d;
	if (gather(c, cfg, &d) < 0) {
		drv_free(&d);
		return -1;
	}
	_cleanup_free_ char *have = installed_version(c, &d);
	_cleanup_free_ char *install = gp_hint_command(c, "install", NULL);
	if (d.blocked)
		gp_report_add(rep, "driver.preflight", GP_WARN, "preflight", d.blocked,
		              "'%s' would be blocked", install);
	if (d.note)
		gp_report_add(rep, "driver.mok_enrolment", GP_WARN, "MOK enrolment", NULL,
		              "%s", d.note);
	verify_branch_eol(c, rep);
	_cleanup_free_ char *fm = fabric_manager_missing(c, &d);
	if (fm)
		gp_report_add(rep, "driver.fabric_manager", GP_FAIL, "fabric manager",
		              "add \"fabric_manager\": {} to the profile's stages", "%s",
		              fm);
	if (!gp_driver_version_matches(have, d.branch, d.ch.version)) {
		_cleanup_free_ char *target = d.blocked ? NULL : describe_target(&d);
		_cleanup_free_ char *hint = gp_install_hint(c, STAGE);
		gp_report_add(
		    rep, "driver.installed", GP_FAIL, "installed", hint,
		    "installed: %s; the profile wants %s", have ? have : "none",
		    target ? target
		           : (d.ch.version ? d.ch.version : (d.branch ? d.branch : "?")));
	} else {
		gp_report_add(rep, "driver.installed", GP_PASS, "installed", NULL,
		              "user space %s", have);
	}
	struct module_state m;
	module_state(c, &m);
	/* For gpuprov_driver_info (prometheus.c): what is, whatever was wanted. */
	gp_report_set_fact(rep, "driver/installed", have);
	gp_report_set_fact(rep, "driver/loaded", m.rc == 0 ? m.version : NULL);
	gp_report_set_fact(rep, "driver/flavor", m.rc == 0 ? flavor_name(m.open) : NULL);
	verify_module(c, &d, rep, &m, have);
	if (!gp_root_is_host(&c->root) && geteuid() != 0) {
		gp_report_add(rep, "driver.probe", GP_WARN, "NVML and libcuda",
		              "run verify as root to probe the libraries in another root",
		              "not probed: chrooting into %s needs root", c->root.dir);
	} else {
		struct gp_nvprobe p;
		int rc = gp_ctx_nvprobe(c, PROBE_TIMEOUT_MS, &p);
		if (rc < 0)
			gp_report_add(rep, "driver.probe", GP_FAIL, "NVML and libcuda",
			              NULL, "cannot start the probe: %s", strerror(-rc));
		else if (p.error)
			gp_report_add(rep, "driver.probe", GP_FAIL, "NVML and libcuda",
			              "run 'nvidia-smi' for the driver's own view", "%s",
			              p.error);
		if (rc == 0) {
			verify_nvml(c, &d, rep, &p.nvml, &m);
			verify_cuda(c, &d, rep, &p);
			gp_nvprobe_free(&p);
		}
	}
	verify_binding(c, &d, rep);
	free(m.version);
	drv_free(&d);
	return 0;
}

char *gp_driver_target_version(struct gp_ctx *c, const cJSON *cfg)
{
	if (!cfg)
		return NULL;
	struct drv d;
	char *v = NULL;
	if (gather(c, cfg, &d) == 0 && (d.pkgs.probe || d.ch.method == GP_DRV_RUNFILE))
		v = installed_version(c, &d);
	if (v && !*v) /* planned at the candidate: not known before the run */
		v = (free(v), NULL);
	if (!v && d.ch.version)
		v = gp_xstrdup(d.ch.version);
	drv_free(&d);
	return v;
}

char *gp_driver_known_version(struct gp_ctx *c, const cJSON *cfg)
{
	if (!cfg)
		return NULL;
	struct drv d;
	char *v = NULL;
	int rc = gather(c, cfg, &d);
	if (rc == 0 && d.ch.version) {
		v = gp_xstrdup(d.ch.version);
	} else if (rc == 0 && d.ch.method != GP_DRV_RUNFILE && d.pkgs.probe) {
		/* The driver stage keeps a driver of its branch it finds. */
		_cleanup_free_ char *have = gp_pkg_installed_before(c, d.pkgs.probe);
		_cleanup_free_ char *up = have ? gp_pkg_upstream_version(have) : NULL;
		if (up && gp_driver_version_matches(up, d.branch, NULL))
			v = TAKE_PTR(up);
	}
	drv_free(&d);
	return v;
}

/* Announces the runfile download: the profile alone determines it. */
static int driver_prefetch(struct gp_ctx *c, const cJSON *cfg)
{
	const char *method = gp_json_string(cfg, KEY_METHOD, NULL);
	const char *version = gp_json_string(cfg, KEY_VERSION, NULL);
	const char *sha = gp_json_string(cfg, KEY_SHA256, NULL);
	if (!gp_streq(method, "runfile") || !version || !sha)
		return 0;
	const char *arch = gp_profile_arch(c->profile);
	_cleanup_free_ char *name = gp_drv_runfile_name(arch, version);
	const char *u = gp_json_string(cfg, KEY_URL, NULL);
	_cleanup_free_ char *url = u ? gp_xstrdup(u) : gp_drv_runfile_url(arch, version);
	const struct gp_fetch_artifact a = { .name = name, .url = url, .sha256 = sha };
	gp_prefetch_add(c, &a);
	return 0;
}

/* Adds NVIDIA's package repository unless the driver comes from Ubuntu's
 * archive (source canonical, the default on Ubuntu) or a runfile; a profile
 * that names no distro leaves that to the host, and is not judged. */
static bool driver_uses_nvidia_repo(const struct gp_profile *p, const cJSON *cfg)
{
	if (gp_streq(gp_json_string(cfg, KEY_METHOD, NULL), "runfile"))
		return false;
	const char *source = gp_json_string(cfg, KEY_SOURCE, NULL);
	if (source)
		return strcmp(source, "nvidia") == 0;
	const cJSON *match = cJSON_GetObjectItemCaseSensitive(p->doc, "match");
	const char *os = gp_json_string(match, "os_id", NULL);
	return os && strcmp(os, "ubuntu") != 0;
}

const struct gp_stage gp_stage_driver = {
	.name = "driver",
	.summary = "NVIDIA kernel driver and user-space libraries",
	.flags = GP_STAGE_NEEDS_REBOOTED_KERNEL,
	.keys = driver_keys,
	.doc = "The NVIDIA driver.",
	.reads = (const char *const[]){ "cuda", "fabric_manager", NULL },
	.check = driver_check,
	.apply = driver_apply,
	.verify = driver_verify,
	.prefetch = driver_prefetch,
	.preflight = driver_preflight,
	.pin = &(const struct gp_stage_pin){ .method = "runfile",
	                                     .key = KEY_SHA256,
	                                     .what = "the driver runfile" },
	.uses_nvidia_repo = driver_uses_nvidia_repo,
};
