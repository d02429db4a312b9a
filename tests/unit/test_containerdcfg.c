/* containerd's config.toml imports edit and the drop-ins of containerd and
 * CRI-O (src/pure/containerdcfg.c): the one line gpuprov changes or adds,
 * every other byte kept, and the files it refuses, naming the line. */
#include "testutil.h"

#include "gpuprov/containerdcfg.h"
#include "gpuprov/util.h"

#define PATTERN "/etc/containerd/conf.d/*.toml"

/* old edited: the new text, or "refused: MESSAGE". */
static char *edit(const char *old, struct gp_containerd_config *cfg, bool *changed)
{
	struct gp_err err = { 0 };
	char *out = NULL;
	if (gp_containerd_imports_edit("config.toml", old, old ? strlen(old) : 0, PATTERN,
	                               &out, changed, cfg, &err) < 0) {
		assert_null(out);
		return gp_xasprintf("refused: %s", err.msg);
	}
	/* A fixed point: edited again, nothing changes. */
	struct gp_containerd_config again_cfg;
	bool again_changed = true;
	char *again = NULL;
	assert_int_equal(gp_containerd_imports_edit("config.toml", out, strlen(out),
	                                            PATTERN, &again, &again_changed,
	                                            &again_cfg, &err),
	                 0);
	assert_false(again_changed);
	assert_string_equal(again, out);
	free(again);
	return out;
}

static void assert_edit(const char *old, const char *want, bool want_changed)
{
	struct gp_containerd_config cfg;
	bool changed = !want_changed;
	char *got = edit(old, &cfg, &changed);
	assert_string_equal(got, want);
	assert_true(changed == want_changed);
	free(got);
}

static void assert_refused(const char *old, const char *want)
{
	struct gp_containerd_config cfg;
	bool changed;
	char *got = edit(old, &cfg, &changed);
	if (!gp_str_starts_with(got, "refused: ") || !strstr(got, want))
		fail_msg("got \"%s\", not refused with \"%s\"", got, want);
	free(got);
}

static void test_no_file(void **state)
{
	assert_edit(NULL, "version = 2\nimports = [\"" PATTERN "\"]\n", true);
	assert_edit("# nothing yet\n",
	            "# nothing yet\nversion = 2\nimports = [\"" PATTERN "\"]\n", true);
}

static void test_imports_added_after_version(void **state)
{
	assert_edit(
	    "# site config\nversion = 2\n\n[plugins.\"io.containerd.internal.v1.opt\"]\n"
	    "  path = \"/opt/containerd\"\n",
	    "# site config\nversion = 2\nimports = [\"" PATTERN "\"]\n\n"
	    "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"/opt/containerd\"\n",
	    true);
	/* No newline at the end, a comment after the version. */
	assert_edit("version = 3 # containerd 2\nroot = \"/var/lib/containerd\"",
	            "version = 3 # containerd 2\nimports = [\"" PATTERN "\"]\n"
	            "root = \"/var/lib/containerd\"",
	            true);
}

static void test_imports_extended(void **state)
{
	assert_edit("version = 2\nimports = [\"/foo/bar/*.toml\"] # site\n",
	            "version = 2\nimports = [\"/foo/bar/*.toml\", \"" PATTERN
	            "\"] # site\n",
	            true);
	assert_edit("imports = []\nversion = 2\n",
	            "imports = [\"" PATTERN "\"]\nversion = 2\n", true);
	assert_edit("version = 2\nimports = ['/a/*.toml', \"/b/*.toml\",]\n",
	            "version = 2\nimports = ['/a/*.toml', \"/b/*.toml\", \"" PATTERN
	            "\"]\n",
	            true);
}

static void test_already_there(void **state)
{
	assert_edit("version = 2\nimports = [\"" PATTERN "\"]\n",
	            "version = 2\nimports = [\"" PATTERN "\"]\n", false);
}

/* Facts the stage needs: the CRI plugin configured in the file (the
 * drop-in would replace it whole before containerd 2.1), SystemdCgroup,
 * and arrays over several lines skipped. */
