// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>

#include "devinfo.h"
#include "profile.h"

static const char *const kind_names[OBJ_KIND_MAX] = {
	[OBJ_MEMORY] = "memory", [OBJ_PD] = "pd", [OBJ_MR] = "mr",
	[OBJ_CQ] = "cq",	 [OBJ_QP] = "qp",
};

static const char *const state_names[] = {
	[OBJ_PENDING] = "pending",
	[OBJ_READY] = "ready",
	[OBJ_FAILED] = "failed",
};

static const char *const profile_state_names[] = {
	[PROFILE_PENDING] = "pending",
	[PROFILE_READY] = "ready",
	[PROFILE_DEGRADED] = "degraded",
	[PROFILE_FAILED] = "failed",
};

const char *obj_kind_name(enum obj_kind k)
{
	return kind_names[k];
}

int obj_kind_from_name(const char *name)
{
	for (int k = 0; k < OBJ_KIND_MAX; k++)
		if (streq(kind_names[k], name))
			return k;
	return -EINVAL;
}

const char *obj_state_name(enum obj_state s)
{
	return state_names[s];
}

const char *profile_state_name(enum profile_state s)
{
	return profile_state_names[s];
}

static int _printf_(3, 4)
	obj_fail(struct object *o, int err, const char *fmt, ...)
{
	va_list ap;

	free(o->reason);
	va_start(ap, fmt);
	if (vasprintf(&o->reason, fmt, ap) < 0)
		o->reason = NULL;
	va_end(ap);
	o->err = err < 0 ? -err : err;
	o->state = OBJ_FAILED;
	return -o->err;
}

static void profile_set_reason(struct profile *p, enum profile_state s,
			       const char *fmt, ...) _printf_(3, 4);
static void profile_set_reason(struct profile *p, enum profile_state s,
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
	for (size_t i = 0; i < p->n_objects; i++)
		if (p->objects[i].kind == kind &&
		    streq(p->objects[i].name, name))
			return &p->objects[i];
	return NULL;
}

/* A dependency of o; fails o when it is not ready. */
static void *dep(struct profile *p, struct object *o, enum obj_kind kind,
		 const char *name)
{
	struct object *d = profile_find(p, kind, name);

	if (!d || d->state != OBJ_READY) {
		obj_fail(o, EAGAIN, "%s '%s' it depends on is not ready",
			 kind_names[kind], name);
		return NULL;
	}
	return d;
}

/* ---- per kind: create and destroy ---- */

static int memory_obj_create(struct profile *p, struct object *o)
{
	int r = memory_create(o->conf, &o->u.mem);

	(void)p;
	if (r < 0)
		return obj_fail(o, r, "cannot create %s memory: %s",
				mem_backing_name(((const struct conf_memory *)
							  o->conf)
							 ->backing),
				strerror(-r));
	return 0;
}

static void memory_obj_destroy(struct object *o)
{
	memory_destroy(&o->u.mem);
}

static int pd_create(struct profile *p, struct object *o)
{
	o->u.pd = ibv_alloc_pd(p->ctx);
	if (!o->u.pd)
		return obj_fail(o, errno, "ibv_alloc_pd: %s", strerror(errno));
	return 0;
}

static void pd_destroy(struct object *o)
{
	ibv_dealloc_pd(o->u.pd);
}

static int mr_create(struct profile *p, struct object *o)
{
	const struct conf_mr *c = o->conf;
	struct object *pd = dep(p, o, OBJ_PD, c->pd);
	struct object *mem = pd ? dep(p, o, OBJ_MEMORY, c->memory) : NULL;
	uint64_t len;
	char *addr;

	if (!mem)
		return -o->err;
	addr = (char *)mem->u.mem.addr + c->offset;
	len = c->length ? c->length : mem->u.mem.size - c->offset;
	o->iova = c->zero_based ? 0 : (uintptr_t)addr;
	o->u.mr = ibv_reg_mr_iova(pd->u.pd, addr, len, o->iova, c->access);
	if (!o->u.mr)
		return obj_fail(o, errno, "ibv_reg_mr of %llu bytes: %s",
				(unsigned long long)len, strerror(errno));
	return 0;
}

static void mr_destroy(struct object *o)
{
	ibv_dereg_mr(o->u.mr);
}

