// SPDX-License-Identifier: MIT
/*
 * Declared objects the kernel lost: a process that holds the profile's
 * context (a shared client, through the imported context) destroyed
 * them. Each is announced (object_lost), let go of without a kernel
 * call (objects.c: object_lose), and made again with whatever depends
 * on it, by the profile's creation machinery (profile.c); once ready,
 * profile.c announces it again (object_recreated).
 */
#include <stdio.h>

#include "events.h"
#include "log.h"
#include "objects.h"
#include "profile_internal.h"

static void announce_lost(struct profile *p, const struct object *o,
			  json_t *holders)
{
	enum uhandle_kind k;
	uint32_t h = 0;

	object_handle(o, &k, &h);
	log_object(LOG_WARNING, 0, p->conf->name, obj_kind_name(o->kind),
		   object_name(o),
		   "profile %s: %s '%s' (handle %u) is gone from the kernel: "
		   "a process holding the context destroyed it; %zu sessions "
		   "attached%s",
		   p->conf->name, obj_kind_name(o->kind), object_name(o), h,
		   json_array_size(holders),
		   o->state == OBJ_DRAINING ? "" : "; making it again");
	events_publish(p->notify.events,
		       &(struct event){.kind = EV_OBJECT_LOST,
				       .profile_name = p->conf->name,
				       .profile = p,
				       .object = o,
				       .u.sessions = holders});
}

/* i and what depends on it, transitively (links too: a QP's peer is
 * connected again). */
static void mark_dependents(const struct profile *p, size_t i, bool *mark)
{
	if (mark[i])
		return;
	mark[i] = true;
	for (uint32_t e = p->dep_start[i]; e < p->dep_start[i + 1]; e++)
		mark_dependents(p, p->dependents[e], mark);
}

size_t profile_mark_lost(struct profile *p, struct object *const *lost,
			 size_t n, json_t *holders)
{
	_cleanup_free_ bool *mark = calloc(p->n_objects + 1, sizeof(*mark));
	_cleanup_free_ bool *gone = calloc(p->n_objects + 1, sizeof(*gone));
	size_t todo = 0;

	if (!mark || !gone)
		return 0;
	/* Leases stay with what drains: each object's own count. */
	profile_holds_fold(p);
	for (size_t i = 0; i < n; i++) {
		struct object *o = lost[i];
		unsigned int leases = o->leases;

		announce_lost(p, o, holders);
		p->health.faults.lost[o->kind]++;
		o->lost++;
		if (o->state == OBJ_DRAINING) {
			/* Nothing to make again: it goes with its last
			 * lease, as it would have. */
			object_lose(o);
			object_set_state(o, OBJ_DRAINING);
			o->leases = leases;
			continue;
		}
		object_lose(o);
		o->relost = true;
		gone[o - p->objects] = true;
		mark_dependents(p, (size_t)(o - p->objects), mark);
	}
	/* What still stands on what went goes too, children first; a
	 * session's lease keeps it, apart, while it lasts. */
	for (size_t i = p->n_objects; i-- > 0;) {
		struct object *o = &p->objects[i];

		if (!mark[i])
			continue;
		if (!gone[i] && o->state == OBJ_READY) {
			if (!o->leases || profile_add_draining(p, o) < 0)
				object_destroy(o);
		} else if (!gone[i]) {
			object_destroy(o);
		}
		o->todo = true;
		todo++;
	}
	profile_touch(p);
	return todo;
}
