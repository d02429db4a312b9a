/* Lifecycle events of a real run, sent as they happen through one callback
 * that the CLI renders (src/progress.c: the live progress lines, JSON lines
 * with --json). The engine installs it: gp_options.events becomes the
 * context's, and the fetchers' progress callback forwards their events as
 * GP_EVENT_DOWNLOAD. The engine sends a stage's start and end, the effect
 * door each effect and each command it runs. A dry run sends none: its
 * result is the plan. */
#pragma once

#include <stdbool.h>

struct gp_effect;
struct gp_fetch_progress;

enum gp_event_kind {
	GP_EVENT_STAGE_START, /* stage: it starts applying its changes */
	GP_EVENT_EFFECT, /* effect: one of the stage's, once it was made (or
	                  * failed: then the last before STAGE_DONE); an open
	                  * rule's effects are not sent, the rule is once it
	                  * ends, so the stream lists the plan's effects */
	GP_EVENT_COMMAND_START, /* command: it starts, as displayed */
	GP_EVENT_COMMAND_DONE, /* status: its exit status, -1: it did not exit */
	GP_EVENT_STAGE_DONE, /* state: how the stage ended (an identifier) */
	GP_EVENT_DOWNLOAD, /* download: a fetch event, from any thread */
};

/* Members that do not apply to the kind are NULL (or 0); all are borrowed
 * for the duration of the call. */
struct gp_event {
	enum gp_event_kind kind;
	const char *stage; /* NULL outside a stage (downloads) */
	const char *state;
	const struct gp_effect *effect;
	/* EFFECT: the stage failed and this was its last effect (the one it
	 * was making, or the last it made before the failure). */
	bool failed;
	const char *command;
	int status;
	const struct gp_fetch_progress *download;
};

/* Called from the main thread and, for downloads, from the prefetch
 * thread: it must be thread-safe (gp_progress_on_event is). */
typedef void (*gp_event_fn)(const struct gp_event *ev, void *userdata);

struct gp_events {
	gp_event_fn fn; /* NULL: nobody listens */
	void *data;
};

/* Sends ev to sink's callback, when there is one. */
void gp_event_send(const struct gp_events *sink, const struct gp_event *ev);
/* A gp_fetch_progress_fn that forwards each fetch event as a
 * GP_EVENT_DOWNLOAD to the struct gp_events at userdata. Returns 0 (never
 * cancels). */
int gp_event_fetch_progress(const struct gp_fetch_progress *p, void *userdata);
