/* docs/profile.schema.json against the loader's tables, through the public
 * API only: the schema's key paths (followed through $ref, anyOf and
 * items) are exactly gp_profile_schema_keys(); for each of them the loader
 * accepts the schema's example (with the siblings the schema marks
 * required), refuses a value of a type the schema does not allow, and
 * refuses an unknown sibling key. Every object in the schema is closed
 * (additionalProperties false) as the loader is, and every leaf has an
 * example. tests/e2e/schema.bats checks the schema against the catalogue
 * and the broken-profile corpus with a real JSON Schema validator. */
#include "testutil.h"

#include <cjson/cJSON.h>

#include "gpuprov/exitcodes.h"
#include "gpuprov/profile.h"
#include "gpuprov/stages.h"
#include "gpuprov/util.h"

#define SCHEMA GP_SRCDIR "/docs/profile.schema.json"

struct entry {
	char *path; /* "/stages/driver/method" */
	const cJSON *node; /* its schema, as written (examples sit beside a $ref) */
	const cJSON *parent; /* the object schema that lists it */
};

struct walk {
	const cJSON *root;
	struct entry *e;
	size_t n;
};

static const cJSON *get(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* Follows local "$ref": "#/$defs/NAME" links. */
static const cJSON *resolve(const cJSON *root, const cJSON *node)
{
	for (int hops = 0; hops < 8; hops++) {
		const cJSON *ref = get(node, "$ref");
		if (!cJSON_IsString(ref))
			return node;
		if (!gp_str_starts_with(ref->valuestring, "#/$defs/"))
			fail_msg("unexpected $ref %s", ref->valuestring);
		node = get(get(root, "$defs"), ref->valuestring + strlen("#/$defs/"));
		if (!node)
			fail_msg("dangling $ref %s", ref->valuestring);
	}
	fail_msg("$ref loop");
	return NULL;
}

static struct entry *find(struct walk *w, const char *path)
{
	for (size_t i = 0; i < w->n; i++)
		if (strcmp(w->e[i].path, path) == 0)
			return &w->e[i];
	return NULL;
}

static void walk(struct walk *w, const cJSON *node, const char *pointer)
{
	node = resolve(w->root, node);
	const cJSON *props = get(node, "properties");
	if (props) {
		if (!cJSON_IsFalse(get(node, "additionalProperties")))
			fail_msg("the schema at %s is not closed (additionalProperties "
			         "false)",
			         *pointer ? pointer : "/");
		for (const cJSON *p = props->child; p; p = p->next) {
			char *path = gp_xasprintf("%s/%s", pointer, p->string);
			if (!find(w, path)) {
				w->e = gp_xrealloc(w->e, (w->n + 1) * sizeof *w->e);
				w->e[w->n++] = (struct entry){ gp_xstrdup(path), p,
					                       node };
			}
			walk(w, p, path);
			free(path);
		}
	}
	static const char *const branches[] = { "anyOf", "oneOf", "allOf" };
	for (size_t i = 0; i < ARRAY_SIZE(branches); i++)
		for (const cJSON *b =
		         get(node, branches[i]) ? get(node, branches[i])->child : NULL;
		     b; b = b->next)
			walk(w, b, pointer);
	if (cJSON_IsObject(get(node, "items")))
		walk(w, get(node, "items"), pointer);
}

/* Does the schema allow a JSON string here (in any branch)? */
static bool allows_string(const cJSON *root, const cJSON *node)
{
	node = resolve(root, node);
	const cJSON *type = get(node, "type");
	if (cJSON_IsString(type) && strcmp(type->valuestring, "string") == 0)
		return true;
	if (cJSON_IsString(get(node, "const")))
		return true;
	const cJSON *any = get(node, "anyOf");
	for (const cJSON *b = any ? any->child : NULL; b; b = b->next)
		if (allows_string(root, b))
			return true;
	return false;
}

/* The first example, looked up beside a $ref, then at its target; an
 * object with properties needs none ({}). */
static cJSON *example(const cJSON *root, const cJSON *node, const char *path)
{
	const cJSON *ex = get(node, "examples");
	if (!ex)
		ex = get(resolve(root, node), "examples");
	if (cJSON_IsArray(ex) && ex->child)
		return cJSON_Duplicate(ex->child, 1);
	struct walk sub = { .root = root };
	walk(&sub, node, "");
	if (sub.n) {
		for (size_t i = 0; i < sub.n; i++)
			free(sub.e[i].path);
		free(sub.e);
		return cJSON_CreateObject();
	}
	fail_msg("%s has no examples in the schema", path);
	return NULL;
}

struct tmp {
	char *dir;
	char *search[2];
};

/* Loads doc (serialised to a file); returns 0 or -1 with err set. */
static int load_doc(struct tmp *t, const cJSON *doc, struct gp_err *err)
{
	char *text = cJSON_Print(doc);
	tu_write(t->dir, "probe.json", text);
	free(text);
	char *path = gp_xasprintf("%s/probe.json", t->dir);
	struct gp_profile *p = NULL;
	int rc = gp_profile_load(path, t->search, &p, err);
	gp_profile_free(p);
	free(path);
	return rc;
}

/* {"name": "probe", A: {B: {... C: value}}} for path "/A/B/C", plus the
 * siblings of C that its object requires; *leaf_parent is C's object. */
static cJSON *probe_doc(struct walk *w, const struct entry *e, cJSON *value,
                        cJSON **leaf_parent)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON *obj = doc;
	char **parts = gp_strv_split(e->path, '/');
	size_t n = gp_strv_len(parts);
	for (size_t i = 0; i + 1 < n; i++) {
		cJSON *next = cJSON_CreateObject();
		cJSON_AddItemToObject(obj, parts[i], next);
		obj = next;
	}
	const cJSON *required = get(e->parent, "required");
	for (const cJSON *r = required ? required->child : NULL; r; r = r->next) {
		if (strcmp(r->valuestring, parts[n - 1]) == 0)
			continue;
		char *sib = gp_xasprintf("%.*s/%s",
		                         (int)(strrchr(e->path, '/') - e->path), e->path,
		                         r->valuestring);
		const struct entry *se = find(w, sib);
		if (!se)
			fail_msg("%s requires %s, which has no schema", e->path, sib);
		cJSON_AddItemToObject(obj, r->valuestring,
		                      example(w->root, se->node, sib));
		free(sib);
	}
	cJSON_AddItemToObject(obj, parts[n - 1], value);
	if (!get(doc, "name"))
		cJSON_AddStringToObject(doc, "name", "probe");
	*leaf_parent = obj;
	gp_strv_free(parts);
	return doc;
}

