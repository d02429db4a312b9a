/* The driver stage's verify hints for the return codes of nvmlInit_v2 and
 * cuInit (src/stages/driver_hints.c): one table per library, code -> hint. */
#pragma once

/* The hint for a failed nvmlInit_v2 (rc != GP_NVML_SUCCESS), or NULL when
 * the likeliest reason the module is not loaded is the hint. */
const char *gp_driver_nvml_hint(int rc);
/* The hint for a failed cuInit (rc != GP_CUDA_SUCCESS), or NULL when the
 * likeliest reason the module is not loaded is the hint. */
const char *gp_driver_cuinit_hint(int rc);
