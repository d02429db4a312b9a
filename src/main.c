/* gpuprov: command line. Parses options, picks the command from the
 * table, and maps everything to the documented exit codes. Options may
 * stand before or after the command. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuprov/catalog.h"
#include "gpuprov/detect.h"
#include "gpuprov/engine.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/modprobe.h"
#include "gpuprov/nvsettings.h"
#include "gpuprov/nvhealth.h"
#include "gpuprov/profile.h"
#include "gpuprov/run.h"
#include "gpuprov/stagelist.h"
#include "gpuprov/stages.h"
#include "gpuprov/util.h"

#ifndef GP_VERSION
#define GP_VERSION "0.0.0"
#endif

/* The global usage: the options above the command table's rows, the rest
 * below (usage() puts them together). */
static const char usage_head[] =
    "usage: gpuprov [--root DIR] [--profile-dir DIR] [--json] [-q|-v] [--no-color]\n"
    "               COMMAND [ARGS]\n"
    "\n"
    "Turns a Linux server into a verified GPU machine for deep learning.\n"
    "\n"
    "commands:\n";

static const char usage_tail[] =
    "\n"
    "global options:\n"
    "  --root DIR            operate on the system mounted at DIR (default /)\n"
    "  --profile-dir DIR     search DIR for profiles first\n"
    "  --json                print results as one JSON document\n"
    "  --format FORMAT       print results as text (the default) or json;\n"
    "                        verify also as prometheus (the textfile format)\n"
    "  -q, --quiet           no install report (errors, plans, reports, JSON stay)\n"
    "  -v, --verbose         print more detail\n"
    "  --no-color            never colour the output\n"
    "  -h, --help            show help (also after a command)\n"
    "  --version             print the version\n"
    "  --list-commands       print the commands, one a line (for shell completion)\n"
    "  --list-options [CMD]  print the options (that CMD accepts), one a line\n"
    "\n"
    "download options (install, plan):\n"
    "  --cache-dir DIR       download cache, a path inside the root\n"
    "                        (default /var/cache/gpuprov)\n"
    "  --ca-file FILE        trust the CA certificates in FILE (PEM, host path) for\n"
    "                        HTTPS, e.g. a private mirror's\n"
    "  --mirror FROM=TO      fetch URLs starting with FROM from TO instead\n"
    "                        (repeatable; the longest matching FROM wins)\n"
    "  --offline             no network: use the cache only, and fail at once\n"
    "                        naming every artifact missing from it\n"
    "\n";

static const char usage_end[] =
    "methods: driver apt|dnf|runfile, cuda repo|runfile, cudnn tarball|apt,\n"
    "         pytorch conda|venv\n"
    "exit codes: 0 done, 1 apply failed, 2 usage, 3 verify failed, 4 blocked,\n"
    "            5 reboot required, 6 locked by another run, 65 invalid input\n"
    "See gpuprov(8).\n";

/* What a command's handler gets: the options parsed, the output object
 * and the words after the command. */
struct cli {
	struct gp_options o;
	struct gp_out out;
	char **args;
	int nargs;
	bool resolved; /* profiles show --resolved */
	bool names; /* profiles list --names */
	const char *rerun; /* the command line, for the reboot message */
};

struct command;
static int usage_error(const struct command *cmd, const char *fmt, ...) _printf_(2, 3);

/* A line of the global usage: what to type and what it does. A synopsis
 * too long for the first column, or of two lines, puts the summary on the
 * next line; each line of the summary is indented to the second column. */
struct synopsis {
	const char *text, *summary;
};

struct command {
	const char *name;
	struct synopsis synopsis[3]; /* global usage lines; a NULL text ends them */
	const char *usage; /* of `gpuprov NAME --help` and usage errors */
	unsigned allowed; /* OPT_* bits accepted after the command */
	bool takes_args; /* words after the command (profiles list|show|lint) */
	int (*run)(const struct command *cmd, struct cli *cli);
};

enum {
	OPT_PROFILE = 1u << 0,
	OPT_DRY_RUN = 1u << 1,
	OPT_SELECT = 1u << 2, /* --only, --skip */
	OPT_FORCE = 1u << 3,
	OPT_RESOLVED = 1u << 4, /* profiles show */
	OPT_FETCH = 1u << 5, /* --cache-dir, --ca-file, --mirror, --offline */
	OPT_NAMES = 1u << 6, /* profiles list */
	OPT_TEXTFILE = 1u << 8, /* verify --textfile, --textfile-dir */
	OPT_PROMETHEUS = 1u << 9, /* --format prometheus: verify's only */
	OPT_REBOOT = 1u << 10, /* install --reboot=never|auto */
	OPT_DEEP = 1u << 11, /* verify --deep[=quick] */
	OPT_TO = 1u << 12, /* rollback --to N */
};

static int cli_main(int argc, char **argv, const char *resume_root);

static int run_install(const struct command *cmd, struct cli *cli)
{
	/* Without --profile the engine goes on only after a rollback (with
	 * its entry's profile copy), else refuses. */
	cli->o.rerun = cli->rerun;
	/* Tests stand a program in the root in for the reboot (context.h). */
	cli->o.reboot_stub = getenv("GPUPROV_REBOOT_STUB");
	int rc = gp_engine_install(&cli->o, &cli->out);
	if (rc == GP_EXIT_USAGE && !cli->o.profile)
		fputs(cmd->usage, stderr); /* the engine said why: no --profile */
	if (!cli->o.resumed)
		return rc;
	/* Resumed at boot: then verify and the textfile of the same stages, as
	 * gpuprov-verify.service does, so monitoring sees the outcome (a
	 * reboot under way, the cap reached) without waiting for the timer. */
	cli->o.textfile = true;
	int verified = gp_engine_verify(&cli->o, &cli->out);
	return rc ? rc : verified;
}

/* gpuprov-resume.service's command: the marker's install again, on this
 * root (run_install then verifies). */
