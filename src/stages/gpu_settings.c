/* Stage gpu_settings: the GPUs' own settings, after the driver.
 * check:  the nvidia-persistenced drop-in that turns persistence on (the
 *         Ubuntu unit starts the daemon with --no-persistence-mode) and the
 *         daemon enabled; the boot unit gpuprov-gpu-settings.service with
 *         the profile's values in its ExecStart, enabled. Through NVML
 *         (read-only child, nvsettings.h), when the driver answers: a power
 *         limit outside the GPU's limits, or clocks it does not list as
 *         supported, block; an ECC or MIG mode that is
 *         pending is a reboot pending; on the live host any other value
 *         that differs (persistence, power limit, application clocks,
 *         compute mode, ECC, MIG) makes the stage needed.
 * apply:  the drop-in, the unit and the wants symlinks as file effects (the
 *         plan shows the values in the unit); on the live host only
 *         `systemctl daemon-reload`, a restart of nvidia-persistenced (when
 *         the driver's unit is there) and of the boot unit (when NVML
 *         answers), which sets the values (`gpuprov gpu-settings apply`);
 *         an ECC or MIG change asks for a reboot. Waits, as the driver
 *         does, for a pending reboot. gpuprov itself
 *         never calls an NVML setter during an install.
 * verify: the files; through NVML every GPU's persistence mode, enforced
 *         power limit, application clocks, compute mode, ECC (current and
 *         pending) and MIG mode against the profile; a value that differs
 *         while the boot unit is in place was changed since it ran (drift).
 *         Locked clocks have no NVML getter: a skip that says so.
 * uninstall: besides the files (src/undo.c), on the live host while NVML
 *         answers, `gpuprov gpu-settings reset` (a planned command, its
 *         values in the reason) gives the power limit, clocks and compute
 *         mode the profile set back to the defaults; under --root they are
 *         untouched. ECC and MIG modes stay (nvreset.h says why).
 * Facts and sources: docs/reference/gpu-settings.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/gpusettings.h"
#include "gpuprov/journal.h"
#include "gpuprov/json.h"
#include "gpuprov/nvreset.h"
#include "gpuprov/nvsettings.h"
#include "gpuprov/root.h"
#include "gpuprov/stages.h"

#define STAGE "gpu_settings"
#define NVML_TIMEOUT_MS 30000

#define PERSISTENCED "nvidia-persistenced.service"
#define DROPIN "/etc/systemd/system/" PERSISTENCED ".d/gpuprov.conf"
#define PERSISTENCED_UNIT "/usr/lib/systemd/system/" PERSISTENCED
#define PERSISTENCED_WANTS "/etc/systemd/system/multi-user.target.wants/" PERSISTENCED
#define BOOT_SERVICE "gpuprov-gpu-settings.service"
#define BOOT_UNIT "/etc/systemd/system/" BOOT_SERVICE
#define BOOT_WANTS "/etc/systemd/system/multi-user.target.wants/" BOOT_SERVICE

#ifndef GP_BINDIR
#define GP_BINDIR "/usr/local/bin"
#endif

/* --- profile keys (stages.gpu_settings) ---------------------------------- */

#define KEY_PERSISTENCE "persistence"
#define KEY_POWER_LIMIT_WATTS "power_limit_watts"
#define KEY_POWER_LIMIT_FRACTION "power_limit_fraction"
#define KEY_LOCKED_MIN "locked_gpu_clock_min_mhz"
#define KEY_LOCKED_MAX "locked_gpu_clock_max_mhz"
#define KEY_APP_MEMORY "application_clock_memory_mhz"
#define KEY_APP_GRAPHICS "application_clock_graphics_mhz"
#define KEY_COMPUTE_MODE "compute_mode"
#define KEY_ECC "ecc"
#define KEY_MIG "mig"

static const char *const compute_modes[] = { "default", "prohibited", "exclusive_process",
	                                     NULL };

static const struct gp_key gpu_settings_keys[] = {
	GP_KEY_BOOL_ROW(KEY_PERSISTENCE,
	                .doc = "Persistence mode through nvidia-persistenced: a "
	                       "systemd drop-in starts it without "
	                       "--no-persistence-mode, and it is enabled.",
	                .default_value = "true", .example = "true"),
	GP_KEY_NUMBER_ROW(KEY_POWER_LIMIT_WATTS, 1, 100000, .integer = true,
	                  .doc = "The power limit of every GPU in watts, set at "
	                         "every boot; within the GPU's limits, which "
	                         "NVML gives. Not with power_limit_fraction.",
	                  .example = "600"),
	GP_KEY_NUMBER_ROW(KEY_POWER_LIMIT_FRACTION, 0.1, 2,
	                  .doc = "The power limit as a fraction of the GPU's "
	                         "default limit, set at every boot; the result "
	                         "must lie within the GPU's limits.",
	                  .example = "0.85"),
	GP_KEY_NUMBER_ROW(KEY_LOCKED_MIN, 1, 100000, .integer = true,
	                  .doc = "Locked GPU clocks, the lower end in MHz (Volta "
	                         "and later), set at every boot; with "
	                         "locked_gpu_clock_max_mhz; within the GPU's "
	                         "supported graphics clocks, which NVML gives.",
	                  .example = "1410"),
	GP_KEY_NUMBER_ROW(KEY_LOCKED_MAX, 1, 100000, .integer = true,
	                  .doc = "Locked GPU clocks, the upper end in MHz.",
	                  .example = "1980"),
	GP_KEY_NUMBER_ROW(KEY_APP_MEMORY, 1, 100000, .integer = true,
	                  .doc = "Application clocks, the memory clock in MHz, set "
	                         "at every boot; with "
	                         "application_clock_graphics_mhz.",
	                  .example = "2619"),
	GP_KEY_NUMBER_ROW(KEY_APP_GRAPHICS, 1, 100000, .integer = true,
	                  .doc = "Application clocks, the graphics clock in MHz; "
	                         "the pair must be one NVML lists as supported.",
	                  .example = "1755"),
	GP_KEY_ENUM_ROW(KEY_COMPUTE_MODE, compute_modes,
	                .doc = "The compute mode of every GPU, set at every boot.",
	                .example = "\"default\""),
	GP_KEY_BOOL_ROW(KEY_ECC,
	                .doc = "ECC on or off; a change is pending until a reboot.",
	                .example = "true"),
	GP_KEY_BOOL_ROW(KEY_MIG,
	                .doc = "MIG mode on or off; a change needs a GPU reset or "
	                       "a reboot.",
	                .example = "false"),
	GP_KEY_END,
};

