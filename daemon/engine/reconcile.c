// SPDX-License-Identifier: MIT
/*
 * Why a timer of its own and not the orphan scan's: the scan reads a
 * netlink record per object of every used device, every ten seconds;
 * a round here is one ioctl per kind a context holds (and a few MR
 * queries), cheap enough to run every second and before each ATTACH.
 */
#include <string.h>

#include "log.h"
#include "manager.h"
#include "objects.h"
#include "profile.h"
#include "reconcile.h"

struct reconcile {
	struct manager *m; /* whose profiles are checked */
	sd_event_source *timer;
	bool unsupported; /* said once: the kernel cannot list handles */
};

/* The kernel's handles of the kinds a round needs, each listed once. */
struct tables {
	uint32_t *h[UH_KINDS];
	size_t n[UH_KINDS];
	int complete[UH_KINDS];
	int err[UH_KINDS];
	bool listed[UH_KINDS];
};

static void tables_clear(struct tables *t)
{
	for (int k = 0; k < UH_KINDS; k++)
		free(t->h[k]);
}

/* Is o's handle missing from the kernel's table? -errno: cannot tell. */
static int handle_gone(struct tables *t, int fd, const struct object *o)
{
	enum uhandle_kind k;
	uint32_t h;

	if (!object_handle(o, &k, &h))
		return 0;
	if (!t->listed[k]) {
		t->listed[k] = true;
		t->err[k] = uhandle_list(fd, k, &t->h[k], &t->n[k],
					 &t->complete[k]);
	}
	if (t->err[k] < 0)
		return t->err[k];
	if (!t->complete[k] && !t->n[k])
		return 0;
	if (uhandle_in(t->h[k], t->n[k], h))
		return 0;
	/* Absent from a list the kernel cut short: not known. */
	return t->complete[k];
}

/* Does the kernel's MR of o's handle have o's keys? 1 yes, 0 no (or
 * none by that handle), -errno when the kernel cannot be asked. */
static int mr_keys_hold(int fd, const struct object *o)
{
	uint32_t lkey, rkey;
	int r = uhandle_query_mr(fd, o->u.mr.mr->handle, &lkey, &rkey,
				     NULL);

	if (r == -EOPNOTSUPP || r == -EPROTONOSUPPORT)
		return r;
	return r == 0 && lkey == o->u.mr.mr->lkey && rkey == o->u.mr.mr->rkey;
}

/* The MR's handle is there: is it another MR now (cannot tell: no)? */
static bool mr_replaced(int fd, const struct object *o)
{
	return mr_keys_hold(fd, o) == 0;
}

/* o, to the lost. */
static int lost_add(struct object ***lost, size_t *n, struct object *o)
{
	struct object **l = realloc(*lost, (*n + 1) * sizeof(*l));

	if (!l)
		return -ENOMEM;
	*lost = l;
	l[(*n)++] = o;
	return 0;
}

static bool checkable(const struct profile *p)
{
	return profile_conf(p) && profile_ctx(p) && !profile_import_err(p) &&
	       !profile_busy(p) &&
	       (profile_state(p) == PROFILE_READY ||
		profile_state(p) == PROFILE_DEGRADED);
}

/* Add o to the lost when it is. Returns -errno when the kernel
 * cannot be asked, else 0. */
static int look(struct tables *t, int fd, struct object *o, bool keys,
		struct object ***lost, size_t *n)
{
	int r;

	if (o->state != OBJ_READY && o->state != OBJ_DRAINING)
		return 0;
	r = handle_gone(t, fd, o);
	if (r < 0)
		return r;
	if (!r && !(keys && o->kind == OBJ_MR && o->u.mr.mr &&
		    mr_replaced(fd, o)))
		return 0;
	return lost_add(lost, n, o);
}

/* Which MRs a round checks the keys of: RECONCILE_MR_KEYS of the n from
 * first, from the cursor on. Asked once a round, not per object. */
struct keys_round {
	size_t first, n, from;
};

static struct keys_round keys_round(struct profile *p)
{
	size_t n = profile_conf(p)->n_objs[OBJ_MR];

	return (struct keys_round){
	    .first = profile_kind_first(p, OBJ_MR),
	    .n = n,
	    .from = n ? profile_health(p)->mr_cursor % n : 0,
	};
}

static bool keys_due(const struct keys_round *k, size_t i)
{
	size_t at = i - k->first;

	return k->n && i >= k->first && at < k->n &&
	       (at - k->from + k->n) % k->n < RECONCILE_MR_KEYS;
}

static bool unchanged(struct profile *p);

/* A round that finds the kernel's lists as the last full look left them
 * (unchanged()): only the MRs whose keys are due are looked at (a handle
 * the kernel gave again to another MR lists the same). */
static int look_keys(int fd, struct profile *p, const struct keys_round *k,
		     struct object ***lost, size_t *n)
{
	int r = 0;

	for (size_t i = 0; r == 0 && i < k->n && i < RECONCILE_MR_KEYS; i++) {
		struct object *o =
		    profile_object_at(p, k->first + (k->from + i) % k->n);

		if ((o->state == OBJ_READY || o->state == OBJ_DRAINING) &&
		    o->u.mr.mr && mr_replaced(fd, o))
			r = lost_add(lost, n, o);
	}
	return r;
}

