// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include "asyncev.h"
#include "capcheck.h"
#include "verbs_spec.h"
#include "devwatch.h"
#include "events.h"
#include "log.h"
#include "manager_internal.h"
#include "objects.h"
#include "orphans.h"
#include "populate.h"
#include "validate.h"
#include "workers.h"

/* ---- announcements ---- */

/* What the manager tells the bus (events.h): the engine's own events. */
static void manager_announce(struct manager *m, enum event_kind kind,
			     struct profile *p)
{
	events_publish(
	    m->events,
	    &(struct event){.kind = kind,
			    .profile_name = p ? profile_name(p) : NULL,
			    .profile = p});
}

void manager_set_sessions(struct manager *m, const struct manager_sessions *s)
{
	m->sessions = s ? *s : (struct manager_sessions){ 0 };
}

void manager_set_front(struct manager *m, enum manager_front_kind kind,
		       const struct manager_front *f)
{
	m->fronts[kind] = f ? *f : (struct manager_front){ 0 };
}

bool manager_busy(const struct manager *m)
{
	/* A reload under way: what it creates is not known yet. */
	if (m->reload_queue)
		return true;
	for (size_t i = 0; i < m->n_profiles; i++)
		if (profile_busy(m->profiles[i]))
			return true;
	return false;
}

void manager_progress(const struct manager *m, struct profile_progress *out)
{
	*out = (struct profile_progress){ 0 };
	for (size_t i = 0; i < m->n_profiles; i++) {
		struct profile_progress p;

		if (!profile_busy(m->profiles[i]))
			continue;
		profile_progress_now(m->profiles[i], &p);
		out->objects += p.objects;
		out->objects_total += p.objects_total;
		out->bytes += p.bytes;
		out->bytes_total += p.bytes_total;
		out->populated += p.populated;
		out->populated_total += p.populated_total;
	}
}

/* ---- profiles on their devices ---- */

/* Log p's state, and each of its objects that failed. */
static void log_profile(const struct profile *p)
{
	const char *reason = profile_reason(p);

	for (size_t k = 0; k < profile_n_objects(p); k++) {
		const struct object *o = profile_object_at(p, k);

		if (o->state == OBJ_FAILED)
			log_object(LOG_WARNING, 0, profile_name(p),
				   obj_kind_name(o->kind), object_name(o),
				   "profile %s: %s %s failed: %s",
				   profile_name(p), obj_kind_name(o->kind),
				   object_name(o), o->reason);
	}
	log_object(LOG_INFO, 0, profile_name(p), "profile", NULL,
		   "profile %s: %s%s%s", profile_name(p),
		   profile_state_name(profile_state(p)), reason ? ": " : "",
		   reason ? reason : "");
}

/* Stop hearing p's context's async events (before it closes). */
static void unwatch_profile(struct profile *p)
{
	profile_set_async(p, asyncwatch_free(profile_async(p)));
}

/* Stop p; lost: its device went (memory stays for its return). */
static void stop_profile(struct manager *m, struct profile *p,
			 const char *reason, bool lost)
{
	bool was_busy = profile_busy(p);
	char ibdev[PROFILE_IBDEV_MAX];

	snprintf(ibdev, sizeof(ibdev), "%s", profile_ibdev(p));
	unwatch_profile(p);
	if (lost)
		profile_lose_device(p, reason);
	else
		profile_stop(p, reason);
	if (lost) {
		/* After our own context is closed: the device can go as soon
		 * as the sessions' contexts are closed too. */
		events_publish(m->events,
			       &(struct event){.kind = EV_DEVICE_LOST,
					       .profile_name = profile_name(p),
					       .profile = p,
					       .u.device = {ibdev, reason}});
	}
	manager_announce(m, EV_PROFILE_CHANGED, p);
	/* A creation it cut short may have been the last one under way. */
	if (was_busy && !m->reloading && !manager_busy(m))
		manager_announce(m, EV_SETTLED, NULL);
}

