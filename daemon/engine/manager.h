/* SPDX-License-Identifier: MIT */
/*
 * The manager owns the running configuration, the profiles, the worker
 * pool and the event loop, and reacts to reloads and to devices coming
 * and going. It never calls the front ends: they subscribe to what it
 * announces (manager_subscribe) and lend it what only they know (the
 * sessions, manager_set_sessions).
 *
 * It is the engine's face: the rest of daemon/engine/ is below it and
 * never calls it. profile_reload.c, profile.c, orphans.c and asyncev.c
 * are given what they need as arguments, and tell it what happened
 * through callbacks it lends them at creation (profile_change_fn, struct
 * orphans_owner) or through what they return (asyncev_handle()).
 */
#ifndef RDMAD_MANAGER_H
#define RDMAD_MANAGER_H

#include <systemd/sd-event.h>
#include <stdio.h>
#include <time.h>

#include "config.h"
#include "profile.h"

struct http;
struct devwatch;
struct manager_devices;
struct control;
struct workers;
struct orphans;
struct reload_req;
struct events;

/* What the manager announces, on the loop. */
enum manager_event_kind {
	MANAGER_PROGRESS,	 /* an object of a profile's creation is done */
	MANAGER_PROFILE_CHANGED, /* a profile settled, started or stopped */
	MANAGER_SETTLED,	 /* nothing is being created anywhere */
	/* A profile lost its device (removed or failed); it is pending
	 * now: what sessions opened on the device themselves must go. */
	MANAGER_DEVICE_LOST,
	/* A reload is removing a profile (it drains what is leased). */
	MANAGER_PROFILE_REMOVED,
	/* Who holds what of a profile changed: a shared client's lease was
	 * taken or ended, or one of the previous run's was adopted
	 * (manager_holders_text() tells the new truth). */
	MANAGER_LEASES_CHANGED,
};

struct manager_event {
	enum manager_event_kind kind;
	struct profile *profile; /* NULL for MANAGER_SETTLED */
	/* MANAGER_DEVICE_LOST: the device it had (the profile's is
	 * cleared by then) and why; NULL otherwise. */
	const char *ibdev;
	const char *reason;
	/* MANAGER_LEASES_CHANGED: only ended (none taken): what the lease
	 * record says may wait for the end of the loop's turn. */
	bool ended;
};

typedef void (*manager_listener_fn)(void *ud, const struct manager_event *ev);

struct manager_listener {
	manager_listener_fn fn;
	void *ud;
};

/* Sessions are the control socket's; the control layer and /metrics
 * show them through what it lends here. */
#define SESSION_ATTACH_BUCKETS 8
struct session_stats {
	unsigned int sessions, attachments;
	unsigned long long attaches, attach_failures;
	unsigned long long attach_buckets[SESSION_ATTACH_BUCKETS];
	const double *bucket_le; /* upper bounds, seconds */
	double attach_seconds;
};

struct manager_sessions {
	json_t *(*json)(void *ud);
	void (*stats)(void *ud, struct session_stats *out);
	/* Is process pid (0: any) attached to the profile? */
	bool (*attached)(void *ud, const char *profile, pid_t pid);
	/* What the shared attachments to the profile lease, written to f
	 * as holders of the lease record, each after *sep
	 * (manager_holder_put(), manager_lease_put()). */
	void (*leases_put)(void *ud, const char *profile, FILE *f,
			   const char **sep);
	void *ud;
};

/* What a front end counts of its connections, for /metrics: the control
 * socket and REST each lend theirs. */
enum manager_front_kind { FRONT_CONTROL, FRONT_HTTP, FRONT_MAX };
struct front_stats {
	unsigned long long open;      /* connections now */
	unsigned long long refused;   /* turned away at a limit */
	unsigned long long evicted;   /* closed to make room */
	unsigned long long timed_out; /* closed: no HELLO/headers in time */
};
struct manager_front {
	void (*stats)(void *ud, struct front_stats *out);
	void *ud;
};

