/* SPDX-License-Identifier: MIT */
/*
 * A profile's objects' types, and what the rest of the engine reads a
 * profile by: lookups, state names, the generation (profile_index.c)
 * and a function per fact (profile_query.c); struct profile itself is
 * profile*.c's (profile_fields.h). The bottom of the engine: the
 * objects' code (objects*.c, the kinds' kind_*.c), the scans (orphans.c,
 * qphealth.c) and restore.c use this header, never profile.h, whose
 * functions call them.
 */
#ifndef RDMAD_PROFILE_INDEX_H
#define RDMAD_PROFILE_INDEX_H

#include <infiniband/verbs.h>
#include <jansson.h>

#include "attach_view.h"
#include "config.h"
#include "memory.h"
#include "rdmanl.h"
#include "uhandle.h"
#include "util.h"
#include "workers.h"

struct asyncwatch;
struct events;
struct profile;
struct target;
struct mcast;

enum obj_state {
	OBJ_PENDING,  /* not created (yet) */
	OBJ_READY,
	OBJ_FAILED,   /* see err and reason */
	OBJ_DRAINING, /* removed by a reload, kept while leased */
	OBJ_CREATING, /* queued or in the works on a worker thread */
};

/* Where an object is in its creation. */
enum obj_phase {
	PHASE_CREATE,  /* its verbs object is being made */
	PHASE_CONNECT, /* a QP moving to its target state */
};

/*
 * One declared object. Tens of thousands of them are normal, so it holds
 * only what lives as long as the object: what a creation needs meanwhile
 * (its job, what it waits for) is the profile's while it runs (struct
 * job, profile.c), and the names are indexed apart (struct nameidx).
 */
struct object {
	/* struct conf_<kind>, the config's; a draining object's own, with
	 * just its name (object_name()). */
	const void *conf;
	char *reason;	  /* when failed */
	uint64_t serial;  /* this incarnation, unique in the daemon */
	union {
		struct memory mem;
		struct {
			struct ibv_xrcd *xrcd;
			int fd;
		} xrcd;
		struct ibv_pd *pd;
		struct ibv_dm *dm;
		struct {
			struct ibv_mr *mr;
			uint64_t iova;
			/* Taken back from the previous run (restore.h). */
			bool restored;
			/* Its memory's, when large: it counts our bytes. */
			struct memory_stats *stats;
		} mr;
		struct ibv_mw *mw;
		struct {
			struct ibv_cq *cq;
			struct ibv_comp_channel *channel;
		} cq;
		struct ibv_srq *srq;
		struct {
			struct ibv_qp *qp;
			/* Times the loop brought it back from the error
			 * state (recover = "reset"; qphealth.c). */
			uint32_t recoveries;
		} qp;
		struct ibv_ah *ah;
		struct target *target;
		struct mcast *mcast;
	} u;
	int err; /* positive errno when failed */
	/* Sessions holding it (attach protocol) one by one: bounded by the
	 * sessions per uid and their attachments, far below 2^22. Those
	 * holding it through its profile's lease list (held, a bit per
	 * mode, profile_holds) are counted there: profile_object_leases()
	 * is the whole count. */
	unsigned int leases : 22;
	unsigned int held : 2;
	enum obj_kind kind : 4;
	/* While the state is creating, only the job touches u, err and
	 * reason. */
	enum obj_state state : 3; /* object_set_state() alone sets it */
	bool todo : 1; /* part of the creation under way */
	/* Being made again because the kernel lost it: its readiness is
	 * announced (object_recreated). */
	bool relost : 1;
	/* Times the kernel lost it (a client destroyed it) and it was made
	 * again: its REST document's "lost". */
	uint32_t lost;
};

static inline const char *object_name(const struct object *o)
{
	return conf_obj_name(o->conf);
}

/*
 * What the last RDMA netlink scan saw in a profile's context (orphans.c):
 * its objects by who made them. Orphans are those neither the daemon nor
 * a session attached to the profile made: a dead client's.
 */
struct ctx_view {
	bool scanned;	/* a scan has looked at this context */
	int err;	/* that scan's -errno, or 0 */
	uint64_t when;	/* CLOCK_REALTIME usec of that scan */
	unsigned int owned[RDMANL_KINDS];   /* the daemon's */
	unsigned int clients[RDMANL_KINDS]; /* live attached sessions' */
	unsigned int orphans[RDMANL_KINDS];
	struct rdmanl_res *orphan; /* each orphan, as the kernel lists it */
	size_t n_orphan;
};

/*
 * What went wrong with a profile's objects after they were made, for
 * /metrics: declared objects the kernel lost (reconcile.c) and how their
 * re-creation went, and what dead clients left that was destroyed by
 * handle (reclaim.c). Counters: a reload carries them over.
 */
struct profile_faults {
	unsigned long long lost[OBJ_KIND_MAX], recreated[OBJ_KIND_MAX],
		recreate_failed[OBJ_KIND_MAX];
	unsigned long long reclaimed[UH_KINDS], reclaim_failed[UH_KINDS];
	/* Handles reclaim meant to destroy that named something else by
	 * then (reclaim.h): left alone. */
	unsigned long long stale[UH_KINDS];
};

