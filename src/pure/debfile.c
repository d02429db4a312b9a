/* The keyring inside a cuda-keyring-style .deb: an ar archive whose
 * data.tar.* member holds usr/share/keyrings/<name>.gpg. Read in memory with
 * libarchive (ar for the outer archive, tar with gzip/xz/zstd for the data
 * member; nothing is extracted to disk). Keyring packages are a few KiB;
 * anything above DEB_MAX is refused. */
#include <errno.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "gpuprov/debfile.h"
#include "gpuprov/util.h"

#define DEB_MAX (64u << 20)

static void archive_freep(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}

/* The whole current entry, at most DEB_MAX bytes. */
static int read_entry(struct archive *a, struct gp_buf *out)
{
	char buf[8192];
	la_ssize_t n;
	while ((n = archive_read_data(a, buf, sizeof buf)) > 0) {
		if (out->len + (size_t)n > DEB_MAX)
			return -EFBIG;
		gp_buf_append(out, buf, (size_t)n);
	}
	return n < 0 ? -EINVAL : 0;
}

static bool keyring_name(const char *p)
{
	if (p[0] == '.' && p[1] == '/')
		p += 2;
	while (*p == '/')
		p++;
	bool dir = gp_str_starts_with(p, "usr/share/keyrings/") ||
	           gp_str_starts_with(p, "etc/apt/trusted.gpg.d/");
	return dir && (gp_str_ends_with(p, ".gpg") || gp_str_ends_with(p, ".asc"));
}

static int find_in_data(const void *tar, size_t len, char **path, char **data,
                        size_t *dlen, const char **msg)
{
	_cleanup_(archive_freep) struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_zstd(a);
	if (archive_read_open_memory(a, tar, len) != ARCHIVE_OK) {
		*msg = "its data.tar member is not a readable tar archive";
		return -EINVAL;
	}
	struct archive_entry *e;
	int r;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e);
		if (archive_entry_filetype(e) != AE_IFREG || !name || !keyring_name(name))
			continue;
		struct gp_buf b = { 0 };
		int rc = read_entry(a, &b);
		if (rc < 0) {
			gp_buf_free(&b);
			*msg = "cannot read the keyring file in its data.tar member";
			return rc;
		}
		name += strspn(name, "./");
		*path = gp_xasprintf("/%s", name);
		*dlen = b.len;
		*data = gp_buf_steal(&b);
		return 0;
	}
	if (r != ARCHIVE_EOF) {
		*msg = "its data.tar member is damaged";
		return -EINVAL;
	}
	*msg =
	    "it installs no keyring under /usr/share/keyrings or /etc/apt/trusted.gpg.d";
	return -ENOENT;
}

int gp_deb_keyring(const void *deb, size_t len, char **path, char **data, size_t *dlen,
                   const char **msg)
{
	*path = *data = NULL;
	*dlen = 0;
	if (len < 8 || memcmp(deb, "!<arch>\n", 8) != 0) {
		*msg = "not a Debian package (no ar archive header)";
		return -EINVAL;
	}
	_cleanup_(archive_freep) struct archive *a = archive_read_new();
	archive_read_support_format_ar(a);
	if (archive_read_open_memory(a, deb, len) != ARCHIVE_OK) {
		*msg = "not a readable ar archive";
		return -EINVAL;
	}
	struct archive_entry *e;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e);
		if (!name || !gp_str_starts_with(name, "data.tar"))
			continue;
		struct gp_buf tar = { 0 };
		int rc = read_entry(a, &tar);
		if (rc == 0)
			rc = find_in_data(tar.data, tar.len, path, data, dlen, msg);
		else
			*msg = "cannot read its data.tar member";
		gp_buf_free(&tar);
		return rc;
	}
	*msg = "it has no data.tar member";
	return -EINVAL;
}
