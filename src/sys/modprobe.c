/* What the root's modprobe configuration says about one module (is it
 * blacklisted, which options does it get), read with libkmod so that file
 * precedence, *.conf filtering and line syntax are exactly modprobe's.
 *
 * libkmod opens the paths it is given with plain open(), so an absolute
 * symlink in <root>/etc/modprobe.d would be followed on the host. It is
 * therefore never given the root's directories: each file is read through
 * the root layer (resolved inside the root, never blocking, bounded) and
 * copied into a private temporary directory (copy_dir_pick says where),
 * one subdirectory per modprobe directory with the names kept, and libkmod
 * reads the copies. */
#include <errno.h>
#include <fcntl.h>
#include <libkmod.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
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

/* One file of the root's modprobe configuration, as libkmod will read it. */
struct config_file {
	size_t dir; /* index into gp_modprobe_dirs */
	char *name;
	char *text;
	size_t len;
};

/* Every file libkmod reads, read through the root layer: all that its
 * answer depends on but the host's /proc/cmdline (dropped, below, unless
 * the root is the host). */
struct config_snapshot {
	struct config_file *files;
	size_t n;
	bool host;
};

static void snapshot_free(struct config_snapshot *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->files[i].name);
		free(s->files[i].text);
	}
	free(s->files);
	*s = (struct config_snapshot){ 0 };
}

static bool snapshot_equal(const struct config_snapshot *a,
                           const struct config_snapshot *b)
{
	if (a->n != b->n || a->host != b->host)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct config_file *x = &a->files[i], *y = &b->files[i];
		if (x->dir != y->dir || x->len != y->len ||
		    strcmp(x->name, y->name) != 0 ||
		    memcmp(x->text, y->text, x->len) != 0)
			return false;
	}
	return true;
}

/* Reads one file for the snapshot. Returns 1 when it goes in, 0 when
 * libkmod leaves it out, or -errno. */
static int read_file(const struct gp_root *r, const char *path, struct config_file *f,
                     char **error)
{
	int rc = gp_root_read_max(r, path, GP_ROOT_CONFIG_MAX, &f->text, &f->len);
	/* libkmod leaves a directory out of its list, so a file of the same
	 * name in a later directory counts; a link dangling (inside the root)
	 * or looping stays in the list, hides such a file and reads as
	 * nothing: an empty copy. */
	if (rc == -EISDIR)
		return 0;
	if (rc == -ENOENT || rc == -ELOOP) {
		free(f->text);
		f->text = gp_xstrdup("");
		f->len = 0;
	} else if (rc < 0) {
		*error = gp_root_read_error(r, path, GP_ROOT_CONFIG_MAX, rc);
		return rc;
	}
	return 1;
}

static int snapshot_read(const struct gp_root *r, struct config_snapshot *s, char **error)
{
	*s = (struct config_snapshot){ .host = gp_root_is_host(r) };
	for (size_t i = 0; i < GP_MODPROBE_DIRS; i++) {
		_cleanup_strv_ char **names = NULL;
		int rc = gp_root_list_dir(r, gp_modprobe_dirs[i], &names);
		if (rc == -ENOENT || rc == -ENOTDIR)
			continue;
		if (rc < 0) {
			*error = gp_root_read_error(r, gp_modprobe_dirs[i], 0, rc);
			return rc;
		}
		for (size_t j = 0; names[j]; j++) {
			if (!kmod_reads(names[j]))
				continue;
			_cleanup_free_ char *path = gp_xasprintf(
			    "%s/%s", gp_modprobe_dirs[i], names[j]);
			struct config_file f = { .dir = i };
			rc = read_file(r, path, &f, error);
			if (rc <= 0) {
				free(f.text);
				if (rc < 0)
					return rc;
				continue;
			}
			f.name = gp_xstrdup(names[j]);
			s->files = gp_xrealloc(s->files, (s->n + 1) * sizeof *s->files);
			s->files[s->n++] = f;
		}
	}
	return 0;
}

/* The snapshot, copied where libkmod can read it. */
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

