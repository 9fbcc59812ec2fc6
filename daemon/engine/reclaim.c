// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>

#include "log.h"
#include "objects.h"
#include "reclaim_internal.h"

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
	size_t counts[2] = {profile_n_objects(p), profile_n_draining(p)};

	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < counts[l]; i++) {
			const struct object *o = l ? profile_draining_at(p, i)
						   : profile_object_at(p, i);
			enum uhandle_kind k;
			uint32_t h;

			if (object_handle(o, &k, &h))
				sets_add(s, k, h);
			object_held_handles(o, sets_add, s);
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

		r = reclaim_verbs_get()->list(fd, (enum uhandle_kind)k, &s->h[k], &s->n[k],
				&complete);
		if (r == -ENOENT || r == -EINVAL || r == -EOPNOTSUPP)
			continue;
		if (r < 0 || !complete)
			return false;
		s->cap[k] = s->n[k];
	}
	return true;
}

void reclaim_begin(struct profile *p, sd_event *event,
		   sd_event_io_handler_t gone, void *ud)
{
	struct reclaim *r;

	if (!reclaim_shareable(p) || !(r = reclaim_get(p)))
		return;
	r->event = event;
	r->gone = gone;
	r->ud = ud;
	/* Makers taken back from the record were watched before the loop
	 * was known: their deaths wake a scan from now on. */
	for (size_t i = 0; event && gone && i < r->n_makers; i++) {
		struct maker *m = r->makers[i];

		if (!m->es && m->pidfd >= 0 &&
		    sd_event_add_io(event, &m->es, m->pidfd, EPOLLIN, gone,
				    ud) < 0)
			m->es = NULL;
	}
	reclaim_sets_clear(&r->first);
	r->looked = list_all(profile_ctx(p)->cmd_fd, &r->first);
}

/* ---- the handles' MRs ---- */

/* The context's MR handles a scan may act on (in both looks, not the
 * daemon's), with what QUERY_MR says of each now. */
struct mr_handles {
	uint32_t *h;
	struct reclaim_key *key;
	bool *ok;    /* queried: the key is the handle's */
	bool *taken; /* matched to an attributed MR: not counting's */
	size_t n;
};

static void mr_handles_clear(struct mr_handles *mh)
{
	free(mh->h);
	free(mh->key);
	free(mh->ok);
	free(mh->taken);
	*mh = (struct mr_handles){ 0 };
}

static int mr_handles_get(struct mr_handles *mh, int fd, bool query,
			  const struct sets *first, const struct sets *second,
			  const struct sets *ours)
{
	size_t n = second->n[UH_MR];

	mh->h = calloc(n + 1, sizeof(*mh->h));
	mh->key = calloc(n + 1, sizeof(*mh->key));
	mh->ok = calloc(n + 1, sizeof(*mh->ok));
	mh->taken = calloc(n + 1, sizeof(*mh->taken));
	if (!mh->h || !mh->key || !mh->ok || !mh->taken)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint32_t h = second->h[UH_MR][i];

		if (!uhandle_in(first->h[UH_MR], first->n[UH_MR], h) ||
		    uhandle_in(ours->h[UH_MR], ours->n[UH_MR], h))
			continue;
		mh->h[mh->n] = h;
		mh->ok[mh->n] =
			query && reclaim_verbs_get()->query_mr(fd, h, &mh->key[mh->n]) == 0;
		mh->n++;
	}
	return 0;
}

static bool key_eq(const struct reclaim_key *a, const struct reclaim_key *b,
		   bool keys)
{
	return a->length == b->length &&
	       (!keys || (a->lkey == b->lkey && a->rkey == b->rkey));
}

/*
 * The handle of the attributed MR m: the one handle whose MR answers to
 * m's keys (or, keys hidden, its length), when the dumps list no other
 * MR of the context that would answer too. -1: none, or not one.
 */
static ssize_t mr_handle_of(const struct mr_handles *mh,
			    const struct made *m,
			    const struct reclaim_census *c)
{
	ssize_t found = -1;
	size_t recs = 0;

	for (size_t i = 0; i < c->n_mrs; i++)
		recs += key_eq(&c->mrs[i].key, &m->key,
			       m->keys && c->mrs[i].keys);
	if (recs != 1)
		return -1;
	for (size_t j = 0; j < mh->n; j++) {
		if (!mh->ok[j] || !key_eq(&mh->key[j], &m->key, m->keys))
			continue;
		if (found >= 0)
			return -1;
		found = (ssize_t)j;
	}
	return found;
}