/* --- settings ------------------------------------------------------------ */

struct gset {
	bool persistence;
	struct gp_gpu_want want;
	char *blocked; /* the profile's settings contradict each other */
};

static unsigned uint_key(const cJSON *cfg, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
	return cJSON_IsNumber(v) ? (unsigned)v->valuedouble : 0;
}

static int bool_key(const cJSON *cfg, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
	return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

static void gset_read(const cJSON *cfg, struct gset *s)
{
	*s = (struct gset){ .persistence = bool_key(cfg, KEY_PERSISTENCE) != 0 };
	struct gp_gpu_want *w = &s->want;
	gp_gpu_want_init(w);
	w->power_limit_w = uint_key(cfg, KEY_POWER_LIMIT_WATTS);
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(cfg, KEY_POWER_LIMIT_FRACTION);
	if (cJSON_IsNumber(f)) {
		/* As the boot unit's words carry it (%g), so that check and verify
		 * work out the limit the unit sets to the milliwatt. */
		char g[32];
		snprintf(g, sizeof g, "%g", f->valuedouble);
		w->power_limit_fraction = strtod(g, NULL);
	}
	w->locked_min_mhz = uint_key(cfg, KEY_LOCKED_MIN);
	w->locked_max_mhz = uint_key(cfg, KEY_LOCKED_MAX);
	w->app_mem_mhz = uint_key(cfg, KEY_APP_MEMORY);
	w->app_gpu_mhz = uint_key(cfg, KEY_APP_GRAPHICS);
	const char *mode = gp_json_string(cfg, KEY_COMPUTE_MODE, NULL);
	w->compute_mode = mode ? gp_compute_mode_parse(mode) : -1;
	w->ecc = bool_key(cfg, KEY_ECC);
	w->mig = bool_key(cfg, KEY_MIG);
	if (w->power_limit_w && w->power_limit_fraction > 0)
		s->blocked = gp_xstrdup("stages." STAGE "." KEY_POWER_LIMIT_WATTS
		                        " and " KEY_POWER_LIMIT_FRACTION
		                        " are both set; keep one");
	else if (!w->locked_min_mhz != !w->locked_max_mhz)
		s->blocked = gp_xstrdup("stages." STAGE "." KEY_LOCKED_MIN
		                        " and " KEY_LOCKED_MAX
		                        " go together; set both or neither");
	else if (w->locked_min_mhz > w->locked_max_mhz)
		s->blocked = gp_xasprintf("stages." STAGE "." KEY_LOCKED_MIN
		                          " (%u) is above " KEY_LOCKED_MAX " (%u)",
		                          w->locked_min_mhz, w->locked_max_mhz);
	else if (!w->app_mem_mhz != !w->app_gpu_mhz)
		s->blocked = gp_xstrdup("stages." STAGE "." KEY_APP_MEMORY
		                        " and " KEY_APP_GRAPHICS
		                        " go together; set both or neither");
}

/* --- the files ----------------------------------------------------------- */

/* NVIDIA's override (docs/reference/gpu-settings.md): the packaged ExecStart
 * reset, then the daemon started as NVIDIA's Ansible role starts it, without
 * --no-persistence-mode (and without --user, whose account not every
 * distribution's package creates). */
static char *dropin_text(void)
{
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage " STAGE "): nvidia-persistenced with "
	                      "persistence mode on");
	gp_buf_puts(&b, "# The packaged unit may start it with --no-persistence-mode; "
	                "this replaces its command.\n"
	                "[Service]\n"
	                "ExecStart=\n"
	                "ExecStart=/usr/bin/nvidia-persistenced --verbose\n");
	return gp_buf_steal(&b);
}

/* The boot unit, with the values as the words of its command. */
static char *unit_text(const struct gp_gpu_want *w)
{
	_cleanup_free_ char *words = gp_gpu_want_words(w);
	struct gp_buf b = { 0 };
	gp_buf_written_by(&b, " (stage " STAGE "): the GPU settings that do not "
	                      "survive a reboot, set at every boot");
	gp_buf_printf(&b,
	              "[Unit]\n"
	              "Description=Apply gpuprov's GPU settings through NVML\n"
	              "Documentation=man:gpuprov(8)\n"
	              "Wants=" PERSISTENCED "\n"
	              "After=" PERSISTENCED " systemd-modules-load.service\n"
	              "\n"
	              "[Service]\n"
	              "Type=oneshot\n"
	              "RemainAfterExit=yes\n"
	              "ExecStart=%s/gpuprov gpu-settings apply %s\n"
	              "TimeoutStartSec=5min\n"
	              "\n"
	              "[Install]\n"
	              "WantedBy=multi-user.target\n",
	              GP_BINDIR, words);
	return gp_buf_steal(&b);
}

