/* Fact readers against fixture roots built in temp directories: os-release,
 * proc/modules and /sys/module, PCI, boot id and kernel release, and the
 * modprobe configuration as libkmod reads it. */
#include "testutil.h"

#include "gpuprov/kernelinfo.h"
#include "gpuprov/modprobe.h"
#include "gpuprov/modules.h"
#include "gpuprov/nvproc.h"
#include "gpuprov/osrelease.h"
#include "gpuprov/pci.h"
#include "gpuprov/util.h"

/* Opens the root once the tree is written (the root is realpath'd). */
static const struct gp_root *fx_root(struct tu_root_fixture *fx)
{
	if (!fx->r.dir)
		assert_int_equal(gp_root_open(&fx->r, fx->dir), 0);
	return &fx->r;
}

/* Fixture paths are short; small buffers also keep gcc's truncation
 * warnings quiet where testutil.h's helpers are inlined. */
#define REL_MAX 256

/* dir/rel -> target, creating the parent directories of rel. */
static void fx_symlink(struct tu_root_fixture *fx, const char *target, const char *rel)
{
	char parent[REL_MAX], path[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", rel);
	char *slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		tu_mkdir(fx->dir, parent);
	}
	snprintf(path, sizeof path, "%s/%s", fx->dir, rel);
	assert_int_equal(symlink(target, path), 0);
}

/* ---- os-release ---------------------------------------------------------- */

static void test_os_release_quoting(void **state)
{
	(void)state;
	struct gp_os_release o;
	const char *text = "# comment\n"
	                   "\n"
	                   "   # indented comment\n"
	                   "NAME=\"Ubuntu\"\n"
	                   "not an assignment\n"
	                   "ID=ubuntu   \n"
	                   "ID_LIKE='debian \"x\" \\n'\n"
	                   "PRETTY_NAME=\"Ubuntu \\\"Jammy\\\" \\\\ \\$5 \\`x\\`\"\n"
	                   "VERSION_ID=\"22\"'.04'\n";
	assert_int_equal(gp_os_release_parse(text, &o), 0);
	assert_string_equal(o.id, "ubuntu");
	/* No escapes inside single quotes. */
	assert_string_equal(o.id_like, "debian \"x\" \\n");
	assert_string_equal(o.pretty_name, "Ubuntu \"Jammy\" \\ $5 `x`");
	/* Adjacent quoted pieces concatenate, as in the shell. */
	assert_string_equal(o.version_id, "22.04");
	gp_os_release_free(&o);
	assert_null(o.id);
}

static void test_os_release_edge_cases(void **state)
{
	(void)state;
	struct gp_os_release o;

	/* CRLF line ends, unquoted escapes, later assignment wins, no
	 * trailing newline, a backslash that is not an escape in "". */
	assert_int_equal(gp_os_release_parse("ID=first\r\n"
	                                     "ID=rhel\r\n"
	                                     "PRETTY_NAME=Red\\ Hat \\\"E\\\"\r\n"
	                                     "VERSION_ID=\"9.3\\x\"",
	                                     &o),
	                 0);
	assert_string_equal(o.id, "rhel");
	assert_string_equal(o.pretty_name, "Red Hat \"E\"");
	assert_string_equal(o.version_id, "9.3\\x");
	assert_null(o.id_like);
	gp_os_release_free(&o);

	/* Quoted blanks stay; an unterminated quote runs to the end. */
	assert_int_equal(gp_os_release_parse("ID=\" arch \"\nPRETTY_NAME=\"Arch", &o), 0);
	assert_string_equal(o.id, " arch ");
	assert_string_equal(o.pretty_name, "Arch");
	gp_os_release_free(&o);

	/* A quoted value may span lines. */
	assert_int_equal(gp_os_release_parse("PRETTY_NAME=\"a\nb\"\nID=x\n", &o), 0);
	assert_string_equal(o.pretty_name, "a\nb");
	assert_string_equal(o.id, "x");
	gp_os_release_free(&o);
}

static void test_os_release_missing_id(void **state)
{
	(void)state;
	struct gp_os_release o;
	assert_int_equal(gp_os_release_parse("NAME=Foo\nVERSION_ID=1\n", &o), -EINVAL);
	assert_null(o.id);
	assert_null(o.version_id);
	assert_int_equal(gp_os_release_parse("ID=\nNAME=Foo\n", &o), -EINVAL);
	assert_int_equal(gp_os_release_parse("", &o), -EINVAL);
	/* "XID" and "ID " inside another key are not ID. */
	assert_int_equal(gp_os_release_parse("XID=a\nID_LIKE=b\n", &o), -EINVAL);
}

