/* The per-GPU table of verify --deep (see deeptable.h). The findings say
 * it all already; the table puts the GPUs side by side so the slow one
 * stands out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/deeptable.h"

static const struct {
	const char *check, *title;
	double scale;
} columns[] = {
	{ "gemm_bf16", "BF16 TFLOPS", 1e12 },       { "gemm_fp16", "FP16 TFLOPS", 1e12 },
	{ "gemm_tf32", "TF32 TFLOPS", 1e12 },       { "gemm_fp8", "FP8 TFLOPS", 1e12 },
	{ "memory_bandwidth", "memory GB/s", 1e9 }, { "host_to_device", "H2D GB/s", 1e9 },
	{ "device_to_host", "D2H GB/s", 1e9 },
};

/* Ends the row: without the last cell's padding. */
static void end_row(struct gp_buf *b)
{
	while (b->len && b->data[b->len - 1] == ' ')
		b->data[--b->len] = '\0';
	gp_buf_puts(b, "\n");
}

static const struct gp_finding *find(const struct gp_report *r, const char *check,
                                     int gpu)
{
	_cleanup_free_ char *id = gp_xasprintf("deep.%s.gpu%d", check, gpu);
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->findings[i].id, id) == 0)
			return &r->findings[i];
	return NULL;
}

/* A measurement's cell: "380.0 (106%)", "380.0" with nothing to compare
 * with, the level without a measurement, "-" without a finding. */
static void cell_of(const struct gp_finding *f, double scale, char *cell, size_t len)
{
	if (!f || !f->unit)
		snprintf(cell, len, "%s", f ? gp_level_name(f->level) : "-");
	else if (f->expected > 0)
		snprintf(cell, len, "%.1f (%.0f%%)", f->measured / scale,
		         100 * f->measured / f->expected);
	else
		snprintf(cell, len, "%.1f", f->measured / scale);
}

/* The pairs' peer-to-peer copies ("deep.p2p.gpu<N>_gpu<M>"), a row each. */
static void render_pairs(const struct gp_report *r, struct gp_buf *b)
{
	bool header = false;
	for (size_t i = 0; i < r->n; i++) {
		const struct gp_finding *f = &r->findings[i];
		int gpu, peer, end = 0;
		if (sscanf(f->id, "deep.p2p.gpu%d_gpu%d%n", &gpu, &peer, &end) != 2 ||
		    f->id[end])
			continue;
		if (!header)
			gp_buf_printf(b, "\n%-4s %-5s %-8s %s\n", "GPU", "peer",
			              "verdict", "P2P GB/s (one way)");
		header = true;
		char cell[32];
		cell_of(f, 1e9, cell, sizeof cell);
		gp_buf_printf(b, "%-4d %-5d %-8s %s\n", gpu, peer,
		              gp_level_name(f->level), cell);
	}
}

void gp_deeptable_render(const struct gp_report *r, struct gp_buf *b)
{
	if (!find(r, "verdict", 0))
		return;
	gp_buf_printf(b, "\n%-4s %-8s", "GPU", "verdict");
	for (size_t c = 0; c < ARRAY_SIZE(columns); c++)
		gp_buf_printf(b, " %-14s", columns[c].title);
	end_row(b);
	const struct gp_finding *v;
	for (int gpu = 0; (v = find(r, "verdict", gpu)); gpu++) {
		gp_buf_printf(b, "%-4d %-8s", gpu, gp_level_name(v->level));
		for (size_t c = 0; c < ARRAY_SIZE(columns); c++) {
			char cell[32];
			cell_of(find(r, columns[c].check, gpu), columns[c].scale, cell,
			        sizeof cell);
			gp_buf_printf(b, " %-14s", cell);
		}
		end_row(b);
	}
	render_pairs(r, b);
}
