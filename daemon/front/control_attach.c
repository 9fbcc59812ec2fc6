// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <stdio.h>
#include <time.h>

#include "control_internal.h"
#include "log.h"
#include "mcast.h"
#include "objects.h"
#include "proto.h"

const double control_attach_bucket_le[SESSION_ATTACH_BUCKETS] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1,
};

/* ---- leases ---- */

void attachment_release(struct control *c, struct attachment *a)
{
	for (size_t i = 0; i < a->n_leases; i++) {
		struct lease *l = &a->leases[i];

		manager_release(c->m, a->profile, l->kind, l->name, l->serial);
		free(l->name);
	}
	free(a->leases);
	free(a->profile);
	json_decref(a->report);
	*a = (struct attachment){ 0 };
}

static int lease(struct attachment *a, struct object *o)
{
	struct lease *l = realloc(a->leases, (a->n_leases + 1) * sizeof(*l));

	if (!l)
		return -ENOMEM;
	a->leases = l;
	l[a->n_leases] = (struct lease){ o->kind, strdup(object_name(o)), o->serial };
	if (!l[a->n_leases].name)
		return -ENOMEM;
	a->n_leases++;
	o->leases++;
	return 0;
}

/* session_attach / session_detach on the stream: the fields of
 * GET /v1/sessions. */
void session_publish(struct session *s, const struct attachment *a,
		     const char *what, const char *reason)
{
	json_t *j = json_pack("{s:i, s:i, s:i, s:s, s:i, s:s}", "session",
			      (int)s->id, "pid", (int)s->cred.pid, "uid",
			      (int)s->cred.uid, "profile", a->profile,
			      "attachment", (int)a->id, "mode",
			      a->shared ? "shared" : "local");

	if (j && reason)
		json_object_set_new(j, "reason", json_string(reason));
	events_publish(s->c->m->events, what, j);
}

/* ---- ATTACH ---- */

static int attach_one(struct session *s, uint32_t id, json_t *req);

/* Whether the client reaches o (a ready QP or SRQ) by number, so that it
 * must not go under it (leased): an XRC target QP (ibv_open_qp() in its
 * XRC domain) or an XRC SRQ. */
static bool number_leased(const struct object *o)
{
	if (o->kind == OBJ_QP)
		return ((const struct conf_qp *)o->conf)->type == QPK_XRC_RECV;
	return ((const struct conf_srq *)o->conf)->type == SRQK_XRC;
}

/* A ready QP or SRQ in an ATTACHED answer: its name, type and number
 * (qp_num; srq_num for an XRC SRQ, which senders name). */
static json_t *attach_number(const struct object *o)
{
	json_t *j;
	uint32_t num;

	if (o->kind == OBJ_QP) {
		const struct conf_qp *c = o->conf;

		j = json_pack("{s:s, s:s, s:I}", "name", object_name(o), "type",
			      qp_kind_name(c->type), "qp_num",
			      (json_int_t)o->u.qp.qp->qp_num);
		if (j && c->xrcd)
			json_object_set_new(j, "xrcd", json_string(c->xrcd));
		return j;
	}
	j = json_pack("{s:s, s:s}", "name", object_name(o), "type",
		      srq_kind_name(((const struct conf_srq *)o->conf)->type));
	if (j && !ibv_get_srq_num(o->u.srq, &num))
		json_object_set_new(j, "srq_num", json_integer(num));
	return j;
}

static int send_not_ready(struct session *s, uint32_t id,
			  const struct profile *p, const char *why)
{
	char progress[96] = "";

	if (p->state == PROFILE_CREATING)
		snprintf(progress, sizeof(progress),
			 " (%zu of %zu objects, %llu of %llu bytes)",
			 p->progress.objects, p->progress.objects_total,
			 (unsigned long long)p->progress.bytes,
			 (unsigned long long)p->progress.bytes_total);
	return session_send_error(s, id, "not_ready", "%sprofile '%s' is %s%s%s%s",
			  why ? why : "", p->conf->name,
			  profile_state_name(p->state), progress,
			  p->reason ? ": " : "", p->reason ? p->reason : "");
}

