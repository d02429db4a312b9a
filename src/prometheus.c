/* The textfile: one metric family after another, each with HELP and TYPE
 * (the collector and Prometheus want both once per name, before the
 * samples), gauges only: every value is a state at the time of the run,
 * none counts up across runs. */
#include <string.h>

#include "gpuprov/prometheus.h"

#define LABEL_VALUE_MAX 256

/* The length of the UTF-8 character at p (at most n bytes there), 0 when
 * the bytes are not one (RFC 3629: no overlong forms, no surrogates). */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4;
	else
		return 0;
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

void gp_prometheus_label_value(struct gp_buf *b, const char *value)
{
	const unsigned char *p = (const unsigned char *)value;
	size_t left = strlen(value), taken = 0;
	while (left) {
		size_t len = utf8_len(p, left);
		if (taken + (len ? len : 1) > LABEL_VALUE_MAX) {
			gp_buf_puts(b, "...");
			return;
		}
		if (*p == '\\' || *p == '"')
			gp_buf_printf(b, "\\%c", *p);
		else if (*p == '\n')
			gp_buf_puts(b, "\\n");
		else if (!len || *p < 0x20 || *p == 0x7f)
			gp_buf_puts(b, "?");
		else
			gp_buf_append(b, p, len);
		len = len ? len : 1;
		p += len;
		left -= len;
		taken += len;
	}
}

