/* JSON documents with positions: comments blanked without moving later
 * positions, FILE:LINE:COL for syntax errors, end of file, duplicate keys
 * and NUL bytes, garbage and deep nesting that must never crash, value
 * positions by pointer, and the small member helpers. */
#include <unistd.h>

#include "testutil.h"

#include "gpuprov/exitcodes.h"
#include "gpuprov/json.h"
#include "gpuprov/util.h"

/* Parses text (length from strlen) as "f.json"; returns rc. */
static int parse(struct gp_json_doc *d, const char *text, struct gp_err *err)
{
	memset(err, 0, sizeof *err);
	return gp_json_doc_parse(d, "f.json", text, strlen(text), err);
}

/* Parses from an exact-size heap copy, so a read past len is caught by ASan. */
static int parse_exact(struct gp_json_doc *d, const char *text, size_t len,
                       struct gp_err *err)
{
	memset(err, 0, sizeof *err);
	char *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, text, len);
	int rc = gp_json_doc_parse(d, "f.json", copy, len, err);
	free(copy);
	return rc;
}

/* Expects the parse of text to fail with exactly this message prefix
 * ("f.json:L:C: what") and exit code 65. */
static void expect_error(const char *text, const char *prefix)
{
	struct gp_json_doc d;
	struct gp_err err;
	int rc = parse(&d, text, &err);
	bool had_json = d.json != NULL;
	gp_json_doc_free(&d);
	if (rc == 0)
		fail_msg("parsed, want an error starting \"%s\"", prefix);
	assert_int_equal(rc, -1);
	assert_false(had_json);
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	if (!gp_str_starts_with(err.msg, prefix))
		fail_msg("got \"%s\", want a message starting \"%s\"", err.msg, prefix);
}

static void expect_where(const struct gp_json_doc *d, const char *pointer, int line,
                         int col)
{
	int l = -1, c = -1;
	gp_json_doc_where(d, pointer, &l, &c);
	if (l != line || c != col)
		fail_msg("%s: got %d:%d, want %d:%d", pointer, l, c, line, col);
}

/* ---- comments ------------------------------------------------------------ */

static void test_comments_valid(void **state)
{
	(void)state;
	const char *text = "// leading line comment\n"
	                   "/* a block\n"
	                   "   comment */\n"
	                   "{\n"
	                   "  \"a\": 1, // trailing\n"
	                   "  /* inline */ \"b\": [true, /* in array */ null],\n"
	                   "  \"c\": { \"d\": \"x\" } /* before the brace */\n"
	                   "}\n"
	                   "// after the document";
	struct gp_json_doc d;
	struct gp_err err;
	assert_int_equal(parse(&d, text, &err), 0);
	assert_non_null(d.json);
	assert_int_equal(cJSON_GetObjectItem(d.json, "a")->valueint, 1);
	const cJSON *b = cJSON_GetObjectItem(d.json, "b");
	assert_true(cJSON_IsArray(b));
	assert_int_equal(cJSON_GetArraySize(b), 2);
	assert_true(cJSON_IsTrue(cJSON_GetArrayItem(b, 0)));
	assert_true(cJSON_IsNull(cJSON_GetArrayItem(b, 1)));
	assert_string_equal(gp_json_string(cJSON_GetObjectItem(d.json, "c"), "d", NULL),
	                    "x");
	/* Positions are those of the original text, comments included. */
	expect_where(&d, "", 4, 1);
	expect_where(&d, "/a", 5, 8);
	expect_where(&d, "/b", 6, 21);
	expect_where(&d, "/b/0", 6, 22);
	expect_where(&d, "/b/1", 6, 43);
	expect_where(&d, "/c", 7, 8);
	expect_where(&d, "/c/d", 7, 15);
	gp_json_doc_free(&d);
	assert_null(d.json);
	assert_null(d.pos);
}

static void test_error_after_multiline_comment(void **state)
{
	(void)state;
	/* The comment spans lines 1-3; the bad token is on line 5, column 8. */
	expect_error("/* one\n"
	             "   two\n"
	             "   three */\n"
	             "{ \"a\": 1,\n"
	             "  \"b\": x }\n",
	             "f.json:5:8: syntax error");
	/* A // comment on the same line before the error. */
	expect_error("{ // c\n"
	             "  \"a\": 1 // c\n"
	             "  \"b\": 2\n"
	             "}",
	             "f.json:3:3: syntax error");
	/* Multi-byte characters in a comment count as one column each. */
	expect_error("[ /* \xc3\xa9\xc3\xa9 */ 1 2 ]", "f.json:1:14: syntax error");
}

