/* Package databases read as files: dpkg status and apt lists (RFC 822-style
 * stanzas), rpm's sqlite database (header blobs) and dnf's versionlock
 * list. Reading rpmdb.sqlite with libsqlite3 instead of running `rpm -q`
 * keeps queries free of commands (pkg.h promises that) and works on a root
 * whose rpm cannot run here. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "gpuprov/pkgdb.h"
#include "gpuprov/util.h"

static void entries_free(struct gp_pkgdb_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].version);
		free(e[i].depends);
		free(e[i].provides);
		free(e[i].of);
	}
	free(e);
}

void gp_pkgdb_free(struct gp_pkgdb *db)
{
	entries_free(db->e, db->n);
	entries_free(db->alias, db->n_alias);
	*db = (struct gp_pkgdb){ 0 };
}

static const struct gp_pkgdb_entry *find_in(const struct gp_pkgdb_entry *e, size_t n,
                                            const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(e[i].name, name) == 0)
			return &e[i];
	return NULL;
}

const struct gp_pkgdb_entry *gp_pkgdb_find(const struct gp_pkgdb *db, const char *name)
{
	const struct gp_pkgdb_entry *e = find_in(db->e, db->n, name);
	return e ? e : find_in(db->alias, db->n_alias, name);
}

static struct gp_pkgdb_entry *db_add(struct gp_pkgdb *db, const char *name,
                                     const char *version, bool held)
{
	if (find_in(db->e, db->n, name)) /* multiarch: the first one is enough */
		return NULL;
	db->e = gp_xrealloc(db->e, (db->n + 1) * sizeof *db->e);
	db->e[db->n] = (struct gp_pkgdb_entry){
		gp_xstrdup(name), gp_xstrdup(version), held, NULL, NULL, NULL
	};
	return &db->e[db->n++];
}

/* The fields of one stanza the readers here use (NULL when absent). */
struct stanza {
	char *pkg, *ver, *status, *depends, *pre_depends, *provides;
};

/* Pre-Depends and Depends joined by ", " ("" when neither). */
static char *stanza_depends(const struct stanza *st)
{
	struct gp_buf b = { 0 };
	if (st->pre_depends)
		gp_buf_puts(&b, st->pre_depends);
	if (st->pre_depends && st->depends)
		gp_buf_puts(&b, ", ");
	if (st->depends)
		gp_buf_puts(&b, st->depends);
	return gp_buf_steal(&b);
}

static void stanza_clear(struct stanza *st)
{
	free(st->pkg);
	free(st->ver);
	free(st->status);
	free(st->depends);
	free(st->pre_depends);
	free(st->provides);
	*st = (struct stanza){ 0 };
}

/* Calls fn with each stanza's fields; continuation lines are skipped (a
 * folded Depends is read as its first line, which apt does not write). */
static int scan_stanzas(const char *text, int (*fn)(const struct stanza *st, void *data),
                        void *data)
{
	struct stanza st = { 0 };
	const char *p = text;
	for (;;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len == 0 || (len == 1 && p[0] == '\r')) {
			if (st.pkg || st.ver || st.status || st.depends ||
			    st.pre_depends || st.provides) {
				int rc = st.pkg ? fn(&st, data) : -EINVAL;
				if (rc < 0) {
					stanza_clear(&st);
					return rc;
				}
			}
			stanza_clear(&st);
		} else if (p[0] != ' ' && p[0] != '\t') {
			static const char *const keys[] = { "Package:",     "Version:",
				                            "Status:",      "Depends:",
				                            "Pre-Depends:", "Provides:" };
			char **slots[] = { &st.pkg,     &st.ver,         &st.status,
				           &st.depends, &st.pre_depends, &st.provides };
			for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
				size_t kl = strlen(keys[k]);
				if (len > kl && strncasecmp(p, keys[k], kl) == 0) {
					const char *v = p + kl;
					size_t vl = len - kl;
					while (vl && isspace((unsigned char)*v))
						v++, vl--;
					while (vl && isspace((unsigned char)v[vl - 1]))
						vl--;
					free(*slots[k]);
					*slots[k] = gp_xstrndup(v, vl);
				}
			}
		}
		if (!nl) {
			if (len == 0)
				break;
			p += len; /* one more pass with an empty line ends the stanza */
			continue;
		}
		p = nl + 1;
	}
	stanza_clear(&st);
	return 0;
}

