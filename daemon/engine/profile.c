// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>

#include "devinfo.h"
#include "devmatch.h"
#include "manager.h"
#include "objects.h"
#include "profile.h"

static const char *const state_names[] = {
	[OBJ_PENDING] = "pending",
	[OBJ_READY] = "ready",
	[OBJ_FAILED] = "failed",
	[OBJ_DRAINING] = "draining",
};

static const char *const action_names[] = {
	[ACT_KEEP] = "keep",
	[ACT_RECREATE] = "recreate",
	[ACT_CREATE] = "create",
	[ACT_REMOVE] = "remove",
	[ACT_RETRY] = "retry",
};

static const char *const profile_state_names[] = {
	[PROFILE_PENDING] = "pending",
	[PROFILE_READY] = "ready",
	[PROFILE_DEGRADED] = "degraded",
	[PROFILE_FAILED] = "failed",
};

const char *obj_state_name(enum obj_state s)
{
	return state_names[s];
}

const char *obj_action_name(enum obj_action a)
{
	return action_names[a];
}

const char *profile_state_name(enum profile_state s)
{
	return profile_state_names[s];
}

static void profile_set_state(struct profile *p, enum profile_state s,
			      const char *fmt, ...) _printf_(3, 4);
static void profile_set_state(struct profile *p, enum profile_state s,
			      const char *fmt, ...)
{
	va_list ap;

	free(p->reason);
	p->reason = NULL;
	p->state = s;
	if (!fmt)
		return;
	va_start(ap, fmt);
	if (vasprintf(&p->reason, fmt, ap) < 0)
		p->reason = NULL;
	va_end(ap);
}

struct object *profile_find(struct profile *p, enum obj_kind kind,
			    const char *name)
{
	for (size_t i = 0; name && i < p->n_objects; i++)
		if (p->objects[i].kind == kind &&
		    streq(p->objects[i].name, name))
			return &p->objects[i];
	return NULL;
}

int profile_new(const struct config *cfg, const struct conf_profile *c,
		struct profile **out)
{
	struct profile *p = calloc(1, sizeof(*p));
	size_t n = 0;

