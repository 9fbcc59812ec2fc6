/* SPDX-License-Identifier: MIT */
/*
 * What reclaim.c (the scans' second look, counting, the destructions)
 * and reclaim_who.c (who made what: MRs seen with their makers, the
 * clients' claims, the makers' pidfds) share. reclaim.c calls down into
 * reclaim_who.c, never the other way.
 */
#ifndef RDMAD_RECLAIM_INTERNAL_H
#define RDMAD_RECLAIM_INTERNAL_H

#include "profile_index.h"
#include "reclaim.h"

/* Handles of each kind, a growing array apiece. */
struct sets {
	uint32_t *h[UH_KINDS];
	size_t n[UH_KINDS], cap[UH_KINDS];
	bool short_of_memory; /* a handle could not be added */
};

/* A leftover and when it was first seen; an MR's keys then. */
struct seen {
	uint32_t h;
	uint64_t since; /* CLOCK_MONOTONIC usec */
	struct reclaim_key key;
	bool keyed;
};

/* A process that made MRs in the context, watched while they last. */
struct maker {
	pid_t pid;
	int pidfd;
	sd_event_source *es; /* its death wakes a scan */
	bool gone;
	unsigned int refs; /* entries of made and claims naming it */
	unsigned long long start; /* its start time (restore.h), 0: unknown */
};

/* An MR a scan listed while its maker lived. */
struct made {
	uint32_t mrn, tid; /* tid: the thread that made it */
	struct reclaim_key key;
	bool keys; /* key.lkey/rkey known (else the length alone) */
	struct maker *maker;
	uint32_t now_tid; /* the thread the scan at hand lists */
	ssize_t at;	  /* its handle in the scan's mr_handles, -1: none */
	uint64_t due;	  /* when first seen with its maker gone, 0: not */
	bool listed;	  /* by the scan at hand */
	bool refused;	  /* its destruction was refused (logged once) */
};

/* An object a client said its process made (reclaim_claim). */
struct claim {
	enum uhandle_kind kind;
	uint32_t handle, qp_num;
	struct maker *maker;
	uint64_t due; /* when first due (maker gone, handle listed), 0: not */
	bool dropped;
};

struct reclaim {
	struct sets first; /* at the scan's start */
	bool looked;
	struct seen *cand[UH_KINDS]; /* leftovers waiting */
	size_t n_cand[UH_KINDS];
	unsigned int stuck;
	/* Attribution: the makers, and their MRs sorted by mrn. */
	struct maker **makers;
	size_t n_makers;
	struct made *made;
	size_t n_made;
	struct claim *claims;
	size_t n_claims;
	int keys; /* as reclaim_census.keys, the last scan's */
	/* made or claims changed since the record was last rendered
	 * (reclaim_record.c) */
	bool dirty;
	/* The context all this is of: another one starts afresh. */
	const struct ibv_context *ctx;
	int64_t ctxn;
	sd_event *event;
	sd_event_io_handler_t gone;
	void *ud;
};


const struct reclaim_verbs *reclaim_verbs_get(void);
void reclaim_sets_clear(struct sets *s);
bool reclaim_shareable(const struct profile *p);
/* p's reclaim state, made if need be; emptied when p's context is not
 * the one it was of. NULL without memory. */
struct reclaim *reclaim_get(struct profile *p);
/* Let go of everything r knows (r itself stays). */
void reclaim_forget(struct reclaim *r);
bool reclaim_maker_gone(struct maker *m);
/* The live process pid among the makers, watched from now on if it was
 * not; NULL when it cannot be (gone, no pidfd, too many). */
struct maker *reclaim_maker_get(struct reclaim *r, pid_t pid);
/* A maker the record of a previous run names, gone already when gone
 * (or when pid now is another process than the one started at start):
 * NULL when it cannot be kept. */
struct maker *reclaim_maker_put(struct reclaim *r, pid_t pid,
				unsigned long long start, bool gone);
void reclaim_made_compact(struct reclaim *r);
void reclaim_attribute(struct reclaim *r, const struct reclaim_census *c);
void reclaim_stale(struct profile *p, int k, uint32_t h, const char *why);
bool reclaim_claimed(struct reclaim *r, int k, uint32_t h);
void reclaim_match_claims(struct reclaim *r, const struct sets *second,
			  struct reclaim_census *c);
bool reclaim_settle_claims(struct profile *p, struct reclaim *r, int k,
			   const struct sets *second, const struct sets *ours,
			   const struct reclaim_census *c, uint64_t now,
			   size_t *destroyed);

#endif