static void test_comment_markers_in_strings(void **state)
{
	(void)state;
	const char *text = "{\n"
	                   "  \"url\": \"http://example.com/a/*b*/c\",\n"
	                   "  \"s\": \"a // not a comment\",\n"
	                   "  \"q\": \"quote \\\" // still a string /*\",\n"
	                   "  \"bs\": \"back\\\\\", \"after\": 2 // real comment\n"
	                   "}";
	struct gp_json_doc d;
	struct gp_err err;
	assert_int_equal(parse(&d, text, &err), 0);
	assert_string_equal(gp_json_string(d.json, "url", NULL),
	                    "http://example.com/a/*b*/c");
	assert_string_equal(gp_json_string(d.json, "s", NULL), "a // not a comment");
	assert_string_equal(gp_json_string(d.json, "q", NULL),
	                    "quote \" // still a string /*");
	assert_string_equal(gp_json_string(d.json, "bs", NULL), "back\\");
	assert_int_equal(cJSON_GetObjectItem(d.json, "after")->valueint, 2);
	expect_where(&d, "/after", 5, 28);
	gp_json_doc_free(&d);
}

static void test_unterminated_block_comment(void **state)
{
	(void)state;
	expect_error("{\n  \"a\": 1 /* oops\n}\n",
	             "f.json:2:10: comment opened with /* is never closed");
	expect_error("/*", "f.json:1:1: comment opened with /* is never closed");
	/* A lone '*' before the end does not close it. */
	expect_error("[1] /* *", "f.json:1:5: comment opened with /* is never closed");
	/* A comment opener inside a string opens nothing. */
	struct gp_json_doc d;
	struct gp_err err;
	assert_int_equal(parse(&d, "[\"/*\"]", &err), 0);
	gp_json_doc_free(&d);
}

/* ---- syntax errors ------------------------------------------------------- */

static void test_missing_comma_position(void **state)
{
	(void)state;
	expect_error("{\n"
	             "  \"a\": 1,\n"
	             "  \"b\": 2 \"c\": 3\n"
	             "}\n",
	             "f.json:3:10: syntax error");
	/* Wording: tells the operator what to look for. */
	struct gp_json_doc d;
	struct gp_err err;
	assert_int_equal(parse(&d, "[1 2]", &err), -1);
	assert_string_equal(err.msg,
	                    "f.json:1:4: syntax error (or nesting deeper than 1000); "
	                    "check for a missing comma, quote or bracket");
	gp_json_doc_free(&d);
	/* Trailing garbage after the document. */
	expect_error("{}\n x", "f.json:2:2: syntax error");
}

static void test_unexpected_eof(void **state)
{
	(void)state;
	expect_error("{\n  \"a\": [1, 2", "f.json:2:13: unexpected end of file");
	expect_error("{\n  \"a\": 1,\n", "f.json:3:1: unexpected end of file");
	expect_error("", "f.json:1:1: unexpected end of file");
	expect_error("  // only a comment\n", "f.json:2:1: unexpected end of file");
}

static void test_duplicate_key(void **state)
{
	(void)state;
	struct gp_json_doc d;
	struct gp_err err;
	assert_int_equal(parse(&d, "{\n  \"a\": 1,\n  \"b\": 2,\n    \"a\": 3\n}", &err),
	                 -1);
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	/* The second occurrence is the one reported. */
	assert_string_equal(err.msg, "f.json:4:5: duplicate key \"a\"; keep one of them");
	assert_null(d.json);
	gp_json_doc_free(&d);

	/* Nested, and the first of several duplicates wins the report. */
	expect_error("{\"o\": {\"k\": 1,\n \"k\": 2, \"k\": 3}}",
	             "f.json:2:2: duplicate key \"k\"");
	/* Inside an object inside an array. */
	expect_error("[{}, {\"x\": 1, \"x\": 1}]", "f.json:1:15: duplicate key \"x\"");

	/* The same key in different objects is fine. */
	assert_int_equal(
	    parse(&d, "{\"a\": {\"k\": 1}, \"b\": {\"k\": 2}, \"k\": [{\"k\": 3}]}",
	          &err),
	    0);
	gp_json_doc_free(&d);
}

/* cJSON turns \u0000, and a \u without four hex digits (which is not
 * JSON), into a NUL that ends the string: two different keys then become
 * one (found by fuzz_dockercfg: a merge wrote the key twice), and a value
 * is cut short. Both are refused where they stand; escapes of other
 * characters, and the same bytes outside strings, are not. */
