// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <grp.h>
#include <time.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <uthash.h>

#include "api.h"
#include "budget.h"
#include "control.h"
#include "events.h"
#include "log.h"
#include "utf8.h"
#include "manager.h"
#include "objects.h"
#include "proto.h"
#include "sysd.h"

/* One object a session holds: by incarnation, since a reload may put
 * another object under the same name. */
struct lease {
	enum obj_kind kind;
	char *name;
	uint64_t serial;
};

struct attachment {
	uint32_t id;
	char *profile;
	bool shared;
	struct lease *leases;
	size_t n_leases;
	json_t *report; /* local mode: the client's keys */
};

/* An ATTACH that waits for its profile to be ready ("wait_ms"). */
struct waiter {
	struct waiter *next;
	struct session *s;
	uint32_t id;
	json_t *req;
	sd_event_source *timer; /* NULL: waits as long as it takes */
};

#define CONTROL_MAX_WAITS_PER_SESSION 16

/*
 * A REPLY rendered once, for a document that changes only when the
 * engine says so (api_cacheable): later REQUESTs for it get the same
 * bytes, the header's id changed (what http.c's cache does for REST).
 */
struct cached_reply {
	char *path;
	uint64_t generation;
	uint8_t *frame;
	size_t len;
	UT_hash_handle hh;
	/* The payload of the last REQUEST answered with it: the same bytes
	 * again are the same request, answered without decoding them. */
	uint8_t *request;
	size_t request_len;
	UT_hash_handle hh_request;
};

/* Profiles come and go: a bound, not an eviction policy. */
#define CONTROL_MAX_CACHED 64

/* A REQUEST whose answer comes later (api.h: POST /v1/reload). */
struct later {
	struct api_later later;
	struct later *next;
	struct session *s;
	uint32_t id;
};

struct session {
	struct control *c;
	struct session *next;
	unsigned int id;
	unsigned int waits;
	int fd;
	/* A new session's own source, while its first messages go first
	 * (boost); then NULL, and fd is in the control's epoll set. */
	sd_event_source *io;
	sd_event_source *hello_timer; /* until HELLO is answered */
	uint64_t last_active;	      /* CLOCK_MONOTONIC usec */
	unsigned int boost;	      /* first messages, served first */
	struct ucred cred;
	gid_t *groups; /* supplementary, at connect time */
	size_t n_groups;
	bool admin;
	bool welcomed;
	struct attachment *att;
	size_t n_att;
	struct subscription *sub; /* REQUEST GET /v1/events */
	struct later *laters;	  /* REQUESTs answered later */
};

/*
 * A session's subscription to the event stream: each event goes out as
 * an EVENT carrying the subscribing REQUEST's id. What the socket does
 * not take at once waits in a bounded queue, sent as the socket drains
 * (out, on a dup of the session's fd: the fd itself is in an epoll set
 * already); a session that lets the queue fill is dropped from the
 * stream with a last "overflow" event.
 */
struct subscription {
	struct session *s;
	uint32_t id;
	int out_fd;
	sd_event_source *out;
	struct events_queue q;
};

static const double attach_bucket_le[SESSION_ATTACH_BUCKETS] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1,
};

struct control {
	struct manager *m;
	struct waiter *waiters;
	unsigned long long attaches, attach_failures;
	unsigned long long attach_buckets[SESSION_ATTACH_BUCKETS];
	double attach_seconds;
	int fd;
	bool passed; /* by systemd (rdmad.socket) */
	char *path;
	sd_event_source *io;
	struct accept_pause pause;
	struct front_caps caps;
	unsigned int n_sessions;
	struct uid_count *uids; /* sessions per uid */
	unsigned long long refused, evicted, timed_out;
	/* The sessions at work, in an epoll set of their own: one wake-up
	 * of the loop serves every one that has something to read
	 * (on_sessions). */
	int ep;
	sd_event_source *sessions_io;
	struct epoll_event *ready; /* while on_sessions serves them */
	int n_ready;
	uint8_t *frame; /* PROTO_RECV_BYTES: every message is read here */
	struct cached_reply *cache;
	struct cached_reply *cache_by_request; /* by their request's bytes */
	struct attach_cache *attach_cache;	/* by "profile/mode" */
	struct session *sessions;
	unsigned int next_session, next_attachment;
};

struct uid_count {
	uid_t uid;
	unsigned int n;
	UT_hash_handle hh;
};

/* Who goes first in the loop: new connections, then the first few
 * messages of a new session (HELLO and the first requests: a new client
 * is served however busy the others are), then the sessions at work,
 * in turn. */
#define SESSION_BOOST_MESSAGES 4
#define PRIO_ACCEPT (SD_EVENT_PRIORITY_IMPORTANT)
#define PRIO_NEW_SESSION (SD_EVENT_PRIORITY_NORMAL - 10)
#define PRIO_SESSION (SD_EVENT_PRIORITY_NORMAL)

/* ---- who the peer is ---- */

/* The peer's groups, from the kernel (SO_PEERGROUPS): what the process
 * holds, with no directory lookup. */
