/* `gpuprov detect` (detect.c). Returns exit codes (exitcodes.h). */
#pragma once

#include "gpuprov/engine.h"

/* `detect`: OS, running kernel, Secure Boot, NVIDIA GPUs of the
 * root and the profiles whose match fits it, best first. Read-only. */
int gp_engine_detect(const struct gp_options *o, struct gp_out *out);
