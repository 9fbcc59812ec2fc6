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
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "proto.h"
#include "rdmad.h"
#include "rdmad_internal.h"
#include "util.h"

/* How long an answer is awaited; a waiting ATTACH adds its own wait. */
#define CLIENT_TIMEOUT_MS 30000
/* RDMAD_ATTACH_WAIT's limit until rdmad_set_attach_timeout(). */
#define CLIENT_ATTACH_WAIT_MS 30000
/* Requests sent whose answers are still to be read, at most. */
#define CLIENT_MAX_PENDING 4
/* EVENTs set aside and not yet taken by rdmad_next_event(), at most:
 * a program that never asks loses the later ones, not its memory. */
#define CLIENT_MAX_EVENTS 256

static __thread char last_error[512];

/* A request sent whose answer has not been read yet. */
struct pending {
	uint32_t id;
	uint16_t type; /* the request's */
};

/* An EVENT set aside, or the end of the connection. */
struct client_event {
	struct client_event *next;
	enum rdmad_event_type type;
	struct rdmad_profile *profile; /* NULL: none (any more) */
	json_t *doc;		       /* the payload; NULL for DAEMON_GONE */
};

struct rdmad {
	int fd;
	char *path; /* for rdmad_reconnect() */
	uint32_t last_id;
	bool broken; /* an answer was lost or garbled: no more requests */
	bool gone;   /* the daemon closed the connection */
	/* Oldest first; the payload of the last one handed out is kept
	 * for the strings it lent. */
	struct client_event *events, **events_tail;
	size_t n_events;
	json_t *delivered;
	char *delivered_text; /* rdmad_event_json() */
	uint16_t version; /* 0 until the WELCOME is read */
	int rcv_timeout_ms; /* SO_RCVTIMEO as set; 0: none */
	int attach_wait_ms; /* for RDMAD_ATTACH_WAIT; -1: no limit */
	bool local_seen; /* the last attach was in local mode */
	uint8_t *rbuf;	 /* PROTO_RECV_BYTES, for each datagram */
	/* Oldest first: the order the daemon answers in. */
	struct pending pending[CLIENT_MAX_PENDING];
	size_t n_pending;
	struct rdmad_profile *profiles;
};

struct client_memory {
	char *name;
	int fd;	    /* until mapped */
	void *addr; /* MAP_FAILED until mapped */
	size_t size;
};

struct client_pd {
	char *name;
	uint32_t handle;
	struct ibv_pd *pd;
};

struct client_mr {
	char *name;
	size_t pd, memory; /* indexes into the profile's arrays */
	uint32_t handle, rkey;
	uint64_t offset, length, iova;
	unsigned int access;
	bool zero_based;
	bool odp;
	struct ibv_mr *mr;
};

/* Device memory of the daemon's context (shared mode), and the MRs over
 * it: imported by handle when first asked for. */
struct client_dm {
	char *name;
	uint32_t handle;
	uint64_t size;
	struct ibv_dm *dm;
};

struct client_dm_mr {
	char *name;
	size_t pd; /* index into the profile's PDs */
	uint32_t handle, rkey;
	uint64_t length;
	struct ibv_mr *mr;
};

/* An implicit MR (odp without memory): the client's own, over its own
 * address space, registered on the profile's PD when first asked for. */
struct client_imr {
	char *name;
	size_t pd;
	unsigned int access;
	struct ibv_mr *mr;
};

/* An XRC domain's file: opened on this context when first asked for. */
struct client_xrcd {
	char *name;
	int fd;
	struct ibv_xrcd *xrcd;
};

/* A QP or SRQ of the profile, by number (XRC: ibv_open_qp, srq_num). */
struct client_num {
	char *name;
	char *xrcd; /* an XRC target QP's domain, or NULL */
	bool xrc;   /* xrc_recv QP, XRC SRQ */
	bool has_num;
	uint32_t num;
};

struct rdmad_profile {
	struct rdmad *conn;
	struct rdmad_profile *next;
	char *name;
	uint32_t attachment;
	bool granted; /* the daemon holds an attachment for us */
	enum rdmad_mode mode;
	char *ibdev;
	int port, gid_index;
	int cmd_fd; /* shared mode, until imported */
	struct ibv_context *ctx;
	struct client_memory *mem;
	size_t n_mem;
	struct client_pd *pd;
	size_t n_pd;
	struct client_mr *mr;
	size_t n_mr;
	struct client_xrcd *xrcd;
	size_t n_xrcd;
	struct client_num *qp, *srq;
	size_t n_qp, n_srq;
	struct client_dm *dm;
	size_t n_dm;
	struct client_dm_mr *dm_mr;
	size_t n_dm_mr;
	struct client_imr *imr;
	size_t n_imr;
	/* Local mode: the devices, listed while the daemon answered. */
	struct ibv_device **devs;
	int n_devs;
};

/* ---- errors ---- */

const char *rdmad_version(void)
{
	return RDMAD_VERSION;
}

const char *rdmad_strerror(int err)
{
	static __thread char buf[128];

	if (err < 0)
		err = -err;
	/* GNU strerror_r returns the message, not always in buf. */
	return strerror_r(err, buf, sizeof(buf));
}

const char *rdmad_last_error(void)
{
	return last_error;
}

int client_set_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return err < 0 ? err : -err;
}

static const struct {
	const char *code;
	int err;
} error_codes[] = {
	{ "not_found", ENOENT },
	{ "forbidden", EACCES },
	{ "unauthorized", EACCES },
	{ "bad_request", EINVAL },
	{ "bad_json", EINVAL },
	{ "invalid_message", EINVAL },
	{ "not_ready", EAGAIN },
	{ "timeout", ETIMEDOUT },
	{ "too_many_requests", EBUSY },
	{ "not_supported", EOPNOTSUPP },
	{ "too_many_sessions", ECONNREFUSED },
	{ "unsupported_version", EPROTONOSUPPORT },
	{ "bad_message", EBADMSG },
	{ "message_too_large", EMSGSIZE },
	{ "device_error", EIO },
	{ "internal", EIO },
};

int client_code_errno(const char *code)
{
	size_t i;

	for (i = 0; code && i < ARRAY_SIZE(error_codes); i++)
		if (streq(code, error_codes[i].code))
			return error_codes[i].err;
	return EPROTO;
}

void client_size_str(uint64_t bytes, char *buf, size_t size)
{
	static const char *const units[] = {"KiB", "MiB", "GiB",
					    "TiB", "PiB", "EiB"};
	uint64_t unit = 1024, whole, tenths;
	size_t u = 0;

	if (bytes < 1024) {
		snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
		return;
	}
	while (u + 1 < ARRAY_SIZE(units) && bytes / unit >= 1024) {
		unit *= 1024;
		u++;
	}
	whole = bytes / unit;
	tenths = ((bytes % unit) / (unit / 1024) * 10 + 1023) / 1024;
	if ((bytes % unit) && !tenths)
		tenths = 1;
	if (tenths >= 10) {
		whole++;
		tenths = 0;
	}
	if (tenths)
		snprintf(buf, size, "%llu.%llu %s", (unsigned long long)whole,
			 (unsigned long long)tenths, units[u]);
	else
		snprintf(buf, size, "%llu %s", (unsigned long long)whole,
			 units[u]);
}

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

/* The daemon closed the connection: said once, after what it sent. */
static void conn_gone(struct rdmad *c)
{
	conn_break(c);
	if (c->gone)
		return;
	c->gone = true;
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
	int fds[PROTO_MAX_FDS];
	size_t len, n_fds, plen;
	int r;

	proto_msg_init(m);
	if (!c->rbuf && !(c->rbuf = malloc(PROTO_RECV_BYTES)))
		return -ENOMEM;
	r = proto_recv_frame(c->fd, c->rbuf, PROTO_RECV_BYTES, &len, fds,
			     &n_fds);
	if (r == -EMSGSIZE || r == -EBADMSG)
		proto_frame_ids(c->rbuf, len, m);
	if (r < 0)
		return r;
	if (skip && proto_frame_payload(c->rbuf, len, n_fds, skip, &plen)) {
		proto_frame_ids(c->rbuf, len, m);
		return 0;
	}
	return proto_decode_frame(c->rbuf, len, fds, n_fds, m);
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
	case -EBADMSG:
	case -EMSGSIZE:
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
	default: /* REQUEST, REPORT */
		return PROTO_REPLY;
	}
}

