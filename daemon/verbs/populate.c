// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "populate.h"

#ifndef MADV_POPULATE_WRITE /* Linux 5.14 */
#define MADV_POPULATE_WRITE 23
#endif

/* A chunk: a huge page (THP's), or 512 small ones. MADV_POPULATE_WRITE
 * holds the mmap lock for reading through a chunk, and the loop's
 * mmap()s and brk()s wait for it (and make later faults wait behind
 * them): as long as ib_umem_get() holds it between two batches of
 * pins, so the loop answers as promptly as during a registration.
 * Large enough that taking one costs nothing next to its faults. */
#define CHUNK_BYTES (2ull << 20)
/* A thread more is kept only if the rate over a window (this many
 * chunks per thread) grows by GAIN_PCT percent with it. */
#define WINDOW_CHUNKS 8
#define GAIN_PCT 20
#define MAX_THREADS 64

/* Threads populating now, every memory's together, and the most. */
static atomic_uint running;
static unsigned int most = 1;

void populate_set_threads(unsigned int n)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (cpus < 1)
		cpus = 1;
	/* More threads than CPUs only take turns zeroing. */
	most = n && n < (unsigned long)cpus ? n : (unsigned int)cpus;
	if (most > MAX_THREADS)
		most = MAX_THREADS;
}

unsigned int populate_threads(void)
{
	return most;
}

struct fill {
	char *addr;
	size_t len, chunk, n_chunks, page;
	atomic_size_t next;
	atomic_size_t chunks_done;
	/* Thread i (0: the caller) takes chunks while i < threads. */
	atomic_uint threads;
	_Atomic uint64_t *done;
	const atomic_bool *stop;
	atomic_int err; /* the first failure, -errno */
};

struct helper {
	struct fill *f;
	unsigned int index;
	pthread_t thread;
};

/* Kernels before 5.14: a write to every page, one that changes nothing
 * even if another process writes there (a file backing). */
static int touch(char *p, size_t len, size_t page)
{
	for (size_t off = 0; off < len; off += page)
		__atomic_fetch_add(p + off, 0, __ATOMIC_RELAXED);
	return 0;
}

static void fail(struct fill *f, int err)
{
	int none = 0;

	atomic_compare_exchange_strong(&f->err, &none, err);
}

/* One chunk more, if there is one for thread index: false when done. */
static bool fill_one(struct fill *f, unsigned int index)
{
	size_t i, len;
	char *p;
	int r = 0;

	if (index >= atomic_load(&f->threads) || atomic_load(&f->err))
		return false;
	if (f->stop && atomic_load(f->stop)) {
		fail(f, -ECANCELED);
		return false;
	}
	i = atomic_fetch_add(&f->next, 1);
	if (i >= f->n_chunks)
		return false;
	p = f->addr + i * f->chunk;
	len = f->len - i * f->chunk;
	if (len > f->chunk)
		len = f->chunk;
	if (madvise(p, len, MADV_POPULATE_WRITE) < 0)
		r = errno == EINVAL ? touch(p, len, f->page) : -errno;
	if (r < 0) {
		fail(f, r);
		return false;
	}
	if (f->done)
		atomic_fetch_add(f->done, len);
	atomic_fetch_add(&f->chunks_done, 1);
	return true;
}

static void *helper_run(void *arg)
{
	struct helper *h = arg;

	while (fill_one(h->f, h->index))
		;
	return NULL;
}

/* Take up to want more threads from the budget; returns how many. */
static unsigned int take_threads(unsigned int want)
{
	unsigned int now = atomic_load(&running);

	for (;;) {
		unsigned int got = now < most ? most - now : 0;

		if (got > want)
			got = want;
		if (!got ||
		    atomic_compare_exchange_weak(&running, &now, now + got))
			return got;
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The budget this population does not use goes back to the others. */
static void give_back(struct fill *f, unsigned int *got)
{
	unsigned int keep = atomic_load(&f->threads);

	if (*got > keep) {
		atomic_fetch_sub(&running, *got - keep);
		*got = keep;
	}
}

/* After a window of n + 1 threads at rate: keep the last helper and add
 * one more, or stop it. True once the number of threads is settled. */
static bool decide(struct fill *f, struct helper *h, unsigned int *n,
		   unsigned int *got, double rate, double *rate_before)
{
	if (*n && rate * 100 < *rate_before * (100 + GAIN_PCT)) {
		/* The last helper bought nothing: it stops. */
		atomic_store(&f->threads, *n);
		give_back(f, got);
		return true;
	}
	*rate_before = rate;
	if (*n + 1 >= *got)
		return true;
	h[*n] = (struct helper){ .f = f, .index = *n + 1 };
	atomic_store(&f->threads, *n + 2);
	if (pthread_create(&h[*n].thread, NULL, helper_run, &h[*n])) {
		atomic_store(&f->threads, *n + 1);
		give_back(f, got);
		return true;
	}
	(*n)++;
	return false;
}

/*
 * The caller's side: it populates too, and adds helper threads one at a
 * time while each adds throughput. Where the CPUs are busy elsewhere, or
 * memory bandwidth is the limit already (or page faults of one mm
 * serialise, as under emulation), another thread only adds contention:
 * the last one added then stops after its chunk.
 */
static void ramp(struct fill *f, struct helper *h, unsigned int *n,
		 unsigned int *got)
{
	double t0 = now_s(), rate_before = 0;
	size_t c0 = 0;
	bool settled = *got < 2;

	while (fill_one(f, 0)) {
		size_t c = atomic_load(&f->chunks_done);
		double t, rate;

		if (settled || c - c0 < (size_t)WINDOW_CHUNKS * (*n + 1))
			continue;
		t = now_s();
		rate = (double)(c - c0) / (t - t0 > 1e-9 ? t - t0 : 1e-9);
		settled = decide(f, h, n, got, rate, &rate_before);
		t0 = now_s();
		c0 = atomic_load(&f->chunks_done);
	}
}
int populate(void *addr, size_t len, size_t align, _Atomic uint64_t *done,
	     const atomic_bool *stop)
{
	struct fill f = { .addr = addr, .len = len, .done = done,
			  .stop = stop };
	struct helper h[MAX_THREADS];
	unsigned int n = 0, got;

	f.page = (size_t)sysconf(_SC_PAGESIZE);
	if (align > f.page)
		f.page = align;
	f.chunk = (CHUNK_BYTES + f.page - 1) / f.page * f.page;
	f.n_chunks = (len + f.chunk - 1) / f.chunk;
	atomic_init(&f.threads, 1);
	/* This thread counts in the budget when there is room; it works
	 * anyway: a memory is populated even while others use it all. */
	got = take_threads(f.n_chunks < MAX_THREADS ? (unsigned int)f.n_chunks
						    : MAX_THREADS);
	ramp(&f, h, &n, &got);
	for (unsigned int i = 0; i < n; i++)
		pthread_join(h[i].thread, NULL);
	atomic_fetch_sub(&running, got);
	return atomic_load(&f.err);
}