static int status_entry(const struct stanza *st, void *data)
{
	char want[32], flag[32], state[32];
	if (!st->status || !st->ver ||
	    sscanf(st->status, "%31s %31s %31s", want, flag, state) != 3)
		return 0;
	if (strcmp(state, "installed") != 0)
		return 0;
	struct gp_pkgdb_entry *e = db_add(data, st->pkg, st->ver,
	                                  strcmp(want, "hold") == 0);
	if (e) {
		e->depends = stanza_depends(st);
		e->provides = gp_xstrdup(st->provides ? st->provides : "");
	}
	return 0;
}

/* The package name of one alternative or Provides item: "libfoo:amd64 (>=
 * 1)" is libfoo. */
static char *relation_name(const char *item)
{
	while (isspace((unsigned char)*item))
		item++;
	return gp_xstrndup(item, strcspn(item, " \t(:[<"));
}

/* Does the group "a | b" name one of names (package names and what they
 * provide)? */
static bool group_names(const char *group, char *const *names)
{
	_cleanup_strv_ char **alts = gp_strv_split(group, '|');
	for (size_t a = 0; alts[a]; a++) {
		_cleanup_free_ char *name = relation_name(alts[a]);
		if (gp_strv_contains(names, name))
			return true;
	}
	return false;
}

/* Does an installed package outside gone[] satisfy the group? */
static bool group_holds(const struct gp_pkgdb *db, char **const *provides,
                        const bool *gone, const char *group)
{
	for (size_t i = 0; i < db->n; i++) {
		if (gone[i])
			continue;
		char *const self[] = { db->e[i].name, NULL };
		if (group_names(group, self) || group_names(group, provides[i]))
			return true;
	}
	return false;
}

static void mark_gone(const struct gp_pkgdb *db, char *const *provides, size_t i,
                      bool *gone, char ***gone_names)
{
	gone[i] = true;
	gp_strv_push(gone_names, db->e[i].name);
	for (size_t k = 0; provides[k]; k++)
		gp_strv_push(gone_names, provides[k]);
}

char **gp_pkgdb_rdepends(const struct gp_pkgdb *db, const char *const *names)
{
	char **out = gp_xcalloc(1, sizeof(char *));
	bool *gone = gp_xcalloc(db->n + 1, sizeof *gone);
	char ***provides = gp_xcalloc(db->n + 1, sizeof *provides);
	for (size_t i = 0; i < db->n; i++) {
		const char *p = db->e[i].provides ? db->e[i].provides : "";
		_cleanup_strv_ char **items = gp_strv_split(p, ',');
		provides[i] = gp_xcalloc(1, sizeof(char *));
		for (size_t k = 0; items[k]; k++) {
			_cleanup_free_ char *name = relation_name(items[k]);
			if (*name)
				gp_strv_push(&provides[i], name);
		}
	}
	_cleanup_strv_ char **gone_names = gp_xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < db->n; i++)
		if (gp_strv_contains((char *const *)names, db->e[i].name))
			mark_gone(db, provides[i], i, gone, &gone_names);
	/* Each pass adds at least one package or ends: at most n passes. */
	for (bool more = true; more;) {
		more = false;
		for (size_t i = 0; i < db->n; i++) {
			if (gone[i] || !db->e[i].depends)
				continue;
			_cleanup_strv_ char **groups = gp_strv_split(db->e[i].depends,
			                                             ',');
			for (size_t g = 0; groups[g]; g++)
				if (group_names(groups[g], gone_names) &&
				    !group_holds(db, provides, gone, groups[g])) {
					mark_gone(db, provides[i], i, gone, &gone_names);
					gp_strv_push(&out, db->e[i].name);
					more = true;
					break;
				}
		}
	}
	for (size_t i = 0; i < db->n; i++)
		gp_strv_free(provides[i]);
	free(provides);
	free(gone);
	return out;
}