static int peer_groups(struct session *s)
{
	socklen_t len = 64 * sizeof(gid_t);

	for (;;) {
		gid_t *g = realloc(s->groups, len ? len : sizeof(gid_t));

		if (!g)
			return -ENOMEM;
		s->groups = g;
		if (getsockopt(s->fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0)
			break;
		if (errno != ERANGE)
			return -errno;
	}
	s->n_groups = len / sizeof(gid_t);
	return 0;
}

static bool peer_in_group(const struct session *s, gid_t gid)
{
	if (s->cred.gid == gid)
		return true;
	for (size_t i = 0; i < s->n_groups; i++)
		if (s->groups[i] == gid)
			return true;
	return false;
}

static bool allowed(const struct conf_profile *p, const struct session *s)
{
	if (s->cred.uid == 0)
		return true;
	for (size_t i = 0; i < p->n_admit_uids; i++)
		if (p->admit_uids[i] == s->cred.uid)
			return true;
	for (size_t i = 0; i < p->n_admit_gids; i++)
		if (peer_in_group(s, p->admit_gids[i]))
			return true;
	return false;
}

/* ---- sending ---- */

static int send_json(struct session *s, uint16_t type, uint32_t id,
		     json_t *payload, const int *fds, size_t n_fds)
{
	struct proto_msg m;
	int r;

	proto_msg_init(&m);
	m.type = type;
	m.id = id;
	m.payload = payload;
	for (size_t i = 0; i < n_fds; i++)
		m.fds[i] = fds[i];
	m.n_fds = n_fds;
	r = proto_send(s->fd, &m);
	json_decref(payload);
	return r;
}

/* A payload already in JSON text (a cached document, a fixed answer),
 * with n_fds fds: framed as proto_send() would, without jansson. */
static int send_text_fds(struct session *s, uint16_t type, uint32_t id,
			 const void *payload, size_t len, const int *fds,
			 size_t n_fds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
	} control;
	uint8_t hdr[PROTO_HDR_SIZE];
	struct proto_hdr h = {
		.magic = PROTO_MAGIC,
		.version = PROTO_VERSION,
		.type = type,
		.n_fds = (uint16_t)n_fds,
		.id = id,
		.length = (uint32_t)len,
	};
	struct iovec iov[2] = {
		{ .iov_base = hdr, .iov_len = sizeof(hdr) },
		{ .iov_base = (void *)payload, .iov_len = len },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	ssize_t n;

	if (n_fds > PROTO_MAX_FDS)
		return -EINVAL;
	if (n_fds) {
		struct cmsghdr *cm;

		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
	}
	proto_hdr_pack(&h, hdr);
	do
		n = sendmsg(s->fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : 0;
}

static int send_text(struct session *s, uint16_t type, uint32_t id,
		     const void *payload, size_t len)
{
	return send_text_fds(s, type, id, payload, len, NULL, 0);
}

static int send_error(struct session *s, uint32_t id, const char *code,
		      const char *fmt, ...) _printf_(4, 5);
static int send_error(struct session *s, uint32_t id, const char *code,
		      const char *fmt, ...)
{
	_cleanup_free_ char *clean = NULL;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Names are quoted as the client sent them: never cut inside a
	 * character, so that the message stays UTF-8 (JSON). */
	utf8_trim_cut(msg);
	if (!utf8_valid(msg))
		clean = utf8_sanitize(msg);
	return send_json(s, PROTO_ERROR, id,
			 json_pack("{s:{s:s, s:s}}", "error", "code", code,
				   "message", clean ? clean : msg),
			 NULL, 0);
}

/* ---- leases ---- */

static void release(struct control *c, struct attachment *a)
{
	for (size_t i = 0; i < a->n_leases; i++) {
		struct lease *l = &a->leases[i];

		manager_release(c->m, a->profile, l->kind, l->name, l->serial);
		free(l->name);
	}
	free(a->leases);
	free(a->profile);
	json_decref(a->report);
	*a = (struct attachment){ 0 };
}

static int lease(struct attachment *a, struct object *o)
{
	struct lease *l = realloc(a->leases, (a->n_leases + 1) * sizeof(*l));

	if (!l)
		return -ENOMEM;
	a->leases = l;
	l[a->n_leases] = (struct lease){ o->kind, strdup(object_name(o)), o->serial };
	if (!l[a->n_leases].name)
		return -ENOMEM;
	a->n_leases++;
	o->leases++;
	return 0;
}

/* ---- the event stream ---- */

/* session_attach / session_detach on the stream: the fields of
 * GET /v1/sessions. */
static void publish_session(struct session *s, const struct attachment *a,
			    const char *what, const char *reason)
{
	json_t *j = json_pack("{s:i, s:i, s:i, s:s, s:i, s:s}", "session",
			      (int)s->id, "pid", (int)s->cred.pid, "uid",
			      (int)s->cred.uid, "profile", a->profile,
			      "attachment", (int)a->id, "mode",
			      a->shared ? "shared" : "local");

	if (j && reason)
		json_object_set_new(j, "reason", json_string(reason));
	events_publish(s->c->m->events, what, j);
}

static void subscription_free(struct subscription *sub);

static int sub_send(struct subscription *sub, const json_t *ev)
{
	return send_json(sub->s, PROTO_EVENT, sub->id, json_incref((json_t *)ev),
			 NULL, 0);
}

/* Send what waits, as far as the socket takes it; once an overflowed
 * queue is empty, say so and end the subscription. */
static void sub_flush(struct subscription *sub)
{
	json_t *ev;
	int r = 0;

	while ((ev = events_queue_pop(&sub->q))) {
		r = sub_send(sub, ev);
		if (r == -EAGAIN) {
			/* Back at the head: nothing is lost or reordered. */
			sub->q.head = (sub->q.head + sub->q.cap - 1) % sub->q.cap;
			sub->q.ev[sub->q.head] = ev;
			sub->q.n++;
			break;
		}
		json_decref(ev);
		if (r < 0)
			break;
	}
	if (r != -EAGAIN && sub->q.overflowed && !sub->q.n) {
		json_t *last = events_queue_overflow(&sub->q);

		log_notice("session %u (pid %d): too slow for the event "
			   "stream, unsubscribed",
			   sub->s->id, (int)sub->s->cred.pid);
		if (last)
			send_json(sub->s, PROTO_EVENT, sub->id, last, NULL, 0);
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

static void on_stream_event(void *ud, const json_t *ev)
{
	struct subscription *sub = ud;
	int r;

	if (!sub->q.n && !sub->q.overflowed) {
		r = sub_send(sub, ev);
		if (r != -EAGAIN)
			return; /* sent, or the session is ending */
	}
	if (!events_queue_push(&sub->q, ev))
		log_debug("session %u: event stream queue full",
			  sub->s->id);
	sd_event_source_set_enabled(sub->out, SD_EVENT_ON);
}

static void subscription_free(struct subscription *sub)
{
	if (!sub)
		return;
	events_unsubscribe(sub->s->c->m->events, on_stream_event, sub);
	sd_event_source_disable_unref(sub->out);
	closep(&sub->out_fd);
	events_queue_clear(&sub->q);
	sub->s->sub = NULL;
	free(sub);
}

static int subscribe(struct session *s, uint32_t id)
{
	struct control *c = s->c;
	struct subscription *sub;
	int r;

	if (s->sub)
		return send_json(s, PROTO_REPLY, id,
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
	sub->out_fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 3);
	r = sub->out_fd < 0 ? -errno : 0;
	if (r == 0)
		r = events_queue_init(&sub->q, EVENTS_QUEUE_DEFAULT);
	if (r == 0)
		r = sd_event_add_io(c->m->event, &sub->out, sub->out_fd,
				    EPOLLOUT, on_sub_writable, sub);
	if (r == 0)
		r = sd_event_source_set_enabled(sub->out, SD_EVENT_OFF);
	if (r == 0)
		r = events_subscribe(c->m->events, on_stream_event, sub);
	if (r < 0) {
		sd_event_source_disable_unref(sub->out);
		closep(&sub->out_fd);
		events_queue_clear(&sub->q);
		free(sub);
		return send_json(s, PROTO_REPLY, id,
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
	return send_json(s, PROTO_REPLY, id,
			 json_pack("{s:i, s:{s:I}}", "status", 200, "body",
				   "last_seq",
				   (json_int_t)events_last_seq(c->m->events)),
			 NULL, 0);
}

/* ---- ATTACH ---- */

static int attach_one(struct session *s, uint32_t id, json_t *req);

/* Whether the client reaches o (a ready QP or SRQ) by number, so that it
 * must not go under it (leased): an XRC target QP (ibv_open_qp() in its
 * XRC domain) or an XRC SRQ. */
static bool number_leased(const struct object *o)
{
	if (o->kind == OBJ_QP)
		return ((const struct conf_qp *)o->conf)->type == QPK_XRC_RECV;
	return ((const struct conf_srq *)o->conf)->type == SRQK_XRC;
}

/* A ready QP or SRQ in an ATTACHED answer, appended to list: its name,
 * type and number (qp_num; srq_num for an XRC SRQ, which senders name). */
static void attach_number(const struct object *o, json_t *list)
{
	json_t *j;
	uint32_t num;

	if (o->kind == OBJ_QP) {
		const struct conf_qp *c = o->conf;

		j = json_pack("{s:s, s:s, s:I}", "name", object_name(o), "type",
			      qp_kind_name(c->type), "qp_num",
			      (json_int_t)o->u.qp.qp->qp_num);
		if (j && c->xrcd)
			json_object_set_new(j, "xrcd", json_string(c->xrcd));
		json_array_append_new(list, j);
		return;
	}
	j = json_pack("{s:s, s:s}", "name", object_name(o), "type",
		      srq_kind_name(((const struct conf_srq *)o->conf)->type));
	if (j && !ibv_get_srq_num(o->u.srq, &num))
		json_object_set_new(j, "srq_num", json_integer(num));
	json_array_append_new(list, j);
}

static int attach(struct session *s, uint32_t id, json_t *req);
static void session_free(struct session *s);

static int send_not_ready(struct session *s, uint32_t id,
			  const struct profile *p, const char *why)
{
	char progress[96] = "";

	if (p->state == PROFILE_CREATING)
		snprintf(progress, sizeof(progress),
			 " (%zu of %zu objects, %llu of %llu bytes)",
			 p->progress.objects, p->progress.objects_total,
			 (unsigned long long)p->progress.bytes,
			 (unsigned long long)p->progress.bytes_total);
	return send_error(s, id, "not_ready", "%sprofile '%s' is %s%s%s%s",
			  why ? why : "", p->conf->name,
			  profile_state_name(p->state), progress,
			  p->reason ? ": " : "", p->reason ? p->reason : "");
}

static void waiter_free(struct waiter *w)
{
	struct control *c = w->s->c;

	for (struct waiter **pp = &c->waiters; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	w->s->waits--;
	sd_event_source_disable_unref(w->timer);
	json_decref(w->req);
	free(w);
}

static int on_wait_timeout(sd_event_source *es, uint64_t usec, void *ud)
{
	struct waiter *w = ud;
	struct session *s = w->s;
	const char *name = json_string_value(json_object_get(w->req, "profile"));
	struct profile *p = manager_profile(s->c->m, name);
	uint32_t id = w->id;
	char why[64];

	(void)es;
	(void)usec;
	snprintf(why, sizeof(why), "timed out after %lld ms: ",
		 (long long)json_integer_value(json_object_get(w->req, "wait_ms")));
	waiter_free(w);
	s->c->attach_failures++;
	if (!p)
		send_error(s, id, "not_found", "no profile '%s'", name);
	else
		send_not_ready(s, id, p, why);
	return 0;
}

/* Answer the ATTACH when the profile is ready, fails, or wait_ms pass. */
static int wait_ready(struct session *s, uint32_t id, json_t *req,
		      json_int_t wait_ms)
{
	struct control *c = s->c;
	struct waiter *w;
	int r;

	if (s->waits >= CONTROL_MAX_WAITS_PER_SESSION)
		return send_error(s, id, "too_many_requests",
				  "a session may wait for %d attaches at once",
				  CONTROL_MAX_WAITS_PER_SESSION);
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct waiter){ .next = c->waiters, .s = s, .id = id,
			      .req = json_incref(req) };
	c->waiters = w;
	s->waits++;
	if (wait_ms > 0) {
		r = sd_event_add_time_relative(c->m->event, &w->timer,
					       CLOCK_MONOTONIC,
					       (uint64_t)wait_ms * 1000, 1000,
					       on_wait_timeout, w);
		if (r < 0) {
			waiter_free(w);
			return r;
		}
	}
	return 0;
}

/*
 * Tell every session attached to ev's profile that its device went
 * (MANAGER_DEVICE_LOST) or a reload removes it (MANAGER_PROFILE_REMOVED):
 * one EVENT per attachment, so that clients let go of what they opened
 * on the device themselves (rxe's removal waits for every context on
 * it) and of their leases. The attachments stay until DETACH. A client
 * that does not read is not waited for: an EVENT that does not fit in
 * its socket is dropped.
 */
static void sessions_notify(struct control *c, const struct manager_event *ev)
{
	const char *name = ev->profile->conf->name;
	bool lost = ev->kind == MANAGER_DEVICE_LOST;

	for (struct session *s = c->sessions; s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			const struct attachment *a = &s->att[i];
			json_t *doc;
			int r;

			if (!streq(a->profile, name))
				continue;
			doc = json_pack("{s:s, s:i, s:s}", "event",
					lost ? "device_removed"
					     : "profile_removed",
					"attachment", (int)a->id, "profile",
					name);
			if (doc && lost)
				json_object_set_new(doc, "device",
						    json_string(ev->ibdev));
			if (doc && ev->reason)
				json_object_set_new(doc, "reason",
						    json_string(ev->reason));
			r = send_json(s, PROTO_EVENT, 0, doc, NULL, 0);
			if (r < 0)
				log_warn(r,
					 "session %u (pid %d): cannot tell it "
					 "profile %s %s, ignoring",
					 s->id, (int)s->cred.pid, name,
					 lost ? "lost its device"
					      : "is removed");
			else
				log_info("session %u (pid %d): told it "
					 "profile %s %s",
					 s->id, (int)s->cred.pid, name,
					 lost ? "lost its device"
					      : "is removed");
		}
}

static bool holds(const struct attachment *a, const char *kind,
		  const char *name)
{
	for (size_t i = 0; i < a->n_leases; i++)
		if (streq(obj_kind_name(a->leases[i].kind), kind) &&
		    streq(a->leases[i].name, name))
			return true;
	return false;
}

/*
 * A reload removed or recreated an object (change ch of its result) that
 * attachments hold: it drains (kept for them) until the last lets go.
 * Each attachment holding it hears it (EVENT object_draining), so that
 * its client can detach and attach again for what the configuration
 * says now, and the old object goes.
 */
static void on_draining(struct control *c, const json_t *ch)
{
	const char *profile = json_string_value(json_object_get(ch,
								 "profile"));
	const char *kind = json_string_value(json_object_get(ch, "kind"));
	const char *name = json_string_value(json_object_get(ch, "name"));
	const char *action = json_string_value(json_object_get(ch, "action"));

	if (!profile || !kind || !name || !action ||
	    (!streq(action, "recreate") && !streq(action, "remove")))
		return;
	for (struct session *s = c->sessions; s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			const struct attachment *a = &s->att[i];
			char reason[160];

			if (!streq(a->profile, profile) || !holds(a, kind, name))
				continue;
			snprintf(reason, sizeof(reason),
				 "%s '%s' was removed or changed by a reload: "
				 "it stays for you until you detach",
				 kind, name);
			send_json(s, PROTO_EVENT, 0,
				  json_pack("{s:s, s:i, s:s, s:s, s:s, s:s}",
					    "event", "object_draining",
					    "attachment", (int)a->id,
					    "profile", profile, "kind", kind,
					    "name", name, "reason", reason),
				  NULL, 0);
		}
}

/*
 * A port of a profile's device went down or came up: every session
 * attached to it hears it (one EVENT per attachment, as for
 * device_removed), so that a client can stop and resume its traffic.
 * A reload's result: what it removes or recreates that attachments hold
 * drains (on_draining()).
 */
static void on_session_event(void *ud, const json_t *ev)
{
	struct control *c = ud;
	const char *what = json_string_value(json_object_get(ev, "event"));
	const char *name = json_string_value(json_object_get(ev, "profile"));
	const json_t *ch;
	size_t k;

	if (what && streq(what, "reload")) {
		json_array_foreach(json_object_get(ev, "changes"), k, ch)
			on_draining(c, ch);
		return;
	}
	if (!what || !name ||
	    (!streq(what, "port_error") && !streq(what, "port_active")))
		return;
	for (struct session *s = c->sessions; s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			json_t *doc;

			if (!streq(s->att[i].profile, name))
				continue;
			doc = json_pack("{s:s, s:i, s:s, s:O?, s:O?, s:O?, s:O?}",
					"event", what, "attachment",
					(int)s->att[i].id, "profile", name,
					"device", json_object_get(ev, "device"),
					"port", json_object_get(ev, "port"),
					"state", json_object_get(ev, "state"),
					"state_name",
					json_object_get(ev, "state_name"));
			/* Dropped when the socket is full, as the others. */
			send_json(s, PROTO_EVENT, 0, doc, NULL, 0);
		}
}

/* A profile changed: answer the attaches that waited for it. */
static void on_manager_event(void *ud, const struct manager_event *ev)
{
	struct control *c = ud;
	struct waiter *w, *next;

	if (ev->kind == MANAGER_DEVICE_LOST ||
	    ev->kind == MANAGER_PROFILE_REMOVED) {
		sessions_notify(c, ev);
		return;
	}
	if (ev->kind == MANAGER_PROGRESS)
		return;
	for (w = c->waiters; w; w = next) {
		const char *name =
			json_string_value(json_object_get(w->req, "profile"));
		struct profile *p = manager_profile(c->m, name);
		struct session *s = w->s;
		uint32_t id = w->id;
		json_t *req;

		next = w->next;
		if (p && p->state != PROFILE_READY &&
		    p->state != PROFILE_DEGRADED && p->state != PROFILE_FAILED)
			continue;
		req = json_incref(w->req);
		waiter_free(w);
		/* Answered in full, as if it had come now. */
		if (attach(s, id, req) < 0) {
			json_decref(req);
			session_free(s);
			/* The list may have lost more than w. */
			next = c->waiters;
			continue;
		}
		json_decref(req);
	}
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Attach, timed for the histogram of /metrics. */
static int attach(struct session *s, uint32_t id, json_t *req)
{
	struct control *c = s->c;
	size_t before = s->n_att;
	unsigned int waits = s->waits;
	double t0 = now(), dt;
	int r = attach_one(s, id, req);

	if (s->waits > waits)
		return r; /* answered later */
	if (s->n_att == before) {
		c->attach_failures++;
		return r;
	}
	dt = now() - t0;
	c->attaches++;
	c->attach_seconds += dt;
	for (size_t b = 0; b < SESSION_ATTACH_BUCKETS; b++)
		if (dt <= attach_bucket_le[b]) {
			c->attach_buckets[b]++;
			break;
		}
	return r;
}

/*
 * What ATTACHED says of a profile in one mode, but for the attachment's
 * id, as text: rendered once and sent again while nothing it says can
 * have changed (attach_signature()). Building the document was most of
 * an attach in the daemon, and attaching changes nothing in it.
 */
struct attach_cache {
	UT_hash_handle hh;
	uint64_t sig;
	char *text; /* the object without "attachment": "{...}" */
	size_t len;
	char key[]; /* "profile/mode" */
};

static void attach_cache_free(struct control *c)
{
	struct attach_cache *e, *tmp;

	HASH_ITER(hh, c->attach_cache, e, tmp) {
		HASH_DEL(c->attach_cache, e);
		free(e->text);
		free(e);
	}
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

/* Everything ATTACHED in this mode depends on: the profile's context,
 * configuration and port, and each object's state, incarnation (serial)
 * and declaration (a reload gives every object a new one). */
static uint64_t attach_signature(const struct profile *p, bool shared)
{
	uint64_t h = mix(shared, (uintptr_t)p->conf);

	h = mix(h, (uintptr_t)p->ctx);
	h = mix(h, (uint64_t)(int64_t)p->import_err);
	h = mix(h, (uint64_t)(int64_t)p->gid_index);
	h = mix(h, p->dev->port);
	for (const char *d = p->ibdev; *d; d++)
		h = mix(h, (unsigned char)*d);
	for (size_t i = 0; i < p->n_objects; i++) {
		const struct object *o = &p->objects[i];

		h = mix(h, (uint64_t)o->state << 56 ^ o->serial);
		h = mix(h, (uintptr_t)o->conf);
	}
	return h;
}

static int attach_one(struct session *s, uint32_t id, json_t *req)
{
	struct control *c = s->c;
	const char *name = json_string_value(json_object_get(req, "profile"));
	const char *mode = json_string_value(json_object_get(req, "mode"));
	struct profile *p = name ? manager_profile(c->m, name) : NULL;
	int fds[PROTO_MAX_FDS];
	size_t n_fds = 0;
	struct attachment *att, a = { 0 };
	json_t *doc = NULL, *mem = NULL, *pds = NULL, *mrs = NULL,
	       *xrcds = NULL, *qps = NULL, *srqs = NULL, *dms = NULL,
	       *dm_mrs = NULL, *imrs = NULL;
	int opened[PROTO_MAX_FDS]; /* fds we opened for this message */
	size_t n_opened = 0;
	struct attach_cache *cached;
	char key[256], head[64];
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	uint64_t sig;
	bool shared, render;
	int r;

	if (!name)
		return send_error(s, id, "bad_request",
				  "ATTACH needs \"profile\"");
	if (!p)
		return send_error(s, id, "not_found", "no profile '%s'", name);
	if (!allowed(p->conf, s))
		return send_error(s, id, "forbidden",
				  "uid %u may not attach to profile '%s'",
				  (unsigned int)s->cred.uid, name);
	if (!p->ctx || (p->state != PROFILE_READY &&
			p->state != PROFILE_DEGRADED)) {
		json_t *w = json_object_get(req, "wait_ms");

		if (w && (!json_is_integer(w) || json_integer_value(w) < -1))
			return send_error(s, id, "bad_request",
					  "\"wait_ms\" is a number of "
					  "milliseconds, or -1 for no limit");
		if (json_integer_value(w) && p->state != PROFILE_FAILED)
			return wait_ready(s, id, req, json_integer_value(w));
		return send_not_ready(s, id, p, NULL);
	}
	if (!mode)
		mode = "auto";
	if (streq(mode, "auto"))
		shared = p->import_err == 0;
	else if (streq(mode, "shared") || streq(mode, "local"))
		shared = streq(mode, "shared");
	else
		return send_error(s, id, "bad_request",
				  "mode \"%s\" is not auto, shared or local",
				  mode);
	if (shared && p->import_err)
		return send_error(s, id, "not_supported",
				  "%s cannot share its context (%s): attach "
				  "in local or auto mode",
				  p->ibdev, strerror(-p->import_err));

	snprintf(key, sizeof(key), "%s/%s", name, shared ? "shared" : "local");
	HASH_FIND_STR(c->attach_cache, key, cached);
	sig = attach_signature(p, shared);
	render = !cached || cached->sig != sig;
	if (render) {
		doc = json_pack("{s:s, s:s, s:s, s:i, s:i, s:b}", "profile",
				name, "mode", shared ? "shared" : "local",
				"ibdev", p->ibdev, "port", p->dev->port,
				"gid_index", p->gid_index, "import_capable",
				p->import_err == 0);
		mem = json_array();
		pds = json_array();
		mrs = json_array();
		xrcds = json_array();
		qps = json_array();
		srqs = json_array();
		dms = json_array();
		dm_mrs = json_array();
		imrs = json_array();
		if (!doc || !mem || !pds || !mrs || !xrcds || !qps || !srqs ||
		    !dms || !dm_mrs || !imrs) {
			r = -ENOMEM;
			goto fail;
		}
		if (p->import_err)
			json_object_set_new(
				doc, "import_error",
				json_string(errno_desc(-p->import_err)));
		if (shared)
			json_object_set_new(doc, "cmd_fd", json_integer(0));
	}
	a.id = ++c->next_attachment;
	a.shared = shared;
	a.profile = strdup(name);
	if (!a.profile) {
		r = -ENOMEM;
		goto fail;
	}
	if (shared)
		fds[n_fds++] = p->ctx->cmd_fd;
	/* The same walk renders or not: the fds' order is the document's. */
	for (size_t i = 0; i < p->n_objects; i++) {
		struct object *o = &p->objects[i];
		json_t *j;

		if (o->state != OBJ_READY)
			continue;
		if (o->kind == OBJ_MEMORY && o->u.mem.fd >= 0) {
			if (n_fds == PROTO_MAX_FDS) {
				r = -E2BIG;
				goto fail;
			}
			if (render) {
				j = object_json(o);
				json_object_set_new(
					j, "fd", json_integer((json_int_t)n_fds));
				json_array_append_new(mem, j);
			}
			fds[n_fds++] = o->u.mem.fd;
		} else if (o->kind == OBJ_XRCD &&
			   ((const struct conf_xrcd *)o->conf)->file) {
			/* Shared by inode: the client opens the same file. */
			const char *file = ((const struct conf_xrcd *)o->conf)->file;
			int xfd;

			if (n_fds == PROTO_MAX_FDS) {
				r = -E2BIG;
				goto fail;
			}
			xfd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			if (xfd < 0) {
				r = -errno;
				goto fail;
			}
			opened[n_opened++] = xfd;
			if (render)
				json_array_append_new(
					xrcds,
					json_pack("{s:s, s:s, s:i}", "name",
						  object_name(o), "file", file,
						  "fd", (int)n_fds));
			fds[n_fds++] = xfd;
		} else if (o->kind == OBJ_PD) {
			if (render)
				json_array_append_new(
					pds, json_pack("{s:s, s:i}", "name",
						       object_name(o), "handle",
						       (int)o->u.pd->handle));
		} else if (o->kind == OBJ_QP || o->kind == OBJ_SRQ) {
			/* Their numbers; only what a client reaches by
			 * number (an XRC target QP, an XRC SRQ) is leased. */
			if (render)
				attach_number(o, o->kind == OBJ_QP ? qps : srqs);
			if (!number_leased(o))
				continue;
		} else if (o->kind == OBJ_DM) {
			/* Device memory is the context's: imported in shared
			 * mode (ibv_import_dm), out of reach in local. */
			if (!shared)
				continue;
			if (render) {
				j = object_json(o);
				json_object_del(j, "leases");
				json_object_del(j, "state");
				json_array_append_new(dms, j);
			}
		} else if (o->kind == OBJ_MR &&
			   ((const struct conf_mr *)o->conf)->dm) {
			if (!shared)
				continue;
			if (render) {
				j = object_json(o);
				json_object_del(j, "leases");
				json_object_del(j, "state");
				json_array_append_new(dm_mrs, j);
			}
		} else if (o->kind == OBJ_MR &&
			   !((const struct conf_mr *)o->conf)->memory) {
			/* Implicit: the daemon's covers the daemon's memory.
			 * The client registers its own, over its own address
			 * space, on the profile's PD: nothing to lease. */
			if (render) {
				json_t *doc_mr = object_json(o);

				json_array_append_new(
					imrs,
					json_pack("{s:s, s:s, s:O}", "name",
						  object_name(o), "pd",
						  ((const struct conf_mr *)o->conf)
							  ->pd,
						  "access",
						  json_object_get(doc_mr,
								  "access")));
				json_decref(doc_mr);
			}
			continue;
		} else if (o->kind == OBJ_MR) {
			const struct conf_mr *cm = o->conf;
			struct object *m =
				profile_find(p, OBJ_MEMORY, cm->memory);

			if (!m || m->u.mem.fd < 0)
				continue; /* anonymous memory: not shareable */
			if (render) {
				j = object_json(o);
				json_object_del(j, "leases");
				json_object_del(j, "state");
				json_array_append_new(mrs, j);
			}
		} else {
			continue;
		}
		r = lease(&a, o);
		if (r < 0)
			goto fail;
	}
	profile_touch(p);
	if (render) {
		json_object_set_new(doc, "memory", mem);
		json_object_set_new(doc, "pd", pds);
		json_object_set_new(doc, "mr", mrs);
		json_object_set_new(doc, "xrcd", xrcds);
		json_object_set_new(doc, "qp", qps);
		json_object_set_new(doc, "srq", srqs);
		json_object_set_new(doc, "dm", dms);
		json_object_set_new(doc, "dm_mr", dm_mrs);
		json_object_set_new(doc, "implicit_mr", imrs);
		mem = pds = mrs = xrcds = qps = srqs = dms = dm_mrs = imrs = NULL;
		text = json_dumps(doc, JSON_COMPACT);
		json_decref(doc);
		doc = NULL;
		if (!text) {
			r = -ENOMEM;
			goto fail;
		}
		if (!cached) {
			/* Profiles gone by reloads leave theirs: a bound. */
			if (HASH_COUNT(c->attach_cache) >= CONTROL_MAX_CACHED)
				attach_cache_free(c);
			cached = calloc(1, sizeof(*cached) + strlen(key) + 1);
			if (cached) {
				strcpy(cached->key, key);
				HASH_ADD_STR(c->attach_cache, key, cached);
			}
		}
		if (cached) {
			free(cached->text);
			cached->text = TAKE_PTR(text);
			cached->len = strlen(cached->text);
			cached->sig = sig;
		}
	}

	att = realloc(s->att, (s->n_att + 1) * sizeof(*att));
	if (!att) {
		r = -ENOMEM;
		goto fail;
	}
	s->att = att;
	{
		const char *body = cached ? cached->text : text;
		size_t body_len = cached ? cached->len : strlen(text), n;
		_cleanup_free_ char *msg = NULL;

		/* "{" + "attachment":N + the rest of the object. */
		n = (size_t)snprintf(head, sizeof(head), "{\"attachment\":%u%s",
				     a.id, body_len > 2 ? "," : "");
		len = n + body_len - 1;
		msg = malloc(len);
		if (!msg) {
			r = -ENOMEM;
		} else {
			memcpy(msg, head, n);
			memcpy(msg + n, body + 1, body_len - 1);
			r = len > PROTO_MAX_PAYLOAD
				    ? -E2BIG
				    : send_text_fds(s, PROTO_ATTACHED, id, msg,
						    len, fds, n_fds);
		}
	}
	for (size_t i = 0; i < n_opened; i++)
		close(opened[i]);
	n_opened = 0;
	if (r == -ENOMEM || r == -E2BIG)
		goto fail;
	if (r < 0) {
		release(c, &a);
		return r;
	}
	s->att[s->n_att++] = a;
	publish_session(s, &s->att[s->n_att - 1], "session_attach", NULL);
	log_info("session %u (pid %d uid %u): attached to %s, %s mode", s->id,
		 (int)s->cred.pid, (unsigned int)s->cred.uid, name,
		 shared ? "shared" : "local");
	return 0;
fail:
	for (size_t i = 0; i < n_opened; i++)
		close(opened[i]);
	release(c, &a);
	json_decref(xrcds);
	json_decref(qps);
	json_decref(srqs);
	json_decref(dms);
	json_decref(dm_mrs);
	json_decref(imrs);
	json_decref(doc);
	json_decref(mem);
	json_decref(pds);
	json_decref(mrs);
	return send_error(s, id, "internal", "cannot attach: %s",
			  strerror(-r));
}

static struct attachment *find_attachment(struct session *s, json_t *req)
{
	json_int_t id = json_integer_value(json_object_get(req, "attachment"));

	for (size_t i = 0; i < s->n_att; i++)
		if (s->att[i].id == (uint32_t)id)
			return &s->att[i];
	return NULL;
}

static int detach(struct session *s, uint32_t id, json_t *req)
{
	struct attachment *a = find_attachment(s, req);
	char text[64];
	uint32_t aid;
	int n;

	if (!a)
		return send_error(s, id, "not_found", "no such attachment");
	aid = a->id;
	publish_session(s, a, "session_detach", "detached");
	release(s->c, a);
	*a = s->att[--s->n_att];
	n = snprintf(text, sizeof(text), "{\"attachment\":%u}", aid);
	return send_text(s, PROTO_DETACHED, id, text, (size_t)n);
}

static int report(struct session *s, uint32_t id, json_t *req)
{
	struct attachment *a = find_attachment(s, req);

	if (!a)
		return send_error(s, id, "not_found", "no such attachment");
	if (a->shared)
		return send_error(s, id, "bad_request",
				  "REPORT is for local mode");
	static const char ok[] = "{\"status\":200,\"body\":{}}";

	json_decref(a->report);
	a->report = json_incref(json_object_get(req, "mr"));
	return send_text(s, PROTO_REPLY, id, ok, sizeof(ok) - 1);
}

static void on_later(struct api_later *later, int status, json_t *reply)
{
	struct later *lt = container_of(later, struct later, later);
	struct session *s = lt->s;

	for (struct later **pp = &s->laters; *pp; pp = &(*pp)->next)
		if (*pp == lt) {
			*pp = lt->next;
			break;
		}
	s->waits--;
	/* A session that cannot take it sees its hangup at the next read. */
	send_json(s, PROTO_REPLY, lt->id,
		  json_pack("{s:i, s:o}", "status", status, "body", reply),
		  NULL, 0);
	free(lt);
}

static void cached_forget_request(struct control *c, struct cached_reply *e)
{
	if (!e->request)
		return;
	HASH_DELETE(hh_request, c->cache_by_request, e);
	free(e->request);
	e->request = NULL;
}

static void cached_free(struct control *c, struct cached_reply *e)
{
	cached_forget_request(c, e);
	HASH_DEL(c->cache, e);
	free(e->path);
	free(e->frame);
	free(e);
}

/* The REPLY to GET path at generation, rendered if the cache has no
 * such one. NULL when out of memory or too large for a frame. */
static struct cached_reply *cached_reply(struct session *s,
					 const struct api_request *ar,
					 uint64_t generation)
{
	struct control *c = s->c;
	struct proto_msg m;
	struct cached_reply *e = NULL;
	json_t *reply = NULL;
	uint8_t *buf;
	size_t len;
	int status, r;

	HASH_FIND_STR(c->cache, ar->path, e);
	if (e && e->generation == generation)
		return e;
	if (e)
		cached_free(c, e);
	if (HASH_COUNT(c->cache) >= CONTROL_MAX_CACHED)
		while (c->cache)
			cached_free(c, c->cache);
	status = api_handle(c->m, ar, &reply);
	proto_msg_init(&m);
	m.type = PROTO_REPLY;
	m.payload = json_pack("{s:i, s:o}", "status", status, "body", reply);
	buf = malloc(PROTO_MAX_FRAME);
	r = buf && m.payload ? proto_encode(&m, buf, PROTO_MAX_FRAME, &len)
			     : -ENOMEM;
	proto_msg_clear(&m);
	e = r < 0 ? NULL : calloc(1, sizeof(*e));
	if (!e || !(e->path = strdup(ar->path)) ||
	    !(e->frame = realloc(buf, len))) {
		if (e)
			free(e->path);
		free(e);
		free(buf);
		return NULL;
	}
	e->len = len;
	e->generation = generation;
	HASH_ADD_KEYPTR(hh, c->cache, e->path, strlen(e->path), e);
	return e;
}

/* The cached REPLY, under this REQUEST's id. */
static int send_cached(struct session *s, uint32_t id,
		       const struct cached_reply *e)
{
	struct proto_hdr h;

	proto_hdr_unpack(e->frame, &h);
	return send_text(s, h.type, id, e->frame + PROTO_HDR_SIZE,
			 e->len - PROTO_HDR_SIZE);
}

/* The REQUEST's payload bytes are what e answers: the same bytes again
 * are answered from them (answer_again). */
static void cached_remember_request(struct control *c, struct cached_reply *e,
				    const uint8_t *raw, size_t len)
{
	uint8_t *copy;

	if (!raw || (e->request && e->request_len == len &&
		     !memcmp(e->request, raw, len)))
		return;
	cached_forget_request(c, e);
	copy = malloc(len);
	if (!copy)
		return; /* then it is decoded each time */
	memcpy(copy, raw, len);
	e->request = copy;
	e->request_len = len;
	HASH_ADD_KEYPTR(hh_request, c->cache_by_request, e->request, len, e);
}

/*
 * A REQUEST byte for byte like one answered from the cache decodes to the
 * same method and path: while that document holds, its REPLY goes again
 * without decoding (jansson and the allocations were most of what such
 * a request cost). 1 when answered, 0 when the frame is not one of those,
 * or a negative errno from sending.
 */
static int answer_again(struct session *s, const uint8_t *frame, size_t len,
			size_t n_fds)
{
	struct cached_reply *e = NULL;
	const uint8_t *payload;
	struct proto_hdr h;
	uint64_t generation;
	size_t plen;
	int r;

	if (!s->welcomed || !s->c->cache_by_request)
		return 0;
	payload = proto_frame_payload(frame, len, n_fds, PROTO_REQUEST, &plen);
	if (!payload)
		return 0;
	HASH_FIND(hh_request, s->c->cache_by_request, payload, plen, e);
	if (!e || !api_cacheable(s->c->m, "GET", e->path, &generation) ||
	    generation != e->generation)
		return 0;
	proto_hdr_unpack(frame, &h);
	r = send_cached(s, h.id, e);
	return r < 0 ? r : 1;
}

static int request(struct session *s, uint32_t id, json_t *req,
		   const uint8_t *raw, size_t raw_len)
{
	struct api_request ar = {
		.method = json_string_value(json_object_get(req, "method")),
		.path = json_string_value(json_object_get(req, "path")),
		.body = json_object_get(req, "body"),
		.authorized = s->admin,
		.token_set = true,
		.via_socket = true,
	};
	json_t *reply = NULL;
	struct cached_reply *e;
	struct later *lt;
	uint64_t generation;
	int status;

	if (!ar.method || !ar.path)
		return send_error(s, id, "bad_request",
				  "REQUEST needs \"method\" and \"path\"");
	if (ar.body && !json_is_object(ar.body))
		return send_error(s, id, "bad_request",
				  "\"body\" must be an object");
	if (streq(ar.method, "GET") && streq(ar.path, "/v1/events"))
		return subscribe(s, id);
	/* Documents that change only when the engine says so: the bytes
	 * of last time, while they hold. */
	if (!ar.body && utf8_valid(ar.path) &&
	    api_cacheable(s->c->m, ar.method, ar.path, &generation) &&
	    (e = cached_reply(s, &ar, generation))) {
		cached_remember_request(s->c, e, raw, raw_len);
		return send_cached(s, id, e);
	}
	lt = calloc(1, sizeof(*lt));
	if (!lt)
		return -ENOMEM;
	*lt = (struct later){ .later.fn = on_later, .s = s, .id = id };
	/* What waits for later counts with the attaches that wait. */
	if (s->waits < CONTROL_MAX_WAITS_PER_SESSION)
		ar.later = &lt->later;
	status = api_handle(s->c->m, &ar, &reply);
	if (status == API_LATER) {
		lt->next = s->laters;
		s->laters = lt;
		s->waits++;
		return 0;
	}
	free(lt);
	return send_json(s, PROTO_REPLY, id,
			 json_pack("{s:i, s:o}", "status", status, "body",
				   reply),
			 NULL, 0);
}

/* ---- sessions ---- */

static void uid_count_put(struct control *c, uid_t uid)
{
	struct uid_count *u;

	HASH_FIND(hh, c->uids, &uid, sizeof(uid), u);
	if (u && !--u->n) {
		HASH_DEL(c->uids, u);
		free(u);
	}
}

static void session_free(struct session *s)
{
	struct control *c = s->c;

	for (struct session **pp = &c->sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	for (struct waiter *w = c->waiters, *next; w; w = next) {
		next = w->next;
		if (w->s == s)
			waiter_free(w);
	}
	subscription_free(s->sub);
	while (s->laters) {
		struct later *lt = s->laters;

		s->laters = lt->next;
		api_forget(c->m, &lt->later);
		free(lt);
	}
	for (size_t i = 0; i < s->n_att; i++) {
		publish_session(s, &s->att[i], "session_detach",
				"session ended");
		release(c, &s->att[i]);
	}
	if (s->n_att)
		log_info("session %u (pid %d uid %u) ended: %zu attachments "
			 "released",
			 s->id, (int)s->cred.pid, (unsigned int)s->cred.uid,
			 s->n_att);
	free(s->att);
	free(s->groups);
	/* Not to be served after all in the wake-up under way (a request
	 * of another session can end this one: a reload answers waiters). */
	for (int i = 0; i < c->n_ready; i++)
		if (c->ready[i].data.ptr == s)
			c->ready[i].data.ptr = NULL;
	if (s->io)
		sd_event_source_disable_unref(s->io);
	else
		epoll_ctl(c->ep, EPOLL_CTL_DEL, s->fd, NULL);
	sd_event_source_disable_unref(s->hello_timer);
	closep(&s->fd);
	c->n_sessions--;
	uid_count_put(c, s->cred.uid);
	free(s);
}

/* Its first messages served: the session joins the others in the
 * control's epoll set. Should that fail, it keeps its own source, at
 * their priority. */
static void session_settle(struct session *s)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };

	if (epoll_ctl(s->c->ep, EPOLL_CTL_ADD, s->fd, &ev) < 0) {
		sd_event_source_set_priority(s->io, PRIO_SESSION);
		return;
	}
	s->io = sd_event_source_disable_unref(s->io);
}

/* One message of s: 1 when handled, 0 when there was none, -1 when the
 * session ended (s is freed). */
static int session_handle_one(struct session *s)
{
	uint8_t *frame = s->c->frame;
	const uint8_t *raw = NULL;
	int fds[PROTO_MAX_FDS];
	size_t len, n_fds, raw_len = 0;
	struct proto_msg m;
	uint16_t version;
	int r;

	r = proto_recv_frame(s->fd, frame, PROTO_RECV_BYTES, &len, fds,
			     &n_fds);
	if (r == -EAGAIN)
		return 0;
	sd_event_now(s->c->m->event, CLOCK_MONOTONIC, &s->last_active);
	if (s->boost && !--s->boost)
		session_settle(s);
	if (r == -EPIPE || r == -ECONNRESET) {
		session_free(s);
		return -1;
	}
	if (r == 0) {
		r = answer_again(s, frame, len, n_fds);
		if (r == 1 || r == -EAGAIN)
			return 1;
		if (r < 0) {
			session_free(s);
			return -1;
		}
		raw = proto_frame_payload(frame, len, n_fds, PROTO_REQUEST,
					  &raw_len);
		r = proto_decode_frame(frame, len, fds, n_fds, &m);
	} else {
		proto_frame_ids(frame, len, &m);
	}
	if (r < 0) {
		/* Malformed, oversized, unexpected fds (closed by the codec),
		 * wrong version: say why, then end this session only. */
		struct proto_msg e;

		log_warn(r, "session %u (pid %d uid %u): bad message", s->id,
			 (int)s->cred.pid, (unsigned int)s->cred.uid);
		proto_msg_init(&e);
		if (proto_error(&e, m.id, r) == 0)
			proto_send(s->fd, &e);
		proto_msg_clear(&e);
		proto_msg_clear(&m);
		session_free(s);
		return -1;
	}
	if (!proto_type_allowed(m.type, PROTO_PEER_CLIENT) ||
	    (!s->welcomed && m.type != PROTO_HELLO)) {
		send_error(s, m.id, "bad_request", "%s is not expected here",
			   proto_type_name(m.type));
		proto_msg_clear(&m);
		session_free(s);
		return -1;
	}
	switch (m.type) {
	case PROTO_HELLO:
		r = proto_negotiate(m.payload, &version);
		if (r < 0) {
			send_error(s, m.id, "unsupported_version",
				   "this daemon speaks protocol versions "
				   "%d to %d",
				   PROTO_VERSION_MIN, PROTO_VERSION_MAX);
			proto_msg_clear(&m);
			session_free(s);
			return -1;
		} else {
			struct proto_msg w;

			proto_msg_init(&w);
			r = proto_welcome(&w, m.id, version, RDMAD_VERSION);
			if (r == 0)
				r = proto_send(s->fd, &w);
			proto_msg_clear(&w);
			s->welcomed = r == 0;
			if (s->welcomed)
				s->hello_timer = sd_event_source_disable_unref(
					s->hello_timer);
		}
		break;
	case PROTO_ATTACH:
		r = attach(s, m.id, m.payload);
		break;
	case PROTO_DETACH:
		r = detach(s, m.id, m.payload);
		break;
	case PROTO_REPORT:
		r = report(s, m.id, m.payload);
		break;
	case PROTO_REQUEST:
		r = request(s, m.id, m.payload, raw, raw_len);
		break;
	}
	proto_msg_clear(&m);
	if (r < 0 && r != -EAGAIN) {
		session_free(s);
		return -1;
	}
	return 1;
}

/* A few messages per wake-up: a busy client (or pipelined requests) costs
 * fewer trips through the loop, and the other sessions still get their
 * turn. The sockets are level-triggered: what a batch leaves unread
 * wakes us again. */
#define SESSION_BATCH 8

static void session_serve(struct session *s)
{
	for (int i = 0; i < SESSION_BATCH; i++)
		if (session_handle_one(s) <= 0)
			break;
}

/* A new session, on its own source while boosted. */
static int on_session(sd_event_source *es, int fd, uint32_t revents,
		      void *ud)
{
	(void)es;
	(void)fd;
	(void)revents;
	session_serve(ud);
	return 0;
}

/*
 * Sessions at work have something to read. sd-event dispatches one
 * source per turn of the loop, and each turn costs system calls of its
 * own (epoll_wait, gettid): with a source per session, busy clients
 * paid that per message. The sessions' own epoll set gives every ready
 * one in a single dispatch, in the order the kernel reports them.
 */
static int on_sessions(sd_event_source *es, int fd, uint32_t revents,
		       void *ud)
{
	struct control *c = ud;
	struct epoll_event ev[64];
	int n;

	(void)es;
	(void)revents;
	n = epoll_wait(fd, ev, ARRAY_SIZE(ev), 0);
	if (n <= 0)
		return 0;
	c->ready = ev;
	c->n_ready = n;
	for (int i = 0; i < n; i++)
		if (ev[i].data.ptr)
			session_serve(ev[i].data.ptr);
	c->ready = NULL;
	c->n_ready = 0;
	return 0;
}

static unsigned int sessions_of(struct control *c, uid_t uid)
{
	struct uid_count *u;

	HASH_FIND(hh, c->uids, &uid, sizeof(uid), u);
	return u ? u->n : 0;
}

/* Idle: holds nothing (no attachment, no waiting attach) and has said
 * nothing for a while. */
#define SESSION_IDLE_USEC 1000000

static bool session_idle(const struct session *s, uint64_t now)
{
	return !s->n_att && !s->waits && !s->sub &&
	       s->last_active + SESSION_IDLE_USEC <= now;
}

/* The idle session of uid (any uid: (uid_t)-1) quiet the longest. */
static struct session *oldest_idle(struct control *c, uid_t uid)
{
	struct session *best = NULL;
	uint64_t now;

	sd_event_now(c->m->event, CLOCK_MONOTONIC, &now);
	for (struct session *s = c->sessions; s; s = s->next)
		if ((uid == (uid_t)-1 || s->cred.uid == uid) &&
		    session_idle(s, now) &&
		    (!best || s->last_active < best->last_active))
			best = s;
	return best;
}

/* The uid with the most sessions, and how many. */
static uid_t busiest_uid(struct control *c, unsigned int *count)
{
	uid_t best = (uid_t)-1;

	*count = 0;
	for (struct uid_count *u = c->uids; u; u = u->hh.next)
		if (u->n > *count) {
			*count = u->n;
			best = u->uid;
		}
	return best;
}

static void evict(struct session *s, const char *why)
{
	/* The same line for a uid and a reason: a flood of them is
	 * counted, not repeated (log.c). */
	log_notice("control socket: closed an idle session of uid %u, idle "
		   "the longest, to make room: %s",
		   (unsigned int)s->cred.uid, why);
	send_error(s, 0, "too_many_sessions",
		   "closed to make room for a new session: %s", why);
	s->c->evicted++;
	session_free(s);
}

/*
 * Room for a session of uid? Idle sessions never lock out real work:
 * a uid at its cap loses its own oldest idle session to the newcomer;
 * at the global cap, the uid with the most sessions (if it has more
 * than the newcomer's) loses its oldest idle one. Sessions that hold
 * attachments are never closed: then the newcomer is refused.
 * Returns NULL when admitted, else why not.
 */
static const char *admit(struct control *c, uid_t uid, char *why, size_t n)
{
	unsigned int mine = sessions_of(c, uid), most;
	struct session *victim;
	uid_t busiest;

	if (mine >= c->caps.sessions_per_uid) {
		snprintf(why, n, "uid %u has %u sessions, the most one uid may "
				 "have (daemon.max_sessions_per_uid)",
			 (unsigned int)uid, c->caps.sessions_per_uid);
		victim = oldest_idle(c, uid);
		if (!victim)
			return why;
		evict(victim, why);
		return NULL;
	}
	if (c->n_sessions < c->caps.sessions)
		return NULL;
	snprintf(why, n, "the daemon has %u sessions, its limit "
			 "(daemon.max_sessions)",
		 c->caps.sessions);
	busiest = busiest_uid(c, &most);
	victim = most > mine + 1 ? oldest_idle(c, busiest) : NULL;
	if (!victim)
		return why;
	evict(victim, why);
	return NULL;
}

static int on_hello_timeout(sd_event_source *es, uint64_t usec, void *ud)
{
	struct session *s = ud;

	(void)es;
	(void)usec;
	log_debug("session %u (pid %d uid %u): no HELLO in %d s, closing",
		  s->id, (int)s->cred.pid, (unsigned int)s->cred.uid,
		  s->c->m->config->daemon.hello_timeout);
	send_error(s, 0, "timeout", "no HELLO within %d s (daemon.hello_timeout)",
		   s->c->m->config->daemon.hello_timeout);
	s->c->timed_out++;
	session_free(s);
	return 0;
}

/* Refuse at once, with the reason, rather than leave a client to time
 * out: the socket is ours for as long as it takes to say so. */
static void refuse(struct control *c, int fd, const struct ucred *cred,
		   const char *why)
{
	struct session tmp = { .c = c, .fd = fd, .cred = *cred };

	c->refused++;
	log_notice("control socket: refused a session of uid %u: %s",
		   (unsigned int)cred->uid, why);
	send_error(&tmp, 0, "too_many_sessions", "%s", why);
	/* Closing a socket with unread messages resets it, and the client
	 * may lose the ERROR: read what came already (a HELLO sent right
	 * after connecting), closing any fds. */
	for (int i = 0; i < 4; i++) {
		struct proto_msg m;
		int r;

		r = proto_recv_buf(fd, &m, c->frame, PROTO_RECV_BYTES);
		proto_msg_clear(&m);
		if (r == -EAGAIN || r == -EPIPE || r == -ECONNRESET)
			break;
	}
	close(fd);
}

static void accept_one(struct control *c, int cfd)
{
	int64_t admin = c->m->config->daemon.admin_gid;
	socklen_t len = sizeof(struct ucred);
	struct session *s;
	struct uid_count *u;
	struct ucred cred;
	const char *no;
	char why[160];
	int r;

	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		close(cfd);
		return;
	}
	no = admit(c, cred.uid, why, sizeof(why));
	if (no) {
		refuse(c, cfd, &cred, no);
		return;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		refuse(c, cfd, &cred, "out of memory");
		return;
	}
	s->c = c;
	s->fd = cfd;
	s->cred = cred;
	s->id = ++c->next_session;
	s->boost = SESSION_BOOST_MESSAGES;
	sd_event_now(c->m->event, CLOCK_MONOTONIC, &s->last_active);
	r = peer_groups(s);
	if (r < 0) {
		free(s->groups);
		free(s);
		refuse(c, cfd, &cred, strerror(-r));
		return;
	}
	s->admin = s->cred.uid == 0 ||
		   (admin >= 0 && peer_in_group(s, (gid_t)admin));
	r = sd_event_add_io(c->m->event, &s->io, cfd, EPOLLIN, on_session, s);
	if (r >= 0)
		r = sd_event_source_set_priority(s->io, PRIO_NEW_SESSION);
	if (r >= 0)
		r = sd_event_add_time_relative(
			c->m->event, &s->hello_timer, CLOCK_MONOTONIC,
			(uint64_t)c->m->config->daemon.hello_timeout * 1000000,
			100000, on_hello_timeout, s);
	if (r < 0) {
		sd_event_source_disable_unref(s->io);
		free(s->groups);
		free(s);
		refuse(c, cfd, &cred, strerror(-r));
		return;
	}
	HASH_FIND(hh, c->uids, &cred.uid, sizeof(uid_t), u);
	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u) {
			sd_event_source_disable_unref(s->io);
			sd_event_source_disable_unref(s->hello_timer);
			free(s->groups);
			free(s);
			refuse(c, cfd, &cred, "out of memory");
			return;
		}
		u->uid = cred.uid;
		HASH_ADD(hh, c->uids, uid, sizeof(uid_t), u);
	}
	u->n++;
	s->next = c->sessions;
	c->sessions = s;
	c->n_sessions++;
	log_debug("session %u: pid %d uid %u gid %u%s", s->id,
		  (int)s->cred.pid, (unsigned int)s->cred.uid,
		  (unsigned int)s->cred.gid, s->admin ? " (admin)" : "");
}

/* Up to this many connections per turn of the loop: a burst of
 * connects is taken in quickly, and the loop still turns. */
#define ACCEPT_BATCH 64

static int on_accept(sd_event_source *es, int fd, uint32_t revents,
		     void *ud)
{
	struct control *c = ud;

	(void)es;
	(void)revents;
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (cfd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
			    !accept_pause_on_error(&c->pause, errno))
				log_warn(errno, "control socket: accept");
			return 0;
		}
		accept_pause_ok(&c->pause);
		accept_one(c, cfd);
	}
	return 0;
}

/* ---- the socket ---- */

static void control_stats(void *ud, struct session_stats *out);
static void control_front_stats(void *ud, struct front_stats *out);
static json_t *control_sessions_json(void *ud);
static bool control_attached(void *ud, const char *profile, pid_t pid);

static int resolve_group(const char *name, gid_t *gid)
{
	char *end;

	if (identity_group(name, gid))
		return 0;
	*gid = (gid_t)strtoul(name, &end, 10);
	return *name && !*end ? 0 : -ENOENT;
}

int control_start(struct manager *m)
{
	const struct conf_daemon *d = &m->config->daemon;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct control *c;
	struct stat st;
	mode_t old_mask;
	gid_t gid;
	int r;

	if (strlen(d->control_socket) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, d->control_socket);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->m = m;
	c->fd = -1;
	c->ep = -1;
	m->control = c;
	c->frame = malloc(PROTO_RECV_BYTES);
	if (!c->frame)
		return -ENOMEM;
	c->ep = epoll_create1(EPOLL_CLOEXEC);
	if (c->ep < 0)
		return -errno;
	r = sd_event_add_io(m->event, &c->sessions_io, c->ep, EPOLLIN,
			    on_sessions, c);
	if (r < 0)
		return r;
	r = sd_event_source_set_priority(c->sessions_io, PRIO_SESSION);
	if (r < 0)
		return r;
	c->path = strdup(d->control_socket);
	if (!c->path)
		return -ENOMEM;
	/* Socket activation (rdmad.socket): systemd made it, with its
	 * mode and group, and keeps it across our restarts. */
	c->fd = sysd_listen_take_unix("control", SOCK_SEQPACKET, c->path);
	if (c->fd >= 0) {
		c->passed = true;
		goto listening;
	}
	if (mkdir(d->runtime_dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
		       0);
	if (c->fd < 0)
		return -errno;
	if (lstat(c->path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		/* Replace a stale socket, never a live one (another rdmad). */
		_cleanup_close_ int probe = socket(
			AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

		if (probe >= 0 &&
		    connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			return -EADDRINUSE;
		unlink(c->path);
	}
	/* Born with its final mode and group: bound under a temporary name
	 * (when it fits), made right, then renamed into place, so that no
	 * client of the group is ever refused for a moment. */
	if (strlen(c->path) + 1 < sizeof(sun.sun_path))
		strcat(sun.sun_path, "~");
	unlink(sun.sun_path);
	old_mask = umask(0117);
	r = bind(c->fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old_mask);
	if (r < 0 || listen(c->fd, SOMAXCONN) < 0)
		return -errno;
	if (chmod(sun.sun_path, 0660) < 0)
		return -errno;
	if (d->control_group) {
		r = resolve_group(d->control_group, &gid);
		if (r < 0)
			return r;
		if (chown(sun.sun_path, (uid_t)-1, gid) < 0)
			return -errno;
	}
	if (!streq(sun.sun_path, c->path) && rename(sun.sun_path, c->path) < 0)
		return -errno;
listening:
	front_caps(m->config, &c->caps);
	if (c->caps.lowered)
		log_notice("open-file limit %u: at most %u control sessions "
			   "(%u per uid) and %u REST connections",
			   c->caps.nofile, c->caps.sessions,
			   c->caps.sessions_per_uid, c->caps.http);
	r = sd_event_add_io(m->event, &c->io, c->fd, EPOLLIN, on_accept, c);
	if (r < 0)
		return r;
	r = sd_event_source_set_priority(c->io, PRIO_ACCEPT);
	if (r < 0)
		return r;
	c->pause = (struct accept_pause){ .io = c->io,
					  .what = "control socket" };
	r = events_subscribe(m->events, on_session_event, c);
	if (r < 0)
		return r;
	r = manager_subscribe(m, on_manager_event, c);
	if (r < 0)
		return r;
	manager_set_sessions(m, &(struct manager_sessions){
					.json = control_sessions_json,
					.stats = control_stats,
					.attached = control_attached,
					.ud = c });
	manager_set_front(m, FRONT_CONTROL,
			  &(struct manager_front){ .stats = control_front_stats,
						   .ud = c });
	log_info("control socket on %s", c->path);
	return 0;
}

void control_stop(struct manager *m)
{
	struct control *c = m->control;

	if (!c)
		return;
	manager_unsubscribe(m, on_manager_event, c);
	events_unsubscribe(m->events, on_session_event, c);
	manager_set_sessions(m, NULL);
	manager_set_front(m, FRONT_CONTROL, NULL);
	while (c->sessions)
		session_free(c->sessions);
	accept_pause_done(&c->pause);
	sd_event_source_disable_unref(c->io);
	sd_event_source_disable_unref(c->sessions_io);
	if (c->ep >= 0)
		close(c->ep);
	if (c->fd >= 0) {
		close(c->fd);
		/* A passed socket is systemd's: it listens on while we are
		 * gone, and starts us again at the next connection. */
		if (!c->passed)
			unlink(c->path);
	}
	while (c->cache)
		cached_free(c, c->cache);
	attach_cache_free(c);
	free(c->frame);
	free(c->path);
	free(c);
	m->control = NULL;
}

static void control_stats(void *ud, struct session_stats *out)
{
	struct control *c = ud;

	*out = (struct session_stats){ .bucket_le = attach_bucket_le };
	for (struct session *s = c->sessions; s; s = s->next) {
		out->sessions++;
		out->attachments += (unsigned int)s->n_att;
	}
	out->attaches = c->attaches;
	out->attach_failures = c->attach_failures;
	out->attach_seconds = c->attach_seconds;
	memcpy(out->attach_buckets, c->attach_buckets,
	       sizeof(out->attach_buckets));
}

static void control_front_stats(void *ud, struct front_stats *out)
{
	struct control *c = ud;

	*out = (struct front_stats){ .refused = c->refused,
				     .evicted = c->evicted,
				     .timed_out = c->timed_out };
	for (struct session *s = c->sessions; s; s = s->next)
		out->open++;
}

static bool control_attached(void *ud, const char *profile, pid_t pid)
{
	struct control *c = ud;

	for (struct session *s = c->sessions; s; s = s->next) {
		if (pid && s->cred.pid != pid)
			continue;
		/* A released attachment has no profile any more. */
		for (size_t i = 0; i < s->n_att; i++)
			if (s->att[i].profile &&
			    streq(s->att[i].profile, profile))
				return true;
	}
	return false;
}

static json_t *control_sessions_json(void *ud)
{
	struct control *c = ud;
	json_t *a = json_array();

	for (struct session *s = c->sessions; a && s; s = s->next) {
		json_t *atts = json_array();

		for (size_t i = 0; i < s->n_att; i++) {
			struct attachment *t = &s->att[i];
			json_t *j = json_pack(
				"{s:i, s:s, s:s, s:i}", "attachment",
				(int)t->id, "profile", t->profile, "mode",
				t->shared ? "shared" : "local", "leases",
				(int)t->n_leases);

			if (t->report)
				json_object_set(j, "report", t->report);
			json_array_append_new(atts, j);
		}
		json_array_append_new(
			a, json_pack("{s:i, s:i, s:i, s:i, s:b, s:o}", "session",
				     (int)s->id, "pid", (int)s->cred.pid, "uid",
				     (int)s->cred.uid, "gid", (int)s->cred.gid,
				     "admin", s->admin, "attachments", atts));
	}
	return a;
}