/* The full look: every object against the kernel's lists, the keys of
 * the MRs due; the lists digested for the quick looks after it. */
static int look_all(struct reconcile *rc, struct profile *p, int fd,
		    const struct keys_round *keys, struct object ***lost,
		    size_t *n_lost)
{
	struct tables t = { .listed = { false } };
	size_t n = 0;
	int r = 0;

	for (size_t i = 0, all = profile_n_objects(p); r >= 0 && i < all; i++)
		r = look(&t, fd, profile_object_at(p, i), keys_due(keys, i),
			 lost, &n);
	for (size_t i = 0; r >= 0 && i < profile_n_draining(p); i++)
		r = look(&t, fd, profile_draining_at(p, i), false, lost, &n);
	/* What was listed, for the next attach's quick look; only when all
	 * is as it should be (what is lost is made again: new handles). */
	profile_health(p)->digested = 0;
	profile_health(p)->listed = 0;
	for (int k = 0; r >= 0 && !n && k < UH_KINDS; k++) {
		if (t.listed[k])
			profile_health(p)->listed |= 1u << k;
		if (t.listed[k] && t.err[k] == 0 && t.complete[k]) {
			uhandle_digest_of(t.h[k], t.n[k],
					  &profile_health(p)->digest[k]);
			profile_health(p)->digested |= 1u << k;
		}
	}
	tables_clear(&t);
	if (r == -EOPNOTSUPP && !rc->unsupported) {
		rc->unsupported = true;
		log_notice("the kernel cannot list a context's handles "
			   "(UVERBS_METHOD_INFO_HANDLES, Linux 5.0): objects "
			   "that clients destroy are not noticed");
	}
	*n_lost = n;
	return r;
}

int reconcile_profile(struct reconcile *rc, struct profile *p,
		      uint64_t max_age)
{
	_cleanup_free_ struct object **lost = NULL;
	struct keys_round keys;
	uint64_t now = 0;
	size_t n = 0;
	int r, fd;

	sd_event_now(manager_loop(rc->m), CLOCK_MONOTONIC, &now);
	if (!checkable(p) || (profile_health(p)->checked &&
			      now - profile_health(p)->checked < max_age))
		return 0;
	fd = profile_ctx(p)->cmd_fd;
	keys = keys_round(p);
	/* The timer's round: one call per kind, no sort and no lookup per
	 * object, when nothing moved in the kernel's lists since. */
	if (max_age && unchanged(p)) {
		r = look_keys(fd, p, &keys, &lost, &n);
		if (n)
			profile_health(p)->digested = 0;
	} else {
		r = look_all(rc, p, fd, &keys, &lost, &n);
	}
	profile_health(p)->checked = now;
	profile_health(p)->mr_cursor += RECONCILE_MR_KEYS;
	if (r < 0)
		return r;
	if (n) {
		json_t *holders = manager_holders_json(rc->m, profile_name(p));

		if (profile_mark_lost(p, lost, n, holders))
			profile_create_lost(p);
		json_decref(holders);
	}
	return (int)n;
}

/* Whether every kind the last check listed digests the same now: one
 * call per kind, no sort and no lookup per object. */
static bool unchanged(struct profile *p)
{
	const struct profile_health *h = profile_health(p);
	int fd = profile_ctx(p)->cmd_fd;

	if (!h->digested || h->digested != h->listed)
		return false;
	for (int k = 0; k < UH_KINDS; k++) {
		struct uhandle_digest d;

		if (!(h->digested & (1u << k)))
			continue;
		if (uhandle_digest(fd, (enum uhandle_kind)k, &d) < 0 ||
		    memcmp(&d, &h->digest[k], sizeof(d)))
			return false;
	}
	return true;
}

/* A ready MR of p on pd (its i-th PD), whose keys the kernel can be
 * asked for: NULL when none. The one found last time first, then the
 * rest: an attach of a profile whose PDs' MRs come late in its list
 * does not walk them each time. */
static const struct object *mr_on(struct profile *p, size_t i,
				  const struct ibv_pd *pd)
{
	size_t at = profile_kind_first(p, OBJ_MR);
	size_t count = profile_kind_count(p, OBJ_MR);
	uint32_t *hint = &profile_health(p)->witness[i];

	for (size_t k = 0; k <= count; k++) {
		/* k 0: the hint; then every MR (the hint's again too). */
		size_t j = k ? k - 1 : *hint;
		const struct object *o;

		if (j >= count)
			continue;
		o = profile_object_at(p, at + j);
		if (o->state == OBJ_READY && o->u.mr.mr &&
		    o->u.mr.mr->pd == pd) {
			*hint = (uint32_t)j;
			return o;
		}
	}
	return NULL;
}

