// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
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
}

unsigned int populate_threads(void)
{
	return most;
}

struct fill {
	char *addr;
	size_t len, chunk, n_chunks, page;
	atomic_size_t next;
	_Atomic uint64_t *done;
	const atomic_bool *stop;
	atomic_int err; /* the first failure, -errno */
};

/* Kernels before 5.14: a write to every page, one that changes nothing
 * even if another process writes there (a file backing). */
static int touch(char *p, size_t len, size_t page)
{
	for (size_t off = 0; off < len; off += page)
		__atomic_fetch_add(p + off, 0, __ATOMIC_RELAXED);
	return 0;
}

static void *fill_chunks(void *arg)
{
	struct fill *f = arg;
	size_t i;

	while ((i = atomic_fetch_add(&f->next, 1)) < f->n_chunks) {
		char *p = f->addr + i * f->chunk;
		size_t len = f->len - i * f->chunk;
		int r = 0;

		if (len > f->chunk)
			len = f->chunk;
		if (atomic_load(&f->err) || (f->stop && atomic_load(f->stop))) {
			int none = 0;

			atomic_compare_exchange_strong(&f->err, &none,
						       -ECANCELED);
			break;
		}
		if (madvise(p, len, MADV_POPULATE_WRITE) < 0)
			r = errno == EINVAL ? touch(p, len, f->page) : -errno;
		if (r < 0) {
			int none = 0;

			atomic_compare_exchange_strong(&f->err, &none, r);
			break;
		}
		if (f->done)
			atomic_fetch_add(f->done, len);
	}
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

int populate(void *addr, size_t len, size_t align, _Atomic uint64_t *done,
	     const atomic_bool *stop)
{
	struct fill f = { .addr = addr, .len = len, .done = done,
			  .stop = stop };
	pthread_t helpers[64];
	pthread_attr_t attr;
	unsigned int n = 0, got, want;

	f.page = (size_t)sysconf(_SC_PAGESIZE);
	if (align > f.page)
		f.page = align;
	f.chunk = (CHUNK_BYTES + f.page - 1) / f.page * f.page;
	f.n_chunks = (len + f.chunk - 1) / f.chunk;
	want = f.n_chunks < 64 ? (unsigned int)f.n_chunks : 64;
	/* This thread counts in the budget when there is room; it works
	 * anyway: a memory is populated even while others use it all. */
	got = take_threads(want);
	if (got > 1 && pthread_attr_init(&attr) == 0) {
		/* Chunk loops need little stack. */
		pthread_attr_setstacksize(&attr, 64u << 10);
		for (; n < got - 1; n++)
			if (pthread_create(&helpers[n], &attr, fill_chunks,
					   &f))
				break;
		pthread_attr_destroy(&attr);
	}
	fill_chunks(&f);
	for (unsigned int i = 0; i < n; i++)
		pthread_join(helpers[i], NULL);
	atomic_fetch_sub(&running, got);
	return atomic_load(&f.err);
}