static bool link_is(struct gp_ctx *c, const char *path, const char *target)
{
	_cleanup_free_ char *have = NULL;
	return gp_root_readlink(&c->root, path, &have) == 0 && strcmp(have, target) == 0;
}

/* The files that are not as gpuprov writes them, as a list for a reason
 * ("" when all are). */
static char *files_problem(struct gp_ctx *c, const struct gset *s)
{
	struct gp_buf b = { 0 };
	if (s->persistence) {
		_cleanup_free_ char *dropin = dropin_text();
		if (!gp_stage_file_is(c, DROPIN, dropin))
			gp_buf_printf(&b, "%s" DROPIN, b.len ? ", " : "");
		if (!link_is(c, PERSISTENCED_WANTS, PERSISTENCED_UNIT))
			gp_buf_printf(&b, "%s" PERSISTENCED " not enabled",
			              b.len ? ", " : "");
	}
	if (gp_gpu_want_any(&s->want)) {
		_cleanup_free_ char *unit = unit_text(&s->want);
		if (!gp_stage_file_is(c, BOOT_UNIT, unit))
			gp_buf_printf(&b, "%s" BOOT_UNIT, b.len ? ", " : "");
		if (!link_is(c, BOOT_WANTS, BOOT_UNIT))
			gp_buf_printf(&b, "%s" BOOT_SERVICE " not enabled",
			              b.len ? ", " : "");
	}
	return gp_buf_steal(&b);
}

/* --- NVML ---------------------------------------------------------------- */

/* Reads the GPUs' settings; with check, also holds its clocks to the ones
 * NVML lists as supported (gp_gpu_state's clocks_refused). */
static int nv_read(struct gp_ctx *c, const struct gp_gpu_want *check,
                   struct gp_nvsettings *n)
{
	int rc = gp_nvsettings_check(&c->root, NVML_TIMEOUT_MS, !c->read_only_refused,
	                             check, n);
	if (rc < 0 && n->read_only_refused) {
		gp_nvsettings_free(n);
		rc = gp_nvsettings_check(&c->root, NVML_TIMEOUT_MS, false, check, n);
	}
	return rc;
}

/* What to put in the profile for a refusal of the clocks (the kinds of
 * gp_gpu_state's clocks_refused_kind). */
static const char *clocks_advice(const char *kind)
{
	if (strcmp(kind, "app_memory") == 0)
		return "set stages." STAGE "." KEY_APP_MEMORY " to one of them";
	if (strcmp(kind, "app_graphics") == 0)
		return "set stages." STAGE "." KEY_APP_GRAPHICS " to one of them";
	if (strcmp(kind, "locked_range") == 0)
		return "set stages." STAGE "." KEY_LOCKED_MIN " and " KEY_LOCKED_MAX
		       " within them";
	if (strcmp(kind, "locked_unsupported") == 0)
		return "leave stages." STAGE "." KEY_LOCKED_MIN " and " KEY_LOCKED_MAX
		       " out of the profile for this GPU";
	return "leave stages." STAGE "." KEY_APP_MEMORY " and " KEY_APP_GRAPHICS
	       " out of the profile for this GPU";
}

/* Whether NVML answered with GPUs. */
static bool nv_usable(const struct gp_nvsettings *n)
{
	return n->loaded && n->init_rc == 0 && !n->error && n->count > 0;
}

/* Why NVML cannot be asked, for a reason or a finding. Allocated. */
static char *nv_why_not(const struct gp_nvsettings *n, int rc)
{
	if (rc < 0)
		return gp_xasprintf("the NVML child could not start: %s", strerror(-rc));
	if (n->error)
		return gp_xstrdup(n->error);
	if (!n->loaded)
		return gp_xasprintf("libnvidia-ml.so.1 does not load (%s)",
		                    n->load_error ? n->load_error : "?");
	if (n->init_rc != 0)
		return gp_xasprintf("nvmlInit_v2 failed (%s)",
		                    n->init_error ? n->init_error : "?");
	return gp_xstrdup("NVML sees no GPU");
}

static unsigned n_gpus(const struct gp_nvsettings *n)
{
	return n->count < GP_PROBE_MAX_GPUS ? (unsigned)n->count : GP_PROBE_MAX_GPUS;
}

static const char *on_off(int v)
{
	return v == 1 ? "on" : v == 0 ? "off" : "unknown";
}

/* What differs on GPU i from w, for a reason ("" when nothing); the modes
 * that only a reboot makes current (*pending) are said apart. */
