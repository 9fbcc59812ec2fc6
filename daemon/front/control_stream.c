// SPDX-License-Identifier: MIT
#include "control_internal.h"
#include "log.h"
#include "proto.h"
#include "view.h"

static int sub_send(struct subscription *sub, const json_t *ev)
{
	return session_send_json(sub->s, PROTO_EVENT, sub->id, json_incref((json_t *)ev),
			 NULL, 0);
}

/* ev as this session may see it (view.h): a new reference. */
static json_t *sub_view(const struct subscription *sub, const json_t *ev)
{
	const struct api_viewer v = { .admin = sub->s->admin,
				      .has_uid = true,
				      .uid = sub->s->cred.uid };

	return api_view_event(ev, &v);
}

/* Send what waits, as far as the socket takes it; once an overflowed
 * queue is empty, say so and end the subscription. */
static void sub_flush(struct subscription *sub)
{
	struct events_queued e;
	int r = 0;

	while (events_queue_pop(&sub->q, &e)) {
		r = sub_send(sub, e.ev);
		if (r == -EAGAIN) {
			events_queue_unpop(&sub->q, &e);
			break;
		}
		json_decref(e.ev);
		if (r < 0)
			break;
	}
	if (r != -EAGAIN && sub->q.overflowed && !sub->q.n) {
		json_t *last = events_queue_overflow(&sub->q);

		log_notice("session %u (pid %d): too slow for the event "
			   "stream, unsubscribed",
			   sub->s->id, (int)sub->s->cred.pid);
		if (last)
			session_send_json(sub->s, PROTO_EVENT, sub->id, last, NULL, 0);
		subscription_free(sub);
		return;
	}
	sd_event_source_set_enabled(sub->out, sub->q.n || sub->q.overflowed
						      ? SD_EVENT_ON
						      : SD_EVENT_OFF);
}

static int on_sub_writable(sd_event_source *es, int fd, uint32_t revents,
			   void *ud)
{
	(void)es;
	(void)fd;
	(void)revents;
	sub_flush(ud);
	return 0;
}

static void on_stream_event(void *ud, const struct event *bus_ev)
{
	struct subscription *sub = ud;
	const json_t *text = event_json(bus_ev);
	json_t *ev;
	int r;

	if (!text)
		return; /* the engine's own, or out of memory */
	ev = sub_view(sub, text);
	if (!ev)
		return; /* out of memory: this one is not for it */
	if (!sub->q.n && !sub->q.overflowed) {
		r = sub_send(sub, ev);
		if (r != -EAGAIN) {
			json_decref(ev);
			return; /* sent, or the session is ending */
		}
	}
	if (!events_queue_push(&sub->q, ev, bus_ev))
		log_debug("session %u: event stream queue full",
			  sub->s->id);
	json_decref(ev);
	sd_event_source_set_enabled(sub->out, SD_EVENT_ON);
}

void subscription_free(struct subscription *sub)
{
	if (!sub)
		return;
	events_unsubscribe(manager_bus(sub->s->c->m), on_stream_event, sub);
	sd_event_source_disable_unref(sub->out);
	closep(&sub->out_fd);
	events_queue_clear(&sub->q);
	sub->s->sub = NULL;
	free(sub);
}

int control_subscribe(struct session *s, uint32_t id)
{
	struct control *c = s->c;
	struct subscription *sub;
	int r;

	if (s->sub)
		return session_send_json(s, PROTO_REPLY, id,
				 json_pack("{s:i, s:{s:{s:s, s:s}}}", "status",
					   409, "body", "error", "code",
					   "conflict", "message",
					   "this session is subscribed "
					   "already"),
				 NULL, 0);
	sub = calloc(1, sizeof(*sub));
	if (!sub)
		return -ENOMEM;
	sub->s = s;
	sub->id = id;
	sub->out_fd = -1;
	r = events_queue_init(&sub->q, EVENTS_QUEUE_DEFAULT);
	if (r == 0)
		r = session_out_source(s, &sub->out_fd, &sub->out,
				       on_sub_writable, sub);
	if (r == 0)
		r = events_subscribe(manager_bus(c->m), on_stream_event, sub);
	if (r < 0) {
		sd_event_source_disable_unref(sub->out);
		closep(&sub->out_fd);
		events_queue_clear(&sub->q);
		free(sub);
		return session_send_json(s, PROTO_REPLY, id,
				 json_pack("{s:i, s:{s:{s:s, s:s}}}", "status",
					   500, "body", "error", "code",
					   "internal", "message",
					   strerror(-r)),
				 NULL, 0);
	}
	s->sub = sub;
	log_info("session %u (pid %d uid %u): subscribed to the event stream",
		 s->id, (int)s->cred.pid, (unsigned int)s->cred.uid);
	/* The answer first: the events follow it, with its id. */
	return session_send_json(s, PROTO_REPLY, id,
			 json_pack("{s:i, s:{s:I}}", "status", 200, "body",
				   "last_seq",
				   (json_int_t)events_last_seq(manager_bus(c->m))),
			 NULL, 0);
}

