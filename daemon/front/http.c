// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <strings.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <uthash.h>

#include "api.h"
#include "budget.h"
#include "events.h"
#include "http.h"
#include "log.h"
#include "manager.h"
#include "metrics.h"
#include "sysd.h"

#define HTTP_MAX_BODY (64 * 1024)
/* What libmicrohttpd may hold for one connection: the request line,
 * headers and the reply's head (bodies are ours, HTTP_MAX_BODY). */
#define HTTP_CONNECTION_MEMORY (32 * 1024)

/*
 * We accept connections ourselves and hand them to libmicrohttpd
 * (MHD_add_connection): so that a full descriptor table pauses the
 * listener instead of stopping libmicrohttpd's accepting for good, that
 * a client beyond the caps is told so at once, and that clients off the
 * machine are counted per address.
 */
struct listener {
	struct http *h;
	struct manager *m;
	struct MHD_Daemon *mhd;
	int fd;
	bool local; /* unix or loopback: not limited per address */
	bool tls;
	char *addr; /* the config's goes at a reload: our own copy */
	sd_event_source *accept_io;
	struct accept_pause pause;
	sd_event_source *io;
	sd_event_source *timer;
	unsigned int n_fresh; /* connections before their first reply */
	char *unix_path;      /* to unlink at stop */
};

/* Connections per client address (non-loopback TCP). */
struct peer {
	unsigned char key[17]; /* family, then the address */
	unsigned int n;
	UT_hash_handle hh;
};

/* One connection: until its request's headers are in, it is on the
 * header list, oldest first, and is closed when header_timeout passes. */
struct conn {
	struct conn *prev, *next;
	struct listener *l;
	struct MHD_Connection *c;
	struct peer *peer;
	uint64_t since;
	bool waiting;
	bool fresh; /* no reply yet */
};

/*
 * A new connection's first request is served before the control
 * socket's busy sessions (as a new session's first messages are): while
 * a listener has fresh connections, libmicrohttpd runs at that
 * priority; otherwise it takes its turn with the sessions.
 */
#define PRIO_FRESH (SD_EVENT_PRIORITY_NORMAL - 10)

static void listener_prio(struct listener *l)
{
	int64_t prio = l->n_fresh ? PRIO_FRESH : SD_EVENT_PRIORITY_NORMAL;

	if (l->io)
		sd_event_source_set_priority(l->io, prio);
	if (l->timer)
		sd_event_source_set_priority(l->timer, prio);
}

static void conn_unfresh(struct conn *cn)
{
	if (!cn->fresh)
		return;
	cn->fresh = false;
	if (!--cn->l->n_fresh)
		listener_prio(cn->l);
}

/* A rendered document kept while its generation holds (api_cacheable):
 * large documents are not rebuilt for every request. */
struct cached {
	char *path;
	uint64_t generation;
	unsigned int status;
	struct MHD_Response *resp;
	UT_hash_handle hh;
};

#define HTTP_MAX_CACHED 256

/*
 * GET /v1/events: a Server-Sent Events stream. Each event of the bus is
 * queued (bounded: a reader too slow is dropped with a last "overflow"
 * event) and written as "id: SEQ\nevent: NAME\ndata: JSON\n\n" by
 * libmicrohttpd's content reader. With nothing to send, the connection
 * is suspended (libmicrohttpd neither polls nor times it out) until an
 * event comes or a keep-alive comment is due; the keep-alives show
 * that the stream is not idle, and find peers that have gone.
 */
struct stream {
	struct stream *prev, *next;
	struct http *h;
	struct listener *l;
	struct MHD_Connection *c;
	struct events_queue q;
	char *chunk; /* being written */
	size_t len, off;
	bool suspended;
	bool ping;   /* a keep-alive is due */
	bool ending; /* the last words are out: end of stream next */
};

/* Events streams at most: a share of the connections, so that
 * subscribers never hold every one. */
#define HTTP_STREAMS_SHARE 2
#define HTTP_STREAM_KEEPALIVE_USEC (15 * 1000000ULL)

struct http {
	struct listener *l;
	size_t n;
	struct stream *streams;
	unsigned int n_streams;
	uint64_t last_ping;
	struct cached *cache;
	unsigned int n_conns, max_conns, per_address;
	unsigned long long refused, timed_out;
	uint64_t header_timeout; /* usec */
	struct conn *wait_head, *wait_tail;
	sd_event_source *sweep;
	struct peer *peers;
	struct peer *adding; /* the peer of the connection being added */
	char *cert, *key;    /* PEM, for TLS */
};

