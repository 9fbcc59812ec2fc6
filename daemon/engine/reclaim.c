// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <sys/syscall.h>

#include "log.h"
#include "mcast.h"
#include "objects.h"
#include "reclaim.h"
#include "target.h"

/* Processes watched per context at most (a pidfd each): the MRs of
 * makers past it are left to counting. */
#define RECLAIM_MAKERS_MAX 1024

static int real_query_mr(int cmd_fd, uint32_t h, struct reclaim_key *k)
{
	return uhandle_query_mr(cmd_fd, h, &k->lkey, &k->rkey, &k->length);
}

/* pidfd_open(2) (glibc 2.36 has no wrapper everywhere); its fd is
 * CLOEXEC. */
static int real_watch(pid_t pid)
{
	long fd = syscall(SYS_pidfd_open, pid, 0);

	return fd < 0 ? -errno : (int)fd;
}

static const struct reclaim_verbs real_verbs = {
	.list = uhandle_list,
	.destroy = uhandle_destroy,
	.query_mr = real_query_mr,
	.watch = real_watch,
};
static const struct reclaim_verbs *verbs = &real_verbs;

void reclaim_set_verbs(const struct reclaim_verbs *v)
{
	verbs = v ? v : &real_verbs;
}

/* Handles of each kind, a growing array apiece. */
struct sets {
	uint32_t *h[UH_KINDS];
	size_t n[UH_KINDS], cap[UH_KINDS];
	bool short_of_memory; /* a handle could not be added */
};

/* A leftover and when it was first seen; an MR's keys then. */
struct seen {
	uint32_t h;
	uint64_t since; /* CLOCK_MONOTONIC usec */
	struct reclaim_key key;
	bool keyed;
};

/* A process that made MRs in the context, watched while they last. */
struct maker {
	pid_t pid;
	int pidfd;
	sd_event_source *es; /* its death wakes a scan */
	bool gone;
	unsigned int refs; /* entries of made and claims naming it */
};

/* An MR a scan listed while its maker lived. */
struct made {
	uint32_t mrn, tid; /* tid: the thread that made it */
	struct reclaim_key key;
	bool keys; /* key.lkey/rkey known (else the length alone) */
	struct maker *maker;
	uint32_t now_tid; /* the thread the scan at hand lists */
	ssize_t at;	  /* its handle in the scan's mr_handles, -1: none */
	uint64_t due;	  /* when first seen with its maker gone, 0: not */
	bool listed;	  /* by the scan at hand */
	bool refused;	  /* its destruction was refused (logged once) */
};

/* An object a client said its process made (reclaim_claim). */
struct claim {
	enum uhandle_kind kind;
	uint32_t handle, qp_num;
	struct maker *maker;
	uint64_t due; /* when first due (maker gone, handle listed), 0: not */
	bool dropped;
};

struct reclaim {
	struct sets first; /* at the scan's start */
	bool looked;
	struct seen *cand[UH_KINDS]; /* leftovers waiting */
	size_t n_cand[UH_KINDS];
	unsigned int stuck;
	/* Attribution: the makers, and their MRs sorted by mrn. */
	struct maker **makers;
	size_t n_makers;
	struct made *made;
	size_t n_made;
	struct claim *claims;
	size_t n_claims;
	int keys; /* as reclaim_census.keys, the last scan's */
	sd_event *event;
	sd_event_io_handler_t gone;
	void *ud;
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