static void test_facts(void **state)
{
	struct gp_containerd_config cfg;
	bool changed;
	char *out = edit(
	    "version = 2\ndisabled_plugins = [\n  \"x\",\n  \"[y\",\n]\n\n"
	    "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc."
	    "options]\n  SystemdCgroup = true\n",
	    &cfg, &changed);
	assert_false(gp_str_starts_with(out, "refused"));
	assert_int_equal(cfg.version, 2);
	assert_int_equal(cfg.cri_line, 7);
	assert_true(cfg.systemd_cgroup);
	free(out);
	out = edit("version = 3\nplugins.'x'.y = 1\n", &cfg, &changed);
	assert_int_equal(cfg.version, 3);
	assert_int_equal(cfg.cri_line, 0);
	assert_false(cfg.systemd_cgroup);
	free(out);
	out = edit("version = 2\nplugins.cri.enable_cdi = true\n", &cfg, &changed);
	assert_int_equal(cfg.cri_line, 2);
	free(out);
}

static void test_refused(void **state)
{
	assert_refused(
	    "disabled_plugins = [\"cri\"]\n",
	    "config.toml: has no top-level version line: containerd reads it as "
	    "config version 1");
	assert_refused("[plugins]\n", "has tables but no top-level version line");
	assert_refused("version = 1\n",
	               "config version 1: gpuprov knows versions 2 and 3");
	assert_refused("version = \"2\"\n", "config.toml:1: version is \"\"2\"\"");
	assert_refused("version = 2\nimports = [\n  \"/a/*.toml\",\n]\n",
	               "config.toml:2: imports is not a one-line array of plain strings");
	assert_refused("version = 2\nimports = [\"/a\\u0041\"]\n",
	               "config.toml:2: imports is not a one-line array");
	assert_refused("version = 2\nimports = \"/a\"\n",
	               "config.toml:2: imports is not");
	assert_refused("version = 2\nimports = []\nimports = []\n",
	               "config.toml:3: a second imports line");
	assert_refused("version = 2\nx = \"\"\"\nimports = []\n\"\"\"\n",
	               "config.toml:2: a multi-line string");
	assert_refused("version = 2\nwhat is this\n",
	               "config.toml:2: gpuprov does not understand this line");
	assert_refused("version = 2\nx = \"open\n",
	               "config.toml:2: an unterminated string");
	assert_refused("version = 2\nx = [1,\n", "ends inside an array");
	struct gp_containerd_config cfg;
	bool changed;
	char *out = NULL;
	struct gp_err err = { 0 };
	assert_int_equal(gp_containerd_imports_edit("config.toml", "version = 2\0", 12,
	                                            PATTERN, &out, &changed, &cfg, &err),
	                 -1);
	assert_non_null(strstr(err.msg, "NUL byte"));
}

static void test_dropins(void **state)
{
	char *d = gp_containerd_dropin(2, "/usr/bin/nvidia-container-runtime", true,
	                               true);
	assert_string_equal(
	    d, "# Written by gpuprov (stage container_toolkit): the NVIDIA runtime.\n"
	       "version = 2\n"
	       "\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
	       "  default_runtime_name = \"nvidia\"\n"
	       "\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
	       "  privileged_without_host_devices = false\n"
	       "  runtime_type = \"io.containerd.runc.v2\"\n"
	       "\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia."
	       "options]\n"
	       "  BinaryName = \"/usr/bin/nvidia-container-runtime\"\n"
	       "  SystemdCgroup = true\n");
	free(d);
	d = gp_containerd_dropin(3, "/usr/bin/nvidia-container-runtime", false, false);
	assert_non_null(strstr(d,
	                       "version = 3\n\n[plugins.\"io.containerd.cri.v1.runtime\"."
	                       "containerd.runtimes.nvidia]\n"));
	assert_null(strstr(d, "default_runtime_name"));
	assert_null(strstr(d, "SystemdCgroup"));
	free(d);
	d = gp_crio_dropin("/usr/bin/nvidia-container-runtime", true);
	assert_string_equal(
	    d, "# Written by gpuprov (stage container_toolkit): the NVIDIA runtime.\n"
	       "\n[crio.runtime]\ndefault_runtime = \"nvidia\"\n"
	       "\n[crio.runtime.runtimes.nvidia]\n"
	       "runtime_path = \"/usr/bin/nvidia-container-runtime\"\n"
	       "runtime_type = \"oci\"\n");
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_file),
		cmocka_unit_test(test_imports_added_after_version),
		cmocka_unit_test(test_imports_extended),
		cmocka_unit_test(test_already_there),
		cmocka_unit_test(test_facts),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_dropins),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
