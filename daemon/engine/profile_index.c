// SPDX-License-Identifier: MIT
/*
 * What every other file of the engine reads a profile by, and nothing
 * here calls up: its objects found by kind and name (the configuration's
 * own index) or by incarnation, whether sessions hold any, the names of
 * the states, and the generation that documents are cached by. The
 * objects' own code (objects*.c, kind_*.c) and the scans (orphans.c,
 * qphealth.c) use these; profile.c, which calls those, does too.
 */
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
	p->notify.generation = p->notify.attach_generation = ++generations;
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
	for (size_t i = 0; i < p->n_objects; i++)
		if (p->objects[i].leases)
			return true;
	return p->n_draining > 0;
}

void ctx_view_clear(struct ctx_view *v)
{
	free(v->orphan);
	*v = (struct ctx_view){ 0 };
}
