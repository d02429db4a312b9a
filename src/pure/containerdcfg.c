/* containerd's config.toml imports line and the drop-ins of containerd and
 * CRI-O (containerdcfg.h). Facts and sources:
 * docs/reference/nvidia-container-toolkit.md. */
#include <string.h>

#include "gpuprov/containerdcfg.h"
#include "gpuprov/util.h"

#define WRITTEN_BY "# Written by gpuprov (stage container_toolkit): the NVIDIA runtime.\n"

/* The CRI plugin's names in config version 1/2 and 3. */
static const char *const cri_plugins[] = { "plugins.\"io.containerd.grpc.v1.cri\"",
	                                   "plugins.cri",
	                                   "plugins.\"io.containerd.cri.v1.runtime\"" };

static const char *cri_plugin(int version)
{
	return version >= 3 ? cri_plugins[2] : cri_plugins[0];
}

struct line {
	const char *s; /* the line without leading blanks */
	size_t len; /* without the newline and trailing blanks */
};

static struct line trim(const char *s, size_t len)
{
	while (len && (*s == ' ' || *s == '\t'))
		s++, len--;
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r'))
		len--;
	return (struct line){ s, len };
}

static bool names_cri(const char *s, size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(cri_plugins); i++) {
		size_t n = strlen(cri_plugins[i]);
		if (len >= n && !memcmp(s, cri_plugins[i], n) &&
		    (len == n || s[n] == '.' || s[n] == ']' || s[n] == ' ' ||
		     s[n] == '='))
			return true;
	}
	return false;
}

/* How the count of open brackets changes over s, skipping strings and a
 * comment; -1 at an unterminated string. */
static int bracket_delta(const char *s, size_t len, int *delta)
{
	*delta = 0;
	for (size_t i = 0; i < len; i++) {
		char q = s[i];
		if (q == '#')
			return 0;
		if (q == '"' || q == '\'') {
			for (i++; i < len && s[i] != q; i++)
				if (q == '"' && s[i] == '\\')
					i++;
			if (i >= len)
				return -1;
		} else if (q == '[' || q == '{')
			(*delta)++;
		else if (q == ']' || q == '}')
			(*delta)--;
	}
	return 0;
}

/* The imports value v (vlen bytes, after "="): a one-line array of plain
 * strings. 0 with *close (the offset of its ']' in v), *empty and *has
 * (pattern is an element); -1 when it is anything else. */
static int parse_imports(const char *v, size_t vlen, const char *pattern, size_t *close,
                         bool *empty, bool *has)
{
	size_t i = 0, plen = strlen(pattern);
	*empty = true;
	*has = false;
	while (i < vlen && v[i] == ' ')
		i++;
	if (i >= vlen || v[i++] != '[')
		return -1;
	for (;;) {
		while (i < vlen && (v[i] == ' ' || v[i] == '\t'))
			i++;
		if (i < vlen && v[i] == ']')
			break;
		if (i >= vlen || (v[i] != '"' && v[i] != '\''))
			return -1;
		char q = v[i++];
		size_t start = i;
		while (i < vlen && v[i] != q && v[i] != '\\')
			i++;
		if (i >= vlen || v[i] != q)
			return -1;
		*has |= i - start == plen && !memcmp(v + start, pattern, plen);
		*empty = false;
		i++;
		while (i < vlen && (v[i] == ' ' || v[i] == '\t'))
			i++;
		if (i < vlen && v[i] == ',') {
			i++;
			continue;
		}
		if (i < vlen && v[i] == ']')
			break;
		return -1;
	}
	*close = i++;
	while (i < vlen && (v[i] == ' ' || v[i] == '\t'))
		i++;
	return i == vlen || v[i] == '#' ? 0 : -1;
}

#define REFUSE(fmt, ...)                                                                 \
	gp_fail(err, GP_EINPUT, "%s:%zu: " fmt "; nothing was written", file, n,         \
	        __VA_ARGS__)