/*
 * Are all of p's PDs in the kernel, as told by an MR on each? The kernel
 * refuses to destroy a PD that an MR is on, and finds an MR by its
 * handle without a walk (UVERBS_METHOD_QUERY_MR), where its list of a
 * kind's handles walks every object of the context (a context of 10k
 * MRs and one PD is 10k steps under a spinlock). An MR that answers with
 * our keys is ours, and so is its PD. 1: all there; 0: some PD has no
 * such MR, or the kernel cannot tell (its list is needed).
 */
static int pds_witnessed(struct profile *p, int fd)
{
	size_t at = profile_kind_first(p, OBJ_PD);
	size_t count = profile_kind_count(p, OBJ_PD);

	if (count > PROFILE_PD_WITNESSES)
		return 0;
	for (size_t i = 0; i < count; i++) {
		const struct object *o = profile_object_at(p, at + i), *mr;

		if (o->state != OBJ_READY && o->state != OBJ_DRAINING)
			continue;
		mr = o->u.pd ? mr_on(p, i, o->u.pd) : NULL;
		if (!mr || mr_keys_hold(fd, mr) != 1)
			return 0;
	}
	/* A draining PD has no witness here (its MRs drain apart): listed. */
	for (size_t i = 0; i < profile_n_draining(p); i++)
		if (profile_draining_at(p, i)->kind == OBJ_PD)
			return 0;
	return 1;
}

/* Are all of p's handles of uverbs kind k, except MRs', in the kernel's
 * table? The listing asks for as many as p has, so the kernel stops
 * once it found them; only a list without one of ours is looked at
 * whole. */
static bool kind_present(struct profile *p, enum uhandle_kind k, int fd)
{
	_cleanup_free_ uint32_t *ours = NULL, *first = NULL, *all = NULL;
	size_t n = 0, n_first = 0, n_all = 0;
	bool found = true;
	int complete;

	if (k == UH_PD && pds_witnessed(p, fd))
		return true;
	for (int ok = 0; ok < OBJ_KIND_MAX; ok++) {
		size_t at = profile_kind_first(p, (enum obj_kind)ok);
		size_t count = profile_kind_count(p, (enum obj_kind)ok);

		/* Only the kinds whose objects are of uverbs kind k: a
		 * profile's memories and MRs are not walked for each. */
		if (ok == OBJ_MR || object_kind_uverbs(ok) != k)
			continue;
		for (size_t i = 0; i < count; i++) {
			const struct object *o = profile_object_at(p, at + i);
			enum uhandle_kind ko;
			uint32_t h, *grown;

			if ((o->state != OBJ_READY &&
			     o->state != OBJ_DRAINING) ||
			    !object_handle(o, &ko, &h) || ko != k)
				continue;
			grown = realloc(ours, (n + 1) * sizeof(*ours));
			if (!grown)
				return false;
			ours = grown;
			ours[n++] = h;
		}
	}
	if (!n)
		return true;
	if (uhandle_list_first(fd, k, n, &first, &n_first) < 0)
		return false;
	for (size_t i = 0; found && i < n; i++)
		found = uhandle_in(first, n_first, ours[i]);
	if (found)
		return true;
	/* Another's of the kind came first (a client's, in a handle
	 * freed before): the whole list. */
	if (uhandle_list(fd, k, &all, &n_all, &complete) < 0 || !complete)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!uhandle_in(all, n_all, ours[i]))
			return false;
	return true;
}

static bool present_but_mrs(struct profile *p)
{
	int fd = profile_ctx(p)->cmd_fd;

	for (int k = 0; k < UH_KINDS; k++)
		if (k != UH_MR && !kind_present(p, (enum uhandle_kind)k, fd))
			return false;
	return true;
}

int reconcile_attach(struct reconcile *rc, struct profile *p, bool mrs)
{
	if (!checkable(p) || (mrs ? unchanged(p) : present_but_mrs(p)))
		return 0;
	return reconcile_profile(rc, p, 0);
}

static int on_timer(sd_event_source *es, uint64_t usec, void *ud)
{
	struct reconcile *rc = ud;
	size_t n;
	struct profile *const *profiles;

	(void)usec;
	sd_event_source_set_time_relative(es, RECONCILE_USEC);
	sd_event_source_set_enabled(es, SD_EVENT_ON);
	/* A reload is under way: no round now. */
	if (manager_reloading(rc->m))
		return 0;
	profiles = manager_profiles_of(rc->m, &n);
	for (size_t i = 0; i < n; i++)
		reconcile_profile(rc, profiles[i], RECONCILE_USEC / 2);
	return 0;
}

int reconcile_new(struct manager *m, struct reconcile **out)
{
	struct reconcile *rc = calloc(1, sizeof(*rc));
	int r;

	if (!rc)
		return -ENOMEM;
	rc->m = m;
	r = sd_event_add_time_relative(manager_loop(m), &rc->timer,
				       CLOCK_MONOTONIC, RECONCILE_USEC,
				       RECONCILE_USEC / 10, on_timer, rc);
	if (r < 0) {
		free(rc);
		return r;
	}
	*out = rc;
	return 0;
}

struct reconcile *reconcile_free(struct reconcile *rc)
{
	if (!rc)
		return NULL;
	sd_event_source_disable_unref(rc->timer);
	free(rc);
	return NULL;
}