static void cached_free(struct http *h, struct cached *c)
{
	HASH_DEL(h->cache, c);
	MHD_destroy_response(c->resp);
	free(c->path);
	free(c);
}

static struct MHD_Response *json_response(json_t *doc)
{
	char *text = json_dumps(doc, JSON_COMPACT);
	struct MHD_Response *resp;

	json_decref(doc);
	if (!text)
		return NULL;
	resp = MHD_create_response_from_buffer(strlen(text), text,
					       MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return NULL;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"application/json");
	return resp;
}

/* The document of path at generation, rendered once: a response the
 * cache keeps (*shared). */
static struct MHD_Response *cached_answer(struct manager *m,
					  const struct api_request *ar,
					  uint64_t generation,
					  unsigned int *status, bool *shared)
{
	struct http *h = m->http;
	struct cached *c = NULL;
	json_t *reply = NULL;
	int st;

	HASH_FIND_STR(h->cache, ar->path, c);
	if (c && c->generation == generation) {
		*status = c->status;
		*shared = true;
		return c->resp;
	}
	if (c)
		cached_free(h, c);
	/* Profiles come and go: a bound, not an eviction policy. */
	if (HASH_COUNT(h->cache) >= HTTP_MAX_CACHED)
		while (h->cache)
			cached_free(h, h->cache);
	st = api_handle(m, ar, &reply);
	c = calloc(1, sizeof(*c));
	if (!c || !(c->path = strdup(ar->path)) ||
	    !(c->resp = json_response(reply))) {
		if (c)
			free(c->path);
		free(c);
		return NULL;
	}
	c->generation = generation;
	c->status = (unsigned int)st;
	HASH_ADD_KEYPTR(hh, h->cache, c->path, strlen(c->path), c);
	*status = c->status;
	*shared = true;
	return c->resp;
}

/* One request in flight: its body, bounded by HTTP_MAX_BODY; and an
 * answer that comes later (api.h), the connection suspended meanwhile. */
struct request {
	char *body;
	size_t len;
	bool too_big;
	struct api_later later;
	struct listener *l;
	struct MHD_Connection *c;
	bool waiting; /* suspended until later.fn */
	bool answered;
	struct MHD_Response *resp; /* later's, NULL when out of memory */
	unsigned int status;
};

/* Constant time: the comparison does not tell how much of it matched. */
static bool token_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char diff = la != lb;

	for (size_t i = 0; i < la; i++)
		diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	return diff == 0;
}

static bool authorized(struct manager *m, const char *h)
{
	if (!m->token || !h || strncasecmp(h, "Bearer ", 7))
		return false;
	return token_equal(h + 7, m->token);
}

/* Prometheus scrapes text, not JSON. */
static struct MHD_Response *metrics_response(struct manager *m)
{
	char *text = metrics_render(m);
	struct MHD_Response *resp;

	if (!text)
		return NULL;
	resp = MHD_create_response_from_buffer(strlen(text), text,
					       MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return NULL;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4");
	return resp;
}

static struct MHD_Response *json_answer(int st, json_t *doc,
					unsigned int *status)
{
	*status = (unsigned int)st;
	return json_response(doc);
}

/* What RFC 9110 asks of a 405 (Allow) and RFC 6750 of a 401. */
static struct MHD_Response *with_status_headers(struct MHD_Response *resp,
						unsigned int status,
						const char *url)
{
	char allow[64];

	if (!resp)
		return NULL;
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
		if (streq(url, "/metrics") || streq(url, "/v1/events"))
			strcpy(allow, "GET, HEAD");
		else
			api_allow(url, allow, sizeof(allow));
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	} else if (status == MHD_HTTP_UNAUTHORIZED) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"rdmad\"");
	}
	return resp;
}

