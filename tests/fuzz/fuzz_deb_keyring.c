/* libFuzzer target: a Debian package (ar members, control and data tars,
 * compressed) searched for its keyring file, as the cuda stage reads a
 * downloaded cuda-keyring .deb. A keyring found has an in-root path under
 * one of the two keyring directories. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpuprov/debfile.h"
#include "gpuprov/openpgp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	void *copy = gp_xmalloc(size ? size : 1);
	memcpy(copy, data, size);
	char *path = NULL, *keyring = NULL;
	size_t klen = 0;
	const char *msg = NULL;
	int rc = gp_deb_keyring(copy, size, &path, &keyring, &klen, &msg);
	if (rc == 0) {
		if (!path || !keyring ||
		    (strncmp(path, "/usr/share/keyrings/", 20) != 0 &&
		     strncmp(path, "/etc/apt/trusted.gpg.d/", 23) != 0) ||
		    strstr(path, "/../"))
			abort();
		char **fprs = NULL;
		gp_openpgp_fingerprints(keyring, klen, &fprs);
		gp_strv_free(fprs);
	} else if (rc == -EINVAL && !msg) {
		abort(); /* a refusal says why */
	}
	free(path);
	free(keyring);
	free(copy);
	return 0;
}
