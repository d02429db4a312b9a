/* The verify results as Prometheus metrics, in the text exposition format
 * that node_exporter's textfile collector reads (prometheus.c). Every
 * family is gpuprov_*, with HELP and TYPE even when it has no sample;
 * docs/operations.md lists them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/report.h"
#include "gpuprov/util.h"

/* The file in the collector's directory, and the directory Debian's
 * prometheus-node-exporter reads (docs/reference/prometheus.md). */
#define GP_TEXTFILE_NAME "gpuprov.prom"
#define GP_TEXTFILE_DIR_DEFAULT "/var/lib/prometheus/node-exporter"

/* A stage's state as the journal has it ("done", "never_run", ...). */
struct gp_metrics_stage {
	const char *name, *state;
};

struct gp_metrics {
	const struct gp_report *report; /* the findings and their facts */
	const char *profile_sha256; /* NULL: unknown */
	const struct gp_metrics_stage *stages; /* the journal's, n_stages of them */
	size_t n_stages;
	bool reboot_pending; /* the journal records a reboot asked for */
	double timestamp_seconds; /* when verify ended, Unix time; 0: no sample */
	double duration_seconds; /* how long verify took */
};

/* Appends m in the text format to b. */
void gp_prometheus_render(const struct gp_metrics *m, struct gp_buf *b);
/* value as a label value: '\\', '"' and newline escaped; other control
 * characters and bytes that are not UTF-8 as '?'; cut at 256 bytes (at a
 * character, ending "..."): journal and package versions are outside
 * bytes. Appended to b. */
void gp_prometheus_label_value(struct gp_buf *b, const char *value);
