/* Secure Boot state from the SecureBoot EFI variable of fixture roots:
 * efivarfs (attribute header + value), the legacy sysfs data file, legacy
 * BIOS (no sys/firmware/efi) and everything in between that is unknown. */
#include "testutil.h"

#include "gpuprov/facts.h"
#include "gpuprov/util.h"

#define EFI "sys/firmware/efi"
#define GUID "8be4df61-93ca-11d2-aa0d-00e098032b8c"
#define EFIVAR EFI "/efivars/SecureBoot-" GUID
#define SYSFSVAR EFI "/vars/SecureBoot-" GUID "/data"

#define FX_TEST(f) cmocka_unit_test_setup_teardown(f, tu_root_setup, tu_root_teardown)

/* The state of the root as written so far (opened afresh each time). */
static enum gp_secure_boot fx_state(struct tu_root_fixture *fx)
{
	if (fx->r.dir)
		gp_root_close(&fx->r);
	fx->r = (struct gp_root){ 0 };
	assert_int_equal(gp_root_open(&fx->r, fx->dir), 0);
	return gp_secure_boot_state(&fx->r);
}

/* Writes len bytes (NULs included) to dir/rel, creating the parents. */
static void fx_write_bytes(struct tu_root_fixture *fx, const char *rel, const void *data,
                           size_t len)
{
	tu_write(fx->dir, rel, "");
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", fx->dir, rel);
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void test_no_efi_is_not_uefi(void **state)
{
	struct tu_root_fixture *fx = *state;
	assert_int_equal(fx_state(fx), GP_SB_NOT_UEFI);
	/* Other firmware entries do not make it UEFI. */
	tu_mkdir(fx->dir, "sys/firmware/acpi");
	assert_int_equal(fx_state(fx), GP_SB_NOT_UEFI);
}

static void test_efivarfs_on_off(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* Attributes NV|BS|RT (0x06), then the value. */
	fx_write_bytes(fx, EFIVAR, "\x06\x00\x00\x00\x01", 5);
	assert_int_equal(fx_state(fx), GP_SB_ON);
	fx_write_bytes(fx, EFIVAR, "\x06\x00\x00\x00\x00", 5);
	assert_int_equal(fx_state(fx), GP_SB_OFF);
	/* Only bit 0 of the last byte counts. */
	fx_write_bytes(fx, EFIVAR, "\x07\x00\x00\x00\x03", 5);
	assert_int_equal(fx_state(fx), GP_SB_ON);
	fx_write_bytes(fx, EFIVAR, "\x07\x00\x00\x00\xfe", 5);
	assert_int_equal(fx_state(fx), GP_SB_OFF);
}

static void test_efi_without_variable_is_unknown(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_mkdir(fx->dir, EFI);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
	/* efivarfs mounted, but no SecureBoot variable (firmware without it). */
	tu_mkdir(fx->dir, EFI "/efivars");
	fx_write_bytes(fx, EFI "/efivars/BootOrder-8be4df61-93ca-11d2-aa0d-00e098032b8c",
	               "\x07\x00\x00\x00\x01\x00", 6);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
}

static void test_short_or_unreadable_variable_is_unknown(void **state)
{
	struct tu_root_fixture *fx = *state;
	fx_write_bytes(fx, EFIVAR, "", 0);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
	/* The header alone: no value byte. */
	fx_write_bytes(fx, EFIVAR, "\x06\x00\x00\x01", 4);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
	/* Something that cannot be read as a file. */
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", fx->dir, EFIVAR);
	assert_int_equal(unlink(path), 0);
	tu_mkdir(fx->dir, EFIVAR);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
}

static void test_efi_not_a_directory_is_unknown(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, EFI, "not a directory\n");
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
}

static void test_legacy_sysfs_vars(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* No efivarfs: the old sysfs interface holds the data without a header. */
	fx_write_bytes(fx, SYSFSVAR, "\x01", 1);
	assert_int_equal(fx_state(fx), GP_SB_ON);
	fx_write_bytes(fx, SYSFSVAR, "\x00", 1);
	assert_int_equal(fx_state(fx), GP_SB_OFF);
	fx_write_bytes(fx, SYSFSVAR, "", 0);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
	/* efivarfs wins when both are there. */
	fx_write_bytes(fx, SYSFSVAR, "\x00", 1);
	fx_write_bytes(fx, EFIVAR, "\x06\x00\x00\x00\x01", 5);
	assert_int_equal(fx_state(fx), GP_SB_ON);
	/* ... even when its variable is short: a broken efivarfs entry is not
	 * answered from the other interface. */
	fx_write_bytes(fx, EFIVAR, "\x06\x00", 2);
	assert_int_equal(fx_state(fx), GP_SB_UNKNOWN);
}

static void test_symlink_out_of_root_stays_in_root(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* An absolute link resolves inside the root, never to the host's
	 * firmware directory. */
	tu_mkdir(fx->dir, "sys/firmware");
	fx_write_bytes(fx, "elsewhere/efivars/SecureBoot-" GUID, "\x06\x00\x00\x00\x01",
	               5);
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/" EFI, fx->dir);
	assert_int_equal(symlink("/elsewhere", path), 0);
	assert_int_equal(fx_state(fx), GP_SB_ON);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/no/such/dir", path), 0);
	assert_int_equal(fx_state(fx), GP_SB_NOT_UEFI);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(gp_secure_boot_name(GP_SB_ON), "on");
	assert_string_equal(gp_secure_boot_name(GP_SB_OFF), "off");
	assert_string_equal(gp_secure_boot_name(GP_SB_NOT_UEFI), "not UEFI");
	assert_string_equal(gp_secure_boot_name(GP_SB_UNKNOWN), "unknown");
	assert_string_equal(gp_secure_boot_name((enum gp_secure_boot)42), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		FX_TEST(test_no_efi_is_not_uefi),
		FX_TEST(test_efivarfs_on_off),
		FX_TEST(test_efi_without_variable_is_unknown),
		FX_TEST(test_short_or_unreadable_variable_is_unknown),
		FX_TEST(test_efi_not_a_directory_is_unknown),
		FX_TEST(test_legacy_sysfs_vars),
		FX_TEST(test_symlink_out_of_root_stays_in_root),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
