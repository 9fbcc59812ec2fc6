// SPDX-License-Identifier: MIT
/*
 * Why the dumps are read on a thread of their own (rdmanl_batch.h) and
 * not on the worker pool: the workers run creations in FIFO order, and
 * a scan queued behind a registration of hundreds of GB would wait
 * minutes. Not on the loop either: the kernel walks its table from the
 * start for every chunk of a dump, so that one chunk of a dump of 60k
 * MRs costs tens of milliseconds, each a stall of every client. The
 * records are sorted at the end, on the loop, where the profiles and
 * sessions may be read without locks.
 */
#include <malloc.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "manager.h"
#include "objects.h"
#include "orphans.h"
#include "profile.h"
#include "qphealth.h"
#include "rdmanl.h"
#include "rdmanl_batch.h"
#include "reclaim.h"

/* A lease ended: scan this soon (several ending at once: one scan), but
 * not sooner than SCAN_GAP_USEC after the last scan began: clients
 * attaching and detaching in a loop would otherwise have a scan (a
 * netlink dump per kind and device, /proc reads) run between every two
 * of their requests, on the loop that answers them. */
#define SCAN_SOON_USEC 100000
#define SCAN_GAP_USEC 1000000
/* And not sooner than this many times as long as the last scan took
 * after it began: the kernel's dumps cost O(n^2) (rdmanl_batch.h), and a
 * device of 60k MRs would otherwise keep a CPU busy scanning (seconds a
 * scan under emulation) for a scan every second or ten. So scans take at
 * most a fifth of one CPU, and a reclaim on such a device waits longer. */
#define SCAN_DUTY 5

/* A context the scan looks at. */
struct seen_ctx {
	uint32_t dev_index;
	int64_t ctxn;
};

struct orphans {
	struct manager *m; /* whose profiles are scanned */
	/* The scan's dumps, read on their thread; done_fd (an eventfd, kept
	 * from one scan to the next) and io: when they are in. */
	struct rdmanl_batch *batch;
	int done_fd;
	sd_event_source *io, *timer, *soon;
	/* A scan after RECLAIM_DELAY_USEC: leftovers wait for it. */
	sd_event_source *later;
	/* The scan under way: the devices it dumps. */
	uint32_t *devs;
	int *dev_err;
	size_t n_devs;
	struct seen_ctx *ctxs;
	size_t n_ctxs;
	struct rdmanl_res *recs;
	size_t n_recs, cap_recs;
	/* again: a scan was asked for while none could start (one ran, or
	 * a reload was under way: paused, see orphans_pause); changed: one
	 * asked for by a change, and none begun since. */
	bool running, again, paused, changed;
	uint64_t last_start; /* CLOCK_MONOTONIC usec, 0: none yet */
	uint64_t last_took;  /* from its start to its records sorted */
};

static void scan_start(struct orphans *o);

/* ---- who made it ---- */

struct pid_cache {
	uint32_t pid[64];
	pid_t tgid[64];
	size_t n;
	pid_t self; /* getpid(), once a scan rather than once a record */
};

/* The process of thread pid (its Tgid), 0 when gone. */
static pid_t tgid_of(struct pid_cache *c, uint32_t pid)
{
	char path[64], line[128];
	pid_t tgid = 0;
	FILE *f;

	if (!pid)
		return 0;
	for (size_t i = 0; i < c->n; i++)
		if (c->pid[i] == pid)
			return c->tgid[i];
	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	if (f)
		fclose(f);
	if (c->n < ARRAY_SIZE(c->pid)) {
		c->pid[c->n] = pid;
		c->tgid[c->n++] = tgid;
	}
	return tgid;
}

enum owner { OWNER_DAEMON, OWNER_CLIENT, OWNER_ORPHAN, OWNERS };

static const char *const owner_names[OWNERS] = { "daemon", "client",
						 "orphan" };

/* Does p hold, running or draining, the QP or MR the kernel listed? */
/*
 * The numbers of what the profile holds ready (or draining), sorted, so
 * that each record of a scan is looked up in log time: a context of 10k
 * MRs is 10k records against 10k objects.
 */
struct held {
	uint32_t *qpn;	/* QP numbers */
	uint64_t *mrkey; /* lkey << 32 | rkey */
	uint32_t *pdn;	/* the context's PD numbers (from the records) */
	/* The lengths of the MRs taken back from the previous run (a
	 * pass of the records takes each once: prev_taken). */
	uint64_t *prevlen;
	bool *prev_taken;
	size_t n_qpn, n_mrkey, n_pdn, n_prevlen;
	size_t n_srq;	/* SRQs held */
};

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void held_clear(struct held *h)
{
	free(h->qpn);
	free(h->mrkey);
	free(h->pdn);
	free(h->prevlen);
	free(h->prev_taken);
	*h = (struct held){ 0 };
}

