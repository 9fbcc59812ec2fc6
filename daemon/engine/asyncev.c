// SPDX-License-Identifier: MIT
/*
 * A profile's device context's async events: each published on the
 * stream (a port's state, a QP's or a CQ's error, the GID table
 * changing) and acted on where the daemon can (the GID selected again,
 * a QP's error to qphealth.c, an SRQ's limit armed again). A device
 * that failed is the caller's to handle: this file calls nothing above
 * it.
 */
#include <stdio.h>

#include "asyncev.h"
#include "devinfo.h"
#include "verbs_spec.h"
#include "events.h"
#include "gid.h"
#include "log.h"
#include "objects.h"
#include "qphealth.h"

/* The verbs' async event types, as the bus has them. */
static enum event_kind async_event_kind(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_CQ_ERR: return EV_CQ_ERROR;
	case IBV_EVENT_QP_FATAL: return EV_QP_FATAL;
	case IBV_EVENT_QP_REQ_ERR: return EV_QP_REQUEST_ERROR;
	case IBV_EVENT_QP_ACCESS_ERR: return EV_QP_ACCESS_ERROR;
	case IBV_EVENT_COMM_EST: return EV_COMM_ESTABLISHED;
	case IBV_EVENT_SQ_DRAINED: return EV_SQ_DRAINED;
	case IBV_EVENT_PATH_MIG: return EV_PATH_MIGRATED;
	case IBV_EVENT_PATH_MIG_ERR: return EV_PATH_MIGRATION_ERROR;
	case IBV_EVENT_DEVICE_FATAL: return EV_DEVICE_FATAL;
	case IBV_EVENT_PORT_ACTIVE: return EV_PORT_ACTIVE;
	case IBV_EVENT_PORT_ERR: return EV_PORT_ERROR;
	case IBV_EVENT_LID_CHANGE: return EV_LID_CHANGE;
	case IBV_EVENT_PKEY_CHANGE: return EV_PKEY_CHANGE;
	case IBV_EVENT_SM_CHANGE: return EV_SM_CHANGE;
	case IBV_EVENT_SRQ_ERR: return EV_SRQ_ERROR;
	case IBV_EVENT_SRQ_LIMIT_REACHED: return EV_SRQ_LIMIT_REACHED;
	case IBV_EVENT_QP_LAST_WQE_REACHED: return EV_QP_LAST_WQE_REACHED;
	case IBV_EVENT_CLIENT_REREGISTER: return EV_CLIENT_REREGISTER;
	case IBV_EVENT_GID_CHANGE: return EV_GID_CHANGE;
	case IBV_EVENT_WQ_FATAL: return EV_WQ_FATAL;
	}
	return EV_ASYNC_UNKNOWN;
}

/* The object of p an async event is about: a QP, CQ or SRQ of ours
 * (NULL: one a session made on a shared context, or a port event). */
static struct object *async_object(struct profile *p,
				   const struct ibv_async_event *ev)
{
	enum obj_kind kind;

	switch (ev->event_type) {
	case IBV_EVENT_CQ_ERR:
		kind = OBJ_CQ;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		kind = OBJ_SRQ;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		kind = OBJ_QP;
		break;
	default:
		return NULL;
	}
	for (size_t i = profile_kind_first(p, kind); i < profile_n_objects(p);
	     i++) {
		struct object *o = profile_object_at(p, i);

		if (o->kind != kind)
			break;
		if ((kind == OBJ_CQ && o->u.cq.cq == ev->element.cq) ||
		    (kind == OBJ_SRQ && o->u.srq == ev->element.srq) ||
		    (kind == OBJ_QP && o->u.qp.qp == ev->element.qp))
			return o;
	}
	return NULL;
}

/* One async event of p's context, on the stream: the profile, the
 * device, and the port (with its state now) or the object it is about. */
static void publish_async(struct events *events, struct profile *p,
			  const struct ibv_async_event *ev, struct object *o)
{
	struct event e = {.kind = async_event_kind(ev->event_type),
			  .profile_name = profile_name(p),
			  .profile = p,
			  .object = o,
			  .u.async = {.ibdev = profile_ibdev(p), .state = -1}};
	struct ibv_port_attr pa;

	switch (ev->event_type) {
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		e.u.async.port = ev->element.port_num;
		/* As GET /v1/devices/{ibdev}/ports/{n} shows it. */
		if (!ibv_query_port(profile_ctx(p),
				    (uint8_t)ev->element.port_num, &pa))
			e.u.async.state = pa.state;
		break;
	default:
		break;
	}
	events_publish(events, &e);
}

/* The port's GID table changed (an address came or went): select the
 * profile's GID again, as at start. QPs already connected keep theirs;
 * what is set up from now on (attaches, endpoints, QPs brought up) uses
 * the new one. */
static void reselect_gid(struct events *events, struct profile *p)
{
	union ibv_gid gid;
	char before[GID_TEXT_SIZE], after[GID_TEXT_SIZE];
	int idx = -1;

	if (devmatch_gid(profile_ctx(p), devmatch_of(profile_device(p)), &idx,
			 &gid) < 0)
		idx = -1;
	if (idx == profile_gid_index(p) &&
	    (idx < 0 || !memcmp(&gid, profile_gid(p), sizeof(gid))))
		return;
	if (profile_gid_index(p) >= 0)
		gid_text(profile_gid(p), before);
	else
		strcpy(before, "none");
	if (idx >= 0)
		gid_text(&gid, after);
	else
		strcpy(after, "none");
	log_info("profile %s: GID table of %s port %d changed: GID index %d "
		 "(%s), was %d (%s)",
		 profile_name(p), profile_ibdev(p), profile_device(p)->port,
		 idx, after, profile_gid_index(p), before);
	profile_set_gid(p, idx, idx >= 0 ? &gid : NULL);
	events_publish(
	    events,
	    &(struct event){.kind = EV_GID_SELECTED,
			    .profile_name = profile_name(p),
			    .profile = p,
			    .u.gid = {profile_ibdev(p), profile_device(p)->port,
				      idx, after}});
	profile_touch(p);
}

bool asyncev_handle(struct events *events, struct profile *p,
		    const struct ibv_async_event *ev)
{
	struct object *o = async_object(p, ev);
	int r;

	publish_async(events, p, ev, o);
	if (ev->event_type == IBV_EVENT_GID_CHANGE &&
	    ev->element.port_num == profile_device(p)->port)
		reselect_gid(events, p);
	if ((ev->event_type == IBV_EVENT_QP_FATAL ||
	     ev->event_type == IBV_EVENT_QP_REQ_ERR ||
	     ev->event_type == IBV_EVENT_QP_ACCESS_ERR) && o)
		qphealth_failed(p, o, event_name(async_event_kind(ev->event_type)));
	if (ev->event_type == IBV_EVENT_SRQ_LIMIT_REACHED && o) {
		/* The device disarmed it: armed again for the next time. */
		r = object_srq_arm(o);
		if (r < 0)
			log_object(LOG_WARNING, r, profile_name(p), "srq",
				   object_name(o),
				   "profile %s: srq %s: cannot arm its limit "
				   "again, ignoring",
				   profile_name(p), object_name(o));
	}
	if (ev->event_type == IBV_EVENT_DEVICE_FATAL)
		return true;
	/* A QP or port may have changed state behind our back. */
	profile_touch(p);
	log_info("profile %s: async event on %s: %s%s%s", profile_name(p),
		 profile_ibdev(p), ibv_event_type_str(ev->event_type),
		 o ? " on " : "", o ? object_name(o) : "");
	return false;
}
