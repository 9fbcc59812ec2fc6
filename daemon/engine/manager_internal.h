/* SPDX-License-Identifier: MIT */
/* The manager's own state: manager*.c only (the rest use manager.h's
 * functions). */
#ifndef RDMAD_MANAGER_INTERNAL_H
#define RDMAD_MANAGER_INTERNAL_H

#include <uthash.h>

#include "manager.h"

struct devwatch;
struct manager_devices;
struct workers;
struct orphans;
struct reload_req;
struct events;
struct reconcile;
struct adopted;

/* A profile in the manager's index by name (its fields are the
 * profile's own: the handle cannot live there). */
struct profile_entry {
	struct profile *p;
	UT_hash_handle hh;
};

struct manager {
	sd_event *event;
	struct config *config;
	struct profile **profiles;
	size_t n_profiles;
	/* The same profiles, by name: names[i] is profiles[i]'s entry. */
	struct profile_entry *names, *by_name;
	/* Profiles a reload removed while sessions held some of their
	 * objects: kept, out of sight, until the last lease ends. */
	struct profile **retired;
	size_t n_retired;
	struct workers *workers;
	/* The event stream (events.h): the engine publishes there, the
	 * front ends subscribe; anyone may publish (sessions, targets). */
	struct events *events;
	struct manager_sessions sessions;
	struct manager_front fronts[FRONT_MAX];
	struct devwatch *devwatch;
	/* The host's devices as GET /v1/devices shows them, read again
	 * when one comes or goes (manager_devices.c). */
	struct manager_devices *devices;
	struct orphans *orphans; /* RDMA netlink scans (orphans.c) */
	struct reconcile *reconcile; /* objects against the kernel */
	/* The previous run's shared clients whose leases this one adopted
	 * (manager_adopt.c). */
	struct adopted *adopted;
	/* Progress events while large memory is populated. */
	sd_event_source *populate_tick;
	struct timespec started; /* CLOCK_MONOTONIC */
	/* Reloads that ended (applied, or refused or cancelled): counted
	 * at the end, so a queued one is in neither. */
	unsigned int reloads_applied, reload_failures;
	unsigned long long orphan_scans, orphan_scan_failures;
	unsigned long long ctx_retirements; /* contexts renewed for orphans */
	struct reload_req *reload_queue; /* the first is on the workers */
	bool reloading; /* a reload is being applied */
	bool stopping;
};

/* manager_adopt.c: the adopted clients of profile appended to out, as
 * manager_holders_json() gives holders. */
void manager_adopted_holders(struct manager *m, const char *profile,
			     json_t *out);

#endif
