// SPDX-License-Identifier: MIT
/*
 * Queues and what addresses them: completion queues, shared receive
 * queues, queue pairs and address handles, each kind's table (kinds.h).
 * A QP is connected in a second pass, once every object exists.
 */
#include <stdio.h>

#include "gid.h"
#include "kinds.h"
#include "objects.h"
#include "qpstate.h"

/* ---- cq ---- */

static int cq_create(struct profile *p, struct object *o)
{
	const struct conf_cq *c = o->conf;
	int err;

	if (c->channel) {
		o->u.cq.channel = ibv_create_comp_channel(profile_ctx(p));
		if (!o->u.cq.channel)
			return object_fail(o, errno,
					   "ibv_create_comp_channel: %s",
					   strerror(errno));
	}
	o->u.cq.cq = ibv_create_cq(profile_ctx(p), c->cqe, NULL,
				   o->u.cq.channel, c->comp_vector);
	if (o->u.cq.cq)
		return 0;
	err = errno;
	if (o->u.cq.channel)
		ibv_destroy_comp_channel(o->u.cq.channel);
	o->u.cq.channel = NULL;
	return object_fail(o, err, "ibv_create_cq with %d entries: %s",
			   c->cqe, strerror(err));
}

static void cq_destroy(struct object *o)
{
	if (o->u.cq.cq)
		ibv_destroy_cq(o->u.cq.cq);
	if (o->u.cq.channel)
		ibv_destroy_comp_channel(o->u.cq.channel);
}

static void cq_json(const struct object *o, json_t *j)
{
	SET_INT(j, "handle", o->u.cq.cq->handle);
	SET_INT(j, "cqe", o->u.cq.cq->cqe);
	json_object_set_new(j, "channel", json_boolean(o->u.cq.channel != NULL));
}

/* Its channel counts the CQ in user space: it stays too. */
static void cq_lose(struct object *o)
{
	object_keep_remains(o->u.cq.cq);
	object_keep_remains(o->u.cq.channel);
}

static bool cq_handle(const struct object *o, uint32_t *h)
{
	return o->u.cq.cq && (*h = o->u.cq.cq->handle, true);
}

const struct object_kind kind_cq = {
	.kind = OBJ_CQ,
	.parents = 0,
	.uverbs = UH_CQ,
	.netlink = RDMANL_CQ,
	.on_loop = false,
	.kept_by_restart = false,
	.reset = kind_no_reset,
	.create = cq_create,
	.connect = kind_no_connect,
	.start = kind_no_start,
	.destroy = cq_destroy,
	.take_over = kind_no_take_over,
	.hand_over = kind_no_hand_over,
	.drain = kind_no_drain,
	.held_handles = kind_no_held_handles,
	.lose = cq_lose,
	.handle = cq_handle,
	.json = cq_json,
	.json_unready = kind_no_json,
	.identity = kind_no_json,
	.attach = kind_not_attached,
};

/* ---- srq ---- */

static int srq_create(struct profile *p, struct object *o)
{
	const struct conf_srq *c = o->conf;
	struct object *pd = object_dep(p, o, OBJ_PD, c->pd);
	struct ibv_srq_init_attr_ex attr = {
		.attr = { .max_wr = c->max_wr, .max_sge = c->max_sge },
	};
	int r;

	if (!pd)
		return -o->err;
	if (c->type == SRQK_BASIC) {
		o->u.srq = ibv_create_srq(
			pd->u.pd, &(struct ibv_srq_init_attr){ .attr = attr.attr });
	} else {
		struct object *xrcd = object_dep(p, o, OBJ_XRCD, c->xrcd);
		struct object *cq = xrcd ? object_dep(p, o, OBJ_CQ, c->cq) : NULL;

		if (!cq)
			return -o->err;
		attr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
				 IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		attr.srq_type = IBV_SRQT_XRC;
		attr.pd = pd->u.pd;
		attr.xrcd = xrcd->u.xrcd.xrcd;
		attr.cq = cq->u.cq.cq;
		o->u.srq = ibv_create_srq_ex(profile_ctx(p), &attr);
	}
	if (!o->u.srq)
		return object_fail(o, errno, "create %s SRQ: %s",
				   srq_kind_name(c->type), strerror(errno));
	/* ibv_create_srq() ignores srq_limit: only a modify arms it. */
	r = object_srq_arm(o);
	if (r < 0) {
		ibv_destroy_srq(o->u.srq);
		o->u.srq = NULL;
		return object_fail(o, r, "arm the limit (srq_limit %u) of the SRQ: %s",
				   c->srq_limit, strerror(-r));
	}
	return 0;
}

