/* Read-only facts about the target root: os-release, loaded modules, PCI
 * devices, boot id, running kernel, modprobe configuration (libkmod).
 * Everything is read under the root; nothing here prints or decides. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuprov/root.h"

struct gp_os_release {
	char *id; /* "ubuntu" */
	char *id_like; /* "debian", may be NULL */
	char *version_id; /* "22.04" */
	char *pretty_name; /* "Ubuntu 22.04.4 LTS" */
	/* The file read ("/etc/os-release"); after a failure other than
	 * -ENOENT, the one that could not be read. Static: never freed. */
	const char *path;
};
/* Parses etc/os-release, falling back to usr/lib/os-release only when the
 * former is absent. Quoting as in os-release(5). -ENOENT when neither
 * exists, -EINVAL when there is no (or an empty) ID; any other failure
 * (a FIFO, over GP_ROOT_SMALL_MAX, -EAGAIN) means it could not be read, not
 * that it is absent: gp_os_release_error says which. On failure *osr holds
 * nothing to free. */
int gp_os_release_read(const struct gp_root *r, struct gp_os_release *osr);
int gp_os_release_parse(const char *text, struct gp_os_release *osr);
/* For a gp_os_release_read failure other than -ENOENT and -EINVAL: the
 * operator's message naming the file, what is wrong and what next. */
char *gp_os_release_error(const struct gp_root *r, const struct gp_os_release *osr,
                          int rc);
void gp_os_release_free(struct gp_os_release *osr);

/* Tri-state for facts that may be unavailable (no /proc/modules in a
 * container or non-modular kernel): unknown is never "no". */
enum gp_tristate { GP_NO = 0, GP_YES = 1, GP_UNKNOWN = -1 };
const char *gp_tristate_name(enum gp_tristate t);

/* Loaded modules from <root>/proc/modules ("name size refcnt deps state addr").
 * A missing file is not an error: 0 with available=false and no names. */
struct gp_module_list {
	bool available; /* false when proc/modules is missing */
	char **names; /* NULL-terminated */
};
int gp_modules_read(const struct gp_root *r, struct gp_module_list *ml);
int gp_modules_parse(const char *text, struct gp_module_list *ml);
void gp_module_list_free(struct gp_module_list *ml);
/* Is module loaded? YES when proc/modules lists it or /sys/module/<name>
 * exists (also true of built-in code with parameters), NO when proc/modules
 * is readable and neither holds it, UNKNOWN otherwise. Names compare with '-'
 * and '_' equal, as the kernel does. */
enum gp_tristate gp_module_loaded(const struct gp_root *r, const char *name);

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

/* <root>/proc/sys/kernel/random/boot_id, trimmed; NULL when unavailable. */
char *gp_boot_id(const struct gp_root *r);
/* <root>/proc/sys/kernel/osrelease (uname -r of the running kernel); NULL when unavailable. */
char *gp_running_kernel(const struct gp_root *r);

/* What the root's modprobe configuration says about a module, read with
 * libkmod from <root>/etc/modprobe.d, <root>/run/modprobe.d,
 * <root>/usr/local/lib/modprobe.d and <root>/lib/modprobe.d, each file
 * resolved inside the root (an absolute symlink never reaches the host) and
 * copied for libkmod to read (modprobe's
 * precedence: a file hides one of the same name in a later directory; only
 * *.conf and *.alias count). The kernel command line (modprobe.blacklist=,
 * <module>.<param>=) counts only when the root is the host: libkmod reads the
 * host's /proc/cmdline, which says nothing about another root. Never prints. */
struct gp_modprobe_facts {
	bool blacklisted;
	char *options; /* all "options <module> ..." values joined by ' ', or NULL */
	/* On failure, when a file could not be read: what and where ("/etc/
	 * modprobe.d/x.conf in root /r is a FIFO, not a regular file"). */
	char *error;
};
/* The directories libkmod reads *.conf files from, in precedence order (no
 * /usr/lib/modprobe.d in libkmod 30). */
