/* Tests for the download progress renderer: formatting, throttling driven by
 * a fake clock, and the four modes, written into open_memstream. */
#include "testutil.h"

#include <cjson/cJSON.h>

#include "gpuprov/fetch.h"
#include "gpuprov/output.h"
#include "gpuprov/plan.h"
#include "gpuprov/progress.h"

#define MIB (1024ull * 1024)

struct capture {
	char *buf;
	size_t len;
	FILE *f;
	struct gp_progress p;
};

static void cap_open(struct capture *c, enum gp_progress_mode mode)
{
	memset(c, 0, sizeof *c);
	c->f = open_memstream(&c->buf, &c->len);
	assert_non_null(c->f);
	gp_progress_init(&c->p, c->f, mode);
}

/* The text written so far (stays owned by c). */
static const char *cap_text(struct capture *c)
{
	fflush(c->f);
	return c->buf ? c->buf : "";
}

static void cap_close(struct capture *c)
{
	fclose(c->f);
	free(c->buf);
}

static size_t count(const char *s, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static const struct gp_fetch_artifact art = {
	.url = "https://example.com/dl/cudnn-linux-x86_64-8.9.7.29_cuda11-archive.tar.xz",
	.sha256 = "00",
};

static struct gp_fetch_progress ev(enum gp_fetch_event e, uint64_t done, uint64_t total,
                                   double rate)
{
	return (struct gp_fetch_progress){ .event = e,
		                           .artifact = &art,
		                           .url = art.url,
		                           .done = done,
		                           .total = total,
		                           .rate = rate,
		                           .attempt = 1 };
}

static void feed(struct capture *c, enum gp_fetch_event e, uint64_t done, uint64_t total,
                 double rate, uint64_t now)
{
	struct gp_fetch_progress p = ev(e, done, total, rate);
	gp_progress_event(&c->p, &p, now);
}

static void test_format_bytes(void **state)
{
	char b[32];
	assert_string_equal(gp_format_bytes(b, sizeof b, 0), "0 B");
	assert_string_equal(gp_format_bytes(b, sizeof b, 1023), "1023 B");
	assert_string_equal(gp_format_bytes(b, sizeof b, 1024), "1.0 KiB");
	assert_string_equal(gp_format_bytes(b, sizeof b, 1536), "1.5 KiB");
	assert_string_equal(gp_format_bytes(b, sizeof b, (uint64_t)(123.4 * MIB)),
	                    "123.4 MiB");
	assert_string_equal(gp_format_bytes(b, sizeof b, 1024 * MIB - 1), "1.0 GiB");
	assert_string_equal(gp_format_bytes(b, sizeof b, 2048 * MIB), "2.0 GiB");
	assert_string_equal(gp_format_bytes(b, sizeof b, 3 * 1024 * 1024 * MIB),
	                    "3.0 TiB");
}

static void test_format_eta(void **state)
{
	char b[32];
	assert_string_equal(gp_format_eta(b, sizeof b, 0), "0:00");
	assert_string_equal(gp_format_eta(b, sizeof b, 23), "0:23");
	assert_string_equal(gp_format_eta(b, sizeof b, 22.6), "0:23");
	assert_string_equal(gp_format_eta(b, sizeof b, 725), "12:05");
	assert_string_equal(gp_format_eta(b, sizeof b, 3723), "1:02:03");
	assert_string_equal(gp_format_eta(b, sizeof b, -1), "--:--");
	assert_string_equal(gp_format_eta(b, sizeof b, 1e12), "--:--");
}

static void test_tty_line(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_TTY);
	feed(&c, GP_FETCH_EV_START, 0, 0, 0, 1000);
	assert_string_equal(cap_text(&c), "");
	/* 123.4 MiB of 850.1 MiB at 32.1 MiB/s: 14.5 %, 0:23 left. */
	feed(&c, GP_FETCH_EV_PROGRESS, (uint64_t)(123.4 * MIB), (uint64_t)(850.1 * MIB),
	     32.1 * MIB, 1001);
	assert_string_equal(cap_text(&c),
	                    "\rcudnn-linux-x86_64-8.9.7.29_cuda11-archive.tar.xz"
	                    "  123.4 MiB / 850.1 MiB  14.5%  32.1 MiB/s"
	                    "  ETA 0:23\033[K");
	cap_close(&c);
}

