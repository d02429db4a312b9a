/* What the root's modprobe configuration says about one module (is it
 * blacklisted, which options does it get), read with libkmod so that file
 * precedence, *.conf filtering and line syntax are exactly modprobe's.
 *
 * libkmod opens the paths it is given with plain open(), so an absolute
 * symlink in <root>/etc/modprobe.d would be followed on the host. It is
 * therefore never given the root's directories: each file is read through
 * the root layer (resolved inside the root, never blocking, bounded) and
 * copied into a private temporary directory, one subdirectory per modprobe
 * directory with the names kept, and libkmod reads the copies. */
#include <errno.h>
#include <fcntl.h>
#include <libkmod.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuprov/modprobe.h"
#include "gpuprov/util.h"

static void kmod_unrefp(struct kmod_ctx **ctx)
{
	kmod_unref(*ctx);
}

static void kmod_config_iter_freep(struct kmod_config_iter **it)
{
	/* kmod_config_iter_free_iter() does not accept NULL. */
	if (*it)
		kmod_config_iter_free_iter(*it);
}

#define _cleanup_kmod_ctx_ _cleanup_(kmod_unrefp)
#define _cleanup_kmod_iter_ _cleanup_(kmod_config_iter_freep)

static void log_nothing(_unused_ void *data, _unused_ int priority,
                        _unused_ const char *file, _unused_ int line,
                        _unused_ const char *fn, _unused_ const char *format,
                        _unused_ va_list args)
{
}

void gp_modprobe_env_init(void)
{
	setenv("KMOD_LOG", "0", 0);
}

/* kmod_new() with the log function that keeps the context quiet once it is
 * made; the configuration it parses on the way stays quiet through KMOD_LOG
 * (gp_modprobe_env_init). The environment is not touched here: the download
 * thread's libcurl may be reading it (getenv of the proxy variables). */
static struct kmod_ctx *kmod_new_quiet(const char *dirname, const char *const *paths)
{
	struct kmod_ctx *ctx = kmod_new(dirname, paths);
	if (ctx)
		kmod_set_log_fn(ctx, log_nothing, NULL);
	return ctx;
}

/* Module names compare with '-' and '_' equal, as modprobe and the kernel
 * do. libkmod stores names from files with '_' but keeps the kernel command
 * line's modprobe.blacklist= names as written. Also used for parameter
 * names, which the kernel compares the same way (parameq()). */
static bool name_eq(const char *a, size_t alen, const char *b)
{
	size_t i = 0;
	for (; i < alen && b[i]; i++) {
		char ca = a[i] == '-' ? '_' : a[i];
		char cb = b[i] == '-' ? '_' : b[i];
		if (ca != cb)
			return false;
	}
	return i == alen && b[i] == '\0';
}

/* What one libkmod context says about one module. */
struct hits {
	/* How many "blacklist <module>" lines. */
	size_t blacklists;
	/* Each "options <module> ..." value, in libkmod's order. */
	char **options;
};

static void hits_free(struct hits *h)
{
	gp_strv_free(h->options);
	*h = (struct hits){ 0 };
}

static int collect(const char *moddir, const char *const *paths, const char *module,
                   struct hits *h)
{
	*h = (struct hits){ .options = gp_xcalloc(1, sizeof(char *)) };

	_cleanup_kmod_ctx_ struct kmod_ctx *ctx = kmod_new_quiet(moddir, paths);
	if (!ctx)
		return -ENOMEM; /* its only failure besides a NULL dirname */

	_cleanup_kmod_iter_ struct kmod_config_iter *bl = kmod_config_get_blacklists(ctx);
	if (!bl)
		return -ENOMEM;
	while (kmod_config_iter_next(bl)) {
		const char *key = kmod_config_iter_get_key(bl);
		if (key && name_eq(key, strlen(key), module))
			h->blacklists++;
	}

