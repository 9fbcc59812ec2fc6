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
 * MRs are also matched to their maker (attribution): a scan that lists
 * an MR of the context with its creating thread alive remembers it (its
 * netlink number, keys and length) with that thread's process, watched
 * through a pidfd (no pid reuse can stand in for it). Once that process
 * is gone, the MR is destroyed by handle whatever else lives in the
 * context: the handle whose QUERY_MR answer matches the MR (its keys, or
 * with keys hidden, no CAP_NET_ADMIN, its length), when exactly one
 * handle and one listed MR match, and neither is the daemon's; after
 * RECLAIM_DELAY_USEC, at a later scan, after the children a scan can
 * reclaim; refused (a window still bound to it), at a later scan again.
 * An MR whose maker the scans never saw alive is left to counting, and
 * an MR a live process is remembered for is never counted a leftover.
 *
 * Nothing is destroyed by a handle that may name something else now:
 * an MR handle is queried (QUERY_MR) when it first counts as a leftover
 * and before it goes, and a change of keys (the handle freed and given
 * to another MR) leaves it alone, logged and counted (stale); so does a
 * leftover MR whose keys the dumps list for a live maker. Other kinds
 * are checked as far as the kernel lets: listed in both looks, and
 * continuously since they were first seen.
 *
 * What this cannot tell apart: while a live client has objects of a
 * kind in the context, a dead client's of the same kind stay
 * (reclaim_stuck()), MRs matched to their maker excepted; the kinds
 * netlink does not list (memory windows, AHs, device memory, XRC
 * domains) are reclaimed only while no session is attached and no live
 * client has anything in the context.
 */
#ifndef RDMAD_RECLAIM_H
#define RDMAD_RECLAIM_H

#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>
#include <jansson.h>
#include <systemd/sd-event.h>

#include "uhandle.h"

struct profile;

#define RECLAIM_DELAY_USEC 2000000

/* How an MR is told: netlink lists keys (with CAP_NET_ADMIN) and the
 * length; QUERY_MR on a handle gives the same. */
struct reclaim_key {
	uint32_t lkey, rkey;
	uint64_t length;
};

/* An MR of the context a scan listed, not the daemon's. */
struct reclaim_mr {
	uint32_t mrn;	      /* netlink's number */
	struct reclaim_key key;
	bool keys;	      /* lkey and rkey shown */
	uint32_t tid;	      /* its creating thread, 0: gone */
	pid_t maker;	      /* tid's process (or tid, a leader): 0 unknown */
};

/* A QP of the context a scan listed, not the daemon's. */
struct reclaim_qp {
	uint32_t qpn;
	uint32_t tid; /* its creating thread, 0: gone */
	pid_t maker;  /* tid's process (as reclaim_mr's), 0: unknown */
};

/* What a scan's dumps counted in a profile's context, by handle kind. */
struct reclaim_census {
	bool dumped[UH_KINDS];	  /* netlink lists the kind */
	unsigned int dead[UH_KINDS]; /* made by a process now gone */
	unsigned int live[UH_KINDS]; /* made by a live process not ours */
	/* The context's MRs that are not the daemon's (for attribution),
	 * and whether the dumps showed MR keys: 1, 0, -1 no MR listed. */
	struct reclaim_mr *mrs;
	size_t n_mrs;
	int keys;
	/* Its QPs that are not the daemon's (for the clients' claims). */
	struct reclaim_qp *qps;
	size_t n_qps;
	/* Its SRQs less those the daemon holds: the kernel names an SRQ's
	 * PD's maker as the SRQ's (Linux 6.1, rdma_restrack_parent_name),
	 * the daemon for one on a profile's PD, so none counts as dead. */
	unsigned int srqs_not_ours;
};

/*
 * What a client says its process made in the context (MADE: the kernel
 * ties no QP, CQ or SRQ to its maker's handle): a QP by handle and
 * number, a CQ or an SRQ by handle. Once that process is gone they are
 * destroyed by handle, QPs before SRQs before CQs, after the same delay
 * and only where the kernel agrees: the handle is in both looks and not
 * the daemon's; a QP's number is still listed, made by nobody alive or
 * by that process; the dumps list at least as many CQs made by nobody
 * alive as are destroyed, and as many SRQs that are not the daemon's
 * nor a live claimant's. A handle gone from the file
 * (the client destroyed it without saying so) ends the claim.
 */
