// SPDX-License-Identifier: MIT
/*
 * QP state transitions from one path description, and the path as JSON.
 *
 * The attribute masks are the kernel's (drivers/infiniband/core/verbs.c,
 * qp_state_table): ib_modify_qp_is_ok() rejects a transition that lacks a
 * required attribute *and* one that carries an attribute the transition
 * does not allow for the QP's type, so each mask below is exactly the
 * required set, never a superset.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include "gid.h"
#include "qpstate.h"
#include "util.h"

void qp_path_init(struct qp_path *p)
{
	*p = (struct qp_path){
		.port_num = 1,
		.qkey = 0x11111111,
		.mtu = IBV_MTU_1024,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.hop_limit = 64,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 1,
	};
}

void qp_alt_from_primary(const struct qp_path *p, struct qp_alt_path *alt)
{
	*alt = (struct qp_alt_path){
		.port_num = p->port_num,
		.pkey_index = p->pkey_index,
		.timeout = p->timeout,
		.dlid = p->dlid,
		.sl = p->sl,
		.src_path_bits = p->src_path_bits,
		.static_rate = p->static_rate,
		.has_grh = p->has_grh,
		.dgid = p->dgid,
		.sgid_index = p->sgid_index,
		.hop_limit = p->hop_limit,
		.traffic_class = p->traffic_class,
		.flow_label = p->flow_label,
	};
}

/* ---- transitions ---- */

enum { STEP_INIT, STEP_RTR, STEP_RTS, N_STEPS };

struct type_masks {
	enum ibv_qp_type type;
	int mask[N_STEPS]; /* beyond IBV_QP_STATE */
};