static void waiter_free(struct waiter *w)
{
	struct control *c = w->s->c;

	for (struct waiter **pp = &c->waiters; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	w->s->waits--;
	sd_event_source_disable_unref(w->timer);
	json_decref(w->req);
	free(w);
}

static int on_wait_timeout(sd_event_source *es, uint64_t usec, void *ud)
{
	struct waiter *w = ud;
	struct session *s = w->s;
	const char *name = json_string_value(json_object_get(w->req, "profile"));
	struct profile *p = manager_profile(s->c->m, name);
	uint32_t id = w->id;
	char why[64];

	(void)es;
	(void)usec;
	snprintf(why, sizeof(why), "timed out after %lld ms: ",
		 (long long)json_integer_value(json_object_get(w->req, "wait_ms")));
	waiter_free(w);
	s->c->attach_failures++;
	if (!p)
		session_send_error(s, id, "not_found", "no profile '%s'", name);
	else
		send_not_ready(s, id, p, why);
	return 0;
}

/* Answer the ATTACH when the profile is ready, fails, or wait_ms pass. */
static int wait_ready(struct session *s, uint32_t id, json_t *req,
		      json_int_t wait_ms)
{
	struct control *c = s->c;
	struct waiter *w;
	int r;

	if (s->waits >= CONTROL_MAX_WAITS_PER_SESSION)
		return session_send_error(s, id, "too_many_requests",
				  "a session may wait for %d attaches at once",
				  CONTROL_MAX_WAITS_PER_SESSION);
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct waiter){ .next = c->waiters, .s = s, .id = id,
			      .req = json_incref(req) };
	c->waiters = w;
	s->waits++;
	if (wait_ms > 0) {
		r = sd_event_add_time_relative(c->m->event, &w->timer,
					       CLOCK_MONOTONIC,
					       (uint64_t)wait_ms * 1000, 1000,
					       on_wait_timeout, w);
		if (r < 0) {
			waiter_free(w);
			return r;
		}
	}
	return 0;
}

/*
 * Tell every session attached to ev's profile that its device went
 * (MANAGER_DEVICE_LOST) or a reload removes it (MANAGER_PROFILE_REMOVED):
 * one EVENT per attachment, so that clients let go of what they opened
 * on the device themselves (rxe's removal waits for every context on
 * it) and of their leases. The attachments stay until DETACH. A client
 * that does not read is not waited for: an EVENT that does not fit in
 * its socket is dropped.
 */
static void sessions_notify(struct control *c, const struct manager_event *ev)
{
	const char *name = ev->profile->conf->name;
	bool lost = ev->kind == MANAGER_DEVICE_LOST;

	for (struct session *s = c->sessions; s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			const struct attachment *a = &s->att[i];
			json_t *doc;
			int r;

			if (!streq(a->profile, name))
				continue;
			doc = json_pack("{s:s, s:i, s:s}", "event",
					lost ? "device_removed"
					     : "profile_removed",
					"attachment", (int)a->id, "profile",
					name);
			if (doc && lost)
				json_object_set_new(doc, "device",
						    json_string(ev->ibdev));
			if (doc && ev->reason)
				json_object_set_new(doc, "reason",
						    json_string(ev->reason));
			r = session_send_json(s, PROTO_EVENT, 0, doc, NULL, 0);
			if (r < 0)
				log_warn(r,
					 "session %u (pid %d): cannot tell it "
					 "profile %s %s, ignoring",
					 s->id, (int)s->cred.pid, name,
					 lost ? "lost its device"
					      : "is removed");
			else
				log_info("session %u (pid %d): told it "
					 "profile %s %s",
					 s->id, (int)s->cred.pid, name,
					 lost ? "lost its device"
					      : "is removed");
		}
}

