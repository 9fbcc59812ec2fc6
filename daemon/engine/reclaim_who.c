// SPDX-License-Identifier: MIT
/*
 * Who made what in a profile's shared context (reclaim.h): the MRs the
 * scans saw made by live processes, the objects clients said they made,
 * and those processes, each watched through a pidfd.
 */
#include <poll.h>
#include <stdio.h>
#include <sys/syscall.h>

#include "log.h"
#include "reclaim_internal.h"
#include "restore.h"

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

const struct reclaim_verbs *reclaim_verbs_get(void)
{
	return verbs;
}

void reclaim_sets_clear(struct sets *s)
{
	for (int k = 0; k < UH_KINDS; k++)
		free(s->h[k]);
	*s = (struct sets){ .n = { 0 } };
}

bool reclaim_shareable(const struct profile *p)
{
	return profile_ctx(p) && !profile_import_err(p) && profile_conf(p);
}

struct reclaim *reclaim_get(struct profile *p)
{
	struct reclaim *r = profile_health(p)->reclaim;

	if (!r && !(r = profile_health(p)->reclaim = calloc(1, sizeof(*r))))
		return NULL;
	if (r->ctx != profile_ctx(p) || r->ctxn != profile_ctxn(p)) {
		/* Handles and makers of a context closed since. */
		reclaim_forget(r);
		r->keys = -1;
		r->ctx = profile_ctx(p);
		r->ctxn = profile_ctxn(p);
	}
	return r;
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
bool reclaim_maker_gone(struct maker *m)
{
	struct pollfd pfd = { .fd = m->pidfd, .events = POLLIN };

	if (!m->gone && poll(&pfd, 1, 0) > 0)
		m->gone = true;
	return m->gone;
}

static struct maker *maker_new(struct reclaim *r, pid_t pid, int fd)
{
	struct maker *m = calloc(1, sizeof(*m));

	if (!m) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	*m = (struct maker){ .pid = pid, .pidfd = fd, .gone = fd < 0 };
	/* Without the watch a death waits for the next periodic scan. */
	if (fd >= 0 && r->event && r->gone &&
	    sd_event_add_io(r->event, &m->es, fd, EPOLLIN, r->gone, r->ud) < 0)
		m->es = NULL;
	r->makers[r->n_makers++] = m;
	return m;
}

static bool makers_room(struct reclaim *r)
{
	struct maker **n;

	if (r->n_makers >= RECLAIM_MAKERS_MAX)
		return false;
	n = realloc(r->makers, (r->n_makers + 1) * sizeof(*n));
	if (n)
		r->makers = n;
	return n != NULL;
}

struct maker *reclaim_maker_get(struct reclaim *r, pid_t pid)
{
	struct maker *m;
	int fd;

	for (size_t i = 0; i < r->n_makers; i++)
		if (r->makers[i]->pid == pid && !reclaim_maker_gone(r->makers[i]))
			return r->makers[i];
	if (!makers_room(r))
		return NULL;
	fd = verbs->watch(pid);
	if (fd < 0)
		return NULL;
	m = maker_new(r, pid, fd);
	if (m)
		m->start = restore_start_time(pid);
	return m;
}

struct maker *reclaim_maker_put(struct reclaim *r, pid_t pid,
				unsigned long long start, bool gone)
{
	unsigned long long now;
	struct maker *m;
	int fd = -1;

	if (!makers_room(r))
		return NULL;
	if (!gone && (fd = verbs->watch(pid)) >= 0) {
		/* Another process under the pid by now: that one is gone. */
		now = restore_start_time(pid);
		if (start && now && now != start) {
			close(fd);
			fd = -1;
		}
	}
	m = maker_new(r, pid, fd);
	if (m)
		m->start = start;
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
void reclaim_made_compact(struct reclaim *r)
{
	size_t kept = 0, km = 0;

	for (size_t i = 0; i < r->n_made; i++) {
		struct made *m = &r->made[i];

		if (m->listed)
			r->made[kept++] = *m;
		else
			m->maker->refs--;
	}
	r->dirty |= kept != r->n_made;
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
	r->dirty |= kept != r->n_claims;
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
void reclaim_attribute(struct reclaim *r, const struct reclaim_census *c)
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
		w = reclaim_maker_get(r, mr->maker);
		if (!w)
			continue;
		w->refs++;
		r->dirty = true;
		r->made[r->n_made++] = (struct made){
			.mrn = mr->mrn, .tid = mr->tid, .key = mr->key,
			.keys = mr->keys, .maker = w, .now_tid = mr->tid,
			.listed = true,
		};
	}
	reclaim_made_compact(r);
	if (c->keys >= 0)
		r->keys = c->keys;
}

/* A handle that names another object than the one reclaim means. */
void reclaim_stale(struct profile *p, int k, uint32_t h, const char *why)
{
	profile_health(p)->faults.stale[k]++;
	log_notice("profile %s: %s handle %u %s; left alone", profile_name(p),
		   uhandle_kind_name((enum uhandle_kind)k), h, why);
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
		if (was && was->maker->pid != pid && !reclaim_maker_gone(was->maker))
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

	if (!reclaim_shareable(p))
		return -EINVAL;
	if (!(r = reclaim_get(p)))
		return -ENOMEM;
	if (undo) {
		for (size_t i = 0; i < n; i++) {
			struct claim *was = claim_find(r, c[i].kind, c[i].handle);

			if (was && was->maker->pid == pid)
				was->dropped = true;
		}
		reclaim_made_compact(r);
		return 0;
	}
	e = claims_check(r, pid, c, n);
	if (e < 0)
		return e;
	grown = realloc(r->claims, (r->n_claims + n + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	r->claims = grown;
	w = reclaim_maker_get(r, pid);
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
		r->dirty = true;
	}
	reclaim_made_compact(r);
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
void reclaim_match_claims(struct reclaim *r, const struct sets *second,
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
		if (reclaim_maker_gone(cl->maker) && first && now && c->dead[cl->kind])
			c->dead[cl->kind]--;
	}
}

bool reclaim_claimed(struct reclaim *r, int k, uint32_t h)
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
		    !reclaim_maker_gone(r->claims[i].maker) && n)
			n--;
	return n;
}