int gp_dpkg_status_parse(const char *text, struct gp_pkgdb *db)
{
	*db = (struct gp_pkgdb){ 0 };
	int rc = scan_stanzas(text, status_entry, db);
	if (rc < 0)
		gp_pkgdb_free(db);
	return rc;
}

int gp_dpkg_status_read(const struct gp_root *r, struct gp_pkgdb *db)
{
	*db = (struct gp_pkgdb){ 0 };
	_cleanup_free_ char *text = NULL;
	int rc = gp_root_read(r, GP_DPKG_STATUS, &text, NULL);
	if (rc < 0)
		return rc;
	return gp_dpkg_status_parse(text, db);
}

/* --- dpkg version order ------------------------------------------------ */

static int order(int c)
{
	if (isdigit(c))
		return 0;
	if (isalpha(c))
		return c;
	if (c == '~')
		return -1;
	return c ? c + 256 : 0;
}

/* One of upstream or revision, a[0..na) against b[0..nb). */
static int verrevcmp(const char *a, size_t na, const char *b, size_t nb)
{
	size_t i = 0, j = 0;
	while (i < na || j < nb) {
		int diff = 0;
		while ((i < na && !isdigit((unsigned char)a[i])) ||
		       (j < nb && !isdigit((unsigned char)b[j]))) {
			int ac = i < na ? order((unsigned char)a[i]) : 0;
			int bc = j < nb ? order((unsigned char)b[j]) : 0;
			if (ac != bc)
				return ac - bc;
			i++, j++;
		}
		while (i < na && a[i] == '0')
			i++;
		while (j < nb && b[j] == '0')
			j++;
		while (i < na && isdigit((unsigned char)a[i]) && j < nb &&
		       isdigit((unsigned char)b[j])) {
			if (!diff)
				diff = a[i] - b[j];
			i++, j++;
		}
		if (i < na && isdigit((unsigned char)a[i]))
			return 1;
		if (j < nb && isdigit((unsigned char)b[j]))
			return -1;
		if (diff)
			return diff;
	}
	return 0;
}

struct debver {
	unsigned long epoch;
	const char *up;
	size_t up_len;
	const char *rev; /* "" when none */
};

static void split_version(const char *v, struct debver *d)
{
	const char *colon = strchr(v, ':');
	d->epoch = colon ? strtoul(v, NULL, 10) : 0;
	d->up = colon ? colon + 1 : v;
	const char *dash = strrchr(d->up, '-');
	d->up_len = dash ? (size_t)(dash - d->up) : strlen(d->up);
	d->rev = dash ? dash + 1 : "";
}

int gp_dpkg_vercmp(const char *a, const char *b)
{
	struct debver x, y;
	split_version(a, &x);
	split_version(b, &y);
	if (x.epoch != y.epoch)
		return x.epoch < y.epoch ? -1 : 1;
	int c = verrevcmp(x.up, x.up_len, y.up, y.up_len);
	if (c)
		return c;
	return verrevcmp(x.rev, strlen(x.rev), y.rev, strlen(y.rev));
}

bool gp_pkg_version_matches(const char *v, const char *u)
{
	if (strcmp(v, u) == 0)
		return true;
	struct debver x;
	split_version(v, &x);
	return strlen(u) == x.up_len && strncmp(x.up, u, x.up_len) == 0;
}

/* --- apt lists ---------------------------------------------------------- */