static int run_resume(const struct command *cmd, struct cli *cli)
{
	_cleanup_strv_ char **argv = NULL;
	int rc = gp_engine_resume_take(&cli->o, &cli->out, &argv);
	if (rc || !argv)
		return rc;
	_cleanup_free_ char *shown = gp_argv_display(argv);
	gp_info(&cli->out, "resume: running '%s'", shown);
	return cli_main((int)gp_strv_len(argv), argv, cli->o.root);
}

static int run_plan(const struct command *cmd, struct cli *cli)
{
	cli->o.dry_run = true;
	return run_install(cmd, cli);
}

static int run_verify(const struct command *cmd, struct cli *cli)
{
	return gp_engine_verify(&cli->o, &cli->out);
}

static int run_history(const struct command *cmd, struct cli *cli)
{
	return gp_engine_history(&cli->o, &cli->out);
}

static int run_uninstall(const struct command *cmd, struct cli *cli)
{
	return gp_engine_uninstall(&cli->o, &cli->out);
}

static int run_rollback(const struct command *cmd, struct cli *cli)
{
	return gp_engine_rollback(&cli->o, &cli->out);
}

static int run_status(const struct command *cmd, struct cli *cli)
{
	return gp_engine_status(&cli->o, &cli->out);
}

static int run_detect(const struct command *cmd, struct cli *cli)
{
	return gp_engine_detect(&cli->o, &cli->out);
}

static int run_stages(const struct command *cmd, struct cli *cli)
{
	return gp_stagelist_print(&cli->out);
}

static int run_profiles(const struct command *cmd, struct cli *cli)
{
	char **args = cli->args;
	int nargs = cli->nargs;
	if (cli->resolved && !(nargs >= 1 && strcmp(args[0], "show") == 0))
		return usage_error(cmd,
		                   "option --resolved applies to 'profiles show' only");
	bool list = nargs == 1 && strcmp(args[0], "list") == 0;
	if (cli->names && !list)
		return usage_error(cmd, "option --names applies to 'profiles list' only");
	if (list && cli->names)
		return gp_engine_profiles_names(&cli->o, &cli->out);
	if (list)
		return gp_engine_profiles_list(&cli->o, &cli->out);
	if (nargs == 2 && strcmp(args[0], "show") == 0)
		return gp_engine_profiles_show(&cli->o, args[1], cli->resolved,
		                               &cli->out);
	if (nargs >= 2 && strcmp(args[0], "lint") == 0)
		return gp_engine_profiles_lint(&cli->o, args + 1, &cli->out);
	if (nargs == 1 && strcmp(args[0], "lint") == 0)
		return usage_error(cmd, "profiles lint: give one or more profile files");
	return usage_error(cmd,
	                   "profiles: expected 'list', 'show NAME' or 'lint FILE...'");
}

/* The record of what was set this boot (GP_GPU_SETTINGS_APPLIED). */
static int record_applied(const struct gp_root *root, const struct gp_gpu_want *w)
{
	_cleanup_free_ char *words = gp_gpu_want_words(w);
	_cleanup_free_ char *record = gp_xasprintf("%s\n", words);
	int rc = gp_root_mkdir_p(root, "/run/gpuprov", 0755);
	return rc < 0 ? rc
	              : gp_root_write_atomic(root, GP_GPU_SETTINGS_APPLIED, record,
	                                     strlen(record), 0644, 0, 0);
}

/* What the gpu_settings stage's boot unit runs (src/stages/gpu_settings.c):
 * the words are its ExecStart's, set on every GPU through NVML; and, with
 * reset, what its uninstall runs to give them back to the defaults. */
static int run_gpu_settings(const struct command *cmd, struct cli *cli)
{
	bool reset = cli->nargs >= 1 && strcmp(cli->args[0], "reset") == 0;
	if (cli->nargs < 1 || (!reset && strcmp(cli->args[0], "apply") != 0))
		return usage_error(cmd, "gpu-settings: expected 'apply SETTING...' or "
		                        "'reset SETTING=default...'");
	const char *verb = reset ? "reset" : "apply";
	struct gp_gpu_want w;
	struct gp_gpu_reset back;
	struct gp_err err = { 0 };
	if ((reset ? gp_gpu_reset_parse(cli->args + 1, (size_t)(cli->nargs - 1), &back,
	                                &err)
	           : gp_gpu_want_parse(cli->args + 1, (size_t)(cli->nargs - 1), &w,
	                               &err)) < 0) {
		gp_error(&cli->out, "gpu-settings %s: %s", verb, err.msg);
		return gp_exit_code(&err);
	}
	struct gp_root root;
	int rc = gp_root_open(&root, cli->o.root ? cli->o.root : "/");
	if (rc < 0) {
		gp_error(&cli->out, "gpu-settings %s: cannot open the root %s: %s", verb,
		         cli->o.root ? cli->o.root : "/", strerror(-rc));
		return GP_EXIT_APPLY_FAILED;
	}
	struct gp_nvsettings n;
	rc = reset ? gp_nvsettings_reset(&root, 60000, &back, &n)
	           : gp_nvsettings_apply(&root, 60000, &w, &n);
	int status = GP_EXIT_OK;
	if (rc < 0) {
		gp_error(&cli->out, "gpu-settings %s: cannot start the NVML child: %s",
		         verb, strerror(-rc));
		status = GP_EXIT_APPLY_FAILED;
	} else if (n.error || !n.loaded || n.init_rc != 0) {
		gp_error(&cli->out, "gpu-settings %s: NVML: %s", verb,
		         n.error        ? n.error
		         : !n.loaded    ? (n.load_error ? n.load_error : "does not load")
		         : n.init_error ? n.init_error
		                        : "nvmlInit_v2 failed");
		status = GP_EXIT_APPLY_FAILED;
	} else {
		for (size_t i = 0; n.results && n.results[i]; i++)
			fprintf(cli->out.out, "%s\n", n.results[i]);
		if (n.failed) {
			gp_error(&cli->out, "gpu-settings %s: %d setting%s not %s", verb,
			         n.failed, n.failed == 1 ? "" : "s",
			         reset ? "reset" : "set");
			status = GP_EXIT_APPLY_FAILED;
		} else if (!reset && record_applied(&root, &w) < 0)
			gp_warn(&cli->out,
			        "gpu-settings apply: cannot write %s: verify "
			        "cannot tell drift from a boot unit that did not run",
			        GP_GPU_SETTINGS_APPLIED);
	}
	gp_nvsettings_free(&n);
	gp_root_close(&root);
	return status;
}