static int held_build(struct held *h, const struct profile *p)
{
	size_t counts[2] = {profile_n_objects(p), profile_n_draining(p)};
	size_t n = profile_n_objects(p) + profile_n_draining(p) + 1;

	h->qpn = calloc(n, sizeof(*h->qpn));
	h->mrkey = calloc(n, sizeof(*h->mrkey));
	h->prevlen = calloc(n, sizeof(*h->prevlen));
	h->prev_taken = calloc(n, sizeof(*h->prev_taken));
	if (!h->qpn || !h->mrkey || !h->prevlen || !h->prev_taken)
		return -ENOMEM;
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < counts[l]; i++) {
			const struct object *o = l ? profile_draining_at(p, i)
						   : profile_object_at(p, i);

			/* A creating object is its job's until it is done. */
			if (o->state != OBJ_READY && o->state != OBJ_DRAINING)
				continue;
			if (o->kind == OBJ_QP && o->u.qp.qp)
				h->qpn[h->n_qpn++] = o->u.qp.qp->qp_num;
			else if (o->kind == OBJ_SRQ)
				h->n_srq++;
			else if (o->kind == OBJ_MR && o->u.mr.mr)
				h->mrkey[h->n_mrkey++] =
					(uint64_t)o->u.mr.mr->lkey << 32 |
					o->u.mr.mr->rkey;
			if (o->kind == OBJ_MR && o->u.mr.mr && o->u.mr.restored)
				h->prevlen[h->n_prevlen++] = o->u.mr.mr->length;
		}
	qsort(h->qpn, h->n_qpn, sizeof(*h->qpn), cmp_u32);
	qsort(h->mrkey, h->n_mrkey, sizeof(*h->mrkey), cmp_u64);
	qsort(h->prevlen, h->n_prevlen, sizeof(*h->prevlen), cmp_u64);
	return 0;
}

/* Is there an MR of the previous run of this length not yet taken for
 * a record of this pass? It is taken now. */
static bool prev_mr_take(struct held *h, uint64_t length)
{
	for (size_t i = 0; i < h->n_prevlen && h->prevlen[i] <= length; i++)
		if (h->prevlen[i] == length && !h->prev_taken[i])
			return h->prev_taken[i] = true;
	return false;
}

static bool holds_number(const struct held *h, const struct rdmanl_res *r)
{
	uint64_t key;

	if (r->kind == RDMANL_QP)
		return bsearch(&r->id, h->qpn, h->n_qpn, sizeof(*h->qpn),
			       cmp_u32) != NULL;
	if (r->kind != RDMANL_MR || !(r->has & RDMANL_HAS_KEYS))
		return false;
	key = (uint64_t)r->lkey << 32 | r->rkey;
	return bsearch(&key, h->mrkey, h->n_mrkey, sizeof(*h->mrkey),
		       cmp_u64) != NULL;
}

static enum owner owner_of(struct orphans *o, const struct profile *p,
			   struct held *h, const struct rdmanl_res *r,
			   struct pid_cache *pc)
{
	pid_t tgid;

	if (holds_number(h, r))
		return OWNER_DAEMON;
	/*
	 * A context taken back from the previous run: its PDs and MRs
	 * (taken back, or about to be destroyed) are ours. The kernel names
	 * no maker once it has exited (Linux 6.1: no pid for a dead task),
	 * which it has after a restart: a PD whose maker is gone is then
	 * taken for the previous run's. So is such an MR when its keys are
	 * hidden (they are shown with CAP_NET_ADMIN only, which the shipped
	 * unit does not grant; with them, an MR is ours by its keys,
	 * above), as long as an MR taken back has its length and no other
	 * record of the pass took that one (all of them until the creation
	 * has settled): the rest are a dead client's,
	 * and so is one that the scans saw made by a client (reclaim.h,
	 * across restarts too). A client of that run that died leaving a PD
	 * is not told apart; its QPs and CQs are. The previous run's other
	 * objects were destroyed at its exit, unless it was killed: orphans
	 * then.
	 */
	if (profile_ctx_kept(p) && !(r->has & RDMANL_HAS_PID) &&
	    (r->kind == RDMANL_PD ||
	     (r->kind == RDMANL_MR && !(r->has & RDMANL_HAS_KEYS) &&
	      (profile_restored(p) || (!reclaim_knows_mr(p, r->id, r->mrlen) &&
				       prev_mr_take(h, r->mrlen))))))
		return OWNER_DAEMON;
	if (profile_ctx_kept(p) && r->kind == RDMANL_PD &&
	    (r->has & RDMANL_HAS_PID) && profile_prev_tid(p, r->pid))
		return OWNER_DAEMON;
	/* Gone (no pid): its maker died, whoever it was. */
	tgid = (r->has & RDMANL_HAS_PID) ? tgid_of(pc, r->pid) : 0;
	if (tgid && tgid == pc->self)
		return OWNER_DAEMON;
	if (tgid && manager_attached(o->m, profile_name(p), tgid))
		return OWNER_CLIENT;
	/* A live process (the kernel names it: it is alive, even where
	 * /proc hides it from us, as the unit's ProtectProc= does) with
	 * objects in a context taken back imported it from the previous
	 * run and holds it still: a client, not gone. */
	if (profile_ctx_kept(p) && (r->has & RDMANL_HAS_PID))
		return OWNER_CLIENT;
	return OWNER_ORPHAN;
}

