// SPDX-License-Identifier: MIT
/* The worker pool: jobs run off the loop and come back to it; draining an
 * owner cancels what is queued, waits for what runs, and leaves other
 * owners' jobs alone; freeing the pool leaves nothing behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <time.h>

#include "util.h"
#include "workers.h"

struct job {
	struct work w;
	int sleep_ms;
	int ran;       /* on the worker */
	int done;      /* on the loop */
	int cancelled;
	pthread_t thread;
	int *order;    /* done() appends its index here */
	int *n_order;
	int index;
};

static pthread_t loop_thread;

static void job_run(struct work *w)
{
	struct job *j = container_of(w, struct job, w);
	struct timespec ts = { 0, (long)j->sleep_ms * 1000000L };

	__atomic_store_n(&j->thread, pthread_self(), __ATOMIC_RELAXED);
	nanosleep(&ts, NULL);
	j->ran++;
}

static void job_done(struct work *w, bool cancelled)
{
	struct job *j = container_of(w, struct job, w);

	/* Results come back on the loop's own thread. */
	assert_true(pthread_equal(pthread_self(), loop_thread));
	j->done++;
	j->cancelled += cancelled;
	if (j->order)
		j->order[(*j->n_order)++] = j->index;
}

static void job_init(struct job *j, const void *owner, int sleep_ms)
{
	*j = (struct job){ .sleep_ms = sleep_ms };
	j->w = (struct work){ .run = job_run, .done = job_done,
			      .owner = owner };
}

/* A pool of n threads on a new loop, run from this thread. */
static struct workers *pool(unsigned int n, sd_event **e)
{
	struct workers *p;

	loop_thread = pthread_self();
	assert_int_equal(sd_event_new(e), 0);
	assert_int_equal(workers_new(*e, n, &p), 0);
	return p;
}

/* Run the loop until every job came back. */
static void run_until_idle(sd_event *e, struct workers *p)
{
	while (workers_busy(p))
		assert_true(sd_event_run(e, 1000000) >= 0);
}

static void test_jobs_run_on_workers_and_come_back(void **state)
{
	struct job jobs[64];
	struct workers *p;
	sd_event *e;

	(void)state;
	p = pool(3, &e);
	assert_int_equal(workers_threads(p), 3);
	for (size_t i = 0; i < ARRAY_SIZE(jobs); i++) {
		job_init(&jobs[i], NULL, (int)(i % 3));
		workers_submit(p, &jobs[i].w);
	}
	run_until_idle(e, p);
	for (size_t i = 0; i < ARRAY_SIZE(jobs); i++) {
		assert_int_equal(jobs[i].ran, 1);
		assert_int_equal(jobs[i].done, 1);
		assert_int_equal(jobs[i].cancelled, 0);
		assert_false(pthread_equal(jobs[i].thread, loop_thread));
	}
	workers_free(p);
	sd_event_unref(e);
}

static void test_drain_cancels_queued_waits_for_running(void **state)
{
	int a, b, order[16], n_order = 0;
	struct job slow, queued[4], other;
	struct workers *p;
	sd_event *e;

	(void)state;
	loop_thread = pthread_self();
	assert_int_equal(sd_event_new(&e), 0);
	/* One thread: the slow job runs, the rest wait in the queue. */
	assert_int_equal(workers_new(e, 1, &p), 0);
	job_init(&slow, &a, 200);
	workers_submit(p, &slow.w);
	for (int i = 0; i < 4; i++) {
		job_init(&queued[i], &a, 0);
		queued[i].order = order;
		queued[i].n_order = &n_order;
		queued[i].index = i;
		workers_submit(p, &queued[i].w);
	}
	job_init(&other, &b, 0);
	workers_submit(p, &other.w);
	/* Let the slow job start. */
	while (!__atomic_load_n(&slow.thread, __ATOMIC_RELAXED))
		sched_yield();

	workers_drain(p, &a);
	/* The running one finished and came back; the queued ones were
	 * never run, and came back cancelled, in order. */
	assert_int_equal(slow.ran, 1);
	assert_int_equal(slow.done, 1);
	assert_int_equal(slow.cancelled, 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(queued[i].ran, 0);
		assert_int_equal(queued[i].done, 1);
		assert_int_equal(queued[i].cancelled, 1);
		assert_int_equal(order[i], i);
	}
	/* Another owner's job is left to the loop. */
	assert_int_equal(other.done, 0);
	run_until_idle(e, p);
	assert_int_equal(other.ran, 1);
	assert_int_equal(other.done, 1);
	workers_free(p);
	sd_event_unref(e);
}

static void test_free_cancels_what_is_queued(void **state)
{
	struct job jobs[8];
	struct workers *p;
	sd_event *e;
	int cancelled = 0;

	(void)state;
	p = pool(1, &e);
	for (size_t i = 0; i < ARRAY_SIZE(jobs); i++) {
		job_init(&jobs[i], NULL, 20);
		workers_submit(p, &jobs[i].w);
	}
	workers_free(p);
	for (size_t i = 0; i < ARRAY_SIZE(jobs); i++) {
		/* Each came back exactly once: run, or cancelled. */
		assert_int_equal(jobs[i].done, 1);
		assert_int_equal(jobs[i].ran + jobs[i].cancelled, 1);
		cancelled += jobs[i].cancelled;
	}
	assert_true(cancelled >= 1);
	sd_event_unref(e);
}

