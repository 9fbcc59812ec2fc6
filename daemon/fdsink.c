// SPDX-License-Identifier: MIT
/* Closing fds off the loop (fdsink.h). */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fdsink.h"
#include "log.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;

/* The queue: a ring of cap entries, n of them from head. */
static int *ring;
static size_t cap, head, n;

/* The threads: when each began the close it is in (0: idle). */
static uint64_t busy_since[FDSINK_THREADS_MAX];
static size_t threads, kept_open;
static unsigned long long closed;
static bool warned;

static uint64_t now_msec(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void *closer(void *arg)
{
	size_t me = (size_t)(uintptr_t)arg;

	pthread_mutex_lock(&lock);
	for (;;) {
		int fd;

		while (!n)
			pthread_cond_wait(&work, &lock);
		fd = ring[head];
		head = (head + 1) % cap;
		n--;
		busy_since[me] = now_msec();
		pthread_mutex_unlock(&lock);
		close(fd);
		pthread_mutex_lock(&lock);
		busy_since[me] = 0;
		closed++;
	}
	return NULL;
}

/* Room for one more in the ring (lock held). */
static bool grow(void)
{
	size_t ncap = cap ? cap * 2 : 64;
	int *r;

	if (n < cap)
		return true;
	if (cap >= FDSINK_QUEUE_MAX)
		return false;
	r = malloc(ncap * sizeof(*r));
	if (!r)
		return false;
	for (size_t i = 0; i < n; i++)
		r[i] = ring[(head + i) % cap];
	free(ring);
	ring = r;
	cap = ncap;
	head = 0;
	return true;
}

/* Is a thread free, or soon to be (lock held)? */
static bool one_free(void)
{
	uint64_t now = now_msec();

	for (size_t i = 0; i < threads; i++)
		if (!busy_since[i] || now - busy_since[i] < FDSINK_STUCK_MSEC)
			return true;
	return false;
}

/* Another thread (lock held): with every signal blocked, the loop's. */
static void start_one(void)
{
	sigset_t all, was;
	pthread_attr_t a;
	pthread_t t;

	if (threads >= FDSINK_THREADS_MAX || pthread_attr_init(&a))
		return;
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &was);
	if (pthread_create(&t, &a, closer, (void *)(uintptr_t)threads) == 0)
		threads++;
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	pthread_attr_destroy(&a);
}

void fdsink_close(int fd)
{
	if (fd < 0)
		return;
	pthread_mutex_lock(&lock);
	if (!one_free() || n >= threads)
		start_one();
	if (!threads || !grow()) {
		/* No thread to close it, nor room to wait: kept open, never
		 * closed here. */
		kept_open++;
		if (!warned)
			log_warn(0, "closing the fds clients sent is stuck: "
				    "fds are kept open from now on");
		warned = true;
	} else {
		ring[(head + n) % cap] = fd;
		n++;
		pthread_cond_signal(&work);
	}
	pthread_mutex_unlock(&lock);
}

void fdsink_close_all(int *fds, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		fdsink_close(fds[i]);
		fds[i] = -1;
	}
}

void fdsink_stats(struct fdsink_stats *st)
{
	pthread_mutex_lock(&lock);
	*st = (struct fdsink_stats){ .queued = n, .threads = threads,
				     .kept_open = kept_open,
				     .closed = closed };
	for (size_t i = 0; i < threads; i++)
		st->busy += busy_since[i] != 0;
	pthread_mutex_unlock(&lock);
}
