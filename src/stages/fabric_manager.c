/* Stage fabric_manager: NVIDIA's fabric manager on NVSwitch systems.
 * check:  nothing to do without an NVSwitch (PCI: an NVIDIA bridge of a
 *         known NVSwitch id) or an NVLink 5 HGX GPU (B200, B300), said with
 *         the reason. Else nvidia-fabricmanager-<branch> (dnf:
 *         nvidia-fabric-manager) at exactly the driver's version (the one
 *         installed, or the driver stage's exact pin), held when the driver
 *         is, its service enabled (on the live host also running, once
 *         the loaded module is the driver's version); on NVLink 5 also nvlsm and
 *         /etc/modules-load.d/gpuprov-fabric.conf (mlx5_ib, ib_umad).
 *         Blocked, before any change, when the root's apt lists offer the
 *         package but not at the driver's version: the fabric manager
 *         refuses to start on another one.
 * apply:  the packages in one transaction, the hold, the service's
 *         multi-user.target.wants link, the modules-load.d file. While the
 *         plan cannot know the driver's version (a branch not installed
 *         before the run) the install and hold are one rule effect, in the
 *         plan and the run alike (src/pkg.c does the same for pins the apt
 *         lists do not offer yet); the run's command lines are in its log.
 *         On the live host, `systemctl start` when the loaded module is
 *         already the driver's version (else the driver's reboot starts it).
 * verify: the version equals the driver's, the hold, the service enabled
 *         (under --root: its link; on the live host: systemctl is-active),
 *         NVLSM and its modules, and every GPU's fabric state "Completed"
 *         through NVML (nvfabric.h), with the hint for CUDA error 802.
 * Facts and sources: docs/reference/fabric-manager.md. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "gpuprov/driver.h"
#include "gpuprov/json.h"
#include "gpuprov/nvdriver.h"
#include "gpuprov/nvfabric.h"
#include "gpuprov/nvproc.h"
#include "gpuprov/nvswitch.h"
#include "gpuprov/pci.h"
#include "gpuprov/pkg.h"
#include "gpuprov/pkgdb.h"
#include "gpuprov/root.h"
#include "gpuprov/run.h"
#include "gpuprov/stages.h"
#include "gpuprov/version.h"

#define STAGE "fabric_manager"
#define SERVICE "nvidia-fabricmanager.service"
#define WANTS_LINK "/etc/systemd/system/multi-user.target.wants/" SERVICE
#define MODULES_LOAD "/etc/modules-load.d/gpuprov-fabric.conf"
#define MODULES_LOAD_TEXT                                                                \
	"# Written by gpuprov (stage fabric_manager): NVLSM, which the NVLink 5\n"       \
	"# fabric manager starts, talks to the NVSwitches over InfiniBand.\n"            \
	"mlx5_ib\n"                                                                      \
	"ib_umad\n"
#define NVLSM "nvlsm"
#define PROBE_TIMEOUT_MS 30000

/* --- profile keys (stages.fabric_manager) ------------------------------- */

#define KEY_NVSWITCH "nvswitch"

static const char *const nvswitch_modes[] = { "auto", "nvlink4", "nvlink5", "none",
	                                      NULL };

static const struct gp_key fabric_manager_keys[] = {
	GP_KEY_ENUM_ROW(KEY_NVSWITCH, nvswitch_modes,
	                .doc = "Whether this is an NVSwitch system: auto (the PCI "
	                       "devices say: an NVSwitch bridge, or a B200/B300 GPU "
	                       "for NVLink 5), nvlink4 (the fabric manager whatever "
	                       "PCI says: an image for HGX A100/H100/H200 boards), "
	                       "nvlink5 (also NVLSM and mlx5_ib, ib_umad: HGX "
	                       "B200/B300), none (nothing to do: a virtual machine "
	                       "given some of a board's GPUs, its fabric managed "
	                       "by the host).",
	                .default_value = "\"auto\"", .example = "\"nvlink5\""),
	GP_KEY_END,
};

