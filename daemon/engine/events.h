/* SPDX-License-Identifier: MIT */
/*
 * The engine's one event bus. Whoever knows of something happening (the
 * profiles, the manager, the async-event watch, targets, multicast
 * groups, the control socket's sessions) publishes a typed event here:
 * an event_kind and the payload that kind carries. Subscribers get the
 * struct, never text; nothing below calls up: a publisher does not know
 * who listens.
 *
 * Two families of kinds:
 *   - the stream's (EV_PROFILE_STATE .. EV_OBJECT_RECREATED), which the
 *     front ends pass on (REST GET /v1/events, the control socket's
 *     SUBSCRIBE) as JSON made by one serializer, event_json(); each takes
 *     the next seq, from 1, for the daemon's life:
 *       {"seq": 42, "time": "2026-11-23T17:25:11.123Z",
 *        "event": "port_error", ...its own fields}
 *   - the engine's own (EV_CREATION_STEP .. EV_LEASES_CHANGED), heard in
 *     the daemon only: no seq, no JSON.
 * The names are in one table (event_name(); tests/event-names checks
 * them against PROTOCOL.md, openapi.json and rdmad(8)).
 * Everything runs on the loop: publish and the callbacks alike.
 */
#ifndef RDMAD_EVENTS_H
#define RDMAD_EVENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct events;
struct profile;
struct object;

enum event_kind {
	/* ---- on the stream ---- */
	EV_PROFILE_STATE, /* profile: its state or reason changed */
	EV_OBJECT_STATE,  /* profile, object: failed, draining, ready */
	EV_PROGRESS,	  /* profile: how far its creation has come */
	EV_RELOAD,	  /* u.reload */
	EV_DEVICE_ADDED,  /* u.device */
	EV_DEVICE_REMOVED,
	/* The device's async events (asyncev.c): profile, u.async; the
	 * port's first, then the objects', then the device's. */
	EV_PORT_ACTIVE,
	EV_PORT_ERROR,
	EV_LID_CHANGE,
	EV_PKEY_CHANGE,
	EV_SM_CHANGE,
	EV_CLIENT_REREGISTER,
	EV_GID_CHANGE,
	EV_QP_FATAL,
	EV_QP_REQUEST_ERROR,
	EV_QP_ACCESS_ERROR,
	EV_COMM_ESTABLISHED,
	EV_SQ_DRAINED,
	EV_PATH_MIGRATED,
	EV_PATH_MIGRATION_ERROR,
	EV_QP_LAST_WQE_REACHED,
	EV_CQ_ERROR,
	EV_SRQ_ERROR,
	EV_SRQ_LIMIT_REACHED,
	EV_WQ_FATAL,
	EV_DEVICE_FATAL,
	EV_ASYNC_UNKNOWN,
	EV_GID_SELECTED, /* profile, u.gid */
	/* A daemon QP in error and its recovery (qphealth.c): profile,
	 * object, u.reason (qp_error, qp_recover_failed). */
	EV_QP_ERROR,
	EV_QP_RECOVERED,
	EV_QP_RECOVER_FAILED,
	EV_MCAST_JOIN, /* u.mcast */
	EV_MCAST_ERROR,
	EV_TARGET_CONNECT, /* u.target */
	EV_TARGET_DISCONNECT,
	EV_TARGET_REJECT,
	EV_TARGET_REVOKE,
	EV_SESSION_ATTACH, /* u.session */
	EV_SESSION_DETACH,
	EV_OBJECT_LOST,	     /* profile, object, u.lost */
	EV_OBJECT_RECREATED, /* profile, object */
	EV_STREAM_MAX,
	/* ---- the engine's own ---- */
	/* profile: an object of its creation is done */
	EV_CREATION_STEP = EV_STREAM_MAX,
	EV_PROFILE_CHANGED, /* profile: it settled, started or stopped */
	EV_SETTLED,	    /* nothing is being created anywhere */
	/* profile: it lost its device (removed or failed) and is pending
	 * now; u.device says which and why. What sessions opened on the
	 * device themselves must go. */
	EV_DEVICE_LOST,
	/* profile: a reload is removing it (it drains what is leased). */
	EV_PROFILE_REMOVED,
	/* profile: who holds what of it changed (a shared client's lease
	 * taken or ended, or one of the previous run's adopted): u.leases. */
	EV_LEASES_CHANGED,
	EV_KIND_MAX
};

/* One change of a reload: the object kind and name it made, changed or
 * removed (kind: an obj_kind, or -1 for a whole profile). */
struct reload_change {
	const char *profile;
	int kind;
	const char *name; /* NULL for a profile */
	const char *action; /* obj_action_name(), or "create"/"remove" */
	bool drains; /* removed or made anew: what is leased of it drains */
};

/* What the serializer made of an event being delivered (the bus's). */
struct event_render {
	json_t *json;
	bool made;
};