#define RC_RTR                                                                 \
	(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |       \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RC_RTS                                                                 \
	(IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |                   \
	 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)
#define CONN_INIT (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)

static const struct type_masks type_masks[] = {
	{ IBV_QPT_RC, { CONN_INIT, RC_RTR, RC_RTS } },
	{ IBV_QPT_UC,
	  { CONN_INIT,
	    IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
	    IBV_QP_SQ_PSN } },
	{ IBV_QPT_UD,
	  { IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, 0,
	    IBV_QP_SQ_PSN } },
	{ IBV_QPT_RAW_PACKET, { IBV_QP_PORT, 0, 0 } },
	/* The initiator has no responder: no incoming reads or RNR NAKs. */
	{ IBV_QPT_XRC_SEND,
	  { CONN_INIT,
	    IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
	    RC_RTS } },
	/* The target sends only ACKs: no retries, no outgoing reads. */
	{ IBV_QPT_XRC_RECV,
	  { CONN_INIT, RC_RTR, IBV_QP_SQ_PSN | IBV_QP_TIMEOUT } },
};

static const struct type_masks *masks_for(enum ibv_qp_type type)
{
	for (size_t i = 0; i < ARRAY_SIZE(type_masks); i++)
		if (type_masks[i].type == type)
			return &type_masks[i];
	return NULL;
}

/* Names for *failed_at: string literals, valid for ever. */
static const char *const to_reset_names[] = {
	[IBV_QPS_RESET] = "RESET->RESET", [IBV_QPS_INIT] = "INIT->RESET",
	[IBV_QPS_RTR] = "RTR->RESET",	  [IBV_QPS_RTS] = "RTS->RESET",
	[IBV_QPS_SQD] = "SQD->RESET",	  [IBV_QPS_SQE] = "SQE->RESET",
	[IBV_QPS_ERR] = "ERR->RESET",
};
static const char *const to_err_names[] = {
	[IBV_QPS_RESET] = "RESET->ERR", [IBV_QPS_INIT] = "INIT->ERR",
	[IBV_QPS_RTR] = "RTR->ERR",	[IBV_QPS_RTS] = "RTS->ERR",
	[IBV_QPS_SQD] = "SQD->ERR",	[IBV_QPS_SQE] = "SQE->ERR",
	[IBV_QPS_ERR] = "ERR->ERR",
};
static const char *const up_names[N_STEPS] = {
	[STEP_INIT] = "RESET->INIT",
	[STEP_RTR] = "INIT->RTR",
	[STEP_RTS] = "RTR->RTS",
};

static const char *name_from(const char *const *names, size_t n,
			     enum ibv_qp_state from, const char *unknown)
{
	return (unsigned int)from < n && names[from] ? names[from] : unknown;
}

/* libibverbs returns a positive errno; some providers return -1. */
static int verbs_err(int r)
{
	if (r > 0)
		return -r;
	return errno > 0 ? -errno : -EIO;
}

static void path_attr(const struct qp_path *p, struct ibv_qp_attr *a)
{
	*a = (struct ibv_qp_attr){
		.pkey_index = p->pkey_index,
		.port_num = p->port_num,
		.qkey = p->qkey,
		.qp_access_flags = p->access,
		.dest_qp_num = p->dqpn,
		.rq_psn = p->rq_psn,
		.path_mtu = p->mtu,
		.max_dest_rd_atomic = p->max_dest_rd_atomic,
		.min_rnr_timer = p->min_rnr_timer,
		.ah_attr = {
			.dlid = p->dlid,
			.sl = p->sl,
			.src_path_bits = p->src_path_bits,
			.static_rate = p->static_rate,
			.is_global = p->has_grh,
			.port_num = p->port_num,
			.grh = {
				.dgid = p->dgid,
				.flow_label = p->flow_label,
				.sgid_index = p->sgid_index,
				.hop_limit = p->hop_limit,
				.traffic_class = p->traffic_class,
			},
		},
		.sq_psn = p->sq_psn,
		.timeout = p->timeout,
		.retry_cnt = p->retry_cnt,
		.rnr_retry = p->rnr_retry,
		.max_rd_atomic = p->max_rd_atomic,
	};
	if (p->has_alt) {
		const struct qp_alt_path *l = &p->alt;

		a->alt_port_num = l->port_num;
		a->alt_pkey_index = l->pkey_index;
		a->alt_timeout = l->timeout;
		a->alt_ah_attr = (struct ibv_ah_attr){
			.dlid = l->dlid,
			.sl = l->sl,
			.src_path_bits = l->src_path_bits,
			.static_rate = l->static_rate,
			.is_global = l->has_grh,
			.port_num = l->port_num,
			.grh = {
				.dgid = l->dgid,
				.flow_label = l->flow_label,
				.sgid_index = l->sgid_index,
				.hop_limit = l->hop_limit,
				.traffic_class = l->traffic_class,
			},
		};
		a->path_mig_state = IBV_MIG_REARM;
	}
}

/* The alternate path goes with RTR->RTS, for the types that have one. */
static int alt_mask(const struct qp_path *p, enum ibv_qp_type t, int s)
{
	if (!p->has_alt || s != STEP_RTS)
		return 0;
	if (t != IBV_QPT_RC && t != IBV_QPT_UC && t != IBV_QPT_XRC_SEND &&
	    t != IBV_QPT_XRC_RECV)
		return 0;
	return IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
}

static int step(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		enum ibv_qp_state to, int mask)
{
	int r;

	attr->qp_state = to;
	r = ibv_modify_qp(qp, attr, IBV_QP_STATE | mask);
	return r ? verbs_err(r) : 0;
}

int qp_modify(struct ibv_qp *qp, enum ibv_qp_state target,
	      const struct qp_path *path, const char **failed_at)
{
	const struct type_masks *m;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	enum ibv_qp_state cur;
	const char *dummy;
	int r;

	if (!failed_at)
		failed_at = &dummy;
	*failed_at = NULL;
	if (!qp || !path || (target != IBV_QPS_RESET &&
			     target != IBV_QPS_INIT && target != IBV_QPS_RTR &&
			     target != IBV_QPS_RTS && target != IBV_QPS_ERR))
		return -EINVAL;

	r = ibv_query_qp(qp, &attr, IBV_QP_STATE, &init);
	if (r) {
		*failed_at = "query";
		return verbs_err(r);
	}
	cur = attr.qp_state;

	if (target == IBV_QPS_ERR) {
		if (cur == IBV_QPS_ERR)
			return 0;
		r = step(qp, &attr, IBV_QPS_ERR, 0);
		if (r)
			*failed_at = name_from(to_err_names,
					       ARRAY_SIZE(to_err_names), cur,
					       "UNKNOWN->ERR");
		return r;
	}

	m = masks_for(qp->qp_type);
	if (!m && target != IBV_QPS_RESET) {
		/* The first step up that we would not know how to take. */
		*failed_at = cur < target ? up_names[cur] : up_names[STEP_INIT];
		return -EOPNOTSUPP;
	}

	/* Past the target, or in SQD/SQE/ERR (all above RTS): start over. */
	if (cur > target) {
		r = step(qp, &attr, IBV_QPS_RESET, 0);
		if (r) {
			*failed_at = name_from(to_reset_names,
					       ARRAY_SIZE(to_reset_names), cur,
					       "UNKNOWN->RESET");
			return r;
		}
		cur = IBV_QPS_RESET;
	}

	while (cur < target) {
		/* RESET(0) -> INIT(1) is STEP_INIT(0), and so on. */
		int s = (int)cur;

		path_attr(path, &attr);
		r = step(qp, &attr, cur + 1,
			 m->mask[s] | alt_mask(path, qp->qp_type, s));
		if (r) {
			*failed_at = up_names[s];
			return r;
		}
		cur++;
	}
	return 0;
}

/* ---- changes in RTS ---- */

static int sqd_drained(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	/* An idle QP drains at once; a busy one within its timeouts. */
	for (int i = 0; i < 200; i++) {
		if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init))
			return -EIO;
		if (attr.qp_state != IBV_QPS_SQD)
			return -EIO;
		if (!attr.sq_draining)
			return 0;
		usleep(5000);
	}
	return -ETIMEDOUT;
}

