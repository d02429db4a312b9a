/* PCI devices from <root>/sys/bus/pci/devices: ids, class and the bound
 * driver. On a live system the entries are symlinks into /sys/devices, in
 * fixtures plain directories; both resolve inside the root. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/pci.h"
#include "gpuprov/util.h"

#define PCI_DEVICES "/sys/bus/pci/devices"

int gp_pci_hex_parse(const char *text, unsigned *out)
{
	const char *s = text + strspn(text, " \t");
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	/* strtoul alone would accept a sign and "0x" twice. */
	size_t n = strspn(s, "0123456789abcdefABCDEF");
	if (n == 0 || n > 8 || s[n + strspn(s + n, " \t\r\n")] != '\0')
		return -EINVAL;
	*out = (unsigned)strtoul(s, NULL, 16);
	return 0;
}

/* Reads a sysfs attribute holding one hex number ("0x10de\n"). */
static int read_hex(const struct gp_root *r, const char *dev, const char *attr,
                    unsigned *out)
{
	_cleanup_free_ char *path = gp_xasprintf(PCI_DEVICES "/%s/%s", dev, attr);
	_cleanup_free_ char *text = NULL;
	int rc = gp_root_read_max(r, path, GP_ROOT_SMALL_MAX, &text, NULL);
	if (rc < 0)
		return rc;
	return gp_pci_hex_parse(text, out);
}

/* The driver link points at .../bus/pci/drivers/<name>; absent when unbound. */
static int read_driver(const struct gp_root *r, const char *dev, char **driver)
{
	_cleanup_free_ char *path = gp_xasprintf(PCI_DEVICES "/%s/driver", dev);
	_cleanup_free_ char *target = NULL;

	*driver = NULL;
	int rc = gp_root_readlink(r, path, &target);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	const char *base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (*base)
		*driver = gp_xstrdup(base);
	return 0;
}

/* Fills d; on failure leaves nothing allocated in it and *attr names the
 * attribute that failed. */
static int read_device(const struct gp_root *r, const char *name, struct gp_pci_device *d,
                       const char **attr)
{
	int rc;

	*d = (struct gp_pci_device){ 0 };
	if ((rc = read_hex(r, name, *attr = "vendor", &d->vendor)) < 0 ||
	    (rc = read_hex(r, name, *attr = "device", &d->device)) < 0 ||
	    (rc = read_hex(r, name, *attr = "class", &d->class_code)) < 0)
		return rc;
	*attr = "driver";
	d->class_code &= 0xffffff;
	if ((rc = read_driver(r, name, &d->driver)) < 0)
		return rc;
	d->address = gp_xstrdup(name);
	return 0;
}

static int cmp_address(const void *a, const void *b)
{
	const struct gp_pci_device *x = a, *y = b;
	return strcmp(x->address, y->address);
}

int gp_pci_scan(const struct gp_root *r, struct gp_pci_list *list)
{
	char **names = NULL;

	*list = (struct gp_pci_list){ 0 };
	int rc = gp_root_list_dir(r, PCI_DEVICES, &names);
	if (rc < 0)
		return rc;

	size_t n = gp_strv_len(names);
	list->devs = gp_xcalloc(n ? n : 1, sizeof(struct gp_pci_device));
	list->skipped = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		if (names[i][0] == '.')
			continue;
		const char *attr;
		rc = read_device(r, names[i], &list->devs[list->n], &attr);
		if (rc == -ENOENT || rc == -ENOTDIR)
			continue; /* hot-unplugged while we looked, or not a device */
		if (rc == -EAGAIN) {
			/* Could not look: not a device we may leave out. */
			gp_pci_list_free(list);
			gp_strv_free(names);
			return rc;
		}
		if (rc < 0) {
			/* One device with a garbage id must not hide the GPUs. */
			_cleanup_free_ char *path = gp_xasprintf(PCI_DEVICES "/%s/%s",
			                                         names[i], attr);
			_cleanup_free_ char *where = gp_root_host_path(r, path);
			_cleanup_free_ char *why =
			    rc == -EINVAL
			        ? gp_xasprintf("%s is not a hex id", where)
			        : gp_root_read_error(r, path, GP_ROOT_SMALL_MAX, rc);
			gp_strv_push(&list->skipped, why);
			continue;
		}
		list->n++;
	}
	gp_strv_free(names);

	/* Domain:bus:dev.fn is fixed-width lowercase hex, so text order is
	 * address order; sort here rather than rely on the listing. */
	qsort(list->devs, list->n, sizeof(struct gp_pci_device), cmp_address);
	return 0;
}

void gp_pci_list_free(struct gp_pci_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->n; i++) {
		free(list->devs[i].address);
		free(list->devs[i].driver);
	}
	free(list->devs);
	gp_strv_free(list->skipped);
	*list = (struct gp_pci_list){ 0 };
}

bool gp_pci_is_nvidia_gpu(const struct gp_pci_device *d)
{
	if (!d || d->vendor != 0x10de)
		return false;
	unsigned cls = d->class_code >> 8;
	return cls == 0x0300 /* VGA */ || cls == 0x0302 /* 3D controller */;
}
