/* `gpuprov detect`: what the root is and which profiles fit it. Reads the
 * root's os-release, running kernel, Secure Boot variable and PCI devices;
 * lists each NVIDIA GPU (vendor 0x10de, class 0x0300/0x0302) with what
 * gpuprov knows of its device id, never a guess for an id it does not know;
 * then ranks the profiles of the search path whose match fits the root
 * and that can be installed as they are (not a base that enables no stage,
 * nor one missing a pin): those naming the root's GPUs before those that
 * do not, a named distro before none. Changes nothing. */
#include <errno.h>
#include <string.h>

#include "gpuprov/catalog.h"
#include "gpuprov/detect.h"
#include "gpuprov/engine.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/gpus.h"
#include "gpuprov/json.h"
#include "gpuprov/kernelinfo.h"
#include "gpuprov/match.h"
#include "gpuprov/osrelease.h"
#include "gpuprov/pci.h"
#include "gpuprov/profile.h"
#include "gpuprov/secureboot.h"

struct gpu {
	const struct gp_pci_device *dev;
	const struct gp_gpu_info *info; /* NULL: unknown to gpuprov */
	char id[16]; /* "10de:20b0" */
};

struct candidate {
	struct gp_profile *p;
	bool names_gpus; /* match.gpus is not empty */
	size_t gpu_hits; /* the root's GPUs among match.gpus */
	bool names_distro; /* match.os_id */
	bool names_version;
};

/* Best first: GPU ids before none, then a distro before none, then more of
 * the root's GPUs, a version before none, and the name. */
static int cmp_candidate(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;
	if (x->names_gpus != y->names_gpus)
		return x->names_gpus ? -1 : 1;
	if (x->names_distro != y->names_distro)
		return x->names_distro ? -1 : 1;
	if (x->gpu_hits != y->gpu_hits)
		return x->gpu_hits > y->gpu_hits ? -1 : 1;
	if (x->names_version != y->names_version)
		return x->names_version ? -1 : 1;
	return strcmp(x->p->name, y->p->name);
}

static void rank(struct candidate *c, const struct gpu *gpus, size_t n_gpus)
{
	const cJSON *match = cJSON_GetObjectItemCaseSensitive(c->p->doc, "match");
	_cleanup_strv_ char **ids = gp_json_strv(match, "gpus");
	c->names_gpus = ids && ids[0];
	for (size_t i = 0; c->names_gpus && i < n_gpus; i++)
		c->gpu_hits += gp_strv_contains(ids, gpus[i].id);
	c->names_distro = gp_json_string(match, "os_id", NULL) != NULL;
	c->names_version = gp_json_string(match, "version_id", NULL) != NULL;
}

/* The profiles of the search path that fit the root, best first. Profiles
 * that do not load are skipped with a warning: detect describes the
 * machine, and one broken file should not hide that. */
static struct candidate *matching_profiles(const struct gp_options *o,
                                           const struct gp_root *r,
                                           const struct gpu *gpus, size_t n_gpus,
                                           const struct gp_out *out, size_t *n)
{
	_cleanup_strv_ char **search = gp_profile_search_path(o->profile_dir);
	_cleanup_strv_ char **names = gp_catalog_names(search);
	size_t total = gp_strv_len(names);
	struct candidate *c = gp_xcalloc(total ? total : 1, sizeof *c);
	*n = 0;
	for (size_t i = 0; i < total; i++) {
		struct gp_profile *p = NULL;
		struct gp_err err = { 0 };
		if (gp_profile_load(names[i], search, &p, &err) < 0) {
			gp_warn(out, "skipping profile %s: %s", names[i], err.msg);
			continue;
		}
		_cleanup_free_ char *why = gp_profile_mismatch(p, r);
		if (why) {
			gp_debug(out, "profile %s does not fit: %s", p->name, why);
			gp_profile_free(p);
			continue;
		}
		/* Only what can be installed as it is: a base is there to be
		 * extended, and a profile missing a pin would block. */
		_cleanup_strv_ char **pins = gp_catalog_missing_pins(p);
		if (!gp_catalog_enables_stage(p) || pins[0]) {
			if (pins[0])
				gp_warn(out,
				        "profile %s fits but is not offered: it would be "
				        "blocked (%s); 'gpuprov profiles lint' lists "
				        "what is missing",
				        p->name, pins[0]);
			else
				gp_debug(out,
				         "profile %s fits but is not offered: it enables "
				         "no stage (a base to extend)",
				         p->name);
			gp_profile_free(p);
			continue;
		}
		c[*n] = (struct candidate){ .p = p };
		rank(&c[*n], gpus, n_gpus);
		(*n)++;
	}
	qsort(c, *n, sizeof *c, cmp_candidate);
	return c;
}