struct reclaim;

/* A device's name, as a profile keeps it. */
#define PROFILE_IBDEV_MAX 64

enum profile_state {
	PROFILE_PENDING,  /* device absent */
	PROFILE_READY,	  /* every object created */
	PROFILE_DEGRADED, /* some objects failed */
	PROFILE_FAILED,	  /* the device could not be opened */
	PROFILE_CREATING, /* objects are being created */
};

/* How far a creation has come: objects, registered bytes, and the bytes
 * of its large memories populated (profile_progress_now()). */
struct profile_progress {
	size_t objects, objects_total;
	uint64_t bytes, bytes_total;
	uint64_t populated, populated_total;
};

/* What a profile tells its owner (the manager), on the loop. */
enum profile_change {
	PROFILE_STARTED,  /* a creation starts (progress.*_total known) */
	PROFILE_PROGRESS, /* an object of the creation under way is done */
	PROFILE_SETTLED,  /* the creation under way has ended */
	PROFILE_LEASES,	  /* a lease was taken (or adopted, or handed on) */
	PROFILE_LEASES_ENDED, /* a lease ended */
};
struct manager;
/* What a profile tells its owner, on the loop (manager.c; a NULL owner,
 * as in unit tests: nobody). */
void manager_profile_changed(struct manager *m, struct profile *p,
			     enum profile_change what);

/* What became of the context after the objects were made: the scans'
 * view (orphans.c), the checks against the kernel (reconcile.c), the
 * leftovers to reclaim (reclaim.c) and the faults counted. */
/* PDs beyond this many are looked for in the kernel's list at an
 * attach, not one by one through an MR each (reconcile.c). */
#define PROFILE_PD_WITNESSES 16

struct profile_health {
	/* What the last RDMA netlink scan saw in the context. */
	struct ctx_view view;
	struct profile_faults faults;
	/* The last check of its objects against the kernel: CLOCK_MONOTONIC
	 * usec; and where the next round of MR key checks begins. */
	uint64_t checked;
	size_t mr_cursor;
	/* What that check listed, when it found nothing lost: the kinds
	 * (bits of enum uhandle_kind) and each one's digest. An attach
	 * whose listing digests the same knows nothing went since. */
	unsigned int digested;
	struct uhandle_digest digest[UH_KINDS];
	/* The kinds that check listed: a kind it could not list whole (or
	 * at all) has no digest, and nothing vouches for it. */
	unsigned int listed;
	/* For each of its first PROFILE_PD_WITNESSES PDs, the MR that last
	 * vouched for it at an attach (reconcile.c): its index among the
	 * profile's MRs. A hint, checked before use: a scan when stale. */
	uint32_t witness[PROFILE_PD_WITNESSES];
	/* Leftovers seen in its context, waiting to be reclaimed. */
	struct reclaim *reclaim;
};

/* What a reload did to one object. */
enum obj_action {
	ACT_KEEP,
	ACT_RECREATE,
	ACT_CREATE,
	ACT_REMOVE,
	ACT_RETRY, /* failed before, declared the same: tried again */
	ACT_UPDATE, /* kept, changed in place (a QP in RTS) */
};

/* profile_index.c: it calls nothing of the engine. */
/* The object of this incarnation (serial), running or draining. */
struct object *profile_find_serial(struct profile *p, enum obj_kind kind,
				   const char *name, uint64_t serial);
struct object *profile_find(struct profile *p, enum obj_kind kind,
			    const char *name);
/* Something that shows in the profile's documents changed outside the
 * engine (a QP moved by hand): both generations move. */
void profile_touch(struct profile *p);
/* Only leases changed: the REST documents' generation moves, ATTACHED's
 * stays (an attach or detach does not make the next attach render).
 * Taken (or adopted, or handed on): said at once (PROFILE_LEASES), to be
 * written down before the client has its handles; ended: said as
 * PROFILE_LEASES_ENDED, which a listener may take its time over (a
 * record that still names the holder only keeps its objects longer). */
void profile_touch_leases(struct profile *p);
void profile_touch_leases_ended(struct profile *p);
/* Only what the documents show of the kernel's side changed (the orphan
 * scan's view: counts of owned, client and orphan objects): their
 * generation moves, ATTACHED's stays, so that a client attaching does
 * not make the attaches after the next scan render it again (and name
 * another lease set). */
void profile_touch_view(struct profile *p);
/* Is a creation under way? */
bool profile_busy(const struct profile *p);
const char *obj_state_name(enum obj_state s);
const char *obj_action_name(enum obj_action a);
const char *profile_state_name(enum profile_state s);

/*
 * profile_query.c: what the rest of the engine and api/ ask of a profile
 * (its fields are profile*.c's, profile_fields.h). attach_view.h has what
 * the front ends ask too: profile_name(), profile_conf(),
 * profile_ibdev(), profile_import_err(), profile_n_objects().
 */
