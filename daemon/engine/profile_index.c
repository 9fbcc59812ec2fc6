// SPDX-License-Identifier: MIT
/*
 * What every other file of the engine reads a profile by, and nothing
 * here calls up: its objects found by kind and name (the configuration's
 * own index) or by incarnation, whether sessions hold any and how many
 * hold each (the lease lists counted once, profile_holds), the names of
 * the states, and the generation that documents are cached by. The
 * objects' own code (objects*.c, kind_*.c) and the scans (orphans.c,
 * qphealth.c) use these; profile.c, which calls those, does too.
 */
#include <string.h>

#include "attach_view.h"
#include "profile_fields.h"

static const char *const state_names[] = {
	[OBJ_PENDING] = "pending",
	[OBJ_READY] = "ready",
	[OBJ_FAILED] = "failed",
	[OBJ_DRAINING] = "draining",
	[OBJ_CREATING] = "creating",
};

static const char *const action_names[] = {
	[ACT_KEEP] = "keep",
	[ACT_RECREATE] = "recreate",
	[ACT_CREATE] = "create",
	[ACT_REMOVE] = "remove",
	[ACT_UPDATE] = "update",
	[ACT_RETRY] = "retry",
};

static const char *const profile_state_names[] = {
	[PROFILE_PENDING] = "pending",
	[PROFILE_READY] = "ready",
	[PROFILE_DEGRADED] = "degraded",
	[PROFILE_FAILED] = "failed",
	[PROFILE_CREATING] = "creating",
};

const char *obj_state_name(enum obj_state s)
{
	return state_names[s];
}

const char *obj_action_name(enum obj_action a)
{
	return action_names[a];
}

const char *profile_state_name(enum profile_state s)
{
	return profile_state_names[s];
}

/* One counter for both: a generation is unique in the daemon. */
static uint64_t generations;

void profile_touch(struct profile *p)
{
	/* The lease lists are of the attach generation that ends here. */
	profile_holds_fold(p);
	p->notify.generation = p->notify.attach_generation = ++generations;
}

void profile_touch_view(struct profile *p)
{
	p->notify.generation = ++generations;
}

void profile_touch_leases(struct profile *p)
{
	p->notify.generation = ++generations;
	/* Who holds what must outlive us at every moment (the lease
	 * record): said at once, not at the next settle. */
	if (p->notify.owner)
		manager_profile_changed(p->notify.owner, p, PROFILE_LEASES);
}

void profile_touch_leases_ended(struct profile *p)
{
	p->notify.generation = ++generations;
	if (p->notify.owner)
		manager_profile_changed(p->notify.owner, p,
					PROFILE_LEASES_ENDED);
}

/* The objects are the config's declarations, in its order: its name
 * index finds them (the names are not indexed twice). */
struct object *profile_find(struct profile *p, enum obj_kind kind,
			    const char *name)
{
	const char *c;

	if (!p->conf) /* retired: nothing left to find */
		return NULL;
	c = conf_obj_find(p->conf, kind, name);
	if (!c)
		return NULL;
	return &p->objects[p->kind_start[kind] +
			   (size_t)(c - (const char *)p->conf->objs[kind]) /
				   conf_obj_size(kind)];
}

struct object *profile_find_serial(struct profile *p, enum obj_kind kind,
				   const char *name, uint64_t serial)
{
	struct object *o = profile_find(p, kind, name);

	/* By the name index first: a detach of thousands of leases. */
	if (o && o->serial == serial)
		return o;
	for (size_t i = 0; i < p->n_objects; i++)
		if (p->objects[i].serial == serial &&
		    p->objects[i].kind == kind && streq(object_name(&p->objects[i]), name))
			return &p->objects[i];
	for (size_t i = 0; i < p->n_draining; i++)
		if (p->draining[i].serial == serial &&
		    p->draining[i].kind == kind && streq(object_name(&p->draining[i]), name))
			return &p->draining[i];
	return NULL;
}

bool profile_leased(const struct profile *p)
{
	for (size_t b = 0; b < PROFILE_HOLD_MODES; b++)
		if (p->holds[b].gen && p->holds[b].holders &&
		    p->holds[b].n_marked)
			return true;
	for (size_t i = 0; i < p->n_objects; i++)
		if (p->objects[i].leases)
			return true;
	return p->n_draining > 0;
}

unsigned int profile_object_leases(const struct profile *p,
				   const struct object *o)
{
	unsigned int n = o->leases;

	for (size_t b = 0; b < PROFILE_HOLD_MODES; b++)
		if (o->held & 1u << b && p->holds[b].gen)
			n += p->holds[b].holders;
	return n;
}

static void fold_one(struct profile *p, struct object *o)
{
	o->leases = profile_object_leases(p, o);
	o->held = 0;
}

void profile_holds_fold(struct profile *p)
{
	bool any = false;

	for (size_t b = 0; b < PROFILE_HOLD_MODES; b++)
		any = any || p->holds[b].gen;
	if (!any)
		return;
	for (size_t i = 0; i < p->n_objects; i++)
		fold_one(p, &p->objects[i]);
	for (size_t i = 0; i < p->n_draining; i++)
		fold_one(p, &p->draining[i]);
	memset(p->holds, 0, sizeof(p->holds));
}

void profile_hold(struct profile *p, unsigned int mode,
		  const struct attach_lease *l, size_t n)
{
	struct profile_holds *h = &p->holds[mode];

	if (h->gen != p->notify.attach_generation) {
		/* The first attach of the generation (profile_touch() folded
		 * the last one's; a list of another is never counted). */
		if (h->gen)
			profile_holds_fold(p);
		for (size_t i = 0; i < n; i++)
			l[i].o->held |= 1u << mode;
		*h = (struct profile_holds){.gen = p->notify.attach_generation,
					    .n_marked = n};
	}
	h->holders++;
}

bool profile_unhold(struct profile *p, unsigned int mode, uint64_t gen)
{
	struct profile_holds *h = &p->holds[mode];

	if (!h->gen || h->gen != gen || !h->holders)
		return false;
	h->holders--;
	return true;
}

void ctx_view_clear(struct ctx_view *v)
{
	free(v->orphan);
	*v = (struct ctx_view){ 0 };
}
