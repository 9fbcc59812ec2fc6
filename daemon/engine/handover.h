/* SPDX-License-Identifier: MIT */
/*
 * What a profile hands to the next run of the daemon, as the fd store's
 * front end (front/sysd.c) needs it: its memory objects' fds and, on a
 * device that imports, its context and the document of what the next
 * run may take back in it (restore.h). The front end reads no field of
 * the profile: it asks here.
 */
#ifndef RDMAD_HANDOVER_H
#define RDMAD_HANDOVER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

struct profile;

/* Each memory object of p whose fd a restart can take back (memfd and
 * hugetlb): each(ud, memory name, serial, fd). With ready, only those
 * ready and with an fd (a worker may still write the others); without,
 * every one, fd -1 (what a removal names). */
void profile_each_kept_memory(const struct profile *p, bool ready,
			      void (*each)(void *ud, const char *memory,
					   uint64_t serial, int fd),
			      void *ud);
/* Does p have a context a restart can take back (on a device that
 * imports)? Its leases are then worth keeping (manager_holders_text()). */
bool profile_hands_over(const struct profile *p);
/* p's context for the store, as it is now, in any state. */
struct kept_context {
	int cmd_fd;	 /* p's: not to be closed */
	int64_t ctxn;	 /* the kernel's number of it, -1: unknown */
	bool taken_back; /* the previous run's, which the store has */
	char *text;	 /* the state document (restore_state()), to free */
	size_t len;
};
/* 0, or -1 when there is none to keep, or the document cannot be written
 * (or the previous run's is still the truth: until restore_finish()). */
int profile_kept_context(const struct profile *p, struct kept_context *out);
/* The stop at exit leaves p's context to the next run (its PDs and MRs
 * in it): true when it has one to leave. */
bool profile_leave_context(struct profile *p);

#endif
