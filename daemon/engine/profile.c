// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>

#include "devinfo.h"
#include "verbs_spec.h"
#include "events.h"
#include "log.h"
#include "objects.h"
#include "populate.h"
#include "profile.h"
#include "profile_internal.h"
#include "reclaim.h"
#include "restore.h"

static void profile_set_state(struct profile *p, enum profile_state s,
			      const char *fmt, ...) _printf_(3, 4);
static void profile_set_state(struct profile *p, enum profile_state s,
			      const char *fmt, ...)
{
	enum profile_state was = p->state;
	char *old = p->reason;
	va_list ap;

	p->reason = NULL;
	p->state = s;
	if (fmt) {
		va_start(ap, fmt);
		if (vasprintf(&p->reason, fmt, ap) < 0)
			p->reason = NULL;
		va_end(ap);
	}
	if (p->notify.events &&
	    (was != s || !streq(old ? old : "", p->reason ? p->reason : "")))
		events_publish(p->notify.events,
			       &(struct event){.kind = EV_PROFILE_STATE,
					       .profile_name = p->conf->name,
					       .profile = p});
	free(old);
}

/*
 * An object's state changed. A creation of many objects tells its
 * progress instead (PROFILE_PROGRESS, published by the owner, a few
 * times per creation), so that thousands of objects coming up do not
 * flood the subscribers: one event per object only for failures,
 * draining, errors, and for creations of a few objects.
 */
#define OBJECT_EVENTS_MAX_CREATION 64

void profile_object_announce(struct profile *p, const struct object *o)
{
	if (!p->notify.events || !p->conf)
		return;
	if (o->state == OBJ_READY &&
	    p->build.progress.objects_total > OBJECT_EVENTS_MAX_CREATION)
		return;
	events_publish(p->notify.events,
		       &(struct event){.kind = EV_OBJECT_STATE,
				       .profile_name = p->conf->name,
				       .profile = p,
				       .object = o});
}

/* The objects o refers to. Without links: those it waits for, i.e. all
 * but a QP's peer, a link made once both exist. */
static size_t object_refs(struct profile *p, const struct object *o,
			  bool links, struct object **out)
{
	struct conf_ref refs[CONF_MAX_REFS];
	size_t n = conf_obj_refs(o->kind, o->conf, refs, ARRAY_SIZE(refs));
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		struct object *d;

		if (!links && o->kind == OBJ_QP && refs[i].kind == OBJ_QP)
			continue;
		d = profile_find(p, refs[i].kind, refs[i].name);
		if (d)
			out[k++] = d;
	}
	return k;
}

/* Who refers to whom (links too), as arrays: one pass to count, one to
 * fill. */
static int build_dependents(struct profile *p)
{
	struct object *deps[CONF_MAX_REFS];
	size_t edges = 0;
	uint32_t *fill;

	p->dep_start = calloc(p->n_objects + 1, sizeof(*p->dep_start));
	if (!p->dep_start)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_objects; i++) {
		size_t n = object_refs(p, &p->objects[i], true, deps);

		for (size_t d = 0; d < n; d++)
			p->dep_start[deps[d] - p->objects + 1]++;
		edges += n;
	}
	for (size_t i = 0; i < p->n_objects; i++)
		p->dep_start[i + 1] += p->dep_start[i];
	p->dependents = calloc(edges ? edges : 1, sizeof(*p->dependents));
	fill = calloc(p->n_objects + 1, sizeof(*fill));
	if (!p->dependents || !fill) {
		free(fill);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->n_objects; i++) {
		size_t n = object_refs(p, &p->objects[i], true, deps);

		for (size_t d = 0; d < n; d++) {
			size_t t = (size_t)(deps[d] - p->objects);

			p->dependents[p->dep_start[t] + fill[t]++] = (uint32_t)i;
		}
	}
	free(fill);
	return 0;
}

int profile_new(const struct config *cfg, const struct conf_profile *c,
		struct workers *w, struct manager *owner, struct profile **out)
{
	struct profile *p = calloc(1, sizeof(*p));
	size_t n = 0;

