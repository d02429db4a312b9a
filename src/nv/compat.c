/* The compatibility preflight (see compat.h): each rule compares two stages
 * of a resolved profile, or a stage and the GPUs it matches, using the facts
 * in gpus.h and cuda_releases.h. A rule runs only when both of its sides are there: a disabled
 * stage or a missing key says nothing to check against. Messages name both
 * sides and a fix, because the operator reads them before anything has
 * touched a server and must know what to change. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpuprov/arch.h"
#include "gpuprov/branches.h"
#include "gpuprov/compat.h"
#include "gpuprov/cuda_releases.h"
#include "gpuprov/nvdriver.h"
#include "gpuprov/util.h"
#include "gpuprov/version.h"

/* Also the order rules run and issues are reported in. */
static const char *const rule_ids[] = {
	GP_RULE_DRIVER_CUDA,  GP_RULE_GPU_CUDA,      GP_RULE_CUDNN_CUDA,
	GP_RULE_TORCH_DRIVER, GP_RULE_MODULE_FLAVOR, GP_RULE_DRIVER_GPU,
};

bool gp_compat_rule_known(const char *id)
{
	for (size_t i = 0; i < ARRAY_SIZE(rule_ids); i++)
		if (strcmp(rule_ids[i], id) == 0)
			return true;
	return false;
}

/* Open kernel modules first shipped with driver branch R515
 * (docs/reference/nvidia.md section 6). */
#define OPEN_MODULES_FIRST_BRANCH "515"

/* The profile's driver: an exact version, or only a branch, for which the
 * latest driver of that branch is assumed (that is what a package manager
 * installs for "nvidia-driver-550"). */
struct driver_pin {
	const char *version;
	const char *branch;
	char desc[96]; /* "driver 550.54.14" or "driver branch 550" */
};

struct check {
	const cJSON *driver, *cuda, *cudnn, *pytorch; /* enabled stages, else NULL */
	struct driver_pin drv;
	bool have_drv;
	const char *cuda_version; /* valid, else NULL */
	const struct gp_gpu_info **gpus; /* known GPUs of match.gpus, in order */
	size_t n_gpus;
	const char *arch; /* match.arch, else NULL */
	struct gp_compat_report *rep;
};