/* How long a read waits for an answer; 0: as long as it takes. Set
 * only when it changes: a system call per change, none per request. */
static int conn_set_timeout(struct rdmad *c, int ms)
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

/*
 * Send req (its id is set here) without waiting for its answer: it is
 * read by conn_await() or settled on the way to a later one.
 */
static int conn_send(struct rdmad *c, struct proto_msg *req)
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

/*
 * Read answers up to the one to request id, into ans: those to requests
 * sent ahead come first and are settled on the way. An ERROR answer
 * becomes the errno of its code. On 0, ans is the caller's to clear; on
 * failure it holds nothing.
 */
static int conn_await(struct rdmad *c, uint32_t id, const char *what,
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

/*
 * Send req and wait for its answer in ans, for at most timeout_ms (0:
 * no limit), as conn_send() and conn_await().
 */
static int exchange(struct rdmad *c, struct proto_msg *req, int timeout_ms,
		    struct proto_msg *ans)
{
	int r;

	proto_msg_init(ans);
	r = conn_send(c, req);
	if (r == 0)
		r = conn_set_timeout(c, timeout_ms);
	if (r == 0)
		r = conn_await(c, req->id, proto_type_name(req->type), ans);
	return r;
}

/* Build a request of type with payload (taken, may be NULL on ENOMEM). */
static int request_msg(struct proto_msg *m, uint16_t type, json_t *payload)
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

static void conn_free(struct rdmad *c)
{
	if (!c)
		return;
	closep(&c->fd);
	events_free(c);
	free(c->rbuf);
	free(c->path);
	free(c);
}

static void conn_freep(struct rdmad **c)
{
	conn_free(*c);
}

/*
 * Send HELLO. Its answer is read with the first request's: the daemon
 * answers HELLO first, and a request sent before the WELCOME is framed
 * in the one version this library speaks. A library that speaks
 * several must know the daemon's choice before it frames the next
 * request, so it waits here.
 */
static int conn_hello(struct rdmad *c)
{
	struct proto_msg req, ans;
	int r;

	r = proto_hello(&req, 0);
	if (r < 0)
		return client_set_error(r, "out of memory");
	r = conn_send(c, &req);
	proto_msg_clear(&req);
	if (r < 0 || PROTO_VERSION_MIN == PROTO_VERSION_MAX)
		return r;
	r = conn_await(c, c->last_id, "HELLO", &ans);
	if (r == 0)
		r = conn_welcome(c, &ans);
	proto_msg_clear(&ans);
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
		conn_free(n);
		return r;
	}
	/* A new session: the old one's attachments are not the daemon's
	 * any more (they ended with it), only this process's. */
	for (p = c->profiles; p; p = p->next)
		p->granted = false;
	closep(&c->fd);
	c->fd = TAKE_FD(n->fd);
	c->last_id = n->last_id;
	c->broken = c->gone = false;
	c->version = n->version;
	c->rcv_timeout_ms = n->rcv_timeout_ms;
	c->local_seen = false;
	memcpy(c->pending, n->pending, sizeof(c->pending));
	c->n_pending = n->n_pending;
	conn_free(n);
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
	if (!ev->reason)
		ev->reason = e->type == RDMAD_EVENT_DAEMON_GONE
				     ? "rdmad closed the connection (it "
				       "stopped or restarted)"
				     : "";
	free(e);
	return 1;
}

/* ---- profiles: parsing ATTACHED ---- */

static void profile_free(struct rdmad_profile *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->n_mem; i++) {
		free(p->mem[i].name);
		closep(&p->mem[i].fd);
	}
	for (i = 0; i < p->n_pd; i++)
		free(p->pd[i].name);
	for (i = 0; i < p->n_mr; i++)
		free(p->mr[i].name);
	for (i = 0; i < p->n_xrcd; i++) {
		free(p->xrcd[i].name);
		closep(&p->xrcd[i].fd);
	}
	for (i = 0; i < p->n_qp; i++) {
		free(p->qp[i].name);
		free(p->qp[i].xrcd);
	}
	for (i = 0; i < p->n_srq; i++)
		free(p->srq[i].name);
	for (i = 0; i < p->n_dm; i++)
		free(p->dm[i].name);
	for (i = 0; i < p->n_dm_mr; i++)
		free(p->dm_mr[i].name);
	for (i = 0; i < p->n_imr; i++)
		free(p->imr[i].name);
	free(p->imr);
	free(p->dm);
	free(p->dm_mr);
	free(p->qp);
	free(p->srq);
	free(p->mem);
	free(p->pd);
	free(p->mr);
	free(p->xrcd);
	closep(&p->cmd_fd);
	if (p->devs)
		ibv_free_device_list(p->devs);
	free(p->ibdev);
	free(p->name);
	free(p);
}

static int malformed(const struct rdmad_profile *p, const char *fmt, ...)
	_printf_(2, 3);
static int malformed(const struct rdmad_profile *p, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return client_set_error(EPROTO,
				"rdmad's ATTACHED for profile '%s' is "
				"malformed: %s",
				p->name, why);
}

/* A JSON integer in [0, max]. */
static bool get_uint(const json_t *o, const char *key, uint64_t max,
		     uint64_t *out)
{
	const json_t *v = json_object_get(o, key);
	json_int_t i;

	if (!json_is_integer(v))
		return false;
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i > max)
		return false;
	*out = (uint64_t)i;
	return true;
}

/* A non-empty string, copied. */
static char *get_name(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s && *s ? strdup(s) : NULL;
}

/* Take fd number index of m (each may be taken once). */
static int take_fd(const struct rdmad_profile *p, struct proto_msg *m,
		   uint64_t index, const char *what, int *fd)
{
	if (index >= m->n_fds)
		return malformed(p, "%s: fd %llu of %zu", what,
				 (unsigned long long)index, m->n_fds);
	if (m->fds[index] < 0)
		return malformed(p, "%s: fd %llu given twice", what,
				 (unsigned long long)index);
	*fd = TAKE_FD(m->fds[index]);
	return 0;
}

static json_t *get_array(const json_t *o, const char *key, size_t *n)
{
	json_t *a = json_object_get(o, key);

	if (!a) { /* nothing of that kind */
		*n = 0;
		return NULL;
	}
	*n = json_is_array(a) ? json_array_size(a) : (size_t)-1;
	return a;
}

