/* Secure Boot state from the root's EFI variables. With Secure Boot on, the
 * kernel loads only signed modules: an unsigned nvidia.ko fails with "Key
 * was rejected by service", so the driver stage needs to know. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuprov/facts.h"
#include "gpuprov/util.h"

#define EFI_DIR "/sys/firmware/efi"
#define SECURE_BOOT_GUID "8be4df61-93ca-11d2-aa0d-00e098032b8c"
/* efivarfs: 4 bytes of attributes, then the variable's data (one byte). */
#define EFIVARFS_VAR EFI_DIR "/efivars/SecureBoot-" SECURE_BOOT_GUID
/* The legacy sysfs interface (CONFIG_EFI_VARS): the data alone. */
#define SYSFS_VAR EFI_DIR "/vars/SecureBoot-" SECURE_BOOT_GUID "/data"

/* The variable's value byte from path, skipping header bytes; -errno, or
 * -EINVAL when the file is too short to hold a value. */
static int read_value(const struct gp_root *r, const char *path, size_t header)
{
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	int rc = gp_root_read(r, path, &data, &len);
	if (rc < 0)
		return rc;
	if (len < header + 1)
		return -EINVAL;
	return (unsigned char)data[len - 1];
}

enum gp_secure_boot gp_secure_boot_state(const struct gp_root *r)
{
	struct stat st;
	int rc = gp_root_stat(r, EFI_DIR, &st);
	if (rc == -ENOENT)
		return GP_SB_NOT_UEFI;
	if (rc < 0 || !S_ISDIR(st.st_mode))
		return GP_SB_UNKNOWN;
	int v = read_value(r, EFIVARFS_VAR, 4);
	if (v == -ENOENT)
		v = read_value(r, SYSFS_VAR, 0);
	if (v < 0)
		return GP_SB_UNKNOWN;
	return (v & 1) ? GP_SB_ON : GP_SB_OFF;
}

const char *gp_secure_boot_name(enum gp_secure_boot s)
{
	switch (s) {
	case GP_SB_ON:
		return "on";
	case GP_SB_OFF:
		return "off";
	case GP_SB_NOT_UEFI:
		return "not UEFI";
	case GP_SB_UNKNOWN:
		break;
	}
	return "unknown";
}
