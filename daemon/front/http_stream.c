// SPDX-License-Identifier: MIT

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "http_internal.h"
#include "log.h"
#include "view.h"

/* ---- GET /v1/events ---- */

static void stream_wake(struct stream *st)
{
	if (!st->suspended)
		return;
	st->suspended = false;
	sym_MHD_resume_connection(st->c);
	/* Served at the next turn of the loop. */
	listener_kick(st->l);
}

static void on_stream_event(void *ud, const struct event *bus_ev)
{
	struct stream *st = ud;
	bool was = st->q.overflowed;
	/* As this client may see it: REST callers are anonymous. */
	const struct api_viewer v = { .admin = st->admin };
	const json_t *text = event_json(bus_ev);
	json_t *ev = text ? api_view_event(text, &v) : NULL;
	bool taken;

	if (!ev)
		return; /* out of memory: this one is not for it */
	taken = events_queue_push(&st->q, ev, bus_ev);
	json_decref(ev);
	if (!taken && !was)
		log_notice("%s: an events stream reads too slowly, dropping "
			   "it after %zu events queued",
			   st->l->addr, st->q.n);
	stream_wake(st);
}

/* The SSE text of ev: its seq is the id (a reconnecting client can
 * tell what it missed; 0: none), its name the event type. */
static int stream_format(struct stream *st, const json_t *ev, uint64_t seq,
			 const char *name)
{
	char *data = json_dumps(ev, JSON_COMPACT);
	int n;

	if (!data)
		return -ENOMEM;
	free(st->chunk);
	st->chunk = NULL;
	if (seq)
		n = asprintf(&st->chunk, "id: %" PRIu64 "\nevent: %s\ndata: %s\n\n",
			     seq, name ? name : "message", data);
	else
		n = asprintf(&st->chunk, "event: %s\ndata: %s\n\n",
			     name ? name : "message", data);
	free(data);
	if (n < 0) {
		st->chunk = NULL;
		return -ENOMEM;
	}
	st->len = (size_t)n;
	st->off = 0;
	return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;
	struct events_queued e;
	json_t *ev;
	size_t n;

	(void)pos;
	if (st->off == st->len) {
		if (events_queue_pop(&st->q, &e)) {
			int r = stream_format(st, e.ev, e.seq, e.name);

			json_decref(e.ev);
			if (r < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
		} else if (st->q.overflowed && !st->ending) {
			ev = events_queue_overflow(&st->q);
			if (!ev || stream_format(st, ev, 0, "overflow") < 0) {
				json_decref(ev);
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
			json_decref(ev);
			st->ending = true;
		} else if (st->ending) {
			return MHD_CONTENT_READER_END_OF_STREAM;
		} else if (st->ping) {
			free(st->chunk);
			st->chunk = strdup(": keep-alive\n\n");
			if (!st->chunk)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			st->len = strlen(st->chunk);
			st->off = 0;
			st->ping = false;
		} else {
			/* Nothing to say: asleep until there is. */
			st->suspended = true;
			sym_MHD_suspend_connection(st->c);
			return 0;
		}
	}
	n = st->len - st->off < max ? st->len - st->off : max;
	memcpy(buf, st->chunk + st->off, n);
	st->off += n;
	return (ssize_t)n;
}

/* The response is done with (the connection closed or ended). */
static void stream_free(void *cls)
{
	struct stream *st = cls;
	struct http *h = st->h;

	events_unsubscribe(manager_bus(st->l->m), on_stream_event, st);
	if (st->prev)
		st->prev->next = st->next;
	else
		h->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	h->n_streams--;
	events_queue_clear(&st->q);
	free(st->chunk);
	free(st);
}

bool streams_full(const struct http *h)
{
	return h->n_streams >= h->max_conns / HTTP_STREAMS_SHARE + 1;
}

enum MHD_Result stream_start(struct listener *l, struct MHD_Connection *c,
			     bool admin)
{
	struct http *h = l->h;
	const union MHD_ConnectionInfo *ci =
		sym_MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct MHD_Response *resp;
	struct stream *st;
	enum MHD_Result ret;
	json_t *hello;

	st = calloc(1, sizeof(*st));
	if (!st || events_queue_init(&st->q, EVENTS_QUEUE_DEFAULT) < 0) {
		free(st);
		return MHD_NO;
	}
	st->h = h;
	st->l = l;
	st->c = c;
	st->admin = admin;
	resp = sym_MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096,
						 stream_read, st, stream_free);
	if (!resp) {
		events_queue_clear(&st->q);
		free(st);
		return MHD_NO;
	}
	st->next = h->streams;
	if (h->streams)
		h->streams->prev = st;
	h->streams = st;
	h->n_streams++;
	if (events_subscribe(manager_bus(l->m), on_stream_event, st) < 0) {
		sym_MHD_destroy_response(resp); /* stream_free */
		return MHD_NO;
	}
	sym_MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/event-stream");
	sym_MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
				"no-cache");
	/* Answered: not a fresh connection any more, whose priority would
	 * stay raised for as long as the stream lasts. */
	if (ci && ci->socket_context)
		conn_unfresh(ci->socket_context);
	/* The first bytes at once: a client sees the stream is open (and
	 * where in the sequence it starts). */
	hello = json_pack("{s:s, s:I}", "event", "subscribed", "last_seq",
			  (json_int_t)events_last_seq(manager_bus(l->m)));
	if (hello)
		stream_format(st, hello, 0, "subscribed");
	json_decref(hello);
	ret = sym_MHD_queue_response(c, MHD_HTTP_OK, resp);
	sym_MHD_destroy_response(resp);
	log_debug("%s: GET /v1/events: streaming", l->addr);
	return ret;
}

void streams_ping(struct http *h, uint64_t now, bool end)
{
	if (!end && now < h->last_ping + HTTP_STREAM_KEEPALIVE_USEC)
		return;
	h->last_ping = now;
	for (struct stream *st = h->streams; st; st = st->next) {
		st->ping = !end;
		if (end) {
			st->ending = true;
			st->off = st->len;
		}
		stream_wake(st);
	}
}

