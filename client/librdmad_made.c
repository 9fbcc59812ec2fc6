// SPDX-License-Identifier: MIT
/*
 * What this process makes in a shared profile's context, told to the
 * daemon (MADE, proto/PROTOCOL.md) so that it destroys it by handle
 * once the process is gone: the kernel links no QP, CQ or SRQ of a
 * shared context to its maker's handle.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "librdmad_internal.h"
#include "made.h"
#include "util.h"

/* Tell the daemon (and wait for its answer). */
static int tell(struct rdmad_profile *p, const struct proto_made_obj *o,
		bool undo)
{
	struct proto_msg req, ans;
	int r;

	if (!p || !p->conn)
		return client_set_error(EINVAL, "no profile");
	if (p->mode != RDMAD_MODE_SHARED)
		return client_set_error(EINVAL,
					"profile %s is attached in local mode: "
					"its objects die with this process",
					p->name);
	r = client_request_msg(&req, PROTO_MADE,
			       proto_made_encode(p->attachment, undo, o, 1));
	if (r < 0)
		return r;
	r = client_conn_send(p->conn, &req);
	if (r == 0)
		r = client_conn_set_timeout(p->conn, CLIENT_TIMEOUT_MS);
	if (r == 0)
		r = client_conn_await(p->conn, req.id, "MADE", &ans);
	proto_msg_clear(&req);
	if (r == 0)
		proto_msg_clear(&ans);
	return r;
}

int rdmad_made(struct rdmad_profile *p, enum rdmad_made_kind kind,
	       void *obj, unsigned int flags)
{
	struct proto_made_obj o = { 0 };

	if (!obj || (flags & ~RDMAD_MADE_UNDO))
		return client_set_error(EINVAL, "rdmad_made: no object, or "
						"unknown flags");
	switch (kind) {
	case RDMAD_MADE_QP:
		o.kind = PROTO_MADE_QP;
		o.handle = ((struct ibv_qp *)obj)->handle;
		o.qp_num = ((struct ibv_qp *)obj)->qp_num;
		break;
	case RDMAD_MADE_CQ:
		o.kind = PROTO_MADE_CQ;
		o.handle = ((struct ibv_cq *)obj)->handle;
		break;
	case RDMAD_MADE_SRQ:
		o.kind = PROTO_MADE_SRQ;
		o.handle = ((struct ibv_srq *)obj)->handle;
		break;
	default:
		return client_set_error(EINVAL, "rdmad_made: unknown kind %d",
					(int)kind);
	}
	return tell(p, &o, flags & RDMAD_MADE_UNDO);
}

struct ibv_cq *rdmad_create_cq(struct rdmad_profile *p, int cqe,
			       void *cq_context,
			       struct ibv_comp_channel *channel,
			       int comp_vector)
{
	struct ibv_cq *cq;
	int e;

	if (!p || !p->ctx) {
		client_set_error(EINVAL, "no profile context");
		return NULL;
	}
	cq = ibv_create_cq(p->ctx, cqe, cq_context, channel, comp_vector);
	if (!cq) {
		client_set_error(errno, "ibv_create_cq: %s", strerror(errno));
		return NULL;
	}
	e = rdmad_made(p, RDMAD_MADE_CQ, cq, 0);
	if (e < 0) {
		ibv_destroy_cq(cq);
		errno = -e;
		return NULL;
	}
	return cq;
}

struct ibv_qp *rdmad_create_qp(struct rdmad_profile *p, struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr)
{
	struct ibv_qp *qp;
	int e;

	if (!p || !pd || !attr) {
		client_set_error(EINVAL, "no profile, PD or attributes");
		return NULL;
	}
	qp = ibv_create_qp(pd, attr);
	if (!qp) {
		client_set_error(errno, "ibv_create_qp: %s", strerror(errno));
		return NULL;
	}
	e = rdmad_made(p, RDMAD_MADE_QP, qp, 0);
	if (e < 0) {
		ibv_destroy_qp(qp);
		errno = -e;
		return NULL;
	}
	return qp;
}

struct ibv_srq *rdmad_create_srq(struct rdmad_profile *p, struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr)
{
	struct ibv_srq *srq;
	int e;

	if (!p || !pd || !attr) {
		client_set_error(EINVAL, "no profile, PD or attributes");
		return NULL;
	}
	srq = ibv_create_srq(pd, attr);
	if (!srq) {
		client_set_error(errno, "ibv_create_srq: %s", strerror(errno));
		return NULL;
	}
	e = rdmad_made(p, RDMAD_MADE_SRQ, srq, 0);
	if (e < 0) {
		ibv_destroy_srq(srq);
		errno = -e;
		return NULL;
	}
	return srq;
}

/*
 * Taken back before it is destroyed, so that its handle, given to the
 * next object made in the context, is not taken for ours. The object
 * goes even if the daemon cannot be told (it is gone: nothing of ours
 * is kept then); the first error is returned.
 */
int rdmad_destroy_qp(struct rdmad_profile *p, struct ibv_qp *qp)
{
	int r = rdmad_made(p, RDMAD_MADE_QP, qp, RDMAD_MADE_UNDO);
	int e = qp ? ibv_destroy_qp(qp) : 0;

	return r < 0 ? r : -e;
}

int rdmad_destroy_cq(struct rdmad_profile *p, struct ibv_cq *cq)
{
	int r = rdmad_made(p, RDMAD_MADE_CQ, cq, RDMAD_MADE_UNDO);
	int e = cq ? ibv_destroy_cq(cq) : 0;

	return r < 0 ? r : -e;
}

int rdmad_destroy_srq(struct rdmad_profile *p, struct ibv_srq *srq)
{
	int r = rdmad_made(p, RDMAD_MADE_SRQ, srq, RDMAD_MADE_UNDO);
	int e = srq ? ibv_destroy_srq(srq) : 0;

	return r < 0 ? r : -e;
}
