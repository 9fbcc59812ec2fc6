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
/* p's context for the store, when a restart can take it back (ready, on
 * a device that imports): its cmd_fd (p's: not to be closed) and the
 * state document (restore_state(), with holders when given) in *text,
 * to free. -1 when there is none, or the document cannot be written. */
int profile_kept_context(const struct profile *p, json_t *holders,
			 char **text, size_t *len);
/* The stop at exit leaves p's context to the next run (its PDs and MRs
 * in it): true when it has one to leave. */
bool profile_leave_context(struct profile *p);

#endif
