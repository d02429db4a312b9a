/* The metrics file node_exporter's textfile collector reads. Written only
 * by verify, which makes no other change, so it goes to the root directly
 * and not through the effect door (that refuses every effect in verify). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "gpuprov/conf.h"
#include "gpuprov/prometheus.h"
#include "gpuprov/textfile.h"
#include "gpuprov/util.h"

/* The settings file's textfile_dir in *dir (allocated, NULL when unset). */
static int conf_textfile_dir(const struct gp_root *r, char **dir, struct gp_err *err)
{
	*dir = NULL;
	_cleanup_free_ char *text = NULL;
	size_t len;
	int rc = gp_root_read_max(r, GP_CONF_FILE, GP_CONF_MAX, &text, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0) {
		_cleanup_free_ char *why = gp_root_read_error(r, GP_CONF_FILE,
		                                              GP_CONF_MAX, rc);
		return gp_fail(err, GP_EINPUT,
		               "%s; fix it, or remove it to use the defaults", why);
	}
	struct gp_conf conf;
	size_t line;
	_cleanup_free_ char *why = NULL;
	if (gp_conf_parse(text, len, &conf, &line, &why) < 0) {
		_cleanup_free_ char *host = gp_root_host_path(r, GP_CONF_FILE);
		return gp_fail(err, GP_EINPUT, "%s:%zu: %s", host, line, why);
	}
	*dir = TAKE_PTR(conf.textfile_dir);
	return 0;
}

int gp_textfile_path(const struct gp_root *r, const char *dir, char **path,
                     struct gp_err *err)
{
	_cleanup_free_ char *configured = NULL;
	const char *from = "--textfile-dir";
	if (!dir) {
		if (conf_textfile_dir(r, &configured, err) < 0)
			return -1;
		dir = configured ? configured : GP_TEXTFILE_DIR_DEFAULT;
		from = configured ? "textfile_dir in " GP_CONF_FILE : "the default";
	}
	/* "/dir/" would follow a symlink at dir in the lstat below. */
	_cleanup_free_ char *clean = gp_xstrdup(dir);
	for (size_t n = strlen(clean); n > 1 && clean[n - 1] == '/'; n--)
		clean[n - 1] = '\0';
	_cleanup_free_ char *host = gp_root_host_path(r, clean);
	struct stat st;
	int rc = gp_root_lstat(r, clean, &st);
	if (rc < 0)
		return gp_fail(err, GP_EOPTION,
		               "textfile directory %s (%s): %s; create it (Debian's "
		               "prometheus-node-exporter does), or give another with "
		               "--textfile-dir DIR or textfile_dir in %s",
		               host, from, gp_strerror(rc), GP_CONF_FILE);
	if (S_ISLNK(st.st_mode))
		return gp_fail(
		    err, GP_EOPTION,
		    "textfile directory %s (%s) is a symlink; give the directory "
		    "itself",
		    host, from);
	if (!S_ISDIR(st.st_mode))
		return gp_fail(err, GP_EOPTION,
		               "textfile directory %s (%s) is not a directory; give the "
		               "directory node_exporter's textfile collector reads",
		               host, from);
	*path = gp_xasprintf("%s/%s", strcmp(clean, "/") == 0 ? "" : clean,
	                     GP_TEXTFILE_NAME);
	return 0;
}

int gp_textfile_write(const struct gp_root *r, const char *path, const char *data,
                      size_t len, struct gp_err *err)
{
	/* Mode 0644: node_exporter runs as its own user and must read it. */
	int rc = gp_root_write_atomic(r, path, data, len, 0644, geteuid(), getegid());
	if (rc == 0)
		return 0;
	_cleanup_free_ char *host = gp_root_host_path(r, path);
	return gp_fail(err, GP_EFAILED,
	               "cannot write the textfile %s: %s; nothing was replaced (check "
	               "that it is not a directory and that the directory is writable)",
	               host, gp_strerror(rc));
}