static void test_nul_escapes(void **state)
{
	(void)state;
	expect_error("{\"a\": \"kept\\u0000cut\"}",
	             "f.json:1:12: a \\u escape that is \\u0000 or lacks its four hex "
	             "digits: the JSON reader would cut the string short there");
	expect_error("{\"k\\u\xff\xffx\": 1, \"k\\u\xffy\": 2}",
	             "f.json:1:4: a \\u escape");
	expect_error("[\"\\u12\"]", "f.json:1:3: a \\u escape");
	expect_error("[\"\\u\"]", "f.json:1:3: a \\u escape");
	/* In a text with comments, as in one without: a quote or an escape in
	 * a comment is no string. */
	expect_error("// \"\\u0000\n{\"a\": \"x\\u0000y\"}", "f.json:2:9: a \\u escape");
	struct gp_json_doc d;
	struct gp_err err;
	assert_int_equal(parse(&d, "/* \"\\u0000 */ {\"a\": \"\\u00e9\"}", &err), 0);
	gp_json_doc_free(&d);
	assert_int_equal(
	    parse(&d, "{\"\\u0001\\\\u0000\": \"\\u00e9\", \"x\": \"\\\\\"}", &err), 0);
	gp_json_doc_free(&d);
}

static void test_duplicate_key_after_bom(void **state)
{
	(void)state;
	/* cJSON skips a UTF-8 byte order mark; the duplicate check and the
	 * positions must not be lost because of it. */
	struct gp_json_doc d;
	struct gp_err err;
	const char bom_dup[] = "\xef\xbb\xbf{\n  \"a\": 1,\n  \"a\": 2\n}";
	int rc = parse(&d, bom_dup, &err);
	if (rc == 0) {
		gp_json_doc_free(&d);
		fail_msg("a BOM-prefixed document with a duplicate key was accepted");
	}
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	gp_json_doc_free(&d);

	const char bom_ok[] = "\xef\xbb\xbf{\n  \"a\": 1,\n  \"b\": {\"c\": 2}\n}";
	if (parse(&d, bom_ok, &err) == 0) {
		expect_where(&d, "/b/c", 3, 14);
	} else {
		/* Rejecting a BOM outright is acceptable too. */
		assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	}
	gp_json_doc_free(&d);
}

/* fuzz_dockercfg's crash of 2026-12-02: behind two marks the duplicate
 * check saw nothing, so a merge kept both keys and could not read its own
 * output. */
static void test_second_bom_refused(void **state)
{
	(void)state;
	expect_error("\xef\xbb\xbf\xef\xbb\xbf{\"a\": 1, \"a\": 2}",
	             "f.json:1:1: a second UTF-8 byte order mark");
	expect_error("\xef\xbb\xbf\xef\xbb\xbf{}", "f.json:1:1: a second UTF-8");
}

static void test_duplicate_key_via_escape(void **state)
{
	(void)state;
	/* "a\u0062" is the key "ab": cJSON decodes it, so it duplicates "ab". */
	expect_error("{\"ab\": 1,\n \"a\\u0062\": 2}", "f.json:2:2: duplicate key");
}

static void test_control_whitespace_not_duplicate(void **state)
{
	(void)state;
	/* cJSON treats any byte <= 0x20 as whitespace. Whether such a text is
	 * accepted or refused, two different keys are never "duplicate". */
	static const char *const texts[] = {
		"{\f\"a\": 1, \"b\": 2}",
		"{\"x\": {\v\"a\": \"b\"}, \"y\": [1]}",
		"[{\x01\"b\": [1], \"c\": 2}]",
	};
	for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
		struct gp_json_doc d;
		struct gp_err err;
		int rc = parse(&d, texts[i], &err);
		gp_json_doc_free(&d);
		if (rc < 0 && strstr(err.msg, "duplicate key"))
			fail_msg("text %zu: two different keys reported as: %s", i,
			         err.msg);
	}
}

static void test_nul_byte(void **state)
{
	(void)state;
	static const char text[] = "{\"a\":\n 1\0}";
	struct gp_json_doc d;
	struct gp_err err;
	assert_int_equal(parse_exact(&d, text, sizeof text - 1, &err), -1);
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	assert_string_equal(err.msg,
	                    "f.json:2:3: NUL byte: this is not a JSON text file");
	assert_null(d.json);
	gp_json_doc_free(&d);
	/* Also inside a string and at the very start. */
	static const char in_string[] = "[\"a\0b\"]";
	assert_int_equal(parse_exact(&d, in_string, sizeof in_string - 1, &err), -1);
	assert_true(gp_str_starts_with(err.msg, "f.json:1:4: NUL byte"));
	gp_json_doc_free(&d);
	assert_int_equal(parse_exact(&d, "\0", 1, &err), -1);
	assert_true(gp_str_starts_with(err.msg, "f.json:1:1: NUL byte"));
	gp_json_doc_free(&d);
}

