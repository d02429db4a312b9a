/* NVIDIA Xid events in kernel log text (the records of /dev/kmsg, or
 * dmesg's lines): "NVRM: Xid (PCI:0000:17:00): 79, pid=..., GPU has fallen
 * off the bus." Pure: text in, events out (src/pure/xid.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define GP_XID_PCI_MAX 32

struct gp_xid_event {
	char pci[GP_XID_PCI_MAX]; /* "0000:17:00", as the log names the GPU */
	int xid;
};

/* Scans text (len bytes, NUL not needed) for Xid events, in order; keeps
 * the last max of them in ev (oldest first) and returns how many there
 * were in all. Linear; a malformed line is skipped. */
size_t gp_xid_scan(const char *text, size_t len, struct gp_xid_event *ev, size_t max);
/* The Xids after which the node should be drained (docs/reference/gpu-health.md). */
bool gp_xid_is_critical(int xid);