int object_srq_arm(const struct object *o)
{
	const struct conf_srq *c = o->conf;
	struct ibv_srq_attr attr = { .srq_limit = c->srq_limit };

	if (o->kind != OBJ_SRQ || !o->u.srq || !c->srq_limit)
		return 0;
	errno = ibv_modify_srq(o->u.srq, &attr, IBV_SRQ_LIMIT);
	return errno ? -abs(errno) : 0;
}

static void srq_destroy(struct object *o)
{
	if (o->u.srq)
		ibv_destroy_srq(o->u.srq);
}

static void srq_json(const struct object *o, json_t *j)
{
	const struct conf_srq *c = o->conf;
	struct ibv_srq_attr attr;
	uint32_t num;

	SET_INT(j, "handle", o->u.srq->handle);
	SET_STR(j, "type", srq_kind_name(c->type));
	SET_STR(j, "pd", c->pd);
	if (!ibv_query_srq(o->u.srq, &attr)) {
		SET_INT(j, "max_wr", attr.max_wr);
		SET_INT(j, "max_sge", attr.max_sge);
		SET_INT(j, "srq_limit", attr.srq_limit);
	}
	if (c->type == SRQK_XRC && !ibv_get_srq_num(o->u.srq, &num))
		SET_INT(j, "srq_num", num);
}

static void srq_lose(struct object *o)
{
	object_keep_remains(o->u.srq);
}

static bool srq_handle(const struct object *o, uint32_t *h)
{
	return o->u.srq && (*h = o->u.srq->handle, true);
}

/* A QP's and an SRQ's part: their numbers. */
static enum attach_part by_number(struct profile *p _unused_,
				  const struct object *o _unused_,
				  bool shared _unused_)
{
	return PART_NUMBER;
}

const struct object_kind kind_srq = {
	.kind = OBJ_SRQ,
	.parents = KIND_BIT(OBJ_PD) | KIND_BIT(OBJ_XRCD) | KIND_BIT(OBJ_CQ),
	.uverbs = UH_SRQ,
	.netlink = RDMANL_SRQ,
	.on_loop = false,
	.kept_by_restart = false,
	.reset = kind_no_reset,
	.create = srq_create,
	.connect = kind_no_connect,
	.start = kind_no_start,
	.destroy = srq_destroy,
	.take_over = kind_no_take_over,
	.hand_over = kind_no_hand_over,
	.drain = kind_no_drain,
	.held_handles = kind_no_held_handles,
	.lose = srq_lose,
	.handle = srq_handle,
	.json = srq_json,
	.json_unready = kind_no_json,
	.identity = kind_no_json,
	.attach = by_number,
};

/* ---- qp ---- */

static const enum ibv_qp_type qp_types[] = {
	[QPK_RC] = IBV_QPT_RC,
	[QPK_UC] = IBV_QPT_UC,
	[QPK_UD] = IBV_QPT_UD,
	[QPK_RAW_PACKET] = IBV_QPT_RAW_PACKET,
	[QPK_XRC_SEND] = IBV_QPT_XRC_SEND,
	[QPK_XRC_RECV] = IBV_QPT_XRC_RECV,
};

