/* The download progress renderer (see progress.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gpuprov/fetch.h"
#include "gpuprov/output.h"
#include "gpuprov/plan.h"
#include "gpuprov/progress.h"

void gp_progress_init(struct gp_progress *p, FILE *f, enum gp_progress_mode mode)
{
	*p = (struct gp_progress){ .f = f, .mode = f ? mode : GP_PROGRESS_OFF };
}

enum gp_progress_mode gp_progress_mode_for(const struct gp_out *o)
{
	if (!o->err || o->verbosity < 0)
		return GP_PROGRESS_OFF;
	if (o->format == GP_FORMAT_JSON)
		return GP_PROGRESS_JSON;
	int fd = fileno(o->err);
	return fd >= 0 && isatty(fd) ? GP_PROGRESS_TTY : GP_PROGRESS_PLAIN;
}

struct gp_progress *gp_progress_of(struct gp_out *o)
{
	if (!o->progress.f)
		gp_progress_init(&o->progress, o->err, gp_progress_mode_for(o));
	return &o->progress;
}

struct gp_events gp_progress_events(struct gp_out *o)
{
	return (struct gp_events){ gp_progress_on_event, gp_progress_of(o) };
}

char *gp_format_bytes(char *buf, size_t n, uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	if (bytes < 1024) {
		snprintf(buf, n, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	double v = (double)bytes / 1024;
	size_t u = 0;
	/* 1023.95 MiB would print as "1024.0 MiB": move up a unit first. */
	while (v >= 1023.95 && u + 1 < sizeof units / sizeof *units) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, "%.1f %s", v, units[u]);
	return buf;
}