/* An async event of p's context (asyncev.c): a device that failed
 * stops p until it comes back. */
static void on_async_event(void *ud, const struct ibv_async_event *ev)
{
	struct profile *p = ud;
	struct manager *m = profile_owner(p);
	char reason[128];

	if (!asyncev_handle(m->events, p, ev))
		return;
	snprintf(reason, sizeof(reason), "device %s failed or was removed",
		 profile_ibdev(p));
	log_ctx(LOG_WARNING, 0,
		&(struct log_ctx){.profile = profile_name(p),
				  .kind = "profile",
				  .message_id = MSGID_DEVICE_GONE},
		"profile %s: %s; waiting for it to come back", profile_name(p),
		reason);
	stop_profile(m, p, reason, true);
}

/* Watch p's context for async events, once it has one. */
static void watch_profile(struct manager *m, struct profile *p)
{
	struct asyncwatch *w = NULL;
	int r;

	if (!profile_ctx(p) || profile_async(p))
		return;
	r = asyncwatch_new(m->event, profile_ctx(p), on_async_event, p, &w);
	profile_set_async(p, w);
	if (r < 0)
		log_warn(r, "profile %s: cannot watch async events of %s",
			 profile_name(p), profile_ibdev(p));
}

/* Start p; its creation goes on on the workers, logged when it settles. */
static void start_profile(struct manager *m, struct profile *p)
{
	profile_start(p);
	watch_profile(m, p);
	if (!profile_busy(p))
		log_profile(p);
	manager_announce(m, EV_PROFILE_CHANGED, p);
}

/* devwatch's callback: a device came or went. */
static void on_device(void *ud, const char *ibdev, enum devwatch_action a)
{
	struct manager *m = ud;

	log_ctx(LOG_INFO, 0,
		&(struct log_ctx){ .message_id = a == DEVWATCH_ADD
							 ? NULL
							 : MSGID_DEVICE_GONE },
		"device %s %s", ibdev,
		a == DEVWATCH_ADD ? "appeared" : "went away");
	events_publish(m->events,
		       &(struct event){ .kind = a == DEVWATCH_ADD
							? EV_DEVICE_ADDED
							: EV_DEVICE_REMOVED,
					.u.device.ibdev = ibdev });
	manager_devices_changed(m, ibdev, a == DEVWATCH_REMOVE);
	/* What removed profiles still drain on it goes with it. */
	for (size_t i = m->n_retired; a == DEVWATCH_REMOVE && i-- > 0;)
		if (streq(profile_ibdev(m->retired[i]), ibdev)) {
			profile_free(m->retired[i]);
			m->retired[i] = m->retired[--m->n_retired];
		}
	for (size_t i = 0; i < m->n_profiles; i++) {
		struct profile *p = m->profiles[i];
		char reason[128];

		if (a == DEVWATCH_REMOVE && profile_ctx(p) &&
		    streq(profile_ibdev(p), ibdev)) {
			snprintf(reason, sizeof(reason),
				 "device %s was removed", ibdev);
			stop_profile(m, p, reason, true);
			log_profile(p);
		} else if (a == DEVWATCH_ADD && !profile_ctx(p) &&
			   devmatch_matches(devmatch_of(profile_device(p)),
					    ibdev)) {
			start_profile(m, p);
		}
	}
}

/* How many progress events a creation publishes at most (and the last
 * object's): subscribers hear how it goes, not every object of it. */
#define PROGRESS_EVENTS 20

/* While large memories are populated: how often their progress is
 * looked at, and published when it moved. */
#define POPULATE_TICK_USEC (500 * 1000)

static void publish_progress(struct manager *m, struct profile *p, bool force)
{
	const struct profile_progress *g = profile_progress(p);
	size_t step = g->objects_total / PROGRESS_EVENTS + 1;
	struct profile_progress now;

	if (!force && g->objects % step && g->objects != g->objects_total)
		return;
	profile_progress_now(p, &now);
	profile_set_populated_said(p, now.populated);
	events_publish(m->events,
		       &(struct event){.kind = EV_PROGRESS,
				       .profile_name = profile_name(p),
				       .profile = p});
}

