// SPDX-License-Identifier: MIT
/*
 * What every object does, whatever its kind, through its kind's table
 * (kinds.h): the tables by kind, and the steps of an object's life.
 */
#include "kinds.h"
#include "objects.h"

/*
 * The one place an object's state changes. Silent, unlike
 * profile_set_state() (profile.c): an object's change is told by its profile
 * (profile_object_announce(), or the creation's progress), which
 * decides when thousands of changes make one event.
 */
void object_set_state(struct object *o, enum obj_state s)
{
	o->state = s;
}

/* ---- the kinds ---- */

/* Indexed by enum obj_kind, whose order is the creation order. */
static const struct object_kind *const kinds[OBJ_KIND_MAX] = {
	[OBJ_MEMORY] = &kind_memory, [OBJ_XRCD] = &kind_xrcd,
	[OBJ_PD] = &kind_pd,	     [OBJ_DM] = &kind_dm,
	[OBJ_MR] = &kind_mr,	     [OBJ_MW] = &kind_mw,
	[OBJ_CQ] = &kind_cq,	     [OBJ_SRQ] = &kind_srq,
	[OBJ_QP] = &kind_qp,	     [OBJ_AH] = &kind_ah,
	[OBJ_TARGET] = &kind_target, [OBJ_MCAST] = &kind_mcast,
};

const struct object_kind *object_kind(enum obj_kind k)
{
	return (unsigned int)k < OBJ_KIND_MAX ? kinds[k] : NULL;
}

/* ---- every kind ---- */

static void object_reset(struct object *o)
{
	memset(&o->u, 0, sizeof(o->u));
	kinds[o->kind]->reset(o);
}

/* Each creation is a new incarnation: leases name the one they hold.
 * Only the loop counts. */
static uint64_t serials;

uint64_t object_next_serial(void)
{
	return ++serials;
}

void object_hand_over(struct object *o)
{
	/* The kernel's object stays in the context for the next run; what
	 * of it is ours goes (unimport frees just that). */
	kinds[o->kind]->hand_over(o);
	object_forget(o);
}

void object_forget(struct object *o)
{
	object_reset(o);
	object_set_state(o, OBJ_PENDING);
}

int object_build(struct profile *p, struct object *o)
{
	int r;

	object_reset(o);
	free(o->reason);
	o->reason = NULL;
	o->err = 0;
	r = kinds[o->kind]->create(p, o);
	if (r < 0) {
		/* Whatever the kind holds after a half-way failure. */
		kinds[o->kind]->destroy(o);
		object_reset(o);
	}
	return r;
}

int object_connect(struct profile *p, struct object *o)
{
	return kinds[o->kind]->connect(p, o);
}

int object_start(struct profile *p, struct object *o)
{
	return kinds[o->kind]->start(p, o);
}

void object_take_over(struct profile *p, struct object *o)
{
	kinds[o->kind]->take_over(p, o);
}

bool object_kind_losable(enum obj_kind k)
{
	return kinds[k]->uverbs != UH_KINDS;
}

enum uhandle_kind object_kind_uverbs(enum obj_kind k)
{
	return kinds[k]->uverbs;
}

enum uhandle_kind object_uverbs_of_netlink(enum rdmanl_kind n)
{
	for (int k = 0; k < OBJ_KIND_MAX; k++)
		if (kinds[k]->netlink == n && n != RDMANL_KINDS)
			return kinds[k]->uverbs;
	return UH_KINDS;
}

bool object_on_loop(const struct object *o)
{
	return kinds[o->kind]->on_loop;
}

bool object_kept_by_restart(const struct object *o)
{
	return kinds[o->kind]->kept_by_restart;
}

void object_drain(struct object *o)
{
	kinds[o->kind]->drain(o);
}

void object_held_handles(const struct object *o,
			 void (*add)(void *ud, enum uhandle_kind k, uint32_t h),
			 void *ud)
{
	kinds[o->kind]->held_handles(o, add, ud);
}

void object_destroy(struct object *o)
{
	kinds[o->kind]->destroy(o);
	object_reset(o);
	/* This incarnation ends: leases naming it find nothing from now. */
	o->leases = 0;
	o->held = 0;
	free(o->reason);
	o->reason = NULL;
	o->err = 0;
	object_set_state(o, OBJ_PENDING);
}