/* ---- garbage and nesting ------------------------------------------------- */

/* A fixed-seed generator, the same on every libc. */
static uint32_t lcg(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* One parse must end in a valid document or in a well-formed error. */
static int check_one(const char *buf, size_t len)
{
	struct gp_json_doc d;
	struct gp_err err = { 0 };
	int rc = gp_json_doc_parse(&d, "f.json", buf, len, &err);
	int bad = 0;
	if (rc == 0) {
		bad = !d.json || d.n_pos == 0;
		for (size_t i = 0; !bad && i < d.n_pos; i++)
			bad = d.pos[i].line < 1 || d.pos[i].col < 1;
	} else {
		int line = 0, col = 0;
		bad = rc != -1 || gp_exit_code(&err) != GP_EXIT_INVALID_INPUT ||
		      sscanf(err.msg, "f.json:%d:%d: ", &line, &col) != 2 || line < 1 ||
		      col < 1 || d.json;
	}
	gp_json_doc_free(&d);
	return bad;
}

/* Runs fn in a child so a crash (or an ASan report) fails this test only. */
static void run_isolated(int (*fn)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		fail_msg("child killed by signal %d", WTERMSIG(st));
	if (WEXITSTATUS(st) != 0)
		fail_msg("child exited %d (a bad result, or a sanitizer report above)",
		         WEXITSTATUS(st));
}

static int control_whitespace_child(void)
{
	/* Empty objects with control bytes inside: the position scanner must
	 * stay inside the buffer (an over-read shows under ASan). */
	static const char *const texts[] = { "{\x01}", "{\n\x01\x01}", "[{\f}]",
		                             "{\"a\":{\x01}}" };
	for (size_t i = 0; i < ARRAY_SIZE(texts); i++)
		if (check_one(texts[i], strlen(texts[i])))
			return 2;
	return 0;
}

static void test_control_whitespace_in_bounds(void **state)
{
	(void)state;
	run_isolated(control_whitespace_child);
}

static int fuzz_random_bytes(void)
{
	uint32_t seed = 20240601;
	char buf[256];
	for (int it = 0; it < 20000; it++) {
		size_t len = lcg(&seed) % sizeof buf;
		/* Half the inputs without NUL bytes, to get past that check. */
		int no_nul = it & 1;
		for (size_t i = 0; i < len; i++) {
			buf[i] = (char)(lcg(&seed) & 0xff);
			if (no_nul && !buf[i])
				buf[i] = '{';
		}
		char *exact = malloc(len ? len : 1);
		memcpy(exact, buf, len);
		int bad = check_one(exact, len);
		free(exact);
		if (bad) {
			fprintf(stderr, "# bad result for random input %d\n", it);
			return 2;
		}
	}
	return 0;
}

static int fuzz_json_alphabet(void)
{
	/* JSON punctuation, comments, escapes and control bytes that cJSON
	 * skips as whitespace: many inputs parse, many nearly do. */
	static const char alpha[] = "{}[]\"\",:: \t\n\r\f\x01/*\\a1";
	uint32_t seed = 7;
	char buf[16];
	for (int it = 0; it < 200000; it++) {
		size_t len = 1 + lcg(&seed) % sizeof buf;
		for (size_t i = 0; i < len; i++)
			buf[i] = alpha[lcg(&seed) % (sizeof alpha - 1)];
		char *exact = malloc(len);
		memcpy(exact, buf, len);
		int bad = check_one(exact, len);
		free(exact);
		if (bad) {
			fprintf(stderr, "# bad result for input %d\n", it);
			return 2;
		}
	}
	return 0;
}

/* A document whose strings the position scanner reads differently from
 * cJSON (broken \\u escapes, 0xff bytes) ends the scan, whatever byte it
 * meets: an array holding a '}' once made it spin forever (fuzz_journal
 * found it). SIGALRM ends the test if it spins. */
static void test_scanner_always_advances(void **state)
{
	(void)state;
	static const char text[] =
	    "\x7b\x22\x67\x70\x75\x70\x72\x6f\x76\x5f\x73\x74\x61\x74\x65\x22"
	    "\x3a\x20\x30\x2c\x20\x22\x70\x72\x6f\x66\x69\x6c\x65\xff\x65\x3a"
	    "\x5c\x5c\x5c\x75\x2d\xff\xff\x5c\x5c\x5c\x22\x3a\xff\xff\x65\x73"
	    "\x22\x3a\x20\x5b\x5d\x2c\x20\x22\x22\x3a\x20\x5b\x5d\x2c\x20\x22"
	    "\x66\x69\x6c\x65\x6b\x6b\x4b\x6b\x6b\x6b\x6b\x2b\x6b\x6b\x6b\x22"
	    "\x3a\x20\x7b\x22\x72\x5b\x61\x73\x6f\x6e\x22\x3a\x20\x37\x7d\x7d"
	    "\x0a";
	struct gp_json_doc d = { 0 };
	struct gp_err err;
	alarm(20);
	(void)parse_exact(&d, text, sizeof text - 1, &err);
	alarm(0);
	gp_json_doc_free(&d);
	/* The same shape, small: an array closed by a brace. */
	assert_int_equal(parse(&d, "{\"a\": \"\\u-\", \"b\": [}]}", &err) <= 0, 1);
	gp_json_doc_free(&d);
}

static void test_binary_garbage(void **state)
{
	(void)state;
	run_isolated(fuzz_random_bytes);
}

static void test_json_alphabet_garbage(void **state)
{
	(void)state;
	run_isolated(fuzz_json_alphabet);
}

static void test_deep_nesting(void **state)
{
	(void)state;
	enum { DEPTH = 10000 };
	char *s = malloc(2 * DEPTH + 1);
	assert_non_null(s);
	struct gp_json_doc d;
	struct gp_err err;

	/* Unclosed, and closed: an error either way, never a crash. */
	memset(s, '[', DEPTH);
	assert_int_equal(parse_exact(&d, s, DEPTH, &err), -1);
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	assert_true(gp_str_starts_with(err.msg, "f.json:1:"));
	assert_non_null(strstr(err.msg, "nesting deeper than 1000"));
	gp_json_doc_free(&d);
	memset(s + DEPTH, ']', DEPTH);
	assert_int_equal(parse_exact(&d, s, 2 * DEPTH, &err), -1);
	assert_non_null(strstr(err.msg, "nesting deeper than 1000"));
	gp_json_doc_free(&d);

	/* Objects too. */
	struct gp_buf b = { 0 };
	for (int i = 0; i < DEPTH; i++)
		gp_buf_puts(&b, "{\"a\":");
	gp_buf_puts(&b, "1");
	for (int i = 0; i < DEPTH; i++)
		gp_buf_puts(&b, "}");
	assert_int_equal(parse_exact(&d, b.data, b.len, &err), -1);
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	gp_json_doc_free(&d);
	gp_buf_free(&b);

	/* 1000 deep is allowed, and the innermost position is known. */
	assert_int_equal(parse_exact(&d, s + DEPTH - 1000, 2000, &err), 0);
	assert_int_equal(d.n_pos, 1000);
	for (int i = 0; i < 999; i++)
		gp_buf_puts(&b, "/0");
	expect_where(&d, b.data, 1, 1000);
	gp_json_doc_free(&d);
	gp_buf_free(&b);
	free(s);
}

/* ---- positions and helpers ----------------------------------------------- */

static void test_where_nested(void **state)
{
	(void)state;
	const char *text = "{\n"
	                   "  \"stages\": {\n"
	                   "    \"env\": {\n"
	                   "      \"path\": [\"/a\",\n"
	                   "               \"/b\"],\n"
	                   "      \"vars\": { \"K\": \"v\" }\n"
	                   "    },\n"
	                   "    \"nouveau\": false\n"
	                   "  },\n"
	                   "  \"list\": [[1, [2]], {\"x\": \"\xc3\xa9\", \"y\": 3}]\n"
	                   "}";
	struct gp_json_doc d;
	struct gp_err err;
	assert_int_equal(parse(&d, text, &err), 0);
	expect_where(&d, "", 1, 1);
	expect_where(&d, "/stages", 2, 13);
	expect_where(&d, "/stages/env", 3, 12);
	expect_where(&d, "/stages/env/path", 4, 15);
	expect_where(&d, "/stages/env/path/0", 4, 16);
	expect_where(&d, "/stages/env/path/1", 5, 16);
	expect_where(&d, "/stages/env/vars", 6, 15);
	expect_where(&d, "/stages/env/vars/K", 6, 22);
	expect_where(&d, "/stages/nouveau", 8, 16);
	expect_where(&d, "/list", 10, 11);
	expect_where(&d, "/list/0", 10, 12);
	expect_where(&d, "/list/0/1", 10, 16);
	expect_where(&d, "/list/0/1/0", 10, 17);
	expect_where(&d, "/list/1", 10, 22);
	expect_where(&d, "/list/1/x", 10, 28);
	/* The é counts as one column. */
	expect_where(&d, "/list/1/y", 10, 38);
	/* Unknown pointers: 1:1. */
	expect_where(&d, "/nope", 1, 1);
	expect_where(&d, "/stages/env/path/2", 1, 1);
	expect_where(&d, "/stages/en", 1, 1);
	gp_json_doc_free(&d);
}

static void test_where_pointer_escaping(void **state)
{
	(void)state;
	/* JSON pointers escape '/' as ~1 and '~' as ~0 (RFC 6901), so the key
	 * "a/b" and the path a -> b do not collide. */
	struct gp_json_doc d;
	struct gp_err err;
	assert_int_equal(parse(&d, "{\"a/b\": 1,\n \"a\": {\"b\": 2}, \"c~d\": 3}", &err),
	                 0);
	static const struct {
		const char *pointer;
		int line, col;
	} want[] = { { "/a~1b", 1, 9 }, { "/a/b", 2, 13 }, { "/c~0d", 2, 24 } };
	int got[ARRAY_SIZE(want)][2];
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		gp_json_doc_where(&d, want[i].pointer, &got[i][0], &got[i][1]);
	gp_json_doc_free(&d);
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		if (got[i][0] != want[i].line || got[i][1] != want[i].col)
			fail_msg("%s: got %d:%d, want %d:%d", want[i].pointer, got[i][0],
			         got[i][1], want[i].line, want[i].col);
}

static void test_parse_drops_positions(void **state)
{
	(void)state;
	struct gp_err err = { 0 };
	cJSON *j = gp_json_parse("x.json", "// c\n{\"a\": [\"b\"]}", 17, &err);
	assert_non_null(j);
	assert_true(cJSON_IsArray(cJSON_GetObjectItem(j, "a")));
	cJSON_Delete(j);
	assert_null(gp_json_parse("x.json", "{\"a\":1,\"a\":2}", 13, &err));
	assert_int_equal(gp_exit_code(&err), GP_EXIT_INVALID_INPUT);
	assert_string_equal(err.msg, "x.json:1:8: duplicate key \"a\"; keep one of them");
	/* Only len bytes are read: the rest of the string is not JSON. */
	j = gp_json_parse("x.json", "[1]garbage", 3, &err);
	assert_non_null(j);
	cJSON_Delete(j);
}

/* gp_json_parse reads a text with no comments in place (no copy): from an
 * exact-size heap buffer (ASan catches a read past it) it still says where
 * the text ends too early, refuses what follows the value and a \u0000,
 * and takes trailing whitespace. */
static char *exact(const char *text)
{
	size_t len = strlen(text);
	char *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, text, len);
	return copy;
}