static void test_tty_throttle_and_final(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_TTY);
	feed(&c, GP_FETCH_EV_START, 0, 100 * MIB, 0, 0);
	/* 1000 events over one second, one every millisecond: ~10 lines. */
	for (uint64_t t = 1; t <= 1000; t++)
		feed(&c, GP_FETCH_EV_PROGRESS, t * 100 * MIB / 1000, 100 * MIB, 100 * MIB,
		     t);
	size_t lines = count(cap_text(&c), "\r");
	assert_true(lines >= 9 && lines <= 11);
	assert_null(strchr(cap_text(&c), '\n'));
	feed(&c, GP_FETCH_EV_DONE, 100 * MIB, 100 * MIB, 100 * MIB, 1000);
	const char *t = cap_text(&c);
	assert_int_equal(count(t, "\r"), lines + 1);
	assert_non_null(strstr(t, "100.0 MiB / 100.0 MiB  100.0%"));
	assert_int_equal(t[strlen(t) - 1], '\n');
	assert_int_equal(count(t, "\n"), 1);
	cap_close(&c);
}

static void test_plain_throttle(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_PLAIN);
	feed(&c, GP_FETCH_EV_START, 0, 850 * MIB, 0, 10000);
	/* Every 100 ms for 12 s: lines at 5 s and 10 s only. */
	for (uint64_t t = 10100; t <= 22000; t += 100)
		feed(&c, GP_FETCH_EV_PROGRESS, (t - 10000) * MIB / 100, 850 * MIB,
		     10 * MIB, t);
	const char *t = cap_text(&c);
	assert_int_equal(count(t, "\n"), 2);
	assert_null(strchr(t, '\r'));
	assert_null(strchr(t, '\033'));
	assert_non_null(
	    strstr(t, "gpuprov: download cudnn-linux-x86_64-8.9.7.29_cuda11-"
	              "archive.tar.xz: 50.0 MiB of 850.0 MiB (5%), 10.0 MiB/s\n"));
	/* The final line always comes, however soon after the last. */
	feed(&c, GP_FETCH_EV_DONE, 850 * MIB, 850 * MIB, 10 * MIB, 22001);
	t = cap_text(&c);
	assert_int_equal(count(t, "\n"), 3);
	assert_non_null(strstr(t, ": 850.0 MiB of 850.0 MiB (100%), 10.0 MiB/s\n"));
	cap_close(&c);
}

static void test_plain_short_download_one_line(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_PLAIN);
	struct gp_fetch_artifact named = art;
	named.name = "cudnn 8.9.7.29";
	struct gp_fetch_progress p = ev(GP_FETCH_EV_START, 0, 0, 0);
	p.artifact = &named;
	gp_progress_event(&c.p, &p, 0);
	p.event = GP_FETCH_EV_PROGRESS;
	p.done = 2048;
	gp_progress_event(&c.p, &p, 5);
	/* DONE without a total: the bytes we have are the total. */
	p.event = GP_FETCH_EV_DONE;
	p.rate = 4096;
	gp_progress_event(&c.p, &p, 10);
	assert_string_equal(
	    cap_text(&c), "gpuprov: download cudnn 8.9.7.29: 2.0 KiB of 2.0 KiB (100%), "
	                  "4.0 KiB/s\n");
	cap_close(&c);
}

static void test_plain_cache_hit_and_failure_silent(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_PLAIN);
	struct gp_fetch_progress p = ev(GP_FETCH_EV_DONE, 10, 10, 0);
	p.from_cache = true;
	gp_progress_event(&c.p, &p, 0);
	p = ev(GP_FETCH_EV_DONE, 5, 10, 0);
	p.status = -GP_FETCH_ENETWORK;
	p.message = "timed out";
	gp_progress_event(&c.p, &p, 0);
	assert_string_equal(cap_text(&c), "");
	cap_close(&c);
}

static void test_retry_closes_tty_line(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_TTY);
	feed(&c, GP_FETCH_EV_START, 0, 100, 0, 0);
	feed(&c, GP_FETCH_EV_PROGRESS, 50, 100, 10, 1);
	struct gp_fetch_progress p = ev(GP_FETCH_EV_RETRY, 50, 100, 10);
	p.message = "connection reset";
	p.retry_in_ms = 2000;
	gp_progress_event(&c.p, &p, 2);
	const char *t = cap_text(&c);
	assert_non_null(strstr(t, "\033[K\ngpuprov: download cudnn-linux-x86_64-8.9.7.29_"
	                          "cuda11-archive.tar.xz: connection reset; retrying in "
	                          "2.0 s\n"));
	cap_close(&c);
}