struct cand_scan {
	const char *name;
	char ***out;
};

static int cand_entry(const struct stanza *st, void *data)
{
	struct cand_scan *s = data;
	if (st->ver && strcmp(st->pkg, s->name) == 0 &&
	    !gp_strv_contains(*s->out, st->ver))
		gp_strv_push(s->out, st->ver);
	return 0;
}

void gp_apt_packages_scan(const char *text, const char *name, char ***versions)
{
	struct cand_scan s = { name, versions };
	scan_stanzas(text, cand_entry, &s);
}

static int cmp_newest_first(const void *a, const void *b)
{
	return gp_dpkg_vercmp(*(char *const *)b, *(char *const *)a);
}

/* Calls fn with the text of each of the root's apt Packages lists; returns
 * how many there are (0 when the lists directory is missing), or -errno. */
static int for_each_list(const struct gp_root *r,
                         void (*fn)(const char *text, void *data), void *data)
{
	_cleanup_strv_ char **files = NULL;
	int rc = gp_root_list_dir(r, GP_APT_LISTS, &files);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	int lists = 0;
	for (size_t i = 0; files[i]; i++) {
		if (!gp_str_ends_with(files[i], "_Packages"))
			continue;
		lists++;
		_cleanup_free_ char *path = gp_xasprintf("%s/%s", GP_APT_LISTS, files[i]);
		_cleanup_free_ char *text = NULL;
		if (gp_root_read(r, path, &text, NULL) == 0)
			fn(text, data);
	}
	return lists;
}

static void scan_candidates(const char *text, void *data)
{
	scan_stanzas(text, cand_entry, data);
}

int gp_apt_candidates(const struct gp_root *r, const char *name, char ***versions)
{
	*versions = gp_xcalloc(1, sizeof(char *));
	struct cand_scan s = { name, versions };
	int lists = for_each_list(r, scan_candidates, &s);
	qsort(*versions, gp_strv_len(*versions), sizeof(char *), cmp_newest_first);
	return lists;
}

/* --- apt dependencies --------------------------------------------------- */

void gp_apt_index_free(struct gp_apt_index *ix)
{
	for (size_t i = 0; i < ix->n; i++) {
		free(ix->p[i].name);
		free(ix->p[i].version);
		free(ix->p[i].depends);
	}
	free(ix->p);
	*ix = (struct gp_apt_index){ 0 };
}

static int index_entry(const struct stanza *st, void *data)
{
	struct gp_apt_index *ix = data;
	if (!st->ver)
		return 0;
	if (ix->n == ix->cap) { /* duplicates stay: a lookup finds the first */
		ix->cap = ix->cap ? 2 * ix->cap : 64;
		ix->p = gp_xrealloc(ix->p, ix->cap * sizeof *ix->p);
	}
	ix->p[ix->n++] = (struct gp_apt_pkg){ gp_xstrdup(st->pkg), gp_xstrdup(st->ver),
		                              stanza_depends(st) };
	return 0;
}

void gp_apt_index_parse(const char *text, struct gp_apt_index *ix)
{
	scan_stanzas(text, index_entry, ix);
}

static void scan_index(const char *text, void *data)
{
	gp_apt_index_parse(text, data);
}

int gp_apt_index_read(const struct gp_root *r, struct gp_apt_index *ix)
{
	*ix = (struct gp_apt_index){ 0 };
	int lists = for_each_list(r, scan_index, ix);
	if (lists < 0)
		gp_apt_index_free(ix);
	return lists;
}

const struct gp_apt_pkg *gp_apt_index_find(const struct gp_apt_index *ix,
                                           const char *name, const char *version)
{
	for (size_t i = 0; i < ix->n; i++)
		if (strcmp(ix->p[i].name, name) == 0 &&
		    strcmp(ix->p[i].version, version) == 0)
			return &ix->p[i];
	return NULL;
}

