// SPDX-License-Identifier: MIT
#include <stdio.h>

#include "log.h"
#include "mcast.h"
#include "objects.h"
#include "reclaim.h"
#include "target.h"

/* Handles of each kind, a growing array apiece. */
struct sets {
	uint32_t *h[UH_KINDS];
	size_t n[UH_KINDS], cap[UH_KINDS];
	bool short_of_memory; /* a handle could not be added */
};

/* A leftover and when it was first seen. */
struct seen {
	uint32_t h;
	uint64_t since; /* CLOCK_MONOTONIC usec */
};

struct reclaim {
	struct sets first; /* at the scan's start */
	bool looked;
	struct seen *cand[UH_KINDS]; /* leftovers waiting */
	size_t n_cand[UH_KINDS];
	unsigned int stuck;
};

static void sets_clear(struct sets *s)
{
	for (int k = 0; k < UH_KINDS; k++)
		free(s->h[k]);
	*s = (struct sets){ .n = { 0 } };
}

static void sets_add(void *ud, enum uhandle_kind k, uint32_t h)
{
	struct sets *s = ud;

	if (s->n[k] == s->cap[k]) {
		size_t cap = s->cap[k] ? s->cap[k] * 2 : 16;
		uint32_t *n = realloc(s->h[k], cap * sizeof(*n));

		if (!n) {
			s->short_of_memory = true;
			return;
		}
		s->h[k] = n;
		s->cap[k] = cap;
	}
	s->h[k][s->n[k]++] = h;
}

/* The daemon's own handles in p's context, sorted. false without
 * memory for them all: nothing may be reclaimed then. */
static bool own(const struct profile *p, struct sets *s)
{
	const struct object *lists[2] = { p->objects, p->draining };
	size_t counts[2] = { p->n_objects, p->n_draining };

	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < counts[l]; i++) {
			const struct object *o = &lists[l][i];
			enum uhandle_kind k;
			uint32_t h;

			if (object_handle(o, &k, &h))
				sets_add(s, k, h);
			else if (o->kind == OBJ_TARGET && o->u.target)
				target_handles(o->u.target, sets_add, s);
			else if (o->kind == OBJ_MCAST && o->u.mcast)
				mcast_handles(o->u.mcast, sets_add, s);
		}
	for (int k = 0; k < UH_KINDS; k++)
		uhandle_sort(s->h[k], s->n[k]);
	return !s->short_of_memory;
}

/* Every kind's handles in the file. A kind the device has not (rxe
 * has no device memory nor XRC domains) lists none; false when a kind
 * cannot be listed in full. */
static bool list_all(int fd, struct sets *s)
{
	for (int k = 0; k < UH_KINDS; k++) {
		int complete, r;

		r = uhandle_list(fd, (enum uhandle_kind)k, &s->h[k], &s->n[k],
				 &complete);
		if (r == -ENOENT || r == -EINVAL || r == -EOPNOTSUPP)
			continue;
		if (r < 0 || !complete)
			return false;
		s->cap[k] = s->n[k];
	}
	return true;
}

static bool shareable(const struct profile *p)
{
	return p->ctx && !p->import_err && p->conf;
}

void reclaim_begin(struct profile *p)
{
	struct reclaim *r = p->reclaim;

	if (!shareable(p))
		return;
	if (!r && !(r = p->reclaim = calloc(1, sizeof(*r))))
		return;
	sets_clear(&r->first);
	r->looked = list_all(p->ctx->cmd_fd, &r->first);
}

/* When h of kind k was first seen a leftover (now if it was not). */
static uint64_t since(const struct reclaim *r, int k, uint32_t h, uint64_t now)
{
	for (size_t i = 0; i < r->n_cand[k]; i++)
		if (r->cand[k][i].h == h)
			return r->cand[k][i].since;
	return now;
}

/*
 * The leftovers of kind k now: in both looks, not ours; none when the
 * census cannot vouch that they are all a dead process's (then they
 * count as stuck).
 */
