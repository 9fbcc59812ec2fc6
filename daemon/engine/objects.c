// SPDX-License-Identifier: MIT
/*
 * One section per kind: create and destroy; then the dispatch by kind.
 * The JSON that shows each kind is objects_json.c's.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>

#include "hugepages.h"
#include "log.h"
#include "mcast.h"
#include "objects.h"
#include "qpstate.h"
#include "restore.h"
#include "target.h"
#include "verbs_spec.h"

int object_fail(struct object *o, int err, const char *fmt, ...)
{
	va_list ap;

	free(o->reason);
	va_start(ap, fmt);
	if (vasprintf(&o->reason, fmt, ap) < 0)
		o->reason = NULL;
	va_end(ap);
	o->err = err < 0 ? -err : err;
	if (!o->err)
		o->err = EIO;
	return -o->err;
}

/*
 * The one place an object's state changes. Silent, unlike
 * profile_set_state() (profile.c): an object's change is told by its profile
 * (profile_object_announce(), or the creation's progress), which
 * decides when thousands of changes make one event.
 */
void object_set_state(struct object *o, enum obj_state s)
{
	o->state = s;
}

/* A dependency of o, which must be ready; fails o otherwise. */
static struct object *dep(struct profile *p, struct object *o,
			  enum obj_kind kind, const char *name)
{
	struct object *d = profile_find(p, kind, name);

	if (!d || d->state != OBJ_READY) {
		object_fail(o, EAGAIN, "%s '%s' it depends on is %s",
			    obj_kind_name(kind), name,
			    d ? obj_state_name(d->state) : "missing");
		return NULL;
	}
	return d;
}

/* ---- memory ---- */

static int memory_obj_create(struct profile *p, struct object *o)
{
	const struct conf_memory *c = o->conf;
	struct memory_spec m = memory_of(c);
	char key[256], why[256];
	int r;

	/* The key under which a restart finds it again (fd store). */
	snprintf(key, sizeof(key), "%s/%s", p->conf->name, c->name);
	r = memory_create_keyed(&m, key, &p->stop, &o->u.mem, why, sizeof(why));
	if (r == -ECANCELED)
		return object_fail(o, r, "its creation was cancelled");
	if (r < 0 && why[0])
		return object_fail(o, r, "cannot create %s memory: %s",
				   mem_backing_name(c->backing), why);
	if (r < 0 && c->backing == MEM_HUGETLB) {
		uint64_t page = c->page_size ?: hugepages_default_size();
		uint64_t pages = page ? (c->size + page - 1) / page : 0;

		/* Most often a short pool: say which, and how to raise it. */
		return object_fail(o, r, "cannot create hugetlb memory: %s: %s",
				   strerror(-r),
				   page ? hugepages_shortage(page, pages, why,
							     sizeof(why))
					: "this host has no huge pages");
	}
	if (r < 0)
		return object_fail(o, r, "cannot create %s memory: %s",
				   mem_backing_name(c->backing), strerror(-r));
	return 0;
}

static void memory_obj_destroy(struct object *o)
{
	memory_destroy(&o->u.mem);
}

/* ---- xrcd ---- */

static int xrcd_create(struct profile *p, struct object *o)
{
	const struct conf_xrcd *c = o->conf;
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};

	o->u.xrcd.fd = -1;
	if (c->file) {
		/* Shared with other processes by the file's inode. */
		o->u.xrcd.fd = open(c->file,
				    O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
				    0600);
		if (o->u.xrcd.fd < 0)
			return object_fail(o, errno, "open %s: %s", c->file,
					   strerror(errno));
		attr.fd = o->u.xrcd.fd;
	}
	o->u.xrcd.xrcd = ibv_open_xrcd(p->ctx, &attr);
	if (!o->u.xrcd.xrcd) {
		int err = errno;

		closep(&o->u.xrcd.fd);
		o->u.xrcd.fd = -1;
		return object_fail(o, err,
				   "ibv_open_xrcd: %s (XRC domains need a "
				   "device that supports XRC, e.g. mlx5)",
				   strerror(err));
	}
	return 0;
}

