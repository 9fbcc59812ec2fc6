// SPDX-License-Identifier: MIT
/*
 * A reload of one profile: which objects of the new declaration take
 * over their namesakes (kept, or a QP changed in place), and what is
 * created again, retried, set apart to drain or buried.
 */
#include "objects.h"
#include "profile.h"
#include "profile_internal.h"

/* A ready QP in RTS whose declaration changes only in what may change
 * there: kept, changed in place (*mask, for object_qp_change()). */
static bool qp_in_place(const struct object *o, const struct object *was,
			int *mask)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	return o->kind == OBJ_QP && was->u.qp.qp &&
	       object_qp_in_place(o->conf, was->conf, mask) &&
	       !ibv_query_qp(was->u.qp.qp, &attr, IBV_QP_STATE, &init) &&
	       attr.qp_state == IBV_QPS_RTS;
}

/* Which objects of next can take over their namesake in old: the same
 * declaration (or a QP's that changes in place: mask[i] >= 0), ready,
 * and every object they refer to taken over too (a QP's peer as well).
 * Linear: what is not kept spreads to whoever refers to it, once. */
static int mark_kept(struct profile *next, struct profile *old, bool *keep,
		     int *mask)
{
	_cleanup_free_ uint32_t *queue = NULL;
	size_t head = 0, tail = 0;

	queue = calloc(next->n_objects + 1, sizeof(*queue));
	if (!queue)
		return -ENOMEM;
	for (size_t i = 0; i < next->n_objects; i++) {
		struct object *o = &next->objects[i];
		struct object *was = profile_find(old, o->kind, object_name(o));

		mask[i] = -1;
		keep[i] = was && was->state == OBJ_READY &&
			  (conf_obj_equal(o->kind, o->conf, was->conf) ||
			   qp_in_place(o, was, &mask[i]));
		if (!keep[i])
			queue[tail++] = (uint32_t)i;
	}
	while (head < tail) {
		uint32_t i = queue[head++];

		for (uint32_t e = next->dep_start[i]; e < next->dep_start[i + 1];
		     e++) {
			uint32_t d = next->dependents[e];

			if (keep[d]) {
				keep[d] = false;
				queue[tail++] = d;
			}
		}
	}
	return 0;
}

/* Memory does not depend on the device: what next declares the same way
 * is taken over from old, contents and leases, whatever the device. */
static void take_memory(struct profile *next, struct profile *old)
{
	for (size_t i = 0; i < next->n_objects; i++) {
		struct object *o = &next->objects[i];
		struct object *was;

		if (o->kind != OBJ_MEMORY)
			continue;
		was = profile_find(old, OBJ_MEMORY, object_name(o));
		if (!was || was->state != OBJ_READY ||
		    !conf_obj_equal(OBJ_MEMORY, o->conf, was->conf))
			continue;
		o->u = was->u;
		o->leases = was->leases;
		o->serial = was->serial;
		object_set_state(o, OBJ_READY);
		object_forget(was);
	}
}

/* A reload of one profile under way: what each object of next does. */
struct diff {
	struct profile *next, *old;
	bool *keep;  /* takes over its namesake in old */
	bool *retry; /* failed in old, declared the same: tried again */
	int *mask;   /* >= 0: kept, a QP changed in place (these attributes) */
	void (*report)(void *ud, const struct object *o, enum obj_action a);
	void *ud;
};

/* Another device, or none yet: old stops, next starts over (its memory
 * taken from old). Only what is really being created is reported. */
static void start_over(struct diff *d)
{
	struct profile *next = d->next, *old = d->old;
	bool had = old->ctx != NULL;

	for (size_t i = 0; had && i < old->n_objects; i++)
		if (!profile_find(next, old->objects[i].kind,
				  object_name(&old->objects[i])))
			d->report(d->ud, &old->objects[i], ACT_REMOVE);
	take_memory(next, old);
	profile_stop(old, "reloaded");
	if (profile_start(next) < 0)
		return;
	for (size_t i = 0; i < next->n_objects; i++) {
		struct object *o = &next->objects[i];

		d->report(d->ud, o,
			  !o->todo ? ACT_KEEP
			  : had && profile_find(old, o->kind, object_name(o))
				  ? ACT_RECREATE
				  : ACT_CREATE);
	}
}

/* The context and what was found with it stay. */
static void take_context(struct profile *next, struct profile *old)
{
	next->ctx = TAKE_PTR(old->ctx);
	memcpy(next->ibdev, old->ibdev, sizeof(next->ibdev));
	next->gid_index = old->gid_index;
	next->gid = old->gid;
	next->import_err = old->import_err;
	next->dev_index = old->dev_index;
	next->ctxn = old->ctxn;
	next->health.view = old->health.view;
	old->health.view = (struct ctx_view){0};
	/* Who made what in the context (reclaim.h) stays with it. */
	next->health.reclaim = TAKE_PTR(old->health.reclaim);
	next->draining = TAKE_PTR(old->draining);
	next->n_draining = old->n_draining;
	old->n_draining = 0;
}

