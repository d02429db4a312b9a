/* Progress for people and programs: the CLI's renderer of a run's
 * lifecycle events (event.h), downloads among them. A pure-ish function of
 * events, a monotonic clock value (milliseconds) and an output stream, so
 * tests drive time without sleeping.
 *
 * Modes:
 * - TTY: one line per transfer, redrawn in place with '\r' at most every
 *   100 ms ("NAME  123.4 MiB / 850.1 MiB  14.5%  32.1 MiB/s  ETA 0:23"),
 *   ended with a newline when the transfer is done.
 * - PLAIN (stderr is not a terminal): a line at most every 5 s and one at
 *   the end ("gpuprov: download NAME: 123.4 MiB of 850.1 MiB (14%), 32.1 MiB/s").
 * - JSON (--json): one object per line (download_start, download_progress at
 *   most every second, download_retry, download_done), so stdout keeps its
 *   single JSON document.
 * - OFF (-q): nothing.
 *
 * The same renderer announces a real install's stages as they start to
 * apply changes and the commands they run: "gpuprov: stage NAME: starting", "gpuprov: running: ARGV" (on a
 * TTY a live line with the time it has run, redrawn every second; plain,
 * a "still running (N s)" line every 30 s), and in JSON stage_start,
 * stage_done, command_start, command_progress (every 10 s) and
 * command_done. Effect events are not shown: the report at the end lists
 * the effects. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpuprov/event.h"

struct gp_fetch_progress;
struct gp_out;

enum gp_progress_mode {
	GP_PROGRESS_OFF,
	GP_PROGRESS_TTY,
	GP_PROGRESS_PLAIN,
	GP_PROGRESS_JSON,
};

#define GP_PROGRESS_TTY_MS 100
#define GP_PROGRESS_PLAIN_MS 5000
#define GP_PROGRESS_JSON_MS 1000
#define GP_PROGRESS_SLOTS 16
#define GP_PROGRESS_CMD_TTY_MS 1000
#define GP_PROGRESS_CMD_PLAIN_MS 30000
#define GP_PROGRESS_CMD_JSON_MS 10000

/* Zero-initialised is a valid, OFF renderer. */
struct gp_progress {
	FILE *f;
	enum gp_progress_mode mode;
	bool line_open; /* TTY: a line without its newline is on screen */
	struct gp_progress_slot {
		bool used;
		bool shown; /* a progress line was written for this transfer */
		size_t index; /* gp_fetch_progress.index */
		uint64_t last_ms; /* when the last line was written (or START) */
		uint64_t start_ms, start_done; /* at the first START */
		double rate; /* the last nonzero rate reported */
	} slots[GP_PROGRESS_SLOTS];
	char *stage; /* the stage announced as starting, until it is done */
	struct gp_progress_cmd {
		char *what; /* the running command as displayed; NULL: none */
		char *stage;
		uint64_t start_ms, last_ms;
		/* gp_progress_command_begin's ticker thread */
		bool ticking, stop;
		pthread_t thread;
		pthread_mutex_t lock;
		pthread_cond_t wake;
	} cmd;
};

enum gp_progress_cmd_event {
	GP_PROGRESS_CMD_START,
	GP_PROGRESS_CMD_TICK, /* still running: shown when its interval passed */
	GP_PROGRESS_CMD_DONE,
};

void gp_progress_init(struct gp_progress *p, FILE *f, enum gp_progress_mode mode);
/* The mode for this output: OFF with -q, JSON with --json, TTY when err is a
 * terminal, else PLAIN. */
enum gp_progress_mode gp_progress_mode_for(const struct gp_out *o);
/* The sink that renders a run's events on o->progress (set up for o): the
 * CLI hands it to the engine (gp_options.events). */
struct gp_events gp_progress_events(struct gp_out *o);
/* A gp_event_fn: userdata is a struct gp_progress. Thread-safe as
 * gp_progress_callback is. */
void gp_progress_on_event(const struct gp_event *ev, void *userdata);

/* Renders one event at now_ms (a monotonic clock, milliseconds). */
void gp_progress_event(struct gp_progress *p, const struct gp_fetch_progress *ev,
                       uint64_t now_ms);
/* A gp_fetch_progress_fn: userdata is a struct gp_progress; uses
 * CLOCK_MONOTONIC. Always returns 0. Thread-safe for one renderer: it holds
 * the stream's lock (flockfile) while rendering, as the output object's
 * messages do. */
int gp_progress_callback(const struct gp_fetch_progress *ev, void *userdata);

/* The output's renderer, set up (gp_progress_init) on first use. */
struct gp_progress *gp_progress_of(struct gp_out *o);
/* A stage starts applying (state NULL) or ends in state (an identifier,
 * "needed"); the end of a stage that did not start is not shown. */
void gp_progress_stage(struct gp_progress *p, const char *stage, const char *state,
                       uint64_t now_ms);
/* An effect of stage was made (failed: the stage failed and it was the
 * last): with --json one line holding the effect as the JSON plan lists it
 * (gp_effect_to_json) and its outcome, "done" or "failed"; nothing in text. */
void gp_progress_effect(struct gp_progress *p, const char *stage,
                        const struct gp_effect *effect, bool failed);
/* A command of stage starts (what: its display text), is still running, or
 * is done (status: its exit status, -1 when it did not exit). */
void gp_progress_command(struct gp_progress *p, enum gp_progress_cmd_event ev,
                         const char *stage, const char *what, int status,
                         uint64_t now_ms);
/* START with CLOCK_MONOTONIC, then a thread sends TICKs at the mode's
 * interval until gp_progress_command_end sends DONE. Thread-safe as
 * gp_progress_callback is. */
void gp_progress_command_begin(struct gp_progress *p, const char *stage,
                               const char *what);
void gp_progress_command_end(struct gp_progress *p, int status);

/* "512 B", "1.5 KiB", "123.4 MiB", "2.0 GiB". Returns buf. */
char *gp_format_bytes(char *buf, size_t n, uint64_t bytes);
/* "0:23", "12:05", "1:02:03"; "--:--" for a negative or absurd value. */
char *gp_format_eta(char *buf, size_t n, double seconds);