static int parse_memory(struct rdmad_profile *p, struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i, j;
	uint64_t v;
	int r;

	a = get_array(m->payload, "memory", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"memory\" is not an array");
	p->mem = calloc(n ? n : 1, sizeof(*p->mem));
	if (!p->mem)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_memory *mem = &p->mem[p->n_mem++];

		mem->fd = -1;
		mem->addr = MAP_FAILED;
		mem->name = get_name(o, "name");
		if (!mem->name)
			return malformed(p, "memory %zu has no name", i);
		for (j = 0; j < i; j++)
			if (streq(p->mem[j].name, mem->name))
				return malformed(p, "memory '%s' twice",
						 mem->name);
		if (!get_uint(o, "size", SIZE_MAX, &v) || v == 0)
			return malformed(p, "memory '%s': bad size", mem->name);
		mem->size = v;
		if (!get_uint(o, "fd", UINT32_MAX, &v))
			return malformed(p, "memory '%s' has no fd", mem->name);
		r = take_fd(p, m, v, mem->name, &mem->fd);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Optional: XRC domains the daemon shares by their file. */
static int parse_xrcds(struct rdmad_profile *p, struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i;
	uint64_t v;
	int r;

	a = get_array(m->payload, "xrcd", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"xrcd\" is not an array");
	p->xrcd = calloc(n ? n : 1, sizeof(*p->xrcd));
	if (!p->xrcd)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_xrcd *x = &p->xrcd[p->n_xrcd++];

		x->fd = -1;
		x->name = get_name(o, "name");
		if (!x->name)
			return malformed(p, "xrcd %zu has no name", i);
		if (!get_uint(o, "fd", UINT32_MAX, &v))
			return malformed(p, "xrcd '%s' has no fd", x->name);
		r = take_fd(p, m, v, x->name, &x->fd);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Optional (daemons before 0.5 send none): QPs or SRQs (key) and their
 * numbers (num_key: qp_num, srq_num; an SRQ that is not XRC has none). */
static int parse_nums(struct rdmad_profile *p, const struct proto_msg *m,
		      const char *key, const char *num_key,
		      struct client_num **out, size_t *n_out)
{
	const char *xrc_type = streq(key, "qp") ? "xrc_recv" : "xrc";
	json_t *a, *o;
	size_t n, i;
	uint64_t v;

	a = get_array(m->payload, key, &n);
	if (n == (size_t)-1)
		return malformed(p, "\"%s\" is not an array", key);
	*out = calloc(n ? n : 1, sizeof(**out));
	if (!*out)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_num *q = &(*out)[(*n_out)++];
		const char *type =
			json_string_value(json_object_get(o, "type"));

		q->name = get_name(o, "name");
		if (!q->name)
			return malformed(p, "%s %zu has no name", key, i);
		q->xrc = type && streq(type, xrc_type);
		if (json_object_get(o, "xrcd")) {
			q->xrcd = get_name(o, "xrcd");
			if (!q->xrcd)
				return malformed(p, "%s '%s': bad xrcd", key,
						 q->name);
		}
		if (get_uint(o, num_key, UINT32_MAX, &v)) {
			q->num = (uint32_t)v;
			q->has_num = true;
		} else if (json_object_get(o, num_key)) {
			return malformed(p, "%s '%s': bad %s", key, q->name,
					 num_key);
		}
	}
	return 0;
}

static int parse_pds(struct rdmad_profile *p, const struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i, j;
	uint64_t v;

	a = get_array(m->payload, "pd", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"pd\" is not an array");
	p->pd = calloc(n ? n : 1, sizeof(*p->pd));
	if (!p->pd)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_pd *pd = &p->pd[p->n_pd++];

		pd->name = get_name(o, "name");
		if (!pd->name)
			return malformed(p, "pd %zu has no name", i);
		for (j = 0; j < i; j++)
			if (streq(p->pd[j].name, pd->name))
				return malformed(p, "pd '%s' twice", pd->name);
		if (!get_uint(o, "handle", UINT32_MAX, &v))
			return malformed(p, "pd '%s' has no handle", pd->name);
		pd->handle = v;
	}
	return 0;
}

static const struct {
	const char *name;
	unsigned int flag;
} access_names[] = {
	{ "local_write", IBV_ACCESS_LOCAL_WRITE },
	{ "remote_write", IBV_ACCESS_REMOTE_WRITE },
	{ "remote_read", IBV_ACCESS_REMOTE_READ },
	{ "remote_atomic", IBV_ACCESS_REMOTE_ATOMIC },
	{ "mw_bind", IBV_ACCESS_MW_BIND },
	{ "relaxed_ordering", IBV_ACCESS_RELAXED_ORDERING },
};

static int parse_access(const struct rdmad_profile *p, const char *mr,
			const json_t *a, unsigned int *access)
{
	const json_t *v;
	size_t i, k;

	if (!json_is_array(a))
		return malformed(p, "mr '%s' has no access list", mr);
	*access = 0;
	json_array_foreach(a, i, v)
	{
		const char *s = json_string_value(v);

		for (k = 0; s && k < ARRAY_SIZE(access_names); k++)
			if (streq(s, access_names[k].name))
				break;
		if (!s || k == ARRAY_SIZE(access_names))
			return malformed(p, "mr '%s': unknown access '%s'", mr,
					 s ? s : "?");
		*access |= access_names[k].flag;
	}
	return 0;
}

static bool find_index(const struct rdmad_profile *p, bool pd, const char *name,
		       size_t *out)
{
	size_t i, n = pd ? p->n_pd : p->n_mem;

	for (i = 0; name && i < n; i++)
		if (streq(pd ? p->pd[i].name : p->mem[i].name, name)) {
			*out = i;
			return true;
		}
	return false;
}

/* Optional (daemons before 0.6 send none; empty in local mode): device
 * memory and the MRs over it, by handle. */
static int parse_dms(struct rdmad_profile *p, const struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i, j;
	uint64_t v;

	a = get_array(m->payload, "dm", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"dm\" is not an array");
	p->dm = calloc(n ? n : 1, sizeof(*p->dm));
	if (!p->dm)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_dm *d = &p->dm[p->n_dm++];

		d->name = get_name(o, "name");
		if (!d->name)
			return malformed(p, "dm %zu has no name", i);
		for (j = 0; j < i; j++)
			if (streq(p->dm[j].name, d->name))
				return malformed(p, "dm '%s' twice", d->name);
		if (!get_uint(o, "handle", UINT32_MAX, &v))
			return malformed(p, "dm '%s' has no handle", d->name);
		d->handle = (uint32_t)v;
		if (!get_uint(o, "size", UINT64_MAX, &d->size))
			return malformed(p, "dm '%s' has no size", d->name);
	}
	a = get_array(m->payload, "dm_mr", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"dm_mr\" is not an array");
	p->dm_mr = calloc(n ? n : 1, sizeof(*p->dm_mr));
	if (!p->dm_mr)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_dm_mr *mr = &p->dm_mr[p->n_dm_mr++];
		const char *s;

		mr->name = get_name(o, "name");
		if (!mr->name)
			return malformed(p, "dm_mr %zu has no name", i);
		for (j = 0; j < p->n_mr; j++)
			if (streq(p->mr[j].name, mr->name))
				return malformed(p, "mr '%s' twice", mr->name);
		for (j = 0; j < i; j++)
			if (streq(p->dm_mr[j].name, mr->name))
				return malformed(p, "mr '%s' twice", mr->name);
		s = json_string_value(json_object_get(o, "pd"));
		if (!find_index(p, true, s, &mr->pd))
			return malformed(p, "mr '%s': no pd '%s'", mr->name,
					 s ? s : "");
		if (!get_uint(o, "handle", UINT32_MAX, &v))
			return malformed(p, "mr '%s' has no handle", mr->name);
		mr->handle = (uint32_t)v;
		if (!get_uint(o, "rkey", UINT32_MAX, &v))
			return malformed(p, "mr '%s' has no rkey", mr->name);
		mr->rkey = (uint32_t)v;
		if (!get_uint(o, "length", UINT64_MAX, &mr->length))
			return malformed(p, "mr '%s' has no length", mr->name);
	}
	return 0;
}