		r = verbs->list(fd, (enum uhandle_kind)k, &s->h[k], &s->n[k],
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

static struct reclaim *reclaim_get(struct profile *p)
{
	if (!p->reclaim && (p->reclaim = calloc(1, sizeof(*p->reclaim))))
		p->reclaim->keys = -1;
	return p->reclaim;
}

void reclaim_begin(struct profile *p, sd_event *event,
		   sd_event_io_handler_t gone, void *ud)
{
	struct reclaim *r;

	if (!shareable(p) || !(r = reclaim_get(p)))
		return;
	r->event = event;
	r->gone = gone;
	r->ud = ud;
	sets_clear(&r->first);
	r->looked = list_all(p->ctx->cmd_fd, &r->first);
}

/* ---- attribution: MRs and their makers ---- */

static void maker_free(struct maker *m)
{
	sd_event_source_disable_unref(m->es);
	if (m->pidfd >= 0)
		close(m->pidfd);
	free(m);
}

/* Has the process exited (its pidfd readable)? */
static bool maker_gone(struct maker *m)
{
	struct pollfd pfd = { .fd = m->pidfd, .events = POLLIN };

	if (!m->gone && poll(&pfd, 1, 0) > 0)
		m->gone = true;
	return m->gone;
}

/* The live process pid among the makers, watched from now on if it was
 * not; NULL when it cannot be (gone before it could be named, no pidfd,
 * too many). */
static struct maker *maker_get(struct reclaim *r, pid_t pid)
{
	struct maker *m, **n;
	int fd;

	for (size_t i = 0; i < r->n_makers; i++)
		if (r->makers[i]->pid == pid && !maker_gone(r->makers[i]))
			return r->makers[i];
	if (r->n_makers >= RECLAIM_MAKERS_MAX)
		return NULL;
	n = realloc(r->makers, (r->n_makers + 1) * sizeof(*n));
	if (!n)
		return NULL;
	r->makers = n;
	fd = verbs->watch(pid);
	if (fd < 0)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m) {
		close(fd);
		return NULL;
	}
	*m = (struct maker){ .pid = pid, .pidfd = fd };
	/* Without the watch a death waits for the next periodic scan. */
	if (r->event && r->gone &&
	    sd_event_add_io(r->event, &m->es, fd, EPOLLIN, r->gone, r->ud) < 0)
		m->es = NULL;
	r->makers[r->n_makers++] = m;
	return m;
}

static int cmp_made(const void *a, const void *b)
{
	uint32_t x = ((const struct made *)a)->mrn,
		 y = ((const struct made *)b)->mrn;

	return x < y ? -1 : x > y;
}

static struct made *made_find(struct made *made, size_t n, uint32_t mrn)
{
	struct made key = { .mrn = mrn };