#define GP_MODPROBE_DIRS 4
extern const char *const gp_modprobe_dirs[GP_MODPROBE_DIRS];
int gp_modprobe_query(const struct gp_root *r, const char *module,
                      struct gp_modprobe_facts *f);
/* Keeps libkmod quiet: its kmod_new() reports bad modprobe.d lines on stderr
 * before gp_modprobe_query can set a log function, unless KMOD_LOG=0 is in
 * the environment (set here, unless the user set KMOD_LOG to debug libkmod).
 * It changes the environment, so a program calls it once at its start,
 * before any thread (gpuprov's main()); gp_modprobe_query never does. */
void gp_modprobe_env_init(void);
void gp_modprobe_facts_free(struct gp_modprobe_facts *f);
/* Is "key=value" among the options (last one for key wins, like the kernel;
 * key names compare with '-' and '_' equal; double quotes around the value
 * are dropped)? */
bool gp_modprobe_option_is(const struct gp_modprobe_facts *f, const char *key,
                           const char *value);

/* Secure Boot as the firmware reports it: the SecureBoot EFI variable under
 * <root>/sys/firmware/efi/efivars (a 4-byte attribute header, then the
 * value; bit 0 of the last byte), or the legacy sysfs efivars' data file.
 * NOT_UEFI when the root has no sys/firmware/efi (legacy BIOS boot);
 * UNKNOWN when it has one but no readable, well-formed variable. */
enum gp_secure_boot { GP_SB_UNKNOWN, GP_SB_NOT_UEFI, GP_SB_OFF, GP_SB_ON };
enum gp_secure_boot gp_secure_boot_state(const struct gp_root *r);
/* "on", "off", "not UEFI", "unknown". */
const char *gp_secure_boot_name(enum gp_secure_boot s);

/* The X.509 certificates of an EFI signature database (a sequence of
 * EFI_SIGNATURE_LISTs, as in MokListRT), as the sha256 of each DER.
 * Lists of other signature types (hashes) are skipped. -EINVAL when any
 * length does not fit; on failure *out holds nothing to free. */
struct gp_efi_certs {
	char **sha256; /* lowercase hex, NULL-terminated */
};
int gp_efi_siglist_parse(const void *data, size_t len, struct gp_efi_certs *out);
void gp_efi_certs_free(struct gp_efi_certs *certs);

/* A Machine Owner Key list of the running shim, read like the kernel does:
 * the MOK configuration table (<root>/sys/firmware/efi/mok-variables/NAME),
 * else the efivarfs variable NAME-605dab50-... (attribute header first),
 * else the legacy sysfs efivars' data file. name is "MokListRT" (enrolled)
 * or "MokListXRT" (forbidden). -ENOENT when the root has none of them,
 * -EINVAL when the one found is malformed. */
int gp_mok_list_read(const struct gp_root *r, const char *name, struct gp_efi_certs *out);

/* Is the certificate at cert_path (in the root; DER, or PEM with a
 * CERTIFICATE block) enrolled? REVOKED (in MokListXRT) wins over ENROLLED;
 * UNKNOWN when MokListRT cannot be read (no efivars in the root, or a
 * malformed variable): unknown is never "not enrolled". 0, or -ENOENT /
 * -errno when the file cannot be read, -EINVAL when it holds no
 * certificate. */
enum gp_mok_state {
	GP_MOK_UNKNOWN,
	GP_MOK_ENROLLED,
	GP_MOK_NOT_ENROLLED,
	GP_MOK_REVOKED
};
int gp_mok_cert_state(const struct gp_root *r, const char *cert_path,
                      enum gp_mok_state *state);

/* The loaded NVIDIA kernel module from <root>/proc/driver/nvidia/version:
 * its version ("535.104.05", free it) and whether it is the open flavor
 * (open may be NULL). -ENOENT when no NVIDIA module is loaded (or /proc is
 * not there), -EINVAL when the file does not look like NVRM's. */
int gp_nvidia_module_read(const struct gp_root *r, char **version, bool *open);
int gp_nvidia_module_parse(const char *text, char **version, bool *open);