static int parse_mrs(struct rdmad_profile *p, const struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i, j;
	uint64_t v;
	int r;

	a = get_array(m->payload, "mr", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"mr\" is not an array");
	p->mr = calloc(n ? n : 1, sizeof(*p->mr));
	if (!p->mr)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_mr *mr = &p->mr[p->n_mr++];
		const char *s;
		size_t size;

		mr->name = get_name(o, "name");
		if (!mr->name)
			return malformed(p, "mr %zu has no name", i);
		for (j = 0; j < i; j++)
			if (streq(p->mr[j].name, mr->name))
				return malformed(p, "mr '%s' twice", mr->name);
		s = json_string_value(json_object_get(o, "pd"));
		if (!find_index(p, true, s, &mr->pd))
			return malformed(p, "mr '%s': no pd '%s'", mr->name,
					 s ? s : "");
		s = json_string_value(json_object_get(o, "memory"));
		if (!find_index(p, false, s, &mr->memory))
			return malformed(p, "mr '%s': no memory '%s'", mr->name,
					 s ? s : "");
		size = p->mem[mr->memory].size;
		if (!get_uint(o, "offset", size - 1, &mr->offset) ||
		    !get_uint(o, "length", size - mr->offset, &mr->length) ||
		    mr->length == 0)
			return malformed(p,
					 "mr '%s': offset and length do not "
					 "fit memory '%s' (%zu bytes)",
					 mr->name, p->mem[mr->memory].name,
					 size);
		if (!get_uint(o, "handle", UINT32_MAX, &v))
			return malformed(p, "mr '%s' has no handle", mr->name);
		mr->handle = v;
		if (!get_uint(o, "rkey", UINT32_MAX, &v))
			return malformed(p, "mr '%s' has no rkey", mr->name);
		mr->rkey = v;
		mr->zero_based = json_is_true(json_object_get(o, "zero_based"));
		/* Registered here as the daemon did: paged on demand too. */
		mr->odp = json_is_true(json_object_get(o, "odp"));
		if (!get_uint(o, "iova", UINT64_MAX, &mr->iova))
			return malformed(p, "mr '%s' has no iova", mr->name);
		if (mr->zero_based)
			mr->iova = 0;
		r = parse_access(p, mr->name, json_object_get(o, "access"),
				 &mr->access);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Optional (daemons before 0.6 send none): implicit MRs to register. */
static int parse_imrs(struct rdmad_profile *p, const struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i, j;
	int r;

	a = get_array(m->payload, "implicit_mr", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"implicit_mr\" is not an array");
	p->imr = calloc(n ? n : 1, sizeof(*p->imr));
	if (!p->imr)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_imr *mr = &p->imr[p->n_imr++];
		const char *s;

		mr->name = get_name(o, "name");
		if (!mr->name)
			return malformed(p, "implicit mr %zu has no name", i);
		for (j = 0; j < p->n_mr; j++)
			if (streq(p->mr[j].name, mr->name))
				return malformed(p, "mr '%s' twice", mr->name);
		for (j = 0; j < i; j++)
			if (streq(p->imr[j].name, mr->name))
				return malformed(p, "mr '%s' twice", mr->name);
		s = json_string_value(json_object_get(o, "pd"));
		if (!find_index(p, true, s, &mr->pd))
			return malformed(p, "mr '%s': no pd '%s'", mr->name,
					 s ? s : "");
		r = parse_access(p, mr->name, json_object_get(o, "access"),
				 &mr->access);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Fill p from ATTACHED, taking the fds it uses out of m (those it does
 * not use stay in m, to be closed with it). p->attachment and
 * p->granted are set first, so that a malformed rest can be detached.
 */
static int parse_attached(struct rdmad_profile *p, struct proto_msg *m,
			  unsigned int flags)
{
	const json_t *doc = m->payload;
	const char *mode = json_string_value(json_object_get(doc, "mode"));
	uint64_t v;
	int r;

	if (!get_uint(doc, "attachment", UINT32_MAX, &v))
		return malformed(p, "no attachment id");
	p->attachment = v;
	p->granted = true;

	if (mode && streq(mode, "shared"))
		p->mode = RDMAD_MODE_SHARED;
	else if (mode && streq(mode, "local"))
		p->mode = RDMAD_MODE_LOCAL;
	else
		return malformed(p, "mode '%s'", mode ? mode : "");
	if (((flags & RDMAD_ATTACH_SHARED) && p->mode != RDMAD_MODE_SHARED) ||
	    ((flags & RDMAD_ATTACH_LOCAL) && p->mode != RDMAD_MODE_LOCAL))
		return client_set_error(EPROTO,
					"rdmad attached profile '%s' in %s "
					"mode, not in the mode asked",
					p->name, mode);

	p->ibdev = get_name(doc, "ibdev");
	if (!p->ibdev)
		return malformed(p, "no ibdev");
	if (!get_uint(doc, "port", 255, &v) || v == 0)
		return malformed(p, "no port");
	p->port = (int)v;
	if (!get_uint(doc, "gid_index", INT32_MAX, &v))
		return malformed(p, "no gid_index");
	p->gid_index = (int)v;

	if (p->mode == RDMAD_MODE_SHARED) {
		if (!get_uint(doc, "cmd_fd", UINT32_MAX, &v))
			return malformed(p, "shared mode without cmd_fd");
		r = take_fd(p, m, v, "cmd_fd", &p->cmd_fd);
		if (r < 0)
			return r;
	}
	r = parse_memory(p, m);
	if (r < 0)
		return r;
	r = parse_xrcds(p, m);
	if (r < 0)
		return r;
	r = parse_pds(p, m);
	if (r < 0)
		return r;
	r = parse_nums(p, m, "qp", "qp_num", &p->qp, &p->n_qp);
	if (r < 0)
		return r;
	r = parse_nums(p, m, "srq", "srq_num", &p->srq, &p->n_srq);
	if (r < 0)
		return r;
	r = parse_mrs(p, m);
	if (r < 0)
		return r;
	r = parse_imrs(p, m);
	if (r < 0)
		return r;
	return parse_dms(p, m);
}

/* ---- profiles: setting up and tearing down ---- */

static int map_memory(struct rdmad_profile *p)
{
	size_t i;

	for (i = 0; i < p->n_mem; i++) {
		struct client_memory *mem = &p->mem[i];
		struct stat st;
		int err;

		if (fstat(mem->fd, &st) < 0) {
			err = errno;
			return client_set_error(err, "memory '%s': %s",
						mem->name, strerror(err));
		}
		/* Mapping past the end would SIGBUS on first touch. */
		if (S_ISREG(st.st_mode) && (uint64_t)st.st_size < mem->size)
			return client_set_error(EPROTO,
						"memory '%s' has %llu bytes, "
						"rdmad said %zu",
						mem->name,
						(unsigned long long)st.st_size,
						mem->size);
		mem->addr = mmap(NULL, mem->size, PROT_READ | PROT_WRITE,
				 MAP_SHARED, mem->fd, 0);
		if (mem->addr == MAP_FAILED) {
			err = errno;
			return client_set_error(err,
						"cannot map memory '%s' "
						"(%zu bytes): %s",
						mem->name, mem->size,
						strerror(err));
		}
		/* The mapping keeps the memory alive. */
		closep(&mem->fd);
		mem->fd = -1;
	}
	return 0;
}

static void *mr_addr(const struct rdmad_profile *p, const struct client_mr *mr)
{
	return (char *)p->mem[mr->memory].addr + mr->offset;
}

static int import_context(struct rdmad_profile *p)
{
	struct stat before, after;
	int err;

	if (fstat(p->cmd_fd, &before) < 0) {
		err = errno;
		return client_set_error(err, "cmd_fd: %s", strerror(err));
	}
	errno = 0;
	p->ctx = ibv_import_device(p->cmd_fd);
	if (!p->ctx) {
		err = errno ? errno : EOPNOTSUPP;
		/* Some of libibverbs' failure paths close the fd, some do
		 * not: close it only if it still is the same file. */
		if (fstat(p->cmd_fd, &after) == 0 &&
		    after.st_dev == before.st_dev &&
		    after.st_ino == before.st_ino &&
		    after.st_rdev == before.st_rdev)
			closep(&p->cmd_fd);
		p->cmd_fd = -1;
		return client_set_error(err,
					"cannot import the context of %s: %s",
					p->ibdev, strerror(err));
	}
	p->cmd_fd = -1; /* the context's now */
	return 0;
}

static int setup_shared(struct rdmad_profile *p)
{
	size_t i;
	int r, err;

	r = map_memory(p);
	if (r < 0)
		return r;
	r = import_context(p);
	if (r < 0)
		return r;
	for (i = 0; i < p->n_pd; i++) {
		struct client_pd *pd = &p->pd[i];

		pd->pd = ibv_import_pd(p->ctx, pd->handle);
		if (!pd->pd) {
			err = errno ? errno : EIO;
			return client_set_error(err,
						"cannot import pd '%s' "
						"(handle %u): %s",
						pd->name, pd->handle,
						strerror(err));
		}
	}
	for (i = 0; i < p->n_mr; i++) {
		struct client_mr *mr = &p->mr[i];

		mr->mr = ibv_import_mr(p->pd[mr->pd].pd, mr->handle);
		if (!mr->mr) {
			err = errno ? errno : EIO;
			return client_set_error(err,
						"cannot import mr '%s' "
						"(handle %u): %s",
						mr->name, mr->handle,
						strerror(err));
		}
		/* A handle that names another MR than announced. */
		if (mr->mr->rkey != mr->rkey || mr->mr->length != mr->length)
			return client_set_error(
			    EPROTO,
			    "mr '%s' (handle %u) imports with rkey %u "
			    "and %zu bytes, rdmad announced rkey %u and "
			    "%llu bytes",
			    mr->name, mr->handle, mr->mr->rkey, mr->mr->length,
			    mr->rkey, (unsigned long long)mr->length);
		/* Imported MRs carry no address: give ours, as ibv_reg_mr
		 * would. */
		mr->mr->addr = mr_addr(p, mr);
	}
	return 0;
}

static bool has_cap_ipc_lock(void)
{
	struct __user_cap_header_struct h = {
	    .version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {0};

	/* If we cannot tell, let the kernel judge at registration. */
	if (syscall(SYS_capget, &h, d) < 0)
		return true;
	return d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &
	       CAP_TO_MASK(CAP_IPC_LOCK);
}

/* What this process has pinned already (VmPin), 0 if unknown. */
static uint64_t pinned_now(void)
{
	unsigned long long kb = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

/* What registering MRs [0, n) pins: their pages. */
static uint64_t pinned_by(const struct rdmad_profile *p, size_t n)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), bytes = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct client_mr *mr = &p->mr[i];
		uint64_t start = mr->offset & ~(page - 1);
		uint64_t end =
		    (mr->offset + mr->length + page - 1) & ~(page - 1);

		bytes += end - start;
	}
	return bytes;
}

/* The ENOMEM of a limit too low: what is needed, and how to get it. */
static int memlock_error(uint64_t need, uint64_t pinned,
			 const struct rlimit *rl)
{
	uint64_t total = need + pinned;
	char s_need[32], s_pinned[64] = "", s_limit[32], s_total[32],
			 s_hard[96] = "";

	client_size_str(need, s_need, sizeof(s_need));
	client_size_str(rl->rlim_cur, s_limit, sizeof(s_limit));
	client_size_str(total, s_total, sizeof(s_total));
	if (pinned) {
		char s[32];

		client_size_str(pinned, s, sizeof(s));
		snprintf(s_pinned, sizeof(s_pinned), " (%s pinned already)", s);
	}
	if (rl->rlim_max != RLIM_INFINITY && rl->rlim_max < total) {
		char s[32];

		client_size_str(rl->rlim_max, s, sizeof(s));
		snprintf(s_hard, sizeof(s_hard),
			 "; the hard limit is %s: raising it needs root", s);
	}
	return client_set_error(ENOMEM,
				"local mode registers %s%s but "
				"RLIMIT_MEMLOCK is %s: raise it to at least "
				"%s (ulimit -l %llu, LimitMEMLOCK=%lluK)%s",
				s_need, s_pinned, s_limit, s_total,
				(unsigned long long)((total + 1023) / 1024),
				(unsigned long long)((total + 1023) / 1024),
				s_hard);
}

/*
 * Registering pins the pages, counted against RLIMIT_MEMLOCK (unless
 * CAP_IPC_LOCK): when the MRs alone exceed it, fail before registering
 * anything, with the numbers rather than with the kernel's bare ENOMEM.
 * Whether what the process has pinned already pushes them over is
 * left to the kernel, which counts it anyway: reading it here
 * (/proc/self/status) would cost every attach more than registering a
 * small MR; memlock_explain() reads it when the kernel says ENOMEM.
 */
static int memlock_check(const struct rdmad_profile *p)
{
	uint64_t need = pinned_by(p, p->n_mr);
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 ||
	    rl.rlim_cur == RLIM_INFINITY || need <= rl.rlim_cur ||
	    has_cap_ipc_lock())
		return 0;
	return memlock_error(need, pinned_now(), &rl);
}