static void test_schema_matches_loader(void **state)
{
	(void)state;
	char *text = tu_read_file(SCHEMA, NULL);
	cJSON *root = cJSON_Parse(text);
	free(text);
	if (!root)
		fail_msg("%s is not JSON", SCHEMA);
	assert_string_equal(get(root, "$schema")->valuestring,
	                    "https://json-schema.org/draft/2020-12/schema");

	struct walk w = { .root = root };
	walk(&w, root, "");

	/* The same key paths on both sides. */
	char **keys = gp_profile_schema_keys();
	for (size_t i = 0; keys[i]; i++)
		if (!find(&w, keys[i]))
			fail_msg("the loader accepts %s; the schema lacks it", keys[i]);
	for (size_t i = 0; i < w.n; i++)
		if (!gp_strv_contains(keys, w.e[i].path))
			fail_msg("the schema has %s; the loader does not accept it",
			         w.e[i].path);
	assert_int_equal(gp_strv_len(keys), w.n);
	gp_strv_free(keys);

	struct tmp t = { .dir = tu_tmpdir() };
	t.search[0] = (char *)GP_SRCDIR "/profiles";
	for (size_t i = 0; i < w.n; i++) {
		const struct entry *e = &w.e[i];
		const char *key = strrchr(e->path, '/') + 1;
		struct gp_err err = { 0 };
		cJSON *parent;

		/* The example loads. */
		cJSON *doc = probe_doc(&w, e, example(root, e->node, e->path), &parent);
		if (load_doc(&t, doc, &err) < 0)
			fail_msg("%s: the schema's example is refused: %s", e->path,
			         err.msg);

		/* An unknown sibling is refused by name. */
		char *bogus = gp_xasprintf("%s_zz", key);
		cJSON_AddNullToObject(parent, bogus);
		char *want = gp_xasprintf("unknown key \"%s\"", bogus);
		if (load_doc(&t, doc, &err) == 0 || !strstr(err.msg, want))
			fail_msg("%s: a sibling \"%s\" is not refused as unknown (%s)",
			         e->path, bogus, err.msg);
		free(want);
		free(bogus);
		cJSON_Delete(doc);

		/* A type the schema does not allow is refused at the key. */
		cJSON *wrong = allows_string(root, e->node) ? cJSON_CreateNumber(12345)
		                                            : cJSON_CreateString("x");
		doc = probe_doc(&w, e, wrong, &parent);
		want = gp_xasprintf("\"%s\" must be", key);
		if (load_doc(&t, doc, &err) == 0 ||
		    gp_exit_code(&err) != GP_EXIT_INVALID_INPUT || !strstr(err.msg, want))
			fail_msg(
			    "%s: a value of the wrong type is not refused at the key "
			    "(%s)",
			    e->path, err.msg);
		free(want);
		cJSON_Delete(doc);
	}
	tu_rmrf(t.dir);
	free(t.dir);
	for (size_t i = 0; i < w.n; i++)
		free(w.e[i].path);
	free(w.e);
	cJSON_Delete(root);
}

int main(void)
{
	gp_profile_use_stage_keys(gp_stages_profile_keys());
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_schema_matches_loader),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