static void test_parse_in_place(void **state)
{
	(void)state;
	static const struct {
		const char *text, *prefix;
	} bad[] = {
		{ "{\"a\": [1,\n 2", "x.json:2:3: unexpected end of file" },
		{ "{\"a\": 1} x", "x.json:1:10: syntax error" },
		{ "{\"a\": 1}}", "x.json:1:9: syntax error" },
		{ "{\"a\": \"b\\u0000c\"}", "x.json:1:9: a \\u escape" },
		{ "[\"\\u12\"]", "x.json:1:3: a \\u escape" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct gp_err err = { 0 };
		char *text = exact(bad[i].text);
		assert_null(gp_json_parse("x.json", text, strlen(bad[i].text), &err));
		free(text);
		if (!gp_str_starts_with(err.msg, bad[i].prefix))
			fail_msg("%s: got \"%s\", want \"%s...\"", bad[i].text, err.msg,
			         bad[i].prefix);
	}
	static const char ok[] = "{\"a\": \"\\u00e9 // not a comment\"} \n\t";
	char *text = exact(ok);
	cJSON *j = gp_json_parse("x.json", text, strlen(ok), NULL);
	free(text);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItem(j, "a")->valuestring,
	                    "\xc3\xa9 // not a comment");
	cJSON_Delete(j);
}

