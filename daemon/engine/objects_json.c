// SPDX-License-Identifier: MIT
/*
 * Objects as JSON: what REST, the control socket and the event stream
 * say of each kind, ready or not. The keys are those of the
 * configuration where they exist; each kind's own fields are its
 * table's (kinds.h).
 */
#include "kinds.h"
#include "objects.h"

json_t *object_json(const struct object *o, unsigned int leases)
{
	const struct object_kind *t = object_kind(o->kind);
	json_t *j = json_pack("{s:s, s:s, s:s}", "kind",
			      obj_kind_name(o->kind), "name", object_name(o),
			      "state", obj_state_name(o->state));

	if (!j)
		return NULL;
	/* Not ready, a kind may say something still: a draining object
	 * outlived its configuration, only its name is left of it and what
	 * the kernel's object says. */
	if (o->state == OBJ_READY)
		t->json(o, j);
	else
		t->json_unready(o, j);
	if (o->state == OBJ_FAILED) {
		SET_INT(j, "errno", o->err);
		SET_STR(j, "reason", o->reason ? o->reason : "");
	}
	SET_INT(j, "leases", leases);
	/* Times the kernel lost it and it was made again (reconcile.c):
	 * the kinds a process holding the context can destroy. */
	if (object_kind_losable(o->kind))
		SET_INT(j, "lost", o->lost);
	return j;
}

/* What a client knew of o: its handle, keys and numbers. */
void object_identity_json(const struct object *o, json_t *j)
{
	enum uhandle_kind k;
	uint32_t h;

	if (!j || !object_handle(o, &k, &h))
		return;
	json_object_set_new(j, "handle", json_integer(h));
	object_kind(o->kind)->identity(o, j);
}