static void test_os_release_etc_wins(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, "etc/os-release", "ID=etc\n");
	tu_write(fx->dir, "usr/lib/os-release", "ID=usrlib\nVERSION_ID=1\n");
	struct gp_os_release o;
	assert_int_equal(gp_os_release_read(fx_root(fx), &o), 0);
	assert_string_equal(o.id, "etc");
	/* /etc is used exclusively, not merged with /usr/lib. */
	assert_null(o.version_id);
	gp_os_release_free(&o);
}

static void test_os_release_fallback(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, "usr/lib/os-release", "ID=debian\nVERSION_ID=\"12\"\n");
	struct gp_os_release o;
	assert_int_equal(gp_os_release_read(fx_root(fx), &o), 0);
	assert_string_equal(o.id, "debian");
	assert_string_equal(o.version_id, "12");
	gp_os_release_free(&o);
}

static void test_os_release_absolute_symlink_stays_in_root(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* An absolute link must resolve inside the root, not to the host's. */
	tu_write(fx->dir, "usr/lib/os-release", "ID=fixture\n");
	fx_symlink(fx, "/usr/lib/os-release", "etc/os-release");
	struct gp_os_release o;
	assert_int_equal(gp_os_release_read(fx_root(fx), &o), 0);
	assert_string_equal(o.id, "fixture");
	gp_os_release_free(&o);
}

static void test_os_release_none(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_mkdir(fx->dir, "etc");
	struct gp_os_release o;
	assert_int_equal(gp_os_release_read(fx_root(fx), &o), -ENOENT);
	assert_null(o.id);
}

/* ---- modules ------------------------------------------------------------- */

static const char proc_modules[] =
    "nvidia_drm 98304 4 - Live 0x0000000000000000 (POE)\n"
    "nouveau 2322432 0 - Live 0xffffffffc0a00000\n"
    "\n"
    "video 65536 2 nouveau,i915, Live 0x0000000000000000\n";

static void test_modules_parse(void **state)
{
	(void)state;
	struct gp_module_list ml;
	assert_int_equal(gp_modules_parse(proc_modules, &ml), 0);
	assert_true(ml.available);
	assert_int_equal(gp_strv_len(ml.names), 3);
	assert_string_equal(ml.names[0], "nvidia_drm");
	assert_string_equal(ml.names[1], "nouveau");
	assert_string_equal(ml.names[2], "video");
	gp_module_list_free(&ml);

	assert_int_equal(gp_modules_parse("", &ml), 0);
	assert_true(ml.available);
	assert_non_null(ml.names);
	assert_null(ml.names[0]);
	gp_module_list_free(&ml);
}

/* A /proc/modules of many lines parses in linear time (the name list grew
 * by one per line before: minutes for this one; the alarm ends the test). */
static void test_modules_parse_many_lines_is_linear(void **state)
{
	(void)state;
	enum { lines = 300000 };
	char *text = gp_xmalloc(2 * lines + 1);
	for (size_t i = 0; i < lines; i++)
		memcpy(text + 2 * i, "m\n", 2);
	text[2 * lines] = '\0';
	struct gp_module_list ml;
	alarm(20);
	assert_int_equal(gp_modules_parse(text, &ml), 0);
	alarm(0);
	assert_int_equal(gp_strv_len(ml.names), lines);
	gp_module_list_free(&ml);
	free(text);
}

static void test_modules_read(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, "proc/modules", proc_modules);
	struct gp_module_list ml;
	assert_int_equal(gp_modules_read(fx_root(fx), &ml), 0);
	assert_true(ml.available);
	assert_true(gp_strv_contains(ml.names, "nouveau"));
	gp_module_list_free(&ml);
}

static void test_modules_missing_is_unknown(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_mkdir(fx->dir, "proc");
	const struct gp_root *r = fx_root(fx);
	struct gp_module_list ml;
	assert_int_equal(gp_modules_read(r, &ml), 0);
	assert_false(ml.available);
	assert_non_null(ml.names);
	assert_null(ml.names[0]);
	gp_module_list_free(&ml);

	assert_int_equal(gp_module_loaded(r, "nouveau"), GP_UNKNOWN);
}