static const enum ibv_qp_state qp_states[] = {
	[QPS_TARGET_RESET] = IBV_QPS_RESET,
	[QPS_TARGET_INIT] = IBV_QPS_INIT,
	[QPS_TARGET_RTR] = IBV_QPS_RTR,
	[QPS_TARGET_RTS] = IBV_QPS_RTS,
};

static int qp_create(struct profile *p, struct object *o)
{
	const struct conf_qp *c = o->conf;
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = qp_types[c->type],
		.sq_sig_all = c->sq_sig_all,
		.cap = {
			.max_send_wr = c->cap.max_send_wr,
			.max_recv_wr = c->cap.max_recv_wr,
			.max_send_sge = c->cap.max_send_sge,
			.max_recv_sge = c->cap.max_recv_sge,
			.max_inline_data = c->cap.max_inline_data,
		},
	};

	if (c->type == QPK_XRC_RECV) {
		struct object *xrcd = object_dep(p, o, OBJ_XRCD, c->xrcd);

		if (!xrcd)
			return -o->err;
		ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
		ia.xrcd = xrcd->u.xrcd.xrcd;
		ia.cap = (struct ibv_qp_cap){ 0 };
	} else {
		struct object *pd = object_dep(p, o, OBJ_PD, c->pd);
		struct object *scq = pd ? object_dep(p, o, OBJ_CQ, c->send_cq) : NULL;
		struct object *rcq = NULL, *srq = NULL;

		if (!scq)
			return -o->err;
		if (c->recv_cq && !(rcq = object_dep(p, o, OBJ_CQ, c->recv_cq)))
			return -o->err;
		if (c->srq && !(srq = object_dep(p, o, OBJ_SRQ, c->srq)))
			return -o->err;
		ia.comp_mask = IBV_QP_INIT_ATTR_PD;
		ia.pd = pd->u.pd;
		ia.send_cq = scq->u.cq.cq;
		ia.recv_cq = rcq ? rcq->u.cq.cq : NULL;
		ia.srq = srq ? srq->u.srq : NULL;
		if (c->type == QPK_XRC_SEND)
			ia.cap.max_recv_wr = ia.cap.max_recv_sge = 0;
	}
	o->u.qp.qp = ibv_create_qp_ex(profile_ctx(p), &ia);
	if (!o->u.qp.qp)
		return object_fail(o, errno, "ibv_create_qp (%s): %s",
				   qp_kind_name(c->type), strerror(errno));
	return 0;
}

/* The alternate path: the primary one, with what alt_path changes. */
static void qp_alt_path_of(const struct conf_path *ap, struct qp_path *path)
{
	struct qp_alt_path *alt = &path->alt;

	qp_alt_from_primary(path, alt);
	path->has_alt = true;
#define SET(k)                                                                 \
	do {                                                                   \
		if (ap->k >= 0)                                                \
			alt->k = (__typeof__(alt->k))ap->k;                    \
	} while (0)
	SET(port_num);
	SET(pkey_index);
	SET(timeout);
	SET(dlid);
	SET(sl);
	SET(src_path_bits);
	SET(static_rate);
	SET(sgid_index);
	SET(hop_limit);
	SET(traffic_class);
	SET(flow_label);
#undef SET
	if (ap->dgid) {
		config_parse_gid(ap->dgid, alt->dgid.raw);
		alt->has_grh = true;
	}
}

/* The remote end: the peer on this device, then the path block's keys. */
static int qp_path_of(struct profile *p, struct object *o,
		      struct qp_path *path)
{
	const struct conf_qp *c = o->conf;
	static const struct conf_path none = {
		.dgid = NULL,	     .port_num = -1,	   .pkey_index = -1,
		.qkey = -1,	     .dqpn = -1,	   .rq_psn = -1,
		.sq_psn = -1,	     .mtu = -1,		   .max_dest_rd_atomic = -1,
		.min_rnr_timer = -1, .dlid = -1,	   .sl = -1,
		.src_path_bits = -1, .static_rate = -1,	   .sgid_index = -1,
		.hop_limit = -1,     .traffic_class = -1,  .flow_label = -1,
		.timeout = -1,	     .retry_cnt = -1,	   .rnr_retry = -1,
		.max_rd_atomic = -1,
	};
	const struct conf_path *cp = c->path ? c->path : &none;
	struct ibv_port_attr pattr;