static void xrcd_destroy(struct object *o)
{
	if (o->u.xrcd.xrcd)
		ibv_close_xrcd(o->u.xrcd.xrcd);
	closep(&o->u.xrcd.fd);
}

/* ---- pd ---- */

static int pd_create(struct profile *p, struct object *o)
{
	uint32_t handle;
	bool kept;

	/* The previous run's, by handle (restore.h): its MRs' keys too. */
	o->u.pd = restore_pd(p->restored, p->ctx, object_name(o), &handle,
			     &kept);
	if (o->u.pd)
		return 0;
	if (kept)
		log_warn(-errno, "profile %s: pd %s of the previous run "
				 "(handle %u) cannot be taken back; making "
				 "it again",
			 p->conf->name, object_name(o), handle);
	o->u.pd = ibv_alloc_pd(p->ctx);
	if (!o->u.pd)
		return object_fail(o, errno, "ibv_alloc_pd: %s",
				   strerror(errno));
	return 0;
}

/* A PD or MR the kernel would not let go (a client's object in the
 * context still uses it): our part of it is freed (the unimport verbs
 * free exactly that), the kernel's goes with the context. */
static void pd_destroy(struct object *o)
{
	if (o->u.pd && ibv_dealloc_pd(o->u.pd))
		ibv_unimport_pd(o->u.pd);
}

/* ---- dm ---- */

static int dm_create(struct profile *p, struct object *o)
{
	const struct conf_dm *c = o->conf;
	struct ibv_alloc_dm_attr attr = { .length = c->size };

	o->u.dm = ibv_alloc_dm(p->ctx, &attr);
	if (!o->u.dm)
		return object_fail(o, errno,
				   "ibv_alloc_dm of %llu bytes: %s (device "
				   "memory needs a device that has it, e.g. "
				   "mlx5)",
				   (unsigned long long)c->size,
				   strerror(errno));
	return 0;
}

static void dm_destroy(struct object *o)
{
	if (o->u.dm)
		ibv_free_dm(o->u.dm);
}

/* ---- mr ---- */

/* An mr over device memory: offsets into it, from IOVA 0. */
static int dm_mr_create(struct profile *p, struct object *o,
			struct object *pd)
{
	const struct conf_mr *c = o->conf;
	struct object *dm = dep(p, o, OBJ_DM, c->dm);
	uint64_t len;

	if (!dm)
		return -o->err;
	len = c->length ? c->length
			: ((const struct conf_dm *)dm->conf)->size - c->offset;
	o->u.mr.iova = 0;
	o->u.mr.mr = ibv_reg_dm_mr(pd->u.pd, dm->u.dm, c->offset, len,
				   c->access | IBV_ACCESS_ZERO_BASED);
	if (!o->u.mr.mr)
		return object_fail(o, errno,
				   "ibv_reg_dm_mr of %llu bytes of dm '%s': %s",
				   (unsigned long long)len, c->dm,
				   strerror(errno));
	return 0;
}

/* odp = true without memory: one MR over the whole address space,
 * paged on demand (IBV_ODP_SUPPORT_IMPLICIT). Clients are never given
 * the daemon's: each registers its own (ATTACHED "implicit_mr"). */
static int implicit_mr_create(struct object *o, struct object *pd)
{
	const struct conf_mr *c = o->conf;

	o->u.mr.iova = 0;
	o->u.mr.mr = ibv_reg_mr(pd->u.pd, NULL, SIZE_MAX,
				c->access | IBV_ACCESS_ON_DEMAND);
	if (!o->u.mr.mr)
		return object_fail(o, errno,
				   "ibv_reg_mr of the whole address space "
				   "(implicit on-demand paging): %s",
				   strerror(errno));
	return 0;
}

/* The MR an import gave is the one the previous run had: its length,
 * and its keys where the state recorded them. */
