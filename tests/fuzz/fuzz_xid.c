/* libFuzzer target: Xid events in kernel log text (src/pure/xid.c). Every
 * event kept has a PCI address of hex digits, ':' and '.', and an Xid of at
 * most six digits; counting without keeping gives the same count. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/xid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_xid_event ev[3];
	size_t n = gp_xid_scan((const char *)data, size, ev, 3);
	for (size_t i = 0; i < n && i < 3; i++)
		if (!ev[i].pci[0] ||
		    strspn(ev[i].pci, "0123456789abcdefABCDEF:.") != strlen(ev[i].pci) ||
		    ev[i].xid < 0 || ev[i].xid > 999999)
			abort();
	if (gp_xid_scan((const char *)data, size, NULL, 0) != n)
		abort();
	return 0;
}