/* Every POPULATE_TICK_USEC while a creation populates large memory: a
 * progress event for each whose population moved. */
static int on_populate_tick(sd_event_source *s, uint64_t usec, void *ud)
{
	struct manager *m = ud;
	bool more = false;

	for (size_t i = 0; i < m->n_profiles; i++) {
		struct profile *p = m->profiles[i];
		struct profile_progress g;

		if (profile_state(p) != PROFILE_CREATING ||
		    !profile_progress(p)->populated_total)
			continue;
		more = true;
		profile_progress_now(p, &g);
		if (g.populated == profile_populated_said(p))
			continue;
		/* Its documents show the bytes: cached ones are stale. */
		profile_touch(p);
		publish_progress(m, p, true);
		manager_announce(m, EV_CREATION_STEP, p);
	}
	if (more)
		sd_event_source_set_time(s, usec + POPULATE_TICK_USEC);
	return sd_event_source_set_enabled(s, more ? SD_EVENT_ONESHOT
						   : SD_EVENT_OFF);
}

static void populate_watch(struct manager *m)
{
	uint64_t now;

	if (m->populate_tick) {
		if (sd_event_source_get_enabled(m->populate_tick, NULL) > 0)
			return;
		sd_event_now(m->event, CLOCK_MONOTONIC, &now);
		sd_event_source_set_time(m->populate_tick,
					 now + POPULATE_TICK_USEC);
		sd_event_source_set_enabled(m->populate_tick, SD_EVENT_ONESHOT);
		return;
	}
	/* Without it the creation goes on; only its progress is unheard. */
	(void)sd_event_add_time_relative(m->event, &m->populate_tick,
					 CLOCK_MONOTONIC, POPULATE_TICK_USEC,
					 0, on_populate_tick, m);
}

/* The engine's word on a profile (profile.c), passed on. */
void manager_profile_changed(struct manager *m, struct profile *p,
			     enum profile_change what)
{
	if (what == PROFILE_STARTED) {
		if (profile_progress(p)->populated_total)
			populate_watch(m);
		return;
	}
	if (what == PROFILE_LEASES || what == PROFILE_LEASES_ENDED) {
		events_publish(
		    m->events,
		    &(struct event){.kind = EV_LEASES_CHANGED,
				    .profile_name = profile_name(p),
				    .profile = p,
				    .u.leases_ended =
					what == PROFILE_LEASES_ENDED});
		return;
	}
	if (what == PROFILE_PROGRESS) {
		publish_progress(m, p, false);
		manager_announce(m, EV_CREATION_STEP, p);
		return;
	}
	log_profile(p);
	if (profile_adopting(p) && !profile_busy(p))
		manager_adopt(m, p);
	/* What its context holds has changed: look again. */
	orphans_request(m->orphans, ORPHANS_CHANGED);
	manager_announce(m, EV_PROFILE_CHANGED, p);
	if (!m->reloading && !manager_busy(m))
		manager_announce(m, EV_SETTLED, NULL);
}

static void unindex_profiles(struct manager *m)
{
	HASH_CLEAR(hh, m->by_name);
	free(m->names);
	m->names = NULL;
}

/* The profiles by name, for lookups (without memory for the index:
 * manager_profile() looks through them all). */
static void index_profiles(struct manager *m)
{
	unindex_profiles(m);
	m->names = calloc(m->n_profiles ? m->n_profiles : 1, sizeof(*m->names));
	for (size_t i = 0; m->names && i < m->n_profiles; i++) {
		struct profile_entry *n = &m->names[i];

		n->p = m->profiles[i];
		HASH_ADD_KEYPTR(hh, m->by_name, profile_name(n->p),
				strlen(profile_name(n->p)), n);
	}
}

