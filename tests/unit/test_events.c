// SPDX-License-Identifier: MIT
/* The event bus: the stream's events take seq one by one, the engine's
 * own none; every subscriber hears every event in order, may leave from
 * its own callback, and may publish from it (deliveries nest); the one
 * serializer makes an event's JSON once, seq, time and event first; every
 * kind has a name of its own; a subscriber's bounded queue overflows
 * once, keeps what it had, and says up to where. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "events.h"
#include "util.h"

struct heard {
	uint64_t seq[16];
	enum event_kind kind[16];
	size_t n;
	struct events *b;
	bool leave;
	/* Publish this from the callback, once (kind EV_KIND_MAX: no). */
	enum event_kind nest;
};

static void hear(void *ud, const struct event *ev)
{
	struct heard *h = ud;

	assert_true(h->n < 16);
	h->seq[h->n] = ev->seq;
	h->kind[h->n] = ev->kind;
	h->n++;
	if (h->leave)
		events_unsubscribe(h->b, hear, h);
	if (h->nest != EV_KIND_MAX) {
		struct event inner = { .kind = h->nest };

		h->nest = EV_KIND_MAX;
		events_publish(h->b, &inner);
	}
}

static uint64_t publish(struct events *b, enum event_kind kind)
{
	return events_publish(b, &(struct event){ .kind = kind });
}

static void test_seq_and_order(void **state)
{
	_cleanup_(events_freep) struct events *b = NULL;
	struct heard one = { .nest = EV_KIND_MAX }, two = { .nest = EV_KIND_MAX };

	(void)state;
	assert_int_equal(events_new(&b), 0);
	assert_int_equal(events_last_seq(b), 0);
	assert_int_equal(publish(b, EV_DEVICE_ADDED), 1);
	one.b = two.b = b;
	assert_int_equal(events_subscribe(b, hear, &one), 0);
	assert_int_equal(events_subscribe(b, hear, &two), 0);
	assert_int_equal(publish(b, EV_PORT_ERROR), 2);
	/* The engine's own: heard, but no seq. */
	assert_int_equal(publish(b, EV_SETTLED), 0);
	assert_int_equal(publish(b, EV_RELOAD), 3);
	assert_int_equal(one.n, 3);
	assert_int_equal(two.n, 3);
	assert_int_equal(one.seq[0], 2);
	assert_int_equal(one.seq[1], 0);
	assert_int_equal(one.kind[1], EV_SETTLED);
	assert_int_equal(one.seq[2], 3);
	assert_int_equal(two.kind[0], EV_PORT_ERROR);
	assert_int_equal(two.kind[2], EV_RELOAD);
	assert_int_equal(events_last_seq(b), 3);
	events_unsubscribe(b, hear, &one);
	assert_int_equal(publish(b, EV_PROGRESS), 4);
	assert_int_equal(one.n, 3);
	assert_int_equal(two.n, 4);
	/* A NULL bus drops what is published. */
	assert_int_equal(publish(NULL, EV_PROGRESS), 0);
}

/* The first of two subscribers leaves from its callback: the second
 * still hears that event, and the first nothing after it. */
static void test_leave_in_callback(void **state)
{
	_cleanup_(events_freep) struct events *b = NULL;
	struct heard one = { .nest = EV_KIND_MAX }, two = { .nest = EV_KIND_MAX };

	(void)state;
	assert_int_equal(events_new(&b), 0);
	one.b = two.b = b;
	one.leave = true;
	assert_int_equal(events_subscribe(b, hear, &one), 0);
	assert_int_equal(events_subscribe(b, hear, &two), 0);
	publish(b, EV_DEVICE_ADDED);
	publish(b, EV_DEVICE_REMOVED);
	assert_int_equal(one.n, 1);
	assert_int_equal(two.n, 2);
	assert_int_equal(two.kind[0], EV_DEVICE_ADDED);
	assert_int_equal(two.kind[1], EV_DEVICE_REMOVED);
}

/* The first subscriber publishes from its callback, and the second
 * leaves from its own during that inner delivery: every subscriber
 * still hears the outer event once, the inner one is heard first by
 * those after the publisher, and the one who left hears nothing more. */
static void test_nested_delivery(void **state)
{
	_cleanup_(events_freep) struct events *b = NULL;
	struct heard one = { .nest = EV_LEASES_CHANGED },
		     two = { .nest = EV_KIND_MAX, .leave = true },
		     three = { .nest = EV_KIND_MAX };

	(void)state;
	assert_int_equal(events_new(&b), 0);
	one.b = two.b = three.b = b;
	assert_int_equal(events_subscribe(b, hear, &one), 0);
	assert_int_equal(events_subscribe(b, hear, &two), 0);
	assert_int_equal(events_subscribe(b, hear, &three), 0);
	publish(b, EV_PROFILE_CHANGED);
	assert_int_equal(one.n, 2);
	assert_int_equal(one.kind[0], EV_PROFILE_CHANGED);
	assert_int_equal(one.kind[1], EV_LEASES_CHANGED);
	/* two heard the inner event, left, and so missed the outer. */
	assert_int_equal(two.n, 1);
	assert_int_equal(two.kind[0], EV_LEASES_CHANGED);
	assert_int_equal(three.n, 2);
	assert_int_equal(three.kind[0], EV_LEASES_CHANGED);
	assert_int_equal(three.kind[1], EV_PROFILE_CHANGED);
	publish(b, EV_SETTLED);
	assert_int_equal(one.n, 3);
	assert_int_equal(two.n, 1);
	assert_int_equal(three.n, 3);
}

/* Every kind has a name, each its own; the stream's are JSON, made once
 * however many ask, the engine's own are not. */
