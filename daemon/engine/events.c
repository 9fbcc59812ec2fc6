// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "events.h"

struct subscriber {
	events_fn fn;
	void *ud;
};

struct events {
	uint64_t seq;
	struct subscriber *subs;
	size_t n_subs;
	/* While publishing: the next subscriber to call (unsubscribing
	 * moves those behind it). */
	size_t next;
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
		if (i < b->next)
			b->next--;
		return;
	}
}

uint64_t events_last_seq(const struct events *b)
{
	return b ? b->seq : 0;
}

/* "2026-11-26T07:06:32.123Z". The part to the second is formatted when
 * the second changes: a burst of events (attaches, progress) formatted
 * the date each time, most of publishing one. */
static json_t *timestamp(void)
{
	static __thread time_t cached_sec = -1;
	static __thread char date[64];
	static __thread size_t n;
	struct timespec ts;
	char buf[96];
	long ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec != cached_sec) {
		struct tm tm;

		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
		cached_sec = ts.tv_sec;
	}
	ms = ts.tv_nsec / 1000000;
	memcpy(buf, date, n);
	buf[n] = '.';
	buf[n + 1] = (char)('0' + ms / 100);
	buf[n + 2] = (char)('0' + ms / 10 % 10);
	buf[n + 3] = (char)('0' + ms % 10);
	buf[n + 4] = 'Z';
	return json_stringn(buf, n + 5);
}

int64_t events_publish(struct events *b, const char *name, json_t *body)
{
	json_t *ev;

	if (body && !json_is_object(body)) {
		json_decref(body);
		return -EINVAL;
	}
	if (!b) {
		json_decref(body);
		return 0;
	}
	/* seq, time and event first: a reader sees what it is at once. */
	ev = json_pack("{s:I, s:o, s:s}", "seq", (json_int_t)(b->seq + 1),
		       "time", timestamp(), "event", name);
	if (!ev || (body && json_object_update(ev, body) < 0)) {
		json_decref(ev);
		json_decref(body);
		return -ENOMEM;
	}
	json_decref(body);
	b->seq++;
	for (b->next = 0; b->next < b->n_subs;) {
		struct subscriber s = b->subs[b->next++];

		s.fn(s.ud, ev);
	}
	json_decref(ev);
	return (int64_t)b->seq;
}

int64_t events_publishf(struct events *b, const char *name, const char *fmt,
			...)
{
	json_error_t err;
	json_t *body;
	va_list ap;

	if (!b)
		return 0; /* nobody to build it for */
	va_start(ap, fmt);
	body = json_vpack_ex(&err, 0, fmt, ap);
	va_end(ap);
	if (!body)
		return -ENOMEM;
	return events_publish(b, name, body);
}

/* ---- a subscriber's queue ---- */

int events_queue_init(struct events_queue *q, size_t cap)
{
	*q = (struct events_queue){ .cap = cap ? cap : 1 };
	q->ev = calloc(q->cap, sizeof(*q->ev));
	return q->ev ? 0 : -ENOMEM;
}

void events_queue_clear(struct events_queue *q)
{
	json_t *ev;

	while ((ev = events_queue_pop(q)))
		json_decref(ev);
	free(q->ev);
	*q = (struct events_queue){ 0 };
}

bool events_queue_push(struct events_queue *q, const json_t *ev)
{
	if (q->overflowed)
		return false;
	if (q->n == q->cap) {
		q->overflowed = true;
		return false;
	}
	q->ev[(q->head + q->n++) % q->cap] = json_incref((json_t *)ev);
	q->last_seq = (uint64_t)json_integer_value(json_object_get(ev, "seq"));
	return true;
}

json_t *events_queue_pop(struct events_queue *q)
{
	json_t *ev;

	if (!q->n)
		return NULL;
	ev = q->ev[q->head];
	q->ev[q->head] = NULL;
	q->head = (q->head + 1) % q->cap;
	q->n--;
	return ev;
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