static int cq_create(struct profile *p, struct object *o)
{
	const struct conf_cq *c = o->conf;

	if (c->channel) {
		o->u.cq.channel = ibv_create_comp_channel(p->ctx);
		if (!o->u.cq.channel)
			return obj_fail(o, errno, "ibv_create_comp_channel: %s",
					strerror(errno));
	}
	o->u.cq.cq = ibv_create_cq(p->ctx, c->cqe, NULL, o->u.cq.channel,
				   c->comp_vector);
	if (!o->u.cq.cq) {
		int err = errno;

		if (o->u.cq.channel)
			ibv_destroy_comp_channel(o->u.cq.channel);
		o->u.cq.channel = NULL;
		return obj_fail(o, err, "ibv_create_cq with %d entries: %s",
				c->cqe, strerror(err));
	}
	return 0;
}

static void cq_destroy(struct object *o)
{
	ibv_destroy_cq(o->u.cq.cq);
	if (o->u.cq.channel)
		ibv_destroy_comp_channel(o->u.cq.channel);
}

static const enum ibv_qp_type qp_types[] = {
	[QPK_RC] = IBV_QPT_RC,
	[QPK_UC] = IBV_QPT_UC,
	[QPK_UD] = IBV_QPT_UD,
};

/* RESET -> INIT with what the profile's device section says. */
static int qp_to_init(struct profile *p, struct object *o)
{
	const struct conf_qp *c = o->conf;
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = c->pkey_index,
		.port_num = (uint8_t)p->dev->port,
	};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (c->type == QPK_UD) {
		attr.qkey = c->qkey;
		mask |= IBV_QP_QKEY;
	} else {
		attr.qp_access_flags = c->access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return -ibv_modify_qp(o->u.qp, &attr, mask);
}

