// SPDX-License-Identifier: MIT
#include <inttypes.h>

#include "capcheck.h"
#include "cmaddr.h"
#include "devinfo.h"
#include "verbs_spec.h"
#include "hostmem.h"
#include "hugepages.h"
#include "qpstate.h"
#include "util.h"

/* What a device takes that no attribute says: found by trying. */
struct tried {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	bool failed; /* cannot try: no such check */
	/* Inline data per QP type (RC, UC, UD): the most seen to work,
	 * and the least seen to fail (0: none yet). */
	uint32_t inline_ok[3], inline_bad[3];
};

struct caps {
	const char *ibdev;
	struct ibv_context *ctx;
	int port_num;
	struct ibv_device_attr_ex ex;
	struct ibv_port_attr port;
	int num_comp_vectors;
	struct tried *tried;
};

/* Does the device make a QP of type t with n bytes of inline data? */
static int try_inline(struct tried *tr, enum ibv_qp_type t, uint32_t n)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = tr->cq,
		.recv_cq = tr->cq,
		.qp_type = t,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = n },
	};
	struct ibv_qp *qp = ibv_create_qp(tr->pd, &ia);

	if (!qp)
		return -errno;
	ibv_destroy_qp(qp);
	return 0;
}

/*
 * max_inline_data is no device attribute: a device refuses a QP that asks
 * too much. A throwaway QP of the same type (on a PD and CQ of this check)
 * tells; when it fails, halving finds the most the device takes, for the
 * message. Results are kept per type: a file of many QPs costs a few
 * QPs.
 */
static void check_inline(struct config *c, const struct caps *caps,
			 const struct conf_qp *q)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC,
						  IBV_QPT_UD };
	struct tried *tr = caps->tried;
	uint32_t n = q->cap.max_inline_data, lo, hi;
	int k = q->type == QPK_RC ? 0 : q->type == QPK_UC ? 1
				       : q->type == QPK_UD ? 2
							   : -1;

	/* XRC and raw packet QPs need more than a PD and a CQ to try. */
	if (!n || k < 0 || !tr)
		return;
	if (!tr->pd && !tr->failed) {
		tr->pd = ibv_alloc_pd(caps->ctx);
		tr->cq = tr->pd ? ibv_create_cq(caps->ctx, 2, NULL, NULL, 0)
				: NULL;
		tr->failed = !tr->cq;
	}
	if (tr->failed || n <= tr->inline_ok[k])
		return;
	if (!tr->inline_bad[k] || n < tr->inline_bad[k]) {
		int r = try_inline(tr, types[k], n);

		if (r == 0) {
			tr->inline_ok[k] = n;
			return;
		}
		if (r != -EINVAL && r != -ENOMEM)
			return; /* not about the size: creation will say */
		tr->inline_bad[k] = n;
		/* The most it takes, between what worked and n. */
		lo = tr->inline_ok[k];
		hi = n;
		while (hi - lo > 1) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (try_inline(tr, types[k], mid) == 0)
				lo = mid;
			else
				hi = mid;
		}
		tr->inline_ok[k] = lo;
		tr->inline_bad[k] = hi;
	}
	config_add_error(c, q->loc,
			 "qp '%s': max_inline_data %" PRIu32 " is above the "
			 "%" PRIu32 " bytes that %s takes for a %s QP",
			 q->name, n, tr->inline_ok[k], caps->ibdev,
			 q->type == QPK_RC ? "rc" : q->type == QPK_UC ? "uc"
								      : "ud");
}

#define OVER(c, loc, what, name, key, v, max)                                  \
	do {                                                                   \
		if ((uint64_t)(v) > (uint64_t)(max))                           \
			config_add_error(c, loc,                               \
					 "%s '%s': %s %" PRIu64                \
					 " is above the %" PRIu64              \
					 " that %s supports",                  \
					 what, name, key, (uint64_t)(v),       \
					 (uint64_t)(max), caps->ibdev);        \
	} while (0)