/* Each kept object moves from old to next; the rest is to be created. */
static void take_over(struct diff *d)
{
	for (size_t i = 0; i < d->next->n_objects; i++) {
		struct object *o = &d->next->objects[i];
		struct object *was = profile_find(d->old, o->kind,
						  object_name(o));

		if (d->keep[i]) {
			o->u = was->u;
			object_take_over(d->next, o);
			o->leases = was->leases;
			o->serial = was->serial;
			o->lost = was->lost;
			object_set_state(o, OBJ_READY);
			object_forget(was);
			if (d->mask[i] < 0)
				d->report(d->ud, o, ACT_KEEP);
		} else {
			o->todo = true;
			/* Lost and not made again yet: its re-creation here
			 * is announced and counted as such. */
			if (was && was->relost) {
				o->relost = true;
				o->lost = was->lost;
			}
			d->retry[i] = was && was->state == OBJ_FAILED &&
				      conf_obj_equal(o->kind, o->conf,
						     was->conf);
		}
	}
}

/* QPs changed in place, once every kept object is in next (a peer's QP
 * number comes from there). If the device refuses, the QP stays as it
 * was, failed: a reload retries. */
static void change_in_place(struct diff *d)
{
	for (size_t i = 0; i < d->next->n_objects; i++) {
		struct object *o = &d->next->objects[i];

		if (!d->keep[i] || d->mask[i] < 0)
			continue;
		if (object_qp_change(d->next, o, d->mask[i]) < 0)
			object_set_state(o, OBJ_FAILED);
		d->report(d->ud, o, ACT_UPDATE);
		if (o->state == OBJ_FAILED)
			profile_object_announce(d->next, o);
	}
}

/* What old still holds goes, children first, on the workers; leased
 * objects are set apart to drain. */
static void bury_rest(struct diff *d)
{
	struct burial *b = NULL;

	for (size_t i = d->old->n_objects; i-- > 0;) {
		struct object *was = &d->old->objects[i];

		if (!profile_find(d->next, was->kind, object_name(was)))
			d->report(d->ud, was, ACT_REMOVE);
		if (was->leases && was->state == OBJ_READY &&
		    profile_add_draining(d->next, was) == 0)
			continue;
		profile_bury(&b, was);
	}
	profile_bury_submit(d->next, b);
}

/* What next is about to create: new, retried or created again. */
static void report_todo(struct diff *d)
{
	for (size_t i = 0; i < d->next->n_objects; i++) {
		struct object *o = &d->next->objects[i];

		if (!o->todo)
			continue;
		d->report(d->ud, o,
			  !profile_find(d->old, o->kind, object_name(o))
				  ? ACT_CREATE
			  : d->retry[i] ? ACT_RETRY
					: ACT_RECREATE);
	}
}

int profile_reload(struct profile *next, struct profile *old,
		   void (*report)(void *ud, const struct object *o,
				  enum obj_action a),
		   void *ud)
{
	_cleanup_free_ bool *keep = NULL, *retry = NULL;
	_cleanup_free_ int *mask = NULL;
	struct diff d = { .next = next, .old = old, .report = report, .ud = ud };
	int r;

	/* Leases move with the objects they hold: each object's own. */
	profile_holds_fold(old);
	/* What old is still creating stops here; what ran is kept or
	 * destroyed like the rest. What an earlier reload buried goes
	 * first: a parent may be buried now. */
	profile_cancel_creation(old);
	profile_bury_wait(old);
	/* Its counters go on in the profile that replaces it: taken once
	 * what ran has ended (a lost object's re-creation that ends in the
	 * wait above counts there). */
	next->health.faults = old->health.faults;
	if (!old->ctx || !conf_device_equal(next->dev, old->dev)) {
		start_over(&d);
		return 0;
	}
	d.keep = keep = calloc(next->n_objects + 1, sizeof(*keep));
	d.retry = retry = calloc(next->n_objects + 1, sizeof(*retry));
	d.mask = mask = calloc(next->n_objects + 1, sizeof(*mask));
	if (!keep || !retry || !mask)
		return -ENOMEM;
	r = mark_kept(next, old, keep, mask);
	if (r < 0)
		return r;
	take_context(next, old);
	take_over(&d);
	change_in_place(&d);
	bury_rest(&d);
	report_todo(&d);
	profile_stop(old, "replaced by a reload");
	/* Last: with nothing to create, it settles at once. */
	profile_create_objects(next);
	return 0;
}
