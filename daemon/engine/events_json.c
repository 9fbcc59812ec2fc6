// SPDX-License-Identifier: MIT
/*
 * The one serializer of the event bus: an event as the stream shows it
 * (GET /v1/events, SUBSCRIBE, the EVENTs of attached sessions), with the
 * names and shapes of the REST documents. The front ends call it; the
 * engine never reads what it makes.
 */
#include <string.h>
#include <time.h>

#include "devinfo.h"
#include "events.h"
#include "objects.h"
#include "profile.h"

/* "2026-11-26T07:06:32.123Z". The part to the second is formatted when
 * the second changes: a burst of events (attaches, progress) formatted
 * the date each time, most of publishing one. */
static json_t *timestamp(void)
{
	static __thread time_t cached_sec = -1;
	static __thread char date[64];
	static __thread size_t n;
	struct timespec ts;
	char buf[96];
	long ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec != cached_sec) {
		struct tm tm;

		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
		cached_sec = ts.tv_sec;
	}
	ms = ts.tv_nsec / 1000000;
	memcpy(buf, date, n);
	buf[n] = '.';
	buf[n + 1] = (char)('0' + ms / 100);
	buf[n + 2] = (char)('0' + ms / 10 % 10);
	buf[n + 3] = (char)('0' + ms % 10);
	buf[n + 4] = 'Z';
	return json_stringn(buf, n + 5);
}

static void set_str(json_t *j, const char *key, const char *v)
{
	if (v)
		json_object_set_new(j, key, json_string(v));
}

static void set_int(json_t *j, const char *key, json_int_t v)
{
	json_object_set_new(j, key, json_integer(v));
}

/* {profile, kind, name}: the object an event is about. */
static void object_fields(json_t *j, const struct object *o)
{
	set_str(j, "kind", obj_kind_name(o->kind));
	set_str(j, "name", object_name(o));
}

static void profile_state_fields(json_t *j, const struct profile *p)
{
	set_str(j, "state", profile_state_name(profile_state(p)));
	if (profile_ibdev(p)[0])
		set_str(j, "device", profile_ibdev(p));
	set_str(j, "reason", profile_reason(p));
}

static void object_state_fields(json_t *j, const struct object *o)
{
	object_fields(j, o);
	set_str(j, "state", obj_state_name(o->state));
	if (o->state == OBJ_FAILED)
		set_str(j, "reason", o->reason);
}

/* The device's async events: the port's state as GET
 * /v1/devices/{ibdev}/ports/{n} shows it; the object's kind, name and
 * QP number. */
static void async_fields(json_t *j, const struct event *ev)
{
	const char *name;

	set_str(j, "device", ev->u.async.ibdev);
	if (ev->u.async.port) {
		set_int(j, "port", ev->u.async.port);
		if (ev->u.async.state >= 0) {
			name = devinfo_port_state_name(
				(enum ibv_port_state)ev->u.async.state);
			set_int(j, "state", ev->u.async.state);
			set_str(j, "state_name", name ? name : "unknown");
		}
	}
	if (ev->object) {
		object_fields(j, ev->object);
		if (ev->object->kind == OBJ_QP)
			set_int(j, "qp_num", ev->object->u.qp.qp->qp_num);
	}
}

static void qp_fields(json_t *j, const struct event *ev)
{
	const struct object *o = ev->object;

	object_fields(j, o);
	set_int(j, "qp_num", o->u.qp.qp->qp_num);
	set_int(j, "recoveries", o->u.qp.recoveries);
	set_str(j, "reason", ev->u.reason);
}

static void target_fields(json_t *j, const struct event *ev)
{
	set_str(j, "kind", "target");
	set_str(j, "name", ev->u.target.name);
	set_str(j, "peer", ev->u.target.peer);
	if (ev->u.target.conn)
		set_int(j, "id", (json_int_t)ev->u.target.conn);
	if (ev->u.target.qp_num >= 0)
		set_int(j, "qp_num", ev->u.target.qp_num);
	set_str(j, "reason", ev->u.target.reason);
}