/*
 * Registering MR n failed with ENOMEM: if RLIMIT_MEMLOCK is why, say so
 * as memlock_check() would have, counting what MRs [0, n) pinned as
 * part of the need rather than as pinned already. 0 if it is not.
 */
static int memlock_explain(const struct rdmad_profile *p, size_t n)
{
	uint64_t need = pinned_by(p, p->n_mr), ours = pinned_by(p, n);
	uint64_t pinned = pinned_now();
	struct rlimit rl;

	pinned = pinned > ours ? pinned - ours : 0;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 ||
	    rl.rlim_cur == RLIM_INFINITY || need + pinned <= rl.rlim_cur ||
	    has_cap_ipc_lock())
		return 0;
	return memlock_error(need, pinned, &rl);
}

/* The device named p->ibdev in list, or NULL. */
static struct ibv_device *find_device(const struct rdmad_profile *p,
				      struct ibv_device **list, int n)
{
	int i;

	for (i = 0; list && i < n; i++)
		if (streq(ibv_get_device_name(list[i]), p->ibdev))
			return list[i];
	return NULL;
}

static int open_device(struct rdmad_profile *p)
{
	struct ibv_device **list = TAKE_PTR(p->devs), *dev;
	int n = p->n_devs, err;

	/* Listed before the daemon named the device: one that came
	 * since is not in it. */
	dev = find_device(p, list, n);
	if (!dev && list) {
		ibv_free_device_list(list);
		list = NULL;
	}
	if (!list) {
		errno = 0;
		list = ibv_get_device_list(&n);
		if (!list) {
			err = errno ? errno : ENODEV;
			/* ENOSYS: no RDMA in this kernel, so no such
			 * device. */
			return client_set_error(err == ENOSYS ? ENODEV : err,
						"RDMA device %s not found: "
						"cannot list RDMA devices: %s",
						p->ibdev, strerror(err));
		}
		dev = find_device(p, list, n);
	}
	if (!dev) {
		ibv_free_device_list(list);
		return client_set_error(ENODEV,
					"RDMA device %s not found in this "
					"process (%d devices seen)",
					p->ibdev, n);
	}
	errno = 0;
	p->ctx = ibv_open_device(dev);
	err = errno ? errno : EIO;
	ibv_free_device_list(list);
	if (!p->ctx)
		return client_set_error(err, "cannot open %s: %s", p->ibdev,
					strerror(err));
	return 0;
}

/*
 * Tell the daemon the keys of this process's MRs. The answer is not
 * waited for: it carries nothing this process needs, and is read with
 * the next request's (conn_settle_one()).
 */
static int report(struct rdmad_profile *p)
{
	struct proto_msg req;
	json_t *mrs = json_array();
	size_t i;
	int r;

	for (i = 0; mrs && i < p->n_mr; i++) {
		const struct client_mr *mr = &p->mr[i];

		if (json_array_append_new(
			mrs,
			json_pack("{s:s, s:I, s:I, s:I, s:I}", "name", mr->name,
				  "lkey", (json_int_t)mr->mr->lkey, "rkey",
				  (json_int_t)mr->mr->rkey, "iova",
				  (json_int_t)mr->iova, "length",
				  (json_int_t)mr->length)) < 0) {
			json_decref(mrs);
			mrs = NULL;
		}
	}
	r = request_msg(&req, PROTO_REPORT,
			mrs ? json_pack("{s:I, s:o}", "attachment",
					(json_int_t)p->attachment, "mr", mrs)
			    : NULL);
	if (r < 0)
		return r;
	r = conn_send(p->conn, &req);
	proto_msg_clear(&req);
	return r;
}

static int setup_local(struct rdmad_profile *p)
{
	size_t i;
	int r, err;

	r = memlock_check(p);
	if (r < 0)
		return r;
	r = map_memory(p);
	if (r < 0)
		return r;
	r = open_device(p);
	if (r < 0)
		return r;
	for (i = 0; i < p->n_pd; i++) {
		struct client_pd *pd = &p->pd[i];

		errno = 0;
		pd->pd = ibv_alloc_pd(p->ctx);
		if (!pd->pd) {
			err = errno ? errno : EIO;
			return client_set_error(err,
						"cannot allocate pd '%s' on "
						"%s: %s",
						pd->name, p->ibdev,
						strerror(err));
		}
	}
	for (i = 0; i < p->n_mr; i++) {
		struct client_mr *mr = &p->mr[i];

		/* The daemon's IOVA (0 when zero-based): one address
		 * serves both registrations. */
		errno = 0;
		mr->mr = ibv_reg_mr_iova(p->pd[mr->pd].pd, mr_addr(p, mr),
					 mr->length, mr->iova,
					 mr->access | (mr->odp ? IBV_ACCESS_ON_DEMAND
							       : 0));
		if (!mr->mr) {
			err = errno ? errno : EIO;
			if (err == ENOMEM && (r = memlock_explain(p, i)) < 0)
				return r;
			return client_set_error(err,
						"cannot register mr '%s' (%llu "
						"bytes) on %s: %s",
						mr->name,
						(unsigned long long)mr->length,
						p->ibdev, strerror(err));
		}
	}
	return report(p);
}