	qp_path_init(path);
	path->port_num = (uint8_t)profile_device(p)->port;
	path->pkey_index = c->pkey_index;
	if (c->pkey >= 0) {
		int idx = ibv_get_pkey_index(profile_ctx(p), path->port_num,
					     htobe16((uint16_t)c->pkey));

		if (idx < 0)
			return object_fail(o, ENOENT,
					   "pkey 0x%04x is not in the P_Key "
					   "table of %s port %u",
					   c->pkey, profile_ibdev(p),
					   path->port_num);
		path->pkey_index = (uint16_t)idx;
	}
	path->qkey = c->qkey;
	path->access = c->access;
	if (profile_gid_index(p) >= 0) {
		path->sgid_index = (uint8_t)profile_gid_index(p);
		path->has_grh = true;
		path->dgid = *profile_gid(p);
	}
	if (c->peer_endpoint) {
		/* A QP elsewhere: its endpoint document, checked at load. */
		json_t *ep = json_loads(c->peer_endpoint, 0, NULL);
		char err[200];
		int r;

		r = ibv_query_port(profile_ctx(p), path->port_num, &pattr);
		r = r ? -EIO
		      : qp_path_from_endpoint(ep, qp_kind_name(c->type),
					      pattr.active_mtu, path, err,
					      sizeof(err));
		json_decref(ep);
		if (r)
			return object_fail(o, EINVAL, "peer: endpoint: %s",
					   r == -EIO ? "cannot query the port"
						     : err);
	} else if (c->peer) {
		/* Built in the first pass; it may be connecting itself. */
		struct object *peer = profile_find(p, OBJ_QP, c->peer);

		if (!peer || !peer->u.qp.qp)
			return object_fail(o, EAGAIN,
					   "peer qp '%s' could not be created",
					   c->peer);
		path->dqpn = peer->u.qp.qp->qp_num;
		/* Same device: on IB, our own LID. */
		if (!ibv_query_port(profile_ctx(p), path->port_num, &pattr) &&
		    pattr.link_layer == IBV_LINK_LAYER_INFINIBAND)
			path->dlid = pattr.lid;
	}
#define SET(k)                                                                 \
	do {                                                                   \
		if (cp->k >= 0)                                                \
			path->k = (__typeof__(path->k))cp->k;                  \
	} while (0)
	SET(port_num);
	SET(pkey_index);
	SET(qkey);
	SET(dqpn);
	SET(rq_psn);
	SET(sq_psn);
	SET(max_dest_rd_atomic);
	SET(min_rnr_timer);
	SET(dlid);
	SET(sl);
	SET(src_path_bits);
	SET(static_rate);
	SET(sgid_index);
	SET(hop_limit);
	SET(traffic_class);
	SET(flow_label);
	SET(timeout);
	SET(retry_cnt);
	SET(rnr_retry);
	SET(max_rd_atomic);
#undef SET
	if (cp->mtu >= 0)
		path->mtu = cp->mtu == 256    ? IBV_MTU_256
			    : cp->mtu == 512  ? IBV_MTU_512
			    : cp->mtu == 1024 ? IBV_MTU_1024
			    : cp->mtu == 2048 ? IBV_MTU_2048
					      : IBV_MTU_4096;
	if (cp->dgid) {
		config_parse_gid(cp->dgid, path->dgid.raw);
		path->has_grh = true;
	}
	if (c->alt_path) {
		if (ibv_query_port(profile_ctx(p), path->port_num, &pattr) ||
		    pattr.link_layer != IBV_LINK_LAYER_INFINIBAND)
			return object_fail(o, EOPNOTSUPP, "%s (%s port %u)",
					   QP_ALT_PATH_IB_ONLY,
					   profile_ibdev(p), path->port_num);
		qp_alt_path_of(c->alt_path, path);
	}
	return 0;
}

