/* SPDX-License-Identifier: MIT */
/*
 * What a client is given when it attaches to a profile (ATTACHED, proto/
 * PROTOCOL.md), as the engine sees it: which objects are ready and
 * shareable in a mode, the document that names them, the fds that go
 * with it and the objects it leases. The control layer asks for it,
 * sends it and keeps the leases; it reads no field of the engine or the
 * model for an attach, only what is here.
 */
#ifndef RDMAD_ATTACH_VIEW_H
#define RDMAD_ATTACH_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"

struct object;
struct profile;
struct proto_attached;

/* One object an attachment holds, by incarnation. name is the
 * configuration's: copy it to keep it past the attach. */
struct attach_lease {
	enum obj_kind kind;
	const char *name;
	uint64_t serial;
	struct object *o; /* the engine's, while the generation holds */
};

/*
 * The fds and leases of one attach, in the document's order: fds[i] is
 * the fd the document's index i names (the context's cmd_fd first in
 * shared mode). opened are those the view opened itself (XRC domains'
 * files): attach_view_clear() closes them; the others are the engine's,
 * valid while the profile stays as it is (until the loop runs again).
 * There is room for one more fd: an MR table's memfd, the caller's.
 */
struct attach_view {
	int *fds;
	size_t n_fds;
	int *opened;
	size_t n_opened;
	struct attach_lease *leases;
	size_t n_leases;
	/* The mode's lease list (0: shared, 1: local): every attach of a
	 * mode in one generation leases the same objects. */
	unsigned int mode;
};

/* How an attach is answered: ATTACH's mode and options, as bits. */
enum attach_how {
	ATTACH_LOCAL = 0,
	ATTACH_SHARED = 1 << 0, /* shared mode: the context's cmd_fd */
	/* "memory_fds": false: the memories without their fds, which the
	 * client asks for one by one (MAP) */
	ATTACH_NO_MEMORY_FDS = 1 << 1,
	/* "memory_table": with an MR table, the memories are in it, not
	 * in the text's "memory" list; their fds, if they come, from the
	 * table's "memory_fd" on */
	ATTACH_MEMORY_TABLE = 1 << 2,
};

/*
 * ATTACHED of p answered how but for its "attachment" key, as JSON text
 * ("{...}", *len bytes, NUL-terminated): the same for every attach while
 * profile_attach_generation() stays the same. NULL without memory.
 */
char *profile_attach_text(struct profile *p, unsigned int how, size_t *len);
/*
 * ATTACHED of p in shared mode for a client that reads an MR table: the
 * text (as above) without the "mr" list, naming instead the table
 * (*table, *table_len bytes: proto/mr_table.h) as the fd after the
 * view's. Both malloc'ed; 0 or -errno.
 */
int profile_attach_table(struct profile *p, unsigned int how, char **text,
			 size_t *len, void **table, size_t *table_len);
/* The same as the typed ATTACHED (proto/attached.h): every string and
 * list malloc'ed, for proto_attached_free() (also on failure). 0 or
 * -ENOMEM. */
int profile_attach_fill(struct profile *p, unsigned int how,
			struct proto_attached *a);
/* Changes whenever anything the text says may have changed, unique in
 * the daemon; leases, which the text does not show, leave it alone. */
uint64_t profile_attach_generation(const struct profile *p);
/* The fds and leases of an attach of p answered how, matching the text.
 * 0 or -errno (an XRC file that cannot be opened), v cleared on
 * failure. */
int profile_attach_view(struct profile *p, unsigned int how,
			struct attach_view *v);
void attach_view_clear(struct attach_view *v);
/* Take the view's leases (once it is on its way): each object stays
 * while leased (manager_release_held(), or manager_release() by name
 * once the generation moved, lets go). v must be of p's attach
 * generation now (its objects are the profile's as they are). The
 * attaches of a mode and generation are counted once, not on each
 * object (profile_hold()): the same for 10,000 leases as for one. The
 * caller says the change (profile_touch_leases()) once the holder is
 * where the lease record finds it: said here, it would write a record
 * without the holder, then the caller's with it. */
void attach_view_lease(struct profile *p, const struct attach_view *v);

/* What the control layer asks of a profile before an attach. */
const char *profile_name(const struct profile *p);
/* The memories it declares (those ATTACHED leaves out, anonymous ones,
 * counted too): in constant time. */
size_t profile_memories(const struct profile *p);
/* The uverbs node of its open context ("uverbs0") while it is ready,
 * degraded or creating; NULL when it has none a container could be
 * given (pending: the device is absent; failed: it could not be
 * opened). */
const char *profile_uverbs_node(const struct profile *p);
/* Its declaration. */
const struct conf_profile *profile_conf(const struct profile *p);
/* How many objects it declares. */
size_t profile_n_objects(const struct profile *p);
/* Ready or degraded, with a context: ATTACH is answered now. */
bool profile_attachable(const struct profile *p);
/* Failed: an ATTACH waits for nothing. */
bool profile_failed(const struct profile *p);
/* Ready, degraded or failed: nothing more is coming for a waiter. */
bool profile_settled_state(const struct profile *p);
/* 0 if the context can be shared (imported), else -errno. */
int profile_import_err(const struct profile *p);
const char *profile_ibdev(const struct profile *p);
/* "profile 'x' is creating (3 of 9 objects, ...): reason", for a
 * not_ready answer; NULL without memory. */
char *profile_state_sentence(const struct profile *p);
/* Whether a peer of uid, gid and supplementary groups may attach: the
 * allow list alone decides, for uid 0 too, unless admit_root
 * (daemon.admit_root) admits uid 0 everywhere. */
bool profile_admits(const struct profile *p, uid_t uid, gid_t gid,
		    const gid_t *groups, size_t n_groups, bool admit_root);

#endif