static bool mr_is(const struct ibv_mr *mr, const struct restore_mr_was *was)
{
	return mr->length == was->length &&
	       (!was->lkey || (mr->lkey == was->lkey && mr->rkey == was->rkey));
}

static int mr_create(struct profile *p, struct object *o)
{
	const struct conf_mr *c = o->conf;
	struct object *pd = dep(p, o, OBJ_PD, c->pd);
	struct object *mem;

	if (pd && c->dm)
		return dm_mr_create(p, o, pd);
	if (pd && !c->memory)
		return implicit_mr_create(o, pd);
	mem = pd ? dep(p, o, OBJ_MEMORY, c->memory) : NULL;
	struct restore_mr_was was;
	uint64_t len;
	char *addr;

	if (!mem)
		return -o->err;
	addr = (char *)mem->u.mem.addr + c->offset;
	len = c->length ? c->length : mem->u.mem.size - c->offset;
	/* The previous run's MR, when nothing about it changed and its
	 * memory came back too: same pages, same keys (restore.h). */
	if (restore_claimed(p->restored, "pd", c->pd) && mem->u.mem.kept &&
	    restore_mr(p->restored, c->name,
		       &(struct restore_mr){ .pd = c->pd, .memory = c->memory,
					     .offset = c->offset,
					     .length = len,
					     .access = c->access,
					     .zero_based = c->zero_based },
		       &was)) {
		o->u.mr.mr = ibv_import_mr(pd->u.pd, was.handle);
		if (o->u.mr.mr && mr_is(o->u.mr.mr, &was)) {
			restore_claim(p->restored, "mr", c->name);
			o->u.mr.iova = was.iova;
			o->u.mr.restored = true;
			o->u.mr.stats = memory_stats_hold(&mem->u.mem, len);
			return 0;
		}
		log_warn(o->u.mr.mr ? 0 : -errno,
			 "profile %s: mr %s of the previous run (handle %u) "
			 "cannot be taken back%s; registering it again",
			 p->conf->name, c->name, was.handle,
			 o->u.mr.mr ? ": the handle names another MR" : "");
		if (o->u.mr.mr)
			ibv_unimport_mr(o->u.mr.mr);
		o->u.mr.mr = NULL;
	}
	o->u.mr.iova = c->zero_based ? 0 : (uintptr_t)addr;
	o->u.mr.mr = ibv_reg_mr_iova(pd->u.pd, addr, len, o->u.mr.iova,
				     c->access |
					     (c->odp ? IBV_ACCESS_ON_DEMAND : 0));
	if (!o->u.mr.mr)
		return object_fail(o, errno, "ibv_reg_mr of %llu bytes%s: %s",
				   (unsigned long long)len,
				   c->odp ? " with on-demand paging" : "",
				   strerror(errno));
	o->u.mr.stats = memory_stats_hold(&mem->u.mem, len);
	return 0;
}

static void mr_destroy(struct object *o)
{
	uint64_t len = o->u.mr.mr ? o->u.mr.mr->length : 0;

	if (o->u.mr.mr && ibv_dereg_mr(o->u.mr.mr))
		ibv_unimport_mr(o->u.mr.mr);
	memory_stats_release(TAKE_PTR(o->u.mr.stats), len);
}

/* ---- mw ---- */

