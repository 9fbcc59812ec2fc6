// SPDX-License-Identifier: MIT
/*
 * An object's uverbs handle, and letting go of an object whose kernel
 * part someone else destroyed (reconcile.h).
 */
#include "memory.h"
#include "objects.h"

/*
 * rdma-core keeps an XRC domain's handle in its struct verbs_xrcd
 * (<infiniband/driver.h>, which Debian does not ship): the public
 * struct ibv_xrcd, a comp_mask, then the handle. Mirrored here, read
 * only.
 */
struct xrcd_mirror {
	struct ibv_xrcd xrcd;
	uint32_t comp_mask;
	uint32_t handle;
};

bool object_handle(const struct object *o, enum uhandle_kind *k, uint32_t *h)
{
	const void *v = NULL;

	switch (o->kind) {
	case OBJ_PD:
		if ((v = o->u.pd))
			*h = o->u.pd->handle, *k = UH_PD;
		break;
	case OBJ_MR:
		if ((v = o->u.mr.mr))
			*h = o->u.mr.mr->handle, *k = UH_MR;
		break;
	case OBJ_MW:
		if ((v = o->u.mw))
			*h = o->u.mw->handle, *k = UH_MW;
		break;
	case OBJ_CQ:
		if ((v = o->u.cq.cq))
			*h = o->u.cq.cq->handle, *k = UH_CQ;
		break;
	case OBJ_SRQ:
		if ((v = o->u.srq))
			*h = o->u.srq->handle, *k = UH_SRQ;
		break;
	case OBJ_QP:
		if ((v = o->u.qp.qp))
			*h = o->u.qp.qp->handle, *k = UH_QP;
		break;
	case OBJ_AH:
		if ((v = o->u.ah))
			*h = o->u.ah->handle, *k = UH_AH;
		break;
	case OBJ_DM:
		if ((v = o->u.dm))
			*h = o->u.dm->handle, *k = UH_DM;
		break;
	case OBJ_XRCD:
		if ((v = o->u.xrcd.xrcd))
			*h = ((const struct xrcd_mirror *)v)->handle,
			*k = UH_XRCD;
		break;
	default:
		break;
	}
	return v != NULL;
}

/*
 * What the provider made for a handle someone else destroyed. Its
 * destroy call cannot be used: it sends the handle to the kernel, which
 * by then may have given it to another object of the file (another
 * process's). Where the provider can let go of an object without the
 * kernel (an unimport), it does; the rest is kept here, reachable and
 * never used again, for the daemon's life: a few hundred bytes per
 * object a client destroyed.
 */
static void **remains;
static size_t n_remains;

static void keep_remains(void *v)
{
	void **n = v ? realloc(remains, (n_remains + 1) * sizeof(*n)) : NULL;

	if (n) {
		remains = n;
		remains[n_remains++] = v;
	}
}

void object_lose(struct object *o)
{
	switch (o->kind) {
	case OBJ_PD:
		if (o->u.pd)
			ibv_unimport_pd(o->u.pd);
		break;
	case OBJ_MR:
		if (o->u.mr.mr) {
			uint64_t len = o->u.mr.mr->length;

			ibv_unimport_mr(o->u.mr.mr);
			memory_stats_release(TAKE_PTR(o->u.mr.stats), len);
		}
		break;
	case OBJ_DM:
		if (o->u.dm)
			ibv_unimport_dm(o->u.dm);
		break;
	case OBJ_CQ:
		/* Its channel counts the CQ in user space: it stays too. */
		keep_remains(o->u.cq.cq);
		keep_remains(o->u.cq.channel);
		break;
	case OBJ_XRCD:
		keep_remains(o->u.xrcd.xrcd);
		closep(&o->u.xrcd.fd);
		break;
	case OBJ_MW:
		keep_remains(o->u.mw);
		break;
	case OBJ_SRQ:
		keep_remains(o->u.srq);
		break;
	case OBJ_QP:
		keep_remains(o->u.qp.qp);
		break;
	case OBJ_AH:
		keep_remains(o->u.ah);
		break;
	default:
		/* Not a kernel object of the context: never lost. */
		return;
	}
	object_forget(o);
	o->leases = 0;
}
