// SPDX-License-Identifier: MIT
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>

#include "util.h"
#include "workers.h"

struct list {
	struct work *head, *tail;
};

struct workers {
	pthread_mutex_t lock;
	pthread_cond_t work;	/* something queued, or stopping */
	pthread_cond_t finished; /* a job moved to done */
	struct list queue, done;
	/* The loop's own, no lock: results taken for this wake-up, and
	 * jobs submitted while plugged, queued together at unplug. */
	struct list batch, plugged;
	unsigned int plugs;
	struct work **running; /* per thread, NULL when idle */
	pthread_t *threads;
	unsigned int n_threads;
	unsigned int busy;
	bool stopping;
	int efd;
	sd_event_source *io;
};

static void push(struct list *l, struct work *w)
{
	w->next = NULL;
	if (l->tail)
		l->tail->next = w;
	else
		l->head = w;
	l->tail = w;
}

static struct work *pop(struct list *l)
{
	struct work *w = l->head;

	if (w) {
		l->head = w->next;
		if (!l->head)
			l->tail = NULL;
		w->next = NULL;
	}
	return w;
}

/* Append list b to list a, emptying b. */
static void splice(struct list *a, struct list *b)
{
	if (!b->head)
		return;
	if (a->tail)
		a->tail->next = b->head;
	else
		a->head = b->head;
	a->tail = b->tail;
	*b = (struct list){ 0 };
}

/* Move the jobs of owner from l to out, keeping the order of both. */
static void take_owned(struct list *l, const void *owner, struct list *out)
{
	struct list keep = { 0 };
	struct work *w;

	while ((w = pop(l)))
		push(w->owner == owner ? out : &keep, w);
	*l = keep;
}

struct thread_arg {
	struct workers *p;
	unsigned int slot;
};

static void *worker_main(void *ud)
{
	struct thread_arg *a = ud;
	struct workers *p = a->p;
	unsigned int slot = a->slot;

	free(a);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct work *w;
		bool wake;

		while (!p->queue.head && !p->stopping)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->stopping)
			break;
		w = pop(&p->queue);
		p->running[slot] = w;
		pthread_mutex_unlock(&p->lock);
		w->run(w);
		pthread_mutex_lock(&p->lock);
		p->running[slot] = NULL;
		/* One wake-up per batch of results, not one per job. */
		wake = !p->done.head;
		push(&p->done, w);
		pthread_cond_broadcast(&p->finished);
		if (wake) {
			uint64_t one = 1;

			(void)!write(p->efd, &one, sizeof(one));
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static void finish(struct workers *p, struct list *l, bool cancelled)
{
	struct work *w;

	while ((w = pop(l))) {
		__atomic_sub_fetch(&p->busy, 1, __ATOMIC_RELAXED);
		w->done(w, cancelled);
	}
}

/* How many results one wake-up of the loop takes: the rest wait for the
 * next turn, after what else is due (REST, the control socket). */
#define RESULTS_PER_WAKEUP 64

/*
 * Up to RESULTS_PER_WAKEUP results are taken under one lock, then each
 * done() runs in turn, popped from the batch just before: a done() that
 * drains an owner (workers_drain()) takes that owner's results still in
 * the batch, so none is run twice or after it was freed. What the
 * done()s submit goes to the workers together, at the end.
 */
static int on_results(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	struct workers *p = ud;
	struct work *w;
	bool more;
	uint64_t n;

	(void)s;
	(void)revents;
	(void)!read(fd, &n, sizeof(n));
	pthread_mutex_lock(&p->lock);
	for (unsigned int i = 0; i < RESULTS_PER_WAKEUP && p->done.head; i++)
		push(&p->batch, pop(&p->done));
	/* Workers only wake us when the list was empty. */
	more = p->done.head != NULL;
	pthread_mutex_unlock(&p->lock);
	if (more) {
		uint64_t one = 1;

		(void)!write(p->efd, &one, sizeof(one));
	}
	workers_plug(p);
	while ((w = pop(&p->batch))) {
		__atomic_sub_fetch(&p->busy, 1, __ATOMIC_RELAXED);
		w->done(w, false);
	}
	workers_unplug(p);
	return 0;
}

int workers_new(sd_event *e, unsigned int n, struct workers **out)
{
	struct workers *p = calloc(1, sizeof(*p));
	long cpus;
	int r = 0;

	if (!p)
		return -ENOMEM;
	/* Two per CPU: a registration spends much of its time blocked in
	 * the kernel (the address space's lock, pinning), and a CPU whose
	 * worker waits there has nothing else to run. Measured on 10k PDs
	 * + 10k MRs (2 CPUs): 1 worker 4.6-5.2 s, 2 4.1-4.6 s, 3, 4 or 8
	 * 3.0-3.5 s; big registrations are one job per MR either way. */
	if (!n) {
		cpus = sysconf(_SC_NPROCESSORS_ONLN);
		n = cpus > 0 ? 2 * (unsigned int)cpus : 2;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->finished, NULL);
	p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->threads = calloc(n, sizeof(*p->threads));
	p->running = calloc(n, sizeof(*p->running));
	if (p->efd < 0 || !p->threads || !p->running) {
		r = p->efd < 0 ? -errno : -ENOMEM;
		workers_free(p);
		return r;
	}
	r = sd_event_add_io(e, &p->io, p->efd, EPOLLIN, on_results, p);
	if (r < 0) {
		workers_free(p);
		return r;
	}
	/* Signals are the loop's (signalfd): workers never take one. */
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned int i = 0; i < n; i++) {
		struct thread_arg *a = malloc(sizeof(*a));

		if (a)
			*a = (struct thread_arg){ p, i };
		r = a ? pthread_create(&p->threads[i], NULL, worker_main, a)
		      : ENOMEM;
		if (r) {
			free(a);
			break;
		}
		/* What `rdma resource show` and ps call the objects' maker. */
		pthread_setname_np(p->threads[i], "rdmad-worker");
		p->n_threads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		workers_free(p);
		return -r;
	}
	*out = p;
	return 0;
}