int gp_containerd_imports_edit(const char *file, const char *old, size_t len,
                               const char *pattern, char **out, bool *changed,
                               struct gp_containerd_config *cfg, struct gp_err *err)
{
	*out = NULL;
	*changed = false;
	*cfg = (struct gp_containerd_config){ 0 };
	if (len && memchr(old, '\0', len))
		return gp_fail(err, GP_EINPUT,
		               "%s: has a NUL byte: containerd cannot read it either; "
		               "fix it and run gpuprov again",
		               file);
	bool in_tables = false, any_key = false, has = false;
	int depth = 0; /* open brackets of a value over several lines */
	size_t n = 0, version_end = 0; /* offset after the version line */
	size_t imports_close = 0; /* the offset of its ']' in old */
	bool imports_seen = false, imports_empty = true;
	for (size_t at = 0; at < len;) {
		const char *nl = memchr(old + at, '\n', len - at);
		size_t l = nl ? (size_t)(nl - (old + at)) : len - at;
		size_t next = at + l + (nl ? 1 : 0);
		struct line t = trim(old + at, l);
		n++;
		if (memmem(t.s, t.len, "\"\"\"", 3) || memmem(t.s, t.len, "'''", 3))
			return REFUSE("a multi-line string, which gpuprov does not read; "
			              "write the value on one line (%s)",
			              "or add the imports line yourself");
		int d;
		if (depth > 0) {
			if (bracket_delta(t.s, t.len, &d) < 0)
				return REFUSE("an unterminated string (%s)",
				              "fix the line");
			depth += d;
			at = next;
			continue;
		}
		if (!t.len || *t.s == '#') {
			at = next;
			continue;
		}
		if (*t.s == '[') {
			in_tables = true;
			const char *h = t.s + 1 + (t.len > 1 && t.s[1] == '[');
			if (!cfg->cri_line && names_cri(h, t.len - (size_t)(h - t.s)))
				cfg->cri_line = n;
			at = next;
			continue;
		}
		const char *eq = memchr(t.s, '=', t.len);
		if (!eq)
			return REFUSE("gpuprov does not understand this line (no table "
			              "header, no key = value)%s",
			              ": fix it or add the imports line yourself");
		struct line key = trim(t.s, (size_t)(eq - t.s));
		struct line val = trim(eq + 1, t.len - (size_t)(eq + 1 - t.s));
		any_key = true;
		if (!cfg->cri_line && names_cri(key.s, key.len))
			cfg->cri_line = n;
		if (key.len == 13 && !memcmp(key.s, "SystemdCgroup", 13) &&
		    val.len >= 4 && !memcmp(val.s, "true", 4))
			cfg->systemd_cgroup = true;
		if (bracket_delta(val.s, val.len, &d) < 0)
			return REFUSE("an unterminated string (%s)", "fix the line");
		if (!in_tables && key.len == 7 && !memcmp(key.s, "version", 7)) {
			const char *hash = memchr(val.s, '#', val.len);
			if (hash)
				val = trim(val.s, (size_t)(hash - val.s));
			if (val.len != 1 || val.s[0] < '1' || val.s[0] > '9')
				return REFUSE("version is \"%.*s\": gpuprov knows config "
				              "versions 2 and 3",
				              (int)val.len, val.s);
			cfg->version = val.s[0] - '0';
			version_end = next;
		} else if (!in_tables && key.len == 7 && !memcmp(key.s, "imports", 7)) {
			size_t close;
			bool empty;
			if (imports_seen)
				return REFUSE("a second imports line (%s)",
				              "containerd refuses it too");
			if (parse_imports(val.s, val.len, pattern, &close, &empty, &has) <
			    0)
				return REFUSE(
				    "imports is not a one-line array of plain strings; "
				    "gpuprov edits only that: write it on one line, "
				    "as imports = [\"%s\"], and run gpuprov again",
				    pattern);
			imports_seen = true;
			imports_empty = empty;
			imports_close = (size_t)(val.s - old) + close;
			d = 0;
		}
		depth = d > 0 ? d : 0;
		at = next;
	}
	if (depth > 0)
		return gp_fail(err, GP_EINPUT,
		               "%s: ends inside an array; containerd cannot read it "
		               "either: fix it and run gpuprov again",
		               file);
	if (!any_key) {
		if (imports_seen || cfg->cri_line || in_tables)
			return gp_fail(
			    err, GP_EINPUT,
			    "%s: has tables but no top-level version line: "
			    "containerd reads it as config version 1, which has "
			    "no imports; migrate it (containerd config migrate) "
			    "or add version = 2, and run gpuprov again",
			    file);
		struct gp_buf b = { 0 };
		gp_buf_append(&b, old ? old : "", len);
		if (len && old[len - 1] != '\n')
			gp_buf_puts(&b, "\n");
		gp_buf_printf(&b, "version = 2\nimports = [\"%s\"]\n", pattern);
		*out = gp_buf_steal(&b);
		*changed = true;
		return 0;
	}
	if (cfg->version == 0)
		return gp_fail(err, GP_EINPUT,
		               "%s: has no top-level version line: containerd reads it "
		               "as config version 1, which has no imports; migrate it "
		               "(containerd config migrate) or add version = 2, and run "
		               "gpuprov again",
		               file);
	if (cfg->version != 2 && cfg->version != 3)
		return gp_fail(err, GP_EINPUT,
		               "%s: config version %d: gpuprov knows versions 2 and 3",
		               file, cfg->version);
	struct gp_buf b = { 0 };
	if (has) {
		gp_buf_append(&b, old, len);
	} else if (imports_seen) {
		/* After a trailing comma, only a blank. */
		size_t last = imports_close;
		while (last && (old[last - 1] == ' ' || old[last - 1] == '\t'))
			last--;
		gp_buf_append(&b, old, imports_close);
		gp_buf_printf(&b, "%s\"%s\"",
		              imports_empty          ? ""
		              : old[last - 1] == ',' ? " "
		                                     : ", ",
		              pattern);
		gp_buf_append(&b, old + imports_close, len - imports_close);
	} else {
		gp_buf_append(&b, old, version_end);
		if (version_end && old[version_end - 1] != '\n')
			gp_buf_puts(&b, "\n");
		gp_buf_printf(&b, "imports = [\"%s\"]\n", pattern);
		gp_buf_append(&b, old + version_end, len - version_end);
	}
	*out = gp_buf_steal(&b);
	*changed = !has;
	return 0;
}