static void gpu_differences(const struct gp_gpu_state *g, const struct gp_gpu_want *w,
                            unsigned target_mw, bool persistence, struct gp_buf *now,
                            struct gp_buf *pending)
{
#define SAY(b, ...)                                                                      \
	gp_buf_printf((b), "%s", (b)->len ? ", " : ""), gp_buf_printf((b), __VA_ARGS__)
	if (persistence && g->persistence != 1)
		SAY(now, "persistence mode off");
	if (target_mw && g->power_enforced_mw != (long)target_mw)
		SAY(now, "power limit %ld W, not %u W", g->power_enforced_mw / 1000,
		    target_mw / 1000);
	if (w->app_gpu_mhz && (g->app_mem_mhz != (int)w->app_mem_mhz ||
	                       g->app_gpu_mhz != (int)w->app_gpu_mhz))
		SAY(now, "application clocks %d,%d MHz, not %u,%u", g->app_mem_mhz,
		    g->app_gpu_mhz, w->app_mem_mhz, w->app_gpu_mhz);
	if (w->compute_mode >= 0 && g->compute_mode != w->compute_mode)
		SAY(now, "compute mode %s, not %s",
		    gp_compute_mode_name(g->compute_mode)
		        ? gp_compute_mode_name(g->compute_mode)
		        : "unknown",
		    gp_compute_mode_name(w->compute_mode));
	if (w->ecc >= 0 && g->ecc_current != w->ecc)
		SAY(g->ecc_pending == w->ecc ? pending : now, "ECC %s, %s%s",
		    on_off(g->ecc_current), on_off(w->ecc),
		    g->ecc_pending == w->ecc ? " pending until a reboot" : " wanted");
	if (w->mig >= 0 && g->mig_current != w->mig)
		SAY(g->mig_pending == w->mig ? pending : now, "MIG %s, %s%s",
		    on_off(g->mig_current), on_off(w->mig),
		    g->mig_pending == w->mig ? " pending until a GPU reset or reboot"
		                             : " wanted");
#undef SAY
}

/* The power limit to set on g (gp_gpu_power_target with NVML's limits): 0
 * with *target_mw (0: none wanted); -1 with *why when outside the limits;
 * -2 with *why when NVML gave no limits for the GPU. */
static int power_target(const struct gp_gpu_want *w, const struct gp_gpu_state *g,
                        unsigned *target_mw, char **why)
{
	*target_mw = 0;
	*why = NULL;
	if (!w->power_limit_w && !(w->power_limit_fraction > 0))
		return 0;
	if (g->power_min_mw < 0 || g->power_max_mw < 0 || g->power_default_mw < 0) {
		*why = gp_xstrdup("NVML gives no power limits for this GPU");
		return -2;
	}
	return gp_gpu_power_target(w, (unsigned)g->power_default_mw,
	                           (unsigned)g->power_min_mw, (unsigned)g->power_max_mw,
	                           target_mw, why);
}

/* --- hooks --------------------------------------------------------------- */

static int gs_check(struct gp_ctx *c, const cJSON *cfg, struct gp_check *ck)
{
	struct gset s;
	gset_read(cfg, &s);
	if (s.blocked) {
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", s.blocked);
		free(s.blocked);
		return 0;
	}
	_cleanup_free_ char *files = files_problem(c, &s);
	struct gp_nvsettings n;
	int rc = nv_read(c, &s.want, &n);
	struct gp_buf now = { 0 }, pending = { 0 }, blocked = { 0 }, unchecked = { 0 };
	bool host = gp_root_is_host(&c->root);
	if (rc == 0 && nv_usable(&n)) {
		for (unsigned i = 0; i < n_gpus(&n); i++) {
			const struct gp_gpu_state *g = &n.gpu[i];
			unsigned target = 0;
			if (g->clocks_unchecked && !unchecked.len)
				gp_buf_printf(&unchecked, "; GPU %u: %s", i,
				              g->clocks_unchecked);
			_cleanup_free_ char *why = NULL;
			if (power_target(&s.want, g, &target, &why) == -1) {
				if (!blocked.len)
					gp_buf_printf(&blocked,
					              "GPU %u (%s): %s; set stages." STAGE
					              ".%s within them (NVML's "
					              "nvmlDeviceGetPowerManagementLimitC"
					              "onstraints)",
					              i, g->name ? g->name : "?", why,
					              s.want.power_limit_w
					                  ? KEY_POWER_LIMIT_WATTS
					                  : KEY_POWER_LIMIT_FRACTION);
				continue;
			}
			if (g->clocks_refused) {
				if (!blocked.len)
					gp_buf_printf(
					    &blocked, "GPU %u (%s): %s; %s", i,
					    g->name ? g->name : "?", g->clocks_refused,
					    clocks_advice(g->clocks_refused_kind));
				continue;
			}
			struct gp_buf g_now = { 0 }, g_pending = { 0 };
			gpu_differences(g, &s.want, target, s.persistence, &g_now,
			                &g_pending);
			if (g_now.len)
				gp_buf_printf(&now, "%sGPU %u: %s", now.len ? "; " : "",
				              i, g_now.data);
			if (g_pending.len)
				gp_buf_printf(&pending, "%sGPU %u: %s",
				              pending.len ? "; " : "", i, g_pending.data);
			gp_buf_free(&g_now);
			gp_buf_free(&g_pending);
		}
	}
	if (blocked.len)
		gp_check_set(ck, GP_STATE_BLOCKED, "%s", blocked.data);
	else if (files[0] || (host && now.len))
		gp_check_set(ck, GP_STATE_NEEDED, "%s%s%s%s",
		             files[0] ? "to write: " : "", files,
		             files[0] && host && now.len ? "; " : "",
		             host && now.len ? now.data : "");
	else if (pending.len)
		gp_check_set(ck, GP_STATE_REBOOT_PENDING, "%s", pending.data);
	else if (!host && now.len)
		gp_check_set(ck, GP_STATE_SATISFIED,
		             "files in place; " BOOT_SERVICE
		             " sets the rest at boot (%s)",
		             now.data);
	else
		gp_check_set(ck, GP_STATE_SATISFIED, "%s",
		             "the persistence drop-in and the "
		             "boot unit are in place");
	if (unchecked.len && ck->state != GP_STATE_BLOCKED) {
		_cleanup_free_ char *said = gp_xstrdup(ck->reason);
		gp_check_set(ck, ck->state, "%s%s", said, unchecked.data);
	}
	gp_buf_free(&now);
	gp_buf_free(&pending);
	gp_buf_free(&blocked);
	gp_buf_free(&unchecked);
	gp_nvsettings_free(&n);
	return 0;
}