/* One dependency "name[:arch] [(op version)]" of a group without
 * alternatives: *name and *version (NULL unless op is "="). false when the
 * group is not of that shape. */
static bool exact_dependency(const char *group, char **name, char **version)
{
	*name = *version = NULL;
	if (strchr(group, '|'))
		return false; /* alternatives: the choice is apt's */
	const char *p = group + strspn(group, " \t");
	size_t nl = strcspn(p, " \t(:");
	if (!nl)
		return false;
	const char *open = strchr(p, '(');
	if (!open)
		return false;
	const char *q = open + 1 + strspn(open + 1, " \t");
	if (q[0] != '=' || q[1] == '=')
		return false;
	q += 1 + strspn(q + 1, " \t");
	size_t vl = strcspn(q, " \t)");
	if (!vl || !strchr(q, ')'))
		return false;
	*name = gp_xstrndup(p, nl);
	*version = gp_xstrndup(q, vl);
	return true;
}

void gp_apt_exact_closure(const struct gp_apt_index *ix, char ***names, char ***versions)
{
	/* A worklist over the growing vectors themselves: each member's
	 * dependencies are read once, in the order the members were added. */
	for (size_t i = 0; (*names)[i]; i++) {
		const struct gp_apt_pkg *pk = gp_apt_index_find(ix, (*names)[i],
		                                                (*versions)[i]);
		if (!pk)
			continue;
		_cleanup_strv_ char **groups = gp_strv_split(pk->depends, ',');
		for (size_t g = 0; groups[g]; g++) {
			_cleanup_free_ char *name = NULL, *version = NULL;
			if (!exact_dependency(groups[g], &name, &version) ||
			    gp_strv_contains(*names, name) ||
			    !gp_apt_index_find(ix, name, version))
				continue;
			gp_strv_push(names, name);
			gp_strv_push(versions, version);
		}
	}
}

/* Does the group (no alternatives) hold with names[] at versions[]? A
 * relation on a name outside them, or of a shape not understood, holds. */
static bool relation_agrees(const char *group, char *const *names, char *const *versions)
{
	if (strchr(group, '|'))
		return true;
	const char *p = group + strspn(group, " \t");
	_cleanup_free_ char *name = gp_xstrndup(p, strcspn(p, " \t(:"));
	const char *open = strchr(p, '(');
	ssize_t j = -1;
	for (size_t i = 0; names[i]; i++)
		if (strcmp(names[i], name) == 0)
			j = (ssize_t)i;
	if (!open || j < 0)
		return true;
	const char *q = open + 1 + strspn(open + 1, " \t");
	size_t ol = strspn(q, "<>=");
	const char *v = q + ol + strspn(q + ol, " \t");
	size_t vl = strcspn(v, " \t)");
	if (!vl || !ol || ol > 2)
		return true;
	_cleanup_free_ char *op = gp_xstrndup(q, ol), *want = gp_xstrndup(v, vl);
	int c = gp_dpkg_vercmp(versions[j], want);
	if (strcmp(op, "=") == 0)
		return c == 0;
	if (strcmp(op, "<<") == 0)
		return c < 0;
	if (strcmp(op, ">>") == 0)
		return c > 0;
	if (op[0] == '<') /* "<=", and "<" as dpkg reads it */
		return c <= 0;
	if (op[0] == '>')
		return c >= 0;
	return true;
}

const char *gp_apt_newest_agreeing(const struct gp_apt_index *ix, const char *name,
                                   char *const *names, char *const *versions)
{
	const char *best = NULL;
	for (size_t i = 0; i < ix->n; i++) {
		const struct gp_apt_pkg *pk = &ix->p[i];
		if (strcmp(pk->name, name) != 0 ||
		    (best && gp_dpkg_vercmp(pk->version, best) <= 0))
			continue;
		_cleanup_strv_ char **groups = gp_strv_split(pk->depends, ',');
		bool agrees = true;
		for (size_t g = 0; agrees && groups[g]; g++)
			agrees = relation_agrees(groups[g], names, versions);
		if (agrees)
			best = pk->version;
	}
	return best;
}