static int copy_file(int dirfd, const struct config_file *f)
{
	_cleanup_close_ int fd = openat(
	    dirfd, f->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	return gp_write_all(fd, f->text, f->len);
}

/* Makes cc->dir, a private directory under parent. */
static int copy_dir_make(struct config_copy *cc, const char *parent)
{
	cc->dir = gp_xasprintf("%s/gpuprov-modprobe-XXXXXX", parent);
	if (mkdtemp(cc->dir))
		return 0;
	int e = errno;
	free(cc->dir);
	cc->dir = NULL;
	return -e;
}

/* The copy lives for a few milliseconds: TMPDIR where it is set, else on
 * the memory file system /dev/shm where there is one, as creating and
 * removing a dozen files on a disk file system (ext4's journal) cost a
 * no-op run about a sixth of its time (tests/bench/noop.sh); else /tmp. */
static int copy_dir_pick(struct config_copy *cc)
{
	const char *tmp = getenv("TMPDIR");
	if (tmp && tmp[0] == '/')
		return copy_dir_make(cc, tmp);
	struct statfs fs;
	if (statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC &&
	    copy_dir_make(cc, "/dev/shm") == 0)
		return 0;
	return copy_dir_make(cc, "/tmp");
}

static int config_copy_make(const struct config_snapshot *s, struct config_copy *cc)
{
	*cc = (struct config_copy){ 0 };
	int rc = copy_dir_pick(cc);
	if (rc < 0)
		return rc;
	size_t next = 0;
	for (size_t i = 0; i < GP_MODPROBE_DIRS; i++) {
		cc->paths[i] = gp_xasprintf("%s/%zu", cc->dir, i);
		if (mkdir(cc->paths[i], 0700) < 0)
			return -errno;
		_cleanup_close_ int dfd = open(cc->paths[i],
		                               O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return -errno;
		for (; next < s->n && s->files[next].dir == i; next++) {
			rc = copy_file(dfd, &s->files[next]);
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

/* What libkmod said about each module of the last query, and the
 * configuration it said it for. libkmod's answer depends on nothing but the
 * files' names, directories and bytes (and the host's command line, only
 * counted when the root is the host, where it does not change while gpuprov
 * runs), so the same snapshot gets the same answer without copying it out
 * and parsing it again: the plan pass, the real pass and the re-check after
 * an apply that changed nothing ask the same question. An apply that
 * changed a file changes the snapshot. */
static struct {
	pthread_mutex_t lock;
	struct config_snapshot snap;
	char **modules;
	struct gp_modprobe_facts *facts;
} cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void facts_copy(struct gp_modprobe_facts *to, const struct gp_modprobe_facts *from)
{
	*to = (struct gp_modprobe_facts){ .blacklisted = from->blacklisted,
		                          .options = gp_xstrdup(from->options) };
}

/* Answers from the cache when it holds this snapshot and every module. */
static bool cache_answer(const struct config_snapshot *s, const char *const *modules,
                         struct gp_modprobe_facts *facts)
{
	if (!cache.modules || !snapshot_equal(s, &cache.snap))
		return false;
	for (size_t i = 0; modules[i]; i++)
		if (!gp_strv_contains(cache.modules, modules[i]))
			return false;
	for (size_t i = 0; modules[i]; i++)
		for (size_t j = 0; cache.modules[j]; j++)
			if (strcmp(cache.modules[j], modules[i]) == 0)
				facts_copy(&facts[i], &cache.facts[j]);
	return true;
}

/* Takes s. */
static void cache_store(struct config_snapshot *s, const char *const *modules,
                        const struct gp_modprobe_facts *facts)
{
	size_t n = 0;
	while (modules[n])
		n++;
	snapshot_free(&cache.snap);
	for (size_t j = 0; cache.modules && cache.modules[j]; j++)
		gp_modprobe_facts_free(&cache.facts[j]);
	free(cache.facts);
	gp_strv_free(cache.modules);
	cache.snap = *s;
	*s = (struct config_snapshot){ 0 };
	cache.modules = gp_xcalloc(n + 1, sizeof(char *));
	cache.facts = gp_xcalloc(n ? n : 1, sizeof *cache.facts);
	for (size_t i = 0; i < n; i++) {
		cache.modules[i] = gp_xstrdup(modules[i]);
		facts_copy(&cache.facts[i], &facts[i]);
	}
}

/* libkmod's answer for each module from a fresh copy of the snapshot. */
static int ask_libkmod(const struct gp_root *r, const struct config_snapshot *s,
                       const char *const *modules, struct gp_modprobe_facts *facts)
{
	struct config_copy cc;
	const char *const no_paths[] = { NULL };
	int rc = config_copy_make(s, &cc);
	for (size_t i = 0; rc == 0 && modules[i]; i++) {
		struct hits all = { 0 }, cmdline = { 0 };
		/* Only the configuration is used, but kmod_new() wants a
		 * module directory: the copy's (no module index is ever
		 * opened), so that nothing of the host's is read but the
		 * command line. */
		rc = collect(cc.dir, (const char *const *)cc.paths, modules[i], &all);
		if (rc == 0 && !gp_root_is_host(r)) {
			rc = collect(cc.dir, no_paths, modules[i], &cmdline);
			if (rc == 0)
				drop_cmdline(&all, &cmdline);
		}
		if (rc == 0) {
			facts[i].blacklisted = all.blacklists > 0;
			if (all.options[0])
				facts[i].options = gp_strv_join(all.options, " ");
		}
		hits_free(&all);
		hits_free(&cmdline);
	}
	config_copy_free(&cc);
	return rc;
}

int gp_modprobe_query_modules(const struct gp_root *r, const char *const *modules,
                              struct gp_modprobe_facts *facts)
{
	size_t n = 0;
	for (; modules[n]; n++) {
		facts[n] = (struct gp_modprobe_facts){ 0 };
		if (!*modules[n])
			return -EINVAL;
	}
	if (!n)
		return -EINVAL;
	struct config_snapshot snap;
	int rc = snapshot_read(r, &snap, &facts[0].error);
	if (rc < 0) {
		snapshot_free(&snap);
		return rc;
	}
	pthread_mutex_lock(&cache.lock);
	if (!cache_answer(&snap, modules, facts)) {
		rc = ask_libkmod(r, &snap, modules, facts);
		if (rc == 0)
			cache_store(&snap, modules, facts);
	}
	pthread_mutex_unlock(&cache.lock);
	snapshot_free(&snap);
	if (rc < 0)
		for (size_t i = 0; i < n; i++) {
			free(facts[i].options);
			facts[i].options = NULL;
		}
	return rc;
}

int gp_modprobe_query(const struct gp_root *r, const char *module,
                      struct gp_modprobe_facts *f)
{
	const char *const modules[] = { module, NULL };
	*f = (struct gp_modprobe_facts){ 0 };
	if (!module)
		return -EINVAL;
	return gp_modprobe_query_modules(r, modules, f);
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
