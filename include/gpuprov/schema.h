/* The typed schema of JSON settings (src/schema.c): tables of keys, each
 * with its JSON type and a check of its value, a walker that validates an
 * object against a table with FILE:LINE:COL errors, the value checks more
 * than one table shares, and each key's JSON Schema for
 * docs/profile.schema.json. The profile's own tables are in src/profile.c;
 * each stage's table sits in its stage file (struct gp_stage.keys). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "gpuprov/json.h"
#include "gpuprov/util.h"

enum gp_key_type {
	GP_KEY_STRING,
	GP_KEY_BOOL,
	GP_KEY_NUMBER, /* within min..max; whole numbers only when .integer */
	GP_KEY_OBJECT, /* with children */
	GP_KEY_STRING_ARRAY,
	GP_KEY_STRING_MAP, /* object of string values */
	GP_KEY_STAGE, /* object with children, or false */
	GP_KEY_CUSTOM, /* validated by the key's own .validate */
};

/* A value check beyond the type: .check returns NULL when fine, else why
 * not (allocated), phrased to follow the key's name; index is the item's
 * place in its array or map (0 for a single string). .schema is the same
 * rule as JSON Schema members (a JSON object's text) for one string, or
 * with .whole for the whole array or map. */
struct gp_value_check {
	char *(*check)(const cJSON *v, size_t index);
	const char *schema;
	bool whole;
};

struct gp_schema_walk;

struct gp_key {
	const char *name;
	enum gp_key_type type;
	const struct gp_key *children; /* NULL-name terminated */
	const struct gp_value_check *check; /* each string, array item or map entry */
	const char *const *choices; /* STRING: the values allowed, NULL-terminated */
	double min, max; /* NUMBER: the bounds, both included */
	bool integer; /* NUMBER: whole numbers only */
	/* CUSTOM: validates the value (type included); 0 or -1 with w->err set. */
	int (*validate)(const struct gp_schema_walk *w, const cJSON *v,
	                const char *pointer, const struct gp_key *k);
	/* For docs/profile.schema.json: one line, and JSON texts. */
	const char *doc, *example, *default_value;
};

#define GP_KEY_END                                                                       \
	{                                                                                \
		.name = NULL                                                             \
	}

struct gp_schema_walk {
	const struct gp_json_doc *d;
	struct gp_err *err;
	/* Optional: called for every string a value check accepted. */
	void (*accepted)(const struct gp_schema_walk *w, const cJSON *v,
	                 const char *pointer, const struct gp_key *k);
	void *data;
};

/* Validates obj's members against keys: an unknown key (with a did-you-mean
 * or the known keys), a wrong type, a value its check refuses. Stops at the
 * first problem unless w->err->all (then goes on with the next member). */
int gp_schema_validate(const struct gp_schema_walk *w, const cJSON *obj,
                       const char *pointer, const struct gp_key *keys);
/* A FILE:LINE:COL error (exit 65) at the value at pointer, or at its key. */
int gp_schema_fail(const struct gp_json_doc *d, const char *pointer, bool at_key,
                   struct gp_err *err, const char *fmt, ...) _printf_(5, 6);

/* Every key path under pointer, as JSON pointers, parents first. */
void gp_schema_push_paths(char ***v, const char *pointer, const struct gp_key *keys);
/* "string", "boolean", "number", "integer", "object", "array of strings",
 * "object of strings", "object or false", "custom". */
const char *gp_schema_type_word(const struct gp_key *k);
/* The key's JSON Schema (docs/profile.schema.json): type or $ref, description,
 * the check's rule, enum, bounds, default, examples. */
cJSON *gp_schema_key_json(const struct gp_key *k);

/* For value checks and messages. */
/* s quoted for a message: at most about 60 bytes, escaped to one line. */
char *gp_schema_quoted(const char *s);
/* "WHY (got "VALUE")". */
char *gp_schema_why_got(const char *s, const char *why);
/* What a value of the wrong type is, for "(got ...)". */
char *gp_schema_describe(const cJSON *v);
/* The nearest of a NULL-terminated list (fewer than 3 edits away), or NULL. */
const char *gp_schema_closest(const char *s, const char *const *list);
/* s holds only bytes of set. */
bool gp_schema_only(const char *s, const char *set);
/* min..max dot-separated runs of digits: "535.104.05". */
bool gp_schema_numeric_parts(const char *s, int min, int max);
/* Absolute, no '.', '..' or empty components, no ':', no control characters. */
bool gp_schema_plain_absolute_path(const char *s);

#define GP_DIGITS "0123456789"
#define GP_LOWER "abcdefghijklmnopqrstuvwxyz"
#define GP_UPPER "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define GP_ALNUM GP_LOWER GP_UPPER GP_DIGITS

/* The shared checks. */
extern const struct gp_value_check gp_check_url; /* https:// (http:// see profile.c) */
extern const struct gp_value_check gp_check_sha256;
extern const struct gp_value_check gp_check_directory; /* PATH and ld.so.conf lists */
extern const struct gp_value_check gp_check_file_path; /* a file in the root */
extern const struct gp_value_check gp_check_root_file; /* the same, said otherwise */
extern const struct gp_value_check gp_check_argv; /* an array: a command first */
extern const struct gp_value_check gp_check_install_dir; /* /usr/local/ or /opt/ */
extern const struct gp_value_check gp_check_prefix_dir; /* also /srv/ */
/* The url check without the http note (for a check built on it). */
char *gp_schema_check_url(const cJSON *v, size_t i);

/* Table rows. */
#define GP_KEY_STRING_ROW(k, chk, ...)                                                   \
	{                                                                                \
		.name = (k), .type = GP_KEY_STRING, .check = (chk), __VA_ARGS__          \
	}
#define GP_KEY_ENUM_ROW(k, list, ...)                                                    \
	{                                                                                \
		.name = (k), .type = GP_KEY_STRING, .choices = (list), __VA_ARGS__       \
	}
#define GP_KEY_BOOL_ROW(k, ...)                                                          \
	{                                                                                \
		.name = (k), .type = GP_KEY_BOOL, __VA_ARGS__                            \
	}
#define GP_KEY_STRINGS_ROW(k, chk, ...)                                                  \
	{                                                                                \
		.name = (k), .type = GP_KEY_STRING_ARRAY, .check = (chk), __VA_ARGS__    \
	}
#define GP_KEY_NUMBER_ROW(k, lo, hi, ...)                                                \
	{                                                                                \
		.name = (k), .type = GP_KEY_NUMBER, .min = (lo), .max = (hi),            \
		__VA_ARGS__                                                              \
	}
