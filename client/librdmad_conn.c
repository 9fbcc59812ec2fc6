// SPDX-License-Identifier: MIT
/*
 * librdmad: connect to rdmad, attach to profiles, use their objects.
 * The payloads are those of proto/PROTOCOL.md; the framing is proto.h's.
 *
 * All I/O is blocking with a timeout. Requests may be pipelined: the
 * daemon handles a session's messages in order and answers them in
 * order, so a request whose answer nobody waits for yet (the HELLO of
 * rdmad_connect, the REPORT of a local attach) is sent and its answer
 * read, and checked against its id, just before the answer of the next
 * request that is waited for. The only answer the daemon may hold back
 * is that of an ATTACH that waits for its profile, and nothing is sent
 * behind one. When an answer is lost (timeout) or garbled, the
 * connection is marked broken and no further request is sent on it:
 * what the daemon did with the last one is unknown. Attachments made on
 * it keep working until detached; their leases end when the connection
 * closes.
 *
 * The daemon may also send EVENTs, unasked (its device went, ...): they
 * are set aside wherever they are read, in order, for rdmad_next_event().
 * A connection the daemon closed (it stopped or restarted) is "gone":
 * its attachments ended with it on the daemon's side, so detaching them
 * only releases them here; rdmad_reconnect() opens a new session.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "librdmad_internal.h"
#include "util.h"

/* ---- messages ---- */

static void conn_break(struct rdmad *c)
{
	c->broken = true;
}

static void event_push(struct rdmad *c, enum rdmad_event_type type,
		       struct rdmad_profile *p, json_t *doc)
{
	struct client_event *e;

	if (c->n_events == CLIENT_MAX_EVENTS ||
	    !(e = calloc(1, sizeof(*e)))) {
		json_decref(doc);
		return;
	}
	*e = (struct client_event){ NULL, type, p, doc };
	*c->events_tail = e;
	c->events_tail = &e->next;
	c->n_events++;
}

/* Resuming: the first try after RESUME_FIRST_MS, each next one twice as
 * late, at most RESUME_MAX_MS apart; given up after RESUME_LIMIT_MS. */
#define RESUME_FIRST_MS 100
#define RESUME_MAX_MS 5000
#define RESUME_LIMIT_MS 120000

static int64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static bool has_shared(const struct rdmad *c)
{
	for (const struct rdmad_profile *p = c->profiles; p; p = p->next)
		if (p->granted && p->mode == RDMAD_MODE_SHARED)
			return true;
	return false;
}

static void resume_stop(struct rdmad *c)
{
	c->resuming = false;
	closep(&c->resume_timer);
}

/* The next try in ms from now: the program's fd (the same number) is the
 * timer's until then, so that a poll() on it wakes for the try. */
static int resume_arm(struct rdmad *c, int ms)
{
	struct itimerspec its = {
		.it_value = { .tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000 + 1 },
	};

	if (c->resume_timer < 0) {
		c->resume_timer =
			timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC |
								TFD_NONBLOCK);
		if (c->resume_timer < 0 ||
		    dup3(c->resume_timer, c->fd, O_CLOEXEC) < 0)
			return -errno;
	}
	c->resume_next = mono_ms() + ms;
	return timerfd_settime(c->resume_timer, 0, &its, NULL) < 0 ? -errno
								   : 0;
}

/* The daemon closed the connection: said once, after what it sent;
 * resumed instead where shared attachments were granted. */
static void conn_gone(struct rdmad *c)
{
	const char *e = getenv("RDMAD_RESUME");

	conn_break(c);
	if (c->gone)
		return;
	c->gone = true;
	if (c->path && has_shared(c) && !(e && !strcmp(e, "0"))) {
		c->resuming = true;
		c->resume_since = mono_ms();
		c->resume_backoff_ms = RESUME_FIRST_MS;
		if (resume_arm(c, RESUME_FIRST_MS) == 0)
			return;
		resume_stop(c);
	}
	event_push(c, RDMAD_EVENT_DAEMON_GONE, NULL, NULL);
}