static int qp_connect(struct profile *p, struct object *o)
{
	const struct conf_qp *c = o->conf;
	const char *step = NULL;
	struct qp_path path;
	int r;

	if (!o->u.qp.qp || c->state == QPS_TARGET_RESET)
		return 0;
	r = qp_path_of(p, o, &path);
	if (r < 0)
		return r;
	r = qp_modify(o->u.qp.qp, qp_states[c->state], &path, &step);
	if (r < 0)
		return object_fail(o, r, "modify_qp %s: %s",
				   step ? step : "", strerror(-r));
	return 0;
}

bool object_qp_in_place(const struct conf_qp *next,
			const struct conf_qp *was, int *mask)
{
	static const struct {
		size_t offset;
		int attr;
	} in_rts[] = {
		{ offsetof(struct conf_path, min_rnr_timer), IBV_QP_MIN_RNR_TIMER },
		{ offsetof(struct conf_path, timeout), IBV_QP_TIMEOUT },
		{ offsetof(struct conf_path, retry_cnt), IBV_QP_RETRY_CNT },
		{ offsetof(struct conf_path, rnr_retry), IBV_QP_RNR_RETRY },
		{ offsetof(struct conf_path, max_rd_atomic),
		  IBV_QP_MAX_QP_RD_ATOMIC },
	};
	struct conf_qp same = *next;
	struct conf_path path;

	*mask = 0;
	if (next->state != QPS_TARGET_RTS || was->state != QPS_TARGET_RTS ||
	    !next->path != !was->path)
		return false;
	/* next with was's values of what may change: then equal? */
	same.access = was->access;
	same.recover = was->recover;
	if (next->path) {
		path = *next->path;
		for (size_t i = 0; i < ARRAY_SIZE(in_rts); i++) {
			int64_t *n = (int64_t *)((char *)&path + in_rts[i].offset);
			const int64_t *w =
				(const int64_t *)((const char *)was->path +
						  in_rts[i].offset);

			if (*n != *w)
				*mask |= in_rts[i].attr;
			*n = *w;
		}
		same.path = &path;
	}
	if (next->access != was->access)
		*mask |= IBV_QP_ACCESS_FLAGS;
	return conf_obj_equal(OBJ_QP, &same, was);
}

int object_qp_change(struct profile *p, struct object *o, int mask)
{
	const char *step = NULL;
	struct qp_path path;
	int r;

	if (!mask)
		return 0;
	r = qp_path_of(p, o, &path);
	if (r < 0)
		return r;
	r = qp_modify_rts(o->u.qp.qp, &path, mask, &step);
	if (r < 0)
		return object_fail(o, r, "modify_qp %s: %s", step ? step : "",
				   strerror(-r));
	return 0;
}

static void qp_destroy(struct object *o)
{
	if (o->u.qp.qp)
		ibv_destroy_qp(o->u.qp.qp);
}

static const char *qp_state_str(enum ibv_qp_state s)
{
	static const char *const n[] = {
		[IBV_QPS_RESET] = "reset", [IBV_QPS_INIT] = "init",
		[IBV_QPS_RTR] = "rtr",	   [IBV_QPS_RTS] = "rts",
		[IBV_QPS_SQD] = "sqd",	   [IBV_QPS_SQE] = "sqe",
		[IBV_QPS_ERR] = "error",
	};

	return (unsigned int)s < ARRAY_SIZE(n) && n[s] ? n[s] : "unknown";
}

/* A connected QP in RTS: its path migration state and alternate path
 * (asked apart: not every device answers for them). */