/* A message while a background download's line is open on the terminal
 * starts on a line of its own. */
static void test_message_ends_tty_line(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct gp_out o;
	gp_out_init(&o, f, f);
	gp_progress_init(&o.progress, f, GP_PROGRESS_TTY);
	struct gp_fetch_progress p = ev(GP_FETCH_EV_START, 0, 100, 0);
	gp_progress_callback(&p, &o.progress);
	p = ev(GP_FETCH_EV_PROGRESS, 50, 100, 10);
	gp_progress_callback(&p, &o.progress);
	assert_true(o.progress.line_open);
	gp_error(&o, "nouveau: failed");
	assert_false(o.progress.line_open);
	fflush(f);
	assert_non_null(strstr(buf, "\033[K\ngpuprov: nouveau: failed\n"));
	gp_error(&o, "again");
	assert_non_null(strstr(buf, "failed\ngpuprov: again\n"));
	fclose(f);
	free(buf);
}

/* fetch may report DONE without a rate: the last one seen, else the average. */
static void test_done_rate_fallback(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_PLAIN);
	feed(&c, GP_FETCH_EV_START, 0, 4 * MIB, 0, 1000);
	feed(&c, GP_FETCH_EV_PROGRESS, MIB, 4 * MIB, 3 * MIB, 1100);
	feed(&c, GP_FETCH_EV_DONE, 4 * MIB, 4 * MIB, 0, 2000);
	assert_non_null(strstr(cap_text(&c), "(100%), 3.0 MiB/s\n"));
	cap_close(&c);
	cap_open(&c, GP_PROGRESS_PLAIN);
	feed(&c, GP_FETCH_EV_START, 0, 4 * MIB, 0, 1000);
	feed(&c, GP_FETCH_EV_DONE, 4 * MIB, 4 * MIB, 0, 3000);
	assert_non_null(strstr(cap_text(&c), "(100%), 2.0 MiB/s\n"));
	cap_close(&c);
}

static void test_off(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_OFF);
	feed(&c, GP_FETCH_EV_START, 0, 100, 0, 0);
	for (uint64_t t = 0; t < 20000; t += 50)
		feed(&c, GP_FETCH_EV_PROGRESS, t / 200, 100, 10, t);
	feed(&c, GP_FETCH_EV_DONE, 100, 100, 10, 20000);
	assert_string_equal(cap_text(&c), "");
	cap_close(&c);
}

static void test_json(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_JSON);
	feed(&c, GP_FETCH_EV_START, 0, 1000, 0, 0);
	for (uint64_t t = 100; t <= 2500; t += 100)
		feed(&c, GP_FETCH_EV_PROGRESS, t / 10, 1000, 400.4, t);
	feed(&c, GP_FETCH_EV_DONE, 1000, 1000, 400.4, 2501);
	const char *t = cap_text(&c);
	/* start, progress at 1 s and 2 s, done: one object per line. */
	assert_int_equal(count(t, "\n"), 4);
	char *copy = strdup(t);
	const char *want[] = { "download_start", "download_progress", "download_progress",
		               "download_done" };
	size_t i = 0;
	for (char *save, *line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save), i++) {
		cJSON *o = cJSON_Parse(line);
		assert_non_null(o);
		assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring,
		                    want[i]);
		assert_string_equal(cJSON_GetObjectItem(o, "url")->valuestring, art.url);
		assert_non_null(cJSON_GetObjectItem(o, "name"));
		assert_int_equal(cJSON_GetObjectItem(o, "total")->valuedouble, 1000);
		if (i == 1) {
			assert_int_equal(cJSON_GetObjectItem(o, "done")->valuedouble,
			                 100);
			assert_int_equal(cJSON_GetObjectItem(o, "rate")->valuedouble,
			                 400);
		}
		if (i == 3) {
			assert_int_equal(cJSON_GetObjectItem(o, "done")->valuedouble,
			                 1000);
			assert_int_equal(cJSON_GetObjectItem(o, "status")->valuedouble,
			                 0);
			assert_true(cJSON_IsFalse(cJSON_GetObjectItem(o, "from_cache")));
		}
		cJSON_Delete(o);
	}
	assert_int_equal(i, 4);
	free(copy);
	cap_close(&c);
}