static int qp_create(struct profile *p, struct object *o)
{
	const struct conf_qp *c = o->conf;
	struct object *pd = dep(p, o, OBJ_PD, c->pd);
	struct object *scq = pd ? dep(p, o, OBJ_CQ, c->send_cq) : NULL;
	struct object *rcq = scq ? dep(p, o, OBJ_CQ, c->recv_cq) : NULL;
	struct ibv_qp_init_attr ia = {
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
	int r;

	if (!rcq)
		return -o->err;
	ia.send_cq = scq->u.cq.cq;
	ia.recv_cq = rcq->u.cq.cq;
	o->u.qp = ibv_create_qp(pd->u.pd, &ia);
	if (!o->u.qp)
		return obj_fail(o, errno, "ibv_create_qp (%s): %s",
				qp_kind_name(c->type), strerror(errno));
	if (c->state == QPS_TARGET_INIT) {
		r = qp_to_init(p, o);
		if (r < 0) {
			ibv_destroy_qp(o->u.qp);
			o->u.qp = NULL;
			return obj_fail(o, r, "modify_qp to INIT: %s",
					strerror(-r));
		}
	}
	return 0;
}

static void qp_destroy(struct object *o)
{
	ibv_destroy_qp(o->u.qp);
}

struct kind_ops {
	int (*create)(struct profile *p, struct object *o);
	void (*destroy)(struct object *o);
};

static const struct kind_ops kind_ops[OBJ_KIND_MAX] = {
	[OBJ_MEMORY] = { memory_obj_create, memory_obj_destroy },
	[OBJ_PD] = { pd_create, pd_destroy },
	[OBJ_MR] = { mr_create, mr_destroy },
	[OBJ_CQ] = { cq_create, cq_destroy },
	[OBJ_QP] = { qp_create, qp_destroy },
};

/* ---- the profile ---- */

static int add_objects(struct profile *p, enum obj_kind kind,
		       const void *array, size_t n, size_t elem_size)
{
	for (size_t i = 0; i < n; i++) {
		const void *conf = (const char *)array + i * elem_size;
		struct object *o = &p->objects[p->n_objects++];

		/* Every conf_<kind> starts with loc, then name. */
		*o = (struct object){
			.kind = kind,
			.conf = conf,
			.name = *(char *const *)((const char *)conf +
						 sizeof(struct conf_loc)),
		};
		if (kind == OBJ_MEMORY)
			o->u.mem.fd = -1;
	}
	return 0;
}

int profile_new(const struct config *cfg, const struct conf_profile *c,
		struct profile **out)
{
	size_t n = c->n_memory + c->n_pd + c->n_mr + c->n_cq + c->n_qp;
	struct profile *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->objects = calloc(n ? n : 1, sizeof(*p->objects));
	if (!p->objects) {
		free(p);
		return -ENOMEM;
	}
	p->conf = c;
	p->dev = config_device(cfg, c->device);
	/* Kind order is a dependency order: each kind only refers to kinds
	 * before it. */
	add_objects(p, OBJ_MEMORY, c->memory, c->n_memory, sizeof(*c->memory));
	add_objects(p, OBJ_PD, c->pd, c->n_pd, sizeof(*c->pd));
	add_objects(p, OBJ_MR, c->mr, c->n_mr, sizeof(*c->mr));
	add_objects(p, OBJ_CQ, c->cq, c->n_cq, sizeof(*c->cq));
	add_objects(p, OBJ_QP, c->qp, c->n_qp, sizeof(*c->qp));
	*out = p;
	return 0;
}

int profile_start(struct profile *p,
		  void (*progress)(void *ud, const struct object *o),
		  void *ud)
{
	size_t failed = 0;

	p->ctx = devinfo_open(p->dev->ibdev);
	if (!p->ctx && errno == ENODEV) {
		profile_set_reason(p, PROFILE_PENDING,
				   "device '%s' (%s) is not present",
				   p->dev->name, p->dev->ibdev);
		return -ENODEV;
	}
	if (!p->ctx) {
		int err = errno;

		profile_set_reason(p, PROFILE_FAILED, "ibv_open_device %s: %s",
				   p->dev->ibdev, strerror(err));
		return -err;
	}

	for (size_t i = 0; i < p->n_objects; i++) {
		struct object *o = &p->objects[i];

		if (progress)
			progress(ud, o);
		if (kind_ops[o->kind].create(p, o) < 0) {
			failed++;
			continue;
		}
		o->state = OBJ_READY;
	}
	if (failed)
		profile_set_reason(p, PROFILE_DEGRADED,
				   "%zu of %zu objects failed", failed,
				   p->n_objects);
	else
		profile_set_reason(p, PROFILE_READY, NULL);
	return 0;
}

void profile_stop(struct profile *p)
{
	for (size_t i = p->n_objects; i-- > 0;) {
		struct object *o = &p->objects[i];

		if (o->state == OBJ_READY)
			kind_ops[o->kind].destroy(o);
		free(o->reason);
		o->reason = NULL;
		o->err = 0;
		o->state = OBJ_PENDING;
		memset(&o->u, 0, sizeof(o->u));
		if (o->kind == OBJ_MEMORY)
			o->u.mem.fd = -1;
	}
	if (p->ctx)
		ibv_close_device(p->ctx);
	p->ctx = NULL;
	profile_set_reason(p, PROFILE_PENDING, "stopped");
}

struct profile *profile_free(struct profile *p)
{
	if (!p)
		return NULL;
	profile_stop(p);
	free(p->reason);
	free(p->objects);
	free(p);
	return NULL;
}

/* ---- JSON ---- */

static json_t *access_json(unsigned int access)
{
	static const struct {
		unsigned int flag;
		const char *name;
	} names[] = {
		{ IBV_ACCESS_LOCAL_WRITE, "local_write" },
		{ IBV_ACCESS_REMOTE_WRITE, "remote_write" },
		{ IBV_ACCESS_REMOTE_READ, "remote_read" },
		{ IBV_ACCESS_REMOTE_ATOMIC, "remote_atomic" },
		{ IBV_ACCESS_MW_BIND, "mw_bind" },
		{ IBV_ACCESS_RELAXED_ORDERING, "relaxed_ordering" },
	};
	json_t *a = json_array();

	for (size_t i = 0; a && i < ARRAY_SIZE(names); i++)
		if (access & names[i].flag)
			json_array_append_new(a, json_string(names[i].name));
	return a;
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

static void ready_json(const struct object *o, json_t *j)
{
	switch (o->kind) {
	case OBJ_MEMORY: {
		const struct conf_memory *c = o->conf;

		json_object_set_new(j, "size", json_integer((json_int_t)c->size));
		json_object_set_new(j, "backing",
				    json_string(mem_backing_name(c->backing)));
		break;
	}
	case OBJ_PD:
		json_object_set_new(j, "handle", json_integer(o->u.pd->handle));
		break;
	case OBJ_MR: {
		const struct conf_mr *c = o->conf;

		json_object_set_new(j, "handle", json_integer(o->u.mr->handle));
		json_object_set_new(j, "pd", json_string(c->pd));
		json_object_set_new(j, "memory", json_string(c->memory));
		json_object_set_new(j, "lkey", json_integer(o->u.mr->lkey));
		json_object_set_new(j, "rkey", json_integer(o->u.mr->rkey));
		json_object_set_new(j, "length",
				    json_integer((json_int_t)o->u.mr->length));
		json_object_set_new(j, "offset",
				    json_integer((json_int_t)c->offset));
		json_object_set_new(j, "iova",
				    json_integer((json_int_t)o->iova));
		json_object_set_new(j, "zero_based", json_boolean(c->zero_based));
		json_object_set_new(j, "access", access_json(c->access));
		break;
	}
	case OBJ_CQ:
		json_object_set_new(j, "handle",
				    json_integer(o->u.cq.cq->handle));
		json_object_set_new(j, "cqe", json_integer(o->u.cq.cq->cqe));
		json_object_set_new(j, "channel",
				    json_boolean(o->u.cq.channel != NULL));
		break;
	case OBJ_QP: {
		const struct conf_qp *c = o->conf;
		struct ibv_qp_attr attr;
		struct ibv_qp_init_attr ia;

		json_object_set_new(j, "handle", json_integer(o->u.qp->handle));
		json_object_set_new(j, "type", json_string(qp_kind_name(c->type)));
		json_object_set_new(j, "qp_num", json_integer(o->u.qp->qp_num));
		json_object_set_new(j, "pd", json_string(c->pd));
		json_object_set_new(j, "send_cq", json_string(c->send_cq));
		json_object_set_new(j, "recv_cq", json_string(c->recv_cq));
		/* The device's word on the state, not our intention. */
		if (!ibv_query_qp(o->u.qp, &attr, IBV_QP_STATE | IBV_QP_CAP,
				  &ia)) {
			json_object_set_new(j, "qp_state",
					    json_string(qp_state_str(attr.qp_state)));
			json_object_set_new(
				j, "cap",
				json_pack("{s:i, s:i, s:i, s:i, s:i}",
					  "max_send_wr", ia.cap.max_send_wr,
					  "max_recv_wr", ia.cap.max_recv_wr,
					  "max_send_sge", ia.cap.max_send_sge,
					  "max_recv_sge", ia.cap.max_recv_sge,
					  "max_inline_data",
					  ia.cap.max_inline_data));
		}
		break;
	}
	default:
		break;
	}
}

json_t *object_json(const struct object *o)
{
	json_t *j = json_pack("{s:s, s:s, s:s}", "kind", kind_names[o->kind],
			      "name", o->name, "state", state_names[o->state]);

	if (!j)
		return NULL;
	if (o->state == OBJ_READY)
		ready_json(o, j);
	if (o->state == OBJ_FAILED) {
		json_object_set_new(j, "errno", json_integer(o->err));
		json_object_set_new(j, "reason",
				    json_string(o->reason ? o->reason : ""));
	}
	return j;
}

json_t *profile_json(const struct profile *p, int detail)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i}", "name",
			      p->conf->name, "device", p->dev->name, "ibdev",
			      p->dev->ibdev, "state",
			      profile_state_names[p->state], "port",
			      p->dev->port);
	json_t *objs;

	if (!j)
		return NULL;
	if (p->reason)
		json_object_set_new(j, "reason", json_string(p->reason));
	if (!detail) {
		json_object_set_new(j, "objects",
				    json_integer((json_int_t)p->n_objects));
		return j;
	}
	objs = json_array();
	for (size_t i = 0; objs && i < p->n_objects; i++)
		json_array_append_new(objs, object_json(&p->objects[i]));
	json_object_set_new(j, "objects", objs);
	return j;
}