struct MHD_Response *http_answer(struct manager *m, const char *method,
				 const char *url, const char *authorization,
				 const char *body, size_t len, bool too_big,
				 struct api_later *later, unsigned int *status,
				 bool *shared)
{
	/* HEAD is GET without the body, which libmicrohttpd leaves out. */
	bool head = streq(method, "HEAD");
	struct api_request ar = {
		.method = head ? "GET" : method,
		.path = url,
		.authorized = authorized(m, authorization),
		.token_set = m->token != NULL,
		.later = later,
	};
	struct MHD_Response *resp;
	json_error_t jerr;
	json_t *reply = NULL;
	uint64_t generation;
	int st;

	*shared = false;
	if (too_big)
		return json_answer(413,
				   api_error("body_too_large",
					     "request bodies are limited to %d "
					     "bytes",
					     HTTP_MAX_BODY),
				   status);
	if (len && (streq(method, "GET") || streq(method, "HEAD")))
		return json_answer(413,
				   api_error("body_not_allowed",
					     "%s %s takes no request body",
					     method, url),
				   status);
	/* GET /v1/events streams (stream_start()); HEAD gives the
	 * stream's headers, without waiting for events. */
	if (streq(url, "/v1/events") && head) {
		resp = MHD_create_response_from_buffer(0, NULL,
						       MHD_RESPMEM_PERSISTENT);
		if (!resp)
			return NULL;
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/event-stream");
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
					"no-cache");
		*status = 200;
		return resp;
	}
	if (streq(url, "/metrics") && streq(ar.method, "GET")) {
		*status = 200;
		resp = metrics_response(m);
		if (resp)
			return resp;
		return json_answer(500, api_error("internal", "out of memory"),
				   status);
	}
	/* Neither answers any other method. */
	if (streq(url, "/metrics") ||
	    (streq(url, "/v1/events") && !streq(ar.method, "GET"))) {
		resp = json_answer(405,
				   api_error("method_not_allowed",
					     "%s is not allowed on %s", method,
					     url),
				   status);
		return with_status_headers(resp, *status, url);
	}
	if (!len && m->http && api_cacheable(m, ar.method, url, &generation))
		return cached_answer(m, &ar, generation, status, shared);
	if (len) {
		/* Depth is bounded by the body size limit and jansson's own
		 * limit (2048). */
		ar.body = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
		if (!json_is_object(ar.body)) {
			json_decref(ar.body);
			return json_answer(400,
					   api_error("bad_json",
						     "the body must be a JSON "
						     "object: %s",
						     ar.body ? "it is not"
							     : jerr.text),
					   status);
		}
	}
	st = api_handle(m, &ar, &reply);
	json_decref(ar.body);
	if (st == API_LATER) {
		log_debug("%s %s -> later", method, url);
		*status = 0;
		return NULL;
	}
	log_debug("%s %s -> %d", method, url, st);
	resp = json_answer(st, reply, status);
	return with_status_headers(resp, *status, url);
}

static void conn_unlist(struct conn *cn)
{
	struct http *h = cn->l->h;

	if (!cn->waiting)
		return;
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		h->wait_head = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	else
		h->wait_tail = cn->prev;
	cn->prev = cn->next = NULL;
	cn->waiting = false;
}

static void conn_headers_done(struct conn *cn)
{
	conn_unlist(cn);
}

/* From now on, the headers of a request must be in within
 * header_timeout: appended, so that the list stays oldest first. */
static void conn_wait_headers(struct conn *cn)
{
	struct http *h = cn->l->h;

	conn_unlist(cn);
	sd_event_now(cn->l->m->event, CLOCK_MONOTONIC, &cn->since);
	cn->prev = h->wait_tail;
	if (h->wait_tail)
		h->wait_tail->next = cn;
	else
		h->wait_head = cn;
	h->wait_tail = cn;
	cn->waiting = true;
}

/* ---- GET /v1/events ---- */

static void stream_wake(struct stream *st)
{
	if (!st->suspended)
		return;
	st->suspended = false;
	MHD_resume_connection(st->c);
	/* Served at the next turn of the loop. */
	sd_event_source_set_time(st->l->timer, 1);
	sd_event_source_set_enabled(st->l->timer, SD_EVENT_ONESHOT);
}

static void on_stream_event(void *ud, const json_t *ev)
{
	struct stream *st = ud;
	bool was = st->q.overflowed;

	if (!events_queue_push(&st->q, ev) && !was)
		log_notice("%s: an events stream reads too slowly, dropping "
			   "it after %zu events queued",
			   st->l->addr, st->q.n);
	stream_wake(st);
}

/* The SSE text of ev: its seq is the id (a reconnecting client can
 * tell what it missed), its name the event type. */
