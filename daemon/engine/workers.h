/* SPDX-License-Identifier: MIT */
/*
 * A pool of worker threads for slow work (creating memory, registering
 * it, other verbs calls), so that the event loop keeps answering. Jobs
 * run on a worker; their results come back to the loop through an
 * eventfd, where done() runs: all state is still changed by the loop
 * alone (udevd's workers, SPDK's message passing).
 */
#ifndef RDMAD_WORKERS_H
#define RDMAD_WORKERS_H

#include <stdbool.h>
#include <systemd/sd-event.h>

struct work {
	/* On a worker thread: must not touch what the loop may change. */
	void (*run)(struct work *w);
	/* On the loop, once run returned, or without run when cancelled. */
	void (*done)(struct work *w, bool cancelled);
	const void *owner; /* what workers_drain() matches */
	struct work *next; /* private to the pool */
};

struct workers;

/* n threads (0: two per online CPU); results come back on e. */
int workers_new(sd_event *e, unsigned int n, struct workers **out);
/* Queue w (FIFO). Never fails: w is the caller's memory. */
void workers_submit(struct workers *p, struct work *w);
/* Between plug and unplug (nested), submitted jobs are held and then
 * queued together: one lock and one wake-up for a batch. Loop only. */
void workers_plug(struct workers *p);
void workers_unplug(struct workers *p);
/*
 * Take back the queued jobs of owner (their done() runs with cancelled)
 * and wait for its running ones; their done() runs before this returns.
 * Jobs of other owners are left to the loop.
 */
void workers_drain(struct workers *p, const void *owner);
/* Jobs queued or running. */
unsigned int workers_busy(const struct workers *p);
unsigned int workers_threads(const struct workers *p);
/* The loop whose done callbacks it runs. */
sd_event *workers_event(const struct workers *p);
/* Cancel what is queued, wait for what runs, stop the threads. */
struct workers *workers_free(struct workers *p);

#endif