/* An EVENT: set aside, with the profile it is about. */
static void event_take(struct rdmad *c, struct proto_msg *m)
{
	const char *what = json_string_value(json_object_get(m->payload,
							     "event"));
	const json_t *a = json_object_get(m->payload, "attachment");
	enum rdmad_event_type type;
	struct rdmad_profile *p;

	if (!what)
		return;
	/* The stream's events carry the subscribing request's id; those
	 * about an attachment, 0. */
	if (m->id) {
		event_push(c, RDMAD_EVENT_STREAM, NULL,
			   json_incref(m->payload));
		return;
	}
	if (streq(what, "device_removed"))
		type = RDMAD_EVENT_DEVICE_REMOVED;
	else if (streq(what, "profile_removed"))
		type = RDMAD_EVENT_PROFILE_REMOVED;
	else if (streq(what, "port_error"))
		type = RDMAD_EVENT_PORT_DOWN;
	else if (streq(what, "port_active"))
		type = RDMAD_EVENT_PORT_ACTIVE;
	else if (streq(what, "object_draining"))
		type = RDMAD_EVENT_OBJECT_DRAINING;
	else
		return; /* a newer daemon's: nothing to do with it here */
	for (p = c->profiles; p; p = p->next)
		if (p->granted && json_is_integer(a) &&
		    json_integer_value(a) == (json_int_t)p->attachment)
			break;
	if (type == RDMAD_EVENT_OBJECT_DRAINING)
		client_object_drained(p, m->payload);
	event_push(c, type, p, json_incref(m->payload));
}

/*
 * Read the next message that is not an EVENT into m, setting EVENTs
 * aside on the way. block: wait for it (within SO_RCVTIMEO); else
 * return 0 as soon as nothing more is there to read. 1 with a message;
 * on failure the connection is broken (gone if the daemon closed it:
 * -ECONNRESET) and m holds nothing.
 */
/*
 * One datagram into m. An answer of type skip (not 0) is not decoded
 * when its header is sound and it carries no fds: m has its type and id,
 * no payload (the REPLY to REPORT, DETACHED: nothing in them is read,
 * and parsing them was a good part of an attach's JSON).
 */
static int conn_recv_msg(struct rdmad *c, struct proto_msg *m, uint16_t skip)
{
	struct proto_raw raw;
	size_t plen;
	int r;

	proto_msg_init(m);
	if (!c->rbuf && !(c->rbuf = malloc(PROTO_RECV_BYTES)))
		return -ENOMEM;
	/* One frame, or every frame of a message the daemon cut. */
	r = proto_recv_raw(c->fd, c->rbuf, PROTO_RECV_BYTES, &raw);
	if ((r == -EMSGSIZE || r == -EBADMSG || r == 0) &&
	    raw.hdr.magic == PROTO_MAGIC) {
		m->type = raw.hdr.type;
		m->id = raw.hdr.id;
	}
	if (r == 0 && skip && proto_raw_payload(&raw, skip, &plen))
		m->flags = 0;
	else if (r == 0)
		r = client_reuse_decode_raw(&c->reuse, &raw, m);
	proto_raw_clear(&raw);
	return r;
}

static int conn_read(struct rdmad *c, struct proto_msg *m, bool block,
		     uint16_t skip)
{
	bool reset = false;
	int r;

	for (;;) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};

		if (!block && poll(&pfd, 1, 0) != 1)
			return 0;
		r = conn_recv_msg(c, m, skip);
		if (r == -ECONNRESET && !reset) {
			/* The daemon closed with messages of ours unread.
			 * The kernel says so first, but what it sent
			 * before closing (why it did) is still queued. */
			reset = true;
			conn_break(c);
			continue;
		}
		if (r == -EPIPE || r == -ECONNRESET) {
			conn_gone(c);
			return -ECONNRESET;
		}
		if (r == -EAGAIN && !block)
			return 0; /* gone since poll(): another reader */
		if (r == -EAGAIN)
			r = -ETIMEDOUT;
		if (r < 0) {
			conn_break(c);
			return r;
		}
		if (m->type != PROTO_EVENT)
			break;
		event_take(c, m);
		proto_msg_clear(m);
	}
	if (!proto_type_allowed(m->type, PROTO_PEER_DAEMON)) {
		uint16_t type = m->type;

		proto_msg_clear(m);
		conn_break(c);
		return client_set_error(EPROTO, "rdmad sent %s, a client's "
					"message", proto_type_name(type));
	}
	return 1;
}

/* "30 s", "1500 ms". */
static void duration_str(int ms, char *buf, size_t size)
{
	if (ms % 1000 == 0)
		snprintf(buf, size, "%d s", ms / 1000);
	else
		snprintf(buf, size, "%d ms", ms);
}