static const struct command commands[] = {
	{ "install",
	  { { "install --profile NAME|PATH [--dry-run] [--force] [--only S,..] "
	      "[--skip S,..]\n"
	      "          [DOWNLOAD OPTIONS]",
	      "make the target match the profile" } },
	  "usage: gpuprov install --profile NAME|PATH [--dry-run] [--force]\n"
	  "                       [--only S,..] [--skip S,..] [--reboot=never|auto]\n"
	  "                       [--cache-dir DIR] [--ca-file FILE]\n"
	  "                       [--mirror FROM=TO]... [--offline]\n"
	  "\n"
	  "Runs the profile's stages in order: each is checked, and changed only when\n"
	  "needed. A full plan is made first; a blocked stage stops the run before any\n"
	  "change. --dry-run prints the exact plan (file diffs, commands, reboots) and\n"
	  "changes nothing. --force goes ahead on a host that does not match the\n"
	  "profile's match section. Exits 5 when a reboot is needed: reboot, then run\n"
	  "the same command again to continue (--reboot=never, the default).\n"
	  "--reboot=auto instead arms gpuprov-resume.service with this command line\n"
	  "and reboots; after the boot the unit runs 'gpuprov resume', which runs it\n"
	  "again, then verify --textfile; at most 3 reboots for one install. With\n"
	  "--root other than / the unit is armed for the root's next boot and\n"
	  "nothing is rebooted. Only while a rollback's history entry is the current\n"
	  "one may --profile be left out: the entry's copy of its profile is applied.\n"
	  "\n"
	  "Downloads are verified by sha256 and kept in the cache, --cache-dir DIR\n"
	  "inside the root (default /var/cache/gpuprov); a cached artifact is used\n"
	  "without network. The cudnn stage's tarball, the pytorch stage's Miniforge\n"
	  "installer and the driver and cuda stages' runfiles download in the\n"
	  "background once the plan is made, while earlier stages apply. --ca-file\n"
	  "FILE trusts FILE's CAs for HTTPS (private mirrors). --mirror FROM=TO\n"
	  "(repeatable) fetches URLs that start with FROM from TO. --offline never\n"
	  "uses the network and fails at once naming every artifact missing from\n"
	  "the cache.\n",
	  OPT_PROFILE | OPT_DRY_RUN | OPT_SELECT | OPT_FORCE | OPT_FETCH | OPT_REBOOT,
	  false,
	  run_install },
	{ "plan",
	  { { "plan --profile NAME|PATH [--force] [--only S,..] [--skip S,..] "
	      "[DOWNLOAD OPTIONS]",
	      "show what install would do (same as install --dry-run)" } },
	  "usage: gpuprov plan --profile NAME|PATH [--force]\n"
	  "                    [--only S,..] [--skip S,..] [--reboot=never|auto]\n"
	  "                    [--cache-dir DIR] [--ca-file FILE]\n"
	  "                    [--mirror FROM=TO]... [--offline]\n"
	  "\n"
	  "Prints what 'install' would do, planning later stages as if the earlier\n"
	  "ones had run, and changes nothing. The same as 'install --dry-run'.\n"
	  "Downloads are listed with URL, size when known, sha256 and whether the\n"
	  "cache (--cache-dir) has them already; nothing is downloaded. With\n"
	  "--reboot=auto it also shows the arming of gpuprov-resume.service and the\n"
	  "reboot that would follow.\n",
	  OPT_PROFILE | OPT_SELECT | OPT_FORCE | OPT_FETCH | OPT_REBOOT,
	  false,
	  run_plan },
	{ "verify",
	  { { "verify [--profile NAME|PATH] [--only S,..] [--skip S,..]\n"
	      "         [--textfile | --textfile-dir DIR] [--deep[=quick]] [--force]",
	      "check that the installed stack works" } },
	  "usage: gpuprov verify [--profile NAME|PATH] [--only S,..] [--skip S,..]\n"
	  "                      [--textfile | --textfile-dir DIR]\n"
	  "                      [--deep[=quick]] [--force]\n"
	  "\n"
	  "Checks, read-only, that every stage's result works. The profile defaults\n"
	  "to the one the last install recorded. Exits 3 when a check fails.\n"
	  "\n"
	  "--format prometheus prints the results as Prometheus metrics, in the\n"
	  "text format of node_exporter's textfile collector. --textfile also writes\n"
	  "them, atomically, to DIR/gpuprov.prom, DIR being textfile_dir in\n"
	  "/etc/gpuprov/gpuprov.conf or /var/lib/prometheus/node-exporter;\n"
	  "--textfile-dir DIR (a path inside the root) gives DIR. The file is\n"
	  "written after a failed check too; stdout keeps the chosen format.\n"
	  "\n"
	  "--deep also checks each GPU's health (ECC, row remapping, clocks, PCIe\n"
	  "link, NVLink) and measures its memory, host-link and GEMM throughput\n"
	  "against what its model should reach, all GPUs at once (under 2 minutes;\n"
	  "--deep=quick under 20 s). It refuses while compute processes use a GPU,\n"
	  "unless --force. It changes no GPU setting.\n",
	  OPT_PROFILE | OPT_SELECT | OPT_TEXTFILE | OPT_PROMETHEUS | OPT_DEEP | OPT_FORCE,
	  false,
	  run_verify },
	{ "status",
	  { { "status", "show the journal: profile, stages, pending reboot" } },
	  "usage: gpuprov status\n"
	  "\n"
	  "Shows the journal: installed profile and digest, each stage's state and\n"
	  "time, files written and any pending reboot; also what else wants a reboot\n"
	  "(/var/run/reboot-required and its .pkgs list, and on the RHEL family\n"
	  "'dnf needs-restarting -r').\n",
	  0,
	  false,
	  run_status },
	{ "history",
	  { { "history", "list the installs gpuprov recorded, newest first" } },
	  "usage: gpuprov history\n"
	  "\n"
	  "Lists the history the journal keeps (the last 16 profiles installed),\n"
	  "newest first: when each started, its profile and sha256, how it ended\n"
	  "(completed, reboot pending, failed, blocked, interrupted by a kill or a\n"
	  "signal, uninstalled) and whether it ended verified; * marks the current\n"
	  "one. Each entry keeps a copy of the resolved profile, the exact package\n"
	  "versions, holds and files with their backups (--json prints them).\n",
	  0,
	  false,
	  run_history },
	{ "uninstall",
	  { { "uninstall [--dry-run] [--only S,..] [--skip S,..]",
	      "remove what gpuprov added, stages in reverse order" } },
	  "usage: gpuprov uninstall [--dry-run] [--only S,..] [--skip S,..]\n"
	  "\n"
	  "Removes what the journal says gpuprov added, and only that, stages in\n"
	  "reverse order: the packages it installed (not those there before it),\n"
	  "the holds it set (released), the files it wrote, repository lists and\n"
	  "keys among them (a file it replaced gets its backup back). A package that\n"
	  "was there before and that gpuprov moved to another version cannot be put\n"
	  "back: the plan lists it and it is kept as it is. A full plan is made\n"
	  "first; --dry-run prints it and changes nothing. Exits 5 when the driver\n"
	  "went: reboot to unload its module.\n",
	  OPT_DRY_RUN | OPT_SELECT,
	  false,
	  run_uninstall },
	{ "rollback",
	  { { "rollback [--to N] [--dry-run]",
	      "go back to the previous install's state (or history entry N)" } },
	  "usage: gpuprov rollback [--to N] [--dry-run] [--only S,..] [--skip S,..]\n"
	  "                        [--cache-dir DIR] [--ca-file FILE]\n"
	  "                        [--reboot=never|auto] [--mirror FROM=TO]...\n"
	  "                        [--offline]\n"
	  "\n"
	  "Makes the state of the history entry before the current one (or of entry\n"
	  "N as 'gpuprov history' numbers them) again: first the packages, each at\n"
	  "exactly the version the entry recorded (downgrades included), those\n"
	  "gpuprov installed since removed, the holds as they were, the files\n"
	  "gpuprov wrote since put back (an operator's from its backup); then the\n"
	  "stages with the entry's copy of its profile, as an install of it (its\n"
	  "files, the Python environment's pins, the reboot a changed driver needs:\n"
	  "exit 5; --reboot as for install). A full plan is made first; --dry-run\n"
	  "prints it and changes nothing. Refused (exit 4) before anything changes\n"
	  "when no configured repository offers an old version any more, naming\n"
	  "them, and on dnf roots when it would install packages. The history gets\n"
	  "a new entry that says which one it rolled back to.\n",
	  OPT_DRY_RUN | OPT_SELECT | OPT_FETCH | OPT_TO | OPT_REBOOT,
	  false,
	  run_rollback },
	{ "resume",
	  { { "resume",
	      "continue an install after its reboot (gpuprov-resume.service)" } },
	  "usage: gpuprov resume\n"
	  "\n"
	  "What gpuprov-resume.service runs at boot after 'install --reboot=auto'\n"
	  "rebooted: removes the marker /var/lib/gpuprov/resume first (so that a\n"
	  "crash does not loop), counts the boot in the journal, runs the install\n"
	  "command the marker records on this root, then verify --textfile. Without\n"
	  "a marker it does nothing.\n",
	  0,
	  false,
	  run_resume },
	{ "detect",
	  { { "detect", "show the OS, kernel, Secure Boot state and NVIDIA GPUs,\n"
	                "and the profiles that fit, best first" } },
	  "usage: gpuprov detect\n"
	  "\n"
	  "Shows what the root is: its OS, running kernel, Secure Boot state (on, off,\n"
	  "not UEFI, unknown) and each NVIDIA GPU (PCI address, device id, name,\n"
	  "architecture, compute capability, current kernel driver); a device id\n"
	  "gpuprov does not know is shown as unknown, not guessed. Then the profiles\n"
	  "whose match fits the root and that can be installed as they are (no\n"
	  "distro base, none missing a pin), best first: those naming its GPUs and\n"
	  "distro, then those naming its distro only. Changes nothing; a root\n"
	  "without an NVIDIA GPU is not an error.\n",
	  0,
	  false,
	  run_detect },
	{ "profiles",
	  { { "profiles list [--names]",
	      "list the profiles: name, distro, GPUs, description" },
	    { "profiles show NAME [--resolved]",
	      "print a profile as written, or after inheritance" },
	    { "profiles lint FILE...",
	      "check profile files: format and compatibility" } },
	  "usage: gpuprov profiles list [--names]\n"
	  "       gpuprov profiles show NAME [--resolved]\n"
	  "       gpuprov profiles lint FILE...\n"
	  "\n"
	  "list shows each profile's name, distro, GPU models and description;\n"
	  "--names only the names, one a line (for scripts and completion). show\n"
	  "prints the profile file as written, or with --resolved the profile after\n"
	  "inheritance as JSON. lint checks each file's format, then the\n"
	  "compatibility of the versions it pins and that every download it needs\n"
	  "is pinned, and reports every problem of every file: exit 65 when a file\n"
	  "is invalid, else 4 when one is incompatible or would be blocked.\n"
	  "\n"
	  "Profile search path: --profile-dir, /etc/gpuprov/profiles, the installed\n"
	  "share directory, then the source tree's profiles/.\n",
	  OPT_RESOLVED | OPT_NAMES,
	  true,
	  run_profiles },
	{ "stages",
	  { { "stages", "list the stages in order: summary, profile keys, the\n"
	                "stages whose settings each reads" } },
	  "usage: gpuprov stages\n"
	  "\n"
	  "Lists the stages in the order they run: each with its summary, the keys\n"
	  "of its stages.<name> object in a profile (with their types) and the other\n"
	  "stages whose settings it reads. With --json one document, each key also\n"
	  "with its JSON Schema.\n",
	  0,
	  false,
	  run_stages },
	{ "gpu-settings",
	  { { "gpu-settings apply SETTING...",
	      "set GPU settings through NVML (the gpu_settings\n"
	      "stage's boot unit runs it)" },
	    { "gpu-settings reset SETTING=default...",
	      "give GPU settings back to the GPUs' defaults\n"
	      "(the gpu_settings stage's uninstall runs it)" } },
	  "usage: gpuprov gpu-settings apply SETTING...\n"
	  "       gpuprov gpu-settings reset SETTING=default...\n"
	  "\n"
	  "Sets each SETTING on every GPU through NVML, as the gpu_settings stage's\n"
	  "boot unit, gpuprov-gpu-settings.service, does at every boot: "
	  "power_limit_w=W,\n"
	  "power_limit_fraction=F (of the default limit), "
	  "locked_gpu_clocks_mhz=MIN,MAX,\n"
	  "application_clocks_mhz=MEMORY,GRAPHICS, compute_mode=default|prohibited|\n"
	  "exclusive_process, ecc=on|off (pending until a reboot), mig=on|off. A power\n"
	  "limit outside a GPU's limits is refused, not clamped. Prints what was set;\n"
	  "exits 1 when a setting could not be set.\n"
	  "\n"
	  "reset gives each SETTING back to the GPU's default through NVML, as the\n"
	  "gpu_settings stage's uninstall does on the live host: "
	  "power_limit_w=default\n"
	  "(NVML's default limit), locked_gpu_clocks_mhz=default (unlocked),\n"
	  "application_clocks_mhz=default, compute_mode=default. ECC and MIG modes are\n"
	  "left as they are. Prints what was reset; exits 1 when one could not be.\n",
	  0,
	  true,
	  run_gpu_settings },
};

