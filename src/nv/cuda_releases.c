/* CUDA facts: the toolkit -> minimum driver table (NVIDIA's release
 * notes, Linux x86_64; sources in docs/reference/nvidia-tables.md), the minor-version
 * compatibility floors, which compute capabilities a CUDA release can target,
 * and the CUDA version behind a PyTorch wheel tag. */
#include <stdio.h>
#include <string.h>

#include "gpuprov/cuda_releases.h"
#include "gpuprov/util.h"
#include "gpuprov/version.h"

#define GA (-1)

/* One row per release NVIDIA's table lists (docs/reference/nvidia.md
 * section 1). update is the "U<n>" of the table, GA for the X.Y release
 * itself (rows the table leaves unlabelled, 13.1, 11.5 and 11.3, are taken
 * as GA). An update n is CUDA X.Y.n: NVIDIA numbers its 12.x/13.x updates
 * that way, and the runfile names (cuda_12.2.2_535.104.05, 12.4.1_550.54.15,
 * 12.6.3_560.35.05, 12.8.1_570.124.06, 12.9.1_575.57.08, 13.0.2_580.95.05,
 * 12.1.1_530.30.02) agree with the table row for row. */
struct cuda_row {
	unsigned major, minor;
	int update;
	const char *driver;
};

/* The rows up to 13.0.3 are the bundled driver only
 * (docs/reference/stack-2026.md section 2): NVIDIA's release-note table was
 * not read for them; they are the drivers the runfiles and redist manifests
 * carry, which NVIDIA's pattern makes the minimum (unconfirmed from 13.2
 * on). 13.4.0 was a preview, so 13.4 GA is 13.4.1, whose runfile names no
 * driver: 615.71.09 is the one third-party copies pair with it
 * (unconfirmed). 13.5's is the R620 driver whose cuda_compat package says
 * "cuda13.5" (unconfirmed as the minimum). The rows from 13.1 GA down are
 * NVIDIA's table (docs/reference/nvidia.md section 1). Every 13.x also runs
 * on R580 through minor-version compatibility
 * (gp_cuda_minor_compat_driver). */
static const struct cuda_row cuda_rows[] = {
	{ 13, 5, GA, "620.70.06" }, { 13, 4, GA, "615.71.09" },
	{ 13, 3, GA, "610.43.02" }, { 13, 2, 2, "595.71.05" },
	{ 13, 2, 1, "595.58.03" },  { 13, 2, GA, "595.45.04" },
	{ 13, 1, 2, "590.48.01" },  { 13, 1, 1, "590.48.01" },
	{ 13, 0, 3, "580.126.20" }, { 13, 1, GA, "590.44.01" },
	{ 13, 0, 2, "580.95.05" },  { 13, 0, 1, "580.82.07" },
	{ 13, 0, GA, "580.65.06" }, { 12, 9, 1, "575.57.08" },
	{ 12, 9, GA, "575.51.03" }, { 12, 8, 1, "570.124.06" },
	{ 12, 8, GA, "570.26" },    { 12, 6, 3, "560.35.05" },
	{ 12, 6, 2, "560.35.03" },  { 12, 6, 1, "560.35.03" },
	{ 12, 6, GA, "560.28.03" }, { 12, 5, 1, "555.42.06" },
	{ 12, 5, GA, "555.42.02" }, { 12, 4, 1, "550.54.15" },
	{ 12, 4, GA, "550.54.14" }, { 12, 3, 1, "545.23.08" },
	{ 12, 3, GA, "545.23.06" }, { 12, 2, 2, "535.104.05" },
	{ 12, 2, 1, "535.86.09" },  { 12, 2, GA, "535.54.03" },
	{ 12, 1, 1, "530.30.02" },  { 12, 1, GA, "530.30.02" },
	{ 12, 0, 1, "525.85.12" },  { 12, 0, GA, "525.60.13" },
	{ 11, 8, GA, "520.61.05" }, { 11, 7, 1, "515.48.07" },
	{ 11, 7, GA, "515.43.04" }, { 11, 6, GA, "510.39.01" },
	{ 11, 5, GA, "495.29.05" }, { 11, 4, GA, "470.42.01" },
	{ 11, 3, GA, "465.19.01" }, { 11, 2, GA, "460.27.03" },
	{ 11, 1, GA, "455.23" },
};

/* Parses "X", "X.Y" or "X.Y.Z" (digits only, at most max_parts parts) into
 * parts[]; returns the number of parts, 0 when s is not such a version. Parts
 * are capped at 9999, far above any CUDA number, so they cannot overflow. */
static int parse_parts(const char *s, unsigned parts[], int max_parts)
{
	if (!gp_version_is_valid(s))
		return 0;
	int n = 0;
	for (;;) {
		if (n == max_parts)
			return 0;
		unsigned v = 0;
		for (; *s >= '0' && *s <= '9'; s++) {
			v = v * 10 + (unsigned)(*s - '0');
			if (v > 9999)
				return 0;
		}
		parts[n++] = v;
		if (*s == '\0')
			return n;
		s++; /* the dot */
	}
}