void workers_submit(struct workers *p, struct work *w)
{
	__atomic_add_fetch(&p->busy, 1, __ATOMIC_RELAXED);
	if (p->plugs) {
		push(&p->plugged, w);
		return;
	}
	pthread_mutex_lock(&p->lock);
	push(&p->queue, w);
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
}

void workers_plug(struct workers *p)
{
	p->plugs++;
}

void workers_unplug(struct workers *p)
{
	bool one;

	if (--p->plugs || !p->plugged.head)
		return;
	one = p->plugged.head == p->plugged.tail;
	pthread_mutex_lock(&p->lock);
	splice(&p->queue, &p->plugged);
	/* One job wakes one thread; more may keep every thread busy. */
	if (one)
		pthread_cond_signal(&p->work);
	else
		pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
}

static bool runs_owned(const struct workers *p, const void *owner)
{
	for (unsigned int i = 0; i < p->n_threads; i++)
		if (p->running[i] && p->running[i]->owner == owner)
			return true;
	return false;
}

void workers_drain(struct workers *p, const void *owner)
{
	struct list cancelled = { 0 }, done = { 0 }, held = { 0 };

	/* Taken for this wake-up, or not queued yet: the loop's lists. */
	take_owned(&p->batch, owner, &done);
	take_owned(&p->plugged, owner, &held);
	pthread_mutex_lock(&p->lock);
	take_owned(&p->queue, owner, &cancelled);
	while (runs_owned(p, owner))
		pthread_cond_wait(&p->finished, &p->lock);
	take_owned(&p->done, owner, &done);
	pthread_mutex_unlock(&p->lock);
	splice(&cancelled, &held);
	/* In the order they were queued: results first, they came first. */
	finish(p, &done, false);
	finish(p, &cancelled, true);
}

unsigned int workers_busy(const struct workers *p)
{
	return __atomic_load_n(&p->busy, __ATOMIC_RELAXED);
}

sd_event *workers_event(const struct workers *p)
{
	return sd_event_source_get_event(p->io);
}

unsigned int workers_threads(const struct workers *p)
{
	return p->n_threads;
}

struct workers *workers_free(struct workers *p)
{
	struct list cancelled, done;

	if (!p)
		return NULL;
	pthread_mutex_lock(&p->lock);
	cancelled = p->queue;
	p->queue = (struct list){ 0 };
	splice(&cancelled, &p->plugged);
	p->stopping = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	/* A running job finishes: a registration cannot be interrupted. */
	for (unsigned int i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	done = p->batch;
	p->batch = (struct list){ 0 };
	splice(&done, &p->done);
	finish(p, &done, false);
	finish(p, &cancelled, true);
	sd_event_source_disable_unref(p->io);
	closep(&p->efd);
	pthread_cond_destroy(&p->finished);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p->running);
	free(p);
	return NULL;
}