/* Writes path (0644) unless it already reads as text. */
static int write_file(struct gp_ctx *c, const char *path, const char *text)
{
	if (gp_stage_file_is(c, path, text))
		return 0;
	return gp_effect_write(c, path, text, strlen(text), 0644);
}

static int systemctl(struct gp_ctx *c, const char *verb, const char *unit)
{
	char *const argv[] = { "systemctl", (char *)verb, (char *)unit, NULL };
	return gp_effect_run(c, argv);
}

static int gs_apply(struct gp_ctx *c, const cJSON *cfg)
{
	struct gset s;
	gset_read(cfg, &s);
	if (s.blocked) {
		gp_fail(c->err, GP_EBLOCKED, "stage " STAGE ": %s", s.blocked);
		free(s.blocked);
		return -1;
	}
	_cleanup_free_ char *dropin = dropin_text(), *unit = unit_text(&s.want);
	bool dropin_new = s.persistence && !gp_stage_file_is(c, DROPIN, dropin);
	bool unit_new = gp_gpu_want_any(&s.want) && !gp_stage_file_is(c, BOOT_UNIT, unit);
	if (s.persistence &&
	    (write_file(c, DROPIN, dropin) < 0 ||

	     gp_effect_symlink(c, PERSISTENCED_UNIT, PERSISTENCED_WANTS) < 0))
		return -1;
	if (gp_gpu_want_any(&s.want) && (write_file(c, BOOT_UNIT, unit) < 0 ||

	                                 gp_effect_symlink(c, BOOT_UNIT, BOOT_WANTS) < 0))
		return -1;
	if (!gp_root_is_host(&c->root))
		return 0; /* the units start at the root's next boot */
	/* The live host: the values are set by the unit, started here as at
	 * boot, so that an install and a boot set them the same way. */
	struct gp_nvsettings n;
	int rc = nv_read(c, NULL, &n);
	bool usable = rc == 0 && nv_usable(&n), persistence_off = false, reboot = false;
	for (unsigned i = 0; usable && i < n_gpus(&n); i++) {
		persistence_off |= n.gpu[i].persistence != 1;
		reboot |= (s.want.ecc >= 0 && n.gpu[i].ecc_current != s.want.ecc) ||
		          (s.want.mig >= 0 && n.gpu[i].mig_current != s.want.mig);
	}
	gp_nvsettings_free(&n);
	if ((dropin_new || unit_new) && systemctl(c, "daemon-reload", NULL) < 0)
		return -1;
	/* Without the driver's unit or a driver that answers, the units
	 * start at the next boot. */
	if (s.persistence && (dropin_new || persistence_off) &&
	    gp_ctx_exists(c, PERSISTENCED_UNIT) &&
	    systemctl(c, "restart", PERSISTENCED) < 0)
		return -1;
	if (gp_gpu_want_any(&s.want) && usable &&
	    systemctl(c, "restart", BOOT_SERVICE) < 0)
		return -1;
	if (reboot && gp_effect_reboot(c, "an ECC or MIG mode change is pending until "
	                                  "the GPUs are reset: reboot") < 0)
		return -1;
	return 0;
}

/* What a value's finding needs besides the value. */
struct vctx {
	struct gp_report *rep;
	bool unit_ok; /* the boot unit with the profile's values, enabled */
	bool applied; /* and it set them since the boot (its record in /run) */
	const char *install;
	struct gp_buf drift; /* the values changed since it set them */
};

/* One finding per GPU for a value the boot unit sets: pass, or fail with
 * the hint for why it differs: changed since the unit set it (drift), the
 * unit not run since the boot, or not installed. */
static void verify_value(struct vctx *v, const char *base, unsigned i, const char *what,
                         bool ok, const char *evidence)
{
	char subject[32], check[64];
	snprintf(subject, sizeof subject, "GPU %u", i);
	snprintf(check, sizeof check, "GPU %u %s", i, what);
	const char *hint = v->install;
	if (!ok && v->applied) {
		hint =
		    "changed by someone else since " BOOT_SERVICE " set it at this "
		    "boot (nvidia-smi, DCGM, by hand?): 'systemctl restart " BOOT_SERVICE
		    "' sets it again";
		gp_buf_printf(&v->drift, "%sGPU %u %s", v->drift.len ? ", " : "", i,
		              what);
	} else if (!ok && v->unit_ok)
		hint = BOOT_SERVICE
		    " has not set it since the boot: 'systemctl start " BOOT_SERVICE
		    "'; 'systemctl status " BOOT_SERVICE "' says why when it fails";
	gp_report_add_subject(v->rep, base, subject, ok ? GP_PASS : GP_FAIL, check, hint,
	                      "%s", evidence);
}

