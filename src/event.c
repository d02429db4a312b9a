/* Lifecycle events: the one callback the engine installs (event.h). */
#include <stddef.h>

#include "gpuprov/event.h"

void gp_event_send(const struct gp_events *sink, const struct gp_event *ev)
{
	if (sink && sink->fn)
		sink->fn(ev, sink->data);
}

int gp_event_fetch_progress(const struct gp_fetch_progress *p, void *userdata)
{
	gp_event_send(userdata,
	              &(struct gp_event){ .kind = GP_EVENT_DOWNLOAD, .download = p });
	return 0;
}
