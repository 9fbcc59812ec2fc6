// SPDX-License-Identifier: MIT
/*
 * What serves or joins beyond the device: remote memory targets
 * (target.c) and multicast groups (mcast.c), each kind's table
 * (kinds.h). Both start on the loop once made, and tell their profile
 * of their changes.
 */
#include <stdio.h>

#include "kinds.h"
#include "mcast.h"
#include "objects.h"
#include "target.h"

/* ---- target ---- */

static int target_create(struct profile *p, struct object *o)
{
	const struct conf_target *c = o->conf;
	struct object *pd = object_dep(p, o, OBJ_PD, c->pd);
	struct object *cq = pd ? object_dep(p, o, OBJ_CQ, c->cq) : NULL;
	struct target_params tp = {
	    .profile = profile_name(p),
	    .conf = c,
	    .ctx = profile_ctx(p),
	    .ibdev = profile_ibdev(p),
	    .port = profile_device(p)->port,
	    .pd = pd ? pd->u.pd : NULL,
	    .cq = cq ? cq->u.cq.cq : NULL,
	    .channel = cq ? cq->u.cq.channel : NULL,
	    .events = profile_events(p),
	    .owner = p,
	};
	char *why = NULL;
	int r;

	if (!cq)
		return -o->err;
	for (size_t i = 0; i < c->n_expose; i++) {
		const struct conf_expose *e = &c->expose[i];
		struct object *mr = object_dep(p, o, OBJ_MR, e->mr);

		if (!mr)
			return -o->err;
		tp.range[i] = (struct target_range_src){
			.mr = mr->u.mr.mr,
			.addr = mr->u.mr.iova + e->offset,
			.length = e->length ? e->length
					    : mr->u.mr.mr->length - e->offset,
			.access = e->access,
		};
	}
	tp.n_range = c->n_expose;
	r = target_new(&tp, &o->u.target, &why);
	if (r < 0) {
		object_fail(o, r, "%s", why ? why : strerror(-r));
		free(why);
	}
	return r;
}

static void target_destroy(struct object *o)
{
	o->u.target = target_free(o->u.target);
}

static void target_obj_json(const struct object *o, json_t *j)
{
	const struct conf_target *c = o->conf;
	/* Its token shows as set only (config_fields.c: a secret). */
	json_t *cfg = config_object_json(OBJ_TARGET, c);

	SET_STR(j, "listen", c->listen);
	SET_STR(j, "pd", c->pd);
	SET_STR(j, "cq", c->cq);
	json_object_set_new(j, "config", cfg);
	target_json(o->u.target, j);
}

static int target_obj_start(struct profile *p, struct object *o)
{
	int r;

	if (!o->u.target)
		return 0;
	r = target_start(o->u.target, workers_event(profile_workers(p)));
	if (r < 0)
		return object_fail(o, r, "cannot serve connections: %s",
				   strerror(-r));
	return 0;
}

static void target_take_over(struct profile *p, struct object *o)
{
	if (o->u.target)
		target_set_owner(o->u.target, p);
}

static void target_held_handles(const struct object *o,
				void (*add)(void *ud, enum uhandle_kind k,
					    uint32_t h),
				void *ud)
{
	if (o->u.target)
		target_handles(o->u.target, add, ud);
}

const struct object_kind kind_target = {
	.kind = OBJ_TARGET,
	.parents = KIND_BIT(OBJ_PD) | KIND_BIT(OBJ_CQ) | KIND_BIT(OBJ_MR),
	.uverbs = UH_KINDS,
	.netlink = RDMANL_KINDS,
	.on_loop = true,
	.kept_by_restart = false,
	.reset = kind_no_reset,
	.create = target_create,
	.connect = kind_no_connect,
	.start = target_obj_start,
	.destroy = target_destroy,
	.take_over = target_take_over,
	.hand_over = kind_no_hand_over,
	.drain = kind_no_drain,
	.held_handles = target_held_handles,
	.lose = kind_never_lost,
	.handle = kind_no_handle,
	.json = target_obj_json,
	.json_unready = kind_no_json,
	.identity = kind_no_json,
	.attach = kind_not_attached,
};