static void alt_json(struct ibv_qp *qp, json_t *j)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr attr;
	char gid[GID_TEXT_SIZE];

	if (ibv_query_qp(qp, &attr, IBV_QP_PATH_MIG_STATE | IBV_QP_ALT_PATH,
			 &ia))
		return;
	SET_STR(j, "path_mig_state", qp_mig_state_name(attr.path_mig_state));
	if (attr.path_mig_state == IBV_MIG_MIGRATED || !attr.alt_port_num)
		return;
	json_object_set_new(
		j, "alt_path",
		json_pack("{s:i, s:i, s:i, s:i, s:i}", "port_num",
			  attr.alt_port_num, "pkey_index", attr.alt_pkey_index,
			  "timeout", attr.alt_timeout, "dlid",
			  attr.alt_ah_attr.dlid, "sl", attr.alt_ah_attr.sl));
	if (attr.alt_ah_attr.is_global)
		json_object_set_new(
			json_object_get(j, "alt_path"), "dgid",
			json_string(gid_text(&attr.alt_ah_attr.grh.dgid, gid)));
}

static void qp_json(const struct object *o, json_t *j)
{
	const struct conf_qp *c = o->conf;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr attr, pk;
	char gid[GID_TEXT_SIZE];

	SET_INT(j, "handle", o->u.qp.qp->handle);
	SET_STR(j, "type", qp_kind_name(c->type));
	SET_INT(j, "qp_num", o->u.qp.qp->qp_num);
	SET_STR(j, "pd", c->pd);
	SET_STR(j, "send_cq", c->send_cq);
	SET_STR(j, "recv_cq", c->recv_cq);
	SET_STR(j, "srq", c->srq);
	SET_STR(j, "xrcd", c->xrcd);
	SET_STR(j, "peer", c->peer);
	/*
	 * The declaration, in the configuration's words: "state" at the top
	 * is the object's (ready, failed, ...) as for every kind, so the
	 * declared QP state cannot sit beside it under its own name; it is
	 * config.state, with the rest of what the file says of this QP.
	 */
	json_object_set_new(j, "config", config_object_json(OBJ_QP, c));
	/* In error since the last scan or async event (qphealth.h). */
	if (o->state == OBJ_READY)
		SET_STR(j, "qp_error", o->reason);
	SET_INT(j, "recoveries", o->u.qp.recoveries);
	/* The device's word on the state, not our intention. */
	if (ibv_query_qp(o->u.qp.qp, &attr,
			 IBV_QP_STATE | IBV_QP_CAP | IBV_QP_DEST_QPN |
				 IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT |
				 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MIN_RNR_TIMER,
			 &ia))
		return;
	SET_STR(j, "qp_state", qp_state_str(attr.qp_state));
	if (attr.qp_state != IBV_QPS_RESET && !ibv_query_qp(o->u.qp.qp, &pk,
							     IBV_QP_PKEY_INDEX |
								     IBV_QP_PORT,
							     &ia)) {
		__be16 v;

		SET_INT(j, "pkey_index", pk.pkey_index);
		if (!ibv_query_pkey(o->u.qp.qp->context,
				    pk.port_num ? pk.port_num : 1,
				    pk.pkey_index, &v))
			SET_INT(j, "pkey", be16toh(v));
	}
	json_object_set_new(
		j, "cap",
		json_pack("{s:i, s:i, s:i, s:i, s:i}", "max_send_wr",
			  ia.cap.max_send_wr, "max_recv_wr", ia.cap.max_recv_wr,
			  "max_send_sge", ia.cap.max_send_sge, "max_recv_sge",
			  ia.cap.max_recv_sge, "max_inline_data",
			  ia.cap.max_inline_data));
	if (attr.qp_state == IBV_QPS_RTS && o->u.qp.qp->qp_type != IBV_QPT_UD &&
	    o->u.qp.qp->qp_type != IBV_QPT_RAW_PACKET)
		alt_json(o->u.qp.qp, j);
	if (attr.qp_state == IBV_QPS_RTR || attr.qp_state == IBV_QPS_RTS) {
		SET_INT(j, "dqpn", attr.dest_qp_num);
		SET_INT(j, "mtu", 128 << attr.path_mtu);
		SET_INT(j, "min_rnr_timer", attr.min_rnr_timer);
		if (attr.qp_state == IBV_QPS_RTS) {
			SET_INT(j, "timeout", attr.timeout);
			SET_INT(j, "retry_cnt", attr.retry_cnt);
			SET_INT(j, "rnr_retry", attr.rnr_retry);
		}
		if (attr.ah_attr.is_global)
			json_object_set_new(
				j, "dgid",
				json_string(gid_text(&attr.ah_attr.grh.dgid,
						     gid)));
	}
}

