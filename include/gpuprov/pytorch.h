/* The pytorch stage (pytorch.c): its parsers, exported for the unit tests
 * and the fuzzer. Pure functions. */
#pragma once

/* The pytorch stage's readers of installed metadata (files the environment's
 * pip and conda wrote): the Version header of a dist-info METADATA text, and
 * the version of a conda-meta record whose name normalises (PEP 503, '_'
 * for '-' and '.') to want. NULL when there is none. */
char *gp_pip_metadata_version(const char *text);
char *gp_conda_meta_version(const char *text, const char *want);