	if (!p)
		return -ENOMEM;
	for (int k = 0; k < OBJ_KIND_MAX; k++)
		n += c->n_objs[k];
	p->objects = calloc(n ? n : 1, sizeof(*p->objects));
	if (!p->objects) {
		free(p->objects);
		free(p);
		return -ENOMEM;
	}
	p->conf = c;
	p->dev = config_device(cfg, c->device);
	p->gid_index = -1;
	p->ctxn = -1;
	p->build.workers = w;
	profile_touch(p);
	p->notify.owner = owner;
	profile_set_state(p, PROFILE_PENDING, "not started");
	/* Kind order is a dependency order. */
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		p->kind_start[k] = p->n_objects;
		for (size_t i = 0; i < c->n_objs[k]; i++) {
			struct object *o = &p->objects[p->n_objects++];

			o->kind = (enum obj_kind)k;
			o->conf = conf_obj(c, (enum obj_kind)k, i);
			object_forget(o); /* pending, fds at -1 */
		}
	}
	if (build_dependents(p) < 0) {
		profile_free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

static void update_state(struct profile *p)
{
	size_t failed = 0;

	for (size_t i = 0; i < p->n_objects; i++)
		failed += p->objects[i].state == OBJ_FAILED;
	if (failed)
		profile_set_state(p, PROFILE_DEGRADED,
				  "%zu of %zu objects failed", failed,
				  p->n_objects);
	else
		profile_set_state(p, PROFILE_READY, NULL);
	profile_touch(p);
}

/* The numbers of the contexts that this thread opened on a device. */
struct ctx_list {
	uint32_t pid;
	uint32_t n[256];
	size_t count;
};

static int list_ctx(void *ud, const struct rdmanl_res *r)
{
	struct ctx_list *l = ud;

	if ((r->has & RDMANL_HAS_PID) && r->pid == l->pid &&
	    l->count < ARRAY_SIZE(l->n))
		l->n[l->count++] = r->id;
	return 0;
}

/*
 * Open p's device and find the number of the context in RDMA netlink
 * (ctxn): the one context of this thread that the open added. Profiles
 * open their devices on the loop thread only, so that nothing else of
 * ours can appear in between. A dump of contexts has one entry per
 * open context of the device: as cheap as the open next to it, so it
 * is done here, on the loop. When it cannot be told (no RDMA netlink,
 * 256 of ours or more), ctxn stays -1 and orphans are not looked for.
 */
static struct ibv_context *open_numbered(struct profile *p)
{
	struct ctx_list before = { .pid = (uint32_t)gettid() }, after;
	struct ibv_context *ctx;
	int idx = devinfo_index(p->ibdev);
	int64_t found = -1;
	int err;

	p->ctxn = -1;
	if (idx >= 0 && rdmanl_dump(RDMANL_CTX, (uint32_t)idx, list_ctx,
				    &before) < 0)
		idx = -1;
	ctx = devinfo_open(p->ibdev);
	if (!ctx || idx < 0)
		return ctx;
	err = errno;
	after = (struct ctx_list){ .pid = before.pid };
	if (rdmanl_dump(RDMANL_CTX, (uint32_t)idx, list_ctx, &after) < 0 ||
	    after.count == ARRAY_SIZE(after.n)) {
		errno = err;
		return ctx;
	}
	for (size_t i = 0; i < after.count; i++) {
		bool old = false;

		for (size_t k = 0; k < before.count; k++)
			old |= before.n[k] == after.n[i];
		if (old)
			continue;
		if (found >= 0) { /* two new ones: cannot tell */
			found = -1;
			break;
		}
		found = after.n[i];
	}
	p->dev_index = (uint32_t)idx;
	p->ctxn = found;
	return ctx;
}

/* Find and open the device, select the GID, probe import. */
static int profile_open(struct profile *p)
{
	struct devmatch_spec want = devmatch_of(p->dev);
	int r = devmatch_find(want, p->ibdev, sizeof(p->ibdev));

	if (r < 0) {
		char what[256];

		p->ibdev[0] = '\0';
		devmatch_describe(want, what, sizeof(what));
		profile_set_state(p, PROFILE_PENDING,
				  "no RDMA device matches device '%s' (%s)",
				  p->dev->name, what);
		return r;
	}
	/* The previous run's context, when the fd store kept it. */
	p->restart.restored = restore_take(p, &p->ctx);
	if (p->restart.restored) {
		p->dev_index = (uint32_t)devinfo_index(p->ibdev);
		p->ctxn = restore_ctxn(p->restart.restored);
		free(p->restart.prev_tids);
		p->restart.prev_tids = restore_take_tids(
		    p->restart.restored, &p->restart.n_prev_tids);
		log_info("profile %s: took back the device context of the "
			 "previous run on %s",
			 p->conf->name, p->ibdev);
	} else {
		p->ctx = open_numbered(p);
	}
	p->restart.ctx_kept = p->restart.restored != NULL;
	p->restart.kept_scanned = false;
	p->restart.kept_orphans = 0;
	if (!p->ctx) {
		r = -errno;
		profile_set_state(p, PROFILE_FAILED, "ibv_open_device %s: %s",
				  p->ibdev, strerror(-r));
		return r;
	}
	if (devmatch_gid(p->ctx, want, &p->gid_index, &p->gid) < 0)
		p->gid_index = -1;
	p->import_err = devinfo_probe_import(p->ctx);
	return 0;
}

/* ---- creation on the workers ---- */

/* Bytes a creation of o registers, for progress. */
static uint64_t object_bytes(struct profile *p, const struct object *o)
{
	const struct conf_mr *c = o->conf;
	const struct object *mem;
	const struct conf_memory *cm;

	if (o->kind != OBJ_MR)
		return 0;
	if (c->length)
		return c->length;
	mem = profile_find(p, OBJ_MEMORY, c->memory);
	cm = mem ? mem->conf : NULL;
	return cm && cm->size > c->offset ? cm->size - c->offset : 0;
}

/* The creation of p->objects[j - p->jobs]: its job on the workers and
 * what it waits for. */
struct job {
	struct work work;
	struct profile *profile;
	uint32_t waiting; /* dependencies not created yet */
	int result;	  /* the job's: 0 or -errno */
	enum obj_phase phase;
};

static struct object *job_object(struct job *j)
{
	return &j->profile->objects[j - j->profile->build.jobs];
}

static struct job *object_job(struct profile *p, const struct object *o)
{
	return &p->build.jobs[o - p->objects];
}

static void job_run(struct work *w)
{
	struct job *j = container_of(w, struct job, work);
	struct object *o = job_object(j);

	j->result = j->phase == PHASE_CREATE ? object_build(j->profile, o)
					     : object_connect(j->profile, o);
}

static void job_done(struct work *w, bool cancelled);

static void submit(struct profile *p, struct object *o, enum obj_phase ph)
{
	struct job *j = object_job(p, o);

	j->phase = ph;
	j->work = (struct work){ .run = job_run, .done = job_done, .owner = p };
	p->build.in_flight++;
	workers_submit(p->build.workers, &j->work);
}

/* The creation is over: its bookkeeping goes. */
static void jobs_free(struct profile *p)
{
	free(p->build.jobs);
	p->build.jobs = NULL;
}

/* Does o, once built, still have to move to its target state? */
static bool needs_connect(const struct object *o)
{
	return o->kind == OBJ_QP &&
	       ((const struct conf_qp *)o->conf)->state != QPS_TARGET_RESET;
}

/* A PD or MR of the previous run that a live client of it leases and
 * this run does not declare the same way: it drains for that client. */
static void keep_leased(void *ud, const char *kind, const char *name,
			void *obj)
{
	struct profile *p = ud;
	struct conf_mr conf = { .name = (char *)name };
	struct object o = { .conf = &conf, .state = OBJ_READY };

	if (kind[0] == 'p') {
		o.kind = OBJ_PD;
		o.u.pd = obj;
	} else {
		o.kind = OBJ_MR;
		o.u.mr.mr = obj;
	}
	o.serial = object_next_serial();
	if (profile_add_draining(p, &o) < 0) {
		object_destroy(&o);
		return;
	}
	log_info("profile %s: %s %s of the previous run is not declared the "
		 "same now, but a client of that run holds it: it drains",
		 p->conf->name, kind, name);
}

/* What the previous run kept and this one did not take back goes, but
 * for what its live clients hold (when keep: not at a stop). Who holds
 * what stays until the owner adopts the leases (profile_index.h). */
static void restore_end(struct profile *p, bool keep)
{
	size_t n;

	if (!p->restart.restored)
		return;
	if (keep) {
		json_decref(p->restart.adopt);
		p->restart.adopt = restore_holders(p->restart.restored);
		reclaim_restore(p, restore_makers(p->restart.restored));
	}
	n = restore_finish(TAKE_PTR(p->restart.restored), p->ctx,
			   keep ? keep_leased : NULL, p);
	if (n)
		log_info("profile %s: destroyed %zu PDs and MRs of the "
			 "previous run that are not declared the same now",
			 p->conf->name, n);
}

/* Every job of the creation under way has ended: connect what was built,
 * then say so. */
static void phase_end(struct profile *p)
{
	bool connecting = false;

	for (size_t i = 0; i < p->n_objects; i++) {
		struct object *o = &p->objects[i];

		if (o->todo && o->state == OBJ_CREATING &&
		    object_job(p, o)->phase == PHASE_CREATE) {
			submit(p, o, PHASE_CONNECT);
			connecting = true;
		}
	}
	/* What a reload destroys on the workers ends the phase too. */
	if (connecting || p->build.burying)
		return;
	for (size_t i = 0; i < p->n_objects; i++)
		p->objects[i].todo = false;
	jobs_free(p);
	restore_end(p, true);
	update_state(p);
	if (p->notify.owner)
		manager_profile_changed(p->notify.owner, p, PROFILE_SETTLED);
}

/* Built, but it could not start on the loop: what it made goes, the
 * reason stays. */
static void object_destroy_failed(struct object *o)
{
	char *reason = TAKE_PTR(o->reason);
	int err = o->err;

	object_destroy(o);
	o->reason = reason;
	o->err = err;
	object_set_state(o, OBJ_FAILED);
}

static void object_ready(struct object *o)
{
	object_set_state(o, OBJ_READY);
	o->serial = object_next_serial();
}

/* A lost object's re-creation is over (profile_lost.c): ready, the
 * clients hear its new handle and keys; failed, the object_state event
 * said why. */
static void lost_settled(struct profile *p, struct object *o)
{
	o->relost = false;
	if (o->state != OBJ_READY) {
		p->health.faults.recreate_failed[o->kind]++;
		log_object(LOG_ERR, o->err, p->conf->name,
			   obj_kind_name(o->kind), object_name(o),
			   "profile %s: %s '%s' was lost and cannot be made "
			   "again",
			   p->conf->name, obj_kind_name(o->kind),
			   object_name(o));
		return;
	}
	p->health.faults.recreated[o->kind]++;
	log_object(LOG_NOTICE, 0, p->conf->name, obj_kind_name(o->kind),
		   object_name(o), "profile %s: %s '%s' made again",
		   p->conf->name, obj_kind_name(o->kind), object_name(o));
	events_publish(p->notify.events,
		       &(struct event){.kind = EV_OBJECT_RECREATED,
				       .profile_name = p->conf->name,
				       .profile = p,
				       .object = o});
}

static void job_done(struct work *w, bool cancelled)
{
	struct job *j = container_of(w, struct job, work);
	struct profile *p = j->profile;
	struct object *o = job_object(j);

	p->build.in_flight--;
	profile_touch(p);
	if (cancelled) {
		/* Never ran: a built QP stays creating (not connected),
		 * anything else has nothing. */
		if (j->phase == PHASE_CREATE)
			object_set_state(o, OBJ_PENDING);
	} else if (j->result < 0) {
		object_set_state(o, OBJ_FAILED);
	} else if (j->phase == PHASE_CREATE && needs_connect(o)) {
		/* Built; connected once every object exists. */
	} else if (object_start(p, o) < 0) {
		object_destroy_failed(o);
	} else {
		object_ready(o);
	}
	if (!cancelled && (o->state == OBJ_READY || o->state == OBJ_FAILED))
		profile_object_announce(p, o);
	if (!cancelled && o->relost &&
	    (o->state == OBJ_READY || o->state == OBJ_FAILED))
		lost_settled(p, o);
	if (!cancelled && j->phase == PHASE_CREATE) {
		p->build.progress.objects++;
		if (o->state != OBJ_FAILED)
			p->build.progress.bytes += object_bytes(p, o);
	}
	if (p->build.cancelling)
		return;
	if (j->phase == PHASE_CREATE) {
		for (uint32_t e = p->dep_start[o - p->objects];
		     e < p->dep_start[o - p->objects + 1]; e++) {
			struct object *d = &p->objects[p->dependents[e]];

			/* A QP's peer is a link, not something it waits for. */
			if (d->kind == OBJ_QP && o->kind == OBJ_QP)
				continue;
			if (d->todo && d->state == OBJ_CREATING &&
			    --object_job(p, d)->waiting == 0)
				submit(p, d, PHASE_CREATE);
		}
		if (p->notify.owner)
			manager_profile_changed(p->notify.owner, p,
						PROFILE_PROGRESS);
	}
	if (!p->build.in_flight)
		phase_end(p);
}

/* Create the objects marked todo, parents first, on the workers. */
void profile_create_objects(struct profile *p)
{
	struct object *deps[CONF_MAX_REFS];
	size_t roots = 0;

	p->build.progress = (struct profile_progress){0};
	jobs_free(p);
	p->build.jobs = calloc(p->n_objects + 1, sizeof(*p->build.jobs));
	for (size_t i = 0; i < p->n_objects; i++) {
		struct object *o = &p->objects[i];

		if (!o->todo)
			continue;
		if (!p->build.jobs) {
			o->todo = false;
			object_fail(o, ENOMEM, "out of memory");
			object_set_state(o, OBJ_FAILED);
			continue;
		}
		p->build.jobs[i].profile = p;
		object_set_state(o, OBJ_CREATING);
		p->build.progress.objects_total++;
		p->build.progress.bytes_total += object_bytes(p, o);
		if (o->kind == OBJ_MEMORY &&
		    populate_large(((const struct conf_memory *)o->conf)->size))
			p->build.progress.populated_total +=
			    ((const struct conf_memory *)o->conf)->size;
	}
	for (size_t i = 0; i < p->n_objects; i++) {
		struct object *o = &p->objects[i];
		size_t n;

		if (!o->todo)
			continue;
		n = object_refs(p, o, false, deps);
		for (size_t d = 0; d < n; d++)
			p->build.jobs[i].waiting += deps[d]->todo;
	}
	profile_set_state(p, PROFILE_CREATING, NULL);
	profile_touch(p);
	p->notify.populated_said = 0;
	if (p->notify.owner)
		manager_profile_changed(p->notify.owner, p, PROFILE_STARTED);
	workers_plug(p->build.workers);
	for (size_t i = 0; i < p->n_objects; i++) {
		struct object *o = &p->objects[i];

		if (o->todo && !p->build.jobs[i].waiting) {
			submit(p, o, PHASE_CREATE);
			roots++;
		}
	}
	workers_unplug(p->build.workers);
	if (!roots)
		phase_end(p);
}

void profile_create_lost(struct profile *p)
{
	profile_create_objects(p);
}

void profile_progress_now(const struct profile *p,
			  struct profile_progress *out)
{
	*out = p->build.progress;
	if (!p->build.progress.populated_total)
		return;
	for (size_t i = p->kind_start[OBJ_MEMORY];
	     i < p->kind_start[OBJ_MEMORY] + p->conf->n_objs[OBJ_MEMORY];
	     i++) {
		const struct object *o = &p->objects[i];
		struct memory_stats *ms;

		if (!o->todo || (o->state != OBJ_CREATING &&
				 o->state != OBJ_READY))
			continue;
		ms = atomic_load(&o->u.mem.stats);
		if (ms)
			out->populated += atomic_load(&ms->populated);
	}
}

/* Stop the creation under way: what is queued is not started, what runs
 * is waited for. Objects are left as they are, to be destroyed or kept. */
void profile_cancel_creation(struct profile *p)
{
	if (!p->build.in_flight)
		return;
	p->build.cancelling = true;
	atomic_store(&p->build.stop, true);
	workers_drain(p->build.workers, p);
	atomic_store(&p->build.stop, false);
	p->build.cancelling = false;
	for (size_t i = 0; i < p->n_objects; i++)
		p->objects[i].todo = false;
	jobs_free(p);
}

int profile_start(struct profile *p)
{
	int r = profile_open(p);

	if (r < 0)
		return r;
	/* Memory that outlived its device is there already. */
	for (size_t i = 0; i < p->n_objects; i++)
		p->objects[i].todo = p->objects[i].state != OBJ_READY;
	profile_create_objects(p);
	return 0;
}

/* ---- burial ---- */

/*
 * What a reload destroys goes on a worker: deregistering and unmapping
 * gigabytes takes as long as registering them did. The objects' verbs
 * handles are copied out of the profile (which forgets them), destroyed
 * there in the order given (children first), the context kept open
 * until it is done: the job's owner is the context, which profile_bury_wait()
 * drains before anything else of it is destroyed or it is closed.
 * Targets are not buried: they live on the loop.
 */
struct burial {
	struct work work;
	struct profile *profile; /* whose context: valid until drained */
	size_t n, cap;
	struct object objs[];
};

static void burial_run(struct work *w)
{
	struct burial *b = container_of(w, struct burial, work);

	for (size_t i = 0; i < b->n; i++)
		object_destroy(&b->objs[i]);
}

static void phase_end(struct profile *p);

static void burial_done(struct work *w, bool cancelled)
{
	struct burial *b = container_of(w, struct burial, work);
	struct profile *p = b->profile;

	/* Never started: destroyed here, as it would have been. */
	if (cancelled)
		burial_run(w);
	free(b);
	p->build.burying--;
	profile_touch(p);
	/* The last of the reload's work: it settles now. */
	if (!p->build.burying && !p->build.unburying && !p->build.in_flight &&
	    p->state == PROFILE_CREATING)
		phase_end(p);
}

/* Wait for what was buried in p's context. */
void profile_bury_wait(struct profile *p)
{
	if (!p->ctx || !p->build.burying)
		return;
	p->build.unburying = true;
	workers_drain(p->build.workers, p->ctx);
	p->build.unburying = false;
}

/* Add o to *bp (NULL: a new burial), or destroy it now if it cannot be
 * buried. */
void profile_bury(struct burial **bp, struct object *o)
{
	struct burial *b = *bp;

	/* Targets and groups have event sources on the loop. */
	if (object_on_loop(o) || o->state == OBJ_PENDING) {
		object_destroy(o);
		return;
	}
	if (!b || b->n == b->cap) {
		size_t cap = b ? 2 * b->cap : 8;
		struct burial *nb = realloc(b, sizeof(*b) +
						       cap * sizeof(b->objs[0]));

		if (!nb) {
			object_destroy(o);
			return;
		}
		if (!b)
			nb->n = 0;
		nb->cap = cap;
		*bp = b = nb;
	}
	/* Only the kind and the handles go: the declaration stays here. */
	b->objs[b->n] = (struct object){ .kind = o->kind, .u = o->u };
	b->n++;
	free(o->reason);
	o->reason = NULL;
	o->err = 0;
	o->leases = 0;
	o->held = 0;
	object_forget(o);
}

void profile_bury_submit(struct profile *p, struct burial *b)
{
	if (!b)
		return;
	b->work = (struct work){ .run = burial_run,
				 .done = burial_done,
				 .owner = p->ctx };
	b->profile = p;
	p->build.burying++;
	workers_submit(p->build.workers, &b->work);
}

/* Keep a removed object alive, apart, while sessions hold it. */
int profile_add_draining(struct profile *p, struct object *o)
{
	struct object *d = realloc(p->draining,
				   (p->n_draining + 1) * sizeof(*d));
	/* The old config goes away: the object keeps its name, in a
	 * declaration of its own (every kind's begins like conf_pd). */
	struct conf_pd *conf = calloc(1, conf_obj_size(o->kind));
	char *name = strdup(object_name(o));

	if (!d || !conf || !name) {
		free(name);
		free(conf);
		if (d)
			p->draining = d;
		return -ENOMEM;
	}
	conf->name = name;
	p->draining = d;
	d[p->n_draining] = *o;
	d[p->n_draining].conf = conf;
	object_set_state(&d[p->n_draining], OBJ_DRAINING);
	d[p->n_draining].reason = NULL;
	object_drain(&d[p->n_draining]);
	p->n_draining++;
	profile_object_announce(p, &d[p->n_draining - 1]);
	object_forget(o);
	return 0;
}

/* Destroy the draining objects no session holds (all: every one; PDs
 * and MRs left to the next run drain on there), children first. One
 * that a held object may depend on (held objects of a later kind: kinds
 * are in dependency order) waits for it: no PD goes under its MR. */
static void destroy_draining(struct profile *p, bool all)
{
	int held = -1; /* the latest kind still held */
	size_t kept = 0;

	for (size_t i = 0; !all && i < p->n_draining; i++)
		if (p->draining[i].leases && (int)p->draining[i].kind > held)
			held = (int)p->draining[i].kind;
	for (int k = OBJ_KIND_MAX - 1; k >= 0; k--)
		for (size_t i = 0; i < p->n_draining; i++) {
			struct object *o = &p->draining[i];

			if ((int)o->kind != k || o->state != OBJ_DRAINING)
				continue;
			if (!all && (o->leases || k < held))
				continue;
			if (all && p->restart.hand_over &&
			    object_kept_by_restart(o))
				object_hand_over(o);
			else
				object_destroy(o);
			free(((struct conf_pd *)o->conf)->name);
			free((void *)o->conf);
			o->conf = NULL;
		}
	for (size_t i = 0; i < p->n_draining; i++)
		if (p->draining[i].conf)
			p->draining[kept++] = p->draining[i];
	p->n_draining = kept;
	profile_touch(p);
}

/* Destroy the objects, children first, and close the context; memory
 * stays when keep_memory (it does not depend on the device). */
static void stop(struct profile *p, const char *reason, bool keep_memory)
{
	profile_holds_fold(p);
	profile_cancel_creation(p);
	profile_bury_wait(p);
	restore_end(p, false);
	for (size_t i = p->n_objects; i-- > 0;) {
		struct object *o = &p->objects[i];

		if (keep_memory && o->kind == OBJ_MEMORY &&
		    o->state == OBJ_READY)
			continue;
		/* The context outlives us: they stay in it for the next
		 * run. */
		if (p->restart.hand_over && o->state == OBJ_READY &&
		    object_kept_by_restart(o))
			object_hand_over(o);
		else
			object_destroy(o);
	}
	destroy_draining(p, true);
	if (p->ctx)
		ibv_close_device(p->ctx);
	p->ctx = NULL;
	p->ctxn = -1;
	ctx_view_clear(&p->health.view);
	p->ibdev[0] = '\0';
	p->gid_index = -1;
	profile_set_state(p, PROFILE_PENDING, "%s", reason ? reason : "stopped");
	profile_touch(p);
}

void profile_stop(struct profile *p, const char *reason)
{
	stop(p, reason, false);
}

void profile_lose_device(struct profile *p, const char *reason)
{
	stop(p, reason, true);
}

bool profile_retire(struct profile *p)
{
	/* What sessions hold drains: each object's own count first. */
	profile_holds_fold(p);
	profile_cancel_creation(p);
	profile_bury_wait(p);
	for (size_t i = p->n_objects; i-- > 0;) {
		struct object *o = &p->objects[i];

		if (o->leases && o->state == OBJ_READY &&
		    profile_add_draining(p, o) == 0)
			continue;
		object_destroy(o);
	}
	/* Its configuration goes with the reload: nothing may look at it,
	 * nor at the objects named by it (what drains has its own names). */
	for (size_t i = 0; i < p->n_objects; i++)
		free(p->objects[i].reason);
	p->n_objects = 0;
	p->conf = NULL;
	p->dev = NULL;
	profile_touch(p);
	return p->n_draining > 0;
}

void profile_release(struct profile *p, struct object *o)
{
	if (o->leases)
		o->leases--;
	/* The last lease of a removed object: it goes now; at an exit that
	 * leaves the context to the next run, that run judges. */
	if (o->state == OBJ_DRAINING && !profile_object_leases(p, o) &&
	    !p->restart.hand_over)
		destroy_draining(p, false);
}

struct profile *profile_free(struct profile *p)
{
	if (!p)
		return NULL;
	profile_stop(p, NULL);
	jobs_free(p);
	for (size_t i = 0; i < p->n_objects; i++)
		free(p->objects[i].reason);
	free(p->dep_start);
	free(p->dependents);
	free(p->draining);
	free(p->restart.prev_tids);
	json_decref(p->restart.adopt);
	reclaim_free(p);
	ctx_view_clear(&p->health.view);
	free(p->reason);
	free(p->objects);
	free(p);
	return NULL;
}

/* ---- JSON ---- */

json_t *profile_progress_json(const struct profile *p)
{
	struct profile_progress g;

	profile_progress_now(p, &g);
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "objects",
			 (json_int_t)g.objects, "objects_total",
			 (json_int_t)g.objects_total, "bytes",
			 (json_int_t)g.bytes, "bytes_total",
			 (json_int_t)g.bytes_total, "populated",
			 (json_int_t)g.populated, "populated_total",
			 (json_int_t)g.populated_total);
}