static void test_mode_for(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct gp_out o;
	gp_out_init(&o, f, f);
	assert_int_equal(gp_progress_mode_for(&o), GP_PROGRESS_PLAIN);
	o.format = GP_FORMAT_JSON;
	assert_int_equal(gp_progress_mode_for(&o), GP_PROGRESS_JSON);
	o.verbosity = -1;
	assert_int_equal(gp_progress_mode_for(&o), GP_PROGRESS_OFF);
	/* The sink handed to the engine renders on the output's renderer. */
	o.verbosity = 0;
	struct gp_events sink = gp_progress_events(&o);
	assert_ptr_equal(sink.fn, gp_progress_on_event);
	assert_ptr_equal(sink.data, &o.progress);
	assert_int_equal(o.progress.mode, GP_PROGRESS_JSON);
	fclose(f);
	free(buf);
}

static void test_command_plain(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_PLAIN);
	gp_progress_stage(&c.p, "nouveau", NULL, 1000);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_START, "nouveau",
	                    "/usr/sbin/update-initramfs -u", 0, 1000);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_TICK, NULL, NULL, 0, 1000 + 29999);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_TICK, NULL, NULL, 0, 1000 + 30000);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_TICK, NULL, NULL, 0, 1000 + 45000);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_DONE, NULL, NULL, 0, 1000 + 61000);
	gp_progress_stage(&c.p, "nouveau", "needed", 62000);
	/* A tick after the end, or the end of a stage never started: nothing. */
	gp_progress_command(&c.p, GP_PROGRESS_CMD_TICK, NULL, NULL, 0, 99000);
	gp_progress_stage(&c.p, "env", "satisfied", 99000);
	assert_string_equal(
	    cap_text(&c),
	    "gpuprov: stage nouveau: starting\n"
	    "gpuprov: running: /usr/sbin/update-initramfs -u\n"
	    "gpuprov: still running (30 s): /usr/sbin/update-initramfs -u\n");
	cap_close(&c);
}

static void test_command_tty(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_TTY);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_START, "env", "/sbin/ldconfig", 0, 500);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_TICK, NULL, NULL, 0, 1400);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_TICK, NULL, NULL, 0, 2500);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_DONE, NULL, NULL, 1, 65500);
	assert_string_equal(cap_text(&c),
	                    "\rgpuprov: running: /sbin/ldconfig  0:00\033[K"
	                    "\rgpuprov: running: /sbin/ldconfig  0:02\033[K"
	                    "\rgpuprov: running: /sbin/ldconfig  1:05\033[K\n");
	assert_false(c.p.line_open);
	cap_close(&c);
}

static void test_command_json_and_off(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_JSON);
	gp_progress_stage(&c.p, "env", NULL, 0);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_START, "env", "/sbin/ldconfig", 0, 0);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_TICK, NULL, NULL, 0, 10000);
	gp_progress_command(&c.p, GP_PROGRESS_CMD_DONE, NULL, NULL, 3, 12000);
	gp_progress_stage(&c.p, "env", "failed", 12000);
	assert_string_equal(
	    cap_text(&c),
	    "{\"event\":\"stage_start\",\"stage\":\"env\"}\n"
	    "{\"event\":\"command_start\",\"stage\":\"env\",\"command\":\"/sbin/"
	    "ldconfig\",\"elapsed_ms\":0}\n"
	    "{\"event\":\"command_progress\",\"stage\":\"env\",\"command\":\"/sbin/"
	    "ldconfig\",\"elapsed_ms\":10000}\n"
	    "{\"event\":\"command_done\",\"stage\":\"env\",\"command\":\"/sbin/"
	    "ldconfig\",\"elapsed_ms\":12000,\"status\":3}\n"
	    "{\"event\":\"stage_done\",\"stage\":\"env\",\"state\":\"failed\"}\n");
	cap_close(&c);
	cap_open(&c, GP_PROGRESS_OFF);
	gp_progress_stage(&c.p, "env", NULL, 0);
	gp_progress_command_begin(&c.p, "env", "/sbin/ldconfig");
	gp_progress_command_end(&c.p, 0);
	assert_string_equal(cap_text(&c), "");
	cap_close(&c);
}

/* The ticker thread starts and stops (no TICK within a 1 s interval). */
static void test_command_begin_end(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_PLAIN);
	gp_progress_command_begin(&c.p, "env", "/sbin/ldconfig");
	gp_progress_command_end(&c.p, 0);
	assert_string_equal(cap_text(&c), "gpuprov: running: /sbin/ldconfig\n");
	assert_null(c.p.cmd.what);
	cap_close(&c);
}

/* The one event callback: stage, command and download events become the
 * renderer's lines; effect events show nothing in text. */