int manager_new(struct config *config, struct manager **out)
{
	struct manager *m = calloc(1, sizeof(*m));
	int r;

	if (!m) {
		config_free(config);
		return -ENOMEM;
	}
	m->config = config;
	clock_gettime(CLOCK_MONOTONIC, &m->started);
	r = config_resolve_identities(config);
	if (r < 0) {
		manager_free(m);
		return r;
	}
	/* Not sd_event_default(): that one asks the kernel its thread id
	 * at every turn of the loop (to check it runs where it was made),
	 * a system call per control-socket request. */
	r = sd_event_new(&m->event);
	if (r < 0) {
		manager_free(m);
		return r;
	}
	r = events_new(&m->events);
	if (r < 0) {
		manager_free(m);
		return r;
	}
	r = workers_new(m->event, (unsigned int)config->daemon.workers,
			&m->workers);
	if (r < 0) {
		manager_free(m);
		return r;
	}
	/* Populations share the CPUs the workers key allows. */
	populate_set_threads(workers_threads(m->workers));
	m->profiles = calloc(config->n_profiles + 1, sizeof(*m->profiles));
	if (!m->profiles) {
		manager_free(m);
		return -ENOMEM;
	}
	for (size_t i = 0; i < config->n_profiles; i++) {
		r = profile_new(config, &config->profiles[i], m->workers, m,
				&m->profiles[i]);
		if (r < 0) {
			manager_free(m);
			return r;
		}
		profile_set_events(m->profiles[i], m->events);
		m->n_profiles++;
	}
	index_profiles(m);
	*out = m;
	return 0;
}

/* ---- what the orphan scans ask of the manager (orphans.h) ---- */

bool manager_attached(struct manager *m, const char *profile, pid_t pid)
{
	const struct manager_sessions *s = &m->sessions;

	return s->attached && s->attached(s->ud, profile, pid);
}

/* The policy retires p's context: closed, with what is left in it, and
 * p's objects created again in a fresh one; memory stays. */
void manager_retire_ctx(struct manager *m, struct profile *p,
			const char *reason)
{
	/* Not a lost device: nobody is attached to be told. */
	unwatch_profile(p);
	profile_lose_device(p, reason);
	m->ctx_retirements++;
	start_profile(m, p);
}

void manager_orphans_scanned(struct manager *m, bool failed)
{
	m->orphan_scans++;
	m->orphan_scan_failures += failed;
}

/* ---- start and stop ---- */

int manager_start(struct manager *m)
{
	int r;

	r = devwatch_new(m->event, on_device, m, &m->devwatch);
	if (r < 0)
		log_warn(r, "cannot watch RDMA devices coming and going");
	else if (devwatch_get_source(m->devwatch) == DEVWATCH_SOURCE_UDEV)
		log_info("device events: udev (systemd-udevd runs: %s exists)",
			 devwatch_udev_control());
	else
		log_info("device events: kernel (no udevd: %s is missing); "
			 "devices are seen as the kernel announces them",
			 devwatch_udev_control());
	manager_devices_changed(m, NULL, false);
	r = orphans_new(m, &m->orphans);
	if (r < 0)
		log_warn(r, "cannot look for orphaned objects, ignoring");
	manager_check_start(m);
	for (size_t i = 0; i < m->n_profiles; i++)
		start_profile(m, m->profiles[i]);
	if (!manager_busy(m))
		manager_announce(m, EV_SETTLED, NULL);
	orphans_request(m->orphans, ORPHANS_PACED);
	return 0;
}

void manager_stop(struct manager *m)
{
	manager_reload_cancel(m);
	m->devwatch = devwatch_free(m->devwatch);
	manager_devices_free(m);
	m->orphans = orphans_free(m->orphans);
	manager_check_stop(m);
	manager_adopt_stop(m);
	for (size_t i = m->n_profiles; i-- > 0;)
		stop_profile(m, m->profiles[i], NULL, false);
}