static void test_module_loaded(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, "proc/modules", proc_modules);
	tu_mkdir(fx->dir, "sys/module/i915"); /* built in: not in proc/modules */
	const struct gp_root *r = fx_root(fx);

	assert_int_equal(gp_module_loaded(r, "nouveau"), GP_YES);
	assert_int_equal(gp_module_loaded(r, "nvidia_drm"), GP_YES);
	assert_int_equal(gp_module_loaded(r, "nvidia-drm"), GP_YES);
	assert_int_equal(gp_module_loaded(r, "i915"), GP_YES);
	assert_int_equal(gp_module_loaded(r, "nvidia"), GP_NO);
	/* A prefix is not a match. */
	assert_int_equal(gp_module_loaded(r, "nvidia_dr"), GP_NO);
	assert_int_equal(gp_module_loaded(r, "nouveau2"), GP_NO);
	/* Names that are no module name never become paths. */
	assert_int_equal(gp_module_loaded(r, ""), GP_UNKNOWN);
	assert_int_equal(gp_module_loaded(r, "../module/i915"), GP_UNKNOWN);
	assert_int_equal(gp_module_loaded(r, ".."), GP_UNKNOWN);
}

static void test_module_loaded_sys_module_fallback(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* No proc/modules: /sys/module still proves a module is there. */
	tu_mkdir(fx->dir, "sys/module/nouveau");
	tu_mkdir(fx->dir, "sys/module/nvidia_uvm");
	const struct gp_root *r = fx_root(fx);

	assert_int_equal(gp_module_loaded(r, "nouveau"), GP_YES);
	assert_int_equal(gp_module_loaded(r, "nvidia-uvm"), GP_YES);
	assert_int_equal(gp_module_loaded(r, "nvidia_uvm"), GP_YES);
	assert_int_equal(gp_module_loaded(r, "nvidia"), GP_UNKNOWN);
}

static void test_tristate_name(void **state)
{
	(void)state;
	assert_string_equal(gp_tristate_name(GP_NO), "no");
	assert_string_equal(gp_tristate_name(GP_YES), "yes");
	assert_string_equal(gp_tristate_name(GP_UNKNOWN), "unknown");
	assert_string_equal(gp_tristate_name((enum gp_tristate)7), "unknown");
}

/* ---- PCI ----------------------------------------------------------------- */

static void write_pci(struct tu_root_fixture *fx, const char *base, const char *vendor,
                      const char *device, const char *class)
{
	char rel[REL_MAX];
	snprintf(rel, sizeof rel, "%s/vendor", base);
	tu_write(fx->dir, rel, vendor);
	snprintf(rel, sizeof rel, "%s/device", base);
	tu_write(fx->dir, rel, device);
	snprintf(rel, sizeof rel, "%s/class", base);
	tu_write(fx->dir, rel, class);
}

static void test_pci_scan(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* NVIDIA 3D controller bound to nouveau (fixture style: a directory). */
	write_pci(fx, "sys/bus/pci/devices/0000:17:00.0", "0x10de\n", "0x20b0\n",
	          "0x030200\n");
	fx_symlink(fx, "../../../bus/pci/drivers/nouveau",
	           "sys/bus/pci/devices/0000:17:00.0/driver");
	/* Its HDMI audio function: NVIDIA, but no GPU. */
	write_pci(fx, "sys/bus/pci/devices/0000:17:00.1", "0x10de\n", "0x1aef\n",
	          "0x040300\n");
	/* Intel VGA, unbound. */
	write_pci(fx, "sys/bus/pci/devices/0000:00:02.0", "0x8086\n", "0x3e92\n",
	          "0x030000\n");
	/* Live-system style: a symlink into sys/devices. */
	write_pci(fx, "sys/devices/pci0000:00/0000:00:1f.3", "0x8086\n", "0xa348\n",
	          "0x040380\n");
	fx_symlink(fx, "../../../bus/pci/drivers/snd_hda_intel",
	           "sys/devices/pci0000:00/0000:00:1f.3/driver");
	fx_symlink(fx, "../../../devices/pci0000:00/0000:00:1f.3",
	           "sys/bus/pci/devices/0000:00:1f.3");

	struct gp_pci_list l;
	assert_int_equal(gp_pci_scan(fx_root(fx), &l), 0);
	assert_int_equal(l.n, 4);

	assert_string_equal(l.devs[0].address, "0000:00:02.0");
	assert_int_equal(l.devs[0].vendor, 0x8086);
	assert_int_equal(l.devs[0].class_code, 0x030000);
	assert_null(l.devs[0].driver);
	assert_false(gp_pci_is_nvidia_gpu(&l.devs[0]));

	assert_string_equal(l.devs[1].address, "0000:00:1f.3");
	assert_int_equal(l.devs[1].device, 0xa348);
	assert_string_equal(l.devs[1].driver, "snd_hda_intel");
	assert_false(gp_pci_is_nvidia_gpu(&l.devs[1]));

	assert_string_equal(l.devs[2].address, "0000:17:00.0");
	assert_int_equal(l.devs[2].vendor, 0x10de);
	assert_int_equal(l.devs[2].device, 0x20b0);
	assert_int_equal(l.devs[2].class_code, 0x030200);
	assert_string_equal(l.devs[2].driver, "nouveau");
	assert_true(gp_pci_is_nvidia_gpu(&l.devs[2]));

	assert_string_equal(l.devs[3].address, "0000:17:00.1");
	assert_null(l.devs[3].driver);
	assert_false(gp_pci_is_nvidia_gpu(&l.devs[3]));

	gp_pci_list_free(&l);
	assert_int_equal(l.n, 0);
	assert_null(l.devs);
}

