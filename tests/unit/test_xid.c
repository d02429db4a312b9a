/* Xid events from kernel log text: /dev/kmsg records and dmesg lines, the
 * last ones kept, malformed ones skipped, the critical codes. */
#include "testutil.h"

#include "gpuprov/xid.h"

static void test_scan(void **state)
{
	(void)state;
	const char *log =
	    "6,1000,5000,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01\n"
	    "4,1001,6000,-;NVRM: Xid (PCI:0000:17:00): 79, pid='<unknown>', "
	    "name=<unknown>, "
	    "GPU has fallen off the bus.\n"
	    "[  123.456789] NVRM: Xid (PCI:0000:18:00): 13, pid=4242, name=python, "
	    "Graphics "
	    "Exception\n"
	    "NVRM: Xid (PCI:0000:19:00) 48, no colon\n"
	    "NVRM: Xid (PCI:0000:19:00): x, no number\n"
	    "NVRM: Xid (PCI:0000:19:00): 1234567, too long\n"
	    "NVRM: Xid (PCI:0000:1a:00): 94";
	struct gp_xid_event ev[4];
	assert_int_equal(gp_xid_scan(log, strlen(log), ev, 4), 3);
	assert_string_equal(ev[0].pci, "0000:17:00");
	assert_int_equal(ev[0].xid, 79);
	assert_string_equal(ev[1].pci, "0000:18:00");
	assert_int_equal(ev[1].xid, 13);
	assert_string_equal(ev[2].pci, "0000:1a:00");
	assert_int_equal(ev[2].xid, 94);
	/* Room for two: the last two, oldest first. */
	assert_int_equal(gp_xid_scan(log, strlen(log), ev, 2), 3);
	assert_int_equal(ev[0].xid, 13);
	assert_int_equal(ev[1].xid, 94);
	assert_int_equal(gp_xid_scan(log, strlen(log), NULL, 0), 3);
	/* Cut inside an event. */
	assert_int_equal(gp_xid_scan(log, strstr(log, "79") - log, ev, 4), 0);
	assert_int_equal(gp_xid_scan("", 0, ev, 4), 0);
}

static void test_critical(void **state)
{
	(void)state;
	assert_true(gp_xid_is_critical(79));
	assert_true(gp_xid_is_critical(48));
	assert_true(gp_xid_is_critical(94));
	assert_true(gp_xid_is_critical(119));
	assert_false(gp_xid_is_critical(13)); /* an application's fault */
	assert_false(gp_xid_is_critical(31));
	assert_false(gp_xid_is_critical(0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scan),
		cmocka_unit_test(test_critical),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