struct fm {
	struct gp_pci_list pci;
	bool pci_known;
	struct gp_fabric_hw hw;
	const char *mode; /* KEY_NVSWITCH */
	bool needed; /* the fabric manager is needed here */
	bool nvl5; /* NVLink 5: NVLSM and its modules too */
	enum gp_pkg_manager pm;
	char *version; /* the driver's, upstream; NULL when not known yet */
	bool deferred; /* a plan of this run does not know it (a rule) */
	char *package; /* nvidia-fabricmanager-<branch> or nvidia-fabric-manager */
	bool hold; /* the driver's hold */
	const char *unit; /* the packaged unit file */
	char *blocked;
};

static void fm_free(struct fm *f)
{
	gp_pci_list_free(&f->pci);
	free(f->version);
	free(f->package);
	free(f->blocked);
}

static bool nvlink5(const struct fm *f)
{
	return f->nvl5;
}

static char *pci_where(struct gp_ctx *c)
{
	return gp_xasprintf("%s/sys/bus/pci/devices",
	                    gp_root_is_host(&c->root) ? "" : c->root.dir);
}

/* 0 with *f filled; f->needed says whether there is anything to do. -1
 * with c->err set. */
static int fm_gather(struct gp_ctx *c, const cJSON *cfg, struct fm *f)
{
	*f = (struct fm){ .mode = gp_json_string(cfg, KEY_NVSWITCH, "auto") };
	f->pci_known = gp_pci_scan(&c->root, &f->pci) == 0;
	gp_fabric_hw_scan(&f->pci, &f->hw);
	bool automatic = strcmp(f->mode, "auto") == 0;
	f->needed = automatic ? gp_fabric_hw_needs_fm(&f->hw)
	                      : strcmp(f->mode, "none") != 0;
	f->nvl5 = automatic ? f->hw.nvlink5_gpus > 0 : strcmp(f->mode, "nvlink5") == 0;
	if (!f->needed)
		return 0;
	if (gp_pkg_manager(c, &f->pm) < 0)
		return -1;
	const cJSON *drv = gp_stage_settings(c, &gp_stage_fabric_manager, "driver");
	f->hold = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(drv, GP_DRIVER_KEY_HOLD));
	f->version = gp_driver_target_version(c, drv);
	_cleanup_free_ char *known = gp_driver_known_version(c, drv);
	f->deferred = !known || !f->version;
	const char *branch = gp_json_string(drv, GP_DRIVER_KEY_BRANCH, NULL);
	_cleanup_free_ char *major = f->version ? gp_xstrndup(f->version,
	                                                      strcspn(f->version, "."))
	                                        : NULL;
	if (major)
		branch = major;
	f->unit = f->pm == GP_PKG_DNF ? "/usr/lib/systemd/system/" SERVICE
	                              : "/lib/systemd/system/" SERVICE;
	if (f->pm == GP_PKG_DNF)
		f->package = gp_xstrdup("nvidia-fabric-manager");
	else if (branch)
		f->package = gp_xasprintf("nvidia-fabricmanager-%s", branch);
	if (!drv || !branch) {
		f->blocked = gp_xstrdup(
		    "the fabric manager must be at exactly the driver's version, and "
		    "the profile's driver stage names neither a branch nor a version");
		return 0;
	}
	if (f->pm != GP_PKG_APT || !f->version)
		return 0;
	/* The lists offer the package, but not at the driver's version: apt
	 * would refuse the pin, after the driver was installed. */
	_cleanup_strv_ char **offered = NULL;
	_cleanup_free_ char *have = NULL;
	if (gp_pkg_installed(c, f->package, &have) < 0)
		return -1;
	if (have && gp_pkg_version_matches(have, f->version))
		return 0;
	if (gp_apt_candidates(&c->root, f->package, &offered) <= 0 || !offered[0])
		return 0;
	for (size_t i = 0; offered[i]; i++)
		if (gp_pkg_version_matches(offered[i], f->version))
			return 0;
	_cleanup_free_ char *list = gp_strv_join(offered, ", ");
	f->blocked = gp_xasprintf(
	    "the root's apt lists offer %s at %s, not at the driver's version %s, "
	    "and the fabric manager refuses to start unless it is exactly the "
	    "driver's version: pin stages.driver.version to a version both have, "
	    "or use the repository that has %s %s",
	    f->package, list, f->version, f->package, f->version);
	return 0;
}