struct manager *manager_free(struct manager *m)
{
	if (!m)
		return NULL;
	/* Nobody hears the last words of a manager going away. */
	manager_stop(m);
	unindex_profiles(m);
	for (size_t i = 0; i < m->n_profiles; i++)
		profile_free(m->profiles[i]);
	for (size_t i = 0; i < m->n_retired; i++)
		profile_free(m->retired[i]);
	free(m->retired);
	m->workers = workers_free(m->workers);
	m->populate_tick = sd_event_source_disable_unref(m->populate_tick);
	free(m->profiles);
	m->events = events_free(m->events);
	config_free(m->config);
	sd_event_unref(m->event);
	free(m);
	return NULL;
}

/* ---- reload ---- */

/* A reload's changes, typed, for the bus's subscribers (EV_RELOAD). */
struct change_list {
	struct reload_change *v;
	size_t n;
};

static void change_list_clear(struct change_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free((char *)l->v[i].profile);
		free((char *)l->v[i].name);
	}
	free(l->v);
	*l = (struct change_list){ 0 };
}

/* Out of memory, the change is left out of the typed list only: the
 * answer's JSON has it. */
static void change_list_add(struct change_list *l, const char *profile,
			    int kind, const char *name, const char *action,
			    bool drains)
{
	struct reload_change *v = realloc(l->v, (l->n + 1) * sizeof(*v));
	char *pc = strdup(profile), *nc = name ? strdup(name) : NULL;

	if (!v || !pc || (name && !nc)) {
		if (v)
			l->v = v;
		free(pc);
		free(nc);
		return;
	}
	l->v = v;
	v[l->n++] = (struct reload_change){ pc, kind, nc, action, drains };
}

struct reload_report {
	const char *profile;
	json_t *changes;
	struct change_list *typed;
	size_t kept;
};

static void report_action(void *ud, const struct object *o,
			  enum obj_action a)
{
	struct reload_report *r = ud;

	if (a == ACT_KEEP) {
		r->kept++;
		return;
	}
	log_object(LOG_INFO, 0, r->profile, obj_kind_name(o->kind),
		   object_name(o), "reload: profile %s: %s %s %s", r->profile,
		   obj_action_name(a), obj_kind_name(o->kind), object_name(o));
	json_array_append_new(
		r->changes,
		json_pack("{s:s, s:s, s:s, s:s}", "profile", r->profile, "kind",
			  obj_kind_name(o->kind), "name", object_name(o), "action",
			  obj_action_name(a)));
	change_list_add(r->typed, r->profile, (int)o->kind, object_name(o),
			obj_action_name(a),
			a == ACT_RECREATE || a == ACT_REMOVE);
}

static void report_profile(struct reload_report *r, const struct profile *p,
			   const char *action)
{
	log_object(LOG_INFO, 0, profile_name(p), "profile", NULL,
		   "reload: %s profile %s", action, profile_name(p));
	json_array_append_new(
	    r->changes, json_pack("{s:s, s:s, s:s}", "profile", profile_name(p),
				  "kind", "profile", "action", action));
	change_list_add(r->typed, profile_name(p), -1, NULL, action, false);
}

/* {"status":"error", "errors":[{file, line: 0, message}]}: a reason that
 * is about the whole file. */
static json_t *file_error(const char *path, const char *message)
{
	return json_pack("{s:s, s:[{s:s, s:i, s:s}]}", "status", "error",
			 "errors", "file", path, "line", 0, "message",
			 message);
}

/* Read and check the configuration at path: in a child (see validate.h),
 * or here when its files are those running read, unchanged
 * (config_load_known). Returns 0 with *out, or -EINVAL with the errors
 * in *result. */