struct manager {
	sd_event *event;
	struct config *config;
	struct profile **profiles;
	size_t n_profiles;
	struct profile *by_name; /* the same profiles, by name */
	/* Profiles a reload removed while sessions held some of their
	 * objects: kept, out of sight, until the last lease ends. */
	struct profile **retired;
	size_t n_retired;
	struct workers *workers;
	/* The event stream (events.h): the engine publishes there, the
	 * front ends subscribe; anyone may publish (sessions, targets). */
	struct events *events;
	struct manager_listener *listeners;
	size_t n_listeners;
	struct manager_sessions sessions;
	struct http *http;
	struct manager_front fronts[FRONT_MAX];
	struct control *control;
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
	char *token; /* REST bearer token, NULL: mutating calls refused */
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

/* Takes config over (freed with the manager, or at once on failure). */
int manager_new(struct config *config, struct manager **out);
/* Open the devices, start creating every profile's objects on the
 * workers, watch devices. MANAGER_SETTLED comes when all is created. */
int manager_start(struct manager *m);
/* Hear what the manager announces, until unsubscribed. */
int manager_subscribe(struct manager *m, manager_listener_fn fn, void *ud);
void manager_unsubscribe(struct manager *m, manager_listener_fn fn, void *ud);
void manager_set_sessions(struct manager *m, const struct manager_sessions *s);
void manager_set_front(struct manager *m, enum manager_front_kind kind,
		       const struct manager_front *f);
/* Is any profile being created? */
bool manager_busy(const struct manager *m);
/* Every profile's progress, added up. */
void manager_progress(const struct manager *m, struct profile_progress *out);
/* Destroy everything created, children first. */
void manager_stop(struct manager *m);
struct manager *manager_free(struct manager *m);
static inline void manager_freep(struct manager **m)
{
	manager_free(*m);
}

/* A reload's outcome (manager_reload). */
typedef void (*manager_reload_fn)(void *ud, int r, json_t *result);

/*
 * Read the configuration file again and apply it. The reading and the
 * checks (first in a child process: a crash or a hang there changes
 * nothing, then against the devices) run on a worker, so that the loop
 * keeps answering; applying runs on the loop. Reloads run one at a time,
 * in the order asked. done(ud, r, result) comes once it is over, never
 * from within this call, with a document in result:
 *   0          applied: {"status":"ok", "changes":[...], "kept": N}; new
 *              and changed objects are created on the workers after
 *              (MANAGER_SETTLED when done);
 *   -EINVAL    the configuration has errors (or could not be read):
 *              {"status":"error", "errors":[{file, line, message}...]};
 *   -ENOTEMPTY it declares no profile and would remove every running one:
 *              refused unless force (an emptied file is more often a
 *              mistake than a wish), {"status":"error", "message":...};
 *   -ECANCELED the daemon stopped first; other -errno: it failed.
 * Removed objects that sessions hold drain: they stay until released.
 * Returns 0, or -ENOMEM / -ECANCELED (stopping), and then done is not
 * called.
 */
int manager_reload(struct manager *m, bool force, manager_reload_fn done,
		   void *ud);
/* The reloads asked with ud go on, but done is not called for them (the
 * asker is going away). */
void manager_reload_forget(struct manager *m, void *ud);
/* Stopping: the reload under way and those queued end with -ECANCELED
 * (manager_stop does this). */
void manager_reload_cancel(struct manager *m);

/* One lease a session held ends: the object of that incarnation, in the
 * profile of that name or in one a reload removed. */
void manager_release(struct manager *m, const char *profile,
		     enum obj_kind kind, const char *name, uint64_t serial);

/* Read daemon.http.token_file (at least 16 characters, first line). */
int manager_load_token(struct manager *m);

struct profile *manager_profile(struct manager *m, const char *name);
/* An ATTACH is about to hand out p's handles: check them against the
 * kernel first, unless that was done a moment ago (reconcile.h). What
 * was lost is being made again when this returns > 0 (p is creating). */
int manager_check(struct manager *m, struct profile *p);
/* manager_adopt.c: p settled with the previous run's holders
 * (p->adopt): the live ones' leases are taken over, each watched until
 * it exits, when release (manager_release) ends each lease. */
typedef void (*manager_release_fn)(struct manager *m, const char *profile,
				   enum obj_kind kind, const char *name,
				   uint64_t serial);
void manager_adopt(struct manager *m, struct profile *p,
		   manager_release_fn release);
void manager_adopt_stop(struct manager *m);
/*
 * Who holds what of p, as the lease record says it (restore.h): the
 * JSON text [{pid, start, uid, gid, leases: [{kind, name, handle}]}] of
 * the sessions' shared attachments (manager_sessions.leases_put) and of
 * the previous run's clients adopted, in *len bytes, to free; NULL out
 * of memory. A lease names the PD or MR it holds by its handle.
 */
char *manager_holders_text(struct manager *m, struct profile *p, size_t *len);
/* The pieces of it, for the sessions' part: one lease (its incarnation
 * by serial, written by handle), and one holder around the leases'
 * text; each after *sep, which becomes ",". */
void manager_lease_put(FILE *f, struct profile *p, enum obj_kind kind,
		       const char *name, uint64_t serial, const char **sep);
void manager_holder_put(FILE *f, pid_t pid, unsigned long long start,
			uid_t uid, gid_t gid, const char *leases, size_t len,
			const char **sep);
/* A client of the previous run that p adopted, pid, resumes in a session
 * of this run (ATTACH with "resume"): each of its leases is handed to
 * each(ud, kind, name, serial), to be the session's (released as its
 * leases are), and the adoption ends. Returns how many; the caller says
 * when the session holds them (profile_touch_leases()). */
size_t manager_adopted_claim(struct manager *m, struct profile *p, pid_t pid,
			     void (*each)(void *ud, enum obj_kind kind,
					  const char *name, uint64_t serial),
			     void *ud);
/* The adopted clients, as GET /v1/sessions shows them. */
json_t *manager_adopted_json(struct manager *m);
/* manager_check.c's, for manager.c: the checks start and stop. */
void manager_check_start(struct manager *m);
void manager_check_stop(struct manager *m);
/* The running profiles, for the scans' and checks' owners (ud: the
 * manager). */
struct profile *const *manager_profiles_of(void *ud, size_t *n);
/* The orphan scans' owner: daemon.orphans = "retire"? */
bool manager_may_retire(void *ud);
/* manager_devices.c: the host's devices read again, at start (ibdev
 * NULL) and when ibdev came or went (gone); only a device not seen
 * before is opened (its import probe). */
void manager_devices_changed(struct manager *m, const char *ibdev,
			     bool gone);
void manager_devices_free(struct manager *m);
/* GET /v1/devices' document, from that view: a new reference, or NULL
 * when out of memory. */
json_t *manager_devices_json(struct manager *m);
/* Is ibdev used by a profile? */
int manager_device_used(struct manager *m, const char *ibdev);
/* Is ibdev up, as the profiles see it: devwatch's view (where device
 * events come from, devwatch.h), or without a watcher whether a profile
 * could match it now (devmatch). */
bool manager_device_up(struct manager *m, const char *ibdev);
/* Where device events come from: "udev", "kernel", or "none" when they
 * cannot be watched. */
const char *manager_device_events(struct manager *m);
double manager_uptime(struct manager *m);

#endif