/* systemctl is-active SERVICE (a read, in every mode): *res its output,
 * free it. */
static bool service_active(struct gp_ctx *c, struct gp_run_result *res, int *rc)
{
	char *const argv[] = { "systemctl", "is-active", SERVICE, NULL };
	*res = (struct gp_run_result){ 0 };
	*rc = gp_ctx_run_readonly(c, argv, res);
	return *rc == 0 && res->exit_code == 0 && !res->signal;
}

/* The live host only: start the service now? The package enables it for
 * the next boot; when the loaded module is already the driver's version
 * (no reboot to wait for) nothing else starts it, and CUDA fails with
 * error 802 until it runs. */
static bool start_needed(struct gp_ctx *c, const struct fm *f)
{
	if (!gp_root_is_host(&c->root) || f->deferred || !f->version)
		return false;
	_cleanup_free_ char *loaded = NULL;
	bool open;
	if (gp_nvidia_module_read(&c->root, &loaded, &open) < 0 ||
	    gp_version_compare(loaded, f->version) != 0)
		return false;
	struct gp_run_result res;
	int rc;
	bool active = service_active(c, &res, &rc);
	gp_run_result_free(&res);
	return !active;
}

/* What is missing, "; "-joined, or NULL. *install: a package is to be
 * installed; *unheld: one is not held. */
static char *fm_missing(struct gp_ctx *c, const struct fm *f, bool *install, bool *unheld)
{
	struct gp_buf why = { 0 };
	*install = *unheld = false;
	const char *names[] = { f->package, nvlink5(f) ? NVLSM : NULL };
	for (size_t i = 0; i < ARRAY_SIZE(names) && names[i]; i++) {
		_cleanup_free_ char *have = NULL;
		gp_pkg_installed(c, names[i], &have);
		bool exact = i > 0 || (have && f->version &&
		                       gp_pkg_version_matches(have, f->version));
		if (!have || !*have || !exact) {
			*install = true;
			gp_buf_printf(&why, "%s%s%s%s%s", why.len ? "; " : "", names[i],
			              have && *have ? " " : "", have && *have ? have : "",
			              have && *have ? " is installed, the driver is "
			                            : " is not installed");
			if (have && *have)
				gp_buf_puts(&why, f->version ? f->version : "?");
		} else if (f->hold && !gp_pkg_is_held(c, names[i])) {
			*unheld = true;
			gp_buf_printf(&why, "%s%s is not held", why.len ? "; " : "",
			              names[i]);
		}
	}
	_cleanup_free_ char *link = NULL;
	if (gp_root_readlink(&c->root, WANTS_LINK, &link) < 0 || strcmp(link, f->unit))
		gp_buf_printf(&why, "%s" SERVICE " is not enabled", why.len ? "; " : "");
	if (nvlink5(f) && !gp_stage_file_is(c, MODULES_LOAD, MODULES_LOAD_TEXT))
		gp_buf_printf(&why,
		              "%s" MODULES_LOAD " does not load mlx5_ib and ib_umad",
		              why.len ? "; " : "");
	if (start_needed(c, f))
		gp_buf_printf(&why,
		              "%s" SERVICE " is not running, and the loaded nvidia "
		              "module is the driver's version %s: it is started now",
		              why.len ? "; " : "", f->version);
	return why.len ? gp_buf_steal(&why) : NULL;
}