/* Undo what setup did, in reverse; the first error is returned. */
static int profile_teardown(struct rdmad_profile *p)
{
	bool shared = p->mode == RDMAD_MODE_SHARED;
	size_t i;
	int r = 0, e;

	for (i = 0; i < p->n_xrcd; i++) {
		if (p->xrcd[i].xrcd)
			ibv_close_xrcd(p->xrcd[i].xrcd);
		p->xrcd[i].xrcd = NULL;
	}
	/* Ours in either mode, on the profile's PD: before it goes. */
	for (i = 0; i < p->n_imr; i++) {
		if (p->imr[i].mr) {
			e = ibv_dereg_mr(p->imr[i].mr);
			if (e && !r)
				r = client_set_error(e,
						     "cannot deregister mr "
						     "'%s': %s",
						     p->imr[i].name,
						     strerror(e));
		}
		p->imr[i].mr = NULL;
	}
	/* Imported (shared mode only): the daemon's to destroy. */
	for (i = 0; i < p->n_dm_mr; i++) {
		if (p->dm_mr[i].mr)
			ibv_unimport_mr(p->dm_mr[i].mr);
		p->dm_mr[i].mr = NULL;
	}
	for (i = 0; i < p->n_dm; i++) {
		if (p->dm[i].dm)
			ibv_unimport_dm(p->dm[i].dm);
		p->dm[i].dm = NULL;
	}
	for (i = p->n_mr; i-- > 0;) {
		struct client_mr *mr = &p->mr[i];

		if (!mr->mr)
			continue;
		if (shared) {
			ibv_unimport_mr(mr->mr);
		} else {
			e = ibv_dereg_mr(mr->mr);
			if (e && !r)
				r = client_set_error(e,
						     "cannot deregister mr "
						     "'%s': %s",
						     mr->name, strerror(e));
		}
		mr->mr = NULL;
	}
	for (i = p->n_pd; i-- > 0;) {
		struct client_pd *pd = &p->pd[i];

		if (!pd->pd)
			continue;
		if (shared) {
			ibv_unimport_pd(pd->pd);
		} else {
			e = ibv_dealloc_pd(pd->pd);
			if (e && !r)
				r = client_set_error(
				    e,
				    "cannot deallocate pd '%s' "
				    "(objects still on it?): %s",
				    pd->name, strerror(e));
		}
		pd->pd = NULL;
	}
	if (p->ctx) {
		e = ibv_close_device(p->ctx);
		if (e && !r)
			r = client_set_error(errno, "cannot close %s: %s",
					     p->ibdev, strerror(errno));
		p->ctx = NULL;
	}
	for (i = 0; i < p->n_mem; i++) {
		struct client_memory *mem = &p->mem[i];

		if (mem->addr != MAP_FAILED)
			munmap(mem->addr, mem->size);
		mem->addr = MAP_FAILED;
		closep(&mem->fd);
		mem->fd = -1;
	}
	closep(&p->cmd_fd);
	p->cmd_fd = -1;
	return r;
}

/* Tell the daemon the attachment is over; detach_await() reads its
 * answer, with id. */
static int detach_send(struct rdmad_profile *p, uint32_t *id)
{
	struct proto_msg req;
	int r;

	r = request_msg(
	    &req, PROTO_DETACH,
	    json_pack("{s:I}", "attachment", (json_int_t)p->attachment));
	if (r == 0)
		r = conn_send(p->conn, &req);
	*id = req.id;
	proto_msg_clear(&req);
	p->granted = false;
	return r;
}

static int detach_await(struct rdmad_profile *p, uint32_t id)
{
	struct proto_msg ans;
	int r;

	proto_msg_init(&ans);
	r = conn_set_timeout(p->conn, CLIENT_TIMEOUT_MS);
	if (r == 0)
		r = conn_await(p->conn, id, "DETACH", &ans);
	proto_msg_clear(&ans);
	return r;
}

static int send_detach(struct rdmad_profile *p)
{
	uint32_t id;
	int r = detach_send(p, &id);

	return r < 0 ? r : detach_await(p, id);
}

