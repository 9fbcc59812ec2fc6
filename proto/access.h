/* SPDX-License-Identifier: MIT */
/*
 * The names of memory access rights (IBV_ACCESS_* bits), as the
 * configuration, the REST documents and ATTACHED spell them: the one
 * table of them, for the daemon's configuration and documents, the
 * ATTACHED codec and the clients.
 */
#ifndef RDMAD_PROTO_ACCESS_H
#define RDMAD_PROTO_ACCESS_H

#include <stdbool.h>
#include <stddef.h>

#include <infiniband/verbs.h>
#include <jansson.h>

/*
 * X(name, IBV_ACCESS_ bit), in the order documents list them. An
 * X-macro so that a table of another shape (the configuration's
 * struct enum_name) is expanded from this list, not copied from it.
 */
#define PROTO_ACCESS_NAMES(X)                                                  \
	X("local_write", IBV_ACCESS_LOCAL_WRITE)                               \
	X("remote_write", IBV_ACCESS_REMOTE_WRITE)                             \
	X("remote_read", IBV_ACCESS_REMOTE_READ)                               \
	X("remote_atomic", IBV_ACCESS_REMOTE_ATOMIC)                           \
	X("mw_bind", IBV_ACCESS_MW_BIND)                                       \
	X("relaxed_ordering", IBV_ACCESS_RELAXED_ORDERING)

/* The bit of name, or 0 when it names none. */
unsigned int proto_access_flag(const char *name);

/* The name of one bit, or NULL. */
const char *proto_access_name(unsigned int flag);

/* Every bit this table names, or'ed. */
unsigned int proto_access_known(void);

/* access as a JSON array of names, in table order (bits without a name
 * are left out); NULL when out of memory. */
json_t *proto_access_json(unsigned int access);

/* A JSON array of names into *access: -EINVAL when a is not an array or
 * holds anything but a known name. Repeated names are allowed. */
int proto_access_parse(const json_t *a, unsigned int *access);

#endif
