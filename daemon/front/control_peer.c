// SPDX-License-Identifier: MIT
/*
 * The control socket's lowest part: who a session's peer is (its
 * groups, what it may attach to) and sending it a message. Every other
 * control file calls it; it calls none of them.
 */
#include <fcntl.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>

#include "api.h"
#include "attach_view.h"
#include "control_internal.h"
#include "proto.h"
#include "utf8.h"

/* ---- who the peer is ---- */

int session_read_groups(struct session *s)
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

bool session_in_group(const struct session *s, gid_t gid)
{
	if (s->cred.gid == gid)
		return true;
	for (size_t i = 0; i < s->n_groups; i++)
		if (s->groups[i] == gid)
			return true;
	return false;
}

bool session_allowed(const struct profile *p, const struct session *s)
{
	return profile_admits(p, s->cred.uid, s->cred.gid, s->groups,
			      s->n_groups, manager_config(s->c->m)->daemon.admit_root);
}

/* ---- sending ---- */

/* Frames are cut here, one at a time: the loop is single-threaded. */
static uint8_t frame_buf[PROTO_MAX_FRAME];

int session_out_source(struct session *s, int *fd, sd_event_source **es,
		       sd_event_io_handler_t handler, void *ud)
{
	int r;

	*fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 3);
	if (*fd < 0)
		return -errno;
	r = sd_event_add_io(manager_loop(s->c->m), es, *fd, EPOLLOUT, handler, ud);
	if (r == 0)
		r = sd_event_source_set_enabled(*es, SD_EVENT_OFF);
	if (r < 0) {
		*es = sd_event_source_disable_unref(*es);
		closep(fd);
	}
	return r;
}

static void outmsg_free(struct outmsg *o)
{
	close_all(o->fds, o->n_fds);
	free(o->fds);
	free(o->payload);
	free(o);
}

/* ---- what sessions that do not read make the daemon hold ---- */

/* Would len more bytes waiting for s pass a budget: its own bound, its
 * uid's sessions' or all sessions' (daemon.output_budget_per_uid,
 * daemon.output_budget)? */
static bool over_budget(const struct session *s, size_t len, bool own)
{
	const struct conf_daemon *d = &manager_config(s->c->m)->daemon;
	size_t mine = len;

	if ((own && s->out.bytes + len > CONTROL_OUT_MAX_BYTES) ||
	    s->c->out_bytes + len > d->output_budget)
		return true;
	if (s->c->out_bytes + len <= d->output_budget_per_uid)
		return false; /* no uid can be over */
	for (const struct session *o = s->c->sessions; o; o = o->next)
		if (o->cred.uid == s->cred.uid)
			mine += o->out.bytes;
	return mine > d->output_budget_per_uid;
}

void sessions_out_trim(struct control *c)
{
	/* What sessions let pile up is given back to the system once it
	 * is gone: freed chunks of a heap grown for it stay otherwise. */
	if (!c->out_bytes && c->out_peak > CONTROL_TRIM_BYTES) {
		malloc_trim(0);
		c->out_peak = 0;
	}
}

static void out_account(struct session *s, size_t add, size_t sub)
{
	struct control *c = s->c;

	s->out.bytes += add;
	s->out.bytes -= sub;
	c->out_bytes += add;
	c->out_bytes -= sub;
	if (c->out_bytes > c->out_peak)
		c->out_peak = c->out_bytes;
}

void session_out_clear(struct session *s)
{
	struct session_out *q = &s->out;

	while (q->head) {
		struct outmsg *o = q->head;

		q->head = o->next;
		outmsg_free(o);
	}
	q->tail = NULL;
	out_account(s, 0, q->bytes);
	q->src = sd_event_source_disable_unref(q->src);
	closep(&q->fd);
	sessions_out_trim(s->c);
}

/* Frame index of a message: 0 when the socket took it, -EAGAIN when it
 * is full, another negative errno when the session is over. */
static int send_frame(struct session *s, uint16_t type, uint32_t id,
		      const struct iovec *parts, size_t n_parts,
		      const int *fds, size_t n_fds, size_t index)
{
	size_t len, first, count;
	struct iovec iov;
	int r;

	r = proto_frame_packv(s->version, type, id, parts, n_parts, n_fds,
			      index, frame_buf, &len, &first, &count);
	if (r < 0)
		return r;
	iov = (struct iovec){ frame_buf, len };
	return proto_sendmsg(s->fd, NULL, 0, &iov, 1, fds + first, count);
}

/* Send what waits, frame by frame, as far as the socket takes it. */
static void out_flush(struct session *s)
{
	struct session_out *q = &s->out;
	int r = 0;

	while (q->head) {
		struct outmsg *o = q->head;
		struct iovec part = { o->payload, o->len };

		while (o->frame < o->n_frames) {
			r = send_frame(s, o->type, o->id, &part, 1, o->fds,
				       o->n_fds, o->frame);
			if (r < 0)
				break;
			o->frame++;
		}
		if (r == -EAGAIN)
			break;
		/* Sent, or the session is over (its own socket says so to
		 * control.c, which ends it): nothing more to send. */
		q->head = o->next;
		out_account(s, 0, o->len);
		outmsg_free(o);
		if (r < 0) {
			session_out_clear(s);
			return;
		}
	}
	if (!q->head) {
		q->tail = NULL;
		sessions_out_trim(s->c);
	}
	sd_event_source_set_enabled(q->src, q->head ? SD_EVENT_ON
						    : SD_EVENT_OFF);
}