char *gp_format_eta(char *buf, size_t n, double seconds)
{
	if (!(seconds >= 0) || seconds > 100.0 * 3600) {
		snprintf(buf, n, "--:--");
		return buf;
	}
	unsigned long s = (unsigned long)(seconds + 0.5);
	if (s >= 3600)
		snprintf(buf, n, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(buf, n, "%lu:%02lu", s / 60, s % 60);
	return buf;
}

static struct gp_progress_slot *slot_for(struct gp_progress *p, size_t index)
{
	struct gp_progress_slot *free_slot = NULL, *oldest = &p->slots[0];
	for (size_t i = 0; i < GP_PROGRESS_SLOTS; i++) {
		struct gp_progress_slot *s = &p->slots[i];
		if (s->used && s->index == index)
			return s;
		if (!s->used && !free_slot)
			free_slot = s;
		if (s->last_ms < oldest->last_ms)
			oldest = s;
	}
	struct gp_progress_slot *s = free_slot ? free_slot : oldest;
	*s = (struct gp_progress_slot){ .used = true, .index = index };
	return s;
}

static const char *name_of(const struct gp_fetch_progress *ev, char *buf, size_t n)
{
	if (ev->artifact && ev->artifact->name)
		return ev->artifact->name;
	const char *url = ev->url ? ev->url : ev->artifact ? ev->artifact->url : NULL;
	if (!url)
		return "?";
	/* The last path component, without a query or fragment. */
	size_t len = strcspn(url, "?#");
	while (len > 0 && url[len - 1] == '/')
		len--;
	size_t start = len;
	while (start > 0 && url[start - 1] != '/')
		start--;
	if (start == len)
		return url;
	snprintf(buf, n, "%.*s", (int)(len - start), url + start);
	return buf;
}

static const char *url_of(const struct gp_fetch_progress *ev)
{
	return ev->url ? ev->url : ev->artifact ? ev->artifact->url : NULL;
}

/* TTY: ends a line left open by a redraw. */
static void close_line(struct gp_progress *p)
{
	if (p->line_open)
		fputc('\n', p->f);
	p->line_open = false;
}

static void tty_line(struct gp_progress *p, const struct gp_fetch_progress *ev,
                     uint64_t done, uint64_t total, const char *name)
{
	char d[32], t[32], r[32], eta[32];
	gp_format_bytes(d, sizeof d, done);
	gp_format_bytes(r, sizeof r, (uint64_t)(ev->rate > 0 ? ev->rate : 0));
	if (total) {
		gp_format_bytes(t, sizeof t, total);
		double left = total > done ? (double)(total - done) : 0;
		gp_format_eta(eta, sizeof eta,
		              left == 0      ? 0
		              : ev->rate > 0 ? left / ev->rate
		                             : -1);
		fprintf(p->f, "\r%s  %s / %s  %.1f%%  %s/s  ETA %s\033[K", name, d, t,
		        100.0 * (double)done / (double)total, r, eta);
	} else {
		fprintf(p->f, "\r%s  %s  %s/s\033[K", name, d, r);
	}
	p->line_open = true;
}

static void plain_line(struct gp_progress *p, const struct gp_fetch_progress *ev,
                       uint64_t done, uint64_t total, const char *name)
{
	char d[32], t[32], r[32];
	gp_format_bytes(d, sizeof d, done);
	gp_format_bytes(r, sizeof r, (uint64_t)(ev->rate > 0 ? ev->rate : 0));
	if (total)
		fprintf(p->f, "gpuprov: download %s: %s of %s (%d%%), %s/s\n", name, d,
		        gp_format_bytes(t, sizeof t, total),
		        (int)(100.0 * (double)done / (double)total), r);
	else
		fprintf(p->f, "gpuprov: download %s: %s, %s/s\n", name, d, r);
}

static void json_line(struct gp_progress *p, const struct gp_fetch_progress *ev,
                      const char *event, const char *name)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return;
	cJSON_AddStringToObject(o, "event", event);
	cJSON_AddStringToObject(o, "name", name);
	const char *url = url_of(ev);
	if (url)
		cJSON_AddStringToObject(o, "url", url);
	else
		cJSON_AddNullToObject(o, "url");
	cJSON_AddNumberToObject(o, "done", (double)ev->done);
	cJSON_AddNumberToObject(o, "total", (double)ev->total);
	cJSON_AddNumberToObject(o, "rate",
	                        ev->rate > 0 ? (double)(uint64_t)(ev->rate + 0.5) : 0);
	switch (ev->event) {
	case GP_FETCH_EV_START:
		cJSON_AddNumberToObject(o, "attempt", ev->attempt);
		break;
	case GP_FETCH_EV_RETRY:
		cJSON_AddNumberToObject(o, "attempt", ev->attempt);
		cJSON_AddNumberToObject(o, "retry_in_ms", ev->retry_in_ms);
		cJSON_AddStringToObject(o, "message", ev->message ? ev->message : "");
		break;
	case GP_FETCH_EV_DONE:
		cJSON_AddNumberToObject(o, "status", ev->status);
		cJSON_AddBoolToObject(o, "from_cache", ev->from_cache);
		if (ev->message)
			cJSON_AddStringToObject(o, "message", ev->message);
		break;
	case GP_FETCH_EV_PROGRESS:
		break;
	}
	char *s = cJSON_PrintUnformatted(o);
	if (s) {
		fputs(s, p->f);
		fputc('\n', p->f);
		cJSON_free(s);
	}
	cJSON_Delete(o);
}

