/* SPDX-License-Identifier: MIT */
/*
 * The manager owns the running configuration, the profiles, the worker
 * pool and the event loop, and reacts to reloads and to devices coming
 * and going. It never calls the front ends: they subscribe to what it
 * announces on the bus (m->events, events.h: the engine's own events
 * and the stream's) and lend it what only they know (the sessions,
 * manager_set_sessions).
 *
 * It is the engine's face. The scans and checks that work for it
 * (orphans.c, reconcile.c, manager_adopt.c) ask it by name; the
 * profiles (profile.c) tell it what happened by name too
 * (manager_profile_changed(); unit tests make profiles without one).
 */
#ifndef RDMAD_MANAGER_H
#define RDMAD_MANAGER_H

#include <systemd/sd-event.h>
#include <stdio.h>
#include <time.h>

#include "config.h"
#include "events.h"
#include "profile.h"

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

/* Where the lease record's text hands the lease sets its holders name
 * (restore.h, version 2): each(ud, id, text, len) with the set's leases
 * as manager_lease_put() writes them, once per holder that names it;
 * kept(ud, id) for a set that no holder names now but the next attach
 * will (the attach cache's: its record may stay in the store). */
struct manager_lease_sets {
	void (*each)(void *ud, uint64_t id, const char *text, size_t len);
	void (*kept)(void *ud, uint64_t id);
	void *ud;
};

struct manager_sessions {
	json_t *(*json)(void *ud);
	/* The attachments to profile (a new JSON array of {session, pid,
	 * uid, attachment, mode}). */
	json_t *(*holders)(void *ud, const char *profile);
	void (*stats)(void *ud, struct session_stats *out);
	/* Is process pid (0: any) attached to the profile? */
	bool (*attached)(void *ud, const char *profile, pid_t pid);
	/* What the shared attachments to the profile lease, written to f
	 * as holders of the lease record, each after *sep
	 * (manager_holder_put(), manager_lease_put()), each lease set
	 * they name handed to sets. False: out of memory. */
	bool (*leases_put)(void *ud, const char *profile, FILE *f,
			   const char **sep,
			   const struct manager_lease_sets *sets);
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

/* The manager is its files' own (manager_internal.h): the rest ask it
 * through the functions below. */
struct manager;

/* The loop everything runs on, the bus it announces on (events.h), the
 * running configuration (a reload replaces it: do not keep it). */
sd_event *manager_loop(const struct manager *m);
struct events *manager_bus(const struct manager *m);
const struct config *manager_config(const struct manager *m);
/* The running profiles, one by one (i < manager_n_profiles()). */
size_t manager_n_profiles(const struct manager *m);
struct profile *manager_profile_at(const struct manager *m, size_t i);
/* A reload is being applied: the profile list is half old, half new
 * (it ends with an EV_PROFILE_CHANGED for every profile). */
bool manager_reloading(const struct manager *m);
/* What /metrics counts of the manager's own work. */
struct manager_counters {
	unsigned int reloads_applied, reload_failures;
	unsigned long long orphan_scans, orphan_scan_failures;
	unsigned long long ctx_retirements; /* contexts renewed for orphans */
};
void manager_counters(const struct manager *m, struct manager_counters *out);
/* What the front ends lent (manager_set_sessions(), manager_set_front()),
 * asked: false (and *out zero) when nobody lent it. */
bool manager_session_stats(const struct manager *m, struct session_stats *out);
bool manager_front_stats(const struct manager *m, enum manager_front_kind k,
			 struct front_stats *out);
/* GET /v1/sessions' sessions (a new reference; an empty array when no
 * front end lends them), NULL out of memory. */
json_t *manager_sessions_json(const struct manager *m);
/* Someone looks at p's orphans: scan again if the last scan is old. */
void manager_orphans_refresh(struct manager *m, const struct profile *p);

/* Takes config over (freed with the manager, or at once on failure). */
int manager_new(struct config *config, struct manager **out);
/* Open the devices, start creating every profile's objects on the
 * workers, watch devices. EV_SETTLED comes when all is created. */
int manager_start(struct manager *m);
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
 *              (EV_SETTLED when done);
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
/* The fd of the memory of that incarnation, which a session leases (in
 * the profile of that name or in one a reload removed), and its size:
 * the engine's, valid until the loop runs again; -ENOENT. */
int manager_memory_fd(struct manager *m, const char *profile, const char *name,
		      uint64_t serial, uint64_t *size);
/* One attach in mode of p's attach generation generation lets go of
 * what its view leased (attach_view_lease()), in one count. False when
 * the generation moved: its leases are then released one by one
 * (manager_release()). */
bool manager_release_held(struct manager *m, struct profile *p,
			  unsigned int mode, uint64_t generation);

struct profile *manager_profile(struct manager *m, const char *name);
/* An ATTACH is about to hand out p's handles: check them against the
 * kernel first (reconcile_attach(): mrs false when the client reads an
 * MR table). What was lost is being made again when this returns > 0
 * (p is creating). */
int manager_check(struct manager *m, struct profile *p, bool mrs);
/* manager_adopt.c: p settled with the previous run's holders
 * (p->adopt): the live ones' leases are taken over, each watched until
 * it exits, when manager_release() ends each lease. */
void manager_adopt(struct manager *m, struct profile *p);
void manager_adopt_stop(struct manager *m);
/*
 * Who holds what of p, as the lease record says it (restore.h): the
 * JSON text [{pid, start, uid, gid, sets: [ID], leases: [{kind, name,
 * handle}]}] of the sessions' shared attachments
 * (manager_sessions.leases_put) and of the previous run's clients
 * adopted, in *len bytes, to free; NULL out of memory. A lease names
 * the PD or MR it holds by its handle; the sets named are handed to
 * sets, to be stored before the text is.
 */
char *manager_holders_text(struct manager *m, struct profile *p, size_t *len,
			   const struct manager_lease_sets *sets);
/* The pieces of it, for the sessions' part: one lease (its incarnation
 * by serial, written by handle), and one holder around the ids of its
 * sets and its own leases' text; each after *sep, which becomes ",". */
void manager_lease_put(FILE *f, struct profile *p, enum obj_kind kind,
		       const char *name, uint64_t serial, const char **sep);
void manager_holder_put(FILE *f, pid_t pid, unsigned long long start,
			uid_t uid, gid_t gid, const uint64_t *sets,
			size_t n_sets, const char *leases, size_t len,
			const char **sep);
/* The text of a lease set's id, as the record and the store name it. */
#define MANAGER_SET_ID_LEN 16
void manager_set_id(uint64_t id, char out[MANAGER_SET_ID_LEN + 1]);
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
/* For the scans (orphans.c) and the checks (reconcile.c), which work
 * for the manager and ask it by name: */
/* The running profiles. */
struct profile *const *manager_profiles_of(struct manager *m, size_t *n);
/* daemon.orphans = "retire"? */
bool manager_may_retire(struct manager *m);
/* Is process pid (0: any) attached to the profile (the sessions')? */
bool manager_attached(struct manager *m, const char *profile, pid_t pid);
/* The sessions attached to profile, as GET /v1/sessions shows them: who
 * held it when an object went (a new JSON array). */
json_t *manager_holders_json(struct manager *m, const char *profile);
/* The policy retires p's context: closed, with what is left in it, and
 * p's objects created again in a fresh one; memory stays. */
void manager_retire_ctx(struct manager *m, struct profile *p,
			const char *reason);
/* A scan ended; failed: some device's dumps could not be read. */
void manager_orphans_scanned(struct manager *m, bool failed);
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
