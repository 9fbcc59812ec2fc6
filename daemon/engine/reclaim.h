/* SPDX-License-Identifier: MIT */
/*
 * Reclaim: destroy by handle what dead clients (and a previous run that
 * did not exit cleanly) left in a profile's shared context, without
 * retiring the context (uhandle.h: the kernel acts on a handle of the
 * file, whichever process holds it).
 *
 * RDMA netlink lists each object with the pid of its maker (gone once
 * the maker is) but not its handle; the context's file lists handles
 * but not their makers. So a kind's leftovers are told by counting: the
 * handles of the kind that are neither the daemon's own (its declared
 * objects, its targets' connections, its multicast AHs) are the
 * clients'; when no live process but the daemon made any object of the
 * kind there (netlink), and there are no more of them than the dumps
 * list as made by processes now gone, they are all a dead process's.
 * The handles are listed at the scan's start and at its end (only those
 * in both count), and a handle goes once it has been a leftover for
 * RECLAIM_DELAY_USEC, at a later scan: never an object a live client
 * made or is making. Children go first (QPs, windows, AHs, SRQs, CQs,
 * MRs, device memory, PDs, XRC domains).
 *
 * What this cannot tell apart: while a live client has objects of a
 * kind in the context, a dead client's of the same kind stay
 * (reclaim_stuck()); the kinds netlink does not list (memory windows,
 * AHs, device memory, XRC domains) are reclaimed only while no session
 * is attached and no live client has anything in the context.
 */
#ifndef RDMAD_RECLAIM_H
#define RDMAD_RECLAIM_H

#include <stdbool.h>
#include <stdint.h>

#include "uhandle.h"

struct profile;

#define RECLAIM_DELAY_USEC 2000000

/* What a scan's dumps counted in a profile's context, by handle kind. */
struct reclaim_census {
	bool dumped[UH_KINDS];	  /* netlink lists the kind */
	unsigned int dead[UH_KINDS]; /* made by a process now gone */
	unsigned int live[UH_KINDS]; /* made by a live process not ours */
};

/* A scan begins: the first look at p's handles. */
void reclaim_begin(struct profile *p);
/*
 * The scan's dumps are in (census; attached: a session is attached to
 * p; now: the loop's CLOCK_MONOTONIC usec): the second look, and what
 * has been a leftover long enough is destroyed. Returns true while leftovers wait for a later scan, or
 * when some were destroyed (a later scan shows the context as it is).
 */
bool reclaim_end(struct profile *p, const struct reclaim_census *c,
		 bool attached, uint64_t now);
/* Leftovers the last scan saw and could not tell from a live client's. */
unsigned int reclaim_stuck(const struct profile *p);
void reclaim_free(struct profile *p);

#endif
