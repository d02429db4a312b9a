/* libFuzzer target: the profile loader and validator (JSON with comments,
 * positions, duplicate keys, schema checks, extends lookups). Every input
 * must give a profile or an error, never a crash, a leak or UB. The input
 * goes in from memory (gp_profile_load_text, what gp_profile_load does
 * after reading the file); every FILE_EVERY-th input is also written to a
 * file and loaded from it, and must get the same answer (a file per input
 * made this target several times slower). */
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

#ifndef FILE_EVERY
#define FILE_EVERY 4096
#endif

static char path[4096];
static char *search[2];
static unsigned long inputs;

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

/* The input loaded from the file path names: the same verdict, message and
 * profile as from memory. */
static void check_file_path(const uint8_t *data, size_t size, int loaded,
                            const struct gp_profile *from_memory,
                            const struct gp_err *memory_err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);
	struct gp_profile *p = NULL;
	struct gp_err err = { 0 };
	if (gp_profile_load(path, search, &p, &err) != loaded)
		abort();
	if (loaded == 0 && strcmp(p->digest, from_memory->digest) != 0)
		abort();
	if (loaded < 0 && strcmp(err.msg, memory_err->msg) != 0)
		abort();
	gp_profile_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	struct gp_profile *p = NULL;
	struct gp_err err = { 0 };
	int loaded = gp_profile_load_text(path, text, size, search, &p, &err);
	if (loaded < 0 && (gp_exit_code(&err) != 65 || !err.msg[0]))
		abort(); /* every refusal is an invalid-input error with a message */
	if (inputs++ % FILE_EVERY == 0)
		check_file_path(data, size, loaded, p, &err);
	gp_profile_free(p);
	return 0;
}