struct event {
	enum event_kind kind;
	/* The profile it is about (its name; NULL: none), and the struct
	 * where the publisher has it (the engine's events). */
	const char *profile_name;
	struct profile *profile;
	const struct object *object; /* the object it is about, or NULL */
	union {
		struct {
			/* EV_RELOAD: 0 (applied) or -errno as
			 * manager_reload() says; the answer as POST
			 * /v1/reload gives it (passed on whole), and its
			 * changes, typed. */
			int r;
			const json_t *result;
			const struct reload_change *changes;
			size_t n_changes;
		} reload;
		/* EV_DEVICE_*: the device and, EV_DEVICE_LOST, why. */
		struct {
			const char *ibdev;
			const char *reason;
		} device;
		struct {
			const char *ibdev;
			/* The port's events: its number and state (-1:
			 * could not be asked); 0: not a port's event. */
			int port, state;
		} async;
		struct {
			const char *ibdev;
			int port, gid_index; /* -1: none */
			const char *gid;     /* as text, "none" */
		} gid;
		const char *reason; /* EV_QP_*: why, or NULL */
		struct {
			const char *name, *group, *reason;
		} mcast;
		struct {
			const char *name, *peer, *reason;
			uint64_t conn; /* 0: a request, no connection */
			int64_t qp_num; /* -1: none */
		} target;
		struct {
			unsigned int session, attachment;
			pid_t pid;
			uid_t uid;
			bool shared;
			const char *reason;
		} session;
		/* EV_OBJECT_LOST: the sessions attached then, as GET
		 * /v1/sessions shows them (passed on whole). */
		const json_t *sessions;
		/* EV_LEASES_CHANGED: only ended (none taken): what the
		 * lease record says may wait for the end of the loop's
		 * turn. */
		bool leases_ended;
	} u;
	/* Set by the bus while it delivers the event. */
	uint64_t seq; /* 0: not on the stream */
	struct event_render *render;
};

/* The name of an event kind, as the stream says it; every kind has
 * one. */
const char *event_name(enum event_kind k);
/* Will this kind be on the stream? */
static inline bool event_streamed(enum event_kind k)
{
	return k < EV_STREAM_MAX;
}

/* One of the engine's events after which a profile's state, or the list
 * of profiles, may be other than before (not progress, not leases). */
static inline bool event_profiles_moved(enum event_kind k)
{
	return k == EV_PROFILE_CHANGED || k == EV_SETTLED ||
	       k == EV_DEVICE_LOST || k == EV_PROFILE_REMOVED;
}

typedef void (*events_fn)(void *ud, const struct event *ev);

int events_new(struct events **out);
struct events *events_free(struct events *b);
static inline void events_freep(struct events **b)
{
	events_free(*b);
}

/*
 * Deliver ev to every subscriber, in the order they subscribed. A
 * stream's event takes the next seq. A NULL bus drops it (an engine
 * without listeners, as in unit tests). Returns the seq (0 for the
 * engine's own events and on a NULL bus).
 */
uint64_t events_publish(struct events *b, struct event *ev);
/* Hear every event published from now on, until unsubscribed. A
 * subscriber may unsubscribe itself (or another) from its callback. */
int events_subscribe(struct events *b, events_fn fn, void *ud);
void events_unsubscribe(struct events *b, events_fn fn, void *ud);
/* The seq of the last event published (0: none yet). */
uint64_t events_last_seq(const struct events *b);

/*
 * The serializer (events_json.c): ev as the stream has it, JSON with
 * the names and shapes of the REST documents, seq, time and event first.
 * Made once per event, however many front ends ask: a reference the bus
 * owns (json_incref to keep it). NULL for the engine's own kinds, or out
 * of memory.
 */
const json_t *event_json(const struct event *ev);

/*
 * A bounded queue of events, for a subscriber that sends them on to a
 * peer that reads at its own pace (an SSE stream, a control session).
 * Once full, the subscriber is too slow: the queue stops taking events
 * (overflowed), and its owner sends what is queued, then
 * events_queue_overflow()'s event, and ends the stream.
 */
struct events_queued {
	json_t *ev;
	uint64_t seq;	  /* its seq (0: none) */
	const char *name; /* its event_name() */
};

struct events_queue {
	struct events_queued *q;
	size_t cap, head, n;
	bool overflowed;
	uint64_t last_seq; /* of the last event taken */
};

#define EVENTS_QUEUE_DEFAULT 1024

int events_queue_init(struct events_queue *q, size_t cap);
void events_queue_clear(struct events_queue *q);
/* Queue a reference to ev, the JSON of bus event bev (its seq and name
 * kept beside it: the sender frames it without reading it back); false
 * (and overflowed set) when full. */
bool events_queue_push(struct events_queue *q, const json_t *ev,
		       const struct event *bev);
/* The oldest event (its reference is the caller's), false: none. */
bool events_queue_pop(struct events_queue *q, struct events_queued *out);
/* Put what was popped back at the head (a send that would block):
 * nothing is lost or reordered. */
void events_queue_unpop(struct events_queue *q, const struct events_queued *e);
/* The last event a dropped subscriber gets:
 * {"event":"overflow", "last_seq": N, "message": "..."}: events after
 * seq N were not delivered. No seq of its own: it is not in the stream. */
json_t *events_queue_overflow(const struct events_queue *q);

#endif