static int fm_check(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	struct fm f;
	if (fm_gather(c, cfg, &f) < 0) {
		fm_free(&f);
		return -1;
	}
	_cleanup_free_ char *where = pci_where(c);
	if (!f.needed && strcmp(f.mode, "none") == 0) {
		gp_check_set(ck, GP_STATE_SATISFIED,
		             "stages.fabric_manager." KEY_NVSWITCH " is none: the fabric "
		             "is not managed here");
		fm_free(&f);
		return 0;
	}
	if (!f.needed) {
		gp_check_set(ck, GP_STATE_SATISFIED,
		             f.pci_known
		                 ? "no NVSwitch in %s (no NVIDIA bridge of an "
		                   "NVSwitch id, no NVLink 5 HGX GPU): the fabric "
		                   "manager is not needed"
		                 : "%s is not there: no NVSwitch seen, the fabric "
		                   "manager is not needed",
		             where);
		fm_free(&f);
		return 0;
	}
	if (f.blocked) {
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", f.blocked);
		fm_free(&f);
		return 0;
	}
	bool install, unheld;
	_cleanup_free_ char *missing = fm_missing(c, &f, &install, &unheld);
	if (missing && f.deferred)
		gp_check_set(
		    ck, GP_STATE_NEEDED,
		    "%s; it is installed at exactly the version the driver stage "
		    "installs",
		    missing);
	else if (missing)
		gp_check_set(ck, GP_STATE_NEEDED, "%s", missing);
	else
		gp_check_set(ck, GP_STATE_SATISFIED, "%s %s%s%s, " SERVICE " enabled%s",
		             f.package, f.version, nvlink5(&f) ? " and " NVLSM : "",
		             f.hold ? ", held" : "",
		             nvlink5(&f) ? ", mlx5_ib and ib_umad loaded at boot" : "");
	fm_free(&f);
	return 0;
}

static int fm_apply(struct gp_ctx *c, const cJSON *cfg)
{
	struct fm f;
	int rc = -1;
	bool install, unheld;
	_cleanup_free_ char *missing = NULL, *link = NULL;
	if (fm_gather(c, cfg, &f) < 0)
		goto out;
	if (!f.needed) {
		rc = 0;
		goto out;
	}
	if (f.blocked) {
		gp_fail(c->err, GP_EBLOCKED, "stage " STAGE ": %s", f.blocked);
		goto out;
	}
	missing = fm_missing(c, &f, &install, &unheld);
	const char *names[] = { f.package, NVLSM };
	size_t n = nvlink5(&f) ? 2 : 1;
	struct gp_pkg_want w[] = { { f.package, f.version }, { NVLSM, NULL } };
	if (install && f.deferred) {
		/* A driver branch not installed before the run: the version is
		 * the one the driver stage's install resolves, known to the run
		 * only, which installs and holds inside the rule. */
		gp_effect_rule_begin(c, "run",
		                     "install %s at exactly the upstream version of the "
		                     "driver the driver stage installed (its newest "
		                     "revision in the refreshed lists)%s%s%s",
		                     f.package, n > 1 ? ", and " NVLSM : "",
		                     f.hold ? ", then hold " : "",
		                     f.hold ? (n > 1 ? "both" : "it") : "");
		int made = !f.version ? 0 : gp_effect_pkg_install(c, w, n);
		if (made == 0 && f.version && f.hold)
			made = gp_effect_pkg_hold(c, names, n, true);
		gp_effect_rule_end(c);
		if (made < 0)
			goto out;
	} else {
		if (install && gp_effect_pkg_install(c, w, n) < 0)
			goto out;
		if (f.hold && (install || unheld) &&
		    gp_effect_pkg_hold(c, names, n, true) < 0)
			goto out;
	}
	if ((gp_root_readlink(&c->root, WANTS_LINK, &link) < 0 || strcmp(link, f.unit)) &&
	    gp_effect_symlink(c, f.unit, WANTS_LINK) < 0)
		goto out;
	if (nvlink5(&f) && gp_effect_write(c, MODULES_LOAD, MODULES_LOAD_TEXT,
	                                   strlen(MODULES_LOAD_TEXT), 0644) < 0)
		goto out;
	char *const start[] = { "systemctl", "start", SERVICE, NULL };
	if (start_needed(c, &f) && gp_effect_run(c, start) < 0)
		goto out;
	rc = 0;
out:
	fm_free(&f);
	return rc;
}

/* --- verify -------------------------------------------------------------- */