/* ---- sorting a profile's context ---- */

static bool in_pds(const struct held *h, uint32_t pdn)
{
	return bsearch(&pdn, h->pdn, h->n_pdn, sizeof(*h->pdn), cmp_u32);
}

static bool view_equal(const struct ctx_view *a, const struct ctx_view *b)
{
	return a->scanned == b->scanned && a->err == b->err &&
	       !memcmp(a->owned, b->owned, sizeof(a->owned)) &&
	       !memcmp(a->clients, b->clients, sizeof(a->clients)) &&
	       !memcmp(a->orphans, b->orphans, sizeof(a->orphans));
}

static uint64_t now_realtime(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

/* Count r for reclaim.h: made by a process now gone, or by a live one
 * other than the daemon (a thread of a process /proc hides from us is
 * such a one). */
static void census_add(struct reclaim_census *c, const struct rdmanl_res *r,
		       enum owner w, struct pid_cache *pc)
{
	enum uhandle_kind k = object_uverbs_of_netlink(r->kind);

	if (k == UH_KINDS)
		return;
	if (!(r->has & RDMANL_HAS_PID)) {
		c->dead[k] += w == OWNER_ORPHAN;
		return;
	}
	if (tgid_of(pc, r->pid) != pc->self)
		c->live[k]++;
}

/* An MR of p's context not the daemon's, for attribution (reclaim.h):
 * its maker is the process of the thread the kernel names (or, where
 * /proc hides it, the thread itself, taken for a process if it leads
 * one: reclaim's pidfd_open refuses any other thread). */
static void census_mr(struct reclaim_census *c, const struct rdmanl_res *r,
		      struct pid_cache *pc)
{
	struct reclaim_mr *m = &c->mrs[c->n_mrs++];
	pid_t tgid = (r->has & RDMANL_HAS_PID) ? tgid_of(pc, r->pid) : 0;

	*m = (struct reclaim_mr){
		.mrn = r->id,
		.key = { .lkey = r->lkey, .rkey = r->rkey, .length = r->mrlen },
		.keys = (r->has & RDMANL_HAS_KEYS) != 0,
	};
	if (r->has & RDMANL_HAS_PID) {
		m->tid = r->pid;
		m->maker = tgid ? tgid : (pid_t)r->pid;
	}
}

static void census_qp(struct reclaim_census *c, const struct rdmanl_res *r,
		      struct pid_cache *pc)
{
	struct reclaim_qp *q = &c->qps[c->n_qps++];
	pid_t tgid = (r->has & RDMANL_HAS_PID) ? tgid_of(pc, r->pid) : 0;

	*q = (struct reclaim_qp){ .qpn = r->id };
	if (r->has & RDMANL_HAS_PID) {
		q->tid = r->pid;
		q->maker = tgid ? tgid : (pid_t)r->pid;
	}
}

/* The view of p's context from the records (those of its device), and
 * the census of who made them (c->mrs, c->qps: the caller's to free). */
static int sort_context(struct orphans *o, const struct profile *p, int err,
			struct ctx_view *v, struct reclaim_census *c)
{
	_cleanup_(held_clear) struct held h = { 0 };
	struct pid_cache pc = {.n = 0, .self = getpid()};
	size_t n_orphan = 0, n_srq = 0;

	*v = (struct ctx_view){ .scanned = true, .when = now_realtime() };
	*c = (struct reclaim_census){ .keys = -1 };
	if (err < 0 || profile_ctxn(p) < 0) {
		v->err = err < 0 ? err : -ENOENT;
		return 0;
	}
	h.pdn = calloc(o->n_recs + 1, sizeof(*h.pdn));
	c->mrs = calloc(o->n_recs + 1, sizeof(*c->mrs));
	c->qps = calloc(o->n_recs + 1, sizeof(*c->qps));
	if (!h.pdn || !c->mrs || !c->qps || held_build(&h, p) < 0)
		return -ENOMEM;
	/* PDs and CQs name their context; the rest join it by their PD. */
	for (size_t i = 0; i < o->n_recs; i++) {
		const struct rdmanl_res *r = &o->recs[i];

		if (r->dev_index == profile_dev_index(p) &&
		    r->kind == RDMANL_PD && (r->has & RDMANL_HAS_CTXN) &&
		    r->ctxn == (uint32_t)profile_ctxn(p))
			h.pdn[h.n_pdn++] = r->id;
	}
	qsort(h.pdn, h.n_pdn, sizeof(*h.pdn), cmp_u32);
	for (int k = RDMANL_PD; k < RDMANL_KINDS; k++)
		c->dumped[object_uverbs_of_netlink((enum rdmanl_kind)k)] = true;
	for (int pass = 0; pass < 2; pass++) {
		memset(h.prev_taken, 0, h.n_prevlen * sizeof(*h.prev_taken));
		for (size_t i = 0; i < o->n_recs; i++) {
			const struct rdmanl_res *r = &o->recs[i];
			enum owner w;

			if (r->dev_index != profile_dev_index(p) ||
			    (r->has & RDMANL_HAS_KERN))
				continue;
			if (r->kind == RDMANL_PD || r->kind == RDMANL_CQ) {
				if (!(r->has & RDMANL_HAS_CTXN) ||
				    r->ctxn != (uint32_t)profile_ctxn(p))
					continue;
			} else if (r->kind == RDMANL_CTX ||
				   !(r->has & RDMANL_HAS_PDN) ||
				   !in_pds(&h, r->pdn)) {
				continue;
			}
			w = owner_of(o, p, &h, r, &pc);
			if (pass == 0 && r->kind == RDMANL_QP &&
			    w != OWNER_DAEMON)
				census_qp(c, r, &pc);
			n_srq += pass == 0 && r->kind == RDMANL_SRQ;
			if (pass == 0 && r->kind == RDMANL_MR) {
				bool keys = (r->has & RDMANL_HAS_KEYS) != 0;

				c->keys = c->keys < 0 ? keys : c->keys && keys;
				if (w != OWNER_DAEMON)
					census_mr(c, r, &pc);
			}
			if (pass == 0) {
				unsigned int *n = w == OWNER_DAEMON ? v->owned
						  : w == OWNER_CLIENT ? v->clients
								      : v->orphans;
				n[r->kind]++;
				n_orphan += w == OWNER_ORPHAN;
				census_add(c, r, w, &pc);
			} else if (w == OWNER_ORPHAN) {
				v->orphan[v->n_orphan++] = *r;
			}
		}
		if (pass == 0)
			c->srqs_not_ours = n_srq > h.n_srq
						   ? (unsigned int)(n_srq - h.n_srq)
						   : 0;
		if (pass == 0 && n_orphan) {
			v->orphan = calloc(n_orphan, sizeof(*v->orphan));
			if (!v->orphan)
				return -ENOMEM;
		} else if (pass == 0) {
			break;
		}
	}
	return 0;
}

static bool ctx_seen(const struct orphans *o, const struct profile *p)
{
	for (size_t i = 0; i < o->n_ctxs; i++)
		if (o->ctxs[i].dev_index == profile_dev_index(p) &&
		    o->ctxs[i].ctxn == profile_ctxn(p))
			return true;
	return false;
}

static int device_err(const struct orphans *o, uint32_t dev_index)
{
	for (size_t i = 0; i < o->n_devs; i++)
		if (o->devs[i] == dev_index)
			return o->dev_err[i];
	return -ENOENT;
}

/* The policy: orphans, and nobody holds anything of the profile. A
 * context taken back keeps the registrations it brought: what its
 * previous run left behind (kept_orphans) does not retire it alone. */
static bool retire_due(const struct orphans *o, const struct profile *p)
{
	return manager_may_retire(o->m) && reclaim_stuck(p) > 0 &&
	       profile_health(p)->view.n_orphan > profile_kept_orphans(p) &&
	       profile_ctx(p) && !profile_busy(p) &&
	       (profile_state(p) == PROFILE_READY ||
		profile_state(p) == PROFILE_DEGRADED) &&
	       !profile_leased(p) &&
	       !manager_attached(o->m, profile_name(p), 0);
}

static void scan_later(struct orphans *o);

static void sort_all(struct orphans *o)
{
	size_t n;
	struct profile *const *profiles = manager_profiles_of(o->m, &n);
	struct reclaim_census census;
	bool waiting = false;
	uint64_t now = 0;

	sd_event_now(manager_loop(o->m), CLOCK_MONOTONIC, &now);

	for (size_t i = 0; i < n; i++) {
		struct profile *p = profiles[i];
		struct ctx_view v;
		size_t before = profile_health(p)->view.n_orphan;

		/* Being made: looked at once it is ready (a profile's change
		 * asks for a scan). Meanwhile what its workers make and, after
		 * a restart, what it has not yet taken back would count as
		 * nobody's. */
		if (!profile_ctx(p) || profile_busy(p))
			continue;
		/* Opened (or renewed) while the scan ran: the next one. */
		if (!ctx_seen(o, p)) {
			o->again = o->changed = true;
			continue;
		}
		qphealth_scan(p, o->recs, o->n_recs);
		if (sort_context(o, p, device_err(o, profile_dev_index(p)), &v,
				 &census) < 0) {
			ctx_view_clear(&v);
			free(census.mrs);
			free(census.qps);
			continue;
		}
		if (!view_equal(&v, &profile_health(p)->view) ||
		    v.n_orphan != before)
			profile_touch_view(p);
		ctx_view_clear(&profile_health(p)->view);
		profile_health(p)->view = v;
		/* Only with the dumps in hand: an empty census vouches for
		 * nothing. */
		if (!v.err)
			waiting |= reclaim_end(
			    p, &census,
			    manager_attached(o->m, profile_name(p), 0), now);
		/* Who made what is written down for the next run. */
		if (reclaim_record_due(p))
			profile_touch_leases_ended(p);
		free(census.mrs);
		free(census.qps);
		if (profile_ctx_kept(p) && !profile_kept_scanned(p) &&
		    !profile_busy(p)) {
			profile_set_kept_orphans(p, v.n_orphan);
			if (v.n_orphan)
				log_notice("profile %s: the previous run left "
					   "%zu objects in the context it "
					   "handed over (it did not exit "
					   "cleanly); they are destroyed by "
					   "handle where they can be told "
					   "apart",
					   profile_name(p), v.n_orphan);
		}
		if (v.n_orphan > before)
			log_notice("profile %s: %zu objects in its context "
				   "(ctxn %lld on %s) were left by clients "
				   "that are gone",
				   profile_name(p), v.n_orphan,
				   (long long)profile_ctxn(p),
				   profile_ibdev(p));
		if (retire_due(o, p)) {
			char reason[160];

			snprintf(reason, sizeof(reason),
				 "context retired: %zu orphaned objects, no "
				 "session attached",
				 v.n_orphan);
			log_notice("profile %s: %s; opening a fresh one",
				   profile_name(p), reason);
			manager_retire_ctx(o->m, p, reason);
		}
	}
	if (waiting)
		scan_later(o);
}

/* ---- the scan ---- */

/* A scan that kept this many records gives their memory back to the
 * system at its end: a dump of a large context (10k QPs: 1.8 MB of
 * records as they grew, and the sorted numbers) would otherwise stay in
 * the daemon's RSS, free but in holes of the heap, until the next trim. */
#define SCAN_TRIM_RECS 4096

/* The dumps called off and their thread joined (at most a chunk). */
static void batch_drop(struct orphans *o)
{
	struct rdmanl_res *none = NULL;
	uint64_t count;
	size_t n = 0;

	if (!o->batch)
		return;
	rdmanl_batch_cancel(o->batch);
	rdmanl_batch_finish(o->batch, &none, &n, o->dev_err);
	o->batch = NULL;
	(void)!read(o->done_fd, &count, sizeof(count));
}

static void scan_clear(struct orphans *o)
{
	bool trim = o->cap_recs >= SCAN_TRIM_RECS;

	o->io = sd_event_source_disable_unref(o->io);
	/* Still reading (the daemon stops): stopped at its next chunk. */
	batch_drop(o);
	free(o->devs);
	free(o->dev_err);
	free(o->ctxs);
	free(o->recs);
	o->devs = NULL;
	o->dev_err = NULL;
	o->ctxs = NULL;
	o->recs = NULL;
	o->n_devs = o->n_ctxs = o->n_recs = o->cap_recs = 0;
	o->running = false;
	if (trim)
		malloc_trim(0);
}

static void scan_end(struct orphans *o)
{
	bool failed = false;
	uint64_t now;

	if (sd_event_now(manager_loop(o->m), CLOCK_MONOTONIC, &now) >= 0 &&
	    now > o->last_start)
		o->last_took = now - o->last_start;

	for (size_t i = 0; i < o->n_devs; i++)
		failed |= o->dev_err[i] < 0;
	manager_orphans_scanned(o->m, failed);
	sort_all(o);
	scan_clear(o);
	if (o->again) {
		o->again = false;
		orphans_request(o, ORPHANS_PACED);
	}
}

/* The dumps are in (or the scan was called off: orphans_pause()). */
static int on_dumped(sd_event_source *es, int fd, uint32_t revents, void *ud)
{
	struct orphans *o = ud;
	struct rdmanl_batch *b = TAKE_PTR(o->batch);
	uint64_t count;
	int r;

	(void)es;
	(void)revents;
	(void)!read(fd, &count, sizeof(count));
	o->io = sd_event_source_disable_unref(o->io);
	r = rdmanl_batch_finish(b, &o->recs, &o->n_recs, o->dev_err);
	if (r < 0) {
		scan_clear(o);
		if (o->again && !o->paused) {
			o->again = false;
			orphans_request(o, ORPHANS_PACED);
		}
		return 0;
	}
	o->cap_recs = o->n_recs;
	for (size_t i = 0; i < o->n_devs; i++)
		if (o->dev_err[i] < 0)
			log_debug("RDMA netlink: a dump of device %u: %s",
				  o->devs[i], strerror(-o->dev_err[i]));
	scan_end(o);
	return 0;
}

/* Read the dumps of every device of the scan on their thread. */
static void scan_dump(struct orphans *o)
{
	int r;

	if (!o->n_devs) {
		scan_end(o);
		return;
	}
	r = rdmanl_batch_start(o->devs, o->n_devs, RDMANL_PD, o->done_fd,
			       &o->batch);
	if (r >= 0)
		r = sd_event_add_io(manager_loop(o->m), &o->io, o->done_fd,
				    EPOLLIN, on_dumped, o);
	/* After the clients and the front ends. */
	if (r >= 0)
		r = sd_event_source_set_priority(o->io, SD_EVENT_PRIORITY_IDLE);
	if (r >= 0)
		return;
	o->io = sd_event_source_disable_unref(o->io);
	batch_drop(o);
	for (size_t i = 0; i < o->n_devs; i++)
		o->dev_err[i] = r;
	scan_end(o);
}

/* A process that made MRs in a context is gone (its pidfd is readable,
 * and stays so: the watch ends): the scan reclaims them. */
static int on_maker_gone(sd_event_source *es, int fd, uint32_t revents,
			 void *ud)
{
	(void)fd;
	(void)revents;
	sd_event_source_set_enabled(es, SD_EVENT_OFF);
	orphans_request(ud, ORPHANS_PACED);
	return 0;
}

static void scan_start(struct orphans *o)
{
	size_t n;
	struct profile *const *profiles = manager_profiles_of(o->m, &n);

	o->running = true;
	sd_event_now(manager_loop(o->m), CLOCK_MONOTONIC, &o->last_start);
	o->changed = false;
	o->devs = calloc(n + 1, sizeof(*o->devs));
	o->dev_err = calloc(n + 1, sizeof(*o->dev_err));
	o->ctxs = calloc(n + 1, sizeof(*o->ctxs));
	if (!o->devs || !o->dev_err || !o->ctxs) {
		scan_clear(o);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct profile *p = profiles[i];
		bool known = false;

		if (!profile_ctx(p) || profile_busy(p))
			continue;
		o->ctxs[o->n_ctxs++] =
		    (struct seen_ctx){profile_dev_index(p), profile_ctxn(p)};
		reclaim_begin((struct profile *)p, manager_loop(o->m),
			      on_maker_gone, o);
		if (profile_ctxn(p) < 0)
			continue; /* nothing to sort it by */
		for (size_t k = 0; k < o->n_devs; k++)
			known |= o->devs[k] == profile_dev_index(p);
		if (!known)
			o->devs[o->n_devs++] = profile_dev_index(p);
	}
	scan_dump(o);
}

/* ---- when ---- */

static int on_soon(sd_event_source *es, uint64_t usec, void *ud)
{
	struct orphans *o = ud;

	(void)es;
	(void)usec;
	o->soon = sd_event_source_disable_unref(o->soon);
	if (o->running || o->paused)
		o->again = true;
	else
		scan_start(o);
	return 0;
}

void orphans_pause(struct orphans *o)
{
	if (!o || o->paused)
		return;
	o->paused = true;
	if (!o->running)
		return;
	/* The dumps stop at their next chunk; the scan ends with them
	 * (on_dumped()), and another runs after the resume. */
	rdmanl_batch_cancel(o->batch);
	o->again = true;
}

void orphans_resume(struct orphans *o)
{
	if (!o || !o->paused)
		return;
	o->paused = false;
	if (o->again) {
		o->again = false;
		orphans_request(o, ORPHANS_PACED);
	}
}

static int on_later(sd_event_source *es, uint64_t usec, void *ud)
{
	struct orphans *o = ud;

	(void)es;
	(void)usec;
	o->later = sd_event_source_disable_unref(o->later);
	orphans_request(o, ORPHANS_PACED);
	return 0;
}

/* Leftovers wait to be reclaimed (reclaim.h), or were: look again once
 * they have waited long enough. */
static void scan_later(struct orphans *o)
{
	if (o->later)
		return;
	if (sd_event_add_time_relative(manager_loop(o->m), &o->later,
				       CLOCK_MONOTONIC,
				       RECLAIM_DELAY_USEC + SCAN_SOON_USEC,
				       10000, on_later, o) < 0)
		o->later = NULL;
}

/* A scan in SCAN_SOON_USEC, but not sooner than SCAN_GAP_USEC (unless
 * for a change) nor SCAN_DUTY times as long as the last one took after
 * it began. One queued for later than that is brought forward. */
void orphans_request(struct orphans *o, enum orphans_why why)
{
	uint64_t now = 0, when, delay = SCAN_SOON_USEC, gap;

	if (!o)
		return;
	o->changed |= why == ORPHANS_CHANGED;
	if (o->running) {
		o->again = true;
		return;
	}
	gap = o->changed ? 0 : SCAN_GAP_USEC;
	if (o->last_took * SCAN_DUTY > gap)
		gap = o->last_took * SCAN_DUTY;
	if (o->last_start &&
	    sd_event_now(manager_loop(o->m), CLOCK_MONOTONIC, &now) >= 0 &&
	    now - o->last_start < gap && gap - (now - o->last_start) > delay)
		delay = gap - (now - o->last_start);
	if (o->soon) {
		if (now && sd_event_source_get_time(o->soon, &when) >= 0 &&
		    when > now + delay)
			(void)sd_event_source_set_time(o->soon, now + delay);
		return;
	}
	if (sd_event_add_time_relative(manager_loop(o->m), &o->soon, CLOCK_MONOTONIC,
				       delay, 10000, on_soon, o) < 0)
		o->soon = NULL;
}

static int on_timer(sd_event_source *es, uint64_t usec, void *ud)
{
	struct orphans *o = ud;

	(void)usec;
	sd_event_source_set_time_relative(es, ORPHANS_SCAN_SECONDS * 1000000ULL);
	sd_event_source_set_enabled(es, SD_EVENT_ON);
	orphans_request(o, ORPHANS_PACED);
	return 0;
}

int orphans_new(struct manager *m, struct orphans **out)
{
	struct orphans *o = calloc(1, sizeof(*o));
	int r;

	if (!o)
		return -ENOMEM;
	o->m = m;
	o->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	r = o->done_fd < 0
		? -errno
		: sd_event_add_time_relative(
		      manager_loop(m), &o->timer, CLOCK_MONOTONIC,
		      ORPHANS_SCAN_SECONDS * 1000000ULL, 1000000, on_timer, o);
	if (r < 0) {
		if (o->done_fd >= 0)
			close(o->done_fd);
		free(o);
		return r;
	}
	*out = o;
	return 0;
}

struct orphans *orphans_free(struct orphans *o)
{
	if (!o)
		return NULL;
	scan_clear(o);
	close(o->done_fd);
	sd_event_source_disable_unref(o->timer);
	sd_event_source_disable_unref(o->soon);
	sd_event_source_disable_unref(o->later);
	free(o);
	return NULL;
}

/* ---- the document ---- */

static json_t *counts_json(const unsigned int *n)
{
	json_t *j = json_object();

	for (int k = RDMANL_PD; j && k < RDMANL_KINDS; k++)
		json_object_set_new(j, rdmanl_kind_name((enum rdmanl_kind)k),
				    json_integer(n[k]));
	return j;
}

static json_t *orphan_json(const struct rdmanl_res *r)
{
	json_t *j = json_pack("{s:s, s:I}", "kind", rdmanl_kind_name(r->kind),
			      rdmanl_id_name(r->kind), (json_int_t)r->id);

	if (!j)
		return NULL;
	if (r->has & RDMANL_HAS_PDN)
		json_object_set_new(j, "pdn", json_integer(r->pdn));
	if (r->has & RDMANL_HAS_CTXN)
		json_object_set_new(j, "ctxn", json_integer(r->ctxn));
	/* A pid only while the dead client is a zombie. */
	if (r->has & RDMANL_HAS_PID)
		json_object_set_new(j, "pid", json_integer(r->pid));
	if (r->has & RDMANL_HAS_KEYS) {
		json_object_set_new(j, "lkey", json_integer(r->lkey));
		json_object_set_new(j, "rkey", json_integer(r->rkey));
	}
	if (r->has & RDMANL_HAS_MRLEN)
		json_object_set_new(j, "length", json_integer((json_int_t)r->mrlen));
	if (r->has & RDMANL_HAS_CQE)
		json_object_set_new(j, "cqe", json_integer(r->cqe));
	return j;
}

/* The orphan's maker, where a scan saw it alive (reclaim.h): an MR that
 * goes as soon as it may. */
static pid_t maker_of(const struct profile *p, const struct rdmanl_res *r)
{
	if (r->kind == RDMANL_QP)
		return reclaim_qp_maker(p, r->id);
	return r->kind == RDMANL_MR ? reclaim_maker_of(p, r->id, NULL) : 0;
}

/* What attribution knows of p's context. */
static json_t *attribution_json(const struct profile *p)
{
	struct reclaim_stats st;
	unsigned long long stale = 0;
	json_t *j;

	reclaim_stats(p, &st);
	for (int k = 0; k < UH_KINDS; k++)
		stale += profile_faults(p)->stale[k];
	j = json_pack("{s:I, s:I, s:I, s:I}", "makers", (json_int_t)st.makers,
		      "mrs_live", (json_int_t)st.mrs_live, "mrs_waiting",
		      (json_int_t)st.mrs_waiting, "stale_handles",
		      (json_int_t)stale);
	if (j && st.keys >= 0)
		json_object_set_new(j, "mr_keys", json_boolean(st.keys));
	if (j)
		json_object_set_new(
			j, "claimed",
			json_pack("{s:I, s:I, s:I}", "qp",
				  (json_int_t)st.claims[UH_QP], "cq",
				  (json_int_t)st.claims[UH_CQ], "srq",
				  (json_int_t)st.claims[UH_SRQ]));
	return j;
}

void orphans_refresh(struct orphans *o, const struct profile *p)
{
	if (profile_ctx(p) && (!profile_health(p)->view.scanned ||
			       now_realtime() - profile_health(p)->view.when >
				   ORPHANS_FRESH_USEC))
		orphans_request(o, ORPHANS_PACED);
}

json_t *orphans_json(const struct profile *p)
{
	const struct ctx_view *v = &profile_health(p)->view;
	json_t *j = json_pack("{s:s, s:s, s:b}", "profile", profile_name(p),
			      "state", profile_state_name(profile_state(p)),
			      "scanned", v->scanned);
	json_t *a;

	if (!j)
		return NULL;
	if (profile_ctx(p)) {
		json_object_set_new(j, "ibdev", json_string(profile_ibdev(p)));
		json_object_set_new(j, "import_capable",
				    json_boolean(profile_import_err(p) == 0));
	}
	if (profile_ctx(p) && profile_ctxn(p) >= 0)
		json_object_set_new(j, "ctxn", json_integer(profile_ctxn(p)));
	if (v->scanned)
		json_object_set_new(j, "scanned_at",
				    json_real((double)v->when / 1e6));
	if (v->err)
		json_object_set_new(
			j, "error",
			json_string(v->err == -ENOENT
					    ? "the context is not known to "
					      "RDMA netlink"
					    : strerror(-v->err)));
	if (v->scanned && !v->err)
		json_object_set_new(
			j, "objects",
			json_pack("{s:o, s:o, s:o}", owner_names[OWNER_DAEMON],
				  counts_json(v->owned),
				  owner_names[OWNER_CLIENT],
				  counts_json(v->clients),
				  owner_names[OWNER_ORPHAN],
				  counts_json(v->orphans)));
	a = json_array();
	for (size_t i = 0; a && i < v->n_orphan; i++) {
		json_t *e = orphan_json(&v->orphan[i]);
		pid_t maker = maker_of(p, &v->orphan[i]);

		if (e && maker)
			json_object_set_new(e, "maker", json_integer(maker));
		json_array_append_new(a, e);
	}
	json_object_set_new(j, "orphans", a);
	/* The orphans whose maker no scan saw alive: reclaimed by
	 * counting alone (reclaim.h), kept while it cannot vouch. */
	a = json_array();
	for (size_t i = 0; a && i < v->n_orphan; i++)
		if (!maker_of(p, &v->orphan[i]))
			json_array_append_new(a, orphan_json(&v->orphan[i]));
	json_object_set_new(j, "unattributed", a);
	if (profile_ctx(p))
		json_object_set_new(j, "attribution", attribution_json(p));
	return j;
}