static void check_qp(struct config *c, const struct caps *caps,
		     const struct conf_qp *q)
{
	const struct ibv_device_attr *a = &caps->ex.orig_attr;

	OVER(c, q->loc, "qp", q->name, "max_send_wr", q->cap.max_send_wr,
	     a->max_qp_wr);
	OVER(c, q->loc, "qp", q->name, "max_recv_wr", q->cap.max_recv_wr,
	     a->max_qp_wr);
	OVER(c, q->loc, "qp", q->name, "max_send_sge", q->cap.max_send_sge,
	     a->max_sge);
	OVER(c, q->loc, "qp", q->name, "max_recv_sge", q->cap.max_recv_sge,
	     a->max_sge);
	if (q->path && q->path->port_num > 0)
		OVER(c, q->loc, "qp", q->name, "path port_num",
		     q->path->port_num, a->phys_port_cnt);
	if (q->path && q->path->sgid_index >= 0)
		OVER(c, q->loc, "qp", q->name, "path sgid_index",
		     q->path->sgid_index, caps->port.gid_tbl_len - 1);
	/* RDMA reads and atomics in flight, as initiator and as target. */
	if (q->path && q->path->max_rd_atomic >= 0)
		OVER(c, q->loc, "qp", q->name, "path max_rd_atomic",
		     q->path->max_rd_atomic, a->max_qp_init_rd_atom);
	if (q->path && q->path->max_dest_rd_atomic >= 0)
		OVER(c, q->loc, "qp", q->name, "path max_dest_rd_atomic",
		     q->path->max_dest_rd_atomic, a->max_qp_rd_atom);
	if ((q->access & IBV_ACCESS_REMOTE_ATOMIC) &&
	    a->atomic_cap == IBV_ATOMIC_NONE)
		config_add_error(c, q->loc,
				 "qp '%s': access remote_atomic, but %s has "
				 "no atomic operations",
				 q->name, caps->ibdev);
	if (q->pkey >= 0 &&
	    ibv_get_pkey_index(caps->ctx, (uint8_t)caps->port_num,
			       htobe16((uint16_t)q->pkey)) < 0)
		config_add_error(c, q->loc,
				 "qp '%s': pkey 0x%04x is not in the P_Key "
				 "table of %s port %d",
				 q->name, q->pkey, caps->ibdev, caps->port_num);
	if (q->alt_path && caps->port.link_layer != IBV_LINK_LAYER_INFINIBAND)
		config_add_error(c, q->loc, "qp '%s': %s", q->name,
				 QP_ALT_PATH_IB_ONLY);
	check_inline(c, caps, q);
}

/* A target listens on an address of its profile's device and port. */
static void check_target(struct config *c, const struct caps *caps,
			 int port, const struct conf_target *t)
{
	struct sockaddr_storage ss;
	char ibdev[64];
	int r, on_port = 0;

	if (!t->listen || config_parse_sockaddr(t->listen, &ss) < 0)
		return;
	r = cmaddr_device((struct sockaddr *)&ss, ibdev, sizeof(ibdev),
			  &on_port);
	if (r == -EADDRNOTAVAIL)
		config_add_error(c, t->loc,
				 "target '%s': listen %s is not an address of "
				 "any RDMA device (the profile's is %s port "
				 "%d)",
				 t->name, t->listen, caps->ibdev, port);
	else if (!r && (!streq(ibdev, caps->ibdev) || on_port != port))
		config_add_error(c, t->loc,
				 "target '%s': listen %s is on %s port %d, not "
				 "on the profile's device %s port %d",
				 t->name, t->listen, ibdev, on_port,
				 caps->ibdev, port);
}

