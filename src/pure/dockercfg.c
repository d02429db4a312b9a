/* Docker's daemon.json merged with the NVIDIA runtime (dockercfg.h). The
 * file is the operator's: gpuprov owns runtimes.<name> and, when asked,
 * default-runtime, and keeps every other member, in its place, as it was.
 * Parsed with the project's JSON reader (src/json.c: positions in errors,
 * duplicate keys refused, since dockerd would take the last of two and the
 * merge could keep the wrong one). */
#include <errno.h>
#include <string.h>

#include "gpuprov/dockercfg.h"
#include "gpuprov/json.h"

/* The largest integer a double holds exactly: cJSON keeps numbers as
 * doubles, so a larger one would be written back changed. */
#define EXACT_MAX 9007199254740992.0 /* 2^53 */

static bool blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!strchr(" \t\r\n", s[i]))
			return false;
	return true;
}

/* The first number under v that cannot be written back exactly, or NULL. */
static const cJSON *inexact_number(const cJSON *v)
{
	if (cJSON_IsNumber(v) &&
	    !(v->valuedouble <= EXACT_MAX && v->valuedouble >= -EXACT_MAX))
		return v;
	for (const cJSON *c = v->child; c; c = c->next) {
		const cJSON *bad = inexact_number(c);
		if (bad)
			return bad;
	}
	return NULL;
}

/* old parsed into *doc ({} for no file), checked for what the merge needs. */
static int parse_daemon(const char *file, const char *old, size_t len,
                        const struct gp_docker_runtime *rt, cJSON **doc,
                        struct gp_err *err)
{
	if (!old || blank(old, len)) {
		*doc = cJSON_CreateObject();
		return 0;
	}
	cJSON *j = gp_json_parse(file, old, len, err);
	if (!j)
		return gp_fail(err, GP_EINPUT,
		               "%s; dockerd cannot read it either: fix it (or move it "
		               "away) and run gpuprov again",
		               err->msg);
	const char *why = NULL;
	const cJSON *runtimes = cJSON_GetObjectItemCaseSensitive(j, "runtimes");
	if (!cJSON_IsObject(j))
		why = "its top level is not a JSON object";
	else if (runtimes && !cJSON_IsObject(runtimes))
		why = "its \"runtimes\" is not an object";
	else if (runtimes && cJSON_GetObjectItemCaseSensitive(runtimes, rt->name) &&
	         !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(runtimes, rt->name)))
		why = "its runtime entry for the NVIDIA runtime is not an object";
	else if (inexact_number(j))
		why = "it holds a number beyond 2^53, which gpuprov cannot write back "
		      "exactly";
	if (why) {
		cJSON_Delete(j);
		return gp_fail(err, GP_EINPUT,
		               "%s: %s; dockerd expects an object of settings "
		               "(https://docs.docker.com/reference/cli/dockerd/"
		               "#daemon-configuration-file): fix the file and run "
		               "gpuprov again",
		               file, why);
	}
	*doc = j;
	return 0;
}

/* cJSON's formatted text with its tabs as docker's own tools indent
 * (4 spaces) and one space after a colon. cJSON escapes a tab inside a
 * string, so every raw tab is layout. */
static char *layout(const cJSON *doc)
{
	_cleanup_free_ char *text = cJSON_Print(doc);
	if (!text)
		return NULL; /* out of memory */
	struct gp_buf b = { 0 };
	bool line_start = true;
	for (const char *p = text; *p; p++) {
		if (*p == '\t')
			gp_buf_puts(&b, line_start ? "    " : " ");
		else
			gp_buf_append(&b, p, 1);
		line_start = *p == '\n' || (line_start && *p == '\t');
	}
	gp_buf_puts(&b, "\n");
	return gp_buf_steal(&b);
}

int gp_docker_daemon_merge(const char *file, const char *old, size_t len,
                           const struct gp_docker_runtime *rt, char **out, bool *changed,
                           struct gp_err *err)
{
	cJSON *doc;
	if (parse_daemon(file, old, len, rt, &doc, err) < 0)
		return -1;
	cJSON *before = cJSON_Duplicate(doc, 1);
	cJSON *runtimes = cJSON_GetObjectItemCaseSensitive(doc, "runtimes");
	if (!runtimes) {
		runtimes = cJSON_CreateObject();
		gp_json_set_item(doc, "runtimes", runtimes);
	}
	cJSON *entry = cJSON_CreateObject();
	cJSON_AddStringToObject(entry, "path", rt->path);
	cJSON_AddItemToObject(entry, "runtimeArgs", cJSON_CreateArray());
	gp_json_set_item(runtimes, rt->name, entry);
	if (rt->set_default)
		gp_json_set_string(doc, "default-runtime", rt->name);
	*changed = !before || !cJSON_Compare(before, doc, true);
	*out = layout(doc);
	cJSON_Delete(before);
	cJSON_Delete(doc);
	if (!*out)
		return gp_fail(err, -ENOMEM, "%s: out of memory merging it", file);
	return 0;
}

int gp_docker_daemon_inspect(const char *file, const char *old, size_t len,
                             const struct gp_docker_runtime *rt, bool *has_runtime,
                             bool *is_default, struct gp_err *err)
{
	cJSON *doc;
	if (parse_daemon(file, old, len, rt, &doc, err) < 0)
		return -1;
	const cJSON *runtimes = cJSON_GetObjectItemCaseSensitive(doc, "runtimes");
	const cJSON *entry = cJSON_GetObjectItemCaseSensitive(runtimes, rt->name);
	*has_runtime = gp_streq(gp_json_string(entry, "path", NULL), rt->path);
	*is_default = gp_streq(gp_json_string(doc, "default-runtime", NULL), rt->name);
	cJSON_Delete(doc);
	return 0;
}