/* ECC or MIG: pass, warn while the wanted mode is pending, else fail. */
static void verify_mode(struct vctx *v, const char *base, unsigned i, const char *what,
                        int want, int current, int pending, const char *pending_hint)
{
	char subject[32], check[64];
	snprintf(subject, sizeof subject, "GPU %u", i);
	snprintf(check, sizeof check, "GPU %u %s", i, what);
	bool now = current == want, soon = pending == want;
	gp_report_add_subject(v->rep, base, subject,
	                      now    ? GP_PASS
	                      : soon ? GP_WARN
	                             : GP_FAIL,
	                      check, soon ? pending_hint : v->install,
	                      "%s %s, pending %s; the profile wants %s", what,
	                      on_off(current), on_off(pending), on_off(want));
}

static void verify_gpu(struct vctx *v, const struct gset *s, unsigned i,
                       const struct gp_gpu_state *g)
{
	char ev[256];
	if (s->persistence) {
		char subject[32], check[64];
		snprintf(subject, sizeof subject, "GPU %u", i);
		snprintf(check, sizeof check, "GPU %u persistence mode", i);
		gp_report_add_subject(v->rep, "gpu_settings.persistence", subject,
		                      g->persistence == 1 ? GP_PASS : GP_FAIL, check,
		                      "is nvidia-persistenced running with " DROPIN
		                      "? 'systemctl status " PERSISTENCED "'",
		                      "persistence mode %s", on_off(g->persistence));
	}
	const struct gp_gpu_want *w = &s->want;
	unsigned target = 0;
	_cleanup_free_ char *why = NULL;
	int prc = power_target(w, g, &target, &why);
	if (prc < 0) {
		char subject[32], check[64];
		snprintf(subject, sizeof subject, "GPU %u", i);
		snprintf(check, sizeof check, "GPU %u power limit", i);
		gp_report_add_subject(
		    v->rep, "gpu_settings.power_limit", subject, GP_FAIL, check,
		    prc == -1 ? "change the profile's power limit"
		              : "the power limit cannot be set through NVML "
		                "here: leave it out of the profile, or "
		                "see the driver stage's verify",
		    "%s", why);
	} else if (target) {
		snprintf(ev, sizeof ev,
		         "enforced power limit %ld W; the profile wants %u W",
		         g->power_enforced_mw / 1000, target / 1000);
		verify_value(v, "gpu_settings.power_limit", i, "power limit",
		             g->power_enforced_mw == (long)target, ev);
	}
	if (w->app_gpu_mhz) {
		snprintf(ev, sizeof ev,
		         "application clocks memory %d MHz, graphics %d MHz; the profile "
		         "wants %u, %u",
		         g->app_mem_mhz, g->app_gpu_mhz, w->app_mem_mhz, w->app_gpu_mhz);
		verify_value(v, "gpu_settings.application_clocks", i,
		             "application clocks",
		             g->app_mem_mhz == (int)w->app_mem_mhz &&
		                 g->app_gpu_mhz == (int)w->app_gpu_mhz,
		             ev);
	}
	if (w->compute_mode >= 0) {
		const char *have = gp_compute_mode_name(g->compute_mode);
		snprintf(ev, sizeof ev, "compute mode %s; the profile wants %s",
		         have ? have : "unknown", gp_compute_mode_name(w->compute_mode));
		verify_value(v, "gpu_settings.compute_mode", i, "compute mode",
		             g->compute_mode == w->compute_mode, ev);
	}
	if (w->ecc >= 0)
		verify_mode(v, "gpu_settings.ecc", i, "ECC", w->ecc, g->ecc_current,
		            g->ecc_pending,
		            "reboot: the pending ECC mode becomes current");
	if (w->mig >= 0)
		verify_mode(
		    v, "gpu_settings.mig", i, "MIG", w->mig, g->mig_current,
		    g->mig_pending,
		    "reset the GPU or reboot: the pending MIG mode becomes current");
}

/* A library without nvmlDeviceGetSupportedMemoryClocks cannot hold the
 * profile's clocks to the GPU's list: a skip that says so, as the locked
 * clocks' is, rather than a pass by silence. */
static void verify_clocks_checked(struct gp_report *rep, unsigned i,
                                  const struct gp_gpu_state *g)
{
	if (!g->clocks_unchecked)
		return;
	char subject[32], check[64];
	snprintf(subject, sizeof subject, "GPU %u", i);
	snprintf(check, sizeof check, "GPU %u supported clocks", i);
	gp_report_add_subject(rep, "gpu_settings.supported_clocks", subject, GP_SKIP,
	                      check,
	                      "a driver whose NVML has it checks them; the boot "
	                      "unit's output says whether the setter took them",
	                      "%s", g->clocks_unchecked);
}

