// SPDX-License-Identifier: MIT
/*
 * The manager and the devices: a profile started, stopped and watched
 * on its device, the device's async events published (a port's state,
 * a QP's or a CQ's error, the GID table changing), devices coming and
 * going.
 */
#include <stdio.h>

#include "devinfo.h"
#include "devmatch.h"
#include "devwatch.h"
#include "events.h"
#include "gid.h"
#include "log.h"
#include "manager.h"
#include "manager_internal.h"
#include "objects.h"
#include "orphans.h"
#include "qphealth.h"

static void on_async_event(void *ud, const struct ibv_async_event *ev);

void manager_watch_profile(struct manager *m, struct profile *p)
{
	int r;

	if (!p->ctx || p->async)
		return;
	r = asyncwatch_new(m->event, p->ctx, on_async_event, p, &p->async);
	if (r < 0)
		log_warn(r, "profile %s: cannot watch async events of %s",
			 p->conf->name, p->ibdev);
}

/* Stop p; lost: its device went (memory stays for its return). */
void manager_stop_profile(struct manager *m, struct profile *p,
			 const char *reason, bool lost)
{
	bool was_busy = profile_busy(p);
	char ibdev[sizeof(p->ibdev)];

	snprintf(ibdev, sizeof(ibdev), "%s", p->ibdev);
	p->async = asyncwatch_free(p->async);
	if (lost)
		profile_lose_device(p, reason);
	else
		profile_stop(p, reason);
	if (lost) {
		/* After our own context is closed: the device can go as soon
		 * as the sessions' contexts are closed too. */
		struct manager_event ev = { MANAGER_DEVICE_LOST, p, ibdev,
					    reason };

		manager_announce_event(m, &ev);
	}
	manager_announce(m, MANAGER_PROFILE_CHANGED, p);
	/* A creation it cut short may have been the last one under way. */
	if (was_busy && !m->reloading && !manager_busy(m))
		manager_announce(m, MANAGER_SETTLED, NULL);
}

/* Start p; its creation goes on on the workers, logged when it settles. */
void manager_start_profile(struct manager *m, struct profile *p)
{
	profile_start(p);
	manager_watch_profile(m, p);
	if (!profile_busy(p))
		manager_log_profile(p);
	manager_announce(m, MANAGER_PROFILE_CHANGED, p);
}

void manager_log_profile(const struct profile *p)
{
	for (size_t k = 0; k < p->n_objects; k++)
		if (p->objects[k].state == OBJ_FAILED)
			log_object(LOG_WARNING, 0, p->conf->name,
				   obj_kind_name(p->objects[k].kind),
				   object_name(&p->objects[k]),
				   "profile %s: %s %s failed: %s",
				   p->conf->name,
				   obj_kind_name(p->objects[k].kind),
				   object_name(&p->objects[k]),
				   p->objects[k].reason);
	log_object(LOG_INFO, 0, p->conf->name, "profile", NULL,
		 "profile %s: %s%s%s", p->conf->name,
		 profile_state_name(p->state), p->reason ? ": " : "",
		 p->reason ? p->reason : "");
}