static int load_checked(const char *path, const struct config *running,
			struct validate_child *vc, struct config **out,
			json_t **result)
{
	_cleanup_(config_freep) struct config *next = NULL;
	_cleanup_free_ char *why = NULL;
	json_t *errors = NULL;
	int r;

	if (config_sources_unchanged(running)) {
		r = config_load_known(path, running, &next);
		if (r == 0) {
			log_debug("%s: the files read at the last load, "
				  "unchanged: not read in a child first",
				  path);
			goto loaded;
		}
		if (r != -ESTALE)
			return r;
	}
	r = config_validate_isolated(path, vc, &errors, &next, &why);
	if (r == -EINVAL) {
		*result = json_pack("{s:s, s:o}", "status", "error", "errors",
				    errors);
		return -EINVAL;
	}
	if (r == -EPIPE || r == -ETIMEDOUT) {
		log_error(0, "%s: %s", path, why);
		*result = file_error(path, why);
		return -EINVAL;
	}
	if (r == -EPROTO) {
		log_error(0, "%s: the reading child's answer is not a "
			     "configuration", path);
		*result = file_error(path, "reading the configuration failed "
					   "(the reading child's answer is "
					   "not a configuration)");
		return -EINVAL;
	}
	if (r < 0)
		return r;
loaded:
	if (!next->n_errors)
		capcheck_config(next, NULL);
	if (next->n_errors) {
		*result = json_pack("{s:s, s:o}", "status", "error", "errors",
				    config_errors_json(next));
		return -EINVAL;
	}
	r = config_resolve_identities(next);
	if (r < 0)
		return r;
	*out = TAKE_PTR(next);
	return 0;
}

/* A removed profile: what sessions hold drains, the rest goes now. */
static void retire_profile(struct manager *m, struct profile *p)
{
	struct profile **r;

	unwatch_profile(p);
	if (m->names) {
		struct profile_entry *n;

		HASH_FIND_STR(m->by_name, profile_name(p), n);
		if (n)
			HASH_DELETE(hh, m->by_name, n);
	}
	if (!profile_retire(p)) {
		profile_free(p);
		return;
	}
	r = realloc(m->retired, (m->n_retired + 1) * sizeof(*r));
	if (!r) {
		/* Cannot keep it: what it holds goes as in a stop. */
		profile_free(p);
		return;
	}
	m->retired = r;
	m->retired[m->n_retired++] = p;
}

/*
 * A reload asked for: read and checked on a worker (load_checked), then
 * applied on the loop (apply), one at a time, in the order asked.
 */
struct reload_req {
	struct work work;
	struct manager *m;
	char *path;
	bool force;
	struct validate_child child; /* cancelled when the daemon stops */
	manager_reload_fn done; /* NULL: forgotten */
	void *ud;
	/* What the worker found: */
	int r;
	struct config *next;
	json_t *result;
	struct change_list changes; /* applied: what it changed */
	struct reload_req *later; /* the queue */
};

static int apply(struct manager *m, struct config *next, bool force,
		 json_t **result, struct change_list *changes);
static void reload_next(struct manager *m);

static void reload_req_free(struct reload_req *q)
{
	config_free(q->next);
	json_decref(q->result);
	change_list_clear(&q->changes);
	free(q->path);
	free(q);
}

/* On a worker: nothing here touches what the loop may change. */
static void reload_run(struct work *w)
{
	struct reload_req *q = container_of(w, struct reload_req, work);

	q->r = load_checked(q->path, q->m->config, &q->child, &q->next,
			    &q->result);
}

/* The reload's answer to whoever asked, and to the event stream. */
static void reload_answer(struct manager *m, struct reload_req *q)
{
	if (q->r < 0 && !q->result)
		q->result = json_pack("{s:s, s:s}", "status", "error",
				      "message", strerror(-q->r));
	/* The reload's answer, as POST /v1/reload gives it. */
	events_publish(m->events,
		       &(struct event){ .kind = EV_RELOAD,
					.u.reload = { q->r, q->result,
						      q->changes.v,
						      q->changes.n } });
	for (size_t i = 0; q->r == 0 && i < m->n_profiles; i++) {
		struct profile *p = m->profiles[i];

		profile_set_events(p, m->events);
		events_publish(m->events,
			       &(struct event){.kind = EV_PROFILE_STATE,
					       .profile_name = profile_name(p),
					       .profile = p});
	}
	if (q->done)
		q->done(q->ud, q->r, q->result);
}