char *gp_containerd_dropin(int version, const char *path, bool set_default,
                           bool systemd_cgroup)
{
	const char *p = cri_plugin(version);
	struct gp_buf b = { 0 };
	gp_buf_printf(&b, WRITTEN_BY "version = %d\n", version);
	if (set_default)
		gp_buf_printf(
		    &b, "\n[%s.containerd]\n  default_runtime_name = \"nvidia\"\n", p);
	gp_buf_printf(&b,
	              "\n[%s.containerd.runtimes.nvidia]\n"
	              "  privileged_without_host_devices = false\n"
	              "  runtime_type = \"io.containerd.runc.v2\"\n"
	              "\n[%s.containerd.runtimes.nvidia.options]\n"
	              "  BinaryName = \"%s\"\n",
	              p, p, path);
	if (systemd_cgroup)
		gp_buf_puts(&b, "  SystemdCgroup = true\n");
	return gp_buf_steal(&b);
}

char *gp_crio_dropin(const char *path, bool set_default)
{
	struct gp_buf b = { 0 };
	gp_buf_puts(&b, WRITTEN_BY);
	if (set_default)
		gp_buf_puts(&b, "\n[crio.runtime]\ndefault_runtime = \"nvidia\"\n");
	gp_buf_printf(&b,
	              "\n[crio.runtime.runtimes.nvidia]\n"
	              "runtime_path = \"%s\"\n"
	              "runtime_type = \"oci\"\n",
	              path);
	return gp_buf_steal(&b);
}
