/* A CUDA toolkit's version as each of its own sources states it: version.json
 * (.cuda.version, 11.1 and later), version.txt ("CUDA Version 11.0.221", older
 * toolkits), CUDA_VERSION in include/cuda.h (12040 = 12.4) and the output of
 * `nvcc --version` ("Cuda compilation tools, release 12.4, V12.4.131").
 * Read-only; the caller runs nvcc (chrooted) and hands its output in. */
#pragma once

#include <stdbool.h>

#include "gpuprov/root.h"

struct gp_cuda_probe {
	char *json; /* "12.4.1" from version.json, or NULL */
	char *txt; /* "11.0.221" from version.txt, or NULL */
	char *header; /* "12.4" from CUDA_VERSION in include/cuda.h, or NULL */
	char *nvcc; /* "12.4.131" (the V number), or "12.4" (release), or NULL */
};
/* Fills json, txt and header from the toolkit directory dir (in the root). */
void gp_cuda_probe_files(const struct gp_root *r, const char *dir,
                         struct gp_cuda_probe *p);
void gp_cuda_probe_free(struct gp_cuda_probe *p);

/* "X.Y" of CUDA_VERSION in a cuda.h text, or NULL. */
char *gp_cuda_header_parse(const char *text);
/* .cuda.version of a version.json text, or NULL. */
char *gp_cuda_version_json_parse(const char *text);
/* The version of a version.txt text ("CUDA Version 11.0.221"), or NULL. */
char *gp_cuda_version_txt_parse(const char *text);
/* "MAJOR.MINOR.PATCHLEVEL" of the CUDNN_* defines in a cudnn_version.h
 * text, or NULL. */
char *gp_cudnn_header_parse(const char *text);
/* The version in `nvcc --version` output (V number, else release), or NULL. */
char *gp_nvcc_version_parse(const char *text);
/* Does version v ("12.4.131", "12.4") agree with want ("12.4" or "12.4.1")?
 * Agreeing means the same major.minor, and, when both carry a third part
 * and want is a release number (not an nvcc build number), that too. */
bool gp_cuda_version_agrees(const char *v, const char *want);
/* The first source's version and, when two sources disagree on major.minor,
 * false with *a and *b naming them ("version.json 12.4.1", "nvcc 11.8.89";
 * free them). */
bool gp_cuda_probe_consistent(const struct gp_cuda_probe *p, char **a, char **b);