/* gp_json_parse finds duplicates on the parsed tree (no positions): in
 * small and large objects, nested, spelt with escapes; and says where. */
static void test_parse_duplicates_without_positions(void **state)
{
	(void)state;
	struct gp_err err = { 0 };
	struct gp_buf b = { 0 };
	gp_buf_puts(&b, "{\"big\": {");
	for (int i = 0; i < 500; i++)
		gp_buf_printf(&b, "%s\"k%d\": %d", i ? ", " : "", i, i);
	gp_buf_puts(&b, ", \"k7\": 0}}");
	assert_null(gp_json_parse("x.json", b.data, b.len, &err));
	assert_non_null(strstr(err.msg, "duplicate key \"k7\""));
	gp_buf_free(&b);

	static const char *const dups[] = {
		"[{\"a\": {\"x\": 1, \"y\": {\"z\": 1, \"z\": 2}}}]",
		"{\"ab\": 1, \"a\\u0062\": 2}",
	};
	for (size_t i = 0; i < ARRAY_SIZE(dups); i++) {
		err = (struct gp_err){ 0 };
		assert_null(gp_json_parse("x.json", dups[i], strlen(dups[i]), &err));
		assert_non_null(strstr(err.msg, "duplicate key"));
	}
	/* The same key in sibling objects, and many distinct keys, are fine. */
	gp_buf_puts(&b, "{");
	for (int i = 0; i < 500; i++)
		gp_buf_printf(&b, "%s\"k%d\": {\"same\": 1}", i ? ", " : "", i);
	gp_buf_puts(&b, "}");
	cJSON *j = gp_json_parse("x.json", b.data, b.len, &err);
	assert_non_null(j);
	assert_int_equal(cJSON_GetArraySize(j), 500);
	cJSON_Delete(j);
	gp_buf_free(&b);
}