static bool holds(const struct attachment *a, const char *kind,
		  const char *name)
{
	for (size_t i = 0; i < a->n_leases; i++)
		if (streq(obj_kind_name(a->leases[i].kind), kind) &&
		    streq(a->leases[i].name, name))
			return true;
	return false;
}

/*
 * A reload removed or recreated an object (change ch of its result) that
 * attachments hold: it drains (kept for them) until the last lets go.
 * Each attachment holding it hears it (EVENT object_draining), so that
 * its client can detach and attach again for what the configuration
 * says now, and the old object goes.
 */
static void on_draining(struct control *c, const json_t *ch)
{
	const char *profile = json_string_value(json_object_get(ch,
								 "profile"));
	const char *kind = json_string_value(json_object_get(ch, "kind"));
	const char *name = json_string_value(json_object_get(ch, "name"));
	const char *action = json_string_value(json_object_get(ch, "action"));

	if (!profile || !kind || !name || !action ||
	    (!streq(action, "recreate") && !streq(action, "remove")))
		return;
	for (struct session *s = c->sessions; s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			const struct attachment *a = &s->att[i];
			char reason[160];

			if (!streq(a->profile, profile) || !holds(a, kind, name))
				continue;
			snprintf(reason, sizeof(reason),
				 "%s '%s' was removed or changed by a reload: "
				 "it stays for you until you detach",
				 kind, name);
			session_send_json(s, PROTO_EVENT, 0,
				  json_pack("{s:s, s:i, s:s, s:s, s:s, s:s}",
					    "event", "object_draining",
					    "attachment", (int)a->id,
					    "profile", profile, "kind", kind,
					    "name", name, "reason", reason),
				  NULL, 0);
		}
}

/*
 * An object of the profile the kernel lost (a client destroyed it), or
 * that was made again after: each attachment to it hears it, the event
 * as the stream has it (its old or new handle and keys) with the
 * attachment's id, so that its client imports the new one.
 */
static void on_object_fault(struct control *c, const json_t *ev,
			    const char *name)
{
	for (struct session *s = c->sessions; s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			json_t *doc;

			if (!streq(s->att[i].profile, name))
				continue;
			doc = json_copy((json_t *)ev);
			if (doc) {
				json_object_del(doc, "seq");
				json_object_del(doc, "time");
				json_object_set_new(doc, "attachment",
						    json_integer(s->att[i].id));
			}
			/* Dropped when the socket is full, as the others. */
			session_send_json(s, PROTO_EVENT, 0, doc, NULL, 0);
		}
}

/*
 * A port of a profile's device went down or came up: every session
 * attached to it hears it (one EVENT per attachment, as for
 * device_removed), so that a client can stop and resume its traffic.
 * A reload's result: what it removes or recreates that attachments hold
 * drains (on_draining()).
 */
static void on_session_event(void *ud, const json_t *ev)
{
	struct control *c = ud;
	const char *what = json_string_value(json_object_get(ev, "event"));
	const char *name = json_string_value(json_object_get(ev, "profile"));
	const json_t *ch;
	size_t k;

	if (what && streq(what, "reload")) {
		json_array_foreach(json_object_get(ev, "changes"), k, ch)
			on_draining(c, ch);
		return;
	}
	if (what && name &&
	    (streq(what, "object_lost") || streq(what, "object_recreated"))) {
		on_object_fault(c, ev, name);
		return;
	}
	if (!what || !name ||
	    (!streq(what, "port_error") && !streq(what, "port_active")))
		return;
	for (struct session *s = c->sessions; s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			json_t *doc;

			if (!streq(s->att[i].profile, name))
				continue;
			doc = json_pack("{s:s, s:i, s:s, s:O?, s:O?, s:O?, s:O?}",
					"event", what, "attachment",
					(int)s->att[i].id, "profile", name,
					"device", json_object_get(ev, "device"),
					"port", json_object_get(ev, "port"),
					"state", json_object_get(ev, "state"),
					"state_name",
					json_object_get(ev, "state_name"));
			/* Dropped when the socket is full, as the others. */
			session_send_json(s, PROTO_EVENT, 0, doc, NULL, 0);
		}
}

