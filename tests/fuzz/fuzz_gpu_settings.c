/* libFuzzer target: the words of the GPU settings boot unit's ExecStart
 * (src/pure/gpusettings.c), which anyone who edits the unit may change.
 * The input is split at spaces into words; what parses writes back as
 * words that parse to the same words again. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/gpusettings.h"

static void split(char *text, char **words, size_t max, size_t *n)
{
	*n = 0;
	char *save = NULL;
	for (char *t = strtok_r(text, " ", &save); t && *n < max;
	     t = strtok_r(NULL, " ", &save))
		words[(*n)++] = t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	char *words[GP_GPU_WANT_MAX_WORDS + 2];
	size_t n;
	split(text, words, ARRAY_SIZE(words), &n);
	struct gp_gpu_want w;
	struct gp_err err = { 0 };
	if (gp_gpu_want_parse(words, n, &w, &err) < 0)
		return 0;
	_cleanup_free_ char *out = gp_gpu_want_words(&w);
	_cleanup_free_ char *copy = gp_xstrdup(out);
	split(copy, words, ARRAY_SIZE(words), &n);
	struct gp_gpu_want back;
	if (gp_gpu_want_parse(words, n, &back, &err) < 0)
		abort();
	_cleanup_free_ char *again = gp_gpu_want_words(&back);
	if (strcmp(again, out) != 0)
		abort();
	unsigned mw;
	char *why = NULL;
	if (gp_gpu_power_target(&w, 700000, 100000, 800000, &mw, &why) == 0 && mw &&
	    (mw < 100000 || mw > 800000))
		abort();
	free(why);
	return 0;
}