static void profile_unlink(struct rdmad_profile *p)
{
	struct rdmad_profile **pp;

	/* Events set aside about p stay, without it. */
	for (struct client_event *e = p->conn->events; e; e = e->next)
		if (e->profile == p)
			e->profile = NULL;

	for (pp = &p->conn->profiles; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
}

/* A failed attach: undo everything, keeping the error that made it fail. */
static void profile_abort(struct rdmad_profile *p)
{
	char saved[sizeof(last_error)];

	memcpy(saved, last_error, sizeof(saved));
	profile_teardown(p);
	if (p->granted && !p->conn->broken)
		send_detach(p);
	memcpy(last_error, saved, sizeof(saved));
	profile_free(p);
}

int rdmad_set_attach_timeout(struct rdmad *c, int timeout_ms)
{
	if (!c)
		return client_set_error(EINVAL, "rdmad_set_attach_timeout: no "
						"connection");
	c->attach_wait_ms = timeout_ms < 0 ? -1 : timeout_ms;
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/*
 * ATTACH, and its answer. wait_ms: 0 the daemon answers at once; > 0 it
 * may hold the answer that long for a profile that is not ready yet;
 * -1 as long as it takes. The answer is awaited for that, plus the
 * usual time. list_devices: list the RDMA devices into p meanwhile.
 */
static int ask_attach(struct rdmad_profile *p, const char *mode,
		      int wait_ms, bool list_devices, struct proto_msg *ans)
{
	struct rdmad *c = p->conn;
	struct proto_msg req;
	int timeout = CLIENT_TIMEOUT_MS;
	int64_t t0 = 0;
	uint32_t id;
	json_t *doc;
	int r;

	proto_msg_init(ans);
	doc = json_pack("{s:s, s:s}", "profile", p->name, "mode", mode);
	if (doc && wait_ms &&
	    json_object_set_new(doc, "wait_ms", json_integer(wait_ms)) < 0) {
		json_decref(doc);
		doc = NULL;
	}
	r = request_msg(&req, PROTO_ATTACH, doc);
	if (r < 0)
		return r;
	if (wait_ms < 0)
		timeout = 0;
	else if (wait_ms > INT_MAX - CLIENT_TIMEOUT_MS)
		timeout = INT_MAX;
	else
		timeout += wait_ms;
	if (wait_ms > 0)
		t0 = now_ms();
	r = conn_send(c, &req);
	id = req.id;
	proto_msg_clear(&req);
	if (r == 0)
		r = conn_set_timeout(c, timeout);
	if (r < 0)
		return r;
	/* The device list is the slowest step of local mode (a netlink
	 * and sysfs walk) and needs nothing from the answer: take it
	 * while the daemon works. A failure here is met again later. */
	if (list_devices)
		p->devs = ibv_get_device_list(&p->n_devs);
	r = conn_await(c, id, "ATTACH", ans);
	/* not_ready once the whole wait has passed: the daemon gave up
	 * waiting (its message says so), the profile did not fail. */
	if (r == -EAGAIN && wait_ms > 0 && now_ms() - t0 >= wait_ms)
		r = -ETIMEDOUT;
	return r;
}

struct rdmad_profile *rdmad_attach(struct rdmad *c, const char *profile,
				   unsigned int flags)
{
	static const unsigned int modes =
	    RDMAD_ATTACH_SHARED | RDMAD_ATTACH_LOCAL;
	struct rdmad_profile *p;
	struct proto_msg ans;
	const char *mode;
	int wait_ms, r;

	/* A container given a profile through CDI has its name here. */
	if (!profile)
		profile = secure_getenv("RDMAD_PROFILE");
	if (!c || !profile || !*profile) {
		errno = -client_set_error(EINVAL, "rdmad_attach: no connection "
						  "or no profile name (nor "
						  "$RDMAD_PROFILE)");
		return NULL;
	}
	if ((flags & ~(modes | RDMAD_ATTACH_WAIT)) ||
	    (flags & modes) == modes) {
		errno = -client_set_error(EINVAL,
					  "rdmad_attach: flags 0x%x: at most "
					  "one of RDMAD_ATTACH_SHARED and "
					  "RDMAD_ATTACH_LOCAL, and "
					  "RDMAD_ATTACH_WAIT",
					  flags);
		return NULL;
	}
	mode = flags & RDMAD_ATTACH_SHARED  ? "shared"
	       : flags & RDMAD_ATTACH_LOCAL ? "local"
					    : "auto";

	/* Before asking: a granted attachment must always have a home. */
	p = calloc(1, sizeof(*p));
	if (p) {
		p->conn = c;
		p->cmd_fd = -1;
		p->name = strdup(profile);
	}
	if (!p || !p->name) {
		profile_free(p);
		errno = -client_set_error(ENOMEM, "out of memory");
		return NULL;
	}
	wait_ms = flags & RDMAD_ATTACH_WAIT ? c->attach_wait_ms : 0;
	/* Local mode expected (asked, or what the daemon chose last time
	 * on this connection) and a prompt answer: list the devices while
	 * waiting for it. */
	r = ask_attach(p, mode, wait_ms,
		       !wait_ms && ((flags & RDMAD_ATTACH_LOCAL) ||
				    (!(flags & RDMAD_ATTACH_SHARED) &&
				     c->local_seen)),
		       &ans);
	if (r < 0) {
		profile_free(p);
		errno = -r;
		return NULL;
	}

	r = parse_attached(p, &ans, flags);
	proto_msg_clear(&ans); /* closes the fds nothing refers to */
	if (p->mode)
		c->local_seen = p->mode == RDMAD_MODE_LOCAL;
	if (p->devs && p->mode != RDMAD_MODE_LOCAL) {
		ibv_free_device_list(p->devs);
		p->devs = NULL;
	}
	if (r == 0)
		r = p->mode == RDMAD_MODE_SHARED ? setup_shared(p)
						 : setup_local(p);
	if (r < 0) {
		profile_abort(p);
		errno = -r;
		return NULL;
	}
	p->next = c->profiles;
	c->profiles = p;
	return p;
}

int rdmad_detach(struct rdmad_profile *p)
{
	char saved[sizeof(last_error)];
	bool sent = false;
	uint32_t id = 0;
	int r, d = 0;

	if (!p)
		return client_set_error(EINVAL, "rdmad_detach: no profile");
	if (p->granted) {
		if (p->conn->gone)
			d = 0; /* its lease ended with the session */
		else if (p->conn->broken)
			d = client_set_error(ENOTCONN,
					     "profile '%s' detached here; the "
					     "daemon keeps its lease until the "
					     "connection closes (it failed "
					     "earlier)",
					     p->name);
		else
			sent = (d = detach_send(p, &id)) == 0;
	}
	/* The daemon ends its lease while this process releases its own
	 * objects; nothing of the one depends on the other. */
	r = profile_teardown(p);
	/* The daemon went away meanwhile: the lease is over all the same. */
	if (!sent && d == -ECONNRESET && p->conn->gone)
		d = 0;
	if (sent) {
		memcpy(saved, last_error, sizeof(saved));
		d = detach_await(p, id);
		if (d == -ECONNRESET && p->conn->gone)
			d = 0;
		if (r < 0 || d == 0) /* that error is the one returned */
			memcpy(last_error, saved, sizeof(saved));
	}
	profile_unlink(p);
	profile_free(p);
	return r < 0 ? r : d;
}

void rdmad_close(struct rdmad *c)
{
	int saved = errno;

	if (!c)
		return;
	while (c->profiles)
		rdmad_detach(c->profiles);
	conn_free(c);
	errno = saved;
}

/* ---- accessors ---- */

static struct client_pd *find_pd(struct rdmad_profile *p, const char *name)
{
	size_t i;

	if (!p || !name) {
		errno = -client_set_error(EINVAL, "no profile or no name");
		return NULL;
	}
	for (i = 0; i < p->n_pd; i++)
		if (streq(p->pd[i].name, name))
			return &p->pd[i];
	errno = -client_set_error(ENOENT, "profile '%s' has no pd '%s'",
				  p->name, name);
	return NULL;
}

static struct client_mr *find_mr(struct rdmad_profile *p, const char *name)
{
	size_t i;

	if (!p || !name) {
		errno = -client_set_error(EINVAL, "no profile or no name");
		return NULL;
	}
	for (i = 0; i < p->n_mr; i++)
		if (streq(p->mr[i].name, name))
			return &p->mr[i];
	errno = -client_set_error(ENOENT,
				  "profile '%s' has no mr '%s' that can be "
				  "shared (MRs on anonymous memory cannot)",
				  p->name, name);
	return NULL;
}

enum rdmad_mode rdmad_mode(struct rdmad_profile *p)
{
	if (!p) {
		errno = -client_set_error(EINVAL, "rdmad_mode: no profile");
		return 0;
	}
	return p->mode;
}

struct ibv_context *rdmad_context(struct rdmad_profile *p)
{
	if (!p) {
		errno = -client_set_error(EINVAL, "rdmad_context: no profile");
		return NULL;
	}
	return p->ctx;
}

int rdmad_port(struct rdmad_profile *p)
{
	return p ? p->port : client_set_error(EINVAL, "rdmad_port: no profile");
}

int rdmad_gid_index(struct rdmad_profile *p)
{
	return p ? p->gid_index
		 : client_set_error(EINVAL, "rdmad_gid_index: no profile");
}

struct ibv_pd *rdmad_pd(struct rdmad_profile *p, const char *name)
{
	struct client_pd *pd = find_pd(p, name);

	return pd ? pd->pd : NULL;
}

static struct ibv_mr *dm_mr_import(struct rdmad_profile *p,
				   struct client_dm_mr *mr)
{
	if (mr->mr)
		return mr->mr;
	errno = 0;
	mr->mr = ibv_import_mr(p->pd[mr->pd].pd, mr->handle);
	if (!mr->mr) {
		errno = -client_set_error(errno ? errno : EIO,
					  "cannot import mr '%s' (handle %u) "
					  "over device memory: %s",
					  mr->name, mr->handle,
					  strerror(errno ? errno : EIO));
		return NULL;
	}
	if (mr->mr->rkey != mr->rkey || mr->mr->length != mr->length) {
		ibv_unimport_mr(mr->mr);
		mr->mr = NULL;
		errno = -client_set_error(EPROTO,
					  "mr '%s' (handle %u) imports with "
					  "another rkey or length than "
					  "announced",
					  mr->name, mr->handle);
		return NULL;
	}
	return mr->mr;
}

static struct ibv_mr *imr_register(struct rdmad_profile *p,
				   struct client_imr *mr)
{
	if (mr->mr)
		return mr->mr;
	errno = 0;
	mr->mr = ibv_reg_mr(p->pd[mr->pd].pd, NULL, SIZE_MAX,
			    mr->access | IBV_ACCESS_ON_DEMAND);
	if (!mr->mr)
		errno = -client_set_error(errno ? errno : EIO,
					  "cannot register implicit mr '%s' "
					  "(on-demand paging over the whole "
					  "address space): %s",
					  mr->name,
					  strerror(errno ? errno : EIO));
	return mr->mr;
}

struct ibv_mr *rdmad_mr(struct rdmad_profile *p, const char *name)
{
	struct client_mr *mr;

	/* Over device memory: imported when first asked for. */
	for (size_t i = 0; p && name && i < p->n_dm_mr; i++)
		if (streq(p->dm_mr[i].name, name))
			return dm_mr_import(p, &p->dm_mr[i]);
	/* Implicit: registered here, over this process's address space. */
	for (size_t i = 0; p && name && i < p->n_imr; i++)
		if (streq(p->imr[i].name, name))
			return imr_register(p, &p->imr[i]);
	mr = find_mr(p, name);
	return mr ? mr->mr : NULL;
}

struct ibv_dm *rdmad_dm(struct rdmad_profile *p, const char *name)
{
	struct client_dm *d = NULL;

	for (size_t i = 0; p && name && i < p->n_dm; i++)
		if (streq(p->dm[i].name, name))
			d = &p->dm[i];
	if (!d) {
		errno = -client_set_error(
			ENOENT,
			"profile '%s' has no ready dm '%s'%s", p ? p->name : "NULL",
			name ? name : "NULL",
			p && p->mode == RDMAD_MODE_LOCAL
				? " in local mode (device memory is the "
				  "daemon's context's: attach in shared mode)"
				: "");
		return NULL;
	}
	if (d->dm)
		return d->dm;
	errno = 0;
	d->dm = ibv_import_dm(p->ctx, d->handle);
	if (!d->dm)
		errno = -client_set_error(errno ? errno : EIO,
					  "cannot import dm '%s' (handle %u): "
					  "%s",
					  name, d->handle,
					  strerror(errno ? errno : EIO));
	return d->dm;
}

const char *rdmad_pd_name(struct rdmad_profile *p, size_t i)
{
	return p && i < p->n_pd ? p->pd[i].name : NULL;
}

const char *rdmad_mr_name(struct rdmad_profile *p, size_t i)
{
	return p && i < p->n_mr ? p->mr[i].name : NULL;
}

void *rdmad_mr_map(struct rdmad_profile *p, const char *name, size_t *len)
{
	struct client_mr *mr = find_mr(p, name);

	if (!mr)
		return NULL;
	if (len)
		*len = mr->length;
	return mr_addr(p, mr);
}

uint64_t rdmad_mr_iova(struct rdmad_profile *p, const char *name)
{
	struct client_mr *mr = find_mr(p, name);

	return mr ? mr->iova : 0;
}

uint32_t rdmad_mr_rkey(struct rdmad_profile *p, const char *name)
{
	struct client_mr *mr = find_mr(p, name);

	return mr ? mr->rkey : 0;
}

static struct client_num *find_num(struct rdmad_profile *p, const char *kind,
				   const char *name)
{
	struct client_num *list = NULL;
	size_t n = 0;

	if (!p || !name) {
		errno = -client_set_error(EINVAL, "no profile or no name");
		return NULL;
	}
	list = streq(kind, "qp") ? p->qp : p->srq;
	n = streq(kind, "qp") ? p->n_qp : p->n_srq;
	for (size_t i = 0; i < n; i++)
		if (streq(list[i].name, name))
			return &list[i];
	errno = -client_set_error(ENOENT, "profile '%s' has no ready %s '%s'",
				  p->name, kind, name);
	return NULL;
}

uint32_t rdmad_qp_num(struct rdmad_profile *p, const char *name)
{
	struct client_num *q = find_num(p, "qp", name);

	return q ? q->num : 0;
}

uint32_t rdmad_srq_num(struct rdmad_profile *p, const char *name)
{
	struct client_num *q = find_num(p, "srq", name);

	if (q && !q->has_num) {
		errno = -client_set_error(EINVAL,
					  "srq '%s' is not an XRC SRQ: it has "
					  "no srq_num",
					  name);
		return 0;
	}
	return q ? q->num : 0;
}

struct ibv_qp *rdmad_open_qp(struct rdmad_profile *p, const char *name)
{
	struct client_num *q = find_num(p, "qp", name);
	struct ibv_qp_open_attr attr = { .qp_type = IBV_QPT_XRC_RECV };
	struct ibv_xrcd *xrcd;
	struct ibv_qp *qp;

	if (!q)
		return NULL;
	if (!q->xrc || !q->xrcd) {
		errno = -client_set_error(EINVAL,
					  "qp '%s' is not an XRC target QP "
					  "(xrc_recv): only those can be "
					  "opened",
					  name);
		return NULL;
	}
	xrcd = rdmad_xrcd(p, q->xrcd);
	if (!xrcd)
		return NULL;
	attr.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			 IBV_QP_OPEN_ATTR_TYPE;
	attr.qp_num = q->num;
	attr.xrcd = xrcd;
	qp = ibv_open_qp(p->ctx, &attr);
	if (!qp)
		errno = -client_set_error(errno, "ibv_open_qp '%s' (qpn %u): %s",
					  name, q->num, strerror(errno));
	return qp;
}

struct ibv_xrcd *rdmad_xrcd(struct rdmad_profile *p, const char *name)
{
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.oflags = 0, /* the daemon's domain: open, never create */
	};
	struct client_xrcd *x = NULL;

	for (size_t i = 0; p && name && i < p->n_xrcd; i++)
		if (streq(p->xrcd[i].name, name))
			x = &p->xrcd[i];
	if (!x) {
		errno = -client_set_error(ENOENT,
					  "profile '%s' shares no xrcd '%s'",
					  p ? p->name : "NULL",
					  name ? name : "NULL");
		return NULL;
	}
	if (x->xrcd)
		return x->xrcd;
	/* The same inode: the same XRC domain as the daemon's. */
	attr.fd = x->fd;
	x->xrcd = ibv_open_xrcd(p->ctx, &attr);
	if (!x->xrcd)
		errno = -client_set_error(errno, "ibv_open_xrcd '%s': %s", name,
					  strerror(errno));
	return x->xrcd;
}

/* ---- control requests ---- */

int rdmad_request(struct rdmad *c, const char *method, const char *path,
		  const char *body_json, int *status, char **reply_json)
{
	struct proto_msg req, ans;
	json_t *doc, *body = NULL;
	json_error_t jerr;
	char *text = NULL;
	json_int_t st;
	int r;

	if (!c || !method || !*method || !path || *path != '/')
		return client_set_error(EINVAL, "rdmad_request: no connection, "
						"method or path (/v1/...)");
	if (body_json) {
		body = json_loads(body_json, JSON_REJECT_DUPLICATES, &jerr);
		if (!json_is_object(body)) {
			json_decref(body);
			return client_set_error(EINVAL,
						"rdmad_request: the body is "
						"not a JSON object%s%s",
						body ? "" : ": ",
						body ? "" : jerr.text);
		}
	}
	doc = json_pack("{s:s, s:s}", "method", method, "path", path);
	if (doc && body && json_object_set_new(doc, "body", body) < 0) {
		json_decref(doc);
		doc = NULL;
	} else if (!doc) {
		json_decref(body);
	}
	r = request_msg(&req, PROTO_REQUEST, doc);
	if (r < 0)
		return r;
	r = exchange(c, &req, CLIENT_TIMEOUT_MS, &ans);
	proto_msg_clear(&req);
	if (r < 0)
		return r;
	st = json_integer_value(json_object_get(ans.payload, "status"));
	if (st < 100 || st > 599) {
		proto_msg_clear(&ans);
		return client_set_error(EPROTO,
					"rdmad's REPLY to %s %s has no status",
					method, path);
	}
	if (reply_json) {
		json_t *b = json_object_get(ans.payload, "body");

		text = b ? json_dumps(b, JSON_ENCODE_ANY | JSON_COMPACT)
			 : strdup("null");
		if (!text) {
			proto_msg_clear(&ans);
			return client_set_error(ENOMEM, "out of memory");
		}
		*reply_json = text;
	}
	if (status)
		*status = (int)st;
	proto_msg_clear(&ans);
	return 0;
}

int rdmad_subscribe(struct rdmad *c)
{
	_cleanup_free_ char *body = NULL;
	int status, r;

	if (!c)
		return client_set_error(EINVAL, "rdmad_subscribe: no connection");
	r = rdmad_request(c, "GET", "/v1/events", NULL, &status, &body);
	if (r < 0)
		return r;
	if (status == 409)
		return client_set_error(EEXIST, "subscribed already");
	if (status != 200)
		return client_set_error(EPROTO, "rdmad refused the "
					"subscription (status %d): %s",
					status, body);
	return 0;
}

const char *rdmad_event_json(struct rdmad *c)
{
	return c ? c->delivered_text : NULL;
}
