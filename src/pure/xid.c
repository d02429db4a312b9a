/* Xid events in kernel log text (see xid.h). The critical codes follow
 * NVIDIA's Xid catalog and its actions (https://docs.nvidia.com/deploy/xid-errors/),
 * summarised in docs/reference/gpu-health.md. */
#include <string.h>

#include "gpuprov/util.h"
#include "gpuprov/xid.h"

static const char marker[] = "NVRM: Xid (PCI:";

bool gp_xid_is_critical(int xid)
{
	/* 46 GPU stopped processing, 48 double-bit ECC, 63/64 row remap
	 * event/failure, 74 NVLink, 79 fallen off the bus, 94/95 contained and
	 * uncontained ECC, 119/120 GSP. */
	static const int critical[] = { 46, 48, 63, 64, 74, 79, 94, 95, 119, 120 };
	for (size_t i = 0; i < ARRAY_SIZE(critical); i++)
		if (critical[i] == xid)
			return true;
	return false;
}

/* One event at p (just after the marker) up to end; false when malformed. */
static bool parse_event(const char *p, const char *end, struct gp_xid_event *e)
{
	size_t n = 0;
	/* A PCI address: hex digits, ':' and '.'. */
	while (p < end && n < GP_XID_PCI_MAX - 1 &&
	       strchr("0123456789abcdefABCDEF:.", *p) && *p)
		e->pci[n++] = *p++;
	e->pci[n] = '\0';
	if (!n || p + 2 >= end || p[0] != ')' || p[1] != ':' || p[2] != ' ')
		return false;
	p += 3;
	int xid = 0, digits = 0;
	while (p < end && *p >= '0' && *p <= '9' && digits < 6) {
		xid = xid * 10 + (*p++ - '0');
		digits++;
	}
	if (!digits || (p < end && *p >= '0' && *p <= '9'))
		return false;
	e->xid = xid;
	return true;
}

size_t gp_xid_scan(const char *text, size_t len, struct gp_xid_event *ev, size_t max)
{
	size_t total = 0;
	const char *end = text + len, *p = text;
	while (p < end) {
		const char *hit = memmem(p, (size_t)(end - p), marker, sizeof marker - 1);
		if (!hit)
			break;
		p = hit + sizeof marker - 1;
		struct gp_xid_event e;
		if (!parse_event(p, end, &e))
			continue;
		if (max) {
			if (total >= max)
				memmove(ev, ev + 1, (max - 1) * sizeof *ev);
			ev[total < max ? total : max - 1] = e;
		}
		total++;
	}
	return total;
}