json_t *object_qp_endpoint(const struct profile *p, const struct object *o,
			   int *err)
{
	const struct conf_qp *c = o->conf;
	uint8_t port = (uint8_t)profile_device(p)->port;
	struct ibv_port_attr pattr;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr attr;
	struct qp_path def;
	union ibv_gid gid;
	char text[GID_TEXT_SIZE];
	int gid_index = profile_gid_index(p);
	int64_t psn;
	json_t *j;

	*err = 0;
	if (ibv_query_port(profile_ctx(p), port, &pattr) ||
	    ibv_query_qp(o->u.qp.qp, &attr,
			 IBV_QP_STATE | IBV_QP_AV | IBV_QP_SQ_PSN, &ia)) {
		*err = errno > 0 ? -errno : -EIO;
		return NULL;
	}
	if (c->path && c->path->sgid_index >= 0)
		gid_index = (int)c->path->sgid_index;
	/* A UD QP has no address of its own (rxe reports a zeroed one). */
	if (o->u.qp.qp->qp_type != IBV_QPT_UD &&
	    o->u.qp.qp->qp_type != IBV_QPT_RAW_PACKET &&
	    (attr.qp_state == IBV_QPS_RTR || attr.qp_state == IBV_QPS_RTS ||
	     attr.qp_state == IBV_QPS_SQD) &&
	    attr.ah_attr.is_global)
		gid_index = attr.ah_attr.grh.sgid_index;

	/* sq_psn means something from RTS on; before, what RTR->RTS would
	 * set (qp_path_of(): the path's, else qp_path_init()'s). */
	qp_path_init(&def);
	psn = def.sq_psn;
	if (c->path && c->path->sq_psn >= 0)
		psn = c->path->sq_psn;
	if (attr.qp_state == IBV_QPS_RTS || attr.qp_state == IBV_QPS_SQD)
		psn = attr.sq_psn;

	j = json_pack("{s:I, s:i, s:i, s:I, s:i, s:s}", "qp_num",
		      (json_int_t)o->u.qp.qp->qp_num, "port", port, "lid",
		      pattr.lid, "psn", (json_int_t)psn, "mtu",
		      128 << pattr.active_mtu, "type", qp_kind_name(c->type));
	if (!j)
		return NULL;
	if (gid_index >= 0 &&
	    !ibv_query_gid(profile_ctx(p), port, gid_index, &gid)) {
		json_object_set_new(j, "gid", json_string(gid_text(&gid, text)));
		json_object_set_new(j, "gid_index", json_integer(gid_index));
	} else {
		/* IB without a selected GID: the LID alone routes. */
		json_object_set_new(j, "gid", json_null());
		json_object_set_new(j, "gid_index", json_null());
	}
	return j;
}

static void qp_lose(struct object *o)
{
	object_keep_remains(o->u.qp.qp);
}

static bool qp_handle(const struct object *o, uint32_t *h)
{
	return o->u.qp.qp && (*h = o->u.qp.qp->handle, true);
}

/* A QP can fail its transition while it exists. */
static void qp_json_unready(const struct object *o, json_t *j)
{
	if (o->state == OBJ_FAILED && o->u.qp.qp)
		qp_json(o, j);
}

static void qp_identity(const struct object *o, json_t *j)
{
	json_object_set_new(j, "qp_num", json_integer(o->u.qp.qp->qp_num));
}

