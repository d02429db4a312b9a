/* JSON input with the errors an operator can act on: comments are blanked
 * (newlines kept, so positions stay right), syntax errors and duplicate
 * keys are reported as FILE:LINE:COL, and every value's position is kept
 * so later validation can point at it. cJSON does the parsing; a small
 * scanner walks the same text once for positions and duplicates, counting
 * lines as it goes and indexing the positions by JSON pointer, so a
 * document of any size is handled in time linear in its length. */
#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "gpuprov/json.h"

static void position_of(const char *text, size_t off, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off; i++) {
		if (text[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)text[i] & 0xc0) != 0x80) {
			(*col)++;
		}
	}
}

/* Is s[i] (a backslash in a string) the start of a \u escape the JSON
 * reader would turn into a NUL and so cut the string there: \u0000, or
 * one without four hex digits (not JSON, but cJSON takes it as 0)? */
static bool nul_escape_at(const char *s, size_t len, size_t i)
{
	if (i + 1 >= len || s[i + 1] != 'u')
		return false;
	size_t hex = 0;
	while (hex < 4 && i + 2 + hex < len && isxdigit((unsigned char)s[i + 2 + hex]))
		hex++;
	return hex < 4 || memcmp(s + i + 2, "0000", 4) == 0;
}

/* One read-only pass for a text that may have no comments (a file
 * gpuprov wrote has none): the offset of the first comment outside a
 * string, or len, and until there the first NUL-making escape in
 * *nul_at (len when none). A text with no comment needs no copy to blank
 * them in; one whose comments are blanked gets the escape of the whole. */
static size_t first_comment(const char *s, size_t len, size_t *nul_at)
{
	bool in_string = false;
	*nul_at = len;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];
		if (in_string) {
			if (ch == '"') {
				in_string = false;
			} else if (ch == '\\') {
				if (*nul_at == len && nul_escape_at(s, len, i))
					*nul_at = i;
				i++;
			}
		} else if (ch == '"') {
			in_string = true;
		} else if (ch == '/' && i + 1 < len &&
		           (s[i + 1] == '/' || s[i + 1] == '*')) {
			return i;
		}
	}
	return len;
}

/* Replaces // and block comments outside strings with spaces. Returns
 * false on an unterminated block comment (*bad_off set). */
static bool blank_comments(char *s, size_t len, size_t *bad_off)
{
	bool in_string = false;
	for (size_t i = 0; i < len; i++) {
		if (in_string) {
			if (s[i] == '\\' && i + 1 < len)
				i++;
			else if (s[i] == '"')
				in_string = false;
			continue;
		}
		if (s[i] == '"') {
			in_string = true;
		} else if (s[i] == '/' && i + 1 < len && s[i + 1] == '/') {
			while (i < len && s[i] != '\n')
				s[i++] = ' ';
		} else if (s[i] == '/' && i + 1 < len && s[i + 1] == '*') {
			size_t start = i;
			s[i++] = ' ';
			s[i++] = ' ';
			while (i < len &&
			       !(s[i] == '*' && i + 1 < len && s[i + 1] == '/')) {
				if (s[i] != '\n')
					s[i] = ' ';
				i++;
			}
			if (i >= len) {
				*bad_off = start;
				return false;
			}
			s[i++] = ' ';
			s[i] = ' ';
		}
	}
	return true;
}

struct scanner {
	const char *s;
	size_t len, i;
	struct gp_json_doc *doc;
	struct gp_err *err;
	int failed;
	/* Where counting lines has got to: line:col of offset at. */
	size_t at;
	int line, col;
};

/* line:col of off, counted on from the last offset asked for: the scanner
 * asks in increasing order, so the text is counted through once. */