static void test_pci_is_nvidia_gpu(void **state)
{
	(void)state;
	struct gp_pci_device d = { .vendor = 0x10de, .class_code = 0x030000 };
	assert_true(gp_pci_is_nvidia_gpu(&d)); /* VGA */
	d.class_code = 0x030200;
	assert_true(gp_pci_is_nvidia_gpu(&d)); /* 3D */
	d.class_code = 0x030001;
	assert_true(gp_pci_is_nvidia_gpu(&d)); /* prog-if does not matter */
	d.class_code = 0x038000;
	assert_false(gp_pci_is_nvidia_gpu(&d)); /* other display controller */
	d.class_code = 0x068000;
	assert_false(gp_pci_is_nvidia_gpu(&d)); /* NVSwitch bridge */
	d = (struct gp_pci_device){ .vendor = 0x1002, .class_code = 0x030000 };
	assert_false(gp_pci_is_nvidia_gpu(&d));
	assert_false(gp_pci_is_nvidia_gpu(NULL));
}

static void test_pci_missing_and_malformed(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_mkdir(fx->dir, "sys");
	const struct gp_root *r = fx_root(fx);
	struct gp_pci_list l;

	/* No sysfs in the root: an error, not "no devices". */
	assert_int_equal(gp_pci_scan(r, &l), -ENOENT);
	assert_int_equal(l.n, 0);

	tu_mkdir(fx->dir, "sys/bus/pci/devices");
	assert_int_equal(gp_pci_scan(r, &l), 0);
	assert_int_equal(l.n, 0);
	gp_pci_list_free(&l);

	/* A stray file is not a device; a device without ids is skipped. */
	tu_write(fx->dir, "sys/bus/pci/devices/README", "x\n");
	tu_mkdir(fx->dir, "sys/bus/pci/devices/0000:01:00.0");
	write_pci(fx, "sys/bus/pci/devices/0000:02:00.0", "0x10de\n", "0x2330\n",
	          "0x030200\n");
	assert_int_equal(gp_pci_scan(r, &l), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.devs[0].address, "0000:02:00.0");
	gp_pci_list_free(&l);

	write_pci(fx, "sys/bus/pci/devices/0000:03:00.0", "nvidia\n", "0x2330\n",
	          "0x030200\n");
	/* A garbage id leaves that device out, named, and keeps the others. */
	assert_int_equal(gp_pci_scan(r, &l), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.devs[0].address, "0000:02:00.0");
	assert_non_null(l.skipped[0]);
	assert_non_null(strstr(l.skipped[0],
	                       "/sys/bus/pci/devices/0000:03:00.0/vendor is "
	                       "not a hex id"));
	assert_null(l.skipped[1]);
	gp_pci_list_free(&l);
}

/* ---- kernel info --------------------------------------------------------- */

static void test_kernel_info(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, "proc/sys/kernel/random/boot_id",
	         " 0f0c6a7e-4d2b-4b7f-9b1a-3f1f2d0f6c11\n");
	tu_write(fx->dir, "proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
	const struct gp_root *r = fx_root(fx);

	char *id = gp_boot_id(r);
	assert_string_equal(id, "0f0c6a7e-4d2b-4b7f-9b1a-3f1f2d0f6c11");
	free(id);
	char *kver = gp_running_kernel(r);
	assert_string_equal(kver, "6.1.0-18-amd64");
	free(kver);
}