static int stream_format(struct stream *st, json_t *ev)
{
	const char *name = json_string_value(json_object_get(ev, "event"));
	json_t *seq = json_object_get(ev, "seq");
	char *data = json_dumps(ev, JSON_COMPACT);
	int n;

	if (!data)
		return -ENOMEM;
	free(st->chunk);
	st->chunk = NULL;
	if (seq)
		n = asprintf(&st->chunk, "id: %" JSON_INTEGER_FORMAT
					 "\nevent: %s\ndata: %s\n\n",
			     json_integer_value(seq), name ? name : "message",
			     data);
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
	json_t *ev;
	size_t n;

	(void)pos;
	if (st->off == st->len) {
		if ((ev = events_queue_pop(&st->q))) {
			int r = stream_format(st, ev);

			json_decref(ev);
			if (r < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
		} else if (st->q.overflowed && !st->ending) {
			ev = events_queue_overflow(&st->q);
			if (!ev || stream_format(st, ev) < 0) {
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
			MHD_suspend_connection(st->c);
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

	events_unsubscribe(st->l->m->events, on_stream_event, st);
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

static enum MHD_Result stream_start(struct listener *l,
				    struct MHD_Connection *c)
{
	struct http *h = l->h;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct MHD_Response *resp;
	struct stream *st;
	enum MHD_Result ret;
	unsigned int status;
	json_t *hello;

	if (h->n_streams >= h->max_conns / HTTP_STREAMS_SHARE + 1) {
		resp = json_answer(503,
				   api_error("too_many_streams",
					     "the daemon has %u event streams "
					     "open, its limit (half of "
					     "daemon.http.max_connections)",
					     h->n_streams),
				   &status);
		if (!resp)
			return MHD_NO;
		ret = MHD_queue_response(c, status, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	st = calloc(1, sizeof(*st));
	if (!st || events_queue_init(&st->q, EVENTS_QUEUE_DEFAULT) < 0) {
		free(st);
		return MHD_NO;
	}
	st->h = h;
	st->l = l;
	st->c = c;
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096,
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
	if (events_subscribe(l->m->events, on_stream_event, st) < 0) {
		MHD_destroy_response(resp); /* stream_free */
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/event-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
				"no-cache");
	/* Answered: not a fresh connection any more, whose priority would
	 * stay raised for as long as the stream lasts. */
	if (ci && ci->socket_context)
		conn_unfresh(ci->socket_context);
	/* The first bytes at once: a client sees the stream is open (and
	 * where in the sequence it starts). */
	hello = json_pack("{s:s, s:I}", "event", "subscribed", "last_seq",
			  (json_int_t)events_last_seq(l->m->events));
	if (hello)
		stream_format(st, hello);
	json_decref(hello);
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	log_debug("%s: GET /v1/events: streaming", l->addr);
	return ret;
}

/* Every stream gets a keep-alive when one is due; every stream ends
 * (stop): libmicrohttpd stops no daemon with suspended connections. */
static void streams_ping(struct http *h, uint64_t now, bool end)
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

/* The answer that came later: the connection is served again. */
static void on_later(struct api_later *later, int status, json_t *reply)
{
	struct request *req = container_of(later, struct request, later);
	struct listener *l = req->l;

	req->resp = json_answer(status, reply, &req->status);
	req->resp = with_status_headers(req->resp, req->status, "/v1/reload");
	req->waiting = false;
	req->answered = true;
	MHD_resume_connection(req->c);
	/* Served at the next turn of the loop. */
	sd_event_source_set_time(l->timer, 1);
	sd_event_source_set_enabled(l->timer, SD_EVENT_ONESHOT);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **state)
{
	struct listener *l = cls;
	struct request *req = *state;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	unsigned int status;
	bool shared;

	(void)version;
	if (!req) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

		/* The headers are in: the header deadline is over. */
		if (ci && ci->socket_context)
			conn_headers_done(ci->socket_context);
		/* The first call only announces the request. */
		req = calloc(1, sizeof(*req));
		if (!req)
			return MHD_NO;
		req->later.fn = on_later;
		req->l = l;
		req->c = c;
		*state = req;
		return MHD_YES;
	}
	if (req->waiting)
		return MHD_YES;
	if (req->answered) {
		/* Resumed with the answer that came later. */
		req->answered = false;
		if (!req->resp)
			return MHD_NO;
		ret = MHD_queue_response(c, req->status, req->resp);
		MHD_destroy_response(req->resp);
		req->resp = NULL;
		return ret;
	}
	if (*upload_size) {
		size_t n = *upload_size;

		*upload_size = 0;
		if (req->too_big || req->len + n > HTTP_MAX_BODY) {
			req->too_big = true;
			return MHD_YES; /* drain, answer at the end */
		}
		char *b = realloc(req->body, req->len + n + 1);
		if (!b)
			return MHD_NO;
		memcpy(b + req->len, upload, n);
		req->len += n;
		b[req->len] = '\0';
		req->body = b;
		return MHD_YES;
	}
	if (streq(method, "GET") && streq(url, "/v1/events") && !req->len &&
	    l->m->events)
		return stream_start(l, c);
	resp = http_answer(l->m, method, url,
			   MHD_lookup_connection_value(
				   c, MHD_HEADER_KIND,
				   MHD_HTTP_HEADER_AUTHORIZATION),
			   req->body, req->len, req->too_big, &req->later,
			   &status, &shared);
	if (!resp && !status) {
		/* The answer comes later (on_later). */
		req->waiting = true;
		MHD_suspend_connection(c);
		return MHD_YES;
	}
	if (!resp)
		return MHD_NO;
	ret = MHD_queue_response(c, status, resp);
	if (!shared)
		MHD_destroy_response(resp);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
			 enum MHD_RequestTerminationCode code)
{
	struct request *req = *state;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	(void)cls;
	/* Kept alive: the next request's headers have a deadline too. */
	if (code == MHD_REQUEST_TERMINATED_COMPLETED_OK && ci &&
	    ci->socket_context) {
		conn_unfresh(ci->socket_context);
		conn_wait_headers(ci->socket_context);
	}
	if (req) {
		if (req->waiting)
			api_forget(req->l->m, &req->later);
		if (req->resp)
			MHD_destroy_response(req->resp);
		free(req->body);
		free(req);
	}
	*state = NULL;
}

static void listener_rearm(struct listener *l)
{
	MHD_UNSIGNED_LONG_LONG ms;
	uint64_t now;

	if (MHD_get_timeout(l->mhd, &ms) == MHD_YES) {
		sd_event_now(l->m->event, CLOCK_MONOTONIC, &now);
		sd_event_source_set_time(l->timer, now + ms * 1000);
		sd_event_source_set_enabled(l->timer, SD_EVENT_ONESHOT);
	} else {
		sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
	}
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	struct listener *l = ud;

	(void)s;
	(void)fd;
	(void)revents;
	MHD_run(l->mhd);
	listener_rearm(l);
	return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *ud)
{
	(void)s;
	(void)usec;
	return on_io(NULL, -1, 0, ud);
}

/* libmicrohttpd's own complaints (a peer gone, a socket option a unix
 * socket does not have): for debugging, and counted when they repeat. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	size_t n;

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	log_debug("libmicrohttpd: %s", buf);
}

/* ---- connections: accepting, counting, deadlines ---- */

static void on_connection(void *cls, struct MHD_Connection *c,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct listener *l = cls;
	struct http *h = l->h;
	struct conn *cn = *socket_context;

	(void)c;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		cn = calloc(1, sizeof(*cn));
		if (!cn)
			return; /* not counted: nothing to undo at close */
		cn->l = l;
		cn->c = c;
		cn->peer = h->adding;
		if (cn->peer)
			cn->peer->n++;
		h->n_conns++;
		conn_wait_headers(cn);
		cn->fresh = true;
		if (!l->n_fresh++)
			listener_prio(l);
		*socket_context = cn;
		return;
	}
	if (!cn)
		return;
	conn_unlist(cn);
	conn_unfresh(cn);
	h->n_conns--;
	if (cn->peer && !--cn->peer->n) {
		HASH_DEL(h->peers, cn->peer);
		free(cn->peer);
	}
	free(cn);
	*socket_context = NULL;
}

/* Often enough for the header deadline, and for libmicrohttpd to
 * finish with connections that have ended. */
static uint64_t sweep_interval(const struct http *h)
{
	return h->header_timeout / 4 < 1000000 ? h->header_timeout / 4
					       : 1000000;
}

/* Connections whose headers are late: shut their sockets down, and
 * libmicrohttpd, reading the end, closes them as it closes any other. */
static int on_sweep(sd_event_source *s, uint64_t usec, void *ud)
{
	struct http *h = ud;
	uint64_t now;

	(void)usec;
	sd_event_now(sd_event_source_get_event(s), CLOCK_MONOTONIC, &now);
	while (h->wait_head && h->wait_head->since + h->header_timeout <= now) {
		struct conn *cn = h->wait_head;
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			cn->c, MHD_CONNECTION_INFO_CONNECTION_FD);

		conn_unlist(cn);
		h->timed_out++;
		if (ci)
			shutdown(ci->connect_fd, SHUT_RDWR);
		log_debug("%s: request headers not in within %llu s, closing",
			  cn->l->addr,
			  (unsigned long long)(h->header_timeout / 1000000));
	}
	streams_ping(h, now, false);
	sd_event_source_set_time(s, now + sweep_interval(h));
	for (size_t i = 0; i < h->n; i++)
		if (h->l[i].mhd)
			on_io(NULL, -1, 0, &h->l[i]);
	return 0;
}

/* Refused at once, with the reason (on plain HTTP; a TLS client just
 * sees the connection close: we cannot speak to it before a handshake). */
static void refuse(struct listener *l, int fd, const char *code,
		   const char *why)
{
	char body[384], msg[640];
	int n;

	l->h->refused++;
	log_notice("%s: refused a connection: %s", l->addr, why);
	if (!l->tls) {
		snprintf(body, sizeof(body),
			 "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
			 code, why);
		n = snprintf(msg, sizeof(msg),
			     "HTTP/1.1 503 Service Unavailable\r\n"
			     "Content-Type: application/json\r\n"
			     "Connection: close\r\nContent-Length: %zu\r\n"
			     "\r\n%s",
			     strlen(body), body);
		/* A fresh socket's buffer takes it whole, or nothing. */
		(void)!send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	close(fd);
}

static struct peer *peer_of(struct http *h, const struct sockaddr *sa,
			    bool create)
{
	unsigned char key[17] = { 0 };
	struct peer *p;

	if (sa->sa_family == AF_INET) {
		key[0] = 4;
		memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		key[0] = 6;
		memcpy(key + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		       16);
	} else {
		return NULL;
	}
	HASH_FIND(hh, h->peers, key, sizeof(key), p);
	if (p || !create)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	memcpy(p->key, key, sizeof(key));
	HASH_ADD(hh, h->peers, key, sizeof(p->key), p);
	return p;
}

static bool sockaddr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >>
			24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a =
			&((const struct sockaddr_in6 *)sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return true; /* unix */
}

static void accept_one(struct listener *l, int fd, struct sockaddr *sa,
		       socklen_t len)
{
	struct http *h = l->h;
	struct peer *p = NULL;
	char why[160];

	if (h->n_conns >= h->max_conns) {
		/* Connections that have ended may wait for libmicrohttpd to
		 * notice: let it, before saying no. */
		for (size_t i = 0; i < h->n; i++)
			if (h->l[i].mhd)
				MHD_run(h->l[i].mhd);
	}
	if (h->n_conns >= h->max_conns) {
		snprintf(why, sizeof(why),
			 "the daemon has %u REST connections, its limit "
			 "(daemon.http.max_connections)",
			 h->max_conns);
		refuse(l, fd, "too_many_connections", why);
		return;
	}
	if (!l->local && !sockaddr_is_loopback(sa)) {
		p = peer_of(h, sa, true);
		if (!p) {
			refuse(l, fd, "internal", "out of memory");
			return;
		}
		if (p->n >= h->per_address) {
			snprintf(why, sizeof(why),
				 "this address has %u REST connections, the "
				 "limit (daemon.http.max_connections_per_"
				 "address)",
				 h->per_address);
			if (!p->n) {
				HASH_DEL(h->peers, p);
				free(p);
			}
			refuse(l, fd, "too_many_connections", why);
			return;
		}
	}
	h->adding = p;
	/* MHD closes fd when it cannot take it. */
	if (MHD_add_connection(l->mhd, fd, sa, len) != MHD_YES) {
		log_debug("%s: libmicrohttpd did not take a connection",
			  l->addr);
	}
	h->adding = NULL;
	if (p && !p->n) {
		HASH_DEL(h->peers, p);
		free(p);
	}
}

#define ACCEPT_BATCH 64

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	struct listener *l = ud;

	(void)s;
	(void)revents;
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int cfd = accept4(fd, (struct sockaddr *)&ss, &len,
				  SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (cfd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
			    errno != ECONNABORTED &&
			    !accept_pause_on_error(&l->pause, errno))
				log_warn(errno, "%s: accept", l->addr);
			break;
		}
		accept_pause_ok(&l->pause);
		if (len < sizeof(sa_family_t)) {
			/* an unnamed unix peer */
			ss.ss_family = AF_UNIX;
			len = sizeof(sa_family_t);
		}
		accept_one(l, cfd, (struct sockaddr *)&ss, len);
	}
	listener_rearm(l);
	return 0;
}

/* Does a process still listen on this unix socket? */
static bool socket_in_use(const struct sockaddr_un *sun)
{
	_cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (probe < 0)
		return false;
	return connect(probe, (const struct sockaddr *)sun, sizeof(*sun)) == 0 ||
	       errno == EAGAIN;
}

/* A listening socket for "unix:/path", "[v6]:port" or "host:port". */
static int listen_socket(const char *addr, char **unix_path)
{
	_cleanup_close_ int fd = -1;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	_cleanup_free_ char *host = NULL;
	const char *port;
	int one = 1, r;

	if (!strncmp(addr, "unix:", 5)) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		const char *path = addr + 5;
		struct stat st;

		if (strlen(path) >= sizeof(sun.sun_path))
			return -ENAMETOOLONG;
		strcpy(sun.sun_path, path);
		/* Socket activation: systemd's, not ours to unlink. */
		fd = sysd_listen_take_unix(NULL, SOCK_STREAM, path);
		if (fd >= 0)
			return TAKE_FD(fd);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		if (fd < 0)
			return -errno;
		/* Replace a stale socket, never another kind of file nor a
		 * socket someone still listens on. */
		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
			if (socket_in_use(&sun))
				return -EADDRINUSE;
			unlink(path);
		}
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
		    listen(fd, SOMAXCONN) < 0)
			return -errno;
		*unix_path = strdup(path);
		if (!*unix_path)
			return -ENOMEM;
		return TAKE_FD(fd);
	}

	port = strrchr(addr, ':');
	if (addr[0] == '[')
		host = strndup(addr + 1, (size_t)(port - addr - 2));
	else
		host = strndup(addr, (size_t)(port - addr));
	if (!host)
		return -ENOMEM;
	r = getaddrinfo(host, port + 1, &hints, &ai);
	if (r)
		return -EADDRNOTAVAIL;
	fd = sysd_listen_take_inet(ai->ai_addr, ai->ai_addrlen);
	if (fd >= 0) {
		freeaddrinfo(ai);
		return TAKE_FD(fd);
	}
	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		freeaddrinfo(ai);
		return r;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
		r = -errno;
		freeaddrinfo(ai);
		return r;
	}
	freeaddrinfo(ai);
	return TAKE_FD(fd);
}

