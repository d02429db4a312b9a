/* The CDI spec that `nvidia-ctk cdi generate` writes, read for verify
 * (cdispec.h). Line-oriented on purpose: gpuprov needs three facts, and a
 * spec that is not laid out as nvidia-ctk writes it is regenerated, not
 * interpreted. Facts and sources: docs/reference/nvidia-container-toolkit.md. */
#include <string.h>

#include "gpuprov/cdispec.h"
#include "gpuprov/util.h"

/* Library names whose suffix is the driver's version, in the order of
 * preference: libcuda is what CUDA in the container loads. */
static const char *const versioned_libs[] = { "libcuda.so.", "libnvidia-ml.so." };
#define N_LIBS ARRAY_SIZE(versioned_libs)

struct parse {
	const char *file;
	struct gp_cdi_spec *spec;
	char *first[N_LIBS]; /* the first version each library names */
	char *other; /* a version unlike the first one met */
	bool in_devices;
	int list_indent; /* the indent of devices' "- ", -1 before the first */
	bool entry_named; /* the current device entry has its name */
	size_t entry_line; /* where the current entry starts */
};

/* s (len bytes) without the quotes around it, allocated. */
static char *scalar(const char *s, size_t len)
{
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\r'))
		len--;
	if (len >= 2 && (s[0] == '"' || s[0] == '\'') && s[len - 1] == s[0])
		return gp_xstrndup(s + 1, len - 2);
	return gp_xstrndup(s, len);
}

/* The value of "key: value" in s (len bytes), allocated, or NULL when s is
 * not that key. */
static char *key_value(const char *s, size_t len, const char *key)
{
	size_t k = strlen(key);
	if (len <= k || memcmp(s, key, k) != 0 || s[k] != ':')
		return NULL;
	s += k + 1;
	len -= k + 1;
	while (len && *s == ' ')
		s++, len--;
	return scalar(s, len);
}

/* Notes every versioned library name in the line. */
static void note_versions(struct parse *p, const char *s, size_t len)
{
	for (size_t l = 0; l < N_LIBS; l++) {
		size_t n = strlen(versioned_libs[l]);
		for (const char *at = s;
		     (at = memmem(at, len - (size_t)(at - s), versioned_libs[l], n));) {
			at += n;
			size_t v = 0, dots = 0;
			while (at + v < s + len &&
			       ((at[v] >= '0' && at[v] <= '9') || at[v] == '.'))
				dots += at[v++] == '.';
			while (v && at[v - 1] == '.')
				v--, dots--;
			/* libcuda.so.1 is the soname link, not a version. */
			if (!v || !dots || at[0] == '.')
				continue;
			char *ver = gp_xstrndup(at, v);
			if (!p->first[l])
				p->first[l] = ver;
			else if (!p->other && strcmp(ver, p->first[l]) != 0)
				p->other = ver;
			else
				free(ver);
		}
	}
}

/* One line (len bytes, no newline) at 1-based number n. */
static int parse_line(struct parse *p, struct gp_err *err, const char *s, size_t len,
                      size_t n)
{
	note_versions(p, s, len);
	int indent = 0;
	while ((size_t)indent < len && s[indent] == ' ')
		indent++;
	const char *c = s + indent;
	size_t clen = len - (size_t)indent;
	if (!clen || *c == '#' || *c == '\r' ||
	    (indent == 0 && clen >= 3 && !memcmp(c, "---", 3)))
		return 0;
	if (indent == 0 && (*c == '{' || *c == '['))
		return gp_fail(err, GP_EINPUT,
		               "%s:%zu: a JSON spec; gpuprov reads the YAML that "
		               "`nvidia-ctk cdi generate` writes: regenerate it "
		               "(gpuprov install does)",
		               p->file, n);
	bool dash = clen >= 1 && *c == '-' && (clen == 1 || c[1] == ' ');
	if (indent == 0 && !dash) {
		if (p->in_devices && p->spec->n_devices && !p->entry_named)
			goto unnamed;
		p->in_devices = clen >= 8 && !memcmp(c, "devices:", 8);
		char *kind = key_value(c, clen, "kind");
		if (kind) {
			free(p->spec->kind);
			p->spec->kind = kind;
		}
		return 0;
	}
	if (!p->in_devices)
		return 0;
	if (dash && (p->list_indent < 0 || indent == p->list_indent)) {
		if (p->spec->n_devices && !p->entry_named)
			goto unnamed;
		if (p->spec->n_devices >= GP_CDI_DEVICES_MAX)
			return gp_fail(err, GP_EINPUT,
			               "%s:%zu: more than %d devices; regenerate the "
			               "spec (gpuprov install does)",
			               p->file, n, GP_CDI_DEVICES_MAX);
		p->list_indent = indent;
		p->entry_line = n;
		p->entry_named = false;
		gp_strv_append(&p->spec->devices, &p->spec->n_devices, "");
		c += 1;
		clen -= 1;
		indent += 1;
		while (clen && *c == ' ')
			c++, clen--, indent++;
	}
	if (p->list_indent < 0 || indent != p->list_indent + 2)
		return 0;
	char *name = key_value(c, clen, "name");
	if (!name)
		return 0;
	if (p->entry_named || !*name) {
		free(name);
		return gp_fail(err, GP_EINPUT,
		               "%s:%zu: %s device name; regenerate the spec "
		               "(gpuprov install does)",
		               p->file, n, p->entry_named ? "a second" : "an empty");
	}
	free(p->spec->devices[p->spec->n_devices - 1]);
	p->spec->devices[p->spec->n_devices - 1] = name;
	p->entry_named = true;
	return 0;
unnamed:
	return gp_fail(err, GP_EINPUT,
	               "%s:%zu: the device entry has no name; regenerate the spec "
	               "(gpuprov install does)",
	               p->file, p->entry_line);
}