static int cmp_handle(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static ssize_t mr_handle_find(const struct mr_handles *mh, uint32_t h)
{
	const uint32_t *at = mh->n ? bsearch(&h, mh->h, mh->n, sizeof(*mh->h),
					     cmp_handle)
				   : NULL;

	return at ? at - mh->h : -1;
}

/* ---- destroying ---- */

static void destroy(struct profile *p, int k, uint32_t h)
{
	int e = reclaim_verbs_get()->destroy(profile_ctx(p)->cmd_fd,
					     (enum uhandle_kind)k, h);

	if (e == 0) {
		profile_health(p)->faults.reclaimed[k]++;
		log_info("profile %s: destroyed %s handle %u, left in the "
			 "context by a client that is gone",
			 profile_name(p),
			 uhandle_kind_name((enum uhandle_kind)k), h);
	} else if (e != -ENOENT && e != -EINVAL) {
		/* Gone meanwhile is no failure; the rest is tried again. */
		profile_health(p)->faults.reclaim_failed[k]++;
		log_warn(e,
			 "profile %s: cannot destroy the leftover %s "
			 "handle %u",
			 profile_name(p),
			 uhandle_kind_name((enum uhandle_kind)k), h);
	}
}

/*
 * Destroy the MR of a maker gone (m) by its handle j, just queried.
 * Returns true when it stays for a later scan (the kernel refused: a
 * window is still bound to it, say).
 */
static bool destroy_made(struct profile *p, struct made *m,
			 const struct mr_handles *mh, size_t j)
{
	int fd = profile_ctx(p)->cmd_fd;
	uint32_t h = mh->h[j];
	struct reclaim_key now;
	int e = reclaim_verbs_get()->destroy(fd, UH_MR, h);

	if (e == 0) {
		profile_health(p)->faults.reclaimed[UH_MR]++;
		m->listed = false;
		log_info("profile %s: destroyed mr handle %u (mrn %u, lkey "
			 "0x%x, %" PRIu64 " bytes), made by process %d, "
			 "which is gone",
			 profile_name(p), h, m->mrn, mh->key[j].lkey,
			 m->key.length, (int)m->maker->pid);
		return false;
	}
	/* Refused, or gone meanwhile: the handle tells which. */
	if (reclaim_verbs_get()->query_mr(fd, h, &now) < 0 ||
	    !key_eq(&now, &mh->key[j], true)) {
		m->listed = false;
		return false;
	}
	profile_health(p)->faults.reclaim_failed[UH_MR]++;
	if (!m->refused)
		log_warn(e,
			 "profile %s: cannot destroy mr handle %u of "
			 "process %d, which is gone (tried again at the "
			 "next scans)",
			 profile_name(p), h, (int)m->maker->pid);
	m->refused = true;
	return true;
}

/*
 * The attributed MRs whose makers are gone: matched to their handles
 * (taken from counting), with census' dead count lowered for each; those
 * that have waited RECLAIM_DELAY_USEC go in settle(). Live makers' MRs
 * whose threads the dumps no longer name count as live: counting leaves
 * the kind alone then.
 */
static void match_made(struct reclaim *r, struct mr_handles *mh,
		       struct reclaim_census *c, uint64_t now)
{
	for (size_t i = 0; i < r->n_made; i++) {
		struct made *m = &r->made[i];
		ssize_t j;

		m->at = -1;
		if (!reclaim_maker_gone(m->maker)) {
			c->live[UH_MR] += m->now_tid == 0;
			continue;
		}
		/* Its thread named again, by another number: not its. */
		if (m->now_tid && m->now_tid != m->tid)
			continue;
		if (!m->due)
			m->due = now ? now : 1;
		j = mr_handle_of(mh, m, c);
		if (j < 0)
			continue;
		m->at = j;
		mh->taken[j] = true;
		if (c->dead[UH_MR])
			c->dead[UH_MR]--;
	}
}

/* The attributed MRs due: destroyed. Returns true while some wait. */
static bool settle_made(struct profile *p, struct reclaim *r,
			const struct mr_handles *mh, uint64_t now,
			size_t *destroyed)
{
	bool waiting = false;

	for (size_t i = 0; i < r->n_made; i++) {
		struct made *m = &r->made[i];

		if (!m->due || !m->listed)
			continue;
		if (m->at < 0 || now - m->due < RECLAIM_DELAY_USEC) {
			waiting = true;
			continue;
		}
		if (destroy_made(p, m, mh, (size_t)m->at))
			waiting = true;
		else
			(*destroyed)++;
	}
	return waiting;
}

/* When h of kind k was first seen a leftover (now if it was not). */
static const struct seen *seen_of(const struct reclaim *r, int k, uint32_t h)
{
	for (size_t i = 0; i < r->n_cand[k]; i++)
		if (r->cand[k][i].h == h)
			return &r->cand[k][i];
	return NULL;
}

/*
 * The leftovers of kind k now: in both looks, not ours, not an
 * attributed MR; none when the census cannot vouch that they are all a
 * dead process's (then they count as stuck).
 */
static size_t leftovers(struct reclaim *r, const struct sets *second,
			const struct sets *ours, const struct mr_handles *mh,
			int k, const struct reclaim_census *c, bool quiet,
			uint32_t *out)
{
	size_t n = 0;

	for (size_t i = 0; i < second->n[k]; i++) {
		uint32_t h = second->h[k][i];
		ssize_t j = k == UH_MR ? mr_handle_find(mh, h) : -1;

		if (uhandle_in(r->first.h[k], r->first.n[k], h) &&
		    !uhandle_in(ours->h[k], ours->n[k], h) &&
		    !(j >= 0 && mh->taken[j]) && !reclaim_claimed(r, k, h))
			out[n++] = h;
	}
	if (!n)
		return 0;
	if (c->dumped[k] ? c->live[k] == 0 && n <= c->dead[k] : quiet)
		return n;
	r->stuck += (unsigned int)n;
	return 0;
}

/* Do the dumps list, made by nobody alive, an MR with this key? */
static bool dead_mr_listed(const struct reclaim_census *c,
			   const struct reclaim_key *key)
{
	for (size_t i = 0; i < c->n_mrs; i++)
		if (!c->mrs[i].tid &&
		    key_eq(&c->mrs[i].key, key, c->mrs[i].keys))
			return true;
	return false;
}

/*
 * A counting leftover MR, h: still the MR it was when first seen (its
 * keys)? On a change, the handle was freed and given to another MR:
 * stale, and it starts over as a new leftover. *s: its record now.
 * false: not to be destroyed at this scan.
 */
static bool mr_still(struct profile *p, const struct seen *was,
		     const struct mr_handles *mh, const struct reclaim_census *c,
		     uint64_t now, struct seen *s)
{
	ssize_t j = mr_handle_find(mh, s->h);

	if (j < 0 || !mh->ok[j])
		return false; /* cannot be checked: it stays */
	s->key = mh->key[j];
	s->keyed = true;
	if (was && was->keyed && !key_eq(&was->key, &s->key, true)) {
		reclaim_stale(p, UH_MR, s->h,
		      "now names another MR than the leftover first seen "
		      "there");
		s->since = now;
		return false;
	}
	if (now - s->since < RECLAIM_DELAY_USEC)
		return false;
	if (!dead_mr_listed(c, &s->key)) {
		reclaim_stale(p, UH_MR, s->h,
		      "names no MR the kernel lists as a dead process's");
		s->since = now;
		return false;
	}
	return true;
}

/* The handles a scan acts on: its second look, the daemon's own, the
 * MRs' keys; the census as the dumps gave it (census) and as counting
 * takes it (c). */
struct looks {
	const struct sets *second, *ours;
	const struct mr_handles *mh;
	const struct reclaim_census *census, *c;
};

/* Keep what waits; destroy, children first, what waited long enough. */
static bool settle(struct profile *p, struct reclaim *r, uint32_t **now_h,
		   const size_t *now_n, const struct looks *l, uint64_t now)
{
	const struct mr_handles *mh = l->mh;
	const struct reclaim_census *c = l->c;
	size_t destroyed = 0;
	bool waiting = false;

	for (int k = 0; k < UH_KINDS; k++) {
		struct seen *next = calloc(now_n[k] + 1, sizeof(*next));
		size_t kept = 0;

		/* What clients said they made goes first (reclaim.h). */
		waiting |= reclaim_settle_claims(p, r, k, l->second, l->ours,
						 l->census, now, &destroyed);
		if (k == UH_MR)
			waiting |= settle_made(p, r, mh, now, &destroyed);
		for (size_t i = 0; i < now_n[k]; i++) {
			const struct seen *was = seen_of(r, k, now_h[k][i]);
			struct seen s = { .h = now_h[k][i],
					  .since = was ? was->since : now };
			bool due = k == UH_MR
					   ? mr_still(p, was, mh, c, now, &s)
					   : now - s.since >= RECLAIM_DELAY_USEC;

			if (due) {
				destroy(p, k, s.h);
				destroyed++;
			} else if (next) {
				next[kept++] = s;
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
			   profile_name(p), destroyed);
	/* Either way a later scan sees how the context is now. */
	return waiting || destroyed;
}

/* Is there an MR handle to match or check? A maker gone, or MRs that
 * counting may take (the kernel lists some made by nobody alive). */
static bool mr_queries(struct reclaim *r, const struct reclaim_census *c)
{
	if (c->dead[UH_MR] || r->n_cand[UH_MR])
		return true;
	for (size_t i = 0; i < r->n_made; i++)
		if (reclaim_maker_gone(r->made[i].maker))
			return true;
	return false;
}

static void keys_note(const struct profile *p, const struct reclaim *r,
		      int keys)
{
	if (keys == 0 && r->keys != 0)
		log_notice("profile %s: RDMA netlink hides MR keys (the daemon "
			   "lacks CAP_NET_ADMIN): a dead client's MR is "
			   "matched to its handle by its length alone, where "
			   "no other MR of the context has that length",
			   profile_name(p));
}

bool reclaim_end(struct profile *p, const struct reclaim_census *census,
		 bool attached, uint64_t now)
{
	struct reclaim *r = profile_health(p)->reclaim;
	struct sets second = { .n = { 0 } }, ours = { .n = { 0 } };
	_cleanup_(mr_handles_clear) struct mr_handles mh = { 0 };
	struct reclaim_census c = *census;
	uint32_t *now_h[UH_KINDS] = { NULL };
	size_t now_n[UH_KINDS] = { 0 };
	bool quiet = !attached, waiting = false, ok;

	if (!r || !r->looked || !reclaim_shareable(p))
		return false;
	r->looked = false;
	r->stuck = 0;
	keys_note(p, r, c.keys);
	reclaim_attribute(r, &c);
	ok = own(p, &ours) && list_all(profile_ctx(p)->cmd_fd, &second) &&
	     mr_handles_get(&mh, profile_ctx(p)->cmd_fd, mr_queries(r, &c),
			    &r->first, &second, &ours) == 0;
	if (ok) {
		match_made(r, &mh, &c, now);
		reclaim_match_claims(r, &second, &c);
	}
	for (int k = 0; k < UH_KINDS; k++)
		quiet &= c.live[k] == 0;
	for (int k = 0; ok && k < UH_KINDS; k++) {
		now_h[k] = calloc(second.n[k] + 1, sizeof(uint32_t));
		if (!now_h[k]) {
			ok = false;
			break;
		}
		now_n[k] = leftovers(r, &second, &ours, &mh, k, &c, quiet,
				     now_h[k]);
	}
	if (ok)
		waiting = settle(p, r, now_h, now_n,
				 &(struct looks){ .second = &second,
						  .ours = &ours,
						  .mh = &mh,
						  .census = census,
						  .c = &c },
				 now);
	/* What was destroyed is forgotten (settle cleared listed). */
	reclaim_made_compact(r);
	for (int k = 0; k < UH_KINDS; k++)
		free(now_h[k]);
	reclaim_sets_clear(&second);
	reclaim_sets_clear(&ours);
	reclaim_sets_clear(&r->first);
	return waiting;
}

unsigned int reclaim_stuck(const struct profile *p)
{
	return profile_health(p)->reclaim ? profile_health(p)->reclaim->stuck
					  : 0;
}

void reclaim_free(struct profile *p)
{
	struct reclaim *r = profile_health(p)->reclaim;

	if (!r)
		return;
	reclaim_forget(r);
	free(r);
	profile_health(p)->reclaim = NULL;
}