const struct object_kind kind_qp = {
	.kind = OBJ_QP,
	.parents = KIND_BIT(OBJ_PD) | KIND_BIT(OBJ_CQ) | KIND_BIT(OBJ_SRQ) |
		   KIND_BIT(OBJ_XRCD),
	.uverbs = UH_QP,
	.netlink = RDMANL_QP,
	.on_loop = false,
	.kept_by_restart = false,
	.reset = kind_no_reset,
	.create = qp_create,
	.connect = qp_connect,
	.start = kind_no_start,
	.destroy = qp_destroy,
	.take_over = kind_no_take_over,
	.hand_over = kind_no_hand_over,
	.drain = kind_no_drain,
	.held_handles = kind_no_held_handles,
	.lose = qp_lose,
	.handle = qp_handle,
	.json = qp_json,
	.json_unready = qp_json_unready,
	.identity = qp_identity,
	.attach = by_number,
};

/* ---- ah ---- */

static int ah_create(struct profile *p, struct object *o)
{
	const struct conf_ah *c = o->conf;
	struct object *pd = object_dep(p, o, OBJ_PD, c->pd);
	struct ibv_ah_attr attr = {
	    /* No dgid: IB LID routing, without a GRH. */
	    .is_global = c->dgid != NULL,
	    .port_num = (uint8_t)profile_device(p)->port,
	    .sl = (uint8_t)c->sl,
	    .dlid = (uint16_t)c->dlid,
	    .static_rate = (uint8_t)c->static_rate,
	    .grh =
		{
		    .hop_limit = (uint8_t)c->hop_limit,
		    .traffic_class = (uint8_t)c->traffic_class,
		    .sgid_index =
			(uint8_t)(c->sgid_index >= 0 ? c->sgid_index
						     : profile_gid_index(p)),
		},
	};

	if (!pd)
		return -o->err;
	if (c->dgid)
		config_parse_gid(c->dgid, attr.grh.dgid.raw);
	o->u.ah = ibv_create_ah(pd->u.pd, &attr);
	if (!o->u.ah) {
		int err = errno;

		if (c->dgid)
			return object_fail(o, err, "ibv_create_ah to %s: %s",
					   c->dgid, strerror(err));
		return object_fail(o, err, "ibv_create_ah to lid %d: %s",
				   c->dlid, strerror(err));
	}
	return 0;
}

static void ah_destroy(struct object *o)
{
	if (o->u.ah)
		ibv_destroy_ah(o->u.ah);
}

static void ah_json(const struct object *o, json_t *j)
{
	const struct conf_ah *c = o->conf;
	union ibv_gid gid;
	char text[GID_TEXT_SIZE];

	SET_INT(j, "handle", o->u.ah->handle);
	SET_STR(j, "pd", c->pd);
	/* The form every GID has in documents, whatever the file's. */
	if (c->dgid) {
		config_parse_gid(c->dgid, gid.raw);
		SET_STR(j, "dgid", gid_text(&gid, text));
	} else {
		SET_INT(j, "dlid", c->dlid);
	}
}

static void ah_lose(struct object *o)
{
	object_keep_remains(o->u.ah);
}

static bool ah_handle(const struct object *o, uint32_t *h)
{
	return o->u.ah && (*h = o->u.ah->handle, true);
}

const struct object_kind kind_ah = {
	.kind = OBJ_AH,
	.parents = KIND_BIT(OBJ_PD),
	.uverbs = UH_AH,
	.netlink = RDMANL_KINDS,
	.on_loop = false,
	.kept_by_restart = false,
	.reset = kind_no_reset,
	.create = ah_create,
	.connect = kind_no_connect,
	.start = kind_no_start,
	.destroy = ah_destroy,
	.take_over = kind_no_take_over,
	.hand_over = kind_no_hand_over,
	.drain = kind_no_drain,
	.held_handles = kind_no_held_handles,
	.lose = ah_lose,
	.handle = ah_handle,
	.json = ah_json,
	.json_unready = kind_no_json,
	.identity = kind_no_json,
	.attach = kind_not_attached,
};