	return n ? bsearch(&key, made, n, sizeof(*made), cmp_made) : NULL;
}

/* Is the listed MR the one remembered under its number? */
static bool same_mr(const struct made *m, const struct reclaim_mr *mr)
{
	if (m->key.length != mr->key.length)
		return false;
	return !m->keys || !mr->keys ||
	       (m->key.lkey == mr->key.lkey && m->key.rkey == mr->key.rkey);
}

/* Keep the made entries the scan listed, sorted; let go of the rest and
 * of the makers no entry names any more. */
static void made_compact(struct reclaim *r)
{
	size_t kept = 0, km = 0;

	for (size_t i = 0; i < r->n_made; i++) {
		struct made *m = &r->made[i];

		if (m->listed)
			r->made[kept++] = *m;
		else
			m->maker->refs--;
	}
	r->n_made = kept;
	if (kept)
		qsort(r->made, kept, sizeof(*r->made), cmp_made);
	kept = 0;
	for (size_t i = 0; i < r->n_claims; i++) {
		if (!r->claims[i].dropped)
			r->claims[kept++] = r->claims[i];
		else
			r->claims[i].maker->refs--;
	}
	r->n_claims = kept;
	for (size_t i = 0; i < r->n_makers; i++) {
		if (r->makers[i]->refs)
			r->makers[km++] = r->makers[i];
		else
			maker_free(r->makers[i]);
	}
	r->n_makers = km;
}

/* What the scan's MRs say: those still listed stay remembered, those
 * listed with a live maker not yet remembered are now. */
static void attribute(struct reclaim *r, const struct reclaim_census *c)
{
	size_t sorted = r->n_made;
	struct made *n;

	for (size_t i = 0; i < r->n_made; i++)
		r->made[i].listed = false;
	n = realloc(r->made, (r->n_made + c->n_mrs + 1) * sizeof(*n));
	if (n)
		r->made = n;
	for (size_t i = 0; i < c->n_mrs; i++) {
		const struct reclaim_mr *mr = &c->mrs[i];
		struct made *m = made_find(r->made, sorted, mr->mrn);
		struct maker *w;

		if (m && same_mr(m, mr)) {
			m->listed = true;
			m->now_tid = mr->tid;
			if (mr->keys && !m->keys) {
				m->key = mr->key;
				m->keys = true;
			}
			continue;
		}
		/* Not remembered (or another MR under a recycled number):
		 * attributed only while its thread is named, alive. */
		if (!n || !mr->tid || mr->maker <= 0)
			continue;
		w = maker_get(r, mr->maker);
		if (!w)
			continue;
		w->refs++;
		r->made[r->n_made++] = (struct made){
			.mrn = mr->mrn, .tid = mr->tid, .key = mr->key,
			.keys = mr->keys, .maker = w, .now_tid = mr->tid,
			.listed = true,
		};
	}
	made_compact(r);
	if (c->keys >= 0)
		r->keys = c->keys;
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
			query && verbs->query_mr(fd, h, &mh->key[mh->n]) == 0;
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
	int e = verbs->destroy(p->ctx->cmd_fd, (enum uhandle_kind)k, h);

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

/* A handle that names another object than the one reclaim means. */
static void stale(struct profile *p, int k, uint32_t h, const char *why)
{
	p->faults.stale[k]++;
	log_notice("profile %s: %s handle %u %s; left alone", p->conf->name,
		   uhandle_kind_name((enum uhandle_kind)k), h, why);
}

/*
 * Destroy the MR of a maker gone (m) by its handle j, just queried.
 * Returns true when it stays for a later scan (the kernel refused: a
 * window is still bound to it, say).
 */
static bool destroy_made(struct profile *p, struct made *m,
			 const struct mr_handles *mh, size_t j)
{
	int fd = p->ctx->cmd_fd;
	uint32_t h = mh->h[j];
	struct reclaim_key now;
	int e = verbs->destroy(fd, UH_MR, h);

	if (e == 0) {
		p->faults.reclaimed[UH_MR]++;
		m->listed = false;
		log_info("profile %s: destroyed mr handle %u (mrn %u, lkey "
			 "0x%x, %" PRIu64 " bytes), made by process %d, "
			 "which is gone",
			 p->conf->name, h, m->mrn, mh->key[j].lkey,
			 m->key.length, (int)m->maker->pid);
		return false;
	}
	/* Refused, or gone meanwhile: the handle tells which. */
	if (verbs->query_mr(fd, h, &now) < 0 ||
	    !key_eq(&now, &mh->key[j], true)) {
		m->listed = false;
		return false;
	}
	p->faults.reclaim_failed[UH_MR]++;
	if (!m->refused)
		log_warn(e, "profile %s: cannot destroy mr handle %u of "
			    "process %d, which is gone (tried again at the "
			    "next scans)",
			 p->conf->name, h, (int)m->maker->pid);
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
		if (!maker_gone(m->maker)) {
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

/* ---- what clients said they made (MADE) ---- */

static struct claim *claim_find(struct reclaim *r, enum uhandle_kind k,
				uint32_t h)
{
	for (size_t i = 0; i < r->n_claims; i++)
		if (!r->claims[i].dropped && r->claims[i].kind == k &&
		    r->claims[i].handle == h)
			return &r->claims[i];
	return NULL;
}

static bool claimable(enum uhandle_kind k)
{
	return k == UH_QP || k == UH_CQ || k == UH_SRQ;
}

/* May pid take these handles? Another live process's stay its own. */
static int claims_check(struct reclaim *r, pid_t pid,
			const struct reclaim_claim *c, size_t n)
{
	if (r->n_claims + n > RECLAIM_CLAIMS_MAX)
		return -ENOSPC;
	for (size_t i = 0; i < n; i++) {
		struct claim *was;

		if (!claimable(c[i].kind))
			return -EINVAL;
		was = claim_find(r, c[i].kind, c[i].handle);
		if (was && was->maker->pid != pid && !maker_gone(was->maker))
			return -EEXIST;
	}
	return 0;
}

int reclaim_claim(struct profile *p, pid_t pid, const struct reclaim_claim *c,
		  size_t n, bool undo)
{
	struct reclaim *r;
	struct maker *w;
	struct claim *grown;
	int e;

	if (!shareable(p))
		return -EINVAL;
	if (!(r = reclaim_get(p)))
		return -ENOMEM;
	if (undo) {
		for (size_t i = 0; i < n; i++) {
			struct claim *was = claim_find(r, c[i].kind, c[i].handle);

			if (was && was->maker->pid == pid)
				was->dropped = true;
		}
		made_compact(r);
		return 0;
	}
	e = claims_check(r, pid, c, n);
	if (e < 0)
		return e;
	grown = realloc(r->claims, (r->n_claims + n + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	r->claims = grown;
	w = maker_get(r, pid);
	if (!w)
		return -ESRCH;
	for (size_t i = 0; i < n; i++) {
		struct claim *was = claim_find(r, c[i].kind, c[i].handle);

		/* A dead process's claim on a handle given again: this
		 * process's now. */
		if (was)
			was->dropped = true;
		r->claims[r->n_claims++] = (struct claim){
			.kind = c[i].kind, .handle = c[i].handle,
			.qp_num = c[i].qp_num, .maker = w,
		};
		w->refs++;
	}
	made_compact(r);
	return 0;
}

/* Is the claimed QP's number listed, made by nobody alive or by its
 * claimant? false: the handle may name another QP by now. */
static bool claim_qp_listed(const struct claim *cl,
			    const struct reclaim_census *c)
{
	for (size_t i = 0; i < c->n_qps; i++)
		if (c->qps[i].qpn == cl->qp_num)
			return !c->qps[i].tid ||
			       c->qps[i].maker == cl->maker->pid;
	return false;
}

/*
 * The claims at the scan: those whose handle left the file end; those
 * of makers gone whose handles are listed count out of census' dead
 * (counting leaves claimed handles alone).
 */
static void match_claims(struct reclaim *r, const struct sets *second,
			 struct reclaim_census *c)
{
	for (size_t i = 0; i < r->n_claims; i++) {
		struct claim *cl = &r->claims[i];
		bool first = uhandle_in(r->first.h[cl->kind],
					r->first.n[cl->kind], cl->handle),
		     now = uhandle_in(second->h[cl->kind],
				      second->n[cl->kind], cl->handle);

		if (!first && !now) {
			cl->dropped = true;
			continue;
		}
		if (maker_gone(cl->maker) && first && now && c->dead[cl->kind])
			c->dead[cl->kind]--;
	}
}

static bool claimed(struct reclaim *r, int k, uint32_t h)
{
	return claimable((enum uhandle_kind)k) &&
	       claim_find(r, (enum uhandle_kind)k, h);
}

/* The SRQs the dumps list that neither the daemon holds nor a live
 * claimant said it made. */
static unsigned int srq_budget(struct reclaim *r,
			       const struct reclaim_census *c)
{
	unsigned int n = c->srqs_not_ours;

	for (size_t i = 0; i < r->n_claims; i++)
		if (!r->claims[i].dropped && r->claims[i].kind == UH_SRQ &&
		    !maker_gone(r->claims[i].maker) && n)
			n--;
	return n;
}

/*
 * The claims of kind k whose makers are gone, destroyed once due and the
 * kernel agrees (reclaim_claim). budget: the census' objects of the kind
 * made by nobody alive. Returns true while some wait.
 */
static bool settle_claims(struct profile *p, struct reclaim *r, int k,
			  const struct sets *second, const struct sets *ours,
			  const struct reclaim_census *c, uint64_t now,
			  size_t *destroyed)
{
	unsigned int budget = k == UH_SRQ ? srq_budget(r, c) : c->dead[k];
	bool waiting = false;

	for (size_t i = 0; i < r->n_claims; i++) {
		struct claim *cl = &r->claims[i];
		int e;

		if (cl->dropped || (int)cl->kind != k || !maker_gone(cl->maker))
			continue;
		if (!uhandle_in(r->first.h[k], r->first.n[k], cl->handle) ||
		    !uhandle_in(second->h[k], second->n[k], cl->handle)) {
			waiting = true;
			continue;
		}
		if (uhandle_in(ours->h[k], ours->n[k], cl->handle) ||
		    (k == UH_QP && !claim_qp_listed(cl, c))) {
			stale(p, k, cl->handle,
			      k == UH_QP ? "no longer names the QP its dead "
					   "maker said it made"
					 : "is the daemon's own now");
			cl->dropped = true;
			continue;
		}
		if (!cl->due)
			cl->due = now ? now : 1;
		if (now - cl->due < RECLAIM_DELAY_USEC ||
		    (k != UH_QP && !budget)) {
			waiting = true;
			continue;
		}
		e = verbs->destroy(p->ctx->cmd_fd, (enum uhandle_kind)k,
				   cl->handle);
		if (e == -EBUSY) {
			p->faults.reclaim_failed[k]++;
			waiting = true;
			continue;
		}
		cl->dropped = true;
		if (e < 0) {
			/* Gone meanwhile is no failure. */
			if (e != -ENOENT)
				log_warn(e, "profile %s: cannot destroy %s "
					    "handle %u of process %d, which "
					    "is gone",
					 p->conf->name,
					 uhandle_kind_name((enum uhandle_kind)k),
					 cl->handle, (int)cl->maker->pid);
			p->faults.reclaim_failed[k] += e != -ENOENT;
			continue;
		}
		budget -= budget > 0;
		p->faults.reclaimed[k]++;
		(*destroyed)++;
		log_info("profile %s: destroyed %s handle %u, made by process "
			 "%d (so it said), which is gone",
			 p->conf->name, uhandle_kind_name((enum uhandle_kind)k),
			 cl->handle, (int)cl->maker->pid);
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
		    !(j >= 0 && mh->taken[j]) && !claimed(r, k, h))
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
		stale(p, UH_MR, s->h,
		      "now names another MR than the leftover first seen "
		      "there");
		s->since = now;
		return false;
	}
	if (now - s->since < RECLAIM_DELAY_USEC)
		return false;
	if (!dead_mr_listed(c, &s->key)) {
		stale(p, UH_MR, s->h,
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

		if (claimable((enum uhandle_kind)k))
			waiting |= settle_claims(p, r, k, l->second, l->ours,
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
			   p->conf->name, destroyed);
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
		if (maker_gone(r->made[i].maker))
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
			   p->conf->name);
}

bool reclaim_end(struct profile *p, const struct reclaim_census *census,
		 bool attached, uint64_t now)
{
	struct reclaim *r = p->reclaim;
	struct sets second = { .n = { 0 } }, ours = { .n = { 0 } };
	_cleanup_(mr_handles_clear) struct mr_handles mh = { 0 };
	struct reclaim_census c = *census;
	uint32_t *now_h[UH_KINDS] = { NULL };
	size_t now_n[UH_KINDS] = { 0 };
	bool quiet = !attached, waiting = false, ok;

	if (!r || !r->looked || !shareable(p))
		return false;
	r->looked = false;
	r->stuck = 0;
	keys_note(p, r, c.keys);
	attribute(r, &c);
	ok = own(p, &ours) && list_all(p->ctx->cmd_fd, &second) &&
	     mr_handles_get(&mh, p->ctx->cmd_fd, mr_queries(r, &c), &r->first,
			    &second, &ours) == 0;
	if (ok) {
		match_made(r, &mh, &c, now);
		match_claims(r, &second, &c);
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
	made_compact(r);
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

pid_t reclaim_maker_of(const struct profile *p, uint32_t mrn, bool *alive)
{
	const struct reclaim *r = p->reclaim;
	struct made *m = r ? made_find(r->made, r->n_made, mrn) : NULL;

	if (alive)
		*alive = m && !maker_gone(m->maker);
	return m ? m->maker->pid : 0;
}

pid_t reclaim_qp_maker(const struct profile *p, uint32_t qpn)
{
	const struct reclaim *r = p->reclaim;

	for (size_t i = 0; r && i < r->n_claims; i++)
		if (!r->claims[i].dropped && r->claims[i].kind == UH_QP &&
		    r->claims[i].qp_num == qpn)
			return r->claims[i].maker->pid;
	return 0;
}

void reclaim_stats(const struct profile *p, struct reclaim_stats *st)
{
	const struct reclaim *r = p->reclaim;

	*st = (struct reclaim_stats){ .keys = r ? r->keys : -1 };
	if (!r)
		return;
	st->makers = r->n_makers;
	for (size_t i = 0; i < r->n_claims; i++)
		st->claims[r->claims[i].kind]++;
	for (size_t i = 0; i < r->n_made; i++) {
		if (maker_gone(r->made[i].maker))
			st->mrs_waiting++;
		else
			st->mrs_live++;
	}
}

void reclaim_free(struct profile *p)
{
	struct reclaim *r = p->reclaim;

	if (!r)
		return;
	sets_clear(&r->first);
	for (int k = 0; k < UH_KINDS; k++)
		free(r->cand[k]);
	for (size_t i = 0; i < r->n_makers; i++)
		maker_free(r->makers[i]);
	free(r->makers);
	free(r->made);
	free(r->claims);
	free(r);
	p->reclaim = NULL;
}
