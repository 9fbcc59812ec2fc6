// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmanl_batch.h"

struct rdmanl_batch {
	pthread_t thread;
	int done_fd; /* the caller's */
	atomic_bool cancel;
	enum rdmanl_kind first;
	uint32_t *devs;
	int *errs;
	size_t n_devs;
	/* The thread's until it is joined. */
	struct rdmanl_res *recs;
	size_t n, cap;
};

static int keep(void *ud, const struct rdmanl_res *r)
{
	struct rdmanl_batch *b = ud;

	if (atomic_load(&b->cancel))
		return -ECANCELED;
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		struct rdmanl_res *more = realloc(b->recs, cap * sizeof(*more));

		if (!more)
			return -ENOMEM;
		b->recs = more;
		b->cap = cap;
	}
	b->recs[b->n++] = *r;
	return 0;
}

static void *run(void *ud)
{
	struct rdmanl_batch *b = ud;
	uint64_t one = 1;

	for (size_t d = 0; d < b->n_devs; d++)
		for (int k = (int)b->first; k < RDMANL_KINDS; k++) {
			int r = atomic_load(&b->cancel)
				    ? -ECANCELED
				    : rdmanl_dump((enum rdmanl_kind)k,
						  b->devs[d], keep, b);

			if (r < 0 && k == RDMANL_SRQ &&
			    (r == -EOPNOTSUPP || r == -EINVAL))
				r = 0; /* a kernel before SRQ dumps */
			if (r < 0) {
				b->errs[d] = r;
				break;
			}
		}
	/* An eventfd write does not fail but for an overflow. */
	(void)!write(b->done_fd, &one, sizeof(one));
	return NULL;
}

static void batch_free(struct rdmanl_batch *b)
{
	free(b->devs);
	free(b->errs);
	free(b->recs);
	free(b);
}

int rdmanl_batch_start(const uint32_t *devs, size_t n_devs,
		       enum rdmanl_kind first, int done_fd,
		       struct rdmanl_batch **out)
{
	struct rdmanl_batch *b = calloc(1, sizeof(*b));
	int r;

	if (!b)
		return -ENOMEM;
	b->first = first;
	b->n_devs = n_devs;
	atomic_init(&b->cancel, false);
	b->done_fd = done_fd;
	b->devs = calloc(n_devs + 1, sizeof(*b->devs));
	b->errs = calloc(n_devs + 1, sizeof(*b->errs));
	if (!b->devs || !b->errs) {
		batch_free(b);
		return -ENOMEM;
	}
	if (n_devs)
		memcpy(b->devs, devs, n_devs * sizeof(*devs));
	r = -pthread_create(&b->thread, NULL, run, b);
	if (r < 0) {
		batch_free(b);
		return r;
	}
	*out = b;
	return 0;
}

void rdmanl_batch_cancel(struct rdmanl_batch *b)
{
	if (b)
		atomic_store(&b->cancel, true);
}

int rdmanl_batch_finish(struct rdmanl_batch *b, struct rdmanl_res **recs,
			size_t *n, int *errs)
{
	bool cancelled;

	pthread_join(b->thread, NULL);
	cancelled = atomic_load(&b->cancel);
	if (!cancelled) {
		*recs = b->recs;
		*n = b->n;
		b->recs = NULL;
		memcpy(errs, b->errs, b->n_devs * sizeof(*errs));
	}
	batch_free(b);
	return cancelled ? -ECANCELED : 0;
}