static int listener_start(struct manager *m, struct http *h,
			  struct listener *l, const char *addr)
{
	const union MHD_DaemonInfo *info;
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
			     MHD_USE_NO_LISTEN_SOCKET |
			     MHD_ALLOW_SUSPEND_RESUME; /* GET /v1/events */
	struct MHD_OptionItem tls[3] = { { MHD_OPTION_END, 0, NULL } };
	int r;

	l->m = m;
	l->h = h;
	l->addr = strdup(addr);
	if (!l->addr)
		return -ENOMEM;
	l->fd = listen_socket(addr, &l->unix_path);
	if (l->fd < 0)
		return l->fd;
	l->local = !strncmp(addr, "unix:", 5);
	l->tls = h->cert && !l->local;
	if (l->tls) {
		flags |= MHD_USE_TLS;
		tls[0] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0,
						  h->cert };
		tls[1] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0,
						  h->key };
		tls[2] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	}
	/* The connection cap is ours (accept_one): libmicrohttpd's own
	 * is only a backstop. */
	l->mhd = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, l,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
		MHD_OPTION_CONNECTION_LIMIT, h->max_conns + 1,
		MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned int)m->config->daemon.http_idle_timeout,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT,
		(size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
		on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION,
		on_connection, l, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
	if (!l->mhd)
		return -EIO;
	info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info)
		return -EIO;
	r = sd_event_add_io(m->event, &l->io, info->epoll_fd, EPOLLIN, on_io,
			    l);
	if (r < 0)
		return r;
	r = sd_event_add_time(m->event, &l->timer, CLOCK_MONOTONIC, 0, 0,
			      on_timer, l);
	if (r < 0)
		return r;
	r = sd_event_add_io(m->event, &l->accept_io, l->fd, EPOLLIN,
			    on_accept, l);
	if (r < 0)
		return r;
	/* A new connection is taken in however busy the others are. */
	r = sd_event_source_set_priority(l->accept_io,
					 SD_EVENT_PRIORITY_IMPORTANT);
	if (r < 0)
		return r;
	l->pause = (struct accept_pause){ .io = l->accept_io, .what = l->addr };
	listener_rearm(l);
	return 0;
}