int qp_modify_rts(struct ibv_qp *qp, const struct qp_path *path, int mask,
		  const char **failed_at)
{
	struct ibv_qp_attr attr;
	const char *dummy;
	int r;

	if (!failed_at)
		failed_at = &dummy;
	*failed_at = NULL;
	if (!qp || !path || (mask & ~QP_RTS_MASK))
		return -EINVAL;
	path_attr(path, &attr);
	if (!(mask & QP_SQD_MASK)) {
		if (!mask)
			return 0;
		r = step(qp, &attr, IBV_QPS_RTS, mask);
		if (r)
			*failed_at = "RTS->RTS";
		return r;
	}
	r = step(qp, &attr, IBV_QPS_SQD, 0);
	if (r) {
		*failed_at = "RTS->SQD";
		return r;
	}
	r = sqd_drained(qp);
	if (r) {
		*failed_at = "SQD (drain)";
	} else {
		r = step(qp, &attr, IBV_QPS_SQD, mask & QP_SQD_MASK);
		if (r)
			*failed_at = "SQD->SQD";
	}
	if (r) {
		/* Back to RTS as it was, if the device lets us. */
		(void)sqd_drained(qp);
		(void)step(qp, &attr, IBV_QPS_RTS, 0);
		return r;
	}
	r = step(qp, &attr, IBV_QPS_RTS, mask & QP_RTS_RTS_MASK);
	if (r)
		*failed_at = "SQD->RTS";
	return r;
}

/* ---- JSON ---- */

enum field_type { F_U8, F_U16, F_U32, F_BOOL, F_MTU, F_ACCESS, F_GID };

struct field {
	const char *key;
	enum field_type type;
	size_t off;
	uint32_t max; /* integers: the range is [0, max] unless noted */
	uint32_t min;
};