/*
 * A failure of the socket or of the framing, during what; timeout_ms is
 * the limit that ran out, for -ETIMEDOUT. Whether the daemon closed the
 * connection with our requests read (EPIPE) or unread (ECONNRESET) is
 * the same to the caller: ECONNRESET.
 */
static int transport_error(int r, const char *what, int timeout_ms)
{
	char limit[32];

	switch (r) {
	case -EPIPE:
	case -ECONNRESET:
		return client_set_error(ECONNRESET,
					"rdmad went away (stopped or "
					"restarted) before it answered %s; "
					"connect again",
					what);
	case -ETIMEDOUT:
		duration_str(timeout_ms, limit, sizeof(limit));
		return client_set_error(r, "rdmad did not answer %s within %s",
					what, limit);
	case -EPROTONOSUPPORT:
		return client_set_error(r,
					"rdmad answered %s in a protocol "
					"version this library does not speak "
					"(it speaks %d to %d)",
					what, PROTO_VERSION_MIN,
					PROTO_VERSION_MAX);
	case -EMSGSIZE: {
		/* The kernel cuts the fds of a datagram short when this
		 * process may open no more (and says no more than that): a
		 * big profile's memories can be more than the soft limit. */
		struct rlimit rl = { 0 };

		getrlimit(RLIMIT_NOFILE, &rl);
		return client_set_error(r,
					"bad answer from rdmad to %s: %s (if "
					"it carried more fds than this process "
					"may still open, raise RLIMIT_NOFILE: "
					"the soft limit is %llu)",
					what, proto_strerror(r),
					(unsigned long long)rl.rlim_cur);
	}
	case -EBADMSG:
		return client_set_error(r, "bad answer from rdmad to %s: %s",
					what, proto_strerror(r));
	default:
		return client_set_error(r, "%s: %s", what, rdmad_strerror(r));
	}
}

/* An ERROR answer: the errno of its code, its message as the last error. */
static int daemon_error(const struct proto_msg *ans, const char *what)
{
	const json_t *e = json_object_get(ans->payload, "error");
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	int err = client_code_errno(code);

	if (msg && *msg)
		return client_set_error(err, "%s", msg);
	return client_set_error(err, "rdmad refused %s (%s)", what,
				code ? code : "no reason given");
}

/* The answer a request of this type gets when all goes well. */
static uint16_t answer_type(uint16_t request)
{
	switch (request) {
	case PROTO_HELLO:
		return PROTO_WELCOME;
	case PROTO_ATTACH:
		return PROTO_ATTACHED;
	case PROTO_DETACH:
		return PROTO_DETACHED;
	case PROTO_MAP:
		return PROTO_MAPPED;
	default: /* REQUEST, REPORT, MADE */
		return PROTO_REPLY;
	}
}

int client_conn_set_timeout(struct rdmad *c, int ms)
{
	struct timeval tv = {.tv_sec = ms / 1000,
			     .tv_usec = (ms % 1000) * 1000};
	int err;

	if (c->rcv_timeout_ms == ms)
		return 0;
	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		err = errno;
		return client_set_error(err,
					"cannot set the socket's receive "
					"timeout: %s",
					strerror(err));
	}
	c->rcv_timeout_ms = ms;
	return 0;
}

/*
 * Read the next message: the answer to the oldest pending request,
 * which is taken off the list into *req. The answer's own type is not
 * checked here (answer_check()). what: the request the caller waits
 * for, to name in errors (NULL: that oldest one). On failure the
 * connection is broken and m holds nothing.
 */
static int conn_recv(struct rdmad *c, struct proto_msg *m,
		     struct pending *req, const char *what)
{
	uint16_t skip;
	int r;

	if (!c->n_pending) {
		conn_break(c);
		return client_set_error(EPROTO, "no request to read an "
						"answer for");
	}
	if (!what)
		what = proto_type_name(c->pending[0].type);
	/* What answers these is only checked, never read. */
	skip = c->pending[0].type == PROTO_REPORT   ? PROTO_REPLY
	       : c->pending[0].type == PROTO_DETACH ? PROTO_DETACHED
						    : 0;
	r = conn_read(c, m, true, skip);
	if (r == -EPROTO)
		return r;
	if (r < 0)
		return transport_error(r, what, c->rcv_timeout_ms);
	r = 0;
	if (m->type == PROTO_ERROR && m->id == 0) {
		/* Not about a request: the daemon is ending the session. */
		conn_break(c);
		r = daemon_error(m, what);
	} else if (m->id != c->pending[0].id) {
		conn_break(c);
		r = client_set_error(EPROTO,
				     "rdmad answered request %u while %u was "
				     "expected",
				     m->id, c->pending[0].id);
	}
	if (r < 0) {
		proto_msg_clear(m);
		return r;
	}
	*req = c->pending[0];
	c->n_pending--;
	memmove(c->pending, c->pending + 1,
		c->n_pending * sizeof(*c->pending));
	return 0;
}

