// SPDX-License-Identifier: MIT
/*
 * An object's uverbs handle, and letting go of an object whose kernel
 * part someone else destroyed (reconcile.h), through its kind's table.
 */
#include "kinds.h"
#include "objects.h"

bool object_handle(const struct object *o, enum uhandle_kind *k, uint32_t *h)
{
	const struct object_kind *t = object_kind(o->kind);

	if (!t->handle(o, h))
		return false;
	*k = t->uverbs;
	return true;
}

void object_lose(struct object *o)
{
	/* Not a kernel object of the context: never lost. */
	if (!object_kind_losable(o->kind))
		return;
	object_kind(o->kind)->lose(o);
	object_forget(o);
	o->leases = 0;
	o->held = 0;
}