#define FIELD(name, type, max)                                                 \
	{ #name, type, offsetof(struct qp_path, name), max, 0 }

static const struct field fields[] = {
	{ "port_num", F_U8, offsetof(struct qp_path, port_num), 255, 1 },
	FIELD(pkey_index, F_U16, 0xffff),
	FIELD(qkey, F_U32, 0xffffffff),
	FIELD(access, F_ACCESS, 0),
	FIELD(dqpn, F_U32, 0xffffff),
	FIELD(rq_psn, F_U32, 0xffffff),
	FIELD(mtu, F_MTU, 0),
	FIELD(max_dest_rd_atomic, F_U8, 255),
	FIELD(min_rnr_timer, F_U8, 31),
	FIELD(dlid, F_U16, 0xffff),
	FIELD(sl, F_U8, 15),
	FIELD(src_path_bits, F_U8, 127),
	FIELD(static_rate, F_U8, 63),
	FIELD(has_grh, F_BOOL, 0),
	FIELD(dgid, F_GID, 0),
	FIELD(sgid_index, F_U8, 255),
	FIELD(hop_limit, F_U8, 255),
	FIELD(traffic_class, F_U8, 255),
	FIELD(flow_label, F_U32, 0xfffff),
	FIELD(sq_psn, F_U32, 0xffffff),
	FIELD(timeout, F_U8, 31),
	FIELD(retry_cnt, F_U8, 7),
	FIELD(rnr_retry, F_U8, 7),
	FIELD(max_rd_atomic, F_U8, 255),
};

/* The QP access flags a path may name: what qp_access_flags means. */
static const struct {
	unsigned int flag;
	const char *name;
} access_names[] = {
	{ IBV_ACCESS_LOCAL_WRITE, "local_write" },
	{ IBV_ACCESS_REMOTE_WRITE, "remote_write" },
	{ IBV_ACCESS_REMOTE_READ, "remote_read" },
	{ IBV_ACCESS_REMOTE_ATOMIC, "remote_atomic" },
};

static const struct {
	enum ibv_mtu mtu;
	int bytes;
} mtus[] = {
	{ IBV_MTU_256, 256 },	{ IBV_MTU_512, 512 },	{ IBV_MTU_1024, 1024 },
	{ IBV_MTU_2048, 2048 }, { IBV_MTU_4096, 4096 },
};

static int mtu_bytes(enum ibv_mtu m)
{
	for (size_t i = 0; i < ARRAY_SIZE(mtus); i++)
		if (mtus[i].mtu == m)
			return mtus[i].bytes;
	return 0;
}

static uint32_t get_uint(const struct qp_path *p, const struct field *f)
{
	const char *base = (const char *)p + f->off;

	switch (f->type) {
	case F_U8:
		return *(const uint8_t *)base;
	case F_U16:
		return *(const uint16_t *)base;
	case F_U32:
		return *(const uint32_t *)base;
	default:
		return 0;
	}
}

static void set_uint(struct qp_path *p, const struct field *f, uint32_t v)
{
	char *base = (char *)p + f->off;

	switch (f->type) {
	case F_U8:
		*(uint8_t *)base = (uint8_t)v;
		break;
	case F_U16:
		*(uint16_t *)base = (uint16_t)v;
		break;
	case F_U32:
		*(uint32_t *)base = v;
		break;
	default:
		break;
	}
}

static json_t *access_json(unsigned int access)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < ARRAY_SIZE(access_names); i++) {
		if (!(access & access_names[i].flag))
			continue;
		if (json_array_append_new(a,
					  json_string(access_names[i].name))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *field_json(const struct qp_path *p, const struct field *f)
{
	char buf[GID_TEXT_SIZE];

	switch (f->type) {
	case F_U8:
	case F_U16:
	case F_U32:
		return json_integer(get_uint(p, f));
	case F_BOOL:
		return json_boolean(p->has_grh);
	case F_MTU:
		return json_integer(mtu_bytes(p->mtu));
	case F_ACCESS:
		return access_json(p->access);
	case F_GID:
		return json_string(gid_text(&p->dgid, buf));
	}
	return NULL;
}

json_t *qp_path_json(const struct qp_path *p)
{
	json_t *j = json_object();

	for (size_t i = 0; j && i < ARRAY_SIZE(fields); i++)
		if (json_object_set_new(j, fields[i].key,
					field_json(p, &fields[i]))) {
			json_decref(j);
			return NULL;
		}
	return j;
}

_printf_(3, 4) static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static const char *json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a real number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

static int parse_access(const json_t *v, unsigned int *out, char *err,
			size_t errlen)
{
	unsigned int access = 0;
	const json_t *e;
	size_t i, k;

	if (!json_is_array(v))
		return fail(err, errlen,
			    "'access' must be an array of names, not %s",
			    json_type_name(v));
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);

		if (!s)
			return fail(err, errlen,
				    "'access'[%zu] must be a string, not %s", i,
				    json_type_name(e));
		for (k = 0; k < ARRAY_SIZE(access_names); k++)
			if (streq(s, access_names[k].name))
				break;
		if (k == ARRAY_SIZE(access_names))
			return fail(err, errlen,
				    "'access'[%zu] = \"%s\" is not one of "
				    "local_write, remote_write, remote_read, "
				    "remote_atomic",
				    i, s);
		access |= access_names[k].flag;
	}
	*out = access;
	return 0;
}

static int parse_field(const struct field *f, const json_t *v,
		       struct qp_path *p, char *err, size_t errlen)
{
	json_int_t n;
	const char *s;

