/* PCI devices of the target root and their drivers (pci.c):
 * <root>/sys/bus/pci/devices. Read under the root; nothing here prints. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/root.h"

/* PCI devices from <root>/sys/bus/pci/devices. */
struct gp_pci_device {
	char *address; /* "0000:17:00.0" */
	unsigned vendor; /* 0x10de */
	unsigned device; /* 0x20b0 */
	unsigned class_code; /* 0x030200 (24 bits) */
	char *driver; /* basename of the driver link, NULL when unbound */
};
struct gp_pci_list {
	struct gp_pci_device *devs;
	size_t n;
	/* Devices left out because an id or the driver link could not be
	 * read, one message each naming the file ("<root>/sys/bus/pci/devices/
	 * 0000:00:02.0/vendor is not a hex id"), for the caller to warn
	 * about. NULL-terminated. */
	char **skipped;
};
/* Sorted by address. -ENOENT when the root has no such directory (unknown,
 * not "no devices"); entries without ids are left out silently, entries
 * with an unreadable or unparsable one are left out and listed in skipped.
 * -EAGAIN when a lookup could not be made. On failure *list is empty. */
int gp_pci_scan(const struct gp_root *r, struct gp_pci_list *list);
/* One sysfs id value ("0x10de\n": hex, at most 8 digits, "0x" optional,
 * blanks around it); -EINVAL for anything else. */
int gp_pci_hex_parse(const char *text, unsigned *out);
void gp_pci_list_free(struct gp_pci_list *list);
/* NVIDIA display/3D controller (vendor 0x10de, class 0x0300 or 0x0302). */
bool gp_pci_is_nvidia_gpu(const struct gp_pci_device *d);
