/* SPDX-License-Identifier: MIT */
/*
 * What profile.c (a profile's life: open, create on the workers, bury,
 * stop) lends to profile_reload.c (a reload of one profile), and the
 * profile's fields (profile_fields.h): profile*.c's alone.
 */
#ifndef RDMAD_PROFILE_INTERNAL_H
#define RDMAD_PROFILE_INTERNAL_H

#include "profile.h"
#include "profile_fields.h"

struct burial;

/* An object_state event for o, unless a large creation would flood. */
void profile_object_announce(struct profile *p, const struct object *o);
/* Create the objects marked todo, parents first, on the workers. */
void profile_create_objects(struct profile *p);
/* Stop the creation under way; objects are left as they are. */
void profile_cancel_creation(struct profile *p);
/* Wait for what was buried in p's context. */
void profile_bury_wait(struct profile *p);
/* Add o to *bp (NULL: a new burial), or destroy it now. */
void profile_bury(struct burial **bp, struct object *o);
/* Destroy what *b holds on a worker, children first (NULL: nothing). */
void profile_bury_submit(struct profile *p, struct burial *b);
/* Keep a removed object alive, apart, while sessions hold it. 0 or
 * -ENOMEM. */
int profile_add_draining(struct profile *p, struct object *o);

#endif