/* ---- mcast: joined on a worker (mcast.c) ---- */

static int mcast_create(struct profile *p, struct object *o)
{
	const struct conf_mcast *c = o->conf;
	struct mcast_params mp = {
	    .profile = profile_name(p),
	    .conf = c,
	    .ibdev = profile_ibdev(p),
	    .port = profile_device(p)->port,
	    .gid_index = profile_gid_index(p),
	    .gid = *profile_gid(p),
	    .events = profile_events(p),
	    .owner = p,
	};
	char *why = NULL;
	int r;

	/* A QP built is enough: the creation connects QPs once every
	 * object exists, after this (attaching takes any state). */
	for (size_t i = 0; i < c->n_qps && i < CONF_MCAST_MAX_QPS; i++) {
		struct object *qp = profile_find(p, OBJ_QP, c->qps[i]);

		if (!qp || !qp->u.qp.qp || (qp->state != OBJ_READY &&
					    qp->state != OBJ_CREATING))
			return object_dep(p, o, OBJ_QP, c->qps[i]) ? -EAGAIN
							     : -o->err;
		mp.qps[mp.n_qps++] = qp->u.qp.qp;
	}
	mp.pd = mp.n_qps ? mp.qps[0]->pd : NULL;
	r = mcast_new(&mp, &o->u.mcast, &why);
	if (r < 0)
		object_fail(o, r, "%s", why ? why : strerror(-r));
	free(why);
	return r;
}

static void mcast_destroy(struct object *o)
{
	o->u.mcast = mcast_free(o->u.mcast);
}

static void mcast_obj_json(const struct object *o, json_t *j)
{
	json_object_set_new(j, "config", config_object_json(OBJ_MCAST, o->conf));
	mcast_json(o->u.mcast, j);
}

static int mcast_obj_start(struct profile *p, struct object *o)
{
	int r;

	if (!o->u.mcast)
		return 0;
	r = mcast_start(o->u.mcast, workers_event(profile_workers(p)));
	return r < 0 ? object_fail(o, r, "cannot watch the group: %s",
				   strerror(-r))
		     : 0;
}

static void mcast_take_over(struct profile *p, struct object *o)
{
	if (o->u.mcast)
		mcast_set_owner(o->u.mcast, p);
}

static enum attach_part mcast_attach(struct profile *p _unused_,
				     const struct object *o _unused_,
				     bool shared _unused_)
{
	return PART_MCAST;
}

/* A group stays joined for its clients, without the daemon's QPs and
 * AH, which may go before it. */
static void mcast_obj_drain(struct object *o)
{
	mcast_drain(o->u.mcast);
}

static void mcast_held_handles(const struct object *o,
			       void (*add)(void *ud, enum uhandle_kind k,
					   uint32_t h),
			       void *ud)
{
	if (o->u.mcast)
		mcast_handles(o->u.mcast, add, ud);
}

const struct object_kind kind_mcast = {
	.kind = OBJ_MCAST,
	.parents = KIND_BIT(OBJ_QP),
	.uverbs = UH_KINDS,
	.netlink = RDMANL_KINDS,
	.on_loop = true,
	.kept_by_restart = false,
	.reset = kind_no_reset,
	.create = mcast_create,
	.connect = kind_no_connect,
	.start = mcast_obj_start,
	.destroy = mcast_destroy,
	.take_over = mcast_take_over,
	.hand_over = kind_no_hand_over,
	.drain = mcast_obj_drain,
	.held_handles = mcast_held_handles,
	.lose = kind_never_lost,
	.handle = kind_no_handle,
	.json = mcast_obj_json,
	.json_unready = kind_no_json,
	.identity = kind_no_json,
	.attach = mcast_attach,
};
