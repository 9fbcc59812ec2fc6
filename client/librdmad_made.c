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

/* Destroy obj of kind k (0 or the verbs' errno). */
static int destroy(enum rdmad_made_kind k, void *obj)
{
	switch (k) {
	case RDMAD_MADE_QP:
		return ibv_destroy_qp(obj);
	case RDMAD_MADE_CQ:
		return ibv_destroy_cq(obj);
	case RDMAD_MADE_SRQ:
		return ibv_destroy_srq(obj);
	}
	return EINVAL;
}

/* obj, just made by what (NULL: it failed), told to the daemon; when it
 * cannot be, destroyed again: NULL, errno set. */
static void *handed(struct rdmad_profile *p, enum rdmad_made_kind k,
		    void *obj, const char *what)
{
	int e;

	if (!obj) {
		e = errno;
		client_set_error(e, "%s: %s", what, strerror(e));
		errno = e;
		return NULL;
	}
	e = rdmad_made(p, k, obj, 0);
	if (e == 0)
		return obj;
	destroy(k, obj);
	errno = -e;
	return NULL;
}

struct ibv_cq *rdmad_create_cq(struct rdmad_profile *p, int cqe,
			       void *cq_context,
			       struct ibv_comp_channel *channel,
			       int comp_vector)
{
	if (!p || !p->ctx) {
		errno = -client_set_error(EINVAL, "no profile context");
		return NULL;
	}
	return handed(p, RDMAD_MADE_CQ,
		      ibv_create_cq(p->ctx, cqe, cq_context, channel,
				    comp_vector),
		      "ibv_create_cq");
}

struct ibv_qp *rdmad_create_qp(struct rdmad_profile *p, struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr)
{
	if (!p || !pd || !attr) {
		errno = -client_set_error(EINVAL, "no profile, PD or "
						  "attributes");
		return NULL;
	}
	return handed(p, RDMAD_MADE_QP, ibv_create_qp(pd, attr),
		      "ibv_create_qp");
}

struct ibv_srq *rdmad_create_srq(struct rdmad_profile *p, struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr)
{
	if (!p || !pd || !attr) {
		errno = -client_set_error(EINVAL, "no profile, PD or "
						  "attributes");
		return NULL;
	}
	return handed(p, RDMAD_MADE_SRQ, ibv_create_srq(pd, attr),
		      "ibv_create_srq");
}

/*
 * Taken back before it is destroyed, so that its handle, given to the
 * next object made in the context, is not taken for ours. The object
 * goes even if the daemon cannot be told (it is gone: nothing of ours
 * is kept then); the first error is returned.
 */
static int taken_back(struct rdmad_profile *p, enum rdmad_made_kind k,
		      void *obj)
{
	int r = rdmad_made(p, k, obj, RDMAD_MADE_UNDO);
	int e = obj ? destroy(k, obj) : 0;

	return r < 0 ? r : -e;
}

int rdmad_destroy_qp(struct rdmad_profile *p, struct ibv_qp *qp)
{
	return taken_back(p, RDMAD_MADE_QP, qp);
}

int rdmad_destroy_cq(struct rdmad_profile *p, struct ibv_cq *cq)
{
	return taken_back(p, RDMAD_MADE_CQ, cq);
}

int rdmad_destroy_srq(struct rdmad_profile *p, struct ibv_srq *srq)
{
	return taken_back(p, RDMAD_MADE_SRQ, srq);
}