void gp_progress_event(struct gp_progress *p, const struct gp_fetch_progress *ev,
                       uint64_t now_ms)
{
	if (!p || !p->f || p->mode == GP_PROGRESS_OFF)
		return;
	char buf[256];
	const char *name = name_of(ev, buf, sizeof buf);
	struct gp_progress_slot *s = slot_for(p, ev->index);
	uint64_t total = ev->total;
	if (ev->rate > 0)
		s->rate = ev->rate;

	switch (ev->event) {
	case GP_FETCH_EV_START:
		if (!s->start_ms && !s->start_done) {
			s->start_ms = now_ms ? now_ms : 1;
			s->start_done = ev->done;
		}
		s->last_ms = now_ms;
		if (p->mode == GP_PROGRESS_JSON)
			json_line(p, ev, "download_start", name);
		break;
	case GP_FETCH_EV_PROGRESS: {
		uint64_t every = p->mode == GP_PROGRESS_TTY     ? GP_PROGRESS_TTY_MS
		                 : p->mode == GP_PROGRESS_PLAIN ? GP_PROGRESS_PLAIN_MS
		                                                : GP_PROGRESS_JSON_MS;
		/* A terminal shows the first bytes at once; the others wait. */
		bool first_tty = p->mode == GP_PROGRESS_TTY && !s->shown;
		if (!first_tty && now_ms - s->last_ms < every)
			break;
		s->last_ms = now_ms;
		s->shown = true;
		if (p->mode == GP_PROGRESS_TTY)
			tty_line(p, ev, ev->done, total, name);
		else if (p->mode == GP_PROGRESS_PLAIN)
			plain_line(p, ev, ev->done, total, name);
		else
			json_line(p, ev, "download_progress", name);
		break;
	}
	case GP_FETCH_EV_RETRY:
		if (p->mode == GP_PROGRESS_JSON) {
			json_line(p, ev, "download_retry", name);
			break;
		}
		close_line(p);
		fprintf(p->f, "gpuprov: download %s: %s; retrying in %.1f s\n", name,
		        ev->message ? ev->message : "failed", ev->retry_in_ms / 1000.0);
		s->last_ms = now_ms;
		break;
	case GP_FETCH_EV_DONE: {
		/* DONE may carry no rate: the last one seen, or the
		 * average since the first START. */
		struct gp_fetch_progress fin = *ev;
		if (!(fin.rate > 0))
			fin.rate = s->rate;
		if (!(fin.rate > 0) && s->start_ms && now_ms > s->start_ms &&
		    ev->done > s->start_done)
			fin.rate = (double)(ev->done - s->start_done) * 1000 /
			           (double)(now_ms - s->start_ms);
		ev = &fin;
		if (p->mode == GP_PROGRESS_JSON) {
			json_line(p, ev, "download_done", name);
		} else if (ev->status == 0 && !ev->from_cache) {
			if (!total)
				total = ev->done;
			if (p->mode == GP_PROGRESS_TTY) {
				tty_line(p, ev, ev->done, total, name);
				close_line(p);
			} else {
				plain_line(p, ev, ev->done, total, name);
			}
		} else {
			/* A failure is reported by the caller. */
			close_line(p);
		}
		s->used = false;
		break;
	}
	}
	fflush(p->f);
}

int gp_progress_callback(const struct gp_fetch_progress *ev, void *userdata)
{
	struct gp_progress *p = userdata;
	/* Background downloads report from their own thread: the stream's lock
	 * (which gp_error & co. take too) keeps lines whole and guards p. */
	if (!p || !p->f)
		return 0;
	flockfile(p->f);
	gp_progress_event(p, ev, (uint64_t)gp_monotonic_ms());
	funlockfile(p->f);
	return 0;
}

/* --- stages and commands ------------------------------------------------ */

static void json_event(struct gp_progress *p, cJSON *o)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;
	if (s) {
		fputs(s, p->f);
		fputc('\n', p->f);
		cJSON_free(s);
	}
	cJSON_Delete(o);
}

static cJSON *json_stage_event(const char *event, const char *stage)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "event", event);
	if (stage)
		cJSON_AddStringToObject(o, "stage", stage);
	else
		cJSON_AddNullToObject(o, "stage");
	return o;
}

