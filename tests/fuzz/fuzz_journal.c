/* libFuzzer target: the journal, state.json, as gp_journal_parse checks
 * it from memory. A loaded journal must take every query and update a run
 * makes and still print; a refused one is an invalid-input error with a
 * message. gp_journal_load reads the file through the root layer and hands
 * its bytes to gp_journal_parse: every ROOT_EVERY-th input also goes that
 * way, through a temporary root (a file per input would be ten times
 * slower), and must get the same answer, error message included. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/journal.h"

#ifndef ROOT_EVERY
#define ROOT_EVERY 4096
#endif

static struct gp_root root;
static char *state; /* as gp_journal_load names it */
static unsigned long inputs;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *dir = fuzz_tmpdir();
	if (gp_root_open(&root, dir) < 0 ||
	    gp_root_mkdir_p(&root, GP_STATE_DIR, 0755) < 0)
		abort();
	state = gp_root_host_path(&root, GP_STATE_FILE);
	return 0;
}

static void exercise(struct gp_journal *j)
{
	gp_journal_is_empty(j);
	gp_journal_profile_name(j);
	gp_journal_profile_path(j);
	gp_journal_reboot_reason(j);
	gp_journal_reboot_boot_id(j);
	gp_journal_file_sha256(j, "/etc/modprobe.d/blacklist-nouveau.conf");
	gp_journal_stage_get(j, "nouveau");
	gp_journal_set_stage(j, "nouveau", "done");
	cJSON *rec = gp_journal_stage(j, "cudnn");
	if (!rec)
		abort();
	gp_journal_record_file(j, "/etc/modprobe.d/blacklist-nouveau.conf", "00",
	                       "nouveau", "/var/lib/gpuprov/backup/x");
	gp_journal_set_profile(j, "p", "/p.json", "00");
	char *overrides[] = { "module_flavor", NULL };
	gp_journal_set_overrides(j, overrides);
	gp_journal_set_reboot(j, "nouveau is loaded", "boot");
	if (!gp_journal_reboot_reason(j))
		abort();
	gp_journal_clear_reboot(j);
	/* History and uninstall's records: an install begins and ends. */
	gp_journal_history(j);
	gp_journal_history_current(j);
	gp_journal_record_package(j, "nvidia-driver-535", "535.1-1", "driver");
	gp_journal_set_package_before(j, "nvidia-driver-535", "535.0-1");
	gp_journal_record_hold_set(j, "nvidia-driver-535");
	if (!gp_journal_package(j, "nvidia-driver-535"))
		abort();
	cJSON *doc = cJSON_CreateObject();
	gp_journal_history_begin(j, "p", "00", doc, NULL);
	gp_journal_history_end(j, "completed");
	cJSON_Delete(doc);
	if (!gp_journal_history_current(j))
		abort();
	gp_journal_history_uninstalled(j);
	gp_journal_forget_stage(j, "cudnn");
	char *text = cJSON_Print(j->doc); /* what gp_journal_save writes */
	if (!text)
		abort();
	free(text);
}

/* The input as state.json of the temporary root, loaded as a run loads
 * it: the same verdict and, when loaded, the same bytes and document. */
static void check_root_path(const uint8_t *data, size_t size, int parsed,
                            const struct gp_journal *from_memory,
                            const struct gp_err *memory_err)
{
	int fd = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	struct gp_journal j = { 0 };
	struct gp_err err = { 0 };
	int loaded = gp_journal_load(&root, &j, &err);
	if (loaded != parsed)
		abort();
	if (loaded == 0) {
		/* Printed, not cJSON_Compare: that one finds only the first of
		 * two equal keys. */
		_cleanup_free_ char *a = cJSON_PrintUnformatted(j.doc);
		_cleanup_free_ char *b = cJSON_PrintUnformatted(from_memory->doc);
		if (j.saved_len != from_memory->saved_len ||
		    memcmp(j.saved, from_memory->saved, size) != 0 || strcmp(a, b) != 0)
			abort();
	} else if (strcmp(err.msg, memory_err->msg) != 0) {
		abort();
	}
	gp_journal_free(&j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	struct gp_journal j = { 0 };
	struct gp_err err = { 0 };
	int parsed = gp_journal_parse(&j, state, text, size, &err);
	if (parsed == 0 && !j.doc)
		abort();
	if (parsed < 0 && (gp_exit_code(&err) != 65 || !err.msg[0]))
		abort();
	if (inputs++ % ROOT_EVERY == 0)
		check_root_path(data, size, parsed, &j, &err);
	if (parsed == 0)
		exercise(&j);
	gp_journal_free(&j);
	return 0;
}
