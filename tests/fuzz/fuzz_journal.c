/* libFuzzer target: the journal, state.json, as gp_journal_load reads it
 * from a root (the root layer is part of what is tested, so the input is
 * written into a temporary root's var/lib/gpuprov/state.json first; slower
 * than a buffer, but the real path). A loaded journal must take every
 * query and update a run makes and still print; a refused one is an
 * invalid-input error with a message. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/journal.h"

static struct gp_root root;
static char state[4096];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *dir = fuzz_tmpdir();
	if (gp_root_open(&root, dir) < 0 ||
	    gp_root_mkdir_p(&root, GP_STATE_DIR, 0755) < 0)
		abort();
	snprintf(state, sizeof state, "%s%s", dir, GP_STATE_FILE);
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
	char *text = cJSON_Print(j->doc); /* what gp_journal_save writes */
	if (!text)
		abort();
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	struct gp_journal j = { 0 };
	struct gp_err err = { 0 };
	if (gp_journal_load(&root, &j, &err) == 0)
		exercise(&j);
	else if (gp_exit_code(&err) != 65 || !err.msg[0])
		abort();
	gp_journal_free(&j);
	return 0;
}