static void locate(struct scanner *sc, size_t off, int *line, int *col)
{
	/* Input cJSON accepted but the scanner reads differently must not
	 * send it past the text. */
	if (off > sc->len)
		off = sc->len;
	if (off < sc->at) { /* never happens in one left-to-right pass */
		position_of(sc->s, off, line, col);
		return;
	}
	for (; sc->at < off; sc->at++) {
		if (sc->s[sc->at] == '\n') {
			sc->line++;
			sc->col = 1;
		} else if (((unsigned char)sc->s[sc->at] & 0xc0) != 0x80) {
			sc->col++;
		}
	}
	*line = sc->line;
	*col = sc->col;
}

/* Whitespace as cJSON sees it: every byte up to and including space. The
 * scanner must skip exactly what cJSON skipped to stay in step with it. */
static void skip_ws(struct scanner *sc)
{
	while (sc->i < sc->len && (unsigned char)sc->s[sc->i] <= ' ')
		sc->i++;
}

static unsigned hex4(const char *p)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v = v * 16 + (unsigned)(c >= 'a'   ? c - 'a' + 10
		                        : c >= 'A' ? c - 'A' + 10
		                                   : c - '0');
	}
	return v;
}

static void append_utf8(struct gp_buf *b, unsigned cp)
{
	char out[4];
	size_t n;
	if (cp < 0x80) {
		out[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		out[0] = (char)(0xf0 | cp >> 18);
		out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	gp_buf_append(b, out, n);
}

/* Reads a string token (already validated by cJSON) and decodes it, so
 * "a\u0062" and "ab" are the same key. */
static char *scan_string(struct scanner *sc)
{
	static const char simple_from[] = "\"\\/bfnrt";
	static const char simple_to[] = "\"\\/\b\f\n\r\t";
	struct gp_buf b = { 0 };
	sc->i++; /* opening quote */
	while (sc->i < sc->len && sc->s[sc->i] != '"') {
		const char *p = sc->s + sc->i;
		size_t plain = strcspn(p, "\"\\");
		if (plain) { /* a run of plain bytes; the copy ends in a NUL */
			gp_buf_append(&b, p, plain);
			sc->i += plain;
			continue;
		}
		if (*p != '\\' || sc->i + 1 >= sc->len) {
			gp_buf_append(&b, p, 1);
			sc->i++;
			continue;
		}
		const char *simple = strchr(simple_from, p[1]);
		if (simple && p[1]) {
			gp_buf_append(&b, &simple_to[simple - simple_from], 1);
			sc->i += 2;
		} else if (p[1] == 'u' && sc->i + 6 <= sc->len) {
			unsigned cp = hex4(p + 2);
			sc->i += 6;
			if (cp >= 0xd800 && cp < 0xdc00 && sc->i + 6 <= sc->len &&
			    sc->s[sc->i] == '\\' && sc->s[sc->i + 1] == 'u') {
				unsigned lo = hex4(sc->s + sc->i + 2);
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				sc->i += 6;
			}
			append_utf8(&b, cp);
		} else {
			gp_buf_append(&b, p, 2);
			sc->i += 2;
		}
	}
	if (sc->i < sc->len)
		sc->i++; /* closing quote */
	return gp_buf_steal(&b);
}

/* Records where the value at pointer starts; false when the document has
 * a value there already (an object key given twice: the same pointer). */
static bool record(struct scanner *sc, const char *pointer, size_t off)
{
	struct gp_json_doc *d = sc->doc;
	if (d->n_pos == d->cap_pos) {
		d->cap_pos = d->cap_pos ? 2 * d->cap_pos : 64;
		d->pos = gp_xrealloc(d->pos, d->cap_pos * sizeof *d->pos);
	}
	struct gp_json_pos *p = &d->pos[d->n_pos];
	*p = (struct gp_json_pos){ .pointer = gp_xstrdup(pointer) };
	locate(sc, off, &p->line, &p->col);
	/* The index holds entry numbers + 1: the array moves as it grows. */
	uintptr_t entry = ++d->n_pos;
	return !gp_strmap_put(&d->by_pointer, p->pointer, (void *)entry);
}

static bool scan_value(struct scanner *sc, const char *pointer);

static void scan_object(struct scanner *sc, const char *pointer)
{
	sc->i++;
	for (;;) {
		skip_ws(sc);
		if (sc->i >= sc->len || sc->s[sc->i] == '}')
			break;
		if (sc->s[sc->i] == ',') {
			sc->i++;
			continue;
		}
		int key_line, key_col;
		locate(sc, sc->i, &key_line, &key_col);
		_cleanup_free_ char *key = scan_string(sc);
		skip_ws(sc);
		sc->i++; /* ':' */
		skip_ws(sc);
		_cleanup_free_ char *child = gp_json_pointer_append(pointer, key);
		size_t entry = sc->doc->n_pos;
		if (!scan_value(sc, child) && !sc->failed) {
			gp_fail(sc->err, GP_EINPUT,
			        "%s:%d:%d: duplicate key \"%s\"; keep one of them",
			        sc->doc->file, key_line, key_col, key);
			sc->failed = 1;
		}
		sc->doc->pos[entry].key_line = key_line;
		sc->doc->pos[entry].key_col = key_col;
	}
	sc->i++;
}

static void scan_array(struct scanner *sc, const char *pointer)
{
	sc->i++;
	for (size_t index = 0;;) {
		skip_ws(sc);
		if (sc->i >= sc->len || sc->s[sc->i] == ']')
			break;
		if (sc->s[sc->i] == ',') {
			sc->i++;
			continue;
		}
		_cleanup_free_ char *child = gp_xasprintf("%s/%zu", pointer, index++);
		size_t at = sc->i;
		scan_value(sc, child);
		/* A byte no value starts with (a '}' where the scanner's reading
		 * of a string left it out of step with cJSON's): step over it,
		 * or the scan never ends. */
		if (sc->i == at)
			sc->i++;
	}
	sc->i++;
}

/* Scans one value; false when its pointer was seen before. */
static bool scan_value(struct scanner *sc, const char *pointer)
{
	skip_ws(sc);
	bool first = record(sc, pointer, sc->i);
	if (sc->i >= sc->len)
		return first;
	switch (sc->s[sc->i]) {
	case '{':
		scan_object(sc, pointer);
		break;
	case '[':
		scan_array(sc, pointer);
		break;
	case '"':
		free(scan_string(sc));
		break;
	default:
		while (sc->i < sc->len && !strchr(",]} \t\r\n", sc->s[sc->i]))
			sc->i++;
	}
	return first;
}

/* The value text[0, len) holds with nothing but whitespace after it, or
 * NULL. */
static cJSON *parse_whole(const char *text, size_t len)
{
	const char *end = NULL;
	cJSON *json = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	/* cJSON's own check of what follows wants a NUL inside the length. */
	size_t after = json && end ? (size_t)(end - text) : len;
	while (after < len && (unsigned char)text[after] <= ' ')
		after++;
	if (json && after < len) {
		cJSON_Delete(json);
		return NULL;
	}
	return json;
}

/* Does an object in v hold a key twice? cJSON keeps both (decoded, as the
 * scanner decodes them). Small objects are compared pairwise. */
static bool has_duplicate_key(const cJSON *v)
{
	size_t members = 0;
	for (const cJSON *c = v->child; c; c = c->next, members++)
		if (c->child && has_duplicate_key(c))
			return true;
	if (!cJSON_IsObject(v) || members < 2)
		return false;
	if (members <= 8) {
		for (const cJSON *a = v->child; a; a = a->next)
			for (const cJSON *b = a->next; b; b = b->next)
				if (strcmp(a->string, b->string) == 0)
					return true;
		return false;
	}
	struct gp_strmap keys = { 0 };
	bool again = false;
	for (const cJSON *c = v->child; c && !again; c = c->next)
		again = gp_strmap_put(&keys, c->string, (void *)c) != NULL;
	gp_strmap_free(&keys);
	return again;
}

/* Parses text; the positions are kept when positions is true. */
static int parse(struct gp_json_doc *d, const char *file, const char *text, size_t len,
                 bool positions, struct gp_err *err)
{
	*d = (struct gp_json_doc){ .file = gp_xstrdup(file) };
	/* A UTF-8 byte order mark is not part of the text editors show. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}
	/* cJSON skips one more itself, which the position scanner would not:
	 * its duplicate check would see nothing. A second mark is not JSON. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		return gp_fail(err, GP_EINPUT,
		               "%s:1:1: a second UTF-8 byte order mark: this is not a "
		               "JSON text; remove it",
		               file);
	const char *nul = memchr(text, '\0', len);
	if (nul) {
		int line, col;
		position_of(text, (size_t)(nul - text), &line, &col);
		return gp_fail(err, GP_EINPUT,
		               "%s:%d:%d: NUL byte: this is not a JSON text file", file,
		               line, col);
	}
	/* The scanner for positions reads a NUL-terminated copy; so does
	 * blanking comments. Without either, cJSON reads text itself. */
	size_t nul_at;
	bool comments = first_comment(text, len, &nul_at) < len;
	_cleanup_free_ char *copy = NULL;
	if (comments || positions)
		copy = gp_xstrndup(text, len);
	size_t bad = 0;
	if (comments && !blank_comments(copy, len, &bad)) {
		int line, col;
		position_of(text, bad, &line, &col);
		return gp_fail(err, GP_EINPUT,
		               "%s:%d:%d: comment opened with /* is never closed", file,
		               line, col);
	}
	if (comments)
		first_comment(copy, len, &nul_at);
	if (nul_at < len) {
		int line, col;
		position_of(text, nul_at, &line, &col);
		return gp_fail(err, GP_EINPUT,
		               "%s:%d:%d: a \\u escape that is \\u0000 or lacks its four "
		               "hex digits: the JSON reader would cut the string short "
		               "there; remove it",
		               file, line, col);
	}
	const char *end = NULL;
	cJSON *json = copy ? cJSON_ParseWithOpts(copy, &end, 1) : parse_whole(text, len);
	if (!json && !copy) {
		/* Again from a NUL-terminated copy, for where it went wrong: cJSON
		 * puts an error at the end of a text with a length one byte short
		 * of it. */
		copy = gp_xstrndup(text, len);
		json = cJSON_ParseWithOpts(copy, &end, 1);
	}
	if (!json) {
		size_t off = end && end >= copy ? (size_t)(end - copy) : 0;
		if (off > len)
			off = len;
		const char *what = off >= len
		                       ? "unexpected end of file"
		                       : "syntax error (or nesting deeper than 1000)";
		int line, col;
		position_of(text, off, &line, &col);
		return gp_fail(
		    err, GP_EINPUT,
		    "%s:%d:%d: %s; check for a missing comma, quote or bracket", file,
		    line, col, what);
	}
	/* Without positions the scanner is needed only to say where a
	 * duplicate key is. */
	if (!positions && !has_duplicate_key(json)) {
		d->json = json;
		return 0;
	}
	if (!copy) /* a duplicate key: the scanner says where */
		copy = gp_xstrndup(text, len);
	struct scanner sc = {
		.s = copy, .len = len, .doc = d, .err = err, .line = 1, .col = 1
	};
	scan_value(&sc, "");
	/* Whatever the scanner missed, a duplicate cJSON holds is refused. */
	if (!sc.failed && has_duplicate_key(json))
		sc.failed = gp_fail(err, GP_EINPUT,
		                    "%s: a key appears twice in one object; keep one "
		                    "of them",
		                    file) < 0;
	if (sc.failed) {
		cJSON_Delete(json);
		return -1;
	}
	d->json = json;
	return 0;
}

int gp_json_doc_parse(struct gp_json_doc *d, const char *file, const char *text,
                      size_t len, struct gp_err *err)
{
	return parse(d, file, text, len, true, err);
}

void gp_json_doc_free(struct gp_json_doc *d)
{
	for (size_t i = 0; i < d->n_pos; i++)
		free(d->pos[i].pointer);
	free(d->pos);
	gp_strmap_free(&d->by_pointer);
	free(d->file);
	cJSON_Delete(d->json);
	*d = (struct gp_json_doc){ 0 };
}

static const struct gp_json_pos *find_pos(const struct gp_json_doc *d,
                                          const char *pointer)
{
	uintptr_t entry = (uintptr_t)gp_strmap_get(&d->by_pointer, pointer);
	return entry ? &d->pos[entry - 1] : NULL;
}

void gp_json_doc_where(const struct gp_json_doc *d, const char *pointer, int *line,
                       int *col)
{
	const struct gp_json_pos *p = find_pos(d, pointer);
	*line = p ? p->line : 1;
	*col = p ? p->col : 1;
}

void gp_json_doc_where_key(const struct gp_json_doc *d, const char *pointer, int *line,
                           int *col)
{
	const struct gp_json_pos *p = find_pos(d, pointer);
	if (p && p->key_line) {
		*line = p->key_line;
		*col = p->key_col;
	} else {
		gp_json_doc_where(d, pointer, line, col);
	}
}

cJSON *gp_json_parse(const char *file, const char *text, size_t len, struct gp_err *err)
{
	struct gp_json_doc d;
	if (parse(&d, file, text, len, false, err) < 0) {
		gp_json_doc_free(&d);
		return NULL;
	}
	cJSON *json = TAKE_PTR(d.json);
	gp_json_doc_free(&d);
	return json;
}

const char *gp_json_string(const cJSON *obj, const char *key, const char *fallback)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(v) ? v->valuestring : fallback;
}

bool gp_json_equal(const cJSON *a, const cJSON *b)
{
	if (!a || !b || (a->type & 0xFF) != (b->type & 0xFF) ||
	    !(cJSON_IsObject(a) || cJSON_IsArray(a)))
		return cJSON_Compare(a, b, true);
	const cJSON *x = a->child, *y = b->child;
	for (; x && y; x = x->next, y = y->next) {
		/* Members in another order: cJSON_Compare finds them by name. */
		if (cJSON_IsObject(a) && strcmp(x->string, y->string) != 0)
			return cJSON_Compare(a, b, true);
		if (!gp_json_equal(x, y))
			return false;
	}
	/* One has a member or element more (no key is there twice). */
	return !x && !y;
}

void gp_json_set_item(cJSON *obj, const char *key, cJSON *item)
{
	cJSON *old = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (old && gp_json_equal(old, item))
		cJSON_Delete(item);
	else if (old)
		cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item);
	else
		cJSON_AddItemToObject(obj, key, item);
}

void gp_json_set_string(cJSON *obj, const char *key, const char *value)
{
	if (value)
		gp_json_set_item(obj, key, cJSON_CreateString(value));
	else
		cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
}

char **gp_json_strv(const cJSON *obj, const char *key)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!cJSON_IsArray(arr))
		return NULL;
	char **v = gp_xcalloc(1, sizeof(char *));
	for (const cJSON *item = arr->child; item; item = item->next)
		if (cJSON_IsString(item))
			gp_strv_push(&v, item->valuestring);
	return v;
}

char *gp_json_pointer_append(const char *pointer, const char *key)
{
	struct gp_buf b = { 0 };
	gp_buf_puts(&b, pointer);
	gp_buf_puts(&b, "/");
	for (const char *c = key; *c;) {
		size_t plain = strcspn(c, "~/");
		gp_buf_append(&b, c, plain);
		c += plain;
		if (*c)
			gp_buf_puts(&b, *c++ == '~' ? "~0" : "~1");
	}
	return gp_buf_steal(&b);
}
