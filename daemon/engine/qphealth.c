// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "log.h"
#include "objects.h"
#include "qphealth.h"
#include "util.h"

/* RDMA netlink gives the QP state as the kernel's enum ib_qp_state,
 * which has the numbers of verbs' enum ibv_qp_state. */
static bool in_error(enum ibv_qp_state s)
{
	return s == IBV_QPS_ERR || s == IBV_QPS_SQE;
}

/* The device's word: is o's QP in error now? */
static bool qp_in_error(const struct object *o)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	return !ibv_query_qp(o->u.qp.qp, &attr, IBV_QP_STATE, &init) &&
	       in_error(attr.qp_state);
}

static void publish(struct profile *p, const struct object *o,
		    enum event_kind kind, const char *reason)
{
	events_publish(profile_events(p),
		       &(struct event){.kind = kind,
				       .profile_name = profile_name(p),
				       .profile = p,
				       .object = o,
				       .u.reason = reason});
}

/* Back through RESET to the declared state and path (object_connect()
 * walks ERR -> RESET -> INIT -> RTR -> RTS). o->reason says why it is in
 * error; a failure adds the step that failed (the first time: a later
 * scan tries again quietly). */
static void recover(struct profile *p, struct object *o, bool again)
{
	const struct conf_qp *c = o->conf;
	char *why = TAKE_PTR(o->reason);
	int r;

	r = object_connect(p, o);
	if (r < 0) {
		/* object_connect() said which step failed, in o->reason. */
		_cleanup_free_ char *step = TAKE_PTR(o->reason);

		if (again) {
			o->reason = why;
			return;
		}
		if (asprintf(&o->reason, "%s; recovery failed: %s", why,
			     step ? step : strerror(-r)) < 0)
			o->reason = why;
		else
			free(why);
		log_object(
		    LOG_WARNING, r, profile_name(p), "qp", object_name(o),
		    "profile %s: qp %s: cannot bring it back to %s: "
		    "%s",
		    profile_name(p), object_name(o),
		    qp_target_state_name(c->state), o->reason ? o->reason : "");
		publish(p, o, EV_QP_RECOVER_FAILED, o->reason);
		return;
	}
	free(why);
	o->err = 0;
	o->u.qp.recoveries++;
	log_info("profile %s: qp %s (qpn %u) recovered: back in %s "
		 "(recovery %u)",
		 profile_name(p), object_name(o), o->u.qp.qp->qp_num,
		 qp_target_state_name(c->state), o->u.qp.recoveries);
	publish(p, o, EV_QP_RECOVERED, NULL);
	profile_touch(p);
}

void qphealth_failed(struct profile *p, struct object *o, const char *why)
{
	const struct conf_qp *c = o->conf;

	if (o->kind != OBJ_QP || o->state != OBJ_READY || !o->u.qp.qp ||
	    !c)
		return;
	/* Known already, or not (any more) in error. */
	if (o->reason || !qp_in_error(o))
		return;
	o->reason = strdup(why);
	o->err = EIO;
	log_object(LOG_WARNING, 0, profile_name(p), "qp", object_name(o),
		   "profile %s: qp %s (qpn %u) is in the error state: %s%s",
		   profile_name(p), object_name(o), o->u.qp.qp->qp_num, why,
		   c->recover == QPR_RESET ? "; recovering" : "");
	publish(p, o, EV_QP_ERROR, why);
	profile_touch(p);
	if (c->recover == QPR_RESET)
		recover(p, o, false);
}

void qphealth_clear(struct profile *p, struct object *o)
{
	if (o->kind != OBJ_QP || o->state != OBJ_READY || !o->reason)
		return;
	free(o->reason);
	o->reason = NULL;
	o->err = 0;
	profile_touch(p);
}

struct qpn_state {
	uint32_t qpn;
	uint8_t state;
};

static int cmp_qpn(const void *a, const void *b)
{
	uint32_t x = ((const struct qpn_state *)a)->qpn;
	uint32_t y = ((const struct qpn_state *)b)->qpn;

	return x < y ? -1 : x > y;
}

void qphealth_scan(struct profile *p, const struct rdmanl_res *recs,
		   size_t n)
{
	_cleanup_free_ struct qpn_state *err = NULL;
	size_t n_err = 0;

	if (!profile_ctx(p) || !profile_conf(p))
		return;
	/* QPs known in error: moved by hand since (the device says they
	 * are not any more), or to be recovered again. */
	for (size_t i = profile_kind_first(p, OBJ_QP); i < profile_n_objects(p);
	     i++) {
		struct object *o = profile_object_at(p, i);
		const struct conf_qp *c = o->conf;

		if (o->kind != OBJ_QP)
			break;
		if (o->state != OBJ_READY || !o->reason || !o->u.qp.qp || !c)
			continue;
		if (!qp_in_error(o))
			qphealth_clear(p, o);
		else if (c->recover == QPR_RESET)
			recover(p, o, true);
	}
	for (size_t i = 0; i < n; i++)
		n_err += recs[i].kind == RDMANL_QP &&
			 recs[i].dev_index == profile_dev_index(p) &&
			 (recs[i].has & RDMANL_HAS_STATE) &&
			 in_error((enum ibv_qp_state)recs[i].state);
	if (!n_err)
		return;
	err = calloc(n_err, sizeof(*err));
	if (!err)
		return;
	n_err = 0;
	for (size_t i = 0; i < n; i++)
		if (recs[i].kind == RDMANL_QP &&
		    recs[i].dev_index == profile_dev_index(p) &&
		    (recs[i].has & RDMANL_HAS_STATE) &&
		    in_error((enum ibv_qp_state)recs[i].state))
			err[n_err++] = (struct qpn_state){ recs[i].id,
							   recs[i].state };
	qsort(err, n_err, sizeof(*err), cmp_qpn);
	for (size_t i = profile_kind_first(p, OBJ_QP); i < profile_n_objects(p);
	     i++) {
		struct object *o = profile_object_at(p, i);
		struct qpn_state key, *hit;
		char why[96];

		if (o->kind != OBJ_QP)
			break;
		if (o->state != OBJ_READY || !o->u.qp.qp || o->reason)
			continue;
		key.qpn = o->u.qp.qp->qp_num;
		hit = bsearch(&key, err, n_err, sizeof(*err), cmp_qpn);
		if (!hit)
			continue;
		snprintf(why, sizeof(why),
			 "the kernel lists it in state %s (no async event "
			 "came: a work request on it failed)",
			 hit->state == IBV_QPS_SQE ? "SQE" : "ERR");
		qphealth_failed(p, o, why);
	}
}
