/* The pytorch stage (pytorch.c): its parsers, exported for the unit tests
 * and the fuzzer. Pure functions. */
#pragma once

#include <stdbool.h>

/* The pytorch stage's readers of installed metadata (files the environment's
 * pip and conda wrote): the Version header of a dist-info METADATA text, and
 * the version of a conda-meta record whose name normalises (PEP 503, '_'
 * for '-' and '.') to want. NULL when there is none. */
char *gp_pip_metadata_version(const char *text);
char *gp_conda_meta_version(const char *text, const char *want);
/* Does the output of `pip index versions NAME` list version exactly (its
 * "Available versions: A, B, ..." line)? */
bool gp_pip_index_offers(const char *output, const char *version);