void gp_progress_stage(struct gp_progress *p, const char *stage, const char *state,
                       uint64_t now_ms)
{
	if (!p || !p->f || p->mode == GP_PROGRESS_OFF)
		return;
	if (state && !gp_streq(p->stage, stage))
		return;
	free(p->stage);
	p->stage = state ? NULL : gp_xstrdup(stage);
	if (p->mode == GP_PROGRESS_JSON) {
		cJSON *o = json_stage_event(state ? "stage_done" : "stage_start", stage);
		if (o && state)
			cJSON_AddStringToObject(o, "state", state);
		json_event(p, o);
	} else if (!state) {
		/* The report at the end says how each stage ended. */
		close_line(p);
		fprintf(p->f, "gpuprov: stage %s: starting\n", stage);
	}
	fflush(p->f);
}

void gp_progress_effect(struct gp_progress *p, const char *stage,
                        const struct gp_effect *effect, bool failed)
{
	/* In text the report at the end lists the effects. */
	if (!p || !p->f || p->mode != GP_PROGRESS_JSON || !effect)
		return;
	cJSON *o = json_stage_event("effect", stage);
	if (o) {
		cJSON_AddStringToObject(o, "outcome", failed ? "failed" : "done");
		cJSON_AddItemToObject(o, "effect", gp_effect_to_json(effect));
	}
	json_event(p, o);
	fflush(p->f);
}

static void tty_command_line(struct gp_progress *p, uint64_t now_ms)
{
	char elapsed[32];
	gp_format_eta(elapsed, sizeof elapsed,
	              (double)(now_ms - p->cmd.start_ms) / 1000.0);
	fprintf(p->f, "\rgpuprov: running: %s  %s\033[K", p->cmd.what, elapsed);
	p->line_open = true;
}

static uint64_t command_interval_ms(const struct gp_progress *p)
{
	return p->mode == GP_PROGRESS_TTY     ? GP_PROGRESS_CMD_TTY_MS
	       : p->mode == GP_PROGRESS_PLAIN ? GP_PROGRESS_CMD_PLAIN_MS
	                                      : GP_PROGRESS_CMD_JSON_MS;
}

void gp_progress_command(struct gp_progress *p, enum gp_progress_cmd_event ev,
                         const char *stage, const char *what, int status, uint64_t now_ms)
{
	if (!p || !p->f || p->mode == GP_PROGRESS_OFF)
		return;
	struct gp_progress_cmd *cmd = &p->cmd;
	if (ev == GP_PROGRESS_CMD_START) {
		free(cmd->what);
		free(cmd->stage);
		cmd->what = gp_xstrdup(what);
		cmd->stage = stage ? gp_xstrdup(stage) : NULL;
		cmd->start_ms = cmd->last_ms = now_ms;
	} else if (!cmd->what) {
		return; /* no command started */
	} else if (ev == GP_PROGRESS_CMD_TICK) {
		if (now_ms - cmd->last_ms < command_interval_ms(p))
			return;
		cmd->last_ms = now_ms;
	}
	uint64_t elapsed_ms = now_ms - cmd->start_ms;
	if (p->mode == GP_PROGRESS_JSON) {
		static const char *const names[] = { "command_start", "command_progress",
			                             "command_done" };
		cJSON *o = json_stage_event(names[ev], cmd->stage);
		if (o) {
			cJSON_AddStringToObject(o, "command", cmd->what);
			cJSON_AddNumberToObject(o, "elapsed_ms", (double)elapsed_ms);
			if (ev == GP_PROGRESS_CMD_DONE)
				cJSON_AddNumberToObject(o, "status", status);
		}
		json_event(p, o);
	} else if (p->mode == GP_PROGRESS_TTY) {
		if (ev == GP_PROGRESS_CMD_START)
			close_line(p);
		tty_command_line(p, now_ms);
		if (ev == GP_PROGRESS_CMD_DONE)
			close_line(p);
	} else if (ev == GP_PROGRESS_CMD_START) {
		fprintf(p->f, "gpuprov: running: %s\n", cmd->what);
	} else if (ev == GP_PROGRESS_CMD_TICK) {
		fprintf(p->f, "gpuprov: still running (%llu s): %s\n",
		        (unsigned long long)(elapsed_ms / 1000), cmd->what);
	}
	if (ev == GP_PROGRESS_CMD_DONE) {
		free(cmd->what);
		free(cmd->stage);
		cmd->what = cmd->stage = NULL;
	}
	fflush(p->f);
}

