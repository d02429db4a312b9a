/* The resume marker, /var/lib/gpuprov/resume (resumemark.c): the command
 * line of an install that rebooted with --reboot=auto, which
 * gpuprov-resume.service runs again after the boot (`gpuprov resume`). Its
 * text is one JSON array of strings, the argv as it was typed. The parser
 * touches no file: the caller reads the bytes through the root layer. */
#pragma once

#include <stddef.h>

#define GP_RESUME_MARKER "/var/lib/gpuprov/resume"
/* Bounds on what the parser accepts: a real command line is far smaller. */
#define GP_RESUME_MARKER_MAX ((size_t)64 << 10) /* 64 KiB */
#define GP_RESUME_ARGS_MAX 256

/* The marker's text for argv (NULL-terminated), ending in a newline. */
char *gp_resume_marker_format(char *const *argv);
/* Parses len bytes into *argv (NULL-terminated, at least one word, each a
 * non-empty string without NUL). 0, or -EINVAL with *why (allocated: what
 * is wrong). */
int gp_resume_marker_parse(const char *text, size_t len, char ***argv, char **why);