static void family(struct gp_buf *b, const char *name, const char *help)
{
	gp_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

/* name{k1="v1",k2="v2",...} value: labels as NULL-terminated pairs. */
static void sample(struct gp_buf *b, const char *name, const char *const *labels,
                   const char *value)
{
	gp_buf_puts(b, name);
	for (size_t i = 0; labels && labels[i]; i += 2) {
		gp_buf_printf(b, "%s%s=\"", i ? "," : "{", labels[i]);
		gp_prometheus_label_value(b, labels[i + 1] ? labels[i + 1] : "");
		gp_buf_puts(b, "\"");
	}
	gp_buf_printf(b, "%s %s\n", labels && labels[0] ? "}" : "", value);
}

static const char *bool_value(bool v)
{
	return v ? "1" : "0";
}

/* One series per id (an id made twice counts as failed if either failed),
 * 1 for pass and warn, 0 for fail; a skipped check verified nothing. */
static void check_success(struct gp_buf *b, const struct gp_report *r)
{
	family(b, "gpuprov_verify_check_success",
	       "1 when the verify check (label check: its stable id, "
	       "docs/findings.md) passed or only warned, 0 when it failed; "
	       "skipped checks have no sample");
	for (size_t i = 0; i < r->n; i++) {
		const struct gp_finding *f = &r->findings[i];
		bool first = f->level != GP_SKIP, failed = f->level == GP_FAIL;
		for (size_t k = 0; k < r->n && first; k++) {
			if (strcmp(r->findings[k].id, f->id) != 0 ||
			    r->findings[k].level == GP_SKIP)
				continue;
			first = k >= i;
			failed |= r->findings[k].level == GP_FAIL;
		}
		if (!first)
			continue;
		const char *labels[] = { "stage", f->stage, "check", f->id, NULL };
		sample(b, "gpuprov_verify_check_success", labels, bool_value(!failed));
	}
}

/* The kind of a drift finding: the rest of its check part after "drift_"
 * ("nouveau.drift_file_edited.x" -> "file_edited"), with its length; NULL
 * for any other finding. */
static const char *drift_kind(const struct gp_finding *f, size_t *len)
{
	const char *check = strchr(f->id, '.');
	if (!check || !gp_str_starts_with(check + 1, "drift_"))
		return NULL;
	const char *kind = check + 1 + strlen("drift_");
	*len = strcspn(kind, ".");
	return kind;
}

static bool same_drift(const struct gp_finding *a, const struct gp_finding *b)
{
	size_t la, lb;
	const char *ka = drift_kind(a, &la), *kb = drift_kind(b, &lb);
	return ka && kb && la == lb && memcmp(ka, kb, la) == 0 &&
	       strcmp(a->stage, b->stage) == 0;
}

/* Per stage and kind, the drift findings that did not pass. */
static void drift_items(struct gp_buf *b, const struct gp_report *r)
{
	family(b, "gpuprov_drift_items",
	       "verify findings of drift from the journal or the profile that did "
	       "not pass, per stage and kind (file_edited, ...); no sample when "
	       "there is none");
	for (size_t i = 0; i < r->n; i++) {
		const struct gp_finding *f = &r->findings[i];
		size_t len;
		const char *kind = drift_kind(f, &len);
		if (!kind || f->level == GP_PASS || f->level == GP_SKIP)
			continue;
		bool first = true;
		size_t count = 0;
		for (size_t k = 0; k < r->n; k++) {
			const struct gp_finding *g = &r->findings[k];
			if (g->level == GP_PASS || g->level == GP_SKIP ||
			    !same_drift(f, g))
				continue;
			first &= k >= i;
			count++;
		}
		if (!first)
			continue;
		_cleanup_free_ char *kind_name = gp_xstrndup(kind, len);
		_cleanup_free_ char *value = gp_xasprintf("%zu", count);
		const char *labels[] = { "stage", f->stage, "kind", kind_name, NULL };
		sample(b, "gpuprov_drift_items", labels, value);
	}
}

/* The facts "deep/<metric>/<gpu>[/<second>]" of verify --deep as samples
 * of name with the labels gpu (and second: "dtype", "peer"). */
static void deep_rates(struct gp_buf *b, const struct gp_report *r, const char *metric,
                       const char *second, const char *name, const char *help)
{
	family(b, name, help);
	_cleanup_free_ char *prefix = gp_xasprintf("deep/%s/", metric);
	size_t n = strlen(prefix);
	for (size_t i = 0; r->facts && r->facts[i]; i += 2) {
		const char *key = r->facts[i], *value = r->facts[i + 1];
		if (strncmp(key, prefix, n) != 0 || !value)
			continue;
		_cleanup_free_ char *gpu = gp_xstrdup(key + n);
		char *dtype = strchr(gpu, '/');
		if (dtype)
			*dtype++ = '\0';
		const char *labels[] = { "gpu", gpu, dtype ? second : NULL, dtype, NULL };
		sample(b, name, labels, value);
	}
}

/* The node's NCCL all-reduce figure (fact "deep/nccl_allreduce/<what>"),
 * labelled with how many GPUs took part; no sample when not measured. */
static void nccl_rate(struct gp_buf *b, const struct gp_report *r, const char *what,
                      const char *name, const char *help)
{
	family(b, name, help);
	_cleanup_free_ char *key = gp_xasprintf("deep/nccl_allreduce/%s", what);
	const char *value = gp_report_fact(r, key),
	           *ranks = gp_report_fact(r, "deep/nccl_allreduce/ranks");
	if (!value || !*value || !ranks)
		return;
	const char *labels[] = { "gpus", ranks, NULL };
	sample(b, name, labels, value);
}

/* verify --deep's families, only when it ran: per GPU and check, 1 for a
 * pass or warning, 0 for a failure (findings "deep.<check>.gpu<N>"). */
static void deep_metrics(struct gp_buf *b, const struct gp_report *r)
{
	bool ran = false;
	for (size_t i = 0; i < r->n && !ran; i++)
		ran = strcmp(r->findings[i].stage, "deep") == 0;
	if (!ran)
		return;
	deep_rates(b, r, "gemm_flops", "dtype", "gpuprov_gpu_gemm_flops",
	           "dense GEMM throughput verify --deep measured (cuBLAS, 2*M*N*K FLOPs "
	           "per second; labels gpu: NVML index, dtype)");
	deep_rates(b, r, "memory_bps", "dtype",
	           "gpuprov_gpu_memory_bandwidth_bytes_per_second",
	           "device memory bandwidth verify --deep measured (a device-to-device "
	           "copy, bytes read plus written per second)");
	deep_rates(b, r, "h2d_bps", "dtype",
	           "gpuprov_gpu_host_to_device_bytes_per_second",
	           "host-to-device bandwidth from pinned memory verify --deep measured");
	deep_rates(b, r, "d2h_bps", "dtype",
	           "gpuprov_gpu_device_to_host_bytes_per_second",
	           "device-to-host bandwidth to pinned memory verify --deep measured");
	deep_rates(b, r, "p2p_bps", "peer", "gpuprov_gpu_p2p_bandwidth_bytes_per_second",
	           "peer-to-peer bandwidth verify --deep measured from the GPU (label "
	           "gpu) to a later one (label peer), one way, bytes per second");
	nccl_rate(b, r, "busbw",
	          "gpuprov_gpu_nccl_allreduce_bus_bandwidth_bytes_per_second",
	          "NCCL all-reduce bus bandwidth verify --deep measured across the GPUs "
	          "(label gpus: how many), algorithm bandwidth x 2(n-1)/n, bytes per "
	          "second");
	nccl_rate(b, r, "algbw",
	          "gpuprov_gpu_nccl_allreduce_algorithm_bandwidth_bytes_per_second",
	          "NCCL all-reduce algorithm bandwidth verify --deep measured across the "
	          "GPUs (label gpus: how many), message bytes over time per second");
	family(b, "gpuprov_gpu_health_success",
	       "1 when verify --deep's check (label check) of the GPU (label gpu) passed "
	       "or only warned, 0 when it failed; skipped checks have no sample");
	for (size_t i = 0; i < r->n; i++) {
		const struct gp_finding *f = &r->findings[i];
		const char *check = strchr(f->id, '.'), *subject = NULL;
		if (strcmp(f->stage, "deep") != 0 || f->level == GP_SKIP || !check ||
		    !(subject = strchr(check + 1, '.')) ||
		    strncmp(subject, ".gpu", 4) != 0)
			continue;
		_cleanup_free_ char *name = gp_xstrndup(check + 1,
		                                        (size_t)(subject - check - 1));
		/* A pair's subject is "gpu<N>_gpu<M>". */
		_cleanup_free_ char *gpu = gp_xstrdup(subject + 4);
		char *peer = strstr(gpu, "_gpu");
		if (peer) {
			*peer = '\0';
			peer += 4;
		}
		const char *labels[] = { "gpu", gpu, "check", name, peer ? "peer" : NULL,
			                 peer,  NULL };
		sample(b, "gpuprov_gpu_health_success", labels,
		       bool_value(f->level != GP_FAIL));
	}
}

void gp_prometheus_render(const struct gp_metrics *m, struct gp_buf *b)
{
	const struct gp_report *r = m->report;
	family(b, "gpuprov_info",
	       "gpuprov's version and the profile verified, with its sha256 (value 1)");
	const char *info[] = {
		"version",        GP_VERSION,        "profile", r->profile_name,
		"profile_sha256", m->profile_sha256, NULL
	};
	sample(b, "gpuprov_info", info, "1");

	family(b, "gpuprov_verify_success", "1 when no verify check failed, else 0");
	sample(b, "gpuprov_verify_success", NULL,
	       bool_value(gp_report_count(r, GP_FAIL) == 0));
	check_success(b, r);

	family(b, "gpuprov_stage_state",
	       "each stage's state in gpuprov's journal, as the label state "
	       "(done, reboot_pending, failed, never_run, ...; value 1)");
	for (size_t i = 0; i < m->n_stages; i++) {
		const char *labels[] = { "stage", m->stages[i].name, "state",
			                 m->stages[i].state, NULL };
		sample(b, "gpuprov_stage_state", labels, "1");
	}

	family(b, "gpuprov_reboot_pending",
	       "1 while a reboot gpuprov asked for has not happened, else 0");
	sample(b, "gpuprov_reboot_pending", NULL, bool_value(m->reboot_pending));

	drift_items(b, r);

	family(b, "gpuprov_driver_info",
	       "the NVIDIA driver seen: installed user-space version, loaded module "
	       "version and its flavor (open, proprietary); empty when none (value 1; "
	       "no sample when the driver stage was not verified)");
	const char *installed = gp_report_fact(r, "driver/installed");
	if (installed) {
		const char *labels[] = { "installed", installed,
			                 "loaded",    gp_report_fact(r, "driver/loaded"),
			                 "flavor",    gp_report_fact(r, "driver/flavor"),
			                 NULL };
		sample(b, "gpuprov_driver_info", labels, "1");
	}

	family(b, "gpuprov_last_verify_timestamp_seconds",
	       "when this verify ended, in seconds since the Unix epoch");
	if (m->timestamp_seconds > 0) {
		_cleanup_free_ char *v = gp_xasprintf("%.3f", m->timestamp_seconds);
		sample(b, "gpuprov_last_verify_timestamp_seconds", NULL, v);
	}
	family(b, "gpuprov_verify_duration_seconds",
	       "how long this verify took, in seconds");
	if (m->timestamp_seconds > 0) {
		_cleanup_free_ char *v = gp_xasprintf("%.6f", m->duration_seconds);
		sample(b, "gpuprov_verify_duration_seconds", NULL, v);
	}
	deep_metrics(b, r);
}