	if (!p)
		return -ENOMEM;
	for (int k = 0; k < OBJ_KIND_MAX; k++)
		n += c->n_objs[k];
	p->objects = calloc(n ? n : 1, sizeof(*p->objects));
	if (!p->objects) {
		free(p);
		return -ENOMEM;
	}
	p->conf = c;
	p->dev = config_device(cfg, c->device);
	p->gid_index = -1;
	profile_set_state(p, PROFILE_PENDING, "not started");
	/* Kind order is a dependency order. */
	for (int k = 0; k < OBJ_KIND_MAX; k++)
		for (size_t i = 0; i < c->n_objs[k]; i++) {
			struct object *o = &p->objects[p->n_objects++];

			o->kind = (enum obj_kind)k;
			o->conf = conf_obj(c, (enum obj_kind)k, i);
			o->name = conf_obj_name(o->conf);
			object_forget(o); /* pending, fds at -1 */
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
}

/* Find and open the device, select the GID, probe import. */
static int profile_open(struct profile *p)
{
	int r;

	r = devmatch_find(p->dev, p->ibdev, sizeof(p->ibdev));
	if (r < 0) {
		char what[256];

		p->ibdev[0] = '\0';
		devmatch_describe(p->dev, what, sizeof(what));
		profile_set_state(p, PROFILE_PENDING,
				  "no RDMA device matches device '%s' (%s)",
				  p->dev->name, what);
		return r;
	}
	p->ctx = devinfo_open(p->ibdev);
	if (!p->ctx) {
		r = -errno;
		profile_set_state(p, PROFILE_FAILED, "ibv_open_device %s: %s",
				  p->ibdev, strerror(-r));
		return r;
	}
	if (devmatch_gid(p->ctx, p->dev, &p->gid_index, &p->gid) < 0)
		p->gid_index = -1;
	p->import_err = device_probe_import(p->ctx);
	return 0;
}

/* Create (parents first), then connect, the objects marked in todo. */
static void create_objects(struct profile *p, const bool *todo,
			   profile_progress_fn progress, void *ud)
{
	for (size_t i = 0; i < p->n_objects; i++) {
		if (todo && !todo[i])
			continue;
		if (progress)
			progress(ud, &p->objects[i]);
		object_create(p, &p->objects[i]);
	}
	for (size_t i = 0; i < p->n_objects; i++)
		if (!todo || todo[i])
			object_connect(p, &p->objects[i]);
}

int profile_start(struct profile *p, profile_progress_fn progress, void *ud)
{
	int r = profile_open(p);

	if (r < 0)
		return r;
	create_objects(p, NULL, progress, ud);
	update_state(p);
	return 0;
}

static void destroy_draining(struct profile *p, bool all)
{
	size_t kept = 0;

	for (size_t i = 0; i < p->n_draining; i++) {
		struct object *o = &p->draining[i];

		if (all || !o->leases) {
			object_destroy(o);
			free((char *)o->name);
		} else {
			p->draining[kept++] = *o;
		}
	}
	p->n_draining = kept;
}

void profile_stop(struct profile *p, const char *reason)
{
	for (size_t i = p->n_objects; i-- > 0;)
		object_destroy(&p->objects[i]);
	destroy_draining(p, true);
	if (p->ctx)
		ibv_close_device(p->ctx);
	p->ctx = NULL;
	p->ibdev[0] = '\0';
	p->gid_index = -1;
	profile_set_state(p, PROFILE_PENDING, "%s", reason ? reason : "stopped");
}

/* ---- reload ---- */

/* Which objects of next can take over their namesake in old: the same
 * declaration, ready, and every object they refer to taken over too. */
static void mark_kept(struct profile *next, struct profile *old, bool *keep)
{
	bool changed = true;

	for (size_t i = 0; i < next->n_objects; i++) {
		struct object *o = &next->objects[i];
		struct object *was = profile_find(old, o->kind, o->name);

		keep[i] = was && was->state == OBJ_READY &&
			  conf_obj_equal(o->kind, o->conf, was->conf);
	}
	/* Until nothing changes: a QP and its peer refer to each other. */
	while (changed) {
		changed = false;
		for (size_t i = 0; i < next->n_objects; i++) {
			struct object *o = &next->objects[i];
			struct conf_ref refs[CONF_MAX_REFS];
			size_t n;

			if (!keep[i])
				continue;
			n = conf_obj_refs(o->kind, o->conf, refs,
					  ARRAY_SIZE(refs));
			for (size_t r = 0; r < n; r++) {
				struct object *d = profile_find(
					next, refs[r].kind, refs[r].name);

				if (!d || !keep[d - next->objects]) {
					keep[i] = false;
					changed = true;
					break;
				}
			}
		}
	}
}

/* Keep a removed object alive, apart, while sessions hold it. */
static int add_draining(struct profile *p, struct object *o)
{
	struct object *d = realloc(p->draining,
				   (p->n_draining + 1) * sizeof(*d));
	char *name = strdup(o->name);

	if (!d || !name) {
		free(name);
		if (d)
			p->draining = d;
		return -ENOMEM;
	}
	p->draining = d;
	d[p->n_draining] = *o;
	d[p->n_draining].name = name;
	d[p->n_draining].conf = NULL; /* the old config goes away */
	d[p->n_draining].state = OBJ_DRAINING;
	d[p->n_draining].reason = NULL;
	p->n_draining++;
	object_forget(o);
	return 0;
}

int profile_reload(struct profile *next, struct profile *old,
		   void (*report)(void *ud, const struct object *o,
				  enum obj_action a),
		   void *ud)
{
	_cleanup_free_ bool *keep = NULL, *todo = NULL, *retry = NULL;

	/* Another device, or none yet: start over. */
	if (!old->ctx || !conf_device_equal(next->dev, old->dev)) {
		bool had = old->ctx != NULL;

		for (size_t i = 0; had && i < old->n_objects; i++)
			if (!profile_find(next, old->objects[i].kind,
					  old->objects[i].name))
				report(ud, &old->objects[i], ACT_REMOVE);
		profile_stop(old, "reloaded");
		/* Only what was really created is reported. */
		if (profile_start(next, NULL, NULL) < 0)
			return 0;
		for (size_t i = 0; i < next->n_objects; i++)
			report(ud, &next->objects[i],
			       had && profile_find(old, next->objects[i].kind,
						   next->objects[i].name)
				       ? ACT_RECREATE
				       : ACT_CREATE);
		return 0;
	}

	keep = calloc(next->n_objects + 1, sizeof(*keep));
	todo = calloc(next->n_objects + 1, sizeof(*todo));
	retry = calloc(next->n_objects + 1, sizeof(*retry));
	if (!keep || !todo || !retry)
		return -ENOMEM;
	mark_kept(next, old, keep);

	/* The context and what was found with it stay. */
	next->ctx = TAKE_PTR(old->ctx);
	memcpy(next->ibdev, old->ibdev, sizeof(next->ibdev));
	next->gid_index = old->gid_index;
	next->gid = old->gid;
	next->import_err = old->import_err;
	next->draining = TAKE_PTR(old->draining);
	next->n_draining = old->n_draining;
	old->n_draining = 0;

	for (size_t i = 0; i < next->n_objects; i++) {
		struct object *o = &next->objects[i];
		struct object *was = profile_find(old, o->kind, o->name);

		if (keep[i]) {
			o->u = was->u;
			o->iova = was->iova;
			o->leases = was->leases;
			o->serial = was->serial;
			o->state = OBJ_READY;
			object_forget(was);
			report(ud, o, ACT_KEEP);
		} else {
			todo[i] = true;
			retry[i] = was && was->state == OBJ_FAILED &&
				   conf_obj_equal(o->kind, o->conf, was->conf);
		}
	}
	/* What old still holds goes, children first; leased objects are
	 * set apart to drain. */
	for (size_t i = old->n_objects; i-- > 0;) {
		struct object *was = &old->objects[i];

		if (!profile_find(next, was->kind, was->name))
			report(ud, was, ACT_REMOVE);
		if (was->leases && was->state == OBJ_READY &&
		    add_draining(next, was) == 0)
			continue;
		object_destroy(was);
	}
	create_objects(next, todo, NULL, NULL);
	for (size_t i = 0; i < next->n_objects; i++) {
		struct object *o = &next->objects[i];
		struct object *was = profile_find(old, o->kind, o->name);

		if (todo[i])
			report(ud, o,
			       !was	  ? ACT_CREATE
			       : retry[i] ? ACT_RETRY
					  : ACT_RECREATE);
	}
	update_state(next);
	profile_stop(old, "replaced by a reload");
	return 0;
}

struct object *profile_find_serial(struct profile *p, enum obj_kind kind,
				   const char *name, uint64_t serial)
{
	for (size_t i = 0; i < p->n_objects; i++)
		if (p->objects[i].serial == serial &&
		    p->objects[i].kind == kind && streq(p->objects[i].name, name))
			return &p->objects[i];
	for (size_t i = 0; i < p->n_draining; i++)
		if (p->draining[i].serial == serial &&
		    p->draining[i].kind == kind && streq(p->draining[i].name, name))
			return &p->draining[i];
	return NULL;
}

void profile_release(struct profile *p, struct object *o)
{
	if (o->leases)
		o->leases--;
	/* The last lease of a removed object: it goes now. */
	if (o->state == OBJ_DRAINING && !o->leases)
		destroy_draining(p, false);
}

struct profile *profile_free(struct profile *p)
{
	if (!p)
		return NULL;
	profile_stop(p, NULL);
	for (size_t i = 0; i < p->n_objects; i++)
		free(p->objects[i].reason);
	free(p->draining);
	free(p->reason);
	free(p->objects);
	free(p);
	return NULL;
}

/* ---- JSON ---- */

json_t *profile_json(const struct profile *p, int detail)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:i}", "name", p->conf->name,
			      "device", p->dev->name, "state",
			      profile_state_names[p->state], "port",
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
	}
	if (!detail) {
		json_object_set_new(j, "objects",
				    json_integer((json_int_t)p->n_objects));
		return j;
	}
	objs = json_array();
	for (size_t i = 0; objs && i < p->n_objects; i++)
		json_array_append_new(objs, object_json(&p->objects[i]));
	for (size_t i = 0; objs && i < p->n_draining; i++)
		json_array_append_new(objs, object_json(&p->draining[i]));
	json_object_set_new(j, "objects", objs);
	return j;
}