static int on_out_writable(sd_event_source *es, int fd, uint32_t revents,
			   void *ud)
{
	(void)es;
	(void)fd;
	(void)revents;
	out_flush(ud);
	return 0;
}

/* The rest of a message, from frame index on, to the queue: its payload
 * copied and its fds duplicated (the engine's may close before they
 * go). */
static int out_queue(struct session *s, uint16_t type, uint32_t id,
		     const struct iovec *parts, size_t n_parts,
		     const int *fds, size_t n_fds, size_t index,
		     size_t n_frames)
{
	struct session_out *q = &s->out;
	struct outmsg *o;
	size_t len = 0;
	int r = 0;

	if (!q->src) {
		r = session_out_source(s, &q->fd, &q->src, on_out_writable, s);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < n_parts; i++)
		len += parts[i].iov_len;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	*o = (struct outmsg){ .type = type, .id = id, .len = len,
			      .frame = index, .n_frames = n_frames };
	o->payload = malloc(len ? len : 1);
	o->fds = malloc((n_fds ? n_fds : 1) * sizeof(int));
	if (!o->payload || !o->fds)
		r = -ENOMEM;
	for (size_t i = 0, at = 0; r == 0 && i < n_parts; i++) {
		memcpy(o->payload + at, parts[i].iov_base, parts[i].iov_len);
		at += parts[i].iov_len;
	}
	for (; r == 0 && o->n_fds < n_fds; o->n_fds++) {
		o->fds[o->n_fds] = fcntl(fds[o->n_fds], F_DUPFD_CLOEXEC, 3);
		if (o->fds[o->n_fds] < 0)
			r = -errno;
	}
	if (r < 0) {
		outmsg_free(o);
		return r;
	}
	if (q->tail)
		q->tail->next = o;
	else
		q->head = o;
	q->tail = o;
	out_account(s, len, 0);
	return sd_event_source_set_enabled(q->src, SD_EVENT_ON);
}

int session_send_message(struct session *s, uint16_t type, uint32_t id,
			 const struct iovec *parts, size_t n_parts,
			 const int *fds, size_t n_fds)
{
	size_t len = 0, n_frames, i = 0;
	int r = -EAGAIN;

	for (size_t k = 0; k < n_parts; k++)
		len += parts[k].iov_len;
	if (len > PROTO_MAX_MESSAGE || n_fds > PROTO_MAX_MESSAGE_FDS)
		return -EMSGSIZE;
	n_frames = proto_frames_count(len, n_fds);
	if (n_frames > 1 && s->version < PROTO_VERSION_FRAMES)
		return -EMSGSIZE;
	if (s->out.head) {
		/* Behind what waits: an event is dropped once a budget
		 * would be passed, anything else ends the session. */
		if (over_budget(s, len, true))
			return type == PROTO_EVENT ? -EAGAIN : -ENOBUFS;
	} else {
		for (; i < n_frames; i++) {
			r = send_frame(s, type, id, parts, n_parts, fds, n_fds,
				       i);
			if (r < 0)
				break;
		}
		if (r != -EAGAIN)
			return r;
		/* An event the socket does not take is dropped, as
		 * always: nothing is owed to a client that does not
		 * read. Once a frame is out, the rest must follow. */
		if (i == 0 && type == PROTO_EVENT)
			return -EAGAIN;
		/* The rest would wait: not past the uid's or all
		 * sessions' budget (one message alone may pass its own
		 * bound: it is taken whole). */
		if (over_budget(s, len, false))
			return -ENOBUFS;
	}
	return out_queue(s, type, id, parts, n_parts, fds, n_fds, i,
			 n_frames);
}

/* A payload already in JSON text (a cached document, a fixed answer). */
int session_send_text(struct session *s, uint16_t type, uint32_t id,
		      const void *payload, size_t len)
{
	struct iovec part = { (void *)payload, len };

	return session_send_message(s, type, id, &part, 1, NULL, 0);
}

int session_send_json(struct session *s, uint16_t type, uint32_t id,
		      json_t *payload, const int *fds, size_t n_fds)
{
	char *text;
	int r;

	if (!payload)
		return -ENOMEM;
	text = json_dumps(payload, JSON_COMPACT);
	json_decref(payload);
	if (!text)
		return -ENOMEM;
	r = session_send_message(s, type, id,
				 &(struct iovec){ text, strlen(text) }, 1, fds,
				 n_fds);
	free(text);
	return r;
}

int session_send_error(struct session *s, uint32_t id, const char *code,
		       const char *fmt, ...)
{
	json_t *doc;
	va_list ap;

	/* The same error document as REST's (api_error: UTF-8 kept whole). */
	va_start(ap, fmt);
	doc = api_verror(code, fmt, ap);
	va_end(ap);
	return session_send_json(s, PROTO_ERROR, id, doc, NULL, 0);
}