static void test_kernel_info_missing(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, "proc/sys/kernel/osrelease", " \n");
	const struct gp_root *r = fx_root(fx);
	assert_null(gp_boot_id(r));
	assert_null(gp_running_kernel(r)); /* blank is not a release */
}

/* ---- modprobe (libkmod) -------------------------------------------------- */

static void test_modprobe_blacklist_nouveau(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, "etc/modprobe.d/blacklist-nouveau.conf",
	         "blacklist nouveau\noptions nouveau modeset=0\n");
	const struct gp_root *r = fx_root(fx);
	struct gp_modprobe_facts f;

	assert_int_equal(gp_modprobe_query(r, "nouveau", &f), 0);
	assert_true(f.blacklisted);
	assert_string_equal(f.options, "modeset=0");
	assert_true(gp_modprobe_option_is(&f, "modeset", "0"));
	assert_false(gp_modprobe_option_is(&f, "modeset", "1"));
	assert_false(gp_modprobe_option_is(&f, "mode", "0"));
	gp_modprobe_facts_free(&f);
	assert_null(f.options);

	/* Only lines for the module asked about count. */
	assert_int_equal(gp_modprobe_query(r, "nvidia", &f), 0);
	assert_false(f.blacklisted);
	assert_null(f.options);
	gp_modprobe_facts_free(&f);
}

/* A query leaves the environment as it is: the download thread's libcurl may
 * be reading it (KMOD_LOG is set once, in main()). */
static void test_modprobe_leaves_the_environment(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, "etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau\n");
	char a[] = "GP_TEST=1";
	char *mine[] = { a, NULL };
	char **saved = environ;
	environ = mine;
	struct gp_modprobe_facts f;
	int rc = gp_modprobe_query(fx_root(fx), "nouveau", &f);
	char **after = environ;
	environ = saved;
	assert_int_equal(rc, 0);
	assert_true(f.blacklisted);
	assert_ptr_equal(after, mine);
	assert_string_equal(mine[0], "GP_TEST=1");
	assert_null(mine[1]);
	gp_modprobe_facts_free(&f);
}

/* Several modules in one query; the same configuration again is answered
 * without copying it out for libkmod (a TMPDIR that cannot be written to
 * does not matter), and any change of a file's bytes or of which files
 * there are is seen. */
static void test_modprobe_modules_and_the_previous_answer(void **state)
{
	struct tu_root_fixture *fx = *state;
	const struct gp_root *r = fx_root(fx);
	const char *const modules[] = { "nouveau", "nova_core", NULL };
	struct gp_modprobe_facts f[2];
	tu_write(fx->dir, "etc/modprobe.d/gpu.conf",
	         "blacklist nouveau\noptions nouveau modeset=0\n");
	tu_write(fx->dir, "lib/modprobe.d/gpu.conf", "blacklist nova_core\n");

	assert_int_equal(gp_modprobe_query_modules(r, modules, f), 0);
	assert_true(f[0].blacklisted);
	assert_string_equal(f[0].options, "modeset=0");
	assert_false(f[1].blacklisted); /* hidden by /etc's gpu.conf */
	assert_null(f[1].options);
	gp_modprobe_facts_free(&f[0]);
	gp_modprobe_facts_free(&f[1]);

	const char *tmp = getenv("TMPDIR");
	_cleanup_free_ char *saved = tmp ? strdup(tmp) : NULL;
	setenv("TMPDIR", "/nonexistent-gpuprov-test", 1);
	assert_int_equal(gp_modprobe_query_modules(r, modules, f), 0);
	assert_true(f[0].blacklisted);
	assert_string_equal(f[0].options, "modeset=0");
	gp_modprobe_facts_free(&f[0]);
	gp_modprobe_facts_free(&f[1]);
	/* The same length, other bytes: libkmod is asked again. */
	tu_write(fx->dir, "etc/modprobe.d/gpu.conf",
	         "blacklist nouveau\noptions nouveau modeset=1\n");
	assert_int_equal(gp_modprobe_query_modules(r, modules, f), -ENOENT);
	if (saved)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	gp_modprobe_facts_free(&f[0]);
	gp_modprobe_facts_free(&f[1]);

	assert_int_equal(gp_modprobe_query_modules(r, modules, f), 0);
	assert_string_equal(f[0].options, "modeset=1");
	gp_modprobe_facts_free(&f[0]);
	gp_modprobe_facts_free(&f[1]);
	/* A file more. */
	tu_write(fx->dir, "lib/modprobe.d/nova.conf", "blacklist nova_core\n");
	assert_int_equal(gp_modprobe_query_modules(r, modules, f), 0);
	assert_true(f[1].blacklisted);
	gp_modprobe_facts_free(&f[0]);
	gp_modprobe_facts_free(&f[1]);
	/* A module the previous query did not ask about. */
	struct gp_modprobe_facts one;
	assert_int_equal(gp_modprobe_query(r, "nvidia", &one), 0);
	assert_false(one.blacklisted);
	gp_modprobe_facts_free(&one);
	assert_int_equal(gp_modprobe_query(r, "nova_core", &one), 0);
	assert_true(one.blacklisted);
	gp_modprobe_facts_free(&one);
}