/* 0 if m is the answer req hoped for; an ERROR becomes its errno. */
static int answer_check(struct rdmad *c, const struct pending *req,
			const struct proto_msg *m)
{
	const char *what = proto_type_name(req->type);
	uint16_t want = answer_type(req->type);

	if (m->type == PROTO_ERROR)
		return daemon_error(m, what);
	if (m->type != want) {
		conn_break(c);
		return client_set_error(EPROTO,
					"rdmad answered %s with %s, not %s",
					what, proto_type_name(m->type),
					proto_type_name(want));
	}
	return 0;
}

/* The WELCOME: the version the daemon chose. */
static int conn_welcome(struct rdmad *c, const struct proto_msg *m)
{
	uint16_t version;
	int r = proto_welcome_version(m->payload, &version);

	if (r == 0) {
		c->version = version;
		return 0;
	}
	conn_break(c);
	if (r == -EPROTONOSUPPORT)
		return client_set_error(r,
					"rdmad chose a protocol version "
					"outside what this library speaks "
					"(%d to %d)",
					PROTO_VERSION_MIN, PROTO_VERSION_MAX);
	return client_set_error(r, "rdmad's WELCOME names no protocol "
				   "version");
}

/*
 * The answer m to req, a request sent ahead that nobody waits for.
 * HELLO: the session stands or falls with it (a daemon that refuses it
 * closes the session). REPORT: whatever the daemon thought of the keys
 * changes nothing in this process (it only shows them in
 * GET /v1/sessions), so a refusal is not an error of anything; only an
 * answer that breaks the protocol is.
 */
static int conn_settle_one(struct rdmad *c, const struct pending *req,
			   const struct proto_msg *m)
{
	int r;

	if (req->type == PROTO_HELLO) {
		r = answer_check(c, req, m);
		if (r < 0) {
			conn_break(c);
			return r;
		}
		return conn_welcome(c, m);
	}
	if (m->type == PROTO_ERROR)
		return 0;
	return answer_check(c, req, m);
}

/* Read and settle the answers of every request sent ahead. */
static int conn_settle(struct rdmad *c)
{
	struct proto_msg m;
	struct pending req;
	int r;

	while (c->n_pending) {
		r = conn_recv(c, &m, &req, NULL);
		if (r < 0)
			return r;
		r = conn_settle_one(c, &req, &m);
		proto_msg_clear(&m);
		if (r < 0)
			return r;
	}
	return 0;
}

int client_conn_send(struct rdmad *c, struct proto_msg *req)
{
	const char *what = proto_type_name(req->type);
	int r;

	if (c->gone)
		return client_set_error(ECONNRESET,
					"rdmad went away (stopped or "
					"restarted): connect again "
					"(rdmad_reconnect)");
	if (c->broken)
		return client_set_error(ENOTCONN,
					"the connection to rdmad failed "
					"earlier: connect again");
	if (c->n_pending == CLIENT_MAX_PENDING) {
		r = conn_settle(c);
		if (r < 0)
			return r;
	}
	if (++c->last_id == 0)
		c->last_id = 1;
	req->id = c->last_id;
	r = proto_send(c->fd, req);
	if (r == -EAGAIN)
		r = -ETIMEDOUT;
	/* Not sent, for want of memory or room: the connection is as it
	 * was. */
	if (r == -EINVAL || r == -EMSGSIZE || r == -ENOBUFS || r == -ENOMEM)
		return transport_error(r, what, CLIENT_TIMEOUT_MS);
	if (r < 0) {
		conn_break(c);
		/* A daemon that closes says why first, in answer to a
		 * request sent ahead (a refused HELLO): that is the error. */
		if ((r == -EPIPE || r == -ECONNRESET) && c->n_pending) {
			int why = conn_settle(c);

			if (why < 0 && why != -ECONNRESET)
				return why;
		}
		if (r == -EPIPE || r == -ECONNRESET)
			conn_gone(c);
		return transport_error(r, what, CLIENT_TIMEOUT_MS);
	}
	c->pending[c->n_pending++] = (struct pending){req->id, req->type};
	return 0;
}

