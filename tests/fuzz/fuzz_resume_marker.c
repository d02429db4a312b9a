/* libFuzzer target: the resume marker (/var/lib/gpuprov/resume), whose
 * command line gpuprov-resume.service runs at boot. A parsed marker is
 * 1..GP_RESUME_ARGS_MAX non-empty words and formats back to the same
 * words; a refusal says why. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/resumemark.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	_cleanup_strv_ char **argv = NULL;
	_cleanup_free_ char *why = NULL;
	if (gp_resume_marker_parse(text, size, &argv, &why) < 0) {
		if (!why || argv)
			abort();
		return 0;
	}
	size_t n = gp_strv_len(argv);
	if (why || n < 1 || n > GP_RESUME_ARGS_MAX)
		abort();
	for (size_t i = 0; i < n; i++)
		if (!argv[i][0])
			abort();
	/* What gpuprov writes, it reads back as the same words. */
	_cleanup_free_ char *again = gp_resume_marker_format(argv);
	_cleanup_strv_ char **back = NULL;
	_cleanup_free_ char *why2 = NULL;
	if (gp_resume_marker_parse(again, strlen(again), &back, &why2) < 0 ||
	    gp_strv_len(back) != n)
		abort();
	for (size_t i = 0; i < n; i++)
		if (strcmp(argv[i], back[i]) != 0)
			abort();
	return 0;
}