/* Positions of the values of one large object, on lines of their own. */
static void test_where_many_members(void **state)
{
	(void)state;
	struct gp_buf b = { 0 };
	gp_buf_puts(&b, "{\n");
	for (int i = 0; i < 3000; i++)
		gp_buf_printf(&b, "%s  \"V%d\": \"x\"", i ? ",\n" : "", i);
	gp_buf_puts(&b, "\n}\n");
	struct gp_json_doc d;
	struct gp_err err = { 0 };
	assert_int_equal(gp_json_doc_parse(&d, "f.json", b.data, b.len, &err), 0);
	for (int i = 0; i < 3000; i += 37) {
		char pointer[32];
		snprintf(pointer, sizeof pointer, "/V%d", i);
		int line, col;
		gp_json_doc_where_key(&d, pointer, &line, &col);
		assert_int_equal(line, i + 2);
		assert_int_equal(col, 3);
		gp_json_doc_where(&d, pointer, &line, &col);
		assert_int_equal(line, i + 2);
		assert_int_equal(col, (int)strlen(pointer) + 6);
	}
	int line, col;
	gp_json_doc_where(&d, "/V3000", &line, &col); /* unknown: 1:1 */
	assert_int_equal(line, 1);
	assert_int_equal(col, 1);
	gp_json_doc_free(&d);
	gp_buf_free(&b);
}

/* Set in place; an equal value leaves the member (and the text) as it was. */
static void test_set_in_place(void **state)
{
	(void)state;
	const char *text = "{\"a\": \"1\", \"b\": [\"x\"], \"c\": \"3\"}";
	cJSON *j = gp_json_parse("x.json", text, strlen(text), NULL);
	_cleanup_free_ char *before = cJSON_PrintUnformatted(j);
	gp_json_set_string(j, "a", "1");
	cJSON *arr = cJSON_CreateArray();
	cJSON_AddItemToArray(arr, cJSON_CreateString("x"));
	gp_json_set_item(j, "b", arr);
	_cleanup_free_ char *same = cJSON_PrintUnformatted(j);
	assert_string_equal(before, same);
	gp_json_set_string(j, "a", "2"); /* keeps its place */
	gp_json_set_string(j, "d", "4"); /* new: at the end */
	gp_json_set_string(j, "c", NULL);
	gp_json_set_string(j, "none", NULL);
	_cleanup_free_ char *after = cJSON_PrintUnformatted(j);
	assert_string_equal(after, "{\"a\":\"2\",\"b\":[\"x\"],\"d\":\"4\"}");
	cJSON_Delete(j);
}

static void test_json_string(void **state)
{
	(void)state;
	const char *text = "{\"s\": \"v\", \"e\": \"\", \"n\": 5, \"o\": {}}";
	cJSON *j = gp_json_parse("x.json", text, strlen(text), NULL);
	assert_non_null(j);
	assert_string_equal(gp_json_string(j, "s", "fb"), "v");
	assert_string_equal(gp_json_string(j, "e", "fb"), "");
	assert_string_equal(gp_json_string(j, "n", "fb"), "fb");
	assert_string_equal(gp_json_string(j, "o", "fb"), "fb");
	assert_string_equal(gp_json_string(j, "missing", "fb"), "fb");
	assert_null(gp_json_string(j, "missing", NULL));
	/* Keys are case-sensitive. */
	assert_null(gp_json_string(j, "S", NULL));
	assert_string_equal(gp_json_string(NULL, "s", "fb"), "fb");
	cJSON_Delete(j);
}

