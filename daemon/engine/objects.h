/* SPDX-License-Identifier: MIT */
/* Each object kind: how it is created, connected, destroyed and shown. */
#ifndef RDMAD_OBJECTS_H
#define RDMAD_OBJECTS_H

#include "profile.h"

/* Create o in p (its dependencies are created already). On failure o is
 * failed with errno and reason, and -errno is returned. */
int object_create(struct profile *p, struct object *o);
/* Second pass, once every object exists: QPs move to their target state
 * (their peers exist by now). Other kinds: nothing to do. */
int object_connect(struct profile *p, struct object *o);
/* Free what o holds, whatever its state; o becomes pending. */
void object_destroy(struct object *o);
/* Let go of what o holds without freeing it (someone else took it over):
 * o becomes pending. */
void object_forget(struct object *o);
/* Mark o failed: errno err (either sign) and a reason. Returns -|err|. */
int object_fail(struct object *o, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
json_t *object_json(const struct object *o);

#endif