static void check_profile(struct config *c, const struct caps *caps,
			  int port, const struct conf_profile *pr)
{
	const struct ibv_device_attr *a = &caps->ex.orig_attr;

	for (size_t i = 0; i < pr->n_objs[OBJ_MEMORY]; i++) {
		const struct conf_memory *m = conf_obj(pr, OBJ_MEMORY, i);

		OVER(c, m->loc, "memory", m->name, "size", m->size,
		     a->max_mr_size);
	}
	for (size_t i = 0; i < pr->n_objs[OBJ_MR]; i++) {
		const struct conf_mr *m = conf_obj(pr, OBJ_MR, i);

		if (m->length)
			OVER(c, m->loc, "mr", m->name, "length", m->length,
			     a->max_mr_size);
		if ((m->access & IBV_ACCESS_REMOTE_ATOMIC) &&
		    a->atomic_cap == IBV_ATOMIC_NONE)
			config_add_error(c, m->loc,
					 "mr '%s': access remote_atomic, but "
					 "%s has no atomic operations",
					 m->name, caps->ibdev);
		if (m->odp &&
		    !(caps->ex.odp_caps.general_caps & IBV_ODP_SUPPORT))
			config_add_error(c, m->loc,
					 "mr '%s': odp, but %s has no on-demand "
					 "paging (its odp_caps say none)",
					 m->name, caps->ibdev);
		else if (m->odp && !m->memory && !m->dm &&
			 !(caps->ex.odp_caps.general_caps &
			   IBV_ODP_SUPPORT_IMPLICIT))
			config_add_error(c, m->loc,
					 "mr '%s': implicit on-demand paging "
					 "(odp without memory), but %s pages "
					 "on demand only over given memory",
					 m->name, caps->ibdev);
	}
	for (size_t i = 0; i < pr->n_objs[OBJ_CQ]; i++) {
		const struct conf_cq *q = conf_obj(pr, OBJ_CQ, i);

		OVER(c, q->loc, "cq", q->name, "cqe", q->cqe, a->max_cqe);
		OVER(c, q->loc, "cq", q->name, "comp_vector", q->comp_vector,
		     caps->num_comp_vectors - 1);
	}
	for (size_t i = 0; i < pr->n_objs[OBJ_SRQ]; i++) {
		const struct conf_srq *q = conf_obj(pr, OBJ_SRQ, i);

		OVER(c, q->loc, "srq", q->name, "max_wr", q->max_wr,
		     a->max_srq_wr);
		OVER(c, q->loc, "srq", q->name, "max_sge", q->max_sge,
		     a->max_srq_sge);
	}
	for (size_t i = 0; i < pr->n_objs[OBJ_QP]; i++)
		check_qp(c, caps, conf_obj(pr, OBJ_QP, i));
	/* A device without device memory fails its dm objects at run
	 * time; one with some has a size limit. */
	for (size_t i = 0; caps->ex.max_dm_size && i < pr->n_objs[OBJ_DM];
	     i++) {
		const struct conf_dm *d = conf_obj(pr, OBJ_DM, i);

		OVER(c, d->loc, "dm", d->name, "size", d->size,
		     caps->ex.max_dm_size);
	}
	for (size_t i = 0; i < pr->n_objs[OBJ_TARGET]; i++)
		check_target(c, caps, port, conf_obj(pr, OBJ_TARGET, i));
	for (size_t i = 0; i < pr->n_objs[OBJ_AH]; i++) {
		const struct conf_ah *h = conf_obj(pr, OBJ_AH, i);

		if (h->sgid_index >= 0)
			OVER(c, h->loc, "ah", h->name, "sgid_index",
			     h->sgid_index, caps->port.gid_tbl_len - 1);
	}
}

/* What a device's absence leaves unchecked, said once per device. */
static void say_skipped(const struct config *c, const struct conf_device *d,
			FILE *f)
{
	size_t n = 0;

	for (size_t k = 0; k < c->n_profiles; k++)
		n += c->profiles[k].device &&
		     streq(c->profiles[k].device, d->name);
	fprintf(f,
		"rdmad: device '%s' is not present: the limits, GID indexes "
		"and target addresses of its %zu profile%s were not checked "
		"against it (they are when it appears)\n",
		d->name, n, n == 1 ? "" : "s");
}

void capcheck_config(struct config *c, FILE *skipped)
{
	for (size_t i = 0; i < c->n_devices; i++) {
		const struct conf_device *d = &c->devices[i];
		struct ibv_context *ctx;
		char ibdev[64];
		struct tried tried = { 0 };
		struct caps caps = { .ibdev = ibdev };

		if (devmatch_find(devmatch_of(d), ibdev,
				  sizeof(ibdev)) < 0) {
			/* Absent: checked when it appears. */
			if (skipped)
				say_skipped(c, d, skipped);
			continue;
		}
		ctx = devinfo_open(ibdev);
		if (!ctx)
			continue;
		caps.ctx = ctx;
		caps.port_num = d->port;
		caps.num_comp_vectors = ctx->num_comp_vectors;
		if (ibv_query_device_ex(ctx, NULL, &caps.ex)) {
			ibv_close_device(ctx);
			continue;
		}
		if ((unsigned int)d->port > caps.ex.orig_attr.phys_port_cnt) {
			config_add_error(c, d->loc,
					 "device '%s': port %d is above the %u "
					 "ports of %s",
					 d->name, d->port,
					 caps.ex.orig_attr.phys_port_cnt,
					 ibdev);
			ibv_close_device(ctx);
			continue;
		}
		if (ibv_query_port(ctx, (uint8_t)d->port, &caps.port)) {
			ibv_close_device(ctx);
			continue;
		}
		if (d->gid_index >= caps.port.gid_tbl_len)
			config_add_error(c, d->loc,
					 "device '%s': gid index %d is above "
					 "the GID table of %s port %d (%d "
					 "entries)",
					 d->name, d->gid_index, ibdev, d->port,
					 caps.port.gid_tbl_len);
		caps.tried = &tried;
		for (size_t k = 0; k < c->n_profiles; k++)
			if (c->profiles[k].device &&
			    streq(c->profiles[k].device, d->name))
				check_profile(c, &caps, d->port,
					      &c->profiles[k]);
		if (tried.cq)
			ibv_destroy_cq(tried.cq);
		if (tried.pd)
			ibv_dealloc_pd(tried.pd);
		ibv_close_device(ctx);
	}
}