/*
 * The claims of kind k whose makers are gone, destroyed once due and the
 * kernel agrees (reclaim_claim). budget: the census' objects of the kind
 * made by nobody alive. Returns true while some wait.
 */
bool reclaim_settle_claims(struct profile *p, struct reclaim *r, int k,
			  const struct sets *second, const struct sets *ours,
			  const struct reclaim_census *c, uint64_t now,
			  size_t *destroyed)
{
	unsigned int budget = k == UH_SRQ ? srq_budget(r, c) : c->dead[k];
	bool waiting = false;

	for (size_t i = 0; i < r->n_claims; i++) {
		struct claim *cl = &r->claims[i];
		int e;

		if (cl->dropped || (int)cl->kind != k || !reclaim_maker_gone(cl->maker))
			continue;
		if (!uhandle_in(r->first.h[k], r->first.n[k], cl->handle) ||
		    !uhandle_in(second->h[k], second->n[k], cl->handle)) {
			waiting = true;
			continue;
		}
		if (uhandle_in(ours->h[k], ours->n[k], cl->handle) ||
		    (k == UH_QP && !claim_qp_listed(cl, c))) {
			reclaim_stale(p, k, cl->handle,
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
		e = verbs->destroy(profile_ctx(p)->cmd_fd, (enum uhandle_kind)k,
				   cl->handle);
		if (e == -EBUSY) {
			profile_health(p)->faults.reclaim_failed[k]++;
			waiting = true;
			continue;
		}
		cl->dropped = true;
		if (e < 0) {
			/* Gone meanwhile is no failure. */
			if (e != -ENOENT)
				log_warn(
				    e,
				    "profile %s: cannot destroy %s "
				    "handle %u of process %d, which "
				    "is gone",
				    profile_name(p),
				    uhandle_kind_name((enum uhandle_kind)k),
				    cl->handle, (int)cl->maker->pid);
			profile_health(p)->faults.reclaim_failed[k] +=
			    e != -ENOENT;
			continue;
		}
		budget -= budget > 0;
		profile_health(p)->faults.reclaimed[k]++;
		(*destroyed)++;
		log_info("profile %s: destroyed %s handle %u, made by process "
			 "%d (so it said), which is gone",
			 profile_name(p),
			 uhandle_kind_name((enum uhandle_kind)k), cl->handle,
			 (int)cl->maker->pid);
	}
	return waiting;
}

pid_t reclaim_maker_of(const struct profile *p, uint32_t mrn, bool *alive)
{
	const struct reclaim *r = profile_health(p)->reclaim;
	struct made *m = r ? made_find(r->made, r->n_made, mrn) : NULL;

	if (alive)
		*alive = m && !reclaim_maker_gone(m->maker);
	return m ? m->maker->pid : 0;
}

bool reclaim_knows_mr(const struct profile *p, uint32_t mrn, uint64_t length)
{
	const struct reclaim *r = profile_health(p)->reclaim;
	const struct made *m = r ? made_find(r->made, r->n_made, mrn) : NULL;

	return m && m->key.length == length;
}

pid_t reclaim_qp_maker(const struct profile *p, uint32_t qpn)
{
	const struct reclaim *r = profile_health(p)->reclaim;

	for (size_t i = 0; r && i < r->n_claims; i++)
		if (!r->claims[i].dropped && r->claims[i].kind == UH_QP &&
		    r->claims[i].qp_num == qpn)
			return r->claims[i].maker->pid;
	return 0;
}

void reclaim_stats(const struct profile *p, struct reclaim_stats *st)
{
	const struct reclaim *r = profile_health(p)->reclaim;

	*st = (struct reclaim_stats){ .keys = r ? r->keys : -1 };
	if (!r)
		return;
	st->makers = r->n_makers;
	for (size_t i = 0; i < r->n_claims; i++)
		st->claims[r->claims[i].kind]++;
	for (size_t i = 0; i < r->n_made; i++) {
		if (reclaim_maker_gone(r->made[i].maker))
			st->mrs_waiting++;
		else
			st->mrs_live++;
	}
}

void reclaim_forget(struct reclaim *r)
{
	reclaim_sets_clear(&r->first);
	r->looked = false;
	for (int k = 0; k < UH_KINDS; k++) {
		free(r->cand[k]);
		r->cand[k] = NULL;
		r->n_cand[k] = 0;
	}
	for (size_t i = 0; i < r->n_makers; i++)
		maker_free(r->makers[i]);
	free(r->makers);
	free(r->made);
	free(r->claims);
	r->makers = NULL;
	r->made = NULL;
	r->claims = NULL;
	r->n_makers = r->n_made = r->n_claims = 0;
	r->stuck = 0;
}