/* --- rpm ---------------------------------------------------------------- */

enum { RPMTAG_NAME = 1000, RPMTAG_VERSION, RPMTAG_RELEASE, RPMTAG_EPOCH };
enum { RPMTAG_ARCH = 1022 };
enum { RPM_INT32_TYPE = 4, RPM_STRING_TYPE = 6 };

/* The header's index entry count, data size and data area, each bounded
 * by len. */
static int rpm_header_bounds(const unsigned char *b, size_t len, uint32_t *il,
                             uint32_t *dl, const unsigned char **data)
{
	if (len < 8)
		return -EINVAL;
	memcpy(il, b, 4);
	memcpy(dl, b + 4, 4);
	*il = ntohl(*il);
	*dl = ntohl(*dl);
	if (*il > 100000 || *dl > 256u << 20 || 8 + (size_t)*il * 16 + *dl > len)
		return -EINVAL;
	*data = b + 8 + (size_t)*il * 16;
	return 0;
}

/* The header's name, version, release and arch strings (NULL where absent)
 * and its epoch (-1 where absent), each bounded by the blob. */
struct rpm_ident {
	const char *name, *version, *release, *arch;
	long epoch;
};

static int rpm_header_ident(const unsigned char *b, size_t len, struct rpm_ident *id)
{
	*id = (struct rpm_ident){ .epoch = -1 };
	const unsigned char *data;
	uint32_t il, dl;
	if (rpm_header_bounds(b, len, &il, &dl, &data) < 0)
		return -EINVAL;
	for (uint32_t i = 0; i < il; i++) {
		uint32_t ent[4];
		memcpy(ent, b + 8 + (size_t)i * 16, 16);
		uint32_t tag = ntohl(ent[0]), type = ntohl(ent[1]), off = ntohl(ent[2]);
		bool ident = (tag >= RPMTAG_NAME && tag <= RPMTAG_EPOCH) ||
		             tag == RPMTAG_ARCH;
		if (!ident || off >= dl)
			continue;
		if (tag == RPMTAG_EPOCH && type == RPM_INT32_TYPE && off + 4 <= dl) {
			uint32_t e;
			memcpy(&e, data + off, 4);
			id->epoch = ntohl(e);
		} else if (type == RPM_STRING_TYPE) {
			const void *end = memchr(data + off, '\0', dl - off);
			if (!end)
				return -EINVAL;
			const char *str = (const char *)data + off;
			switch (tag) {
			case RPMTAG_NAME:
				id->name = str;
				break;
			case RPMTAG_VERSION:
				id->version = str;
				break;
			case RPMTAG_RELEASE:
				id->release = str;
				break;
			case RPMTAG_ARCH:
				id->arch = str;
				break;
			default:
				break;
			}
		}
	}
	if (!id->name || !*id->name || !id->version || !*id->version)
		return -EINVAL;
	return 0;
}

int gp_rpm_header_parse(const void *blob, size_t len, char **name, char **version)
{
	*name = *version = NULL;
	struct rpm_ident id;
	if (rpm_header_ident(blob, len, &id) < 0)
		return -EINVAL;
	*name = gp_xstrdup(id.name);
	_cleanup_free_ char *ep = id.epoch > 0 ? gp_xasprintf("%ld:", id.epoch)
	                                       : gp_xstrdup("");
	*version = id.release ? gp_xasprintf("%s%s-%s", ep, id.version, id.release)
	                      : gp_xasprintf("%s%s", ep, id.version);
	return 0;
}

char *gp_rpm_header_nvra(const void *blob, size_t len)
{
	struct rpm_ident id;
	if (rpm_header_ident(blob, len, &id) < 0 || !id.release)
		return NULL;
	return id.arch
	           ? gp_xasprintf("%s-%s-%s.%s", id.name, id.version, id.release, id.arch)
	           : gp_xasprintf("%s-%s-%s", id.name, id.version, id.release);
}