/* The option behind each OPT_* bit, for "does not apply" errors. */
static const struct {
	unsigned bit;
	const char *name;
} option_names[] = {
	{ OPT_PROFILE, "--profile" },
	{ OPT_DRY_RUN, "--dry-run" },
	{ OPT_SELECT, "--only/--skip" },
	{ OPT_FORCE, "--force" },
	{ OPT_RESOLVED, "--resolved" },
	{ OPT_FETCH, "--cache-dir/--ca-file/--mirror/--offline" },
	{ OPT_TEXTFILE, "--textfile/--textfile-dir" },
	{ OPT_PROMETHEUS, "--format prometheus" },
	{ OPT_NAMES, "--names" },
	{ OPT_REBOOT, "--reboot" },
	{ OPT_DEEP, "--deep" },
	{ OPT_TO, "--to" },
};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

/* The second column of the global usage's command lines. */
#define SUMMARY_COLUMN 24

/* The global usage, from the command table and the stage table. */
static void usage(FILE *f)
{
	fputs(usage_head, f);
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
		const struct synopsis *rows = commands[i].synopsis;
		for (size_t k = 0; k < ARRAY_SIZE(commands[i].synopsis) && rows[k].text;
		     k++) {
			const struct synopsis *y = &rows[k];
			int n = fprintf(f, "  %s", y->text);
			if (strchr(y->text, '\n') || n >= SUMMARY_COLUMN)
				fprintf(f, "\n%*s", SUMMARY_COLUMN, "");
			else
				fprintf(f, "%*s", SUMMARY_COLUMN - n, "");
			for (const char *s = y->summary; *s; s++) {
				fputc(*s, f);
				if (*s == '\n')
					fprintf(f, "%*s", SUMMARY_COLUMN, "");
			}
			fputc('\n', f);
		}
	}
	fputs(usage_tail, f);
	fputs("stages, in order: ", f);
	for (size_t i = 0; i < gp_stage_count; i++)
		fprintf(f, "%s%s", i ? ", " : "", gp_stages[i]->name);
	fputc('\n', f);
	fputs(usage_end, f);
}