const char *gp_cuda_min_driver(const char *cuda_version)
{
	unsigned p[3];
	int n = parse_parts(cuda_version, p, 3);
	if (n < 2)
		return NULL;
	/* The highest listed release at or below X.Y.Z: an update the table does
	 * not list needs at least what the update before it needed (12.3.2
	 * needs 12.3 U1's driver, not 12.3 GA's). */
	unsigned want = n == 3 ? p[2] : 0;
	const char *best = NULL;
	int best_update = -2;
	for (size_t i = 0; i < ARRAY_SIZE(cuda_rows); i++) {
		const struct cuda_row *r = &cuda_rows[i];
		if (r->major != p[0] || r->minor != p[1])
			continue;
		int u = r->update == GA ? 0 : r->update;
		if ((unsigned)u <= want && u > best_update) {
			best_update = u;
			best = r->driver;
		}
	}
	return best;
}

/* Minor-version compatibility lets a toolkit of major X run on any driver of
 * the major's floor. Summaries of NVIDIA's guide give 12.x as ">= 525" and
 * 11.x as ">= 450 (11.1-11.8 from 450.80.02)"; the floors here are the full
 * versions NVIDIA states (12.0 GA's 525.60.13, and 450.80.02;
 * docs/reference/nvidia.md section 1), which is the stricter reading, also
 * for 11.0. The summaries' "< 580" for 12.x only says that from 580 on the
 * driver is simply newer, which runs older toolkits anyway. */
const char *gp_cuda_minor_compat_driver(const char *cuda_version)
{
	unsigned p[3];
	if (parse_parts(cuda_version, p, 3) == 0)
		return NULL;
	switch (p[0]) {
	case 11:
		return "450.80.02";
	case 12:
		return "525.60.13";
	case 13:
		return "580";
	default:
		return NULL;
	}
}

/* A CUDA release targets an arch from the arch's first CUDA on; CUDA 13
 * dropped everything below CC 7.5 (Volta and older). */
bool gp_cuda_supports_cc(const char *cuda_version, const struct gp_gpu_info *g)
{
	unsigned p[3];
	if (!g || parse_parts(cuda_version, p, 3) == 0)
		return false;
	if (gp_version_compare(cuda_version, g->first_cuda) < 0)
		return false;
	if (p[0] >= 13 && (g->cc_major < 7 || (g->cc_major == 7 && g->cc_minor < 5)))
		return false;
	return true;
}

/* PyTorch names its wheel indexes cu<major><minor> with a one-digit minor
 * ("cu118", "cu121", "cu130"), so the last digit is the minor. */
const char *gp_torch_tag_cuda(const char *tag_or_url, bool *cpu, char buf[16])
{
	if (cpu)
		*cpu = false;
	if (!tag_or_url)
		return NULL;

	/* The tag is the last path component of an index URL, which may end in
	 * a slash ("https://download.pytorch.org/whl/cu118/"). */
	size_t len = strlen(tag_or_url);
	while (len > 0 && tag_or_url[len - 1] == '/')
		len--;
	const char *tag = tag_or_url;
	for (size_t i = 0; i < len; i++)
		if (tag_or_url[i] == '/')
			tag = tag_or_url + i + 1;
	size_t tlen = len - (size_t)(tag - tag_or_url);

	if (tlen == 3 && memcmp(tag, "cpu", 3) == 0) {
		if (cpu)
			*cpu = true;
		return NULL;
	}
	if (tlen < 4 || tlen > 5 || memcmp(tag, "cu", 2) != 0)
		return NULL;
	const char *d = tag + 2;
	size_t nd = tlen - 2;
	if (d[0] == '0' || strspn(d, "0123456789") < nd)
		return NULL;
	snprintf(buf, 16, "%.*s.%c", (int)(nd - 1), d, d[nd - 1]);
	return buf;
}

/* PyTorch's CUDA wheel indexes (docs/reference/nvidia.md section 5,
 * docs/reference/stack-2026.md section 5), newest first. */
const char *const gp_torch_cuda_tags[] = {
	"cu132", "cu130", "cu129", "cu128", "cu126", "cu124", "cu121", "cu118", NULL,
};

/* A wheel carries the kernels its CUDA can build (cu126 stops at sm_90,
 * cu13x starts at sm_75), so the wheel's CUDA decides, as for a toolkit. */
bool gp_torch_tag_targets(const char *tag, const struct gp_gpu_info *g)
{
	char buf[16];
	bool cpu;
	const char *cuda = gp_torch_tag_cuda(tag, &cpu, buf);
	return cuda && gp_cuda_supports_cc(cuda, g);
}