static int gs_verify(struct gp_ctx *c, const cJSON *cfg, struct gp_report *rep)
{
	struct gset s;
	gset_read(cfg, &s);
	_cleanup_free_ char *install = gp_install_hint(c, STAGE);
	if (s.blocked) {
		gp_report_add(rep, "gpu_settings.settings", GP_FAIL, "settings",
		              "fix the profile", "%s", s.blocked);
		free(s.blocked);
		return 0;
	}
	if (s.persistence) {
		_cleanup_free_ char *dropin = dropin_text();
		bool ok = gp_stage_file_is(c, DROPIN, dropin);
		gp_report_add(rep, "gpu_settings.persistenced_dropin",
		              ok ? GP_PASS : GP_FAIL, "persistence drop-in", install,
		              ok ? DROPIN
		                  " starts nvidia-persistenced with persistence on"
		                 : DROPIN " is missing or not as gpuprov wrote it");
		ok = link_is(c, PERSISTENCED_WANTS, PERSISTENCED_UNIT);
		gp_report_add(rep, "gpu_settings.persistenced_enabled",
		              ok ? GP_PASS : GP_FAIL, "nvidia-persistenced enabled",
		              install,
		              ok ? PERSISTENCED " is enabled (multi-user.target wants it)"
		                 : PERSISTENCED " is not enabled");
	}
	struct vctx v = { .rep = rep, .install = install };
	bool unit_ok = false;
	if (gp_gpu_want_any(&s.want)) {
		_cleanup_free_ char *unit = unit_text(&s.want);
		unit_ok = gp_stage_file_is(c, BOOT_UNIT, unit) &&
		          link_is(c, BOOT_WANTS, BOOT_UNIT);
		gp_report_add(rep, "gpu_settings.boot_unit", unit_ok ? GP_PASS : GP_FAIL,
		              "boot unit", install,
		              unit_ok ? BOOT_UNIT
		                  " sets the profile's values at boot, enabled"
		                      : BOOT_UNIT " is missing, not enabled or has other "
		                                  "values than the profile");
	}
	/* NVML sets locked clocks but has no call that reads them back
	 * (docs/reference/gpu-settings.md): the boot unit's NVML answer is the
	 * only check, and verify says so rather than guess from the current
	 * clock. */
	if (s.want.locked_max_mhz)
		gp_report_add(rep, "gpu_settings.locked_clocks", GP_SKIP,
		              "locked GPU clocks", NULL,
		              "locked clocks cannot be read back through NVML; "
		              "checked at apply only");
	struct gp_nvsettings n;
	int rc = nv_read(c, &s.want, &n);
	if (rc < 0 || !nv_usable(&n)) {
		_cleanup_free_ char *why = nv_why_not(&n, rc);
		gp_report_add(rep, "gpu_settings.nvml", GP_FAIL, "NVML",
		              "the driver stage's verify says more",
		              "cannot read the GPUs' "
		              "settings: %s",
		              why);
	} else {
		gp_report_add(rep, "gpu_settings.nvml", GP_PASS, "NVML", NULL,
		              "NVML reads the settings of %d GPU%s", n.count,
		              n.count == 1 ? "" : "s");
		v.unit_ok = unit_ok;
		if (unit_ok) {
			_cleanup_free_ char *words = gp_gpu_want_words(&s.want);
			_cleanup_free_ char *record = gp_xasprintf("%s\n", words);
			v.applied = gp_stage_file_is(c, GP_GPU_SETTINGS_APPLIED, record);
		}
		for (unsigned i = 0; i < n_gpus(&n); i++) {
			verify_gpu(&v, &s, i, &n.gpu[i]);
			verify_clocks_checked(rep, i, &n.gpu[i]);
		}
		if (v.drift.len)
			gp_report_add(rep, "gpu_settings.drift", GP_FAIL, "drift",
			              "find what changed them (nvidia-smi, DCGM, a job "
			              "script); 'systemctl restart " BOOT_SERVICE
			              "' sets them again",
			              "changed since " BOOT_SERVICE
			              " set them at this boot: %s",
			              v.drift.data);
		else if (v.applied)
			gp_report_add(rep, "gpu_settings.drift", GP_PASS, "drift", NULL,
			              "every value is as " BOOT_SERVICE
			              " set it at this boot");
		gp_buf_free(&v.drift);
	}
	gp_nvsettings_free(&n);
	return 0;
}

/* --- uninstall ---------------------------------------------------------- */

/* What the install set that NVML can give back (nvreset.h): ECC and MIG
 * are not among them. */
static struct gp_gpu_reset reset_of(const struct gp_gpu_want *w)
{
	return (struct gp_gpu_reset){
		.power_limit = w->power_limit_w || w->power_limit_fraction > 0,
		.locked_clocks = w->locked_max_mhz != 0,
		.app_clocks = w->app_gpu_mhz != 0,
		.compute_mode = w->compute_mode >= 0,
	};
}

/* GPU g's values going back, for the plan's reason. */
static void say_reset(struct gp_buf *b, unsigned i, const struct gp_gpu_state *g,
                      const struct gp_gpu_reset *r)
{
	gp_buf_printf(b, "%sGPU %u:", b->len ? "; " : "", i);
	const char *sep = " ";
	if (r->power_limit) {
		gp_buf_printf(b, "%spower limit %ld W -> ", sep,
		              g->power_enforced_mw / 1000);
		if (g->power_default_mw >= 0)
			gp_buf_printf(b, "%ld W (the default limit)",
			              g->power_default_mw / 1000);
		else
			gp_buf_puts(b, "the default limit");
		sep = ", ";
	}
	if (r->locked_clocks) {
		gp_buf_printf(b, "%slocked GPU clocks -> unlocked", sep);
		sep = ", ";
	}
	if (r->app_clocks) {
		gp_buf_printf(b, "%sapplication clocks %d,%d MHz -> the default", sep,
		              g->app_mem_mhz, g->app_gpu_mhz);
		sep = ", ";
	}
	if (r->compute_mode) {
		const char *have = gp_compute_mode_name(g->compute_mode);
		gp_buf_printf(b, "%scompute mode %s -> default", sep,
		              have ? have : "unknown");
	}
}

/* Whether the uninstall gives the running GPUs' values back (*r: which),
 * and, with say, the sentence for the plan. Only for an install that left
 * the boot unit (the journal's record), only on the live host, only while
 * NVML answers: the plan's pass and the run's decide alike. */
