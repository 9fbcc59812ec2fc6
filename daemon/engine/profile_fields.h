/* SPDX-License-Identifier: MIT */
/*
 * A profile's fields: profile*.c alone include this (and unit tests that
 * build one by hand). The rest of the engine and api/ ask for what they
 * need through profile_index.h's functions, so that a field can change
 * without their knowing.
 */
#ifndef RDMAD_PROFILE_FIELDS_H
#define RDMAD_PROFILE_FIELDS_H

#include "profile_index.h"

struct job;

/* The creation under way, on workers (profile.c's): a job per object,
 * allocated while it runs. */
struct profile_build {
	struct workers *workers;
	struct job *jobs;
	size_t in_flight; /* jobs submitted and not done */
	bool cancelling;  /* a drain: done jobs start nothing new */
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

/* Attaches in one mode holding every object its view leases
 * (attach_view_lease()), counted here rather than on each object (marked
 * by its bit in held) while the attach generation is gen (0: no list,
 * nothing marked). profile_holds_fold() makes them the objects' own. */
#define PROFILE_HOLD_MODES 2 /* shared, local */
struct profile_holds {
	uint64_t gen;
	unsigned int holders;
	size_t n_marked;
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
	char
	    ibdev[PROFILE_IBDEV_MAX]; /* the device matched, "" while pending */
	int gid_index; /* the GID selected on dev->port, -1 if none */
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
	struct profile_holds holds[PROFILE_HOLD_MODES];
	struct profile_restart restart;
	struct profile_health health;
};

#endif