enum profile_state profile_state(const struct profile *p);
/* Why it is pending, failed or degraded; NULL: nothing to say. */
const char *profile_reason(const struct profile *p);
/* Its device's declaration; NULL once retired. */
const struct conf_device *profile_device(const struct profile *p);
/* The open context; NULL while pending or failed. */
struct ibv_context *profile_ctx(const struct profile *p);
/* The GID selected on the device's port: its index (-1 if none) and
 * value; a port's GID table changed: the one selected again
 * (asyncev.c). */
int profile_gid_index(const struct profile *p);
const union ibv_gid *profile_gid(const struct profile *p);
void profile_set_gid(struct profile *p, int gid_index,
		     const union ibv_gid *gid);
/* The device's and the context's numbers in RDMA netlink (ctxn -1: not
 * found). */
uint32_t profile_dev_index(const struct profile *p);
int64_t profile_ctxn(const struct profile *p);
/* Its context's async watch, which the owner makes and frees. */
struct asyncwatch *profile_async(const struct profile *p);
void profile_set_async(struct profile *p, struct asyncwatch *w);

/* Its objects in creation order: kind by kind, so that those of kind k
 * are profile_kind_count() from profile_kind_first(). */
struct object *profile_object_at(const struct profile *p, size_t i);
size_t profile_kind_first(const struct profile *p, enum obj_kind k);
size_t profile_kind_count(const struct profile *p, enum obj_kind k);
/* Objects a reload removed while sessions held them. */
size_t profile_n_draining(const struct profile *p);
struct object *profile_draining_at(const struct profile *p, size_t i);

/* The creation under way: its workers, the flag a running job ends
 * early by, and how far it has come (without the population under way:
 * profile_progress_now()). */
struct workers *profile_workers(const struct profile *p);
const atomic_bool *profile_stop_flag(const struct profile *p);
const struct profile_progress *profile_progress(const struct profile *p);

/* Who hears of it: its owner, and where its changes are published
 * (NULL: nowhere; the owner sets it). */
struct manager *profile_owner(const struct profile *p);
struct events *profile_events(const struct profile *p);
void profile_set_events(struct profile *p, struct events *ev);
/* What the owner said last of the population under way. */
uint64_t profile_populated_said(const struct profile *p);
void profile_set_populated_said(struct profile *p, uint64_t populated);
/* What its documents are cached by (profile_touch()). */
uint64_t profile_generation(const struct profile *p);

/* A restart's part (restore.h, handover.c): what the context brought
 * back (NULL: nothing, or no longer), whether the context is the
 * previous run's, and whether tid was one of that run's threads. */
struct restored *profile_restored(const struct profile *p);
bool profile_ctx_kept(const struct profile *p);
bool profile_prev_tid(const struct profile *p, uint32_t tid);
/* What the first scan of a kept context found orphaned once the
 * creation had settled (orphans.c): the previous run's own. */
bool profile_kept_scanned(const struct profile *p);
size_t profile_kept_orphans(const struct profile *p);
void profile_set_kept_orphans(struct profile *p, size_t n);
/* At exit, PDs and MRs stay in the context for the next run. */
void profile_set_hand_over(struct profile *p, bool hand_over);
/* The previous run's shared clients to adopt once settled: whether
 * there are any, and taking them (the caller's; NULL: none). */
bool profile_adopting(const struct profile *p);
json_t *profile_take_adopt(struct profile *p);

/* What became of the context, for its owners (orphans.c, reconcile.c,
 * reclaim*.c); the counts alone, for /metrics. */
struct profile_health *profile_health(const struct profile *p);
const struct ctx_view *profile_ctx_view(const struct profile *p);
const struct profile_faults *profile_faults(const struct profile *p);

/* Forget what scans saw (the context goes). */
void ctx_view_clear(struct ctx_view *v);
/* Sessions hold some of p's objects (running or draining)? */
bool profile_leased(const struct profile *p);
/*
 * How many sessions hold o, an object of p: its own count and those
 * holding it through p's lease list of a mode (attach_view_lease()).
 * Such a list is counted once while the attach generation holds: an
 * attach or detach of 10,000 leases costs one count, not 10,000.
 */
unsigned int profile_object_leases(const struct profile *p,
				   const struct object *o);
/* One more attach in mode (0: shared, 1: local) holds the n objects
 * l names (its view's leases, of p's attach generation now): counted
 * once, the list marked at the first attach of the generation. */
struct attach_lease;
void profile_hold(struct profile *p, unsigned int mode,
		  const struct attach_lease *l, size_t n);
/* One of those attaches, of attach generation gen, lets go: false when
 * the list is not gen's any more (its holders are the objects' own
 * counts now, released one by one, by name). */
bool profile_unhold(struct profile *p, unsigned int mode, uint64_t gen);
/* The holders of p's lease lists become the objects' own counts, the
 * lists go: before anything moves, drains or destroys an object (and at
 * every profile_touch(), as the attach generation moves). */
void profile_holds_fold(struct profile *p);

#endif
