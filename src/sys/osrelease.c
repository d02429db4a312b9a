/* os-release(5): which distribution the root holds. The file is a shell
 * fragment of KEY=VALUE assignments; we parse the subset that os-release
 * allows (quoting, escapes, comments) without ever running a shell. */
#include <errno.h>
#include <string.h>

#include "gpuprov/osrelease.h"
#include "gpuprov/util.h"

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Parses one value starting at *p up to the end of its line, shell style:
 * "double quotes" with \" \\ \$ \` escapes, 'single quotes' verbatim, a
 * backslash outside quotes escapes the next character; adjacent pieces
 * concatenate (A="x"'y' is "xy"). Unquoted trailing blanks are dropped. A
 * quote left open runs to the end of the text rather than failing the file:
 * one bad line should not hide ID. Leaves *p after the line. */
static char *parse_value(const char **p)
{
	struct gp_buf b = { 0 };
	const char *s = *p;
	size_t keep = 0; /* length up to the last character that must stay */

	gp_buf_append(&b, "", 0);
	while (is_blank(*s))
		s++;
	while (*s && *s != '\n') {
		if (*s == '"') {
			for (s++; *s && *s != '"'; s++) {
				if (*s == '\\' && s[1] && strchr("\"\\$`\n", s[1])) {
					s++;
					if (*s == '\n') /* line continuation */
						continue;
				}
				gp_buf_append(&b, s, 1);
			}
			if (*s)
				s++;
			keep = b.len;
		} else if (*s == '\'') {
			const char *e = strchr(s + 1, '\'');
			size_t n = e ? (size_t)(e - s - 1) : strlen(s + 1);
			gp_buf_append(&b, s + 1, n);
			s += 1 + n + (e ? 1 : 0);
			keep = b.len;
		} else if (*s == '\\' && s[1]) {
			if (s[1] != '\n') {
				gp_buf_append(&b, s + 1, 1);
				keep = b.len;
			}
			s += 2;
		} else {
			gp_buf_append(&b, s, 1);
			if (!is_blank(*s))
				keep = b.len;
			s++;
		}
	}
	if (*s == '\n')
		s++;
	*p = s;
	b.data[keep] = '\0';
	return gp_buf_steal(&b);
}

static void set_field(char **field, char *value)
{
	/* Later assignments win, as when the shell sources the file. */
	free(*field);
	*field = value;
}

int gp_os_release_parse(const char *text, struct gp_os_release *osr)
{
	struct gp_os_release o = { 0 };
	const char *s = text;

	while (*s) {
		while (is_blank(*s))
			s++;
		size_t klen = strcspn(s, "=\n");
		if (*s == '#' || s[klen] != '=') {
			/* Comment, blank or malformed line: skip it. */
			s += strcspn(s, "\n");
			if (*s)
				s++;
			continue;
		}
		const char *key = s;
		while (klen > 0 && is_blank(key[klen - 1]))
			klen--;
		s += strcspn(s, "=") + 1;
		char *value = parse_value(&s);

#define KEY_IS(k) (klen == strlen(k) && memcmp(key, k, klen) == 0)
		if (KEY_IS("ID"))
			set_field(&o.id, value);
		else if (KEY_IS("ID_LIKE"))
			set_field(&o.id_like, value);
		else if (KEY_IS("VERSION_ID"))
			set_field(&o.version_id, value);
		else if (KEY_IS("PRETTY_NAME"))
			set_field(&o.pretty_name, value);
		else
			free(value);
#undef KEY_IS
	}

	/* os-release(5) lets ID default to "linux", but every decision gpuprov
	 * takes is per distribution: a file without ID is not one we can use. */
	if (!o.id || !*o.id) {
		gp_os_release_free(&o);
		*osr = o;
		return -EINVAL;
	}
	*osr = o;
	return 0;
}

int gp_os_release_read(const struct gp_root *r, struct gp_os_release *osr)
{
	/* /etc wins outright when present; /usr/lib is only the fallback
	 * (os-release(5)). The usual /etc symlink to ../usr/lib/os-release is
	 * resolved inside the root by gp_root_read. */
	static const char *const paths[] = { "/etc/os-release", "/usr/lib/os-release" };
	int rc = -ENOENT;

	*osr = (struct gp_os_release){ 0 };
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
		_cleanup_free_ char *text = NULL;
		osr->path = paths[i];
		rc = gp_root_read_max(r, paths[i], GP_ROOT_SMALL_MAX, &text, NULL);
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return rc;
		rc = gp_os_release_parse(text, osr);
		osr->path = paths[i];
		return rc;
	}
	return rc;
}

char *gp_os_release_error(const struct gp_root *r, const struct gp_os_release *osr,
                          int rc)
{
	_cleanup_free_ char *why = gp_root_read_error(
	    r, osr->path ? osr->path : "/etc/os-release", GP_ROOT_SMALL_MAX, rc);
	return gp_xasprintf("%s; replace it with the distribution's os-release file",
	                    why);
}

void gp_os_release_free(struct gp_os_release *osr)
{
	if (!osr)
		return;
	free(osr->id);
	free(osr->id_like);
	free(osr->version_id);
	free(osr->pretty_name);
	*osr = (struct gp_os_release){ 0 };
}