static void test_modprobe_nothing_configured(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_mkdir(fx->dir, "etc");
	struct gp_modprobe_facts f;
	assert_int_equal(gp_modprobe_query(fx_root(fx), "nouveau", &f), 0);
	assert_false(f.blacklisted);
	assert_null(f.options);
	assert_false(gp_modprobe_option_is(&f, "modeset", "0"));
	gp_modprobe_facts_free(&f);

	assert_int_equal(gp_modprobe_query(fx_root(fx), "", &f), -EINVAL);
	assert_int_equal(gp_modprobe_query(fx_root(fx), NULL, &f), -EINVAL);
}

static void test_modprobe_precedence(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* Same basename: the /etc file hides the /lib one entirely. */
	tu_write(fx->dir, "lib/modprobe.d/nvidia.conf",
	         "blacklist nvidia\noptions nvidia NVreg_Hidden=1\n");
	tu_write(fx->dir, "etc/modprobe.d/nvidia.conf", "options nvidia NVreg_Etc=2\n");
	/* Another name in a later directory is still read, in name order. */
	tu_write(fx->dir, "usr/local/lib/modprobe.d/other.conf",
	         "options nvidia NVreg_Other=3\n");
	tu_write(fx->dir, "run/modprobe.d/aa.conf", "options nvidia NVreg_First=0\n");
	/* Only *.conf (and *.alias) files are configuration. */
	tu_write(fx->dir, "etc/modprobe.d/notes.txt", "blacklist nvidia\n");
	tu_write(fx->dir, "etc/modprobe.d/nvidia.conf.dpkg-old", "blacklist nvidia\n");
	tu_write(fx->dir, "etc/modprobe.d/.hidden.conf", "blacklist nvidia\n");

	struct gp_modprobe_facts f;
	assert_int_equal(gp_modprobe_query(fx_root(fx), "nvidia", &f), 0);
	assert_false(f.blacklisted);
	assert_string_equal(f.options, "NVreg_First=0 NVreg_Etc=2 NVreg_Other=3");
	gp_modprobe_facts_free(&f);
}

static void test_modprobe_txt_ignored_alias_read(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, "etc/modprobe.d/blacklist-nouveau.txt",
	         "blacklist nouveau\noptions nouveau modeset=0\n");
	const struct gp_root *r = fx_root(fx);
	struct gp_modprobe_facts f;

	assert_int_equal(gp_modprobe_query(r, "nouveau", &f), 0);
	assert_false(f.blacklisted);
	assert_null(f.options);
	gp_modprobe_facts_free(&f);

	tu_write(fx->dir, "lib/modprobe.d/nouveau.alias", "blacklist nouveau\n");
	assert_int_equal(gp_modprobe_query(r, "nouveau", &f), 0);
	assert_true(f.blacklisted);
	gp_modprobe_facts_free(&f);
}

static void test_modprobe_dash_underscore_and_last_wins(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_write(fx->dir, "etc/modprobe.d/nvidia.conf",
	         "blacklist nvidia-drm\n"
	         "options nvidia-drm modeset=0\n"
	         "options nvidia_drm\tmodeset=1 fbdev=1\n"
	         "options nvidia NVreg_RegistryDwords=\"A=1; B=2\" NVreg-X=5\n");
	const struct gp_root *r = fx_root(fx);
	struct gp_modprobe_facts f;

	assert_int_equal(gp_modprobe_query(r, "nvidia_drm", &f), 0);
	assert_true(f.blacklisted);
	assert_string_equal(f.options, "modeset=0 modeset=1 fbdev=1");
	assert_true(gp_modprobe_option_is(&f, "modeset", "1"));
	assert_false(gp_modprobe_option_is(&f, "modeset", "0"));
	assert_true(gp_modprobe_option_is(&f, "fbdev", "1"));
	gp_modprobe_facts_free(&f);

	assert_int_equal(gp_modprobe_query(r, "nvidia-drm", &f), 0);
	assert_true(f.blacklisted);
	gp_modprobe_facts_free(&f);

	/* Quoted values keep their blanks; parameter names match - and _. */
	assert_int_equal(gp_modprobe_query(r, "nvidia", &f), 0);
	assert_false(f.blacklisted);
	assert_true(gp_modprobe_option_is(&f, "NVreg_RegistryDwords", "A=1; B=2"));
	assert_true(gp_modprobe_option_is(&f, "NVreg_X", "5"));
	assert_false(gp_modprobe_option_is(&f, "B", "2"));
	gp_modprobe_facts_free(&f);
}