static void listener_stop(struct listener *l)
{
	accept_pause_done(&l->pause);
	l->accept_io = sd_event_source_disable_unref(l->accept_io);
	l->io = sd_event_source_disable_unref(l->io);
	l->timer = sd_event_source_disable_unref(l->timer);
	if (l->mhd)
		MHD_stop_daemon(l->mhd); /* closes its connections */
	l->mhd = NULL;
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	if (l->unix_path)
		unlink(l->unix_path);
	free(l->unix_path);
	l->unix_path = NULL;
	free(l->addr);
	l->addr = NULL;
}

/* A PEM file, read whole (the key stays in memory only as long as
 * libmicrohttpd needs it: for the daemon's life). */
static int read_pem(const char *path, char **out)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	size_t len;

	if (fd < 0)
		return -errno;
	return read_all(fd, 1 << 20, -1, out, &len);
}

static void http_front_stats(void *ud, struct front_stats *out)
{
	struct http *h = ud;

	*out = (struct front_stats){ .open = h->n_conns,
				     .refused = h->refused,
				     .timed_out = h->timed_out };
}

int http_start(struct manager *m, const char **failed)
{
	const struct conf_daemon *d = &m->config->daemon;
	struct http *h = calloc(1, sizeof(*h));
	struct front_caps caps;
	int r;

	if (!h)
		return -ENOMEM;
	h->l = calloc(d->n_listen, sizeof(*h->l));
	if (!h->l) {
		free(h);
		return -ENOMEM;
	}
	m->http = h;
	manager_set_front(m, FRONT_HTTP,
			  &(struct manager_front){ .stats = http_front_stats,
						   .ud = h });
	front_caps(m->config, &caps);
	h->max_conns = caps.http;
	h->per_address = (unsigned int)d->http_max_per_address;
	h->header_timeout = (uint64_t)d->http_header_timeout * 1000000;
	if (d->tls_cert) {
		if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
			*failed = "https (libmicrohttpd is built without TLS)";
			http_stop(m);
			return -EOPNOTSUPP;
		}
		r = read_pem(d->tls_cert, &h->cert);
		if (r < 0) {
			*failed = d->tls_cert;
			http_stop(m);
			return r;
		}
		r = read_pem(d->tls_key, &h->key);
		if (r < 0) {
			*failed = d->tls_key;
			http_stop(m);
			return r;
		}
	}
	r = sd_event_add_time_relative(m->event, &h->sweep, CLOCK_MONOTONIC,
				       sweep_interval(h), 100000, on_sweep,
				       h);
	if (r >= 0)
		r = sd_event_source_set_enabled(h->sweep, SD_EVENT_ON);
	if (r < 0) {
		*failed = "a timer";
		http_stop(m);
		return r;
	}
	for (size_t i = 0; i < d->n_listen; i++) {
		h->l[i].fd = -1;
		r = listener_start(m, h, &h->l[i], d->listen[i]);
		h->n++;
		if (r < 0) {
			*failed = d->listen[i];
			http_stop(m);
			return r;
		}
		log_info("REST API on %s%s", d->listen[i],
			 h->l[i].tls ? " (HTTPS)" : "");
	}
	return 0;
}

void http_stop(struct manager *m)
{
	struct http *h = m->http;

	if (!h)
		return;
	manager_set_front(m, FRONT_HTTP, NULL);
	streams_ping(h, 0, true);
	for (size_t i = 0; i < h->n; i++)
		if (h->l[i].mhd)
			MHD_run(h->l[i].mhd);
	for (size_t i = 0; i < h->n; i++)
		listener_stop(&h->l[i]);
	h->sweep = sd_event_source_disable_unref(h->sweep);
	while (h->cache)
		cached_free(h, h->cache);
	free(h->l);
	free(h->cert);
	if (h->key)
		explicit_bzero(h->key, strlen(h->key));
	free(h->key);
	free(h);
	m->http = NULL;
}