	switch (f->type) {
	case F_U8:
	case F_U16:
	case F_U32:
		if (!json_is_integer(v))
			return fail(err, errlen,
				    "'%s' must be an integer, not %s", f->key,
				    json_type_name(v));
		n = json_integer_value(v);
		if (n < f->min || n > f->max)
			return fail(err, errlen,
				    "'%s' = %" JSON_INTEGER_FORMAT
				    " is out of range [%" PRIu32 ", %" PRIu32
				    "]",
				    f->key, n, f->min, f->max);
		set_uint(p, f, (uint32_t)n);
		return 0;
	case F_BOOL:
		if (!json_is_boolean(v))
			return fail(err, errlen,
				    "'%s' must be true or false, not %s",
				    f->key, json_type_name(v));
		p->has_grh = json_is_true(v);
		return 0;
	case F_MTU:
		if (!json_is_integer(v))
			return fail(err, errlen,
				    "'mtu' must be an integer (bytes), not %s",
				    json_type_name(v));
		n = json_integer_value(v);
		for (size_t i = 0; i < ARRAY_SIZE(mtus); i++)
			if (mtus[i].bytes == n) {
				p->mtu = mtus[i].mtu;
				return 0;
			}
		return fail(err, errlen,
			    "'mtu' = %" JSON_INTEGER_FORMAT
			    " is not one of 256, 512, 1024, 2048, 4096",
			    n);
	case F_ACCESS:
		return parse_access(v, &p->access, err, errlen);
	case F_GID:
		s = json_string_value(v);
		if (!s)
			return fail(err, errlen,
				    "'dgid' must be a string, not %s",
				    json_type_name(v));
		if (inet_pton(AF_INET6, s, p->dgid.raw) != 1)
			return fail(err, errlen,
				    "'dgid' = \"%s\" is not a GID in IPv6 "
				    "notation (e.g. \"::ffff:192.0.2.1\")",
				    s);
		return 0;
	}
	return fail(err, errlen, "'%s': internal error", f->key);
}

static bool gid_is_zero(const union ibv_gid *g)
{
	static const union ibv_gid zero;

	return !memcmp(g->raw, zero.raw, sizeof(zero.raw));
}

int qp_path_from_json(const json_t *j, struct qp_path *p, char *err,
		      size_t errlen)
{
	struct qp_path n = *p; /* *p changes only on success */
	const json_t *grh, *v;
	const char *key;
	size_t i;
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (!json_is_object(j))
		return fail(err, errlen, "a path must be an object, not %s",
			    j ? json_type_name(j) : "nothing");

	/* json_object_foreach() needs a non-const object; it only reads. */
	json_object_foreach((json_t *)j, key, v) {
		for (i = 0; i < ARRAY_SIZE(fields); i++)
			if (streq(key, fields[i].key))
				break;
		if (i == ARRAY_SIZE(fields))
			return fail(err, errlen, "unknown key '%s'", key);
		r = parse_field(&fields[i], v, &n, err, errlen);
		if (r)
			return r;
	}

	/* A destination GID means a GRH, whatever the keys' order; an
	 * explicit has_grh = false only agrees with a zero GID. */
	if (json_object_get(j, "dgid")) {
		grh = json_object_get(j, "has_grh");
		if (!grh)
			n.has_grh = true;
		else if (json_is_false(grh) && !gid_is_zero(&n.dgid))
			return fail(err, errlen,
				    "'has_grh' is false but 'dgid' is set");
	}
	*p = n;
	return 0;
}

/* ---- endpoint documents ---- */

static int endpoint_uint(const json_t *v, const char *key, uint32_t max,
			 uint32_t *out, char *err, size_t errlen)
{
	json_int_t n;

	if (!json_is_integer(v))
		return fail(err, errlen, "'%s' must be an integer, not %s", key,
			    json_type_name(v));
	n = json_integer_value(v);
	if (n < 0 || n > max)
		return fail(err, errlen,
			    "'%s' = %" JSON_INTEGER_FORMAT
			    " is out of range [0, %" PRIu32 "]",
			    key, n, max);
	*out = (uint32_t)n;
	return 0;
}