/* One huge page size's pool, as the file's hugetlb memory uses it. */
struct pool_use {
	uint64_t page_size, need, free;
	int err; /* of reading the pool */
	bool said;
};

/* A memory the host can never hold, or huge pages it will not give. */
static void check_host_memory(struct config *c, const struct conf_memory *m,
			      const struct hostmem *h)
{
	char policy[32];
	bool shmem = m->backing == MEM_MEMFD;

	if (h->ram && m->backing != MEM_HUGETLB && m->size > h->ram + h->swap)
		config_add_error(c, m->loc,
				 "memory '%s': size %" PRIu64 " is more than "
				 "this host's RAM and swap together (%" PRIu64
				 " + %" PRIu64 " bytes)",
				 m->name, m->size, h->ram, h->swap);
	if (m->thp != CONF_TRUE)
		return;
	hostmem_thp_policy(shmem, policy, sizeof(policy));
	if (!policy[0])
		config_add_error(c, m->loc,
				 "memory '%s': thp = true, but this kernel "
				 "has no transparent huge pages",
				 m->name);
	else if (!hostmem_thp_usable(shmem, policy))
		config_add_error(
			c, m->loc,
			"memory '%s': thp = true, but this host's transparent "
			"huge pages for %s are \"%s\" "
			"(/sys/kernel/mm/transparent_hugepage/%s): write "
			"%s there, or leave thp out",
			m->name, shmem ? "shmem (memfd)" : "anonymous memory",
			policy, shmem ? "shmem_enabled" : "enabled",
			shmem ? "advise" : "madvise");
}

void capcheck_memory(struct config *c)
{
	struct hostmem host;
	uint64_t dflt = hugepages_default_size();
	struct pool_use pools[8] = { { 0 } };
	size_t n_pools = 0;
	char why[256], label[16];

	(void)hostmem_read(&host);
	for (size_t k = 0; k < c->n_profiles; k++) {
		const struct conf_profile *pr = &c->profiles[k];

		for (size_t i = 0; i < pr->n_objs[OBJ_MEMORY]; i++) {
			const struct conf_memory *m =
				conf_obj(pr, OBJ_MEMORY, i);
			uint64_t page = m->page_size ? m->page_size : dflt;
			struct pool_use *u = NULL;

			check_host_memory(c, m, &host);
			if (m->backing != MEM_HUGETLB)
				continue;
			if (!page) {
				config_add_error(c, m->loc,
						 "memory '%s': this host has no "
						 "huge pages",
						 m->name);
				continue;
			}
			if (m->size % page) {
				config_add_error(c, m->loc,
						 "memory '%s': size %" PRIu64
						 " is not a multiple of the "
						 "host's huge page size %s",
						 m->name, m->size,
						 hugepages_label(page, label,
								 sizeof(label)));
				continue;
			}
			for (size_t p = 0; p < n_pools && !u; p++)
				if (pools[p].page_size == page)
					u = &pools[p];
			if (!u && n_pools < ARRAY_SIZE(pools)) {
				uint64_t total;

				u = &pools[n_pools++];
				u->page_size = page;
				u->err = hugepages_pool(page, &u->free, &total);
			}
			if (!u)
				continue;
			u->need += m->size / page;
			/* Said once per pool, at the memory it runs out. */
			if (u->said || (!u->err && u->need <= u->free))
				continue;
			u->said = true;
			config_add_error(c, m->loc, "memory '%s': %s", m->name,
					 hugepages_shortage(page, u->need, why,
							    sizeof(why)));
		}
	}
}