static void reload_done(struct work *w, bool cancelled)
{
	struct reload_req *q = container_of(w, struct reload_req, work);
	struct manager *m = q->m;

	/* Off the queue first: settling after it is the reload's. */
	m->reload_queue = q->later;
	if (cancelled || m->stopping) {
		q->r = -ECANCELED;
		json_decref(q->result);
		q->result = json_pack("{s:s, s:s}", "status", "error",
				      "message",
				      "the daemon is stopping: not reloaded");
	} else if (q->r == 0) {
		q->r = apply(m, TAKE_PTR(q->next), q->force, &q->result,
			     &q->changes);
	}
	if (q->r == 0)
		m->reloads_applied++;
	if (q->r < 0) {
		m->reload_failures++;
		if (q->r == -EINVAL)
			log_ctx(LOG_WARNING, 0,
				&(struct log_ctx){ .message_id =
							   MSGID_RELOAD_REFUSED },
				"%s has errors, not reloading", q->path);
	}
	reload_answer(m, q);
	reload_req_free(q);
	reload_next(m);
	if (!m->reload_queue)
		orphans_resume(m->orphans);
	if (!manager_busy(m))
		manager_announce(m, EV_SETTLED, NULL);
}

/* The first reload queued goes to the workers, unless one is there, or
 * the daemon stops: manager_reload_cancel() answers and frees the queue
 * once the one on the workers is done (whose done() comes here), and
 * would free one sent to the workers meanwhile under them. */
static void reload_next(struct manager *m)
{
	struct reload_req *q = m->reload_queue;

	if (!q || q->work.run || m->stopping)
		return;
	q->work = (struct work){ .run = reload_run,
				 .done = reload_done,
				 .owner = &m->reload_queue };
	orphans_pause(m->orphans);
	workers_submit(m->workers, &q->work);
}

int manager_reload(struct manager *m, bool force, manager_reload_fn done,
		   void *ud)
{
	struct reload_req *q, **tail;

	if (m->stopping)
		return -ECANCELED;
	q = calloc(1, sizeof(*q));
	if (!q || !(q->path = strdup(m->config->path))) {
		free(q);
		return -ENOMEM;
	}
	q->m = m;
	q->child = (struct validate_child)VALIDATE_CHILD_INIT;
	q->force = force;
	q->done = done;
	q->ud = ud;
	for (tail = &m->reload_queue; *tail; tail = &(*tail)->later)
		;
	*tail = q;
	reload_next(m);
	return 0;
}

void manager_reload_forget(struct manager *m, void *ud)
{
	for (struct reload_req *q = m->reload_queue; q; q = q->later)
		if (q->ud == ud)
			q->done = NULL;
}

void manager_reload_cancel(struct manager *m)
{
	m->stopping = true;
	/* The one on the workers: its child is not waited out, and its done
	 * says it was cancelled. */
	if (m->reload_queue)
		validate_cancel(&m->reload_queue->child);
	workers_drain(m->workers, &m->reload_queue);
	while (m->reload_queue) {
		struct reload_req *q = m->reload_queue;

		m->reload_queue = q->later;
		q->r = -ECANCELED;
		q->result = json_pack("{s:s, s:s}", "status", "error",
				      "message",
				      "the daemon is stopping: not reloaded");
		m->reload_failures++;
		if (q->done)
			q->done(q->ud, q->r, q->result);
		reload_req_free(q);
	}
}