int qp_path_from_endpoint(const json_t *ep, const char *type,
			  enum ibv_mtu local_mtu, struct qp_path *p, char *err,
			  size_t errlen)
{
	static const struct field mtu_field = { "mtu", F_MTU, 0, 0, 0 };
	struct qp_path n = *p;
	const json_t *v;
	const char *key, *s;
	uint32_t u;
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (!json_is_object(ep))
		return fail(err, errlen,
			    "an endpoint must be an object, not %s",
			    ep ? json_type_name(ep) : "nothing");
	if (!json_object_get(ep, "qp_num"))
		return fail(err, errlen, "'qp_num' is missing");
	json_object_foreach((json_t *)ep, key, v) {
		r = 0;
		if (streq(key, "qp_num")) {
			r = endpoint_uint(v, key, 0xffffff, &n.dqpn, err,
					  errlen);
		} else if (streq(key, "psn")) {
			r = endpoint_uint(v, key, 0xffffff, &n.rq_psn, err,
					  errlen);
		} else if (streq(key, "lid")) {
			r = endpoint_uint(v, key, 0xffff, &u, err, errlen);
			n.dlid = (uint16_t)u;
		} else if (streq(key, "port") || streq(key, "gid_index")) {
			/* The peer's own; checked, not used. */
			if (!json_is_null(v))
				r = endpoint_uint(v, key, 255, &u, err, errlen);
		} else if (streq(key, "mtu")) {
			r = parse_field(&mtu_field, v, &n, err, errlen);
			if (!r && local_mtu && local_mtu < n.mtu)
				n.mtu = local_mtu;
		} else if (streq(key, "gid")) {
			if (json_is_null(v)) {
				n.has_grh = false;
				memset(&n.dgid, 0, sizeof(n.dgid));
			} else if (!(s = json_string_value(v))) {
				r = fail(err, errlen,
					 "'gid' must be a string or null, "
					 "not %s",
					 json_type_name(v));
			} else if (inet_pton(AF_INET6, s, n.dgid.raw) != 1) {
				r = fail(err, errlen,
					 "'gid' = \"%s\" is not a GID", s);
			} else {
				n.has_grh = true;
			}
		} else if (streq(key, "type")) {
			s = json_string_value(v);
			if (!s)
				r = fail(err, errlen,
					 "'type' must be a string, not %s",
					 json_type_name(v));
			else if (type && !streq(s, type))
				r = fail(err, errlen,
					 "the endpoint is of a %s QP, this "
					 "one is %s",
					 s, type);
		} else {
			r = fail(err, errlen, "unknown key '%s'", key);
		}
		if (r)
			return r;
	}
	*p = n;
	return 0;
}

int qp_path_rts_mask(const json_t *j, int *mask, char *err, size_t errlen)
{
	static const struct {
		const char *key;
		int attr;
	} rts_keys[] = {
		{ "min_rnr_timer", IBV_QP_MIN_RNR_TIMER },
		{ "access", IBV_QP_ACCESS_FLAGS },
		{ "timeout", IBV_QP_TIMEOUT },
		{ "retry_cnt", IBV_QP_RETRY_CNT },
		{ "rnr_retry", IBV_QP_RNR_RETRY },
		{ "max_rd_atomic", IBV_QP_MAX_QP_RD_ATOMIC },
	};
	const char *key;
	const json_t *v;
	size_t i;

	*mask = 0;
	if (!j)
		return 0;
	if (!json_is_object(j))
		return fail(err, errlen, "a path must be an object, not %s",
			    json_type_name(j));
	json_object_foreach((json_t *)j, key, v) {
		for (i = 0; i < ARRAY_SIZE(rts_keys); i++)
			if (streq(key, rts_keys[i].key))
				break;
		if (i == ARRAY_SIZE(rts_keys))
			return fail(err, errlen,
				    "'%s' cannot change while the QP is in "
				    "RTS (only min_rnr_timer, access, timeout, "
				    "retry_cnt, rnr_retry, max_rd_atomic); "
				    "move it to reset first",
				    key);
		*mask |= rts_keys[i].attr;
	}
	return 0;
}

/* ---- path migration ---- */

const char *qp_mig_state_name(enum ibv_mig_state s)
{
	switch (s) {
	case IBV_MIG_MIGRATED:
		return "migrated";
	case IBV_MIG_REARM:
		return "rearm";
	case IBV_MIG_ARMED:
		return "armed";
	}
	return "unknown";
}

int qp_migrate(struct ibv_qp *qp, const char **failed_at)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	const char *dummy;
	int r;

	if (!failed_at)
		failed_at = &dummy;
	*failed_at = "query";
	r = ibv_query_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE,
			 &init);
	if (r)
		return verbs_err(r);
	*failed_at = "RTS->RTS";
	if (attr.qp_state != IBV_QPS_RTS)
		return -EINVAL;
	if (attr.path_mig_state == IBV_MIG_MIGRATED)
		return -ENOENT;
	attr = (struct ibv_qp_attr){ .path_mig_state = IBV_MIG_MIGRATED };
	r = ibv_modify_qp(qp, &attr, IBV_QP_PATH_MIG_STATE);
	if (r)
		return verbs_err(r);
	*failed_at = NULL;
	return 0;
}
