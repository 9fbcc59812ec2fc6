// SPDX-License-Identifier: MIT
/*
 * What the kinds' tables (kinds.h) share: failing an object, finding
 * what it depends on, keeping a lost object's remains, and the named
 * no-ops of the kinds without an operation. Below the tables: nothing
 * here calls a kind.
 */
#include <stdarg.h>
#include <stdio.h>

#include "kinds.h"
#include "objects.h"

int object_fail(struct object *o, int err, const char *fmt, ...)
{
	va_list ap;

	free(o->reason);
	va_start(ap, fmt);
	if (vasprintf(&o->reason, fmt, ap) < 0)
		o->reason = NULL;
	va_end(ap);
	o->err = err < 0 ? -err : err;
	if (!o->err)
		o->err = EIO;
	return -o->err;
}

/* A dependency of o, which must be ready; fails o otherwise. */
struct object *object_dep(struct profile *p, struct object *o,
			  enum obj_kind kind, const char *name)
{
	struct object *d = profile_find(p, kind, name);

	if (!d || d->state != OBJ_READY) {
		object_fail(o, EAGAIN, "%s '%s' it depends on is %s",
			    obj_kind_name(kind), name,
			    d ? obj_state_name(d->state) : "missing");
		return NULL;
	}
	return d;
}

/*
 * What the provider made for a handle someone else destroyed. Its
 * destroy call cannot be used: it sends the handle to the kernel, which
 * by then may have given it to another object of the file (another
 * process's). Where the provider can let go of an object without the
 * kernel (an unimport), it does; the rest is kept here, reachable and
 * never used again, for the daemon's life: a few hundred bytes per
 * object a client destroyed.
 */
static void **remains;
static size_t n_remains;

void object_keep_remains(void *v)
{
	void **n = v ? realloc(remains, (n_remains + 1) * sizeof(*n)) : NULL;

	if (n) {
		remains = n;
		remains[n_remains++] = v;
	}
}

/* Nothing but zeroes before a creation. */
void kind_no_reset(struct object *o _unused_)
{
}

/* Made is connected. */
int kind_no_connect(struct profile *p _unused_, struct object *o _unused_)
{
	return 0;
}

/* Nothing serves from the loop. */
int kind_no_start(struct profile *p _unused_, struct object *o _unused_)
{
	return 0;
}

/* It tells its profile nothing. */
void kind_no_take_over(struct profile *p _unused_, struct object *o _unused_)
{
}

/* Nothing of it outlives the daemon in the kernel. */
void kind_no_hand_over(struct object *o _unused_)
{
}

/* It drains as it is. */
void kind_no_drain(struct object *o _unused_)
{
}

/* It made nothing else in the context. */
void kind_no_held_handles(const struct object *o _unused_,
			  void (*add)(void *ud, enum uhandle_kind k,
				      uint32_t h) _unused_,
			  void *ud _unused_)
{
}

/* Not a kernel object of the context (uverbs UH_KINDS): never lost. */
void kind_never_lost(struct object *o _unused_)
{
}

bool kind_no_handle(const struct object *o _unused_, uint32_t *h _unused_)
{
	return false;
}

/* Nothing more in its document. */
void kind_no_json(const struct object *o _unused_, json_t *j _unused_)
{
}

enum attach_part kind_not_attached(struct profile *p _unused_,
				   const struct object *o _unused_,
				   bool shared _unused_)
{
	return PART_NONE;
}
