// SPDX-License-Identifier: MIT
/*
 * Reading what the previous run wrote down of a profile's context for the
 * next: its durable records (durable.h) and its lease record with the
 * lease sets it names (restore.h).
 */
#ifndef RDMAD_RESTORE_LEASES_H
#define RDMAD_RESTORE_LEASES_H
#include <stddef.h>
#include <jansson.h>

/* A lease set's record the previous run stored (leaseset/ID/P). */
struct restore_set {
	char *id;
	int fd;
};

/* A kept record's text, in *len bytes (the caller's to free); NULL when
 * it cannot be read or is too big to be ours. A durable record, or the
 * plain text an older run wrote: read from its start. */
char *restore_record_read(int fd, size_t *len);

/* The holders the lease record in lease_fd names ({version, holders}),
 * each holder's sets (found among sets) joined to its own leases: a new
 * JSON array [{pid, start, uid, gid, leases: [{kind, name, handle}]}],
 * and its makers in *makers (a new reference, or NULL). NULL when there
 * is none or it does not read, or when it names a set that sets do not
 * hold (the state document's holders are used then). */
json_t *restore_leases_read(const char *profile, int lease_fd,
			    const struct restore_set *sets, size_t n_sets,
			    json_t **makers);
#endif