static bool undo_reset(struct gp_ctx *c, const cJSON *cfg, struct gp_gpu_reset *r,
                       char **say)
{
	if (!cfg || !gp_journal_file(&c->journal, BOOT_UNIT))
		return false;
	struct gset s;
	gset_read(cfg, &s);
	free(s.blocked);
	*r = reset_of(&s.want);
	const char *modes = s.want.ecc >= 0 || s.want.mig >= 0
	                        ? "; ECC and MIG modes stay as they are (the GPU "
	                          "keeps them across reboots; nvidia-smi -e and "
	                          "-mig change them)"
	                        : "";
	struct gp_buf b = { 0 };
	bool reset = false;
	if (!gp_gpu_reset_any(r))
		gp_buf_puts(&b, modes[0] ? modes + 2 : "");
	else if (!gp_root_is_host(&c->root))
		gp_buf_printf(&b,
		              "the running GPUs' values are untouched: %s is not the "
		              "live host, so only the boot unit goes and they return "
		              "to the GPUs' defaults at its next boot%s",
		              c->root.dir, modes);
	else {
		struct gp_nvsettings n;
		int rc = nv_read(c, NULL, &n);
		if (rc < 0 || !nv_usable(&n)) {
			_cleanup_free_ char *why = nv_why_not(&n, rc);
			gp_buf_printf(&b,
			              "the running GPUs' values are not reset: %s; they "
			              "return to the GPUs' defaults at the next boot%s",
			              why, modes);
		} else {
			struct gp_buf gpus = { 0 };
			for (unsigned i = 0; i < n_gpus(&n); i++)
				say_reset(&gpus, i, &n.gpu[i], r);
			gp_buf_printf(&b,
			              "gives the running GPUs' values back to their "
			              "defaults through NVML: %s%s",
			              gpus.data, modes);
			gp_buf_free(&gpus);
			reset = true;
		}
		gp_nvsettings_free(&n);
	}
	if (say && b.len)
		*say = gp_buf_steal(&b);
	gp_buf_free(&b);
	return reset;
}

/* On the live host, nvidia-persistenced restarts once gpuprov's drop-in
 * went, so that it runs as its package starts it (Ubuntu's: without
 * persistence) instead of with the drop-in's options until the next boot.
 * try-restart: a daemon that is not running stays so. The check asks for
 * the drop-in's record, the restart (after the records are undone, the
 * record gone) for the drop-in being gone, as the run and its plan see it. */
static bool undo_restarts_persistenced(struct gp_ctx *c, const cJSON *cfg, bool after)
{
	if (!cfg || !gp_root_is_host(&c->root) || !gp_ctx_exists(c, PERSISTENCED_UNIT) ||
	    (after ? gp_ctx_exists(c, DROPIN) : !gp_journal_file(&c->journal, DROPIN)))
		return false;
	struct gset s;
	gset_read(cfg, &s);
	free(s.blocked);
	return s.persistence;
}

static bool gs_undo_check(struct gp_ctx *c, const cJSON *cfg, char **say)
{
	struct gp_gpu_reset r;
	bool reset = undo_reset(c, cfg, &r, say);
	if (!undo_restarts_persistenced(c, cfg, false))
		return reset;
	const char *restart = "then nvidia-persistenced restarts without gpuprov's "
	                      "drop-in, as its package starts it";
	char *both = *say ? gp_xasprintf("%s; %s", *say, restart) : gp_xstrdup(restart);
	free(*say);
	*say = both;
	return true;
}

static int gs_undo_after(struct gp_ctx *c, const cJSON *cfg)
{
	if (!undo_restarts_persistenced(c, cfg, true))
		return 0;
	if (systemctl(c, "daemon-reload", NULL) < 0)
		return -1;
	return systemctl(c, "try-restart", PERSISTENCED);
}

/* The reset as the boot unit sets the values: gpuprov itself, from where
 * the unit runs it, in its own NVML child (`gpuprov gpu-settings reset`). */
static int gs_undo(struct gp_ctx *c, const cJSON *cfg)
{
	struct gp_gpu_reset r;
	if (!undo_reset(c, cfg, &r, NULL))
		return 0;
	_cleanup_strv_ char **argv = gp_xcalloc(1, sizeof(char *));
	size_t n = 0;
	gp_strv_append(&argv, &n, GP_BINDIR "/gpuprov");
	gp_strv_append(&argv, &n, "gpu-settings");
	gp_strv_append(&argv, &n, "reset");
	_cleanup_strv_ char **words = gp_gpu_reset_words(&r);
	for (size_t i = 0; words[i]; i++)
		gp_strv_append(&argv, &n, words[i]);
	return gp_effect_run(c, argv);
}

const struct gp_stage gp_stage_gpu_settings = {
	.name = STAGE,
	/* The settings need the driver loaded, which may wait for a reboot. */
	.flags = GP_STAGE_NEEDS_REBOOTED_KERNEL,
	.summary = "GPU settings: persistence daemon, power limit, clocks, compute, "
	           "ECC and MIG modes",
	.keys = gpu_settings_keys,
	.doc = "Turns persistence on through nvidia-persistenced and sets the GPUs' "
	       "power limit, clocks, compute mode (at every boot, by a unit), ECC and "
	       "MIG modes through NVML.",
	.check = gs_check,
	.apply = gs_apply,
	.verify = gs_verify,
	.undo_check = gs_undo_check,
	.undo = gs_undo,
	.undo_after = gs_undo_after,
};