static void add_string_or_null(cJSON *obj, const char *key, const char *value)
{
	if (value)
		cJSON_AddStringToObject(obj, key, value);
	else
		cJSON_AddNullToObject(obj, key);
}

static cJSON *gpu_json(const struct gpu *g)
{
	cJSON *e = cJSON_CreateObject();
	char hex[8];
	cJSON_AddStringToObject(e, "address", g->dev->address);
	cJSON_AddStringToObject(e, "id", g->id);
	snprintf(hex, sizeof hex, "%04x", g->dev->device);
	cJSON_AddStringToObject(e, "device_id", hex);
	cJSON_AddBoolToObject(e, "known", g->info != NULL);
	if (g->info) {
		char cc[16];
		snprintf(cc, sizeof cc, "%u.%u", g->info->cc_major, g->info->cc_minor);
		cJSON_AddStringToObject(e, "name", g->info->name);
		cJSON_AddStringToObject(e, "architecture", g->info->arch);
		cJSON_AddStringToObject(e, "compute_capability", cc);
	} else {
		_cleanup_free_ char *name = gp_xasprintf("unknown NVIDIA device %s",
		                                         g->id);
		cJSON_AddStringToObject(e, "name", name);
		cJSON_AddNullToObject(e, "architecture");
		cJSON_AddNullToObject(e, "compute_capability");
	}
	add_string_or_null(e, "driver", g->dev->driver);
	return e;
}

static void print_gpu(struct gp_out *out, const struct gpu *g)
{
	const char *driver = g->dev->driver ? g->dev->driver : "none";
	if (g->info)
		fprintf(out->out,
		        "  %s  %s  %s (%s, compute capability %u.%u), driver %s\n",
		        g->dev->address, g->id, g->info->name, g->info->arch,
		        g->info->cc_major, g->info->cc_minor, driver);
	else
		fprintf(out->out, "  %s  %s  unknown NVIDIA device %s, driver %s\n",
		        g->dev->address, g->id, g->id, driver);
}

static void render_json(struct gp_out *out, const struct gp_root *r,
                        const struct gp_os_release *osr, const char *kernel,
                        const char *arch, enum gp_secure_boot sb, const struct gpu *gpus,
                        size_t n_gpus, const struct candidate *c, size_t n_c)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "root", r->dir);
	if (osr) {
		cJSON *os = cJSON_AddObjectToObject(doc, "os");
		add_string_or_null(os, "pretty_name", osr->pretty_name);
		add_string_or_null(os, "id", osr->id);
		add_string_or_null(os, "version_id", osr->version_id);
	} else {
		cJSON_AddNullToObject(doc, "os");
	}
	add_string_or_null(doc, "kernel", kernel);
	add_string_or_null(doc, "arch", arch);
	cJSON_AddStringToObject(doc, "secure_boot", gp_secure_boot_name(sb));
	cJSON *arr = cJSON_AddArrayToObject(doc, "gpus");
	for (size_t i = 0; i < n_gpus; i++)
		cJSON_AddItemToArray(arr, gpu_json(&gpus[i]));
	arr = cJSON_AddArrayToObject(doc, "profiles");
	for (size_t i = 0; i < n_c; i++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "name", c[i].p->name);
		cJSON_AddStringToObject(e, "description",
		                        gp_json_string(c[i].p->doc, "description", ""));
		cJSON_AddStringToObject(e, "path", c[i].p->path);
		cJSON_AddNumberToObject(e, "matched_gpus", (double)c[i].gpu_hits);
		cJSON_AddBoolToObject(e, "matches_distro", c[i].names_distro);
		cJSON_AddItemToArray(arr, e);
	}
	gp_print_json(out, doc);
}