static void verify_packages(struct gp_ctx *c, const struct fm *f, struct gp_report *rep,
                            const char *install)
{
	_cleanup_free_ char *have = NULL;
	gp_pkg_installed(c, f->package, &have);
	bool ok = have && f->version && gp_pkg_version_matches(have, f->version);
	gp_report_add(rep, "fabric_manager.package", ok ? GP_PASS : GP_FAIL,
	              "fabric manager version", install, "%s %s; the driver is %s",
	              f->package, have ? have : "is not installed",
	              f->version ? f->version : "not installed");
	if (f->hold && have) {
		bool held = gp_pkg_is_held(c, f->package);
		gp_report_add(rep, "fabric_manager.hold", held ? GP_PASS : GP_FAIL,
		              "hold", install, "%s is %s", f->package,
		              held
		                  ? "held with the driver"
		                  : "not held (an upgrade would move it off the driver's "
		                    "version)");
	}
	if (!nvlink5(f))
		return;
	_cleanup_free_ char *lsm = NULL;
	gp_pkg_installed(c, NVLSM, &lsm);
	gp_report_add(rep, "fabric_manager.nvlsm", lsm ? GP_PASS : GP_FAIL, NVLSM,
	              install, "%s %s (NVLink 5: the fabric manager starts NVLSM)", NVLSM,
	              lsm ? lsm : "is not installed");
	bool loads = gp_stage_file_is(c, MODULES_LOAD, MODULES_LOAD_TEXT);
	gp_report_add(rep, "fabric_manager.modules_load", loads ? GP_PASS : GP_FAIL,
	              "mlx5_ib and ib_umad at boot", install, "%s %s", MODULES_LOAD,
	              loads ? "loads mlx5_ib and ib_umad"
	                    : "does not load mlx5_ib and ib_umad; without them "
	                      "NVLSM finds no switch and CUDA fails with error 802");
}

static void verify_service(struct gp_ctx *c, const struct fm *f, struct gp_report *rep,
                           const char *install)
{
	if (gp_root_is_host(&c->root)) {
		struct gp_run_result res;
		int rc;
		bool active = service_active(c, &res, &rc);
		const char *said = res.output ? res.output : "";
		gp_report_add(rep, "fabric_manager.service", active ? GP_PASS : GP_FAIL,
		              "service",
		              "see 'journalctl -u " SERVICE "': it refuses to start "
		              "unless its version is the driver's",
		              "systemctl is-active " SERVICE ": %.*s",
		              (int)strcspn(said, "\n"), rc < 0 ? strerror(-rc) : said);
		gp_run_result_free(&res);
		return;
	}
	_cleanup_free_ char *link = NULL;
	bool enabled = gp_root_readlink(&c->root, WANTS_LINK, &link) == 0 &&
	               strcmp(link, f->unit) == 0;
	bool unit = gp_ctx_exists(c, f->unit);
	gp_report_add(rep, "fabric_manager.service", enabled && unit ? GP_PASS : GP_FAIL,
	              "service", install, "%s %s%s%s; the unit %s %s", SERVICE,
	              enabled ? "is enabled (" : "is not enabled",
	              enabled ? WANTS_LINK : "", enabled ? ")" : "", f->unit,
	              unit ? "is installed" : "is missing");
}