int client_conn_await(struct rdmad *c, uint32_t id, const char *what,
		      struct proto_msg *ans)
{
	struct pending req;
	int r;

	proto_msg_init(ans);
	for (;;) {
		r = conn_recv(c, ans, &req, what);
		if (r < 0)
			return r;
		if (req.id == id)
			break;
		r = conn_settle_one(c, &req, ans);
		proto_msg_clear(ans);
		if (r < 0)
			return r;
	}
	r = answer_check(c, &req, ans);
	if (r < 0)
		proto_msg_clear(ans);
	return r;
}

int client_request_msg(struct proto_msg *m, uint16_t type, json_t *payload)
{
	proto_msg_init(m);
	if (!payload)
		return client_set_error(ENOMEM, "out of memory");
	m->type = type;
	m->payload = payload;
	return 0;
}

/* ---- connecting ---- */

static void events_free(struct rdmad *c)
{
	while (c->events) {
		struct client_event *e = c->events;

		c->events = e->next;
		json_decref(e->doc);
		free(e);
	}
	c->events_tail = &c->events;
	c->n_events = 0;
	json_decref(c->delivered);
	c->delivered = NULL;
	free(c->delivered_text);
	c->delivered_text = NULL;
}

void client_conn_free(struct rdmad *c)
{
	if (!c)
		return;
	closep(&c->fd);
	if (c->resume_timer > 0)
		close(c->resume_timer);
	events_free(c);
	free(c->rbuf);
	client_reuse_clear(&c->reuse);
	free(c->path);
	free(c);
}

static void conn_freep(struct rdmad **c)
{
	client_conn_free(*c);
}

/*
 * Send HELLO. Its answer is read with the first request's: the daemon
 * answers HELLO first, and a request sent before the WELCOME is one
 * frame framed as version 1, which a daemon reads whichever version it
 * chooses of those offered (version 2 differs only in messages of
 * several frames, which only the daemon sends).
 */
static int conn_hello(struct rdmad *c)
{
	struct proto_msg req;
	int r;

	r = proto_hello(&req, 0);
	if (r < 0)
		return client_set_error(r, "out of memory");
	r = client_conn_send(c, &req);
	proto_msg_clear(&req);
	return r;
}

/* A new connection to socket_path (NULL: the default), said HELLO to. */
static struct rdmad *conn_open(const char *socket_path)
{
	_cleanup_(conn_freep) struct rdmad *c = NULL;
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = CLIENT_TIMEOUT_MS / 1000};
	const char *hint = "";
	int r, err;

	if (!socket_path) {
		socket_path = secure_getenv("RDMAD_SOCKET");
		if (!socket_path || !*socket_path)
			socket_path = RDMAD_DEFAULT_SOCKET;
	}
	if (!*socket_path) {
		errno = -client_set_error(EINVAL, "empty socket path");
		return NULL;
	}
	if (strlen(socket_path) >= sizeof(sun.sun_path)) {
		errno =
		    -client_set_error(ENAMETOOLONG,
				      "socket path '%s' is longer than "
				      "%zu bytes",
				      socket_path, sizeof(sun.sun_path) - 1);
		return NULL;
	}
	strcpy(sun.sun_path, socket_path);

	c = calloc(1, sizeof(*c));
	if (c) {
		c->fd = -1;
		c->resume_timer = -1;
		c->events_tail = &c->events;
		c->path = strdup(socket_path);
	}
	if (!c || !c->path) {
		errno = -client_set_error(ENOMEM, "out of memory");
		return NULL;
	}
	c->attach_wait_ms = CLIENT_ATTACH_WAIT_MS;
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		err = errno;
		errno = -client_set_error(err, "cannot create a socket: %s",
					  strerror(err));
		return NULL;
	}
	/* The send timeout also bounds connect() on a full backlog. */
	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
		err = errno;
		errno = -client_set_error(err, "cannot set socket timeouts: %s",
					  strerror(err));
		return NULL;
	}
	c->rcv_timeout_ms = CLIENT_TIMEOUT_MS;
	if (connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		err = errno;
		if (err == ENOENT || err == ECONNREFUSED)
			hint = " (is rdmad running?)";
		else if (err == EACCES)
			hint = " (is this user in rdmad's control group?)";
		else if (err == EAGAIN)
			err = ETIMEDOUT;
		errno = -client_set_error(err,
					  "cannot connect to rdmad at %s: "
					  "%s%s",
					  socket_path, strerror(err), hint);
		return NULL;
	}
	r = conn_hello(c);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	return TAKE_PTR(c);
}

