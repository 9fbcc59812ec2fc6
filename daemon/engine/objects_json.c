// SPDX-License-Identifier: MIT
/*
 * Objects as JSON: what REST, the control socket and the event stream
 * say of each kind, ready or not, and a QP's endpoint document. The keys
 * are those of the configuration where they exist.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <sys/stat.h>

#include "access.h"
#include "gid.h"
#include "mcast.h"
#include "objects.h"
#include "qpstate.h"
#include "target.h"

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

#define SET_INT(j, k, v) json_object_set_new(j, k, json_integer((json_int_t)(v)))
#define SET_STR(j, k, v)                                                       \
	do {                                                                   \
		if (v)                                                         \
			json_object_set_new(j, k, json_string(v));             \
	} while (0)

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
	uint8_t port = (uint8_t)p->dev->port;
	struct ibv_port_attr pattr;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr attr;
	struct qp_path def;
	union ibv_gid gid;
	char text[GID_TEXT_SIZE];
	int gid_index = p->gid_index;
	int64_t psn;
	json_t *j;

	*err = 0;
	if (ibv_query_port(p->ctx, port, &pattr) ||
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
	if (gid_index >= 0 && !ibv_query_gid(p->ctx, port, gid_index, &gid)) {
		json_object_set_new(j, "gid", json_string(gid_text(&gid, text)));
		json_object_set_new(j, "gid_index", json_integer(gid_index));
	} else {
		/* IB without a selected GID: the LID alone routes. */
		json_object_set_new(j, "gid", json_null());
		json_object_set_new(j, "gid_index", json_null());
	}
	return j;
}

/* A large memory's bytes populated and registered, while it is made and
 * after. */
static void memory_progress_json(const struct object *o, json_t *j)
{
	struct memory_stats *ms = atomic_load(&o->u.mem.stats);

	if (!ms)
		return;
	SET_INT(j, "populated", atomic_load(&ms->populated));
	SET_INT(j, "registered", atomic_load(&ms->registered));
}

static void memory_json(const struct object *o, json_t *j)
{
	const struct conf_memory *c = o->conf;
	struct stat st;

	struct memory_stats *ms = atomic_load(&o->u.mem.stats);

	SET_INT(j, "size", c->size);
	SET_STR(j, "backing", mem_backing_name(c->backing));
	SET_STR(j, "path", c->path);
	/* A large memory's pages as smaps saw them once populated. */
	if (ms && ms->page_size) {
		SET_INT(j, "page_size", ms->page_size);
		SET_INT(j, "thp_bytes", ms->huge_bytes);
	} else if (c->backing == MEM_HUGETLB && o->u.mem.fd >= 0 &&
		   !fstat(o->u.mem.fd, &st)) {
		/* hugetlbfs gives its page size as the block size. */
		SET_INT(j, "page_size", st.st_blksize);
	}
	memory_progress_json(o, j);
}

static void xrcd_json(const struct object *o, json_t *j)
{
	const struct conf_xrcd *c = o->conf;

	SET_STR(j, "file", c->file);
}

static void pd_json(const struct object *o, json_t *j)
{
	SET_INT(j, "handle", o->u.pd->handle);
}

static void dm_json(const struct object *o, json_t *j)
{
	const struct conf_dm *c = o->conf;

	SET_INT(j, "handle", o->u.dm->handle);
	SET_INT(j, "size", c->size);
}

static void mr_json(const struct object *o, json_t *j)
{
	const struct conf_mr *c = o->conf;

	/* Same handle and keys as before the restart (restore.h). */
	if (o->u.mr.restored)
		json_object_set_new(j, "restored", json_true());
	SET_INT(j, "handle", o->u.mr.mr->handle);
	SET_STR(j, "pd", c->pd);
	SET_STR(j, "memory", c->memory);
	SET_STR(j, "dm", c->dm);
	SET_INT(j, "lkey", o->u.mr.mr->lkey);
	SET_INT(j, "rkey", o->u.mr.mr->rkey);
	if (!c->memory && !c->dm) {
		/* The whole address space: no length or offset. */
		json_object_set_new(j, "implicit", json_true());
	} else {
		SET_INT(j, "length", o->u.mr.mr->length);
		SET_INT(j, "offset", c->offset);
		SET_INT(j, "iova", o->u.mr.iova);
	}
	json_object_set_new(j, "zero_based", json_boolean(c->zero_based || c->dm));
	if (c->odp)
		json_object_set_new(j, "odp", json_true());
	json_object_set_new(j, "access", proto_access_json(c->access));
}

static void mw_json(const struct object *o, json_t *j)
{
	const struct conf_mw *c = o->conf;

	SET_INT(j, "handle", o->u.mw->handle);
	SET_STR(j, "pd", c->pd);
	SET_INT(j, "type", c->type);
	SET_INT(j, "rkey", o->u.mw->rkey);
}

