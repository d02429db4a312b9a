/* libFuzzer target: the settings file's parser (gpuprov.conf). A parsed
 * textfile_dir is absolute and one line; a refusal names a line of the
 * input and says why. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *text = fuzz_text(data, size);
	struct gp_conf conf;
	size_t line = 0;
	_cleanup_free_ char *why = NULL;
	if (gp_conf_parse(text, size, &conf, &line, &why) == 0) {
		const char *dir = conf.textfile_dir;
		if (why || (dir && (dir[0] != '/' || strchr(dir, '\n'))))
			abort();
		gp_conf_clear(&conf);
	} else if (!why || line < 1 || line > size + 1 || conf.textfile_dir) {
		abort();
	}
	return 0;
}