struct reclaim_claim {
	enum uhandle_kind kind; /* UH_QP, UH_CQ or UH_SRQ */
	uint32_t handle;
	uint32_t qp_num;
};
/* Claims a context keeps at most. */
#define RECLAIM_CLAIMS_MAX 65536
/*
 * Process pid made (undo: destroyed) the n objects of c in p's context.
 * 0, or -EINVAL (a kind that cannot be claimed, p not shared), -EEXIST
 * (another live process claims one of the handles: nothing is taken),
 * -ESRCH (pid cannot be watched), -ENOSPC, -ENOMEM.
 */
int reclaim_claim(struct profile *p, pid_t pid, const struct reclaim_claim *c,
		  size_t n, bool undo);
/* The process that claimed QP qpn of p's context (0: none). */
pid_t reclaim_qp_maker(const struct profile *p, uint32_t qpn);

/*
 * The verbs reclaim acts through (uhandle.h), a plug point for tests:
 * NULL puts back the real ones.
 */
struct reclaim_verbs {
	int (*list)(int cmd_fd, enum uhandle_kind k, uint32_t **out,
		    size_t *n, int *complete);
	int (*destroy)(int cmd_fd, enum uhandle_kind k, uint32_t h);
	int (*query_mr)(int cmd_fd, uint32_t h, struct reclaim_key *key);
	/* A pidfd for process pid (-errno): pidfd_open(2). */
	int (*watch)(pid_t pid);
};
void reclaim_set_verbs(const struct reclaim_verbs *v);

/*
 * A scan begins: the first look at p's handles. A maker's death wakes
 * gone (an I/O handler on its pidfd, which it must disable) on event,
 * with ud; event NULL: nothing is watched, deaths wait for a scan.
 */
void reclaim_begin(struct profile *p, sd_event *event,
		   sd_event_io_handler_t gone, void *ud);
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
/* The process that made MR mrn of p's context, as a scan saw it alive
 * (0: none seen); *alive: it lives still. */
pid_t reclaim_maker_of(const struct profile *p, uint32_t mrn, bool *alive);

/* Do the scans know MR mrn of this length as a client's (its maker alive
 * or not)? */
bool reclaim_knows_mr(const struct profile *p, uint32_t mrn,
		      uint64_t length);

/*
 * The record of who made what (reclaim_record.c), for the next run: the
 * makers with the MRs the scans saw them make and the objects they
 * claimed, as JSON text, [{pid, start, gone, mrs: [{mrn, tid, length,
 * lkey, rkey}], claims: [{kind, handle, qp_num}]}] (lkey and rkey when
 * known). NULL without memory. reclaim_record_due() says (once) that
 * it changed since it was last rendered.
 */
char *reclaim_record_text(const struct profile *p, size_t *len);
bool reclaim_record_due(struct profile *p);
/* The record of the previous run (its text's JSON), taken back into p's
 * context, which is that run's: its makers watched again (or gone), so
 * that what they made is reclaimed as if this run had seen it made.
 * What does not fit the form is skipped. */
void reclaim_restore(struct profile *p, const json_t *makers);

/* What attribution knows of p's context, for its orphans document. */
struct reclaim_stats {
	size_t makers;	     /* processes watched */
	size_t mrs_live;     /* MRs remembered, their maker alive */
	size_t mrs_waiting;  /* MRs of makers gone, not yet destroyed */
	size_t claims[UH_KINDS]; /* objects claimed (MADE), by kind */
	int keys;	     /* netlink shows MR keys: 1, hides them: 0, -1
				no MR listed yet */
};
void reclaim_stats(const struct profile *p, struct reclaim_stats *st);
/* The context is closed: what was known of its makers goes with it. */
void reclaim_free(struct profile *p);

#endif