static void test_json_strv(void **state)
{
	(void)state;
	const char *text =
	    "{\"a\": [\"x\", \"y\", \"z\"], \"mixed\": [\"x\", 1, null, \"y\"],"
	    " \"empty\": [], \"str\": \"x\", \"obj\": {\"k\": \"v\"}}";
	cJSON *j = gp_json_parse("x.json", text, strlen(text), NULL);
	assert_non_null(j);
	char **v = gp_json_strv(j, "a");
	assert_non_null(v);
	assert_int_equal(gp_strv_len(v), 3);
	assert_string_equal(v[0], "x");
	assert_string_equal(v[2], "z");
	assert_null(v[3]);
	gp_strv_free(v);
	/* Non-strings are skipped. */
	v = gp_json_strv(j, "mixed");
	assert_int_equal(gp_strv_len(v), 2);
	assert_string_equal(v[1], "y");
	gp_strv_free(v);
	/* Empty array: an empty vector, not NULL. */
	v = gp_json_strv(j, "empty");
	assert_non_null(v);
	assert_null(v[0]);
	gp_strv_free(v);
	assert_null(gp_json_strv(j, "missing"));
	assert_null(gp_json_strv(j, "str"));
	assert_null(gp_json_strv(j, "obj"));
	assert_null(gp_json_strv(NULL, "a"));
	cJSON_Delete(j);
}

/* gp_json_equal says what cJSON_Compare says, members in order or not. */
static void test_json_equal_is_cjson_compare(void **state)
{
	static const char *const docs[] = {
		"{\"a\": 1, \"b\": {\"c\": [1, 2, {\"d\": \"x\"}]}}",
		"{\"b\": {\"c\": [1, 2, {\"d\": \"x\"}]}, \"a\": 1}",
		"{\"a\": 1, \"b\": {\"c\": [1, 2, {\"d\": \"y\"}]}}",
		"{\"a\": 1, \"b\": {\"c\": [2, 1, {\"d\": \"x\"}]}}",
		"{\"a\": 1, \"b\": {\"c\": [1, 2, {\"d\": \"x\"}], \"e\": null}}",
		"{\"a\": 1, \"b\": {\"c\": [1, 2]}}",
		"{\"a\": 1}",
		"{\"a\": true}",
		"{\"a\": \"1\"}",
		"{}",
		"[]",
		"[{}]",
		"1",
		"null",
	};
	cJSON *v[ARRAY_SIZE(docs)];
	for (size_t i = 0; i < ARRAY_SIZE(docs); i++) {
		struct gp_err err = { 0 };
		v[i] = gp_json_parse("f.json", docs[i], strlen(docs[i]), &err);
		assert_non_null(v[i]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(docs); i++)
		for (size_t j = 0; j < ARRAY_SIZE(docs); j++) {
			bool want = cJSON_Compare(v[i], v[j], true);
			if (gp_json_equal(v[i], v[j]) != want)
				fail_msg("%s vs %s: want %d", docs[i], docs[j], want);
		}
	assert_true(gp_json_equal(v[0], v[1]));
	assert_false(gp_json_equal(v[0], v[2]));
	assert_false(gp_json_equal(v[0], NULL));
	for (size_t i = 0; i < ARRAY_SIZE(docs); i++)
		cJSON_Delete(v[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_comments_valid),
		cmocka_unit_test(test_error_after_multiline_comment),
		cmocka_unit_test(test_comment_markers_in_strings),
		cmocka_unit_test(test_unterminated_block_comment),
		cmocka_unit_test(test_missing_comma_position),
		cmocka_unit_test(test_unexpected_eof),
		cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_duplicate_key_after_bom),
		cmocka_unit_test(test_nul_escapes),
		cmocka_unit_test(test_duplicate_key_via_escape),
		cmocka_unit_test(test_second_bom_refused),
		cmocka_unit_test(test_control_whitespace_not_duplicate),
		cmocka_unit_test(test_control_whitespace_in_bounds),
		cmocka_unit_test(test_nul_byte),
		cmocka_unit_test(test_binary_garbage),
		cmocka_unit_test(test_scanner_always_advances),
		cmocka_unit_test(test_json_alphabet_garbage),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_where_nested),
		cmocka_unit_test(test_where_pointer_escaping),
		cmocka_unit_test(test_parse_drops_positions),
		cmocka_unit_test(test_parse_duplicates_without_positions),
		cmocka_unit_test(test_where_many_members),
		cmocka_unit_test(test_set_in_place),
		cmocka_unit_test(test_parse_in_place),
		cmocka_unit_test(test_json_string),
		cmocka_unit_test(test_json_strv),
		cmocka_unit_test(test_json_equal_is_cjson_compare),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