static size_t leftovers(struct reclaim *r, const struct sets *second,
			const struct sets *ours, int k,
			const struct reclaim_census *c, bool quiet,
			uint32_t *out)
{
	size_t n = 0;

	for (size_t i = 0; i < second->n[k]; i++) {
		uint32_t h = second->h[k][i];

		if (uhandle_in(r->first.h[k], r->first.n[k], h) &&
		    !uhandle_in(ours->h[k], ours->n[k], h))
			out[n++] = h;
	}
	if (!n)
		return 0;
	if (c->dumped[k] ? c->live[k] == 0 && n <= c->dead[k] : quiet)
		return n;
	r->stuck += (unsigned int)n;
	return 0;
}

static void destroy(struct profile *p, int k, uint32_t h)
{
	int e = uhandle_destroy(p->ctx->cmd_fd, (enum uhandle_kind)k, h);

	if (e == 0) {
		p->faults.reclaimed[k]++;
		log_info("profile %s: destroyed %s handle %u, left in the "
			 "context by a client that is gone",
			 p->conf->name, uhandle_kind_name((enum uhandle_kind)k),
			 h);
	} else if (e != -ENOENT && e != -EINVAL) {
		/* Gone meanwhile is no failure; the rest is tried again. */
		p->faults.reclaim_failed[k]++;
		log_warn(e, "profile %s: cannot destroy the leftover %s "
			    "handle %u",
			 p->conf->name, uhandle_kind_name((enum uhandle_kind)k),
			 h);
	}
}

/* Keep what waits; destroy, children first, what waited long enough. */
static bool settle(struct profile *p, struct reclaim *r, uint32_t **now_h,
		   const size_t *now_n, uint64_t now)
{
	size_t destroyed = 0;
	bool waiting = false;

	for (int k = 0; k < UH_KINDS; k++) {
		struct seen *next = calloc(now_n[k] + 1, sizeof(*next));
		size_t kept = 0;

		for (size_t i = 0; i < now_n[k]; i++) {
			uint32_t h = now_h[k][i];
			uint64_t t = since(r, k, h, now);

			if (now - t >= RECLAIM_DELAY_USEC) {
				destroy(p, k, h);
				destroyed++;
			} else if (next) {
				next[kept++] = (struct seen){ h, t };
				waiting = true;
			}
		}
		free(r->cand[k]);
		r->cand[k] = next;
		r->n_cand[k] = kept;
	}
	if (destroyed)
		log_notice("profile %s: %zu objects that clients now gone "
			   "left in its context were destroyed",
			   p->conf->name, destroyed);
	/* Either way a later scan sees how the context is now. */
	return waiting || destroyed;
}

bool reclaim_end(struct profile *p, const struct reclaim_census *c,
		 bool attached, uint64_t now)
{
	struct reclaim *r = p->reclaim;
	struct sets second = { .n = { 0 } }, ours = { .n = { 0 } };
	uint32_t *now_h[UH_KINDS] = { NULL };
	size_t now_n[UH_KINDS] = { 0 };
	bool quiet = !attached, waiting = false, ok;

	if (!r || !r->looked || !shareable(p))
		return false;
	r->looked = false;
	r->stuck = 0;
	ok = own(p, &ours) && list_all(p->ctx->cmd_fd, &second);
	for (int k = 0; k < UH_KINDS; k++)
		quiet &= c->live[k] == 0;
	for (int k = 0; ok && k < UH_KINDS; k++) {
		now_h[k] = calloc(second.n[k] + 1, sizeof(uint32_t));
		if (!now_h[k]) {
			ok = false;
			break;
		}
		now_n[k] = leftovers(r, &second, &ours, k, c, quiet, now_h[k]);
	}
	if (ok)
		waiting = settle(p, r, now_h, now_n, now);
	for (int k = 0; k < UH_KINDS; k++)
		free(now_h[k]);
	sets_clear(&second);
	sets_clear(&ours);
	sets_clear(&r->first);
	return waiting;
}

unsigned int reclaim_stuck(const struct profile *p)
{
	return p->reclaim ? p->reclaim->stuck : 0;
}

void reclaim_free(struct profile *p)
{
	struct reclaim *r = p->reclaim;

	if (!r)
		return;
	sets_clear(&r->first);
	for (int k = 0; k < UH_KINDS; k++)
		free(r->cand[k]);
	free(r);
	p->reclaim = NULL;
}