static void test_events(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_PLAIN);
	struct gp_events sink = { gp_progress_on_event, &c.p };
	struct gp_effect effect = { .kind = GP_EFFECT_RUN };
	struct gp_fetch_progress done = ev(GP_FETCH_EV_DONE, 2 * MIB, 2 * MIB, MIB);
	const struct gp_event events[] = {
		{ .kind = GP_EVENT_STAGE_START, .stage = "env" },
		{ .kind = GP_EVENT_EFFECT, .stage = "env", .effect = &effect },
		{ .kind = GP_EVENT_COMMAND_START,
		  .stage = "env",
		  .command = "/sbin/ldconfig" },
		{ .kind = GP_EVENT_COMMAND_DONE, .stage = "env", .status = 0 },
		{ .kind = GP_EVENT_DOWNLOAD, .download = &done },
		{ .kind = GP_EVENT_STAGE_DONE, .stage = "env", .state = "needed" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(events); i++)
		gp_event_send(&sink, &events[i]);
	assert_string_equal(cap_text(&c),
	                    "gpuprov: stage env: starting\n"
	                    "gpuprov: running: /sbin/ldconfig\n"
	                    "gpuprov: download cudnn-linux-x86_64-8.9.7.29_cuda11-"
	                    "archive.tar.xz: 2.0 MiB of 2.0 MiB (100%), 1.0 MiB/s\n");
	assert_null(c.p.stage);
	cap_close(&c);
	/* The fetchers' callback forwards to the same sink, and never cancels. */
	cap_open(&c, GP_PROGRESS_PLAIN);
	sink.data = &c.p;
	assert_int_equal(gp_event_fetch_progress(&done, &sink), 0);
	assert_non_null(strstr(cap_text(&c), "(100%), 1.0 MiB/s\n"));
	cap_close(&c);
}

/* With --json an effect event is one line: the stage, the outcome and the
 * effect as the JSON plan lists it. */
static void test_effect_json(void **state)
{
	struct capture c;
	cap_open(&c, GP_PROGRESS_JSON);
	struct gp_events sink = { gp_progress_on_event, &c.p };
	char *argv[] = { "ldconfig", NULL };
	struct gp_effect run = { .kind = GP_EFFECT_RUN, .argv = argv };
	struct gp_effect dir = { .kind = GP_EFFECT_MKDIR,
		                 .path = "/opt/x",
		                 .mode = 0755 };
	gp_event_send(&sink, &(struct gp_event){ .kind = GP_EVENT_EFFECT,
	                                         .stage = "env",
	                                         .effect = &run });
	gp_event_send(&sink, &(struct gp_event){ .kind = GP_EVENT_EFFECT,
	                                         .stage = "env",
	                                         .effect = &dir,
	                                         .failed = true });
	cJSON *planned = gp_effect_to_json(&run);
	char *want = cJSON_PrintUnformatted(planned);
	char *first = gp_xasprintf("{\"event\":\"effect\",\"stage\":\"env\","
	                           "\"outcome\":\"done\",\"effect\":%s}\n",
	                           want);
	const char *text = cap_text(&c);
	assert_true(strncmp(text, first, strlen(first)) == 0);
	assert_string_equal(text + strlen(first),
	                    "{\"event\":\"effect\",\"stage\":\"env\",\"outcome\":"
	                    "\"failed\",\"effect\":{\"type\":\"mkdir\",\"path\":"
	                    "\"/opt/x\",\"mode\":\"0755\",\"change\":"
	                    "\"intentional\"}}\n");
	free(first);
	cJSON_free(want);
	cJSON_Delete(planned);
	cap_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_bytes),
		cmocka_unit_test(test_format_eta),
		cmocka_unit_test(test_tty_line),
		cmocka_unit_test(test_tty_throttle_and_final),
		cmocka_unit_test(test_plain_throttle),
		cmocka_unit_test(test_plain_short_download_one_line),
		cmocka_unit_test(test_plain_cache_hit_and_failure_silent),
		cmocka_unit_test(test_retry_closes_tty_line),
		cmocka_unit_test(test_message_ends_tty_line),
		cmocka_unit_test(test_done_rate_fallback),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_mode_for),
		cmocka_unit_test(test_events),
		cmocka_unit_test(test_effect_json),
		cmocka_unit_test(test_command_plain),
		cmocka_unit_test(test_command_tty),
		cmocka_unit_test(test_command_json_and_off),
		cmocka_unit_test(test_command_begin_end),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