static const char *str_member(const cJSON *obj, const char *key)
{
	const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A stage set to false, or absent, is NULL. */
static const cJSON *stage(const cJSON *profile, const char *name)
{
	const cJSON *stages = cJSON_GetObjectItemCaseSensitive(profile, "stages");
	const cJSON *s = stages ? cJSON_GetObjectItemCaseSensitive(stages, name) : NULL;
	return cJSON_IsObject(s) ? s : NULL;
}

static void add_issue(struct check *c, const char *rule, const char *fmt, ...)
    _printf_(3, 4);
static void add_issue(struct check *c, const char *rule, const char *fmt, ...)
{
	struct gp_compat_report *rep = c->rep;
	rep->issues = gp_xrealloc(rep->issues, (rep->n + 1) * sizeof(*rep->issues));
	va_list ap;
	va_start(ap, fmt);
	rep->issues[rep->n++] = (struct gp_compat_issue){
		.rule = rule,
		.message = gp_xvasprintf(fmt, ap),
	};
	va_end(ap);
}

/* The first part of a version ("550" of "550.54.14") into buf. */
static const char *first_part(const char *v, char *buf, size_t size)
{
	snprintf(buf, size, "%.*s", (int)strcspn(v, "."), v);
	return buf;
}

static bool is_branch(const char *s)
{
	return s && *s && strspn(s, "0123456789") == strlen(s);
}

/* Does the pinned driver reach min? A branch B reaches it when B is at least
 * min's branch: the latest driver of min's own branch is at least min. */
static bool driver_meets(const struct driver_pin *d, const char *min)
{
	if (d->version)
		return gp_version_compare(d->version, min) >= 0;
	char br[32];
	return gp_version_compare(d->branch, first_part(min, br, sizeof br)) >= 0;
}

/* "driver 550.54.14 or newer" / "driver branch 550 or newer", in the same
 * terms as the profile pins its driver. */
static const char *driver_fix(const struct driver_pin *d, const char *min, char *buf,
                              size_t size)
{
	char br[32];
	if (d->version)
		snprintf(buf, size, "driver %s or newer", min);
	else
		snprintf(buf, size, "driver branch %s or newer",
		         first_part(min, br, sizeof br));
	return buf;
}

/* The newest CUDA X.Y in the table whose minimum driver the pinned driver
 * reaches and that can target every matched GPU, into buf; NULL when none.
 * The table is probed through gp_cuda_min_driver so that it stays the only
 * copy. */
static const char *newest_cuda_for(const struct check *c, char *buf, size_t size)
{
	for (unsigned major = 20; major > 0; major--) {
		for (int minor = 15; minor >= 0; minor--) {
			snprintf(buf, size, "%u.%d", major, minor);
			const char *min = gp_cuda_min_driver(buf);
			if (!min || !driver_meets(&c->drv, min))
				continue;
			bool ok = true;
			for (size_t i = 0; i < c->n_gpus; i++)
				ok = ok && gp_cuda_supports_cc(buf, c->gpus[i]);
			if (ok)
				return buf;
		}
	}
	return NULL;
}

/* The lowest and highest CUDA X.Y the table knows, "11.1 to 13.1". */
static void cuda_table_range(char *buf, size_t size)
{
	char lo[16] = "", hi[16] = "", v[16];
	for (unsigned major = 1; major <= 20; major++) {
		for (unsigned minor = 0; minor <= 15; minor++) {
			snprintf(v, sizeof v, "%u.%u", major, minor);
			if (!gp_cuda_min_driver(v))
				continue;
			if (!*lo)
				snprintf(lo, sizeof lo, "%s", v);
			snprintf(hi, sizeof hi, "%s", v);
		}
	}
	snprintf(buf, size, "%s to %s", lo, hi);
}

/* The newest CUDA that still targets g (for a release that dropped it). */
static const char *newest_cuda_targeting(const struct gp_gpu_info *g, char *buf,
                                         size_t size)
{
	for (unsigned major = 20; major > 0; major--) {
		for (int minor = 15; minor >= 0; minor--) {
			snprintf(buf, size, "%u.%d", major, minor);
			if (gp_cuda_min_driver(buf) && gp_cuda_supports_cc(buf, g))
				return buf;
		}
	}
	return NULL;
}

/* Start and length of the tag in a wheel index URL (its last path
 * component, before any trailing slashes), as gp_torch_tag_cuda reads it. */
static void torch_tag_span(const char *url, size_t *start, size_t *len)
{
	size_t end = strlen(url);
	while (end > 0 && url[end - 1] == '/')
		end--;
	size_t s = 0;
	for (size_t i = 0; i < end; i++)
		if (url[i] == '/')
			s = i + 1;
	*start = s;
	*len = end - s;
}

/* The index URL to suggest instead of url: the same URL with the newest
 * wheel tag that the driver runs at the toolkit's full minimum (so not only
 * through minor-version compatibility, under which PTX JIT can still fail)
 * and that targets every matched GPU; failing that, the newest the driver
 * runs through minor-version compatibility. NULL when none fits. */
static char *torch_index_for(const struct check *c, const char *url)
{
	const char *pick = NULL;
	for (int pass = 0; pass < 2 && !pick; pass++) {
		for (size_t i = 0; gp_torch_cuda_tags[i] && !pick; i++) {
			const char *tag = gp_torch_cuda_tags[i];
			char buf[16];
			bool cpu;
			const char *wc = gp_torch_tag_cuda(tag, &cpu, buf);
			const char *need = pass == 0 ? gp_cuda_min_driver(wc)
			                             : gp_cuda_minor_compat_driver(wc);
			if (!need || !driver_meets(&c->drv, need))
				continue;
			bool ok = true;
			for (size_t g = 0; g < c->n_gpus; g++)
				ok = ok && gp_torch_tag_targets(tag, c->gpus[g]);
			if (ok)
				pick = tag;
		}
	}
	if (!pick)
		return NULL;
	size_t start, len;
	torch_tag_span(url, &start, &len);
	return gp_xasprintf("%.*s%s%s", (int)start, url, pick, url + start + len);
}

static void rule_driver_cuda(struct check *c)
{
	if (!c->have_drv || !c->cuda_version)
		return;
	const char *min = gp_cuda_min_driver(c->cuda_version);
	if (!min) {
		/* Refused rather than skipped: a typo ("12.7") must not pass. */
		char range[40];
		cuda_table_range(range, sizeof range);
		add_issue(
		    c, GP_RULE_DRIVER_CUDA,
		    "CUDA %s is not in gpuprov's CUDA -> minimum driver table (CUDA %s), "
		    "so %s cannot be checked against it; use a CUDA version from the "
		    "table, or correct the typo",
		    c->cuda_version, range, c->drv.desc);
		return;
	}
	if (driver_meets(&c->drv, min))
		return;
	char fix[64], older[16];
	const char *alt = newest_cuda_for(c, older, sizeof older);
	add_issue(c, GP_RULE_DRIVER_CUDA,
	          "%s is older than CUDA %s's minimum driver %s; use %s%s%s", c->drv.desc,
	          c->cuda_version, min, driver_fix(&c->drv, min, fix, sizeof fix),
	          alt ? ", or CUDA " : "", alt ? alt : "");
}

/* One gpu-cuda issue per matched GPU that cuda cannot target. what names
 * the CUDA build ("CUDA 12.4", or a PyTorch index's wheels) and unit what
 * the fix changes ("CUDA", "a wheel index for CUDA"). */
static void gpus_against(struct check *c, const char *cuda, const char *what,
                         const char *unit)
{
	for (size_t i = 0; i < c->n_gpus; i++) {
		const struct gp_gpu_info *g = c->gpus[i];
		if (gp_cuda_supports_cc(cuda, g))
			continue;
		if (gp_version_compare(cuda, g->first_cuda) < 0) {
			add_issue(c, GP_RULE_GPU_CUDA,
			          "%s cannot target %s (10de:%04x, %s, compute "
			          "capability %u.%u), first supported by CUDA %s; use %s "
			          "%s or newer, or drop 10de:%04x from match.gpus",
			          what, g->name, g->device, g->arch, g->cc_major,
			          g->cc_minor, g->first_cuda, unit, g->first_cuda,
			          g->device);
			continue;
		}
		char last[16];
		const char *alt = newest_cuda_targeting(g, last, sizeof last);
		add_issue(
		    c, GP_RULE_GPU_CUDA,
		    "%s cannot target %s (10de:%04x, %s, compute capability %u.%u): "
		    "CUDA 13 dropped compute capabilities below 7.5; use %s %s or "
		    "older, or drop 10de:%04x from match.gpus",
		    what, g->name, g->device, g->arch, g->cc_major, g->cc_minor, unit,
		    alt ? alt : "12.x", g->device);
	}
}

/* The toolkit, and the CUDA build inside the PyTorch wheels (they bundle
 * their own runtime: an RTX 5090 or B200 needs cu128 or newer whatever the
 * toolkit is). */
static void rule_gpu_cuda(struct check *c)
{
	if (c->cuda_version) {
		_cleanup_free_ char *what = gp_xasprintf("CUDA %s", c->cuda_version);
		gpus_against(c, c->cuda_version, what, "CUDA");
	}
	const char *url = str_member(c->pytorch, "index_url");
	char buf[16];
	bool cpu;
	const char *wheel = url ? gp_torch_tag_cuda(url, &cpu, buf) : NULL;
	if (wheel) {
		_cleanup_free_ char *what = gp_xasprintf(
		    "the CUDA %s wheels of PyTorch index %s", wheel, url);
		gpus_against(c, wheel, what, "a wheel index for CUDA");
	}
}

static void rule_cudnn_cuda(struct check *c)
{
	const char *built_for = str_member(c->cudnn, "cuda");
	if (!built_for || !c->cuda_version)
		return;
	/* Only the majors count: a cuDNN build for CUDA 12 runs on every 12.x. */
	char want[32], have[32];
	first_part(c->cuda_version, want, sizeof want);
	first_part(built_for, have, sizeof have);
	if (gp_version_compare(have, want) == 0)
		return;
	const char *ver = str_member(c->cudnn, "version");
	add_issue(c, GP_RULE_CUDNN_CUDA,
	          "cuDNN%s%s is built for CUDA %s but the cuda stage installs CUDA %s; "
	          "use the cuDNN build for CUDA %s (cudnn \"cuda\": \"%s\"), or a "
	          "CUDA %s.x toolkit",
	          ver ? " " : "", ver ? ver : "", built_for, c->cuda_version, want, want,
	          have);
}

static void rule_torch_driver(struct check *c)
{
	const char *url = str_member(c->pytorch, "index_url");
	if (!url || !c->have_drv)
		return;
	char buf[16];
	bool cpu;
	const char *wheel_cuda = gp_torch_tag_cuda(url, &cpu, buf);
	if (cpu) {
		_cleanup_free_ char *alt = torch_index_for(c, url);
		add_issue(
		    c, GP_RULE_TORCH_DRIVER,
		    "CPU-only wheels cannot use the GPU: PyTorch index %s has no CUDA "
		    "build, so %s would go unused; use a CUDA wheel index%s%s",
		    url, c->drv.desc, alt ? " such as " : "", alt ? alt : "");
		return;
	}
	/* No cu tag in the URL (a private mirror or a plain PyPI index): which
	 * CUDA its wheels carry cannot be told from here. */
	if (!wheel_cuda)
		return;
	const char *need = gp_cuda_minor_compat_driver(wheel_cuda);
	if (!need) {
		_cleanup_free_ char *alt = torch_index_for(c, url);
		add_issue(
		    c, GP_RULE_TORCH_DRIVER,
		    "PyTorch index %s carries CUDA %s wheels, for which gpuprov knows "
		    "no minimum driver, so %s cannot be checked against them; use a "
		    "CUDA 11, 12 or 13 wheel index%s%s",
		    url, wheel_cuda, c->drv.desc, alt ? " such as " : "", alt ? alt : "");
		return;
	}
	/* Minor-version compatibility is enough: the wheels bundle the CUDA
	 * runtime, so only the host driver matters. */
	if (driver_meets(&c->drv, need))
		return;
	char fix[64];
	_cleanup_free_ char *alt = torch_index_for(c, url);
	add_issue(
	    c, GP_RULE_TORCH_DRIVER,
	    "%s is older than driver %s, which the CUDA %s wheels of PyTorch index %s "
	    "need; use %s%s%s",
	    c->drv.desc, need, wheel_cuda, url,
	    driver_fix(&c->drv, need, fix, sizeof fix),
	    alt ? ", or the wheel index " : "", alt ? alt : "");
}

/* Does the pinned driver still ship the proprietary modules (none pinned:
 * nothing says otherwise)? */
static bool drv_has_proprietary(const struct check *c)
{
	if (!c->have_drv)
		return true;
	return gp_branch_has_proprietary(c->drv.version ? c->drv.version : c->drv.branch);
}

/* g cannot run the chosen flavor ("open"), it needs the other one. other is
 * a matched GPU that does need the chosen flavor, or NULL. */
static void flavor_issue(struct check *c, const struct gp_gpu_info *g, const char *chosen,
                         const char *needed, const struct gp_gpu_info *other)
{
	char fix[320];
	/* With a GPU that needs the chosen flavor too, switching the flavor
	 * only moves the problem. */
	if (other)
		snprintf(fix, sizeof fix,
		         "no single flavor drives both it and %s (10de:%04x), which "
		         "needs the %s ones, so give them separate profiles",
		         other->name, other->device, chosen);
	else if (strcmp(needed, "proprietary") == 0 && !drv_has_proprietary(c))
		snprintf(fix, sizeof fix,
		         "use \"modules\": \"proprietary\" with driver branch %s, "
		         "the last for it (%s ships no proprietary modules)",
		         gp_gpu_last_branch(g), c->drv.desc);
	else
		snprintf(fix, sizeof fix, "use \"modules\": \"%s\"", needed);
	add_issue(c, GP_RULE_MODULE_FLAVOR,
	          "%s kernel modules cannot drive %s (10de:%04x, %s, compute "
	          "capability %u.%u), which needs the %s modules; %s",
	          chosen, g->name, g->device, g->arch, g->cc_major, g->cc_minor, needed,
	          fix);
}

static void rule_module_flavor(struct check *c)
{
	const char *modules = str_member(c->driver, "modules");
	if (!modules)
		return;
	const struct gp_gpu_info *needs_open, *needs_prop;
	gp_gpus_flavor_need(c->gpus, c->n_gpus, &needs_open, &needs_prop);

	if (strcmp(modules, "open") == 0) {
		if (c->have_drv && !driver_meets(&c->drv, OPEN_MODULES_FIRST_BRANCH)) {
			char fix[64];
			driver_fix(&c->drv, OPEN_MODULES_FIRST_BRANCH, fix, sizeof fix);
			add_issue(c, GP_RULE_MODULE_FLAVOR,
			          "open kernel modules need driver branch %s or newer "
			          "(they first shipped with R%s), but the profile pins "
			          "%s; use %s, or \"modules\": \"proprietary\"",
			          OPEN_MODULES_FIRST_BRANCH, OPEN_MODULES_FIRST_BRANCH,
			          c->drv.desc, fix);
		}
		for (size_t i = 0; i < c->n_gpus; i++)
			if (gp_gpu_needs_proprietary(c->gpus[i]))
				flavor_issue(c, c->gpus[i], "open", "proprietary",
				             needs_open);
	} else if (strcmp(modules, "proprietary") == 0) {
		if (!drv_has_proprietary(c))
			add_issue(
			    c, GP_RULE_MODULE_FLAVOR,
			    "%s ships no proprietary kernel modules (NVIDIA removed "
			    "them from branch %s on); use \"modules\": \"open\" "
			    "(Turing or later GPUs), or driver branch 580, the "
			    "last long-term branch with them",
			    c->drv.desc, GP_BRANCH_NO_PROPRIETARY);
		if (!gp_arch_has_proprietary_modules(c->arch))
			add_issue(c, GP_RULE_MODULE_FLAVOR,
			          "proprietary kernel modules are not supported on %s "
			          "(arm64 servers such as Grace Hopper and Grace "
			          "Blackwell run the open ones); use \"modules\": "
			          "\"open\"",
			          c->arch);
		for (size_t i = 0; i < c->n_gpus; i++)
			if (gp_gpu_needs_open_modules(c->gpus[i]))
				flavor_issue(c, c->gpus[i], "proprietary", "open",
				             needs_prop);
	} else if (strcmp(modules, "auto") == 0 && needs_open && needs_prop) {
		add_issue(c, GP_RULE_MODULE_FLAVOR,
		          "\"modules\": \"auto\" cannot serve %s (10de:%04x, %s), "
		          "which needs the proprietary modules, together with %s "
		          "(10de:%04x, %s), which needs the open ones: no single "
		          "flavor drives both; give them separate profiles",
		          needs_prop->name, needs_prop->device, needs_prop->arch,
		          needs_open->name, needs_open->device, needs_open->arch);
	}
}

/* A GPU generation's last branch (Volta and older: R580) against the
 * pinned driver. */
static void rule_driver_gpu(struct check *c)
{
	if (!c->have_drv)
		return;
	for (size_t i = 0; i < c->n_gpus; i++) {
		const struct gp_gpu_info *g = c->gpus[i];
		const char *last = gp_gpu_last_branch(g);
		char br[32];
		const char *have = c->drv.version
		                       ? first_part(c->drv.version, br, sizeof br)
		                       : c->drv.branch;
		if (!last || gp_version_compare(have, last) <= 0)
			continue;
		add_issue(c, GP_RULE_DRIVER_GPU,
		          "%s no longer supports %s (10de:%04x, %s, compute capability "
		          "%u.%u): branch %s is the last for Maxwell, Pascal and Volta; "
		          "use driver branch %s, or drop 10de:%04x from match.gpus",
		          c->drv.desc, g->name, g->device, g->arch, g->cc_major,
		          g->cc_minor, last, last, g->device);
	}
}

/* "10de:20b0" -> 0x20b0; 0 for another vendor or a malformed id. */
static unsigned nvidia_device(const char *id)
{
	unsigned vendor, device;
	int end = 0;
	if (strlen(id) != 9 || id[4] != ':' || strspn(id, "0123456789abcdefABCDEF:") != 9)
		return 0;
	if (sscanf(id, "%4x:%4x%n", &vendor, &device, &end) != 2 || end != 9)
		return 0;
	return vendor == 0x10de ? device : 0;
}

/* The known GPUs of match.gpus, each once, in the profile's order. */
static void read_gpus(struct check *c, const cJSON *profile)
{
	const cJSON *match = cJSON_GetObjectItemCaseSensitive(profile, "match");
	const cJSON *ids = match ? cJSON_GetObjectItemCaseSensitive(match, "gpus") : NULL;
	c->arch = str_member(match, "arch");
	if (!cJSON_IsArray(ids))
		return;
	c->gpus = gp_xcalloc((size_t)cJSON_GetArraySize(ids) + 1, sizeof(*c->gpus));
	for (const cJSON *x = ids->child; x; x = x->next) {
		if (!cJSON_IsString(x))
			continue;
		const struct gp_gpu_info *g = gp_gpu_lookup(
		    nvidia_device(x->valuestring));
		bool seen = false;
		for (size_t i = 0; g && i < c->n_gpus; i++)
			seen = seen || c->gpus[i] == g;
		if (g && !seen)
			c->gpus[c->n_gpus++] = g;
	}
}

static void read_driver(struct check *c)
{
	struct driver_pin *d = &c->drv;
	const char *v = str_member(c->driver, "version");
	const char *b = str_member(c->driver, "branch");
	/* An exact version says more than a branch; a malformed one is the
	 * validator's to report. */
	if (v && gp_version_is_valid(v)) {
		d->version = v;
		snprintf(d->desc, sizeof d->desc, "driver %s", v);
	} else if (is_branch(b)) {
		d->branch = b;
		snprintf(d->desc, sizeof d->desc, "driver branch %s", b);
	}
	c->have_drv = d->version || d->branch;
}

/* An override is {"rule", "reason"}; one without a reason string is not
 * explicit, so it is ignored and the issue keeps blocking. */
static const char *override_reason(const cJSON *ov, const char *rule)
{
	if (cJSON_IsObject(ov)) {
		const char *r = str_member(ov, "rule"), *why = str_member(ov, "reason");
		return gp_streq(r, rule) ? why : NULL;
	}
	if (cJSON_IsArray(ov))
		for (const cJSON *x = ov->child; x; x = x->next) {
			const char *why = override_reason(cJSON_IsObject(x) ? x : NULL,
			                                  rule);
			if (why)
				return why;
		}
	return NULL;
}

void gp_compat_check(const cJSON *profile, struct gp_compat_report *rep)
{
	*rep = (struct gp_compat_report){ 0 };
	if (!profile)
		return;
	struct check c = {
		.driver = stage(profile, "driver"),
		.cuda = stage(profile, "cuda"),
		.cudnn = stage(profile, "cudnn"),
		.pytorch = stage(profile, "pytorch"),
		.rep = rep,
	};
	read_driver(&c);
	const char *cv = str_member(c.cuda, "version");
	c.cuda_version = cv && gp_version_is_valid(cv) ? cv : NULL;
	read_gpus(&c, profile);

	/* In the order of rule_ids. */
	rule_driver_cuda(&c);
	rule_gpu_cuda(&c);
	rule_cudnn_cuda(&c);
	rule_torch_driver(&c);
	rule_module_flavor(&c);
	rule_driver_gpu(&c);
	free(c.gpus);

	const cJSON *ov = cJSON_GetObjectItemCaseSensitive(profile, "override");
	for (size_t i = 0; i < rep->n; i++) {
		const char *why = override_reason(ov, rep->issues[i].rule);
		if (why)
			rep->issues[i].override = gp_xstrdup(why);
	}
}

char *gp_compat_branch_eol(const cJSON *profile, const struct gp_date *today)
{
	if (!profile)
		return NULL;
	struct check c = { .driver = stage(profile, "driver") };
	read_driver(&c);
	const struct gp_branch_info *b = c.have_drv ? gp_branch_lookup(c.drv.version
	                                                                   ? c.drv.version
	                                                                   : c.drv.branch)
	                                            : NULL;
	if (!gp_branch_past_eol(b, today))
		return NULL;
	read_gpus(&c, profile);
	const struct gp_gpu_info *needs_prop = NULL;
	gp_gpus_flavor_need(c.gpus, c.n_gpus, NULL, &needs_prop);
	bool proprietary = needs_prop ||
	                   gp_streq(str_member(c.driver, "modules"), "proprietary");
	const struct gp_branch_info *to = gp_branch_successor(today, proprietary, c.gpus,
	                                                      (unsigned)c.n_gpus);
	free(c.gpus);
	char ended[24], until[24], move[160];
	if (to)
		snprintf(move, sizeof move,
		         "move to driver branch %s (%s, supported until %s)%s",
		         to->branch, to->type,
		         gp_branch_eol_text(to, until, sizeof until),
		         proprietary ? ", the longest-supported branch with the "
		                       "proprietary modules"
		                     : "");
	else if (proprietary)
		snprintf(move, sizeof move,
		         "no supported long-term branch has the proprietary modules "
		         "the profile needs: use open modules where the GPUs allow");
	else
		snprintf(move, sizeof move,
		         "no supported long-term branch drives the matched GPUs");
	const char *type = b->type ? b->type : "type unknown";
	_cleanup_free_ char *what = c.drv.version
	                                ? gp_xasprintf("driver %s (branch %s, %s)",
	                                               c.drv.version, b->branch, type)
	                                : gp_xasprintf("driver branch %s (%s)", b->branch,
	                                               type);
	return gp_xasprintf("%s reached its end of life at the end of %s (today is "
	                    "%04d-%02d-%02d) and gets no more fixes; %s",
	                    what, gp_branch_eol_text(b, ended, sizeof ended), today->year,
	                    today->month, today->day, move);
}

const char *gp_compat_override(const cJSON *profile, const char *rule)
{
	return override_reason(cJSON_GetObjectItemCaseSensitive(profile, "override"),
	                       rule);
}

size_t gp_compat_blocking(const struct gp_compat_report *rep)
{
	size_t n = 0;
	for (size_t i = 0; i < rep->n; i++)
		n += rep->issues[i].override == NULL;
	return n;
}

void gp_compat_report_free(struct gp_compat_report *rep)
{
	for (size_t i = 0; i < rep->n; i++) {
		free(rep->issues[i].message);
		free(rep->issues[i].override);
	}
	free(rep->issues);
	*rep = (struct gp_compat_report){ 0 };
}