enum { RPMTAG_PROVIDENAME = 1047, RPMTAG_REQUIRENAME = 1049 };
enum { RPM_STRING_ARRAY_TYPE = 8 };

/* An rpm capability as the dpkg-shaped relation lists of gp_pkgdb_rdepends
 * read it: a name without the characters those lists split or cut at
 * ("libc.so.6()(64bit)" would be cut to "libc.so.6", matching every
 * other soname's), NULL for what no package provides by name (a file
 * path, rpmlib's own features). */
static char *rpm_capability(const char *s)
{
	if (!*s || *s == '/' || gp_str_starts_with(s, "rpmlib("))
		return NULL;
	char *c = gp_xstrdup(s);
	for (char *p = c; *p; p++)
		if (strchr(" \t():[<,|", *p))
			*p = *p == '(' ? '{' : *p == ')' ? '}' : '_';
	return c;
}

int gp_rpm_header_relations(const void *blob, size_t len, char **requires,
                            char **provides)
{
	*requires = *provides = NULL;
	const unsigned char *b = blob, *data;
	uint32_t il, dl;
	if (rpm_header_bounds(b, len, &il, &dl, &data) < 0)
		return -EINVAL;
	struct gp_buf out[2] = { { 0 }, { 0 } };
	for (uint32_t i = 0; i < il; i++) {
		uint32_t ent[4];
		memcpy(ent, b + 8 + (size_t)i * 16, 16);
		uint32_t tag = ntohl(ent[0]), type = ntohl(ent[1]), off = ntohl(ent[2]),
		         count = ntohl(ent[3]);
		if ((tag != RPMTAG_PROVIDENAME && tag != RPMTAG_REQUIRENAME) ||
		    type != RPM_STRING_ARRAY_TYPE || off >= dl)
			continue;
		struct gp_buf *o = &out[tag == RPMTAG_REQUIRENAME ? 0 : 1];
		/* count strings, each NUL-terminated inside the data area */
		for (uint32_t k = 0; k < count && off < dl; k++) {
			const unsigned char *end = memchr(data + off, '\0', dl - off);
			if (!end) {
				gp_buf_free(&out[0]);
				gp_buf_free(&out[1]);
				return -EINVAL;
			}
			_cleanup_free_ char *cap = rpm_capability((const char *)data +
			                                          off);
			if (cap)
				gp_buf_printf(o, "%s%s", o->len ? ", " : "", cap);
			off = (uint32_t)(end - data) + 1;
		}
	}
	*requires = out[0].len ? gp_buf_steal(&out[0]) : gp_xstrdup("");
	*provides = out[1].len ? gp_buf_steal(&out[1]) : gp_xstrdup("");
	return 0;
}

char **gp_dnf_versionlock_names(const char *text)
{
	char **out = gp_xcalloc(1, sizeof(char *));
	_cleanup_strv_ char **lines = gp_strv_split(text, '\n');
	for (size_t i = 0; lines[i]; i++) {
		char *l = lines[i];
		l += strspn(l, " \t");
		if (*l == '#' || *l == '!' || !*l)
			continue;
		l[strcspn(l, " \t\r")] = '\0';
		/* name-[epoch:]version-release.arch: the last two '-' end the name. */
		char *d2 = strrchr(l, '-');
		if (!d2 || d2 == l)
			continue;
		*d2 = '\0';
		char *d1 = strrchr(l, '-');
		if (!d1 || d1 == l)
			continue;
		*d1 = '\0';
		if (!gp_strv_contains(out, l))
			gp_strv_push(&out, l);
	}
	return out;
}

static void sqlite_closep(sqlite3 **db)
{
	if (*db)
		sqlite3_close(*db);
}