struct rdmad *rdmad_connect(const char *socket_path)
{
	return conn_open(socket_path);
}

/* A new session's connection in place of c's, on c's fd number. */
static int conn_take(struct rdmad *c, struct rdmad *n)
{
	if (c->fd >= 0) {
		if (dup3(n->fd, c->fd, O_CLOEXEC) < 0)
			return -errno;
		closep(&n->fd);
	} else {
		c->fd = TAKE_FD(n->fd);
	}
	c->last_id = n->last_id;
	c->broken = c->gone = false;
	c->version = n->version;
	c->rcv_timeout_ms = n->rcv_timeout_ms;
	c->local_seen = false;
	memcpy(c->pending, n->pending, sizeof(c->pending));
	c->n_pending = n->n_pending;
	return 0;
}

/*
 * Take back p's attachment in the session c has now: ATTACH with
 * "resume" (PROTOCOL.md), which the daemon may hold until the profile
 * is ready. Its answer is a whole ATTACHED of the profile as it is now;
 * the process keeps what it imported (the same context, whose objects
 * the attachment's leases held all along), so only the attachment's
 * number is taken, and the fds go.
 */
static int resume_attach(struct rdmad *c, struct rdmad_profile *p)
{
	struct proto_msg req, ans;
	json_t *doc, *id;
	uint32_t rid;
	int r;

	/* Only the attachment's id is read: no memory's fd either. */
	doc = json_pack("{s:s, s:s, s:b, s:i, s:b}", "profile", p->name, "mode",
			"shared", "resume", 1, "wait_ms", CLIENT_ATTACH_WAIT_MS,
			"memory_fds", 0);
	r = client_request_msg(&req, PROTO_ATTACH, doc);
	if (r < 0)
		return r;
	r = client_conn_send(c, &req);
	rid = req.id;
	proto_msg_clear(&req);
	if (r == 0)
		r = client_conn_set_timeout(c, CLIENT_TIMEOUT_MS +
						       CLIENT_ATTACH_WAIT_MS);
	proto_msg_init(&ans);
	if (r == 0)
		r = client_conn_await(c, rid, "ATTACH", &ans);
	if (r < 0)
		return r;
	id = json_object_get(ans.payload, "attachment");
	if (ans.type != PROTO_ATTACHED || !json_is_integer(id) ||
	    json_integer_value(id) < 0 ||
	    json_integer_value(id) > UINT32_MAX ||
	    strcmp(json_string_value(json_object_get(ans.payload, "mode"))
			   ?: "",
		   "shared")) {
		proto_msg_clear(&ans);
		return client_set_error(EPROTO, "rdmad's answer to a resumed "
						"ATTACH of %s is not a shared "
						"ATTACHED",
					p->name);
	}
	p->attachment = (uint32_t)json_integer_value(id);
	proto_msg_clear(&ans);
	return 0;
}

/* A try to resume, when due: connect again and take each shared
 * attachment back. */