	_cleanup_kmod_iter_ struct kmod_config_iter *opt = kmod_config_get_options(ctx);
	if (!opt)
		return -ENOMEM;
	while (kmod_config_iter_next(opt)) {
		const char *key = kmod_config_iter_get_key(opt);
		const char *value = kmod_config_iter_get_value(opt);
		if (key && value && name_eq(key, strlen(key), module))
			gp_strv_push(&h->options, value);
	}
	return 0;
}

/* Removes what came from the kernel command line. libkmod always parses the
 * host's /proc/cmdline as well, after the files, so its entries are the tail
 * of each list; for another root they describe the wrong machine. cmdline
 * holds what a context with no configuration paths saw. */
static void drop_cmdline(struct hits *all, const struct hits *cmdline)
{
	all->blacklists = all->blacklists > cmdline->blacklists
	                      ? all->blacklists - cmdline->blacklists
	                      : 0;
	for (size_t i = gp_strv_len(cmdline->options); i-- > 0;) {
		for (size_t j = gp_strv_len(all->options); j-- > 0;) {
			if (strcmp(all->options[j], cmdline->options[i]) != 0)
				continue;
			free(all->options[j]);
			memmove(&all->options[j], &all->options[j + 1],
			        (gp_strv_len(all->options + j + 1) + 1) * sizeof(char *));
			break;
		}
	}
}

/* The names libkmod reads from a configuration directory (its
 * conf_files_filter_out): not hidden, ending in .conf or .alias. */
static bool kmod_reads(const char *name)
{
	return name[0] != '.' && ((gp_str_ends_with(name, ".conf") && strlen(name) > 5) ||
	                          (gp_str_ends_with(name, ".alias") && strlen(name) > 6));
}

/* The root's modprobe configuration, copied where libkmod can read it. */
struct config_copy {
	char *dir; /* private temporary directory, removed by config_copy_free */
	char *paths[GP_MODPROBE_DIRS + 1]; /* dir/0 ... dir/3, NULL-terminated */
};

static void config_copy_free(struct config_copy *cc)
{
	if (cc->dir)
		gp_rm_tree_at(AT_FDCWD, cc->dir);
	free(cc->dir);
	for (size_t i = 0; i < GP_MODPROBE_DIRS; i++)
		free(cc->paths[i]);
	*cc = (struct config_copy){ 0 };
}

static int copy_file(const struct gp_root *r, const char *path, int dfd, const char *name,
                     char **error)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int rc = gp_root_read_max(r, path, GP_ROOT_CONFIG_MAX, &text, &len);
	/* libkmod leaves a directory out of its list, so a file of the same
	 * name in a later directory counts; a link dangling (inside the root)
	 * or looping stays in the list, hides such a file and reads as
	 * nothing: an empty copy. */
	if (rc == -EISDIR)
		return 0;
	if (rc == -ENOENT || rc == -ELOOP)
		len = 0;
	else if (rc < 0) {
		*error = gp_root_read_error(r, path, GP_ROOT_CONFIG_MAX, rc);
		return rc;
	}
	_cleanup_close_ int fd = openat(
	    dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	return gp_write_all(fd, text, len);
}