static void test_modprobe_option_is(void **state)
{
	(void)state;
	struct gp_modprobe_facts f = { 0 };
	assert_false(gp_modprobe_option_is(&f, "modeset", "0"));
	assert_false(gp_modprobe_option_is(NULL, "modeset", "0"));

	f.options = (char *)"modeset=0 config=NvGspRm=1  modeset";
	/* The bare flag comes last and replaces modeset=0. */
	assert_false(gp_modprobe_option_is(&f, "modeset", "0"));
	assert_true(gp_modprobe_option_is(&f, "config", "NvGspRm=1"));
	assert_false(gp_modprobe_option_is(&f, "NvGspRm", "1"));

	f.options = (char *)"a=\"x y\" b= c=\"unterminated";
	assert_true(gp_modprobe_option_is(&f, "a", "x y"));
	assert_true(gp_modprobe_option_is(&f, "b", ""));
	assert_true(gp_modprobe_option_is(&f, "c", "unterminated"));
	assert_false(gp_modprobe_option_is(&f, "y\"", ""));
}

static void test_modprobe_never_prints(void **state)
{
	struct tu_root_fixture *fx = *state;
	/* Each of these makes libkmod log an error by default. */
	tu_write(fx->dir, "etc/modprobe.d/bad.conf",
	         "frobnicate nouveau\noptions\nblacklist nouveau\n");
	tu_mkdir(fx->dir, "etc/modprobe.d/dir.conf");
	const struct gp_root *r = fx_root(fx);

	char log[PATH_MAX];
	snprintf(log, sizeof log, "%s/stderr.log", fx->dir);
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	int saved = dup(2);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);

	bool kmod_log_was_set = getenv("KMOD_LOG") != NULL;
	struct gp_modprobe_facts f;
	int rc = gp_modprobe_query(r, "nouveau", &f);

	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);

	assert_int_equal(rc, 0);
	assert_true(f.blacklisted);
	gp_modprobe_facts_free(&f);
	/* The environment is as it was. */
	assert_int_equal(getenv("KMOD_LOG") != NULL, kmod_log_was_set);
	if (!kmod_log_was_set) {
		struct stat st;
		assert_int_equal(stat(log, &st), 0);
		assert_int_equal(st.st_size, 0);
	}
}

/* libkmod also reads the host's /proc/cmdline ("nouveau.modeset=0",
 * "modprobe.blacklist=nouveau"). That describes the host, so for another
 * root it must not show up, while for the host root it must. Uses whatever
 * "module.param=value" the machine running the tests was booted with. */
static void test_modprobe_host_cmdline_not_in_other_root(void **state)
{
	struct tu_root_fixture *fx = *state;
	tu_mkdir(fx->dir, "etc/modprobe.d");

	FILE *fp = fopen("/proc/cmdline", "re");
	if (!fp)
		return; /* nothing libkmod could read either */
	char line[4096] = "";
	if (!fgets(line, sizeof line, fp))
		line[0] = '\0';
	fclose(fp);

	struct gp_root host;
	assert_int_equal(gp_root_open(&host, "/"), 0);
	for (char *save = NULL, *tok = strtok_r(line, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save)) {
		if (strcmp(tok, "--") == 0)
			break; /* what follows is for init */
		/* One dot, then a '=': libkmod splits at every dot. */
		char *dot = strchr(tok, '.'), *eq = strchr(tok, '=');
		if (!dot || !eq || eq < dot || strchr(dot + 1, '.') || strchr(tok, '"'))
			continue;
		*dot = '\0';
		const char *module = tok, *param = dot + 1;
		struct gp_modprobe_facts f;

		if (strcmp(module, "modprobe") == 0) {
			if (strncmp(param, "blacklist=", 10) != 0 || strchr(param, ','))
				continue;
			module = param + 10;
			assert_int_equal(gp_modprobe_query(&host, module, &f), 0);
			assert_true(f.blacklisted);
			gp_modprobe_facts_free(&f);
			assert_int_equal(gp_modprobe_query(fx_root(fx), module, &f), 0);
			assert_false(f.blacklisted);
			gp_modprobe_facts_free(&f);
			continue;
		}

		assert_int_equal(gp_modprobe_query(&host, module, &f), 0);
		assert_non_null(f.options);
		assert_non_null(strstr(f.options, param));
		gp_modprobe_facts_free(&f);
		assert_int_equal(gp_modprobe_query(fx_root(fx), module, &f), 0);
		assert_null(f.options);
		gp_modprobe_facts_free(&f);
	}
	gp_root_close(&host);
}

