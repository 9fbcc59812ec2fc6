// SPDX-License-Identifier: MIT
/* The event bus: seq grows by one, every subscriber hears every event in
 * order and may leave from its own callback; a subscriber's bounded
 * queue overflows once, keeps what it had, and says up to where. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "events.h"
#include "util.h"

struct heard {
	int64_t seq[16];
	char name[16][32];
	size_t n;
	struct events *b;
	bool leave;
};

static void hear(void *ud, const json_t *ev)
{
	struct heard *h = ud;

	assert_true(h->n < 16);
	h->seq[h->n] = json_integer_value(json_object_get(ev, "seq"));
	snprintf(h->name[h->n], sizeof(h->name[0]), "%s",
		 json_string_value(json_object_get(ev, "event")));
	assert_non_null(json_string_value(json_object_get(ev, "time")));
	h->n++;
	if (h->leave)
		events_unsubscribe(h->b, hear, h);
}

static void test_seq_and_order(void **state)
{
	_cleanup_(events_freep) struct events *b = NULL;
	struct heard one = { 0 }, two = { 0 };

	(void)state;
	assert_int_equal(events_new(&b), 0);
	assert_int_equal(events_last_seq(b), 0);
	assert_int_equal(events_publish(b, "before", NULL), 1);
	one.b = two.b = b;
	assert_int_equal(events_subscribe(b, hear, &one), 0);
	assert_int_equal(events_subscribe(b, hear, &two), 0);
	assert_int_equal(events_publishf(b, "port_error", "{s:s, s:i}",
					 "device", "rxe0", "port", 1),
			 2);
	assert_int_equal(events_publish(b, "reload", json_object()), 3);
	assert_int_equal(one.n, 2);
	assert_int_equal(two.n, 2);
	assert_int_equal(one.seq[0], 2);
	assert_int_equal(one.seq[1], 3);
	assert_string_equal(one.name[0], "port_error");
	assert_string_equal(two.name[1], "reload");
	/* A body that is not an object is refused, and takes no seq. */
	assert_int_equal(events_publish(b, "bad", json_integer(1)), -EINVAL);
	assert_int_equal(events_last_seq(b), 3);
	events_unsubscribe(b, hear, &one);
	assert_int_equal(events_publish(b, "x", NULL), 4);
	assert_int_equal(one.n, 2);
	assert_int_equal(two.n, 3);
	/* A NULL bus drops what is published. */
	assert_int_equal(events_publish(NULL, "x", json_object()), 0);
}

/* The first of two subscribers leaves from its callback: the second
 * still hears that event, and the first nothing after it. */
static void test_leave_in_callback(void **state)
{
	_cleanup_(events_freep) struct events *b = NULL;
	struct heard one = { 0 }, two = { 0 };

	(void)state;
	assert_int_equal(events_new(&b), 0);
	one.b = two.b = b;
	one.leave = true;
	assert_int_equal(events_subscribe(b, hear, &one), 0);
	assert_int_equal(events_subscribe(b, hear, &two), 0);
	events_publish(b, "a", NULL);
	events_publish(b, "b", NULL);
	assert_int_equal(one.n, 1);
	assert_int_equal(two.n, 2);
	assert_string_equal(two.name[0], "a");
	assert_string_equal(two.name[1], "b");
}

struct queued {
	struct events_queue q;
	int refused;
};

static void enqueue(void *ud, const json_t *ev)
{
	struct queued *s = ud;

	if (!events_queue_push(&s->q, ev))
		s->refused++;
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
	events_publish(b, "e1", NULL);
	ev = events_queue_pop(&s.q);
	assert_int_equal(json_integer_value(json_object_get(ev, "seq")), 1);
	json_decref(ev);
	/* Wraps around the ring, then fills it. */
	for (int i = 2; i <= 6; i++)
		events_publish(b, "e", NULL);
	assert_true(s.q.overflowed);
	assert_int_equal(s.refused, 2);
	assert_int_equal(s.q.n, 3);
	assert_int_equal(s.q.last_seq, 4);
	/* Room again does not take it back: the stream has a hole. */
	ev = events_queue_pop(&s.q);
	assert_int_equal(json_integer_value(json_object_get(ev, "seq")), 2);
	assert_false(events_queue_push(&s.q, ev));
	json_decref(ev);
	last = events_queue_overflow(&s.q);
	assert_string_equal(json_string_value(json_object_get(last, "event")),
			    "overflow");
	assert_int_equal(json_integer_value(json_object_get(last, "last_seq")),
			 4);
	json_decref(last);
	for (int want = 3; want <= 4; want++) {
		ev = events_queue_pop(&s.q);
		assert_int_equal(json_integer_value(json_object_get(ev, "seq")),
				 want);
		json_decref(ev);
	}
	assert_null(events_queue_pop(&s.q));
	events_queue_clear(&s.q);
	/* What is still queued is let go with the queue. */
	assert_int_equal(events_queue_init(&s.q, 4), 0);
	events_publish(b, "kept", NULL);
	assert_int_equal(s.q.n, 1);
	events_unsubscribe(b, enqueue, &s);
	events_queue_clear(&s.q);
	assert_null(s.q.ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seq_and_order),
		cmocka_unit_test(test_leave_in_callback),
		cmocka_unit_test(test_queue_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
