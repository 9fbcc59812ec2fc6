/* SPDX-License-Identifier: MIT */
/*
 * The event stream: the engine (and whoever else knows of something
 * happening: sessions, later targets) publishes typed events here; the
 * front ends subscribe and pass them on (REST GET /v1/events, the
 * control socket's SUBSCRIBE). Nothing below calls up: a publisher does
 * not know who listens.
 *
 * An event is one JSON object, with the names and shapes of the REST
 * documents:
 *   {"seq": 42, "time": "2026-11-23T17:25:11.123Z", "event": "port_error",
 *    ...its own fields ("profile", "device", "kind", "name", ...)}
 * seq grows by one per event published, from 1, for the daemon's life.
 * Everything runs on the loop: publish and the callbacks alike.
 */
#ifndef RDMAD_EVENTS_H
#define RDMAD_EVENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct events;

/* ev is the bus's: take a reference (json_incref) to keep it. */
typedef void (*events_fn)(void *ud, const json_t *ev);

int events_new(struct events **out);
struct events *events_free(struct events *b);
static inline void events_freep(struct events **b)
{
	events_free(*b);
}

/*
 * Publish an event named name, with the fields of body (a JSON object,
 * taken over; NULL: no fields). A NULL bus drops it (an engine without
 * listeners, as in unit tests). Returns the event's seq, or -errno
 * (-ENOMEM, -EINVAL for a body that is not an object).
 */
int64_t events_publish(struct events *b, const char *name, json_t *body);
/* The same, the fields as json_pack() takes them. */
int64_t events_publishf(struct events *b, const char *name, const char *fmt,
			...);
/* Hear every event published from now on, until unsubscribed. A
 * subscriber may unsubscribe itself (or another) from its callback. */
int events_subscribe(struct events *b, events_fn fn, void *ud);
void events_unsubscribe(struct events *b, events_fn fn, void *ud);
/* The seq of the last event published (0: none yet). */
uint64_t events_last_seq(const struct events *b);

/*
 * A bounded queue of events, for a subscriber that sends them on to a
 * peer that reads at its own pace (an SSE stream, a control session).
 * Once full, the subscriber is too slow: the queue stops taking events
 * (overflowed), and its owner sends what is queued, then
 * events_queue_overflow()'s event, and ends the stream.
 */
struct events_queue {
	json_t **ev;
	size_t cap, head, n;
	bool overflowed;
	uint64_t last_seq; /* of the last event taken */
};

#define EVENTS_QUEUE_DEFAULT 1024

int events_queue_init(struct events_queue *q, size_t cap);
void events_queue_clear(struct events_queue *q);
/* Queue a reference to ev; false (and overflowed set) when full. */
bool events_queue_push(struct events_queue *q, const json_t *ev);
/* The oldest event (a reference, the caller's), or NULL. */
json_t *events_queue_pop(struct events_queue *q);
/* The last event a dropped subscriber gets:
 * {"event":"overflow", "last_seq": N, "message": "..."}: events after
 * seq N were not delivered. No seq of its own: it is not in the stream. */
json_t *events_queue_overflow(const struct events_queue *q);

#endif