json_t *profile_json(const struct profile *p, int detail)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:i}", "name", p->conf->name,
			      "device", p->dev->name, "state",
			      profile_state_name(p->state), "port",
			      p->dev->port);
	json_t *objs;

	if (!j)
		return NULL;
	if (p->ibdev[0])
		json_object_set_new(j, "ibdev", json_string(p->ibdev));
	if (p->reason)
		json_object_set_new(j, "reason", json_string(p->reason));
	if (p->ctx) {
		json_object_set_new(j, "gid_index", json_integer(p->gid_index));
		json_object_set_new(j, "import_capable",
				    json_boolean(p->import_err == 0));
		if (p->import_err)
			json_object_set_new(j, "import_error",
					    json_string(strerror(-p->import_err)));
		if (p->ctxn >= 0)
			json_object_set_new(j, "ctxn", json_integer(p->ctxn));
		if (p->health.view.scanned && !p->health.view.err)
			json_object_set_new(
			    j, "orphans",
			    json_integer((json_int_t)p->health.view.n_orphan));
	}
	if (p->state == PROFILE_CREATING)
		json_object_set_new(j, "progress", profile_progress_json(p));
	if (!detail) {
		json_object_set_new(j, "objects",
				    json_integer((json_int_t)p->n_objects));
		return j;
	}
	objs = json_array();
	for (size_t i = 0; objs && i < p->n_objects; i++)
		json_array_append_new(
		    objs, object_json(&p->objects[i], profile_object_leases(
							  p, &p->objects[i])));
	for (size_t i = 0; objs && i < p->n_draining; i++)
		json_array_append_new(
		    objs,
		    object_json(&p->draining[i],
				profile_object_leases(p, &p->draining[i])));
	json_object_set_new(j, "objects", objs);
	return j;
}