static void verify_fabric(struct gp_ctx *c, const struct fm *f, struct gp_report *rep)
{
	if (!gp_root_is_host(&c->root) && geteuid() != 0) {
		gp_report_add(rep, "fabric_manager.probe", GP_WARN, "NVML fabric state",
		              "run verify as root to probe the library in another root",
		              "not probed: chrooting into %s needs root", c->root.dir);
		return;
	}
	struct gp_nvfabric p;
	int rc = gp_ctx_nvfabric(c, PROBE_TIMEOUT_MS, &p);
	const char *why = rc < 0           ? strerror(-rc)
	                  : p.error        ? p.error
	                  : !p.loaded      ? p.load_error
	                  : p.init_rc != 0 ? "nvmlInit_v2 failed (the driver stage's "
	                                     "findings say why)"
	                  : !p.api         ? "the library has neither "
	                                     "nvmlDeviceGetGpuFabricInfoV nor "
	                                     "nvmlDeviceGetGpuFabricInfo (a driver "
	                                     "older than R535?)"
	                  : p.count <= 0   ? "NVML sees no GPU"
	                                   : NULL;
	if (why) {
		gp_report_add(rep, "fabric_manager.probe", GP_FAIL, "NVML fabric state",
		              "run 'nvidia-smi -q' for the driver's own view", "%s", why);
		if (rc == 0)
			gp_nvfabric_clear(&p);
		return;
	}
	for (int i = 0; i < p.count && i < GP_PROBE_MAX_GPUS; i++) {
		char subject[16];
		snprintf(subject, sizeof subject, "gpu%d", i);
		bool done = p.rc[i] == 0 && p.state[i] == GP_FABRIC_COMPLETED &&
		            p.status[i] == 0;
		_cleanup_free_ char *hint = gp_xasprintf(
		    "until the fabric manager has registered the GPU, CUDA fails with "
		    "error 802 (cudaErrorSystemNotReady, \"system not yet "
		    "initialized\") while nvidia-smi looks fine: see 'systemctl "
		    "status " SERVICE "' and 'journalctl -u " SERVICE
		    "'; %s must be at the "
		    "driver's version %s%s",
		    f->package, f->version ? f->version : "?",
		    nvlink5(f) ? ", and NVLSM with mlx5_ib and ib_umad loaded" : "");
		if (p.rc[i] != 0)
			gp_report_add_subject(rep, "fabric_manager.fabric_state", subject,
			                      GP_FAIL, "fabric state", hint,
			                      "GPU %d: the fabric info call returned %d",
			                      i, p.rc[i]);
		else
			gp_report_add_subject(rep, "fabric_manager.fabric_state", subject,
			                      done ? GP_PASS : GP_FAIL, "fabric state",
			                      hint, "GPU %d: %s (status %d)", i,
			                      gp_fabric_state_name(p.state[i]),
			                      p.status[i]);
	}
	gp_nvfabric_clear(&p);
}

static int fm_verify(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep)
{
	struct fm f;
	if (fm_gather(c, cfg, &f) < 0) {
		fm_free(&f);
		return -1;
	}
	if (!f.needed) {
		_cleanup_free_ char *where = pci_where(c);
		if (strcmp(f.mode, "none") == 0)
			gp_report_add(rep, "fabric_manager.nvswitch", GP_SKIP, "NVSwitch",
			              NULL,
			              "stages.fabric_manager." KEY_NVSWITCH " is none");
		else
			gp_report_add(
			    rep, "fabric_manager.nvswitch", GP_SKIP, "NVSwitch", NULL,
			    "no NVSwitch in %s: the fabric manager is not needed", where);
		fm_free(&f);
		return 0;
	}
	if (strcmp(f.mode, "auto") != 0)
		gp_report_add(rep, "fabric_manager.nvswitch", GP_PASS, "NVSwitch", NULL,
		              "stages.fabric_manager." KEY_NVSWITCH " is %s", f.mode);
	else
		gp_report_add(rep, "fabric_manager.nvswitch", GP_PASS, "NVSwitch", NULL,
		              "%zu NVSwitch bridges, %zu NVLink 5 HGX GPUs (the first at "
		              "%s)",
		              f.hw.switches, f.hw.nvlink5_gpus, f.hw.first);
	_cleanup_free_ char *install = gp_install_hint(c, STAGE);
	if (!f.package) {
		gp_report_add(rep, "fabric_manager.package", GP_FAIL,
		              "fabric manager version", NULL, "%s",
		              f.blocked ? f.blocked : "no package");
		fm_free(&f);
		return 0;
	}
	verify_packages(c, &f, rep, install);
	verify_service(c, &f, rep, install);
	verify_fabric(c, &f, rep);
	fm_free(&f);
	return 0;
}

const struct gp_stage gp_stage_fabric_manager = {
	.name = STAGE,
	.summary = "NVIDIA fabric manager on NVSwitch systems, at the driver's version",
	.keys = fabric_manager_keys,
	.doc = "Installs NVIDIA's fabric manager (and NVLSM on NVLink 5 systems) at "
	       "exactly the driver's version on NVSwitch systems and enables its "
	       "service; nothing elsewhere.",
	.reads = (const char *const[]){ "driver", NULL },
	.check = fm_check,
	.apply = fm_apply,
	.verify = fm_verify,
};