/* Put next in place of the running configuration (on the loop). */
static int apply(struct manager *m, struct config *next_in, bool force,
		 json_t **result, struct change_list *changes)
{
	_cleanup_(config_freep) struct config *next = next_in;
	struct reload_report rep = { .typed = changes };
	struct profile **profiles;
	int r;

	if (!next->n_profiles && m->n_profiles && !force) {
		log_ctx(LOG_WARNING, 0,
			&(struct log_ctx){ .message_id = MSGID_RELOAD_REFUSED },
			"%s declares no profile; not removing all %zu "
			"without force", m->config->path, m->n_profiles);
		*result = json_pack(
			"{s:s, s:s}", "status", "error", "message",
			"the configuration declares no profile: a reload "
			"would remove every running one; reload with force "
			"to do that");
		return -ENOTEMPTY;
	}
	profiles = calloc(next->n_profiles + 1, sizeof(*profiles));
	rep.changes = json_array();
	if (!profiles || !rep.changes) {
		free(profiles);
		json_decref(rep.changes);
		return -ENOMEM;
	}
	for (size_t i = 0; i < next->n_profiles; i++) {
		r = profile_new(next, &next->profiles[i], m->workers, m,
				&profiles[i]);
		if (r < 0) {
			for (size_t k = 0; k < i; k++)
				profile_free(profiles[k]);
			free(profiles);
			json_decref(rep.changes);
				return r;
		}
	}

	/* Nothing fails from here on: every object ends up in its old or
	 * its new form, or failed with its reason. */
	m->reloading = true;
	/* The old profiles go quietly, the new ones come up quietly: the
	 * stream hears the reload, then each profile's state (below). */
	for (size_t i = 0; i < m->n_profiles; i++)
		profile_set_events(m->profiles[i], NULL);
	for (size_t i = 0; i < m->n_profiles; i++) {
		struct profile *old = m->profiles[i];

		if (!config_profile(next, profile_name(old))) {
			report_profile(&rep, old, "remove");
			manager_announce(m, EV_PROFILE_REMOVED, old);
			retire_profile(m, old);
			m->profiles[i] = NULL;
		}
	}
	for (size_t i = 0; i < next->n_profiles; i++) {
		struct profile *p = profiles[i];
		struct profile *old = manager_profile(m, profile_name(p));

		rep.profile = profile_name(p);
		if (old) {
			unwatch_profile(old);
			profile_reload(p, old, report_action, &rep);
		} else {
			report_profile(&rep, p, "create");
			profile_start(p);
		}
		watch_profile(m, p);
		if (!profile_busy(p))
			log_profile(p);
	}
	unindex_profiles(m);
	for (size_t i = 0; i < m->n_profiles; i++)
		profile_free(m->profiles[i]);
	free(m->profiles);
	m->profiles = profiles;
	m->n_profiles = next->n_profiles;
	index_profiles(m);
	m->reloading = false;

	if (!streq(next->daemon.log_level, m->config->daemon.log_level))
		log_set_level(log_parse_level(next->daemon.log_level));
	config_free(m->config);
	m->config = TAKE_PTR(next);
	*result = json_pack("{s:s, s:o, s:i}", "status", "ok", "changes",
			    rep.changes, "kept", (int)rep.kept);
	log_ctx(LOG_INFO, 0, &(struct log_ctx){ .message_id = MSGID_RELOADED },
		"reloaded %s: %zu changes, %zu objects kept",
		 m->config->path, json_array_size(rep.changes), rep.kept);
	for (size_t i = 0; i < m->n_profiles; i++)
		manager_announce(m, EV_PROFILE_CHANGED, m->profiles[i]);
	return 0;
}

/* ---- queries ---- */

struct profile *manager_profile(struct manager *m, const char *name)
{
	struct profile_entry *n = NULL;

	if (!name)
		return NULL;
	if (!m->names) {
		for (size_t i = 0; i < m->n_profiles; i++)
			if (m->profiles[i] &&
			    streq(profile_name(m->profiles[i]), name))
				return m->profiles[i];
		return NULL;
	}
	HASH_FIND_STR(m->by_name, name, n);
	return n ? n->p : NULL;
}

double manager_uptime(struct manager *m)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - m->started.tv_sec) +
	       (double)(now.tv_nsec - m->started.tv_nsec) / 1e9;
}
