/* JSON documents with positions: comments allowed, duplicate keys
 * rejected, every value's line:column kept by JSON pointer ("/stages/env"). */
#pragma once

#include <stddef.h>

#include <cjson/cJSON.h>

#include "gpuprov/strmap.h"
#include "gpuprov/util.h"

struct gp_json_pos {
	char *pointer;
	int line, col; /* the value */
	int key_line, key_col; /* its key, for object members; else 0 */
};

struct gp_json_doc {
	char *file;
	cJSON *json;
	struct gp_json_pos *pos; /* in document order */
	size_t n_pos, cap_pos;
	struct gp_strmap by_pointer; /* pointer -> index in pos, plus one */
};

/* Exit code 65 and "FILE:LINE:COL: message" on any error. */
int gp_json_doc_parse(struct gp_json_doc *d, const char *file, const char *text,
                      size_t len, struct gp_err *err);
void gp_json_doc_free(struct gp_json_doc *d);
/* Position of the value at pointer ("" is the document); 1:1 when unknown. */
void gp_json_doc_where(const struct gp_json_doc *d, const char *pointer, int *line,
                       int *col);
/* Position of the key of the member at pointer (the value's when it has no key). */
void gp_json_doc_where_key(const struct gp_json_doc *d, const char *pointer, int *line,
                           int *col);
/* pointer + "/" + key with '~' and '/' escaped as JSON Pointer (RFC 6901) does. */
char *gp_json_pointer_append(const char *pointer, const char *key);
/* Parse and drop the positions. */
cJSON *gp_json_parse(const char *file, const char *text, size_t len, struct gp_err *err);

/* A string member of obj, or fallback. */
const char *gp_json_string(const cJSON *obj, const char *key, const char *fallback);
/* cJSON_Compare(a, b, true) for values without duplicate keys (what
 * gp_json_parse accepts and the setters here keep): objects whose members
 * come in the same order are compared member by member, in linear time;
 * cJSON_Compare looks each member up by name in the other object, which is
 * quadratic (a journal's "files" has one member per file of a cuDNN tree). */
bool gp_json_equal(const cJSON *a, const cJSON *b);
/* Sets obj's member key to item (taken over), in place: a member keeps its
 * position, and one that already has an equal value is left as it is, so
 * a document that is set to what it holds prints the same. */
void gp_json_set_item(cJSON *obj, const char *key, cJSON *item);
/* The same with a string; NULL removes the member. */
void gp_json_set_string(cJSON *obj, const char *key, const char *value);
/* An array of strings as a NULL-terminated vector, or NULL when key is absent. */
char **gp_json_strv(const cJSON *obj, const char *key);
