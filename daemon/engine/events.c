// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"

struct subscriber {
	events_fn fn;
	void *ud;
};

/* A delivery under way: the next subscriber to call. A subscriber may
 * publish from its callback (an attach answered on a profile's change
 * takes leases, which are announced): deliveries nest, each with its
 * own place, and unsubscribing moves every place behind it. */
struct delivery {
	size_t next;
	struct delivery *outer;
};

struct events {
	uint64_t seq;
	struct subscriber *subs;
	size_t n_subs;
	struct delivery *delivering; /* the innermost */
};

int events_new(struct events **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

struct events *events_free(struct events *b)
{
	if (!b)
		return NULL;
	free(b->subs);
	free(b);
	return NULL;
}

int events_subscribe(struct events *b, events_fn fn, void *ud)
{
	struct subscriber *s;

	if (!b)
		return -EINVAL;
	s = realloc(b->subs, (b->n_subs + 1) * sizeof(*s));
	if (!s)
		return -ENOMEM;
	b->subs = s;
	s[b->n_subs++] = (struct subscriber){ fn, ud };
	return 0;
}

void events_unsubscribe(struct events *b, events_fn fn, void *ud)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n_subs; i++) {
		if (b->subs[i].fn != fn || b->subs[i].ud != ud)
			continue;
		/* Keep the order: subscribers hear events in the order they
		 * subscribed, and a publish under way goes on with the next
		 * one. */
		memmove(&b->subs[i], &b->subs[i + 1],
			(b->n_subs - i - 1) * sizeof(*b->subs));
		b->n_subs--;
		for (struct delivery *d = b->delivering; d; d = d->outer)
			if (i < d->next)
				d->next--;
		return;
	}
}

uint64_t events_last_seq(const struct events *b)
{
	return b ? b->seq : 0;
}

static const char *const names[EV_KIND_MAX] = {
	[EV_PROFILE_STATE] = "profile_state",
	[EV_OBJECT_STATE] = "object_state",
	[EV_PROGRESS] = "progress",
	[EV_RELOAD] = "reload",
	[EV_DEVICE_ADDED] = "device_added",
	[EV_DEVICE_REMOVED] = "device_removed",
	[EV_PORT_ACTIVE] = "port_active",
	[EV_PORT_ERROR] = "port_error",
	[EV_LID_CHANGE] = "lid_change",
	[EV_PKEY_CHANGE] = "pkey_change",
	[EV_SM_CHANGE] = "sm_change",
	[EV_CLIENT_REREGISTER] = "client_reregister",
	[EV_GID_CHANGE] = "gid_change",
	[EV_QP_FATAL] = "qp_fatal",
	[EV_QP_REQUEST_ERROR] = "qp_request_error",
	[EV_QP_ACCESS_ERROR] = "qp_access_error",
	[EV_COMM_ESTABLISHED] = "comm_established",
	[EV_SQ_DRAINED] = "sq_drained",
	[EV_PATH_MIGRATED] = "path_migrated",
	[EV_PATH_MIGRATION_ERROR] = "path_migration_error",
	[EV_QP_LAST_WQE_REACHED] = "qp_last_wqe_reached",
	[EV_CQ_ERROR] = "cq_error",
	[EV_SRQ_ERROR] = "srq_error",
	[EV_SRQ_LIMIT_REACHED] = "srq_limit_reached",
	[EV_WQ_FATAL] = "wq_fatal",
	[EV_DEVICE_FATAL] = "device_fatal",
	[EV_ASYNC_UNKNOWN] = "unknown",
	[EV_GID_SELECTED] = "gid_selected",
	[EV_QP_ERROR] = "qp_error",
	[EV_QP_RECOVERED] = "qp_recovered",
	[EV_QP_RECOVER_FAILED] = "qp_recover_failed",
	[EV_MCAST_JOIN] = "mcast_join",
	[EV_MCAST_ERROR] = "mcast_error",
	[EV_TARGET_CONNECT] = "target_connect",
	[EV_TARGET_DISCONNECT] = "target_disconnect",
	[EV_TARGET_REJECT] = "target_reject",
	[EV_TARGET_REVOKE] = "target_revoke",
	[EV_SESSION_ATTACH] = "session_attach",
	[EV_SESSION_DETACH] = "session_detach",
	[EV_OBJECT_LOST] = "object_lost",
	[EV_OBJECT_RECREATED] = "object_recreated",
	/* the engine's own */
	[EV_CREATION_STEP] = "creation_step",
	[EV_PROFILE_CHANGED] = "profile_changed",
	[EV_SETTLED] = "settled",
	[EV_DEVICE_LOST] = "device_lost",
	[EV_PROFILE_REMOVED] = "profile_removed",
	[EV_LEASES_CHANGED] = "leases_changed",
};

const char *event_name(enum event_kind k)
{
	return (unsigned int)k < EV_KIND_MAX && names[k] ? names[k] : "?";
}

uint64_t events_publish(struct events *b, struct event *ev)
{
	struct event_render render = { 0 };
	struct delivery d = { 0, b ? b->delivering : NULL };

	if (!b)
		return 0;
	ev->seq = event_streamed(ev->kind) ? ++b->seq : 0;
	ev->render = &render;
	b->delivering = &d;
	while (d.next < b->n_subs) {
		struct subscriber s = b->subs[d.next++];

		s.fn(s.ud, ev);
	}
	b->delivering = d.outer;
	json_decref(render.json);
	ev->render = NULL;
	return ev->seq;
}

/* ---- a subscriber's queue ---- */

int events_queue_init(struct events_queue *q, size_t cap)
{
	*q = (struct events_queue){ .cap = cap ? cap : 1 };
	q->q = calloc(q->cap, sizeof(*q->q));
	return q->q ? 0 : -ENOMEM;
}

void events_queue_clear(struct events_queue *q)
{
	struct events_queued e;

	while (events_queue_pop(q, &e))
		json_decref(e.ev);
	free(q->q);
	*q = (struct events_queue){ 0 };
}

bool events_queue_push(struct events_queue *q, const json_t *ev,
		       const struct event *bev)
{
	if (q->overflowed)
		return false;
	if (q->n == q->cap) {
		q->overflowed = true;
		return false;
	}
	q->q[(q->head + q->n++) % q->cap] = (struct events_queued){
		json_incref((json_t *)ev), bev->seq, event_name(bev->kind)
	};
	q->last_seq = bev->seq;
	return true;
}

bool events_queue_pop(struct events_queue *q, struct events_queued *out)
{
	if (!q->n)
		return false;
	*out = q->q[q->head];
	q->q[q->head] = (struct events_queued){ 0 };
	q->head = (q->head + 1) % q->cap;
	q->n--;
	return true;
}

void events_queue_unpop(struct events_queue *q, const struct events_queued *e)
{
	q->head = (q->head + q->cap - 1) % q->cap;
	q->q[q->head] = *e;
	q->n++;
}

json_t *events_queue_overflow(const struct events_queue *q)
{
	return json_pack("{s:s, s:I, s:s}", "event", "overflow", "last_seq",
			 (json_int_t)q->last_seq, "message",
			 "this subscriber did not read its events fast "
			 "enough; events after last_seq were not delivered "
			 "(subscribe again, and read GET /v1/profiles for "
			 "the current state)");
}