static void session_fields(json_t *j, const struct event *ev)
{
	set_int(j, "session", ev->u.session.session);
	set_int(j, "pid", ev->u.session.pid);
	set_int(j, "uid", ev->u.session.uid);
	set_int(j, "attachment", ev->u.session.attachment);
	set_str(j, "mode", ev->u.session.shared ? "shared" : "local");
	set_str(j, "reason", ev->u.session.reason);
}

/* object_lost, object_recreated: what a client knew of the object. */
static void fault_fields(json_t *j, const struct event *ev)
{
	const struct object *o = ev->object;

	object_fields(j, o);
	if (ev->kind == EV_OBJECT_RECREATED)
		set_int(j, "lost", o->lost);
	object_identity_json(o, j);
	if (ev->kind == EV_OBJECT_LOST) {
		json_object_set(j, "sessions", (json_t *)ev->u.sessions);
		if (o->state == OBJ_DRAINING)
			json_object_set_new(j, "draining", json_true());
	}
}

/* What each kind adds after profile (when it has one). */
static int fields(json_t *j, const struct event *ev)
{
	switch (ev->kind) {
	case EV_PROFILE_STATE:
		profile_state_fields(j, ev->profile);
		return 0;
	case EV_OBJECT_STATE:
		object_state_fields(j, ev->object);
		return 0;
	case EV_PROGRESS:
		return json_object_update_new(j,
					      profile_progress_json(ev->profile));
	case EV_RELOAD:
		/* A copy: the asker keeps the answer, the stream's readers
		 * keep the event. */
		return ev->u.reload.result
			       ? json_object_update_new(
					 j, json_deep_copy(ev->u.reload.result))
			       : 0;
	case EV_DEVICE_ADDED:
	case EV_DEVICE_REMOVED:
		set_str(j, "device", ev->u.device.ibdev);
		return 0;
	case EV_PORT_ACTIVE ... EV_ASYNC_UNKNOWN:
		async_fields(j, ev);
		return 0;
	case EV_GID_SELECTED:
		set_str(j, "device", ev->u.gid.ibdev);
		set_int(j, "port", ev->u.gid.port);
		set_int(j, "gid_index", ev->u.gid.gid_index);
		set_str(j, "gid", ev->u.gid.gid);
		return 0;
	case EV_QP_ERROR ... EV_QP_RECOVER_FAILED:
		qp_fields(j, ev);
		return 0;
	case EV_MCAST_JOIN:
	case EV_MCAST_ERROR:
		set_str(j, "kind", "mcast");
		set_str(j, "name", ev->u.mcast.name);
		set_str(j, "group", ev->u.mcast.group);
		set_str(j, "reason", ev->u.mcast.reason);
		return 0;
	case EV_TARGET_CONNECT ... EV_TARGET_REVOKE:
		target_fields(j, ev);
		return 0;
	case EV_SESSION_ATTACH:
	case EV_SESSION_DETACH:
		session_fields(j, ev);
		return 0;
	case EV_OBJECT_LOST:
	case EV_OBJECT_RECREATED:
		fault_fields(j, ev);
		return 0;
	default:
		return -1; /* the engine's own: not on the stream */
	}
}

static json_t *render(const struct event *ev)
{
	/* seq, time and event first: a reader sees what it is at once. */
	json_t *j = json_pack("{s:I, s:o, s:s}", "seq", (json_int_t)ev->seq,
			      "time", timestamp(), "event",
			      event_name(ev->kind));

	if (!j)
		return NULL;
	if (ev->profile_name)
		set_str(j, "profile", ev->profile_name);
	if (fields(j, ev) < 0) {
		json_decref(j);
		return NULL;
	}
	return j;
}

const json_t *event_json(const struct event *ev)
{
	if (!event_streamed(ev->kind) || !ev->seq)
		return NULL;
	if (!ev->render)
		return NULL; /* not being delivered */
	if (!ev->render->made) {
		ev->render->json = render(ev);
		ev->render->made = true;
	}
	return ev->render->json;
}