/* A profile changed: answer the attaches that waited for it. */
static void on_manager_event(void *ud, const struct manager_event *ev)
{
	struct control *c = ud;
	struct waiter *w, *next;

	if (ev->kind == MANAGER_DEVICE_LOST ||
	    ev->kind == MANAGER_PROFILE_REMOVED) {
		sessions_notify(c, ev);
		return;
	}
	if (ev->kind == MANAGER_PROGRESS)
		return;
	for (w = c->waiters; w; w = next) {
		const char *name =
			json_string_value(json_object_get(w->req, "profile"));
		struct profile *p = manager_profile(c->m, name);
		struct session *s = w->s;
		uint32_t id = w->id;
		json_t *req;

		next = w->next;
		if (p && p->state != PROFILE_READY &&
		    p->state != PROFILE_DEGRADED && p->state != PROFILE_FAILED)
			continue;
		req = json_incref(w->req);
		waiter_free(w);
		/* Answered in full, as if it had come now. */
		if (control_attach(s, id, req) < 0) {
			json_decref(req);
			c->attach_failed(c->attach_failed_ud, s);
			/* The list may have lost more than w. */
			next = c->waiters;
			continue;
		}
		json_decref(req);
	}
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Attach, timed for the histogram of /metrics. */
int control_attach(struct session *s, uint32_t id, json_t *req)
{
	struct control *c = s->c;
	size_t before = s->n_att;
	unsigned int waits = s->waits;
	double t0 = now(), dt;
	int r = attach_one(s, id, req);

	if (s->waits > waits)
		return r; /* answered later */
	if (s->n_att == before) {
		c->attach_failures++;
		return r;
	}
	dt = now() - t0;
	c->attaches++;
	c->attach_seconds += dt;
	for (size_t b = 0; b < SESSION_ATTACH_BUCKETS; b++)
		if (dt <= control_attach_bucket_le[b]) {
			c->attach_buckets[b]++;
			break;
		}
	return r;
}

/*
 * What ATTACHED says of a profile in one mode, but for the attachment's
 * id, as text: rendered once and sent again while nothing it says can
 * have changed (attach_signature()). Building the document was most of
 * an attach in the daemon, and attaching changes nothing in it.
 */
struct attach_text {
	uint64_t sig;
	char *text; /* the object without "attachment": "{...}" */
	size_t len;
};

struct attach_cache {
	UT_hash_handle hh;
	struct attach_text mode[2]; /* local, shared */
	char name[];		    /* the profile's */
};

static void attach_cache_free(struct control *c)
{
	struct attach_cache *e, *tmp;

	HASH_ITER(hh, c->attach_cache, e, tmp) {
		HASH_DEL(c->attach_cache, e);
		free(e->mode[0].text);
		free(e->mode[1].text);
		free(e);
	}
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

/* Everything ATTACHED in this mode depends on: the profile's context,
 * configuration and port, and each object's state, incarnation (serial)
 * and declaration (a reload gives every object a new one). */
static uint64_t attach_signature(const struct profile *p, bool shared)
{
	uint64_t h = mix(shared, (uintptr_t)p->conf);

	h = mix(h, (uintptr_t)p->ctx);
	h = mix(h, (uint64_t)(int64_t)p->import_err);
	h = mix(h, (uint64_t)(int64_t)p->gid_index);
	h = mix(h, p->dev->port);
	for (const char *d = p->ibdev; *d; d++)
		h = mix(h, (unsigned char)*d);
	for (size_t i = 0; i < p->n_objects; i++) {
		const struct object *o = &p->objects[i];

		h = mix(h, (uint64_t)o->state << 56 ^ o->serial);
		h = mix(h, (uintptr_t)o->conf);
		/* A group joined again is described again. */
		if (o->kind == OBJ_MCAST && o->state == OBJ_READY)
			h = mix(h, mcast_epoch(o->u.mcast));
	}
	return h;
}

/* How an object goes into ATTACHED, in one mode. The document and the
 * fds and leases taken for an attach come from walks over the objects in
 * the same order, so that an fd's index in the document is its place in
 * the message. */
enum attach_part {
	PART_NONE,	  /* not in ATTACHED */
	PART_MEMORY,	  /* "memory", with its fd */
	PART_XRCD,	  /* "xrcd", with an fd of its file (shared by inode) */
	PART_PD,	  /* "pd", by handle */
	PART_NUMBER,	  /* "qp" or "srq", by number */
	PART_DM,	  /* "dm", imported in shared mode */
	PART_DM_MR,	  /* "dm_mr" */
	PART_IMPLICIT_MR, /* "implicit_mr": the client registers its own */
	PART_MR,	  /* "mr", over a memory with an fd */
	PART_MCAST,	  /* "mcast": a group's MGID, MLID, qkey and AH */
};

static enum attach_part attach_part(struct profile *p, const struct object *o,
				    bool shared)
{
	const struct conf_mr *mr = o->conf;
	struct object *m;

	if (o->state != OBJ_READY)
		return PART_NONE;
	switch (o->kind) {
	case OBJ_MEMORY:
		return o->u.mem.fd >= 0 ? PART_MEMORY : PART_NONE;
	case OBJ_XRCD:
		return ((const struct conf_xrcd *)o->conf)->file ? PART_XRCD
								 : PART_NONE;
	case OBJ_PD:
		return PART_PD;
	case OBJ_MCAST:
		return PART_MCAST;
	case OBJ_QP:
	case OBJ_SRQ:
		return PART_NUMBER;
	case OBJ_DM:
		/* The context's: imported in shared mode (ibv_import_dm),
		 * out of reach in local. */
		return shared ? PART_DM : PART_NONE;
	case OBJ_MR:
		if (mr->dm)
			return shared ? PART_DM_MR : PART_NONE;
		/* Implicit: the daemon's covers the daemon's memory. */
		if (!mr->memory)
			return PART_IMPLICIT_MR;
		m = profile_find(p, OBJ_MEMORY, mr->memory);
		/* Anonymous memory is not shareable. */
		return m && m->u.mem.fd >= 0 ? PART_MR : PART_NONE;
	default:
		return PART_NONE;
	}
}

/* Whether the client holds what a part names, so that it must not go
 * under it (a lease). Of the numbers, only what a client reaches by
 * number: an XRC target QP (ibv_open_qp() in its XRC domain) or an XRC
 * SRQ. An implicit MR is the client's own, on the profile's PD. */
static bool attach_leased(const struct object *o, enum attach_part part)
{
	if (part == PART_NUMBER)
		return number_leased(o);
	return part != PART_NONE && part != PART_IMPLICIT_MR;
}

/* An object as REST shows it, less what only REST needs: its kind (the
 * list says it), state (only ready objects are listed) and leases. */
static json_t *attach_object_json(const struct object *o)
{
	json_t *j = object_json(o);

	json_object_del(j, "kind");
	json_object_del(j, "state");
	json_object_del(j, "leases");
	return j;
}

/* An object of the profile as its part of ATTACHED. */
static json_t *attach_part_json(const struct object *o, enum attach_part part,
				int fd_index)
{
	json_t *j, *doc;

	switch (part) {
	case PART_MEMORY:
		j = attach_object_json(o);
		json_object_set_new(j, "fd", json_integer(fd_index));
		return j;
	case PART_XRCD:
		return json_pack("{s:s, s:s, s:i}", "name", object_name(o),
				 "file",
				 ((const struct conf_xrcd *)o->conf)->file,
				 "fd", fd_index);
	case PART_PD:
		return json_pack("{s:s, s:i}", "name", object_name(o), "handle",
				 (int)o->u.pd->handle);
	case PART_NUMBER:
		return attach_number(o);
	case PART_IMPLICIT_MR:
		doc = object_json(o);
		j = json_pack("{s:s, s:s, s:O}", "name", object_name(o), "pd",
			      ((const struct conf_mr *)o->conf)->pd, "access",
			      json_object_get(doc, "access"));
		json_decref(doc);
		return j;
	default: /* DM, DM_MR, MR: as in REST, but what is the daemon's */
		return attach_object_json(o);
	}
}

/* The key of ATTACHED's list for an object's part. */
static const char *attach_list(const struct object *o, enum attach_part part)
{
	static const char *const lists[] = {
		[PART_MEMORY] = "memory", [PART_XRCD] = "xrcd",
		[PART_PD] = "pd",	  [PART_DM] = "dm",
		[PART_DM_MR] = "dm_mr",	  [PART_IMPLICIT_MR] = "implicit_mr",
		[PART_MR] = "mr",	  [PART_MCAST] = "mcast",
	};

	if (part == PART_NUMBER)
		return o->kind == OBJ_QP ? "qp" : "srq";
	return lists[part];
}

/* The list of doc called key, made on first use: a kind with nothing
 * ready is left out (clients read an absent list as an empty one, and
 * every key less is less for each attach to parse). */
static json_t *attach_list_of(json_t *doc, const char *key)
{
	json_t *a = json_object_get(doc, key);

	if (a || json_object_set_new(doc, key, json_array()) < 0)
		return a;
	return json_object_get(doc, key);
}

/* ATTACHED of p in this mode, but for "attachment": its text. */
static char *attach_render(struct profile *p, bool shared)
{
	json_t *doc = json_pack("{s:s, s:s, s:s, s:i, s:i, s:b}", "profile",
				p->conf->name, "mode",
				shared ? "shared" : "local", "ibdev", p->ibdev,
				"port", p->dev->port, "gid_index", p->gid_index,
				"import_capable", p->import_err == 0);
	int n_fds = shared; /* the context's cmd_fd is the first */
	char *text = NULL;

	if (!doc)
		return NULL;
	if (p->import_err)
		json_object_set_new(doc, "import_error",
				    json_string(errno_desc(-p->import_err)));
	if (shared)
		json_object_set_new(doc, "cmd_fd", json_integer(0));
	for (size_t i = 0; i < p->n_objects; i++) {
		const struct object *o = &p->objects[i];
		enum attach_part part = attach_part(p, o, shared);
		json_t *j;

		if (part == PART_NONE)
			continue;
		j = attach_part_json(o, part, n_fds);
		if (!j || json_array_append_new(
			      attach_list_of(doc, attach_list(o, part)), j) < 0)
			goto out;
		if (part == PART_MEMORY || part == PART_XRCD)
			n_fds++;
	}
	text = json_dumps(doc, JSON_COMPACT);
out:
	json_decref(doc);
	return text;
}

/* ATTACHED's text of p in this mode: the one kept, or rendered again if
 * something it says may have changed. NULL when out of memory. */
static const struct attach_text *attach_text(struct control *c,
					     struct profile *p, bool shared)
{
	const char *name = p->conf->name;
	uint64_t sig = attach_signature(p, shared);
	struct attach_cache *e;
	struct attach_text *t;
	char *text;

	HASH_FIND_STR(c->attach_cache, name, e);
	if (e && e->mode[shared].text && e->mode[shared].sig == sig)
		return &e->mode[shared];
	text = attach_render(p, shared);
	if (!text)
		return NULL;
	if (!e) {
		/* Profiles gone by reloads leave theirs: a bound. */
		if (HASH_COUNT(c->attach_cache) >= CONTROL_MAX_CACHED)
			attach_cache_free(c);
		e = calloc(1, sizeof(*e) + strlen(name) + 1);
		if (!e) {
			free(text);
			return NULL;
		}
		strcpy(e->name, name);
		HASH_ADD_STR(c->attach_cache, name, e);
	}
	t = &e->mode[shared];
	free(t->text);
	*t = (struct attach_text){ .sig = sig, .text = text,
				   .len = strlen(text) };
	return t;
}

/* What an attach takes of p: the fds of the message, in the document's
 * order, and a lease on each object it names. opened are the fds opened
 * for this message (XRC domains' files), to be closed once it is sent. */
struct attach_take {
	int fds[PROTO_MAX_FDS];
	size_t n_fds;
	int opened[PROTO_MAX_FDS];
	size_t n_opened;
};

static int attach_take(struct profile *p, bool shared, struct attachment *a,
		       struct attach_take *t)
{
	int r;

	if (shared)
		t->fds[t->n_fds++] = p->ctx->cmd_fd;
	for (size_t i = 0; i < p->n_objects; i++) {
		struct object *o = &p->objects[i];
		enum attach_part part = attach_part(p, o, shared);
		int fd = -1;

		if (part == PART_MEMORY) {
			fd = o->u.mem.fd;
		} else if (part == PART_XRCD) {
			fd = open(((const struct conf_xrcd *)o->conf)->file,
				  O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			if (fd < 0)
				return -errno;
			t->opened[t->n_opened++] = fd;
		}
		if (fd >= 0) {
			if (t->n_fds == PROTO_MAX_FDS)
				return -E2BIG;
			t->fds[t->n_fds++] = fd;
		}
		if (attach_leased(o, part)) {
			r = lease(a, o);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int attach_one(struct session *s, uint32_t id, json_t *req)
{
	struct control *c = s->c;
	const char *name = json_string_value(json_object_get(req, "profile"));
	const char *mode = json_string_value(json_object_get(req, "mode"));
	struct profile *p = name ? manager_profile(c->m, name) : NULL;
	const struct attach_text *doc;
	struct attach_take t = { .n_fds = 0 };
	struct attachment *att, a = { 0 };
	struct iovec iov[2];
	char head[64];
	bool shared, socket_err = false;
	int r, n;

	if (!name)
		return session_send_error(s, id, "bad_request",
					  "ATTACH needs \"profile\"");
	if (!p)
		return session_send_error(s, id, "not_found",
					  "no profile '%s'", name);
	if (!session_allowed(p->conf, s))
		return session_send_error(
			s, id, "forbidden",
			"uid %u may not attach to profile '%s'",
			(unsigned int)s->cred.uid, name);
	/* Its handles against the kernel's first, every time (a round of
	 * the timer may have just missed it): what a client destroyed is
	 * being made again then, and the profile is not ready. */
	manager_check(c->m, p);
	if (!p->ctx || (p->state != PROFILE_READY &&
			p->state != PROFILE_DEGRADED)) {
		json_t *w = json_object_get(req, "wait_ms");

		if (w && (!json_is_integer(w) || json_integer_value(w) < -1))
			return session_send_error(
				s, id, "bad_request",
				"\"wait_ms\" is a number of milliseconds, or "
				"-1 for no limit");
		if (json_integer_value(w) && p->state != PROFILE_FAILED)
			return wait_ready(s, id, req, json_integer_value(w));
		return send_not_ready(s, id, p, NULL);
	}
	if (!mode)
		mode = "auto";
	if (streq(mode, "auto"))
		shared = p->import_err == 0;
	else if (streq(mode, "shared") || streq(mode, "local"))
		shared = streq(mode, "shared");
	else
		return session_send_error(
			s, id, "bad_request",
			"mode \"%s\" is not auto, shared or local", mode);
	if (shared && p->import_err)
		return session_send_error(
			s, id, "not_supported",
			"%s cannot share its context (%s): attach in local or "
			"auto mode",
			p->ibdev, strerror(-p->import_err));

	a.id = ++c->next_attachment;
	a.shared = shared;
	a.profile = strdup(name);
	doc = attach_text(c, p, shared);
	att = realloc(s->att, (s->n_att + 1) * sizeof(*att));
	if (att)
		s->att = att;
	r = !a.profile || !doc || !att ? -ENOMEM
				       : attach_take(p, shared, &a, &t);
	if (r == 0) {
		/* "{" "attachment":N "," and the rest of the kept object. */
		n = snprintf(head, sizeof(head), "{\"attachment\":%u%s", a.id,
			     doc->len > 2 ? "," : "");
		iov[0] = (struct iovec){ head, (size_t)n };
		iov[1] = (struct iovec){ doc->text + 1, doc->len - 1 };
		r = proto_send_textv(s->fd, PROTO_ATTACHED, id, iov, 2, t.fds,
				     t.n_fds);
		/* Any error but the size is the socket's: the session ends. */
		socket_err = r < 0 && r != -EMSGSIZE;
	}
	close_all(t.opened, t.n_opened);
	if (r < 0) {
		attachment_release(c, &a);
		return socket_err ? r
				  : session_send_error(s, id, "internal",
						       "cannot attach: %s",
						       strerror(-r));
	}
	profile_touch(p);
	s->att[s->n_att++] = a;
	session_publish(s, &s->att[s->n_att - 1], "session_attach", NULL);
	log_info("session %u (pid %d uid %u): attached to %s, %s mode", s->id,
		 (int)s->cred.pid, (unsigned int)s->cred.uid, name,
		 shared ? "shared" : "local");
	return 0;
}

static struct attachment *find_attachment(struct session *s, json_t *req)
{
	json_int_t id = json_integer_value(json_object_get(req, "attachment"));

	for (size_t i = 0; i < s->n_att; i++)
		if (s->att[i].id == (uint32_t)id)
			return &s->att[i];
	return NULL;
}

int control_detach(struct session *s, uint32_t id, json_t *req)
{
	struct attachment *a = find_attachment(s, req);
	char text[64];
	uint32_t aid;
	int n;

	if (!a)
		return session_send_error(s, id, "not_found", "no such attachment");
	aid = a->id;
	session_publish(s, a, "session_detach", "detached");
	attachment_release(s->c, a);
	*a = s->att[--s->n_att];
	n = snprintf(text, sizeof(text), "{\"attachment\":%u}", aid);
	return session_send_text(s, PROTO_DETACHED, id, text, (size_t)n);
}

int control_report(struct session *s, uint32_t id, json_t *req)
{
	struct attachment *a = find_attachment(s, req);

	if (!a)
		return session_send_error(s, id, "not_found", "no such attachment");
	if (a->shared)
		return session_send_error(s, id, "bad_request",
				  "REPORT is for local mode");
	static const char ok[] = "{\"status\":200,\"body\":{}}";

	json_decref(a->report);
	a->report = json_incref(json_object_get(req, "mr"));
	return session_send_text(s, PROTO_REPLY, id, ok, sizeof(ok) - 1);
}

void control_waiters_drop(struct control *c, struct session *s)
{
	for (struct waiter *w = c->waiters, *next; w; w = next) {
		next = w->next;
		if (w->s == s)
			waiter_free(w);
	}
}

int control_attach_start(struct control *c,
			 void (*failed)(void *ud, struct session *s), void *ud)
{
	int r;

	c->attach_failed = failed;
	c->attach_failed_ud = ud;
	r = events_subscribe(c->m->events, on_session_event, c);

	if (r < 0)
		return r;
	r = manager_subscribe(c->m, on_manager_event, c);
	if (r < 0)
		events_unsubscribe(c->m->events, on_session_event, c);
	return r;
}

void control_attach_stop(struct control *c)
{
	manager_unsubscribe(c->m, on_manager_event, c);
	events_unsubscribe(c->m->events, on_session_event, c);
	attach_cache_free(c);
}