/* The verbs' async event types, as the stream names them. */
static const char *async_event_name(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_CQ_ERR: return "cq_error";
	case IBV_EVENT_QP_FATAL: return "qp_fatal";
	case IBV_EVENT_QP_REQ_ERR: return "qp_request_error";
	case IBV_EVENT_QP_ACCESS_ERR: return "qp_access_error";
	case IBV_EVENT_COMM_EST: return "comm_established";
	case IBV_EVENT_SQ_DRAINED: return "sq_drained";
	case IBV_EVENT_PATH_MIG: return "path_migrated";
	case IBV_EVENT_PATH_MIG_ERR: return "path_migration_error";
	case IBV_EVENT_DEVICE_FATAL: return "device_fatal";
	case IBV_EVENT_PORT_ACTIVE: return "port_active";
	case IBV_EVENT_PORT_ERR: return "port_error";
	case IBV_EVENT_LID_CHANGE: return "lid_change";
	case IBV_EVENT_PKEY_CHANGE: return "pkey_change";
	case IBV_EVENT_SM_CHANGE: return "sm_change";
	case IBV_EVENT_SRQ_ERR: return "srq_error";
	case IBV_EVENT_SRQ_LIMIT_REACHED: return "srq_limit_reached";
	case IBV_EVENT_QP_LAST_WQE_REACHED: return "qp_last_wqe_reached";
	case IBV_EVENT_CLIENT_REREGISTER: return "client_reregister";
	case IBV_EVENT_GID_CHANGE: return "gid_change";
	case IBV_EVENT_WQ_FATAL: return "wq_fatal";
	}
	return "unknown";
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
	for (size_t i = p->kind_start[kind]; i < p->n_objects; i++) {
		struct object *o = &p->objects[i];

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
static void publish_async(struct manager *m, struct profile *p,
			  const struct ibv_async_event *ev, struct object *o)
{
	json_t *j = json_pack("{s:s, s:s}", "profile", p->conf->name, "device",
			      p->ibdev);
	struct ibv_port_attr pa;

	if (!j)
		return;
	switch (ev->event_type) {
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		json_object_set_new(j, "port", json_integer(ev->element.port_num));
		/* As GET /v1/devices/{ibdev}/ports/{n} shows it. */
		if (!ibv_query_port(p->ctx, (uint8_t)ev->element.port_num,
				    &pa)) {
			const char *name = devinfo_port_state_name(pa.state);

			json_object_set_new(j, "state", json_integer(pa.state));
			json_object_set_new(j, "state_name",
					    json_string(name ? name
							     : "unknown"));
		}
		break;
	default:
		break;
	}
	if (o) {
		json_object_set_new(j, "kind", json_string(obj_kind_name(o->kind)));
		json_object_set_new(j, "name", json_string(object_name(o)));
		if (o->kind == OBJ_QP)
			json_object_set_new(j, "qp_num",
					    json_integer(o->u.qp.qp->qp_num));
	}
	events_publish(m->events, async_event_name(ev->event_type), j);
}

/* The port's GID table changed (an address came or went): select the
 * profile's GID again, as at start. QPs already connected keep theirs;
 * what is set up from now on (attaches, endpoints, QPs brought up) uses
 * the new one. */
static void reselect_gid(struct manager *m, struct profile *p)
{
	union ibv_gid gid;
	char before[GID_TEXT_SIZE], after[GID_TEXT_SIZE];
	int idx = -1;
	json_t *j;

	if (devmatch_gid(p->ctx, p->dev, &idx, &gid) < 0)
		idx = -1;
	if (idx == p->gid_index &&
	    (idx < 0 || !memcmp(&gid, &p->gid, sizeof(gid))))
		return;
	if (p->gid_index >= 0)
		gid_text(&p->gid, before);
	else
		strcpy(before, "none");
	if (idx >= 0)
		gid_text(&gid, after);
	else
		strcpy(after, "none");
	log_info("profile %s: GID table of %s port %d changed: GID index %d "
		 "(%s), was %d (%s)",
		 p->conf->name, p->ibdev, p->dev->port, idx, after,
		 p->gid_index, before);
	p->gid_index = idx;
	if (idx >= 0)
		p->gid = gid;
	j = json_pack("{s:s, s:s, s:i, s:i, s:s}", "profile", p->conf->name,
		      "device", p->ibdev, "port", p->dev->port, "gid_index",
		      idx, "gid", after);
	if (j)
		events_publish(m->events, "gid_selected", j);
	profile_touch(p);
}

static void on_async_event(void *ud, const struct ibv_async_event *ev)
{
	struct profile *p = ud;
	struct manager *m = p->changed_ud;
	struct object *o = async_object(p, ev);
	char reason[128];
	int r;

	publish_async(m, p, ev, o);
	if (ev->event_type == IBV_EVENT_GID_CHANGE &&
	    ev->element.port_num == p->dev->port)
		reselect_gid(m, p);
	if ((ev->event_type == IBV_EVENT_QP_FATAL ||
	     ev->event_type == IBV_EVENT_QP_REQ_ERR ||
	     ev->event_type == IBV_EVENT_QP_ACCESS_ERR) && o)
		qphealth_failed(p, o, async_event_name(ev->event_type));
	if (ev->event_type == IBV_EVENT_SRQ_LIMIT_REACHED && o) {
		/* The device disarmed it: armed again for the next time. */
		r = object_srq_arm(o);
		if (r < 0)
			log_object(LOG_WARNING, r, p->conf->name, "srq",
				   object_name(o),
				   "profile %s: srq %s: cannot arm its limit "
				   "again, ignoring",
				   p->conf->name, object_name(o));
	}
	if (ev->event_type != IBV_EVENT_DEVICE_FATAL) {
		/* A QP or port may have changed state behind our back. */
		profile_touch(p);
		log_info("profile %s: async event on %s: %s%s%s", p->conf->name,
			 p->ibdev, ibv_event_type_str(ev->event_type),
			 o ? " on " : "", o ? object_name(o) : "");
		return;
	}
	snprintf(reason, sizeof(reason), "device %s failed or was removed",
		 p->ibdev);
	log_ctx(LOG_WARNING, 0,
		&(struct log_ctx){ .profile = p->conf->name,
				   .kind = "profile",
				   .message_id = MSGID_DEVICE_GONE },
		"profile %s: %s; waiting for it to come back", p->conf->name,
		reason);
	manager_stop_profile(m, p, reason, true);
}

void manager_on_device(void *ud, const char *ibdev, enum devwatch_action a)
{
	struct manager *m = ud;

	log_ctx(LOG_INFO, 0,
		&(struct log_ctx){ .message_id = a == DEVWATCH_ADD
							 ? NULL
							 : MSGID_DEVICE_GONE },
		"device %s %s", ibdev,
		a == DEVWATCH_ADD ? "appeared" : "went away");
	events_publishf(m->events,
			a == DEVWATCH_ADD ? "device_added" : "device_removed",
			"{s:s}", "device", ibdev);
	/* What removed profiles still drain on it goes with it. */
	for (size_t i = m->n_retired; a == DEVWATCH_REMOVE && i-- > 0;)
		if (streq(m->retired[i]->ibdev, ibdev)) {
			profile_free(m->retired[i]);
			m->retired[i] = m->retired[--m->n_retired];
		}
	for (size_t i = 0; i < m->n_profiles; i++) {
		struct profile *p = m->profiles[i];
		char reason[128];

		if (a == DEVWATCH_REMOVE && p->ctx && streq(p->ibdev, ibdev)) {
			snprintf(reason, sizeof(reason),
				 "device %s was removed", ibdev);
			manager_stop_profile(m, p, reason, true);
			manager_log_profile(p);
		} else if (a == DEVWATCH_ADD && !p->ctx &&
			   devmatch_matches(p->dev, ibdev)) {
			manager_start_profile(m, p);
		}
	}
}