/*
 * A done() that drains another owner (as a reload that cancels a
 * creation does) while that owner's results are back but not yet seen:
 * the drain finishes them, each exactly once, and the loop does not
 * touch them afterwards (the owner may free them: here they are
 * poisoned once drained). The reload regression of stop 19's CI.
 */
static struct workers *drain_pool;
static struct job *drained;
static size_t n_drained;

static void draining_done(struct work *w, bool cancelled)
{
	job_done(w, cancelled);
	workers_drain(drain_pool, &n_drained);
	for (size_t i = 0; i < n_drained; i++) {
		assert_int_equal(drained[i].done, 1);
		/* Freed, as far as the pool may know. */
		drained[i].w.done = NULL;
		drained[i].w.next = (struct work *)0x1;
	}
}

static void test_done_may_drain_results_not_yet_seen(void **state)
{
	struct job first, others[16];
	struct timespec ts = { 0, 200 * 1000000L };
	sd_event *e;

	(void)state;
	drain_pool = pool(2, &e);
	drained = others;
	n_drained = ARRAY_SIZE(others);
	job_init(&first, NULL, 0);
	first.w.done = draining_done;
	workers_submit(drain_pool, &first.w);
	for (size_t i = 0; i < ARRAY_SIZE(others); i++) {
		/* Back after first: behind it on the list of results. */
		job_init(&others[i], &n_drained, 1);
		workers_submit(drain_pool, &others[i].w);
	}
	/* All are back before the loop looks: one batch of results. */
	nanosleep(&ts, NULL);
	run_until_idle(e, drain_pool);
	assert_int_equal(first.done, 1);
	for (size_t i = 0; i < ARRAY_SIZE(others); i++)
		assert_int_equal(others[i].ran, 1);
	drain_pool = workers_free(drain_pool);
	sd_event_unref(e);
}

/* Plugged, jobs wait on the loop's side: none runs before unplug (nested
 * plugs: the last one), a drain meanwhile cancels its owner's, and the
 * rest run once unplugged. */
static void test_plug_holds_jobs_until_unplug(void **state)
{
	struct job a[3], b[3];
	struct timespec ts = { 0, 50 * 1000000L };
	struct workers *p;
	sd_event *e;
	int owner_a, owner_b;

	(void)state;
	p = pool(2, &e);
	workers_plug(p);
	workers_plug(p);
	for (size_t i = 0; i < ARRAY_SIZE(a); i++) {
		job_init(&a[i], &owner_a, 0);
		job_init(&b[i], &owner_b, 0);
		workers_submit(p, &a[i].w);
		workers_submit(p, &b[i].w);
	}
	assert_int_equal(workers_busy(p), 6);
	workers_unplug(p);
	nanosleep(&ts, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(a); i++)
		assert_int_equal(a[i].ran + b[i].ran, 0);
	workers_drain(p, &owner_a);
	for (size_t i = 0; i < ARRAY_SIZE(a); i++) {
		assert_int_equal(a[i].done, 1);
		assert_int_equal(a[i].cancelled, 1);
		assert_int_equal(a[i].ran, 0);
	}
	assert_int_equal(workers_busy(p), 3);
	workers_unplug(p);
	run_until_idle(e, p);
	for (size_t i = 0; i < ARRAY_SIZE(b); i++) {
		assert_int_equal(b[i].ran, 1);
		assert_int_equal(b[i].done, 1);
		assert_int_equal(b[i].cancelled, 0);
		assert_int_equal(a[i].done, 1);
	}
	workers_free(p);
	sd_event_unref(e);
}

/* What is still plugged when the pool goes is cancelled, not lost. */
static void test_free_cancels_what_is_plugged(void **state)
{
	struct job jobs[4];
	struct workers *p;
	sd_event *e;

	(void)state;
	p = pool(1, &e);
	workers_plug(p);
	for (size_t i = 0; i < ARRAY_SIZE(jobs); i++) {
		job_init(&jobs[i], NULL, 0);
		workers_submit(p, &jobs[i].w);
	}
	workers_free(p);
	for (size_t i = 0; i < ARRAY_SIZE(jobs); i++) {
		assert_int_equal(jobs[i].done, 1);
		assert_int_equal(jobs[i].cancelled, 1);
	}
	sd_event_unref(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jobs_run_on_workers_and_come_back),
		cmocka_unit_test(test_drain_cancels_queued_waits_for_running),
		cmocka_unit_test(test_free_cancels_what_is_queued),
		cmocka_unit_test(test_done_may_drain_results_not_yet_seen),
		cmocka_unit_test(test_plug_holds_jobs_until_unplug),
		cmocka_unit_test(test_free_cancels_what_is_plugged),
	};

	return cmocka_run_group_tests_name("workers", tests, NULL, NULL);
}
