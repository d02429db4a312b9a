/* libFuzzer target: the profile loader and validator (JSON with comments,
 * positions, duplicate keys, schema checks, extends lookups). Every input
 * must give a profile or an error, never a crash, a leak or UB. The input
 * is written to a file because profiles are loaded from files. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "gpuprov/exitcodes.h"
#include "gpuprov/profile.h"
#include "gpuprov/stages.h"

static char path[4096];
static char *search[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(path, sizeof path, "%s/input.json", fuzz_tmpdir());
	/* Parents named by "extends" are looked up in the catalogue. */
	search[0] = GP_SRCDIR "/profiles";
	gp_profile_use_stage_keys(gp_stages_profile_keys());
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	if (write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	struct gp_profile *p = NULL;
	struct gp_err err = { 0 };
	if (gp_profile_load(path, search, &p, &err) == 0)
		gp_profile_free(p);
	else if (gp_exit_code(&err) != 65 || !err.msg[0])
		abort(); /* every refusal is an invalid-input error with a message */
	return 0;
}