static void test_nvidia_module_parse(void **state)
{
	(void)state;
	char *v = NULL;
	bool open = true;
	assert_int_equal(
	    gp_nvidia_module_parse("NVRM version: NVIDIA UNIX x86_64 Kernel Module  "
	                           "535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
	                           "GCC version:  gcc version 12.3.0\n",
	                           &v, &open),
	    0);
	assert_string_equal(v, "535.104.05");
	assert_false(open);
	free(v);
	assert_int_equal(gp_nvidia_module_parse(
	                     "NVRM version: NVIDIA UNIX Open Kernel Module for "
	                     "x86_64  555.58.02  Release Build  (dvs-builder@U16)\n",
	                     &v, &open),
	                 0);
	assert_string_equal(v, "555.58.02");
	assert_true(open);
	free(v);
	assert_int_equal(gp_nvidia_module_parse("GCC version: 12\n", &v, NULL), -EINVAL);
	assert_null(v);
	assert_int_equal(
	    gp_nvidia_module_parse("NVRM version: NVIDIA UNIX Kernel Module\n", &v, NULL),
	    -EINVAL);
	assert_null(v);
}

static void test_nvidia_module_read(void **state)
{
	struct tu_root_fixture *fx = *state;
	char *v = NULL;
	assert_int_equal(gp_nvidia_module_read(fx_root(fx), &v, NULL), -ENOENT);
	tu_write(fx->dir, "proc/driver/nvidia/version",
	         "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 "
	         "22:23:56 UTC 2024\n");
	assert_int_equal(gp_nvidia_module_read(fx_root(fx), &v, NULL), 0);
	assert_string_equal(v, "550.54.15");
	free(v);
}

#define FX_TEST(t) cmocka_unit_test_setup_teardown(t, tu_root_setup, tu_root_teardown)

int main(void)
{
	gp_modprobe_env_init(); /* as gpuprov's main() does, before any thread */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_os_release_quoting),
		cmocka_unit_test(test_os_release_edge_cases),
		cmocka_unit_test(test_os_release_missing_id),
		FX_TEST(test_os_release_etc_wins),
		FX_TEST(test_os_release_fallback),
		FX_TEST(test_os_release_absolute_symlink_stays_in_root),
		FX_TEST(test_os_release_none),
		cmocka_unit_test(test_modules_parse),
		FX_TEST(test_modules_read),
		FX_TEST(test_modules_missing_is_unknown),
		FX_TEST(test_module_loaded),
		FX_TEST(test_module_loaded_sys_module_fallback),
		cmocka_unit_test(test_tristate_name),
		cmocka_unit_test(test_modules_parse_many_lines_is_linear),
		cmocka_unit_test(test_nvidia_module_parse),
		FX_TEST(test_nvidia_module_read),
		FX_TEST(test_pci_scan),
		cmocka_unit_test(test_pci_is_nvidia_gpu),
		FX_TEST(test_pci_missing_and_malformed),
		FX_TEST(test_kernel_info),
		FX_TEST(test_kernel_info_missing),
		FX_TEST(test_modprobe_blacklist_nouveau),
		FX_TEST(test_modprobe_nothing_configured),
		FX_TEST(test_modprobe_modules_and_the_previous_answer),
		FX_TEST(test_modprobe_leaves_the_environment),
		FX_TEST(test_modprobe_precedence),
		FX_TEST(test_modprobe_txt_ignored_alias_read),
		FX_TEST(test_modprobe_dash_underscore_and_last_wins),
		cmocka_unit_test(test_modprobe_option_is),
		FX_TEST(test_modprobe_never_prints),
		FX_TEST(test_modprobe_host_cmdline_not_in_other_root),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