static void command_locked(struct gp_progress *p, enum gp_progress_cmd_event ev,
                           const char *stage, const char *what, int status)
{
	flockfile(p->f);
	gp_progress_command(p, ev, stage, what, status, (uint64_t)gp_monotonic_ms());
	funlockfile(p->f);
}

static void *ticker(void *data)
{
	struct gp_progress *p = data;
	struct gp_progress_cmd *cmd = &p->cmd;
	uint64_t every = command_interval_ms(p);
	pthread_mutex_lock(&cmd->lock);
	while (!cmd->stop) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += (time_t)(every / 1000);
		until.tv_nsec += (long)(every % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (pthread_cond_timedwait(&cmd->wake, &cmd->lock, &until) != 0 &&
		    !cmd->stop)
			command_locked(p, GP_PROGRESS_CMD_TICK, NULL, NULL, 0);
	}
	pthread_mutex_unlock(&cmd->lock);
	return NULL;
}

void gp_progress_command_begin(struct gp_progress *p, const char *stage, const char *what)
{
	if (!p || !p->f || p->mode == GP_PROGRESS_OFF)
		return;
	command_locked(p, GP_PROGRESS_CMD_START, stage, what, 0);
	struct gp_progress_cmd *cmd = &p->cmd;
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_mutex_init(&cmd->lock, NULL);
	pthread_cond_init(&cmd->wake, &attr);
	pthread_condattr_destroy(&attr);
	cmd->stop = false;
	/* Without the thread the command is still announced, only not timed. */
	cmd->ticking = pthread_create(&cmd->thread, NULL, ticker, p) == 0;
	if (!cmd->ticking) {
		pthread_cond_destroy(&cmd->wake);
		pthread_mutex_destroy(&cmd->lock);
	}
}

void gp_progress_command_end(struct gp_progress *p, int status)
{
	if (!p || !p->f || p->mode == GP_PROGRESS_OFF)
		return;
	struct gp_progress_cmd *cmd = &p->cmd;
	if (cmd->ticking) {
		pthread_mutex_lock(&cmd->lock);
		cmd->stop = true;
		pthread_cond_signal(&cmd->wake);
		pthread_mutex_unlock(&cmd->lock);
		pthread_join(cmd->thread, NULL);
		pthread_cond_destroy(&cmd->wake);
		pthread_mutex_destroy(&cmd->lock);
		cmd->ticking = false;
	}
	command_locked(p, GP_PROGRESS_CMD_DONE, NULL, NULL, status);
}

void gp_progress_on_event(const struct gp_event *ev, void *userdata)
{
	struct gp_progress *p = userdata;
	switch (ev->kind) {
	case GP_EVENT_DOWNLOAD:
		gp_progress_callback(ev->download, p);
		return;
	case GP_EVENT_STAGE_START:
	case GP_EVENT_STAGE_DONE:
		if (!p || !p->f)
			return;
		flockfile(p->f);
		gp_progress_stage(p, ev->stage,
		                  ev->kind == GP_EVENT_STAGE_DONE
		                      ? (ev->state ? ev->state : "?")
		                      : NULL,
		                  (uint64_t)gp_monotonic_ms());
		funlockfile(p->f);
		return;
	case GP_EVENT_COMMAND_START:
		gp_progress_command_begin(p, ev->stage, ev->command);
		return;
	case GP_EVENT_COMMAND_DONE:
		gp_progress_command_end(p, ev->status);
		return;
	case GP_EVENT_EFFECT:
		if (!p || !p->f)
			return;
		flockfile(p->f);
		gp_progress_effect(p, ev->stage, ev->effect, ev->failed);
		funlockfile(p->f);
		return;
	}
}