int gp_cdi_spec_parse(const char *file, const char *text, size_t len,
                      struct gp_cdi_spec *spec, struct gp_err *err)
{
	*spec = (struct gp_cdi_spec){ 0 };
	if (len > GP_CDI_SPEC_MAX)
		return gp_fail(err, GP_EINPUT,
		               "%s: larger than %d bytes: not a spec nvidia-ctk wrote; "
		               "move it away and run gpuprov install",
		               file, GP_CDI_SPEC_MAX);
	if (len && memchr(text, '\0', len))
		return gp_fail(err, GP_EINPUT,
		               "%s: has a NUL byte: not a text file; move it away and "
		               "run gpuprov install",
		               file);
	struct parse p = { .file = file, .spec = spec, .list_indent = -1 };
	bool seen_devices = false;
	int rc = 0;
	size_t n = 0;
	for (size_t at = 0; at < len && rc == 0;) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t l = nl ? (size_t)(nl - (text + at)) : len - at;
		rc = parse_line(&p, err, text + at, l, ++n);
		seen_devices |= p.in_devices;
		at += l + 1;
	}
	if (rc == 0 && p.in_devices && spec->n_devices && !p.entry_named)
		rc = gp_fail(err, GP_EINPUT,
		             "%s:%zu: the device entry has no name; regenerate the "
		             "spec (gpuprov install does)",
		             file, p.entry_line);
	if (rc == 0 && !spec->kind)
		rc = gp_fail(err, GP_EINPUT,
		             "%s: no \"kind:\" line: not a CDI spec; move it away and "
		             "run gpuprov install",
		             file);
	if (rc == 0 && !seen_devices)
		rc = gp_fail(err, GP_EINPUT,
		             "%s: no \"devices:\" list: not a CDI spec; move it away "
		             "and run gpuprov install",
		             file);
	size_t pick = p.first[0] ? 0 : 1;
	if (rc == 0 && p.first[pick]) {
		spec->driver_version = p.first[pick];
		p.first[pick] = NULL;
		/* The other library's first version counts as well. */
		if (p.first[1 - pick] &&
		    strcmp(p.first[1 - pick], spec->driver_version)) {
			free(p.other);
			p.other = p.first[1 - pick];
			p.first[1 - pick] = NULL;
		}
		if (p.other && strcmp(p.other, spec->driver_version) == 0)
			free(p.other), p.other = NULL;
		spec->other_version = p.other;
		p.other = NULL;
	}
	for (size_t l = 0; l < N_LIBS; l++)
		free(p.first[l]);
	free(p.other);
	if (rc < 0)
		gp_cdi_spec_free(spec);
	return rc;
}

void gp_cdi_spec_free(struct gp_cdi_spec *spec)
{
	free(spec->kind);
	gp_strv_free(spec->devices);
	free(spec->driver_version);
	free(spec->other_version);
	*spec = (struct gp_cdi_spec){ 0 };
}

bool gp_cdi_spec_has_device(const struct gp_cdi_spec *spec, const char *name)
{
	for (size_t i = 0; i < spec->n_devices; i++)
		if (strcmp(spec->devices[i], name) == 0)
			return true;
	return false;
}

char *gp_cdi_spec_problem(const struct gp_cdi_spec *spec, const char *want, size_t n_gpus)
{
	if (!gp_streq(spec->kind, "nvidia.com/gpu"))
		return gp_xasprintf("it is for kind \"%s\", not nvidia.com/gpu",
		                    spec->kind);
	if (!spec->driver_version)
		return gp_xstrdup("it names no driver library (libcuda.so.<version>)");
	if (spec->other_version)
		return gp_xasprintf("it names two driver versions, %s and %s (a spec "
		                    "half regenerated)",
		                    spec->driver_version, spec->other_version);
	if (want && strcmp(want, spec->driver_version) != 0)
		return gp_xasprintf("it was generated for driver %s; %s is loaded: "
		                    "containers fail with \"unresolvable CDI devices\" "
		                    "or miss libraries",
		                    spec->driver_version, want);
	struct gp_buf missing = { 0 };
	for (size_t i = 0; i <= n_gpus; i++) {
		char name[24];
		snprintf(name, sizeof(name), "%zu", i);
		const char *dev = i == n_gpus ? "all" : name;
		if (!gp_cdi_spec_has_device(spec, dev))
			gp_buf_printf(&missing, "%s%s", missing.len ? ", " : "", dev);
	}
	if (!missing.len)
		return NULL;
	char *why = gp_xasprintf("it has no device %s (%zu GPU%s here)", missing.data,
	                         n_gpus, n_gpus == 1 ? "" : "s");
	gp_buf_free(&missing);
	return why;
}