static int config_copy_make(const struct gp_root *r, struct config_copy *cc, char **error)
{
	*cc = (struct config_copy){ 0 };
	const char *tmp = getenv("TMPDIR");
	cc->dir = gp_xasprintf("%s/gpuprov-modprobe-XXXXXX",
	                       tmp && tmp[0] == '/' ? tmp : "/tmp");
	if (!mkdtemp(cc->dir)) {
		int e = errno;
		free(cc->dir);
		cc->dir = NULL;
		return -e;
	}
	for (size_t i = 0; i < GP_MODPROBE_DIRS; i++) {
		cc->paths[i] = gp_xasprintf("%s/%zu", cc->dir, i);
		if (mkdir(cc->paths[i], 0700) < 0)
			return -errno;
		_cleanup_strv_ char **names = NULL;
		int rc = gp_root_list_dir(r, gp_modprobe_dirs[i], &names);
		if (rc == -ENOENT || rc == -ENOTDIR)
			continue;
		if (rc < 0) {
			*error = gp_root_read_error(r, gp_modprobe_dirs[i], 0, rc);
			return rc;
		}
		_cleanup_close_ int dfd = open(cc->paths[i],
		                               O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return -errno;
		for (size_t j = 0; names[j]; j++) {
			if (!kmod_reads(names[j]))
				continue;
			_cleanup_free_ char *path = gp_xasprintf(
			    "%s/%s", gp_modprobe_dirs[i], names[j]);
			rc = copy_file(r, path, dfd, names[j], error);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* Search order and precedence of kmod's defaults: a file in an earlier
 * directory hides one with the same name in a later one. */
const char *const gp_modprobe_dirs[GP_MODPROBE_DIRS] = {
	"/etc/modprobe.d",
	"/run/modprobe.d",
	"/usr/local/lib/modprobe.d",
	"/lib/modprobe.d",
};

int gp_modprobe_query(const struct gp_root *r, const char *module,
                      struct gp_modprobe_facts *f)
{
	struct config_copy cc;
	const char *const no_paths[] = { NULL };
	struct hits all = { 0 }, cmdline = { 0 };
	int rc;

	*f = (struct gp_modprobe_facts){ 0 };
	if (!module || !*module)
		return -EINVAL;

	rc = config_copy_make(r, &cc, &f->error);
	/* Only the configuration is used, but kmod_new() wants a module
	 * directory: the copy's (no module index is ever opened), so that
	 * nothing of the host's is read but the command line. */
	if (rc == 0)
		rc = collect(cc.dir, (const char *const *)cc.paths, module, &all);
	if (rc == 0 && !gp_root_is_host(r)) {
		rc = collect(cc.dir, no_paths, module, &cmdline);
		if (rc == 0)
			drop_cmdline(&all, &cmdline);
	}
	config_copy_free(&cc);

	if (rc == 0) {
		f->blacklisted = all.blacklists > 0;
		if (all.options[0])
			f->options = gp_strv_join(all.options, " ");
	}
	hits_free(&all);
	hits_free(&cmdline);
	return rc;
}

void gp_modprobe_facts_free(struct gp_modprobe_facts *f)
{
	if (!f)
		return;
	free(f->options);
	free(f->error);
	*f = (struct gp_modprobe_facts){ 0 };
}

bool gp_modprobe_option_is(const struct gp_modprobe_facts *f, const char *key,
                           const char *value)
{
	static const char blanks[] = " \t\n";
	bool match = false;

	if (!f || !f->options || !key || !value)
		return false;

	for (const char *s = f->options;;) {
		s += strspn(s, blanks);
		if (!*s)
			break;

		/* One parameter, split as the kernel's next_arg() does: blanks
		 * inside double quotes do not end it, the first '=' splits it. */
		const char *start = s, *eq = NULL;
		bool quoted = false;
		for (; *s && (quoted || !strchr(blanks, *s)); s++) {
			if (*s == '"')
				quoted = !quoted;
			else if (*s == '=' && !eq)
				eq = s;
		}
		if (!name_eq(start, (size_t)((eq ? eq : s) - start), key))
			continue;

		/* The last setting wins, as when the kernel applies them in
		 * order; a bare "key" sets a flag and equals no value. */
		match = false;
		if (!eq)
			continue;
		const char *v = eq + 1;
		size_t vlen = (size_t)(s - v);
		if (vlen > 0 && v[0] == '"') {
			v++;
			vlen--;
			if (vlen > 0 && v[vlen - 1] == '"')
				vlen--;
		}
		match = strlen(value) == vlen && memcmp(v, value, vlen) == 0;
	}
	return match;
}