static int usage_error(const struct command *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("gpuprov: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (cmd)
		fputs(cmd->usage, stderr);
	else
		usage(stderr);
	return GP_EXIT_USAGE;
}

/* A stage list for --only or --skip: one or more names, no empty item and
 * none twice (whether each names a stage is the engine's check). NULL
 * when fine, else why not. */
static char *stage_list_problem(const char *opt, const char *arg)
{
	if (!*arg)
		return gp_xasprintf("%s needs one or more stages, e.g. %s nouveau,driver",
		                    opt, opt);
	_cleanup_strv_ char **seen = gp_xcalloc(1, sizeof(char *));
	for (const char *s = arg;; s++) {
		size_t n = strcspn(s, ",");
		if (n == 0)
			return gp_xasprintf("%s %s: an empty stage name (two commas, or "
			                    "a comma at an end); separate names with "
			                    "single commas",
			                    opt, arg);
		_cleanup_free_ char *name = gp_xstrndup(s, n);
		if (gp_strv_contains(seen, name))
			return gp_xasprintf("%s %s: names stage '%s' twice", opt, arg,
			                    name);
		gp_strv_push(&seen, name);
		s += n;
		if (!*s)
			return NULL;
	}
}

/* --only and --skip together must not name the same stage. */
static char *selection_overlap(char *const *only, char *const *skip)
{
	for (size_t i = 0; only && skip && only[i]; i++)
		if (gp_strv_contains(skip, only[i]))
			return gp_xasprintf("--only and --skip both name stage '%s'; "
			                    "name it in one of them",
			                    only[i]);
	return NULL;
}

/* A host path option that must name an existing file of the given type
 * (S_IFDIR or S_IFREG). NULL when fine, else why not. */
static char *host_path_problem(const char *opt, const char *path, mode_t type)
{
	struct stat st;
	const char *kind = type == S_IFDIR ? "directory" : "file";
	if (stat(path, &st) < 0)
		return gp_xasprintf("%s %s: %s; give an existing %s", opt, path,
		                    strerror(errno), kind);
	if ((st.st_mode & S_IFMT) != type)
		return gp_xasprintf("%s %s: not a %s%s", opt, path,
		                    type == S_IFDIR ? "directory" : "regular file",
		                    type == S_IFDIR ? "" : " (give a PEM file)");
	return NULL;
}

enum long_only {
	L_ROOT = 256,
	L_PROFILE_DIR,
	L_JSON,
	L_NO_COLOR,
	L_VERSION,
	L_PROFILE,
	L_DRY_RUN,
	L_ONLY,
	L_SKIP,
	L_FORCE,
	L_RESOLVED,
	L_CACHE_DIR,
	L_CA_FILE,
	L_MIRROR,
	L_OFFLINE,
	L_FORMAT,
	L_TEXTFILE,
	L_TEXTFILE_DIR,
	L_NAMES,
	L_DEEP,
	L_LIST_OPTIONS,
	L_LIST_COMMANDS,
	L_REBOOT,
	L_TO,
	L_END, /* one past the last */
};

/* The OPT_* bit of a command option; 0 for a global one. The one table
 * behind both "does not apply" errors and --list-options. */
static unsigned option_bit(int opt)
{
	switch (opt) {
	case L_PROFILE:
		return OPT_PROFILE;
	case L_DRY_RUN:
		return OPT_DRY_RUN;
	case L_ONLY:
	case L_SKIP:
		return OPT_SELECT;
	case L_FORCE:
		return OPT_FORCE;
	case L_RESOLVED:
		return OPT_RESOLVED;
	case L_NAMES:
		return OPT_NAMES;
	case L_TEXTFILE:
	case L_TEXTFILE_DIR:
		return OPT_TEXTFILE;
	case L_CACHE_DIR:
	case L_CA_FILE:
	case L_MIRROR:
	case L_OFFLINE:
		return OPT_FETCH;
	case L_REBOOT:
		return OPT_REBOOT;
	case L_DEEP:
		return OPT_DEEP;
	case L_TO:
		return OPT_TO;
	default:
		return 0;
	}
}

/* The values an option takes when they are a fixed set, space-separated;
 * NULL when any value goes. Stage lists (--only, --skip) are comma lists
 * of these. */
static char *option_choices(int opt)
{
	switch (opt) {
	case L_ONLY:
	case L_SKIP:
		return gp_stagelist_names(" ");
	case L_REBOOT:
		return gp_xstrdup("never auto");
	case L_FORMAT: {
		char *names = gp_format_names(), *w = names; /* "text, json" */
		for (const char *r = names; *r; r++)
			if (*r != ',')
				*w++ = *r;
		*w = '\0';
		return names;
	}
	default:
		return NULL;
	}
}

/* Options that take one value: given twice, which one was meant is a
 * guess (the last silently won before), so it is a usage error. */
static bool single_valued(int opt)
{
	switch (opt) {
	case L_ROOT:
	case L_PROFILE_DIR:
	case L_PROFILE:
	case L_ONLY:
	case L_SKIP:
	case L_CACHE_DIR:
	case L_CA_FILE:
	case L_FORMAT:
	case L_TEXTFILE_DIR:
	case L_REBOOT:
	case L_TO:
		return true;
	default:
		return false;
	}
}

/* --list-options [CMD], for shell completion: one option a line, those
 * taking a value with a trailing '=', then its choices when fixed. Without
 * CMD every option (any may stand before the command), with CMD the global
 * ones and those CMD accepts. */
static void list_options(const struct option *longopts, const struct command *cmd)
{
	for (const struct option *lo = longopts; lo->name; lo++) {
		unsigned bit = option_bit(lo->val);
		if (cmd && bit && !(cmd->allowed & bit))
			continue;
		_cleanup_free_ char *choices = option_choices(lo->val);
		printf("--%s%s%s%s\n", lo->name, lo->has_arg ? "=" : "",
		       choices ? " " : "", choices ? choices : "");
	}
}

/* --list-commands: each command, and for one with subcommands each
 * "COMMAND SUBCOMMAND", from the leading lowercase words of its synopsis
 * rows. */
static void list_commands(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
		const struct synopsis *rows = commands[i].synopsis;
		for (size_t k = 0; k < ARRAY_SIZE(commands[i].synopsis) && rows[k].text;
		     k++) {
			const char *t = rows[k].text, *end = t;
			for (const char *w = t; *w >= 'a' && *w <= 'z';) {
				w += strspn(w, "abcdefghijklmnopqrstuvwxyz-");
				if (*w && *w != ' ')
					break;
				end = w;
				w += strspn(w, " ");
			}
			printf("%.*s\n", (int)(end - t), t);
		}
	}
}

