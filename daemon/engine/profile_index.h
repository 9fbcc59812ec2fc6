/* SPDX-License-Identifier: MIT */
/*
 * A profile's and its objects' types, and what the rest of the engine
 * reads a profile by (profile_index.c): lookups, state names, the
 * generation. The bottom of the engine: the objects' code (objects*.c,
 * the kinds' kind_*.c), the scans (orphans.c, qphealth.c) and restore.c
 * use this header, never profile.h, whose functions call them.
 */
#ifndef RDMAD_PROFILE_INDEX_H
#define RDMAD_PROFILE_INDEX_H

#include <infiniband/verbs.h>
#include <jansson.h>
#include <uthash.h>

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
	/* Sessions holding it (attach protocol): bounded by the sessions
	 * per uid and their attachments, far below 2^22. */
	unsigned int leases : 22;
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

/* The creation under way, on workers (profile.c's): a job per object,
 * allocated while it runs. */
struct profile_build {
	struct workers *workers;
	struct job *jobs;
	size_t in_flight;  /* jobs submitted and not done */
	bool cancelling;   /* a drain: done jobs start nothing new */
	/* Set by the loop while it drains: a running job ends early where
	 * it can (a population between chunks). */
	atomic_bool stop;
	/* Destructions of a reload on the workers (profile.c, burial): the
	 * profile stays creating until they are over too. */
	unsigned int burying;
	bool unburying; /* bury_wait: a done burial settles nothing */
	struct profile_progress progress;
};

/* Who hears of the profile, and what its documents are cached by. */
struct profile_notify {
	/* The owner (told by manager_profile_changed(); NULL: none), and
	 * what it said last of the population under way (its progress
	 * events). */
	struct manager *owner;
	uint64_t populated_said;
	/* Where its state changes are published (events.h); NULL: nowhere.
	 * The owner sets it after profile_new(). */
	struct events *events;
	/* Changes on every change that shows in the profile's documents;
	 * unique in the daemon, so that a cached document never outlives
	 * its profile. */
	uint64_t generation;
	/* The same, but for leases (which ATTACHED does not show): what
	 * the control socket keeps ATTACHED by (attach_view.h). */
	uint64_t attach_generation;
};

/* A restart's part (restore.h, handover.c): what the context brought
 * back from the previous run, and what it leaves for the next. */
struct profile_restart {
	/* What it kept, until the creation settles, and that run's threads
	 * (whose PDs in the context are ours). */
	struct restored *restored;
	pid_t *prev_tids;
	size_t n_prev_tids;
	/* The open context is the previous run's, taken back; and what its
	 * first scan found orphaned in it once the creation had settled:
	 * that run's own leftovers when it did not exit cleanly (a crash),
	 * which alone do not retire the context (orphans.c). */
	bool ctx_kept, kept_scanned;
	size_t kept_orphans;
	/* At exit, PDs and MRs stay in the context for the next run. */
	bool hand_over;
	/* The previous run's shared clients that held objects of the
	 * context taken back, until the owner adopts their leases once the
	 * profile has settled; NULL: none. */
	json_t *adopt;
};

/* What became of the context after the objects were made: the scans'
 * view (orphans.c), the checks against the kernel (reconcile.c), the
 * leftovers to reclaim (reclaim.c) and the faults counted. */
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
	/* Leftovers seen in its context, waiting to be reclaimed. */
	struct reclaim *reclaim;
};

/*
 * A profile at run time, by concern: what it is and its device context
 * (here), its objects (here), the creation under way (build), who hears
 * of it (notify), a restart's part (restart) and what became of the
 * context (health).
 */
struct profile {
	const struct conf_profile *conf;
	const struct conf_device *dev;
	enum profile_state state;
	char *reason;
	/* The device context. */
	char ibdev[64]; /* the device matched, "" while pending */
	int gid_index;	/* the GID selected on dev->port, -1 if none */
	union ibv_gid gid;
	int import_err; /* 0: the context can be imported; else -errno */
	struct ibv_context *ctx;
	struct asyncwatch *async; /* the context's async events */
	/* The device's and the context's numbers in RDMA netlink (ctxn -1:
	 * not found). */
	uint32_t dev_index;
	int64_t ctxn;
	/* In creation order: kind by kind, each kind in the order of its
	 * declarations (objects[kind_start[k] + i] is declaration i of kind
	 * k), so that the config's own name index finds them. */
	struct object *objects;
	size_t n_objects;
	size_t kind_start[OBJ_KIND_MAX];
	/* Who depends on object i: dependents[dep_start[i] .. dep_start[i+1])
	 */
	uint32_t *dep_start, *dependents;
	/* Objects a reload removed while sessions held them. */
	struct object *draining;
	size_t n_draining;
	struct profile_build build;
	struct profile_notify notify;
	struct profile_restart restart;
	struct profile_health health;
	UT_hash_handle hh; /* the manager's index, by name */
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
/* Is a creation under way? */
static inline bool profile_busy(const struct profile *p)
{
	return p->state == PROFILE_CREATING;
}
const char *obj_state_name(enum obj_state s);
const char *obj_action_name(enum obj_action a);
const char *profile_state_name(enum profile_state s);

/* Forget what scans saw (the context goes). */
void ctx_view_clear(struct ctx_view *v);
/* Sessions hold some of p's objects (running or draining)? */
bool profile_leased(const struct profile *p);

#endif
