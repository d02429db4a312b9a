/* Unified diff of two texts, as `diff -u` prints it (3 lines of context),
 * for plans. Returns "" when the texts are equal. Never fails. */
#pragma once

#include <stddef.h>

char *gp_unified_diff(const char *old_label, const char *old_text, size_t old_len,
                      const char *new_label, const char *new_text, size_t new_len);