int main(int argc, char **argv)
{
	/* Everything gpuprov puts in its environment is put there now, before
	 * any thread starts: setenv races with getenv in another thread. */
	gp_modprobe_env_init();
	/* The profile loader learns the stages' keys from the stage table. */
	gp_profile_use_stage_keys(gp_stages_profile_keys());
	return cli_main(argc, argv, NULL);
}

/* The command line of the marker of a resume (resume_root: its root) runs
 * only an install, on that root. */
static bool resume_refused(const char *resume_root)
{
	if (!resume_root)
		return false;
	fputs(
	    "gpuprov: resume: the marker's command is not an install; nothing was run\n",
	    stderr);
	return true;
}

/* Parses argv and runs its command; resume_root set: argv is a resume
 * marker's, run on that root. */
static int cli_main(int argc, char **argv, const char *resume_root)
{
	static const struct option longopts[] = {
		{ "root", required_argument, NULL, L_ROOT },
		{ "profile-dir", required_argument, NULL, L_PROFILE_DIR },
		{ "json", no_argument, NULL, L_JSON },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "no-color", no_argument, NULL, L_NO_COLOR },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, L_VERSION },
		{ "profile", required_argument, NULL, L_PROFILE },
		{ "dry-run", no_argument, NULL, L_DRY_RUN },
		{ "only", required_argument, NULL, L_ONLY },
		{ "skip", required_argument, NULL, L_SKIP },
		{ "force", no_argument, NULL, L_FORCE },
		{ "resolved", no_argument, NULL, L_RESOLVED },
		{ "cache-dir", required_argument, NULL, L_CACHE_DIR },
		{ "ca-file", required_argument, NULL, L_CA_FILE },
		{ "mirror", required_argument, NULL, L_MIRROR },
		{ "offline", no_argument, NULL, L_OFFLINE },
		{ "format", required_argument, NULL, L_FORMAT },
		{ "textfile", no_argument, NULL, L_TEXTFILE },
		{ "textfile-dir", required_argument, NULL, L_TEXTFILE_DIR },
		{ "names", no_argument, NULL, L_NAMES },
		{ "deep", optional_argument, NULL, L_DEEP },
		{ "list-options", no_argument, NULL, L_LIST_OPTIONS },
		{ "list-commands", no_argument, NULL, L_LIST_COMMANDS },
		{ "reboot", required_argument, NULL, L_REBOOT },
		{ "to", required_argument, NULL, L_TO },
		{ NULL, 0, NULL, 0 },
	};
	struct cli cli = { .o = { .root = "/" } };
	struct gp_options *o = &cli.o;
	struct gp_out *out = &cli.out;
	gp_out_init(out, stdout, stderr);
	bool help = false, no_color = false, want_options = false;
	unsigned used = 0;
	int rc = GP_EXIT_OK;
	const char *first_value[L_END - L_ROOT] = { 0 };
	bool json = false;
	enum gp_format format = GP_FORMAT_TEXT;
	_cleanup_free_ char *problem = NULL;

	/* Before getopt permutes argv: the command to repeat after a reboot,
	 * and the words as typed (getopt only moves them) for the resume
	 * marker, less those that make it a dry run. */
	_cleanup_free_ char *args_text = gp_argv_display(argv + 1);
	_cleanup_free_ char *rerun = gp_xasprintf("gpuprov %s", args_text);
	_cleanup_free_ char **typed = gp_xcalloc((size_t)argc + 1, sizeof *typed);
	memcpy(typed, argv, (size_t)argc * sizeof *argv);
	_cleanup_free_ const char **dry_words = gp_xcalloc((size_t)argc + 1,
	                                                   sizeof *dry_words);
	size_t n_dry = 0;
	cli.rerun = rerun;
	o->resumed = resume_root != NULL;
	opterr = 0;
	optind = 0; /* a resume parses a second command line */
	int opt, li = -1;
	while ((opt = getopt_long(argc, argv, ":qvh", longopts, &li)) != -1) {
		if (single_valued(opt)) {
			const char **first = &first_value[opt - L_ROOT];
			if (*first) {
				rc = usage_error(NULL,
				                 "--%s given twice ('%s', then '%s'); "
				                 "give it once",
				                 longopts[li].name, *first, optarg);
				goto out;
			}
			*first = optarg;
		}
		used |= option_bit(opt);
		switch (opt) {
		case L_ROOT:
			o->root = optarg;
			break;
		case L_PROFILE_DIR:
			problem = host_path_problem("--profile-dir", optarg, S_IFDIR);
			if (problem) {
				rc = usage_error(NULL, "%s", problem);
				goto out;
			}
			o->profile_dir = optarg;
			break;
		case L_JSON:
			json = true;
			break;
		case 'q':
			out->verbosity = -1;
			break;
		case 'v':
			out->verbosity = 1;
			break;
		case L_NO_COLOR:
			no_color = true;
			break;
		case 'h':
			help = true;
			break;
		case L_VERSION:
			if (resume_refused(resume_root))
				return GP_EXIT_INVALID_INPUT;
			printf("gpuprov %s\n", GP_VERSION);
			return GP_EXIT_OK;
		case L_PROFILE:
			o->profile = optarg;
			break;
		case L_FORCE:
			o->force = true;
			break;
		case L_RESOLVED:
			cli.resolved = true;
			break;
		case L_NAMES:
			cli.names = true;
			break;
		case L_LIST_OPTIONS:
			want_options = true;
			break;
		case L_LIST_COMMANDS:
			if (resume_refused(resume_root)) {
				rc = GP_EXIT_INVALID_INPUT;
				goto out;
			}
			list_commands();
			goto out;
		case L_DRY_RUN:
			o->dry_run = true;
			dry_words[n_dry++] = argv[optind - 1];
			break;
		case L_ONLY:
		case L_SKIP: {
			problem = stage_list_problem(opt == L_ONLY ? "--only" : "--skip",
			                             optarg);
			if (problem) {
				rc = usage_error(NULL, "%s", problem);
				goto out;
			}
			char ***list = opt == L_ONLY ? &o->only : &o->skip;
			*list = gp_strv_split(optarg, ',');
			break;
		}
		case L_CACHE_DIR:
			if (optarg[0] != '/') {
				rc = usage_error(NULL,
				                 "--cache-dir %s: give an absolute path "
				                 "inside the root",
				                 optarg);
				goto out;
			}
			o->cache_dir = optarg;
			break;
		case L_CA_FILE:
			problem = host_path_problem("--ca-file", optarg, S_IFREG);
			if (problem) {
				rc = usage_error(NULL, "%s", problem);
				goto out;
			}
			o->ca_file = optarg;
			break;
		case L_MIRROR: {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || !eq[1]) {
				rc = usage_error(NULL, "--mirror %s: expected FROM=TO",
				                 optarg);
				goto out;
			}
			*eq = '\0';
			o->mirrors = gp_xrealloc(o->mirrors,
			                         (o->n_mirrors + 1) * sizeof *o->mirrors);
			o->mirrors[o->n_mirrors++] = (struct gp_fetch_mirror){ optarg,
				                                               eq + 1 };
			break;
		}
		case L_OFFLINE:
			o->offline = true;
			break;
		case L_REBOOT:
			if (strcmp(optarg, "never") != 0 && strcmp(optarg, "auto") != 0) {
				rc = usage_error(NULL, "--reboot %s: give never or auto",
				                 optarg);
				goto out;
			}
			o->reboot_auto = strcmp(optarg, "auto") == 0;
			break;
		case L_FORMAT:
			if (gp_format_parse(optarg, &format) < 0) {
				_cleanup_free_ char *names = gp_format_names();
				rc = usage_error(NULL, "--format %s: give one of: %s",
				                 optarg, names);
				goto out;
			}
			if (format == GP_FORMAT_PROMETHEUS)
				used |= OPT_PROMETHEUS;
			break;
		case L_TEXTFILE_DIR:
			if (optarg[0] != '/') {
				rc = usage_error(
				    NULL,
				    "--textfile-dir %s: give an absolute path "
				    "inside the root",
				    optarg);
				goto out;
			}
			o->textfile_dir = optarg;
			/* The directory implies the file. */
			__attribute__((fallthrough));
		case L_TEXTFILE:
			o->textfile = true;
			break;
		case L_TO: {
			char *end = NULL;
			errno = 0;
			long n = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || n < 1 || n > 999999999) {
				rc = usage_error(NULL,
				                 "--to %s: give a history entry's id (a "
				                 "number 'gpuprov history' lists)",
				                 optarg);
				goto out;
			}
			o->rollback_to = n;
			break;
		}
		case L_DEEP:
			if (optarg && strcmp(optarg, "quick") != 0) {
				rc = usage_error(NULL,
				                 "--deep=%s: give --deep or --deep=quick",
				                 optarg);
				goto out;
			}
			o->deep = optarg ? GP_DEEP_QUICK : GP_DEEP_FULL;
			break;
		case ':':
			rc = usage_error(NULL, "option '%s' needs an argument",
			                 argv[optind - 1]);
			goto out;
		default:
			rc = usage_error(NULL, "unknown option '%s'", argv[optind - 1]);
			goto out;
		}
	}
	if (json && first_value[L_FORMAT - L_ROOT] && format != GP_FORMAT_JSON) {
		rc = usage_error(NULL,
		                 "--json and --format %s contradict each other; "
		                 "give one of them",
		                 gp_format_name(format));
		goto out;
	}
	out->format = json ? GP_FORMAT_JSON : format;
	problem = selection_overlap(o->only, o->skip);
	if (problem) {
		rc = usage_error(NULL, "%s", problem);
		goto out;
	}
	out->color = !no_color && !getenv("NO_COLOR") && isatty(fileno(stdout)) &&
	             out->format == GP_FORMAT_TEXT;
	o->events = gp_progress_events(out);

	if (resume_root && (want_options || help || optind >= argc ||
	                    strcmp(argv[optind], "install") != 0)) {
		resume_refused(resume_root);
		rc = GP_EXIT_INVALID_INPUT;
		goto out;
	}
	if (resume_root)
		o->root = resume_root; /* the root the marker was found in */
	if (want_options) {
		const struct command *cmd = optind < argc ? find_command(argv[optind])
		                                          : NULL;
		if (optind < argc && !cmd) {
			rc = usage_error(NULL, "unknown command '%s'", argv[optind]);
			goto out;
		}
		list_options(longopts, cmd);
		goto out;
	}
	if (optind >= argc) {
		if (help) {
			usage(stdout);
			goto out;
		}
		rc = usage_error(NULL, "no command given");
		goto out;
	}
	const char *name = argv[optind];
	const struct command *cmd = find_command(name);
	if (!cmd) {
		rc = usage_error(NULL, "unknown command '%s'", name);
		goto out;
	}
	if (help) {
		fputs(cmd->usage, stdout);
		goto out;
	}
	for (size_t i = 0; i < ARRAY_SIZE(option_names); i++) {
		if (used & ~cmd->allowed & option_names[i].bit) {
			rc = usage_error(cmd, "option %s does not apply to this command",
			                 option_names[i].name);
			goto out;
		}
	}
	/* SIGTERM, SIGINT and SIGHUP stop a running command's whole process group
	 * and let the journal record where we were before gpuprov exits. */
	gp_run_install_stop_handlers();
	cli.args = argv + optind + 1;
	cli.nargs = argc - optind - 1;
	if (!cmd->takes_args && cli.nargs > 0) {
		rc = usage_error(cmd, "unexpected argument '%s'", cli.args[0]);
		goto out;
	}
	/* The install a plan or dry run shows arming the resume unit. */
	size_t w = 0;
	for (int i = 0; i < argc; i++) {
		bool dry = false;
		for (size_t k = 0; k < n_dry; k++)
			dry |= typed[i] == dry_words[k];
		if (typed[i] == name)
			typed[w++] = (char *)"install";
		else if (!dry)
			typed[w++] = typed[i];
	}
	typed[w] = NULL;
	o->argv = typed;
	rc = cmd->run(cmd, &cli);
out:
	gp_strv_free(o->only);
	gp_strv_free(o->skip);
	free(o->mirrors);
	if (fflush(stdout) != 0 && rc == GP_EXIT_OK)
		rc = GP_EXIT_APPLY_FAILED;
	if (gp_run_stop_signal) {
		/* The journal is saved and the command stopped: now die of the
		 * signal, so the caller sees what happened (exit 128+N). */
		int sig = gp_run_stop_signal;
		signal(sig, SIG_DFL);
		raise(sig);
	}
	return rc;
}