static void render_text(struct gp_out *out, const struct gp_os_release *osr,
                        const char *kernel, const char *arch, enum gp_secure_boot sb,
                        const struct gpu *gpus, size_t n_gpus, int pci_rc,
                        const struct candidate *c, size_t n_c)
{
	if (osr)
		fprintf(out->out, "OS:          %s (%s %s)\n",
		        osr->pretty_name ? osr->pretty_name : osr->id, osr->id,
		        osr->version_id ? osr->version_id : "without VERSION_ID");
	else
		fprintf(out->out, "OS:          unknown (no etc/os-release)\n");
	fprintf(out->out, "Kernel:      %s\n", kernel ? kernel : "unknown");
	fprintf(out->out, "Arch:        %s\n", arch ? arch : "unknown");
	fprintf(out->out, "Secure Boot: %s\n", gp_secure_boot_name(sb));
	if (n_gpus == 0) {
		fprintf(out->out, "GPUs:        no NVIDIA GPU found%s\n",
		        pci_rc < 0 ? " (the root has no readable sys/bus/pci/devices)"
		                   : "");
	} else {
		fprintf(out->out, "GPUs:        %zu NVIDIA GPU%s\n", n_gpus,
		        n_gpus == 1 ? "" : "s");
		for (size_t i = 0; i < n_gpus; i++)
			print_gpu(out, &gpus[i]);
	}
	if (n_c == 0) {
		fprintf(out->out, "Profiles:    none fits this root\n");
		return;
	}
	fprintf(out->out, "Profiles that fit, best first:\n");
	int w = 0;
	for (size_t i = 0; i < n_c; i++)
		if ((int)strlen(c[i].p->name) > w)
			w = (int)strlen(c[i].p->name);
	for (size_t i = 0; i < n_c; i++)
		fprintf(out->out, "  %-*s  %s\n", w, c[i].p->name,
		        gp_json_string(c[i].p->doc, "description", ""));
}

int gp_engine_detect(const struct gp_options *o, struct gp_out *out)
{
	const char *root = o->root ? o->root : "/";
	struct gp_root r;
	int rc = gp_root_open(&r, root);
	if (rc < 0) {
		gp_error(out, "--root %s: %s; give an existing directory", root,
		         strerror(-rc));
		return GP_EXIT_USAGE;
	}
	struct gp_os_release osr = { 0 };
	rc = gp_os_release_read(&r, &osr);
	if (rc < 0 && rc != -ENOENT && rc != -EINVAL) {
		_cleanup_free_ char *why = gp_os_release_error(&r, &osr, rc);
		gp_error(out, "%s", why);
		gp_root_close(&r);
		return GP_EXIT_INVALID_INPUT;
	}
	bool have_os = rc == 0;
	_cleanup_free_ char *kernel = gp_running_kernel(&r);
	_cleanup_free_ char *arch = gp_root_arch(&r);
	enum gp_secure_boot sb = gp_secure_boot_state(&r);

	struct gp_pci_list pci = { 0 };
	int pci_rc = gp_pci_scan(&r, &pci);
	for (size_t i = 0; pci.skipped && pci.skipped[i]; i++)
		gp_warn(out, "left out a PCI device: %s", pci.skipped[i]);
	if (pci_rc < 0 && pci_rc != -ENOENT)
		gp_warn(out,
		        "cannot read the PCI devices under %s/sys/bus/pci/devices: %s",
		        gp_root_is_host(&r) ? "" : r.dir, strerror(-pci_rc));
	struct gpu *gpus = gp_xcalloc(pci.n ? pci.n : 1, sizeof *gpus);
	size_t n_gpus = 0;
	for (size_t i = 0; i < pci.n; i++) {
		const struct gp_pci_device *d = &pci.devs[i];
		if (!gp_pci_is_nvidia_gpu(d))
			continue;
		struct gpu *g = &gpus[n_gpus++];
		g->dev = d;
		g->info = gp_gpu_lookup(d->device);
		snprintf(g->id, sizeof g->id, "%04x:%04x", d->vendor, d->device);
	}

	size_t n_c;
	struct candidate *c = matching_profiles(o, &r, gpus, n_gpus, out, &n_c);
	if (out->format == GP_FORMAT_JSON)
		render_json(out, &r, have_os ? &osr : NULL, kernel, arch, sb, gpus,
		            n_gpus, c, n_c);
	else
		render_text(out, have_os ? &osr : NULL, kernel, arch, sb, gpus, n_gpus,
		            pci_rc, c, n_c);

	for (size_t i = 0; i < n_c; i++)
		gp_profile_free(c[i].p);
	free(c);
	free(gpus);
	gp_pci_list_free(&pci);
	gp_os_release_free(&osr);
	gp_root_close(&r);
	return GP_EXIT_OK;
}