static void cq_json(const struct object *o, json_t *j)
{
	SET_INT(j, "handle", o->u.cq.cq->handle);
	SET_INT(j, "cqe", o->u.cq.cq->cqe);
	json_object_set_new(j, "channel", json_boolean(o->u.cq.channel != NULL));
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

static void target_obj_json(const struct object *o, json_t *j)
{
	const struct conf_target *c = o->conf;
	/* Its token shows as set only (config_fields.c: a secret). */
	json_t *cfg = config_object_json(OBJ_TARGET, c);

	SET_STR(j, "listen", c->listen);
	SET_STR(j, "pd", c->pd);
	SET_STR(j, "cq", c->cq);
	json_object_set_new(j, "config", cfg);
	target_json(o->u.target, j);
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

static void mcast_obj_json(const struct object *o, json_t *j)
{
	json_object_set_new(j, "config", config_object_json(OBJ_MCAST, o->conf));
	mcast_json(o->u.mcast, j);
}

/* A ready object's own fields, by kind. */
static void (*const ready_json[OBJ_KIND_MAX])(const struct object *o,
					      json_t *j) = {
	[OBJ_MEMORY] = memory_json,
	[OBJ_XRCD] = xrcd_json,
	[OBJ_PD] = pd_json,
	[OBJ_DM] = dm_json,
	[OBJ_MR] = mr_json,
	[OBJ_MW] = mw_json,
	[OBJ_CQ] = cq_json,
	[OBJ_SRQ] = srq_json,
	[OBJ_QP] = qp_json,
	[OBJ_TARGET] = target_obj_json,
	[OBJ_AH] = ah_json,
	[OBJ_MCAST] = mcast_obj_json,
};

/* A draining PD or MR: which kernel object it is (the incarnation that
 * drains, maybe beside a running one of its name). */
static void draining_json(const struct object *o, json_t *j)
{
	const struct ibv_mr *mr = o->kind == OBJ_MR ? o->u.mr.mr : NULL;

	if (o->kind == OBJ_PD && o->u.pd)
		SET_INT(j, "handle", o->u.pd->handle);
	if (!mr)
		return;
	SET_INT(j, "handle", mr->handle);
	SET_INT(j, "lkey", mr->lkey);
	SET_INT(j, "rkey", mr->rkey);
	SET_INT(j, "length", mr->length);
}

json_t *object_json(const struct object *o)
{
	json_t *j = json_pack("{s:s, s:s, s:s}", "kind",
			      obj_kind_name(o->kind), "name", object_name(o),
			      "state", obj_state_name(o->state));

	if (!j)
		return NULL;
	if (o->state == OBJ_READY && ready_json[o->kind])
		ready_json[o->kind](o, j);
	/* A draining object outlived its configuration: only its name is
	 * left of it, and what the kernel's object says. */
	if (o->state == OBJ_DRAINING)
		draining_json(o, j);
	/* Its job only ever sets the stats it shares, atomically. */
	if (o->state == OBJ_CREATING && o->kind == OBJ_MEMORY)
		memory_progress_json(o, j);
	/* A QP can fail its transition while it exists. */
	if (o->state == OBJ_FAILED && o->kind == OBJ_QP && o->u.qp.qp)
		qp_json(o, j);
	if (o->state == OBJ_FAILED) {
		SET_INT(j, "errno", o->err);
		SET_STR(j, "reason", o->reason ? o->reason : "");
	}
	SET_INT(j, "leases", o->leases);
	/* Times the kernel lost it and it was made again (reconcile.c):
	 * the kinds a process holding the context can destroy. */
	if (o->kind != OBJ_MEMORY && o->kind != OBJ_TARGET &&
	    o->kind != OBJ_MCAST)
		SET_INT(j, "lost", o->lost);
	return j;
}

/* What a client knew of o: its handle, keys and numbers. */
void object_identity_json(const struct object *o, json_t *j)
{
	enum uhandle_kind k;
	uint32_t h;

	if (!j || !object_handle(o, &k, &h))
		return;
	json_object_set_new(j, "handle", json_integer(h));
	if (o->kind == OBJ_MR) {
		json_object_set_new(j, "lkey", json_integer(o->u.mr.mr->lkey));
		json_object_set_new(j, "rkey", json_integer(o->u.mr.mr->rkey));
	} else if (o->kind == OBJ_MW) {
		json_object_set_new(j, "rkey", json_integer(o->u.mw->rkey));
	} else if (o->kind == OBJ_QP) {
		json_object_set_new(j, "qp_num",
				    json_integer(o->u.qp.qp->qp_num));
	}
}
