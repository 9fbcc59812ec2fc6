// SPDX-License-Identifier: MIT
/*
 * Leases the sessions hold on a profile's objects, found by their
 * incarnation (the profile of that name, or one a reload retired): their
 * release, and a leased memory's fd for MAP.
 */
#include <sys/types.h>

#include "manager_internal.h"
#include "objects.h"
#include "orphans.h"

/* The object of that incarnation: in the profile of that name (*retired
 * -1), or in one a reload removed (its index in m->retired); NULL. */
static struct object *find_leased(struct manager *m, const char *profile,
				  enum obj_kind kind, const char *name,
				  uint64_t serial, struct profile **pp,
				  ssize_t *retired)
{
	struct profile *p = profile ? manager_profile(m, profile) : NULL;
	struct object *o = p ? profile_find_serial(p, kind, name, serial)
			     : NULL;

	*pp = p;
	*retired = -1;
	if (o)
		return o;
	/* Serials are unique in the daemon: at most one retired match. */
	for (size_t i = 0; i < m->n_retired; i++) {
		o = profile_find_serial(m->retired[i], kind, name, serial);
		if (o) {
			*pp = m->retired[i];
			*retired = (ssize_t)i;
			return o;
		}
	}
	return NULL;
}

void manager_release(struct manager *m, const char *profile, enum obj_kind kind,
		     const char *name, uint64_t serial)
{
	struct profile *p;
	ssize_t i;
	struct object *o = find_leased(m, profile, kind, name, serial, &p, &i);

	/* A client may have died with objects in a shared context. */
	orphans_request(m->orphans, ORPHANS_PACED);
	if (!o)
		return;
	profile_release(p, o);
	if (i < 0) {
		profile_touch_leases_ended(p);
	} else if (!profile_n_draining(p)) {
		profile_free(p);
		m->retired[i] = m->retired[--m->n_retired];
	}
}

int manager_memory_fd(struct manager *m, const char *profile, const char *name,
		      uint64_t serial, uint64_t *size)
{
	struct profile *p;
	ssize_t i;
	struct object *o =
	    find_leased(m, profile, OBJ_MEMORY, name, serial, &p, &i);

	if (!o || !profile_object_leases(p, o) || o->u.mem.fd < 0)
		return -ENOENT;
	*size = o->u.mem.size;
	return o->u.mem.fd;
}

bool manager_release_held(struct manager *m, struct profile *p,
			  unsigned int mode, uint64_t generation)
{
	if (!profile_unhold(p, mode, generation))
		return false;
	/* A client may have died with objects in a shared context. */
	orphans_request(m->orphans, ORPHANS_PACED);
	/* Nothing it held drains: that would have moved the generation. */
	profile_touch_leases_ended(p);
	return true;
}
