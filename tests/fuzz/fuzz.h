/* Shared by the libFuzzer targets: the entry points libFuzzer calls and a
 * NUL-terminated copy of the input for parsers that take text (files read
 * through the root layer arrive NUL-terminated; an embedded NUL then ends
 * the text early, which the copy reproduces). */
#pragma once
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpuprov/util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline char *fuzz_text(const uint8_t *data, size_t size)
{
	return gp_xmemdup0(data, size);
}

/* For targets whose parser reads a file: a fresh directory under TMPDIR,
 * removed with what it holds when the fuzzer exits. */
static char fuzz_dir[4096];

static inline int fuzz_remove_one(const char *path, const struct stat *st, int flag,
                                  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static inline void fuzz_remove_dir(void)
{
	nftw(fuzz_dir, fuzz_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline const char *fuzz_tmpdir(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(fuzz_dir, sizeof fuzz_dir, "%s/gpuprov-fuzz-XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(fuzz_dir))
		abort();
	atexit(fuzz_remove_dir);
	return fuzz_dir;
}