/* The sqlite URI of the root's rpm database. The file is resolved inside
 * the root (an absolute symlink at var/lib/rpm or at rpmdb.sqlite itself
 * must not reach the host's database: sqlite would follow it) and named by
 * its real host path, so sqlite finds the -wal beside it. Without a -wal
 * there is nothing uncheckpointed to read, and immutable=1 keeps sqlite
 * from creating a -shm file: a query must not write to the target. With a
 * -wal (rpm is writing, or died mid-write), sqlite reads it as any reader
 * would. */
static int rpmdb_uri(const struct gp_root *r, char **uri)
{
	*uri = NULL;
	_cleanup_close_ int fd = gp_root_openat(r, GP_RPMDB_SQLITE, O_PATH, 0);
	if (fd < 0)
		return fd;
	char link[64], file[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, file, sizeof file - 1);
	if (n <= 0)
		return -EIO;
	file[n] = '\0';
	_cleanup_free_ char *walpath = gp_xasprintf("%s-wal", file);
	bool wal = faccessat(AT_FDCWD, walpath, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	struct gp_buf b = { 0 };
	gp_buf_puts(&b, "file:");
	for (const char *p = file; *p; p++) {
		if (*p == '%' || *p == '?' || *p == '#')
			gp_buf_printf(&b, "%%%02X", (unsigned char)*p);
		else
			gp_buf_printf(&b, "%c", *p);
	}
	gp_buf_puts(&b, wal ? "?mode=ro" : "?mode=ro&immutable=1");
	*uri = gp_buf_steal(&b);
	return 0;
}

int gp_rpmdb_read(const struct gp_root *r, struct gp_pkgdb *db)
{
	*db = (struct gp_pkgdb){ 0 };
	if (!gp_root_exists(r, GP_RPMDB_SQLITE))
		return -ENOENT;
	_cleanup_free_ char *uri = NULL;
	int urc = rpmdb_uri(r, &uri);
	if (urc < 0)
		return urc;
	_cleanup_(sqlite_closep) sqlite3 *h = NULL;
	if (sqlite3_open_v2(uri, &h,
	                    SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOFOLLOW,
	                    NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_busy_timeout(h, 5000);
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(h, "SELECT blob FROM Packages", -1, &st, NULL) !=
	    SQLITE_OK)
		return -EINVAL;
	_cleanup_free_ char *locks_text = NULL;
	gp_root_read(r, GP_DNF_VERSIONLOCK, &locks_text, NULL);
	_cleanup_strv_ char **locked = gp_dnf_versionlock_names(locks_text ? locks_text
	                                                                   : "");
	int rc = 0, step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		const void *blob = sqlite3_column_blob(st, 0);
		int n = sqlite3_column_bytes(st, 0);
		_cleanup_free_ char *name = NULL, *version = NULL;
		if (!blob || n <= 0 ||
		    gp_rpm_header_parse(blob, (size_t)n, &name, &version) < 0)
			continue; /* not a package header: skip, as rpm would */
		char *nvra = gp_rpm_header_nvra(blob, (size_t)n);
		if (nvra) {
			db->alias = gp_xrealloc(db->alias,
			                        (db->n_alias + 1) * sizeof *db->alias);
			db->alias[db->n_alias++] = (struct gp_pkgdb_entry){
				.name = nvra,
				.version = gp_xstrdup(version),
				.of = gp_xstrdup(name)
			};
		}
		struct gp_pkgdb_entry *e = db_add(db, name, version,
		                                  gp_strv_contains(locked, name));
		if (e && gp_rpm_header_relations(blob, (size_t)n, &e->depends,
		                                 &e->provides) < 0)
			e->depends = e->provides = NULL; /* names no dependency */
	}
	if (step != SQLITE_DONE)
		rc = -EIO;
	sqlite3_finalize(st);
	if (rc < 0)
		gp_pkgdb_free(db);
	return rc;
}