static void resume_try(struct rdmad *c)
{
	uint64_t ticks;
	struct rdmad *n;
	struct rdmad_profile *p;
	int64_t now = mono_ms();

	if (read(c->resume_timer, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		return;
	if (now < c->resume_next)
		return;
	n = conn_open(c->path);
	if (n && conn_settle(n) == 0 && conn_take(c, n) == 0) {
		client_conn_free(n);
		resume_stop(c);
		for (p = c->profiles; p; p = p->next) {
			if (!p->granted)
				continue;
			if (p->mode == RDMAD_MODE_SHARED &&
			    resume_attach(c, p) == 0) {
				event_push(c, RDMAD_EVENT_RESUMED, p, NULL);
				continue;
			}
			/* The daemon went again meanwhile (a crash during
			 * the resume): resuming goes on, nothing given up. */
			if (c->gone)
				return;
			/* Not taken back: ended with the old session. */
			p->granted = false;
			event_push(c, RDMAD_EVENT_DAEMON_GONE, p, NULL);
		}
		return;
	}
	client_conn_free(n);
	if (now - c->resume_since >= RESUME_LIMIT_MS) {
		resume_stop(c);
		for (p = c->profiles; p; p = p->next)
			p->granted = false;
		event_push(c, RDMAD_EVENT_DAEMON_GONE, NULL, NULL);
		return;
	}
	c->resume_backoff_ms = c->resume_backoff_ms * 2 > RESUME_MAX_MS
				       ? RESUME_MAX_MS
				       : c->resume_backoff_ms * 2;
	if (resume_arm(c, c->resume_backoff_ms) < 0) {
		resume_stop(c);
		event_push(c, RDMAD_EVENT_DAEMON_GONE, NULL, NULL);
	}
}

int rdmad_reconnect(struct rdmad *c)
{
	struct rdmad *n;
	struct rdmad_profile *p;
	int r;

	if (!c)
		return client_set_error(EINVAL, "rdmad_reconnect: no "
						"connection");
	n = conn_open(c->path);
	if (!n)
		return -errno;
	/* HELLO answered: a daemon that lives. A dying one's socket may
	 * still take the connection for an instant (it closes its sessions
	 * before its listener); a reconnect is in no hurry to be sure. */
	r = conn_settle(n);
	if (r < 0) {
		client_conn_free(n);
		return r;
	}
	/* A new session: the old one's attachments are not the daemon's
	 * any more (they ended with it), only this process's. */
	for (p = c->profiles; p; p = p->next)
		p->granted = false;
	resume_stop(c);
	closep(&c->fd);
	conn_take(c, n);
	client_conn_free(n);
	return 0;
}

int rdmad_fd(struct rdmad *c)
{
	if (!c)
		return client_set_error(EINVAL, "rdmad_fd: no connection");
	return c->fd;
}

int rdmad_next_event(struct rdmad *c, struct rdmad_event *ev)
{
	struct client_event *e;
	struct proto_msg m;
	int r;

	if (!c || !ev)
		return client_set_error(EINVAL, "rdmad_next_event: no "
						"connection or no event");
	if (c->resuming)
		resume_try(c);
	/* What is there to read now: EVENTs, the end of the connection,
	 * answers to requests sent ahead (a REPORT's), settled here. */
	while (!c->events && !c->gone) {
		struct pending req;

		proto_msg_init(&m);
		r = conn_read(c, &m, false, 0);
		if (r == -ECONNRESET)
			break; /* DAEMON_GONE is queued */
		if (r == -EPROTO)
			return r;
		if (r < 0)
			return client_set_error(r, "bad message from rdmad: %s",
						proto_strerror(r));
		if (r == 0)
			break; /* nothing more now; EVENTs may be queued */
		if (c->broken) { /* a late answer nobody waits for */
			proto_msg_clear(&m);
			continue;
		}
		if (!c->n_pending || m.id != c->pending[0].id) {
			conn_break(c);
			r = client_set_error(EPROTO,
					     "rdmad sent %s (id %u) unasked",
					     proto_type_name(m.type), m.id);
			proto_msg_clear(&m);
			return r;
		}
		req = c->pending[0];
		c->n_pending--;
		memmove(c->pending, c->pending + 1,
			c->n_pending * sizeof(*c->pending));
		r = conn_settle_one(c, &req, &m);
		proto_msg_clear(&m);
		if (r < 0)
			return r;
	}
	e = c->events;
	if (!e)
		return 0;
	c->events = e->next;
	if (!c->events)
		c->events_tail = &c->events;
	c->n_events--;
	json_decref(c->delivered);
	c->delivered = e->doc;
	free(c->delivered_text);
	c->delivered_text = e->doc ? json_dumps(e->doc, JSON_COMPACT) : NULL;
	*ev = (struct rdmad_event){
		.type = e->type,
		.profile = e->profile,
		.profile_name = json_string_value(
		    json_object_get(e->doc, "profile")),
		.device = json_string_value(json_object_get(e->doc, "device")),
		.reason = json_string_value(json_object_get(e->doc, "reason")),
	};
	if (!ev->reason && e->type == RDMAD_EVENT_RESUMED)
		ev->reason = "rdmad came back; the attachment was taken back";
	if (!ev->reason)
		ev->reason = e->type == RDMAD_EVENT_DAEMON_GONE
				     ? "rdmad closed the connection (it "
				       "stopped or restarted)"
				     : "";
	free(e);
	return 1;
}

const char *rdmad_event_json(struct rdmad *c)
{
	return c ? c->delivered_text : NULL;
}