static int mw_create(struct profile *p, struct object *o)
{
	const struct conf_mw *c = o->conf;
	struct object *pd = dep(p, o, OBJ_PD, c->pd);

	if (!pd)
		return -o->err;
	o->u.mw = ibv_alloc_mw(pd->u.pd,
			       c->type == 2 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
	if (!o->u.mw)
		return object_fail(o, errno, "ibv_alloc_mw type %d: %s",
				   c->type, strerror(errno));
	return 0;
}

static void mw_destroy(struct object *o)
{
	if (o->u.mw)
		ibv_dealloc_mw(o->u.mw);
}

/* ---- cq ---- */

static int cq_create(struct profile *p, struct object *o)
{
	const struct conf_cq *c = o->conf;
	int err;

	if (c->channel) {
		o->u.cq.channel = ibv_create_comp_channel(p->ctx);
		if (!o->u.cq.channel)
			return object_fail(o, errno,
					   "ibv_create_comp_channel: %s",
					   strerror(errno));
	}
	o->u.cq.cq = ibv_create_cq(p->ctx, c->cqe, NULL, o->u.cq.channel,
				   c->comp_vector);
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

/* ---- srq ---- */

static int srq_create(struct profile *p, struct object *o)
{
	const struct conf_srq *c = o->conf;
	struct object *pd = dep(p, o, OBJ_PD, c->pd);
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
		struct object *xrcd = dep(p, o, OBJ_XRCD, c->xrcd);
		struct object *cq = xrcd ? dep(p, o, OBJ_CQ, c->cq) : NULL;

		if (!cq)
			return -o->err;
		attr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
				 IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		attr.srq_type = IBV_SRQT_XRC;
		attr.pd = pd->u.pd;
		attr.xrcd = xrcd->u.xrcd.xrcd;
		attr.cq = cq->u.cq.cq;
		o->u.srq = ibv_create_srq_ex(p->ctx, &attr);
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
		struct object *xrcd = dep(p, o, OBJ_XRCD, c->xrcd);

		if (!xrcd)
			return -o->err;
		ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
		ia.xrcd = xrcd->u.xrcd.xrcd;
		ia.cap = (struct ibv_qp_cap){ 0 };
	} else {
		struct object *pd = dep(p, o, OBJ_PD, c->pd);
		struct object *scq = pd ? dep(p, o, OBJ_CQ, c->send_cq) : NULL;
		struct object *rcq = NULL, *srq = NULL;

		if (!scq)
			return -o->err;
		if (c->recv_cq && !(rcq = dep(p, o, OBJ_CQ, c->recv_cq)))
			return -o->err;
		if (c->srq && !(srq = dep(p, o, OBJ_SRQ, c->srq)))
			return -o->err;
		ia.comp_mask = IBV_QP_INIT_ATTR_PD;
		ia.pd = pd->u.pd;
		ia.send_cq = scq->u.cq.cq;
		ia.recv_cq = rcq ? rcq->u.cq.cq : NULL;
		ia.srq = srq ? srq->u.srq : NULL;
		if (c->type == QPK_XRC_SEND)
			ia.cap.max_recv_wr = ia.cap.max_recv_sge = 0;
	}
	o->u.qp.qp = ibv_create_qp_ex(p->ctx, &ia);
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
	path->port_num = (uint8_t)p->dev->port;
	path->pkey_index = c->pkey_index;
	if (c->pkey >= 0) {
		int idx = ibv_get_pkey_index(p->ctx, path->port_num,
					     htobe16((uint16_t)c->pkey));

		if (idx < 0)
			return object_fail(o, ENOENT,
					   "pkey 0x%04x is not in the P_Key "
					   "table of %s port %u",
					   c->pkey, p->ibdev, path->port_num);
		path->pkey_index = (uint16_t)idx;
	}
	path->qkey = c->qkey;
	path->access = c->access;
	if (p->gid_index >= 0) {
		path->sgid_index = (uint8_t)p->gid_index;
		path->has_grh = true;
		path->dgid = p->gid;
	}
	if (c->peer_endpoint) {
		/* A QP elsewhere: its endpoint document, checked at load. */
		json_t *ep = json_loads(c->peer_endpoint, 0, NULL);
		char err[200];
		int r;

		r = ibv_query_port(p->ctx, path->port_num, &pattr);
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
		if (!ibv_query_port(p->ctx, path->port_num, &pattr) &&
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
		if (ibv_query_port(p->ctx, path->port_num, &pattr) ||
		    pattr.link_layer != IBV_LINK_LAYER_INFINIBAND)
			return object_fail(o, EOPNOTSUPP, "%s (%s port %u)",
					   QP_ALT_PATH_IB_ONLY, p->ibdev,
					   path->port_num);
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

	if (c->state == QPS_TARGET_RESET)
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

/* ---- ah ---- */

static int ah_create(struct profile *p, struct object *o)
{
	const struct conf_ah *c = o->conf;
	struct object *pd = dep(p, o, OBJ_PD, c->pd);
	struct ibv_ah_attr attr = {
		/* No dgid: IB LID routing, without a GRH. */
		.is_global = c->dgid != NULL,
		.port_num = (uint8_t)p->dev->port,
		.sl = (uint8_t)c->sl,
		.dlid = (uint16_t)c->dlid,
		.static_rate = (uint8_t)c->static_rate,
		.grh = {
			.hop_limit = (uint8_t)c->hop_limit,
			.traffic_class = (uint8_t)c->traffic_class,
			.sgid_index = (uint8_t)(c->sgid_index >= 0
							? c->sgid_index
							: p->gid_index),
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

/* ---- target ---- */

static void touch(void *p)
{
	profile_touch(p);
}

static int target_create(struct profile *p, struct object *o)
{
	const struct conf_target *c = o->conf;
	struct object *pd = dep(p, o, OBJ_PD, c->pd);
	struct object *cq = pd ? dep(p, o, OBJ_CQ, c->cq) : NULL;
	struct target_params tp = {
		.profile = p->conf->name,
		.conf = c,
		.ctx = p->ctx,
		.ibdev = p->ibdev,
		.port = p->dev->port,
		.pd = pd ? pd->u.pd : NULL,
		.cq = cq ? cq->u.cq.cq : NULL,
		.channel = cq ? cq->u.cq.channel : NULL,
		.events = p->events,
		.changed = touch,
		.ud = p,
	};
	char *why = NULL;
	int r;

	if (!cq)
		return -o->err;
	for (size_t i = 0; i < c->n_expose; i++) {
		const struct conf_expose *e = &c->expose[i];
		struct object *mr = dep(p, o, OBJ_MR, e->mr);

		if (!mr)
			return -o->err;
		tp.range[i] = (struct target_range_src){
			.mr = mr->u.mr.mr,
			.addr = mr->u.mr.iova + e->offset,
			.length = e->length ? e->length
					    : mr->u.mr.mr->length - e->offset,
			.access = e->access,
		};
	}
	tp.n_range = c->n_expose;
	r = target_new(&tp, &o->u.target, &why);
	if (r < 0) {
		object_fail(o, r, "%s", why ? why : strerror(-r));
		free(why);
	}
	return r;
}

static void target_destroy(struct object *o)
{
	o->u.target = target_free(o->u.target);
}

/* ---- mcast: joined on a worker (mcast.c) ---- */

static int mcast_create(struct profile *p, struct object *o)
{
	const struct conf_mcast *c = o->conf;
	struct mcast_params mp = {
		.profile = p->conf->name, .conf = c, .ibdev = p->ibdev,
		.port = p->dev->port, .gid_index = p->gid_index,
		.gid = p->gid, .events = p->events, .changed = touch, .ud = p,
	};
	char *why = NULL;
	int r;

	/* A QP built is enough: the creation connects QPs once every
	 * object exists, after this (attaching takes any state). */
	for (size_t i = 0; i < c->n_qps && i < CONF_MCAST_MAX_QPS; i++) {
		struct object *qp = profile_find(p, OBJ_QP, c->qps[i]);

		if (!qp || !qp->u.qp.qp || (qp->state != OBJ_READY &&
					    qp->state != OBJ_CREATING))
			return dep(p, o, OBJ_QP, c->qps[i]) ? -EAGAIN
							     : -o->err;
		mp.qps[mp.n_qps++] = qp->u.qp.qp;
	}
	mp.pd = mp.n_qps ? mp.qps[0]->pd : NULL;
	r = mcast_new(&mp, &o->u.mcast, &why);
	if (r < 0)
		object_fail(o, r, "%s", why ? why : strerror(-r));
	free(why);
	return r;
}

static void mcast_destroy(struct object *o)
{
	o->u.mcast = mcast_free(o->u.mcast);
}

/* ---- dispatch ---- */

struct kind_ops {
	int (*create)(struct profile *p, struct object *o);
	void (*destroy)(struct object *o);
};

static const struct kind_ops kind_ops[OBJ_KIND_MAX] = {
	[OBJ_MEMORY] = { memory_obj_create, memory_obj_destroy },
	[OBJ_XRCD] = { xrcd_create, xrcd_destroy },
	[OBJ_PD] = { pd_create, pd_destroy },
	[OBJ_DM] = { dm_create, dm_destroy },
	[OBJ_MR] = { mr_create, mr_destroy },
	[OBJ_MW] = { mw_create, mw_destroy },
	[OBJ_CQ] = { cq_create, cq_destroy },
	[OBJ_SRQ] = { srq_create, srq_destroy },
	[OBJ_QP] = { qp_create, qp_destroy },
	[OBJ_AH] = { ah_create, ah_destroy },
	[OBJ_TARGET] = { target_create, target_destroy },
	[OBJ_MCAST] = { mcast_create, mcast_destroy },
};

static void object_reset(struct object *o)
{
	memset(&o->u, 0, sizeof(o->u));
	if (o->kind == OBJ_MEMORY)
		o->u.mem.fd = -1;
	if (o->kind == OBJ_XRCD)
		o->u.xrcd.fd = -1;
}

/* Each creation is a new incarnation: leases name the one they hold.
 * Only the loop counts. */
static uint64_t serials;

uint64_t object_next_serial(void)
{
	return ++serials;
}

void object_hand_over(struct object *o)
{
	/* The kernel's object stays in the context for the next run; what
	 * of it is ours goes (unimport frees just that). */
	if (o->kind == OBJ_PD && o->u.pd)
		ibv_unimport_pd(o->u.pd);
	else if (o->kind == OBJ_MR && o->u.mr.mr)
		ibv_unimport_mr(o->u.mr.mr);
	object_forget(o);
}

void object_forget(struct object *o)
{
	object_reset(o);
	object_set_state(o, OBJ_PENDING);
}

int object_build(struct profile *p, struct object *o)
{
	int r;

	object_reset(o);
	free(o->reason);
	o->reason = NULL;
	o->err = 0;
	r = kind_ops[o->kind].create(p, o);
	if (r < 0) {
		/* Whatever the kind holds after a half-way failure. */
		kind_ops[o->kind].destroy(o);
		object_reset(o);
	}
	return r;
}

int object_connect(struct profile *p, struct object *o)
{
	if (o->kind != OBJ_QP || !o->u.qp.qp)
		return 0;
	return qp_connect(p, o);
}

int object_start(struct profile *p, struct object *o)
{
	int r;

	if (o->kind == OBJ_MCAST && o->u.mcast) {
		r = mcast_start(o->u.mcast, workers_event(p->workers));
		return r < 0 ? object_fail(o, r, "cannot watch the group: %s",
					   strerror(-r))
			     : 0;
	}
	if (o->kind != OBJ_TARGET || !o->u.target)
		return 0;
	r = target_start(o->u.target, workers_event(p->workers));
	if (r < 0)
		return object_fail(o, r, "cannot serve connections: %s",
				   strerror(-r));
	return 0;
}

void object_adopt(struct profile *p, struct object *o)
{
	if (o->kind == OBJ_TARGET && o->u.target)
		target_set_owner(o->u.target, touch, p);
	if (o->kind == OBJ_MCAST && o->u.mcast)
		mcast_set_owner(o->u.mcast, touch, p);
}

void object_destroy(struct object *o)
{
	kind_ops[o->kind].destroy(o);
	object_reset(o);
	/* This incarnation ends: leases naming it find nothing from now. */
	o->leases = 0;
	free(o->reason);
	o->reason = NULL;
	o->err = 0;
	object_set_state(o, OBJ_PENDING);
}