static void test_names_and_json(void **state)
{
	(void)state;
	for (int i = 0; i < EV_KIND_MAX; i++) {
		assert_string_not_equal(event_name((enum event_kind)i), "?");
		for (int k = 0; k < i; k++)
			assert_string_not_equal(event_name((enum event_kind)i),
						event_name((enum event_kind)k));
	}
	assert_string_equal(event_name(EV_KIND_MAX), "?");
}

struct rendered {
	json_t *first; /* kept: the bus lets go of its own after */
	bool same;     /* asked twice, the same JSON */
	int made;
};

static void render(void *ud, const struct event *ev)
{
	struct rendered *r = ud;
	const json_t *j = event_json(ev);

	r->same = j == event_json(ev);
	json_decref(r->first);
	r->first = j ? json_incref((json_t *)j) : NULL;
	if (j)
		r->made++;
}

static void test_serializer(void **state)
{
	_cleanup_(events_freep) struct events *b = NULL;
	struct rendered r = { 0 };
	const char *keys[3];
	const char *key;
	size_t n = 0;
	json_t *v;

	(void)state;
	assert_int_equal(events_new(&b), 0);
	assert_int_equal(events_subscribe(b, render, &r), 0);
	events_publish(b, &(struct event){ .kind = EV_DEVICE_ADDED,
					   .u.device.ibdev = "rxe7" });
	assert_non_null(r.first);
	assert_true(r.same);
	json_object_foreach(r.first, key, v)
		if (n < 3)
			keys[n++] = key;
	assert_string_equal(keys[0], "seq");
	assert_string_equal(keys[1], "time");
	assert_string_equal(keys[2], "event");
	assert_string_equal(json_string_value(json_object_get(r.first, "event")),
			    "device_added");
	assert_string_equal(
		json_string_value(json_object_get(r.first, "device")), "rxe7");
	assert_int_equal(json_integer_value(json_object_get(r.first, "seq")), 1);
	events_publish(b, &(struct event){ .kind = EV_SETTLED });
	assert_null(r.first);
	assert_int_equal(r.made, 1);
	events_unsubscribe(b, render, &r);
	/* Outside a delivery there is nothing to render. */
	assert_null(event_json(&(struct event){ .kind = EV_DEVICE_ADDED }));
}

struct queued {
	struct events_queue q;
	int refused;
};

static void enqueue(void *ud, const struct event *ev)
{
	struct queued *s = ud;
	const json_t *j = event_json(ev);

	if (j && !events_queue_push(&s->q, j, ev))
		s->refused++;
}

/* The oldest queued: its seq, as kept beside it and as its JSON says. */
static json_t *pop(struct events_queue *q)
{
	struct events_queued e;

	if (!events_queue_pop(q, &e))
		return NULL;
	assert_int_equal(json_integer_value(json_object_get(e.ev, "seq")),
			 e.seq);
	assert_string_equal(json_string_value(json_object_get(e.ev, "event")),
			    e.name);
	return e.ev;
}

static int64_t seq_of(const json_t *ev)
{
	return json_integer_value(json_object_get(ev, "seq"));
}

static void test_queue_overflow(void **state)
{
	_cleanup_(events_freep) struct events *b = NULL;
	struct queued s = { 0 };
	json_t *ev, *last;

	(void)state;
	assert_int_equal(events_new(&b), 0);
	assert_int_equal(events_queue_init(&s.q, 3), 0);
	assert_int_equal(events_subscribe(b, enqueue, &s), 0);
	publish(b, EV_PORT_ACTIVE);
	ev = pop(&s.q);
	assert_int_equal(seq_of(ev), 1);
	json_decref(ev);
	/* Wraps around the ring, then fills it. */
	for (int i = 2; i <= 6; i++)
		publish(b, EV_PORT_ERROR);
	assert_true(s.q.overflowed);
	assert_int_equal(s.refused, 2);
	assert_int_equal(s.q.n, 3);
	assert_int_equal(s.q.last_seq, 4);
	/* Room again does not take it back: the stream has a hole. */
	ev = pop(&s.q);
	assert_int_equal(seq_of(ev), 2);
	assert_false(events_queue_push(&s.q, ev,
				       &(struct event){ .kind = EV_PORT_ERROR,
							.seq = 2 }));
	json_decref(ev);
	last = events_queue_overflow(&s.q);
	assert_string_equal(json_string_value(json_object_get(last, "event")),
			    "overflow");
	assert_int_equal(json_integer_value(json_object_get(last, "last_seq")),
			 4);
	json_decref(last);
	/* A send that would block puts it back: nothing lost, nor
	 * reordered. */
	{
		struct events_queued e;

		assert_true(events_queue_pop(&s.q, &e));
		assert_int_equal(e.seq, 3);
		events_queue_unpop(&s.q, &e);
		assert_int_equal(s.q.n, 2);
	}
	for (int want = 3; want <= 4; want++) {
		ev = pop(&s.q);
		assert_int_equal(seq_of(ev), want);
		json_decref(ev);
	}
	assert_null(pop(&s.q));
	events_queue_clear(&s.q);
	/* What is still queued is let go with the queue. */
	assert_int_equal(events_queue_init(&s.q, 4), 0);
	publish(b, EV_PORT_ACTIVE);
	assert_int_equal(s.q.n, 1);
	events_unsubscribe(b, enqueue, &s);
	events_queue_clear(&s.q);
	assert_null(s.q.q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seq_and_order),
		cmocka_unit_test(test_leave_in_callback),
		cmocka_unit_test(test_nested_delivery),
		cmocka_unit_test(test_names_and_json),
		cmocka_unit_test(test_serializer),
		cmocka_unit_test(test_queue_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
