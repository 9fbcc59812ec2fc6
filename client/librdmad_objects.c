// SPDX-License-Identifier: MIT
/*
 * librdmad: the objects of an attached profile that a program asks for
 * by name (rdmad_pd, rdmad_mr, rdmad_qp_num, ...), and those made on
 * first request (a DM MR imported, an implicit MR registered, an XRC
 * domain opened, a QP opened in it).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "librdmad_internal.h"
#include "mr_table.h"
#include "util.h"

static struct client_pd *find_pd(struct rdmad_profile *p, const char *name)
{
	size_t i;

	if (!p || !name) {
		errno = -client_set_error(EINVAL, "no profile or no name");
		return NULL;
	}
	for (i = 0; i < p->n_pd; i++)
		if (streq(p->pd[i].name, name))
			return &p->pd[i];
	errno = -client_set_error(ENOENT, "profile '%s' has no pd '%s'",
				  p->name, name);
	return NULL;
}

static int no_mr(struct rdmad_profile *p, const char *name)
{
	errno = -client_set_error(ENOENT,
				  "profile '%s' has no mr '%s' that can be "
				  "shared (MRs on anonymous memory cannot)",
				  p->name, name);
	return -errno;
}

static int bad_table(struct rdmad_profile *p, const char *why)
{
	errno = -client_set_error(EPROTO,
				  "rdmad's MR table of profile '%s' is "
				  "malformed: %s",
				  p->name, why);
	return -errno;
}

/* Entry i of the MR table, read into a client_mr (once: then kept). */
static struct client_mr *table_mr(struct rdmad_profile *p, uint32_t i)
{
	struct proto_mr_entry e;
	struct client_memory *mem;
	struct client_mr *mr;
	const char *name;
	int r;

	HASH_FIND(hh, p->mrt_read, &i, sizeof(i), mr);
	if (mr)
		return mr;
	r = proto_mr_table_at(p->mrt, p->mrt_len, i, p->n_pd, p->n_mem, &e,
			      &name);
	if (r < 0) {
		bad_table(p, "an entry is out of its bounds");
		return NULL;
	}
	/* As the decoder checks the list's: within its memory. */
	mem = client_memory(p, e.memory);
	if (!mem) {
		errno = EPROTO;
		return NULL;
	}
	if (e.offset > mem->size || e.length > mem->size - e.offset) {
		bad_table(p, "an mr does not fit its memory");
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = -client_set_error(ENOMEM, "out of memory");
		return NULL;
	}
	*mr = (struct client_mr){
		.name = (char *)name, .table = true, .entry = i,
		.pd = e.pd, .memory = e.memory, .handle = e.handle,
		.rkey = e.rkey, .offset = e.offset, .length = e.length,
		.zero_based = e.flags & PROTO_MR_ZERO_BASED,
		.odp = e.flags & PROTO_MR_ODP,
		.iova = e.flags & PROTO_MR_ZERO_BASED ? 0 : e.iova,
		.access = e.access,
	};
	HASH_ADD(hh, p->mrt_read, entry, sizeof(mr->entry), mr);
	return mr;
}

static struct client_mr *find_mr(struct rdmad_profile *p, const char *name)
{
	int64_t i;

	if (!p || !name) {
		errno = -client_set_error(EINVAL, "no profile or no name");
		return NULL;
	}
	if (p->mrt) {
		i = proto_mr_table_find(p->mrt, p->mrt_len, name);
		if (i == -EPROTO)
			bad_table(p, "its index is out of its bounds");
		else if (i < 0)
			no_mr(p, name);
		return i < 0 ? NULL : table_mr(p, (uint32_t)i);
	}
	for (size_t k = 0; k < p->n_mr; k++)
		if (streq(p->mr[k].name, name))
			return &p->mr[k];
	no_mr(p, name);
	return NULL;
}

void client_table_mrs_free(struct rdmad_profile *p)
{
	struct client_mr *mr, *tmp;

	HASH_ITER(hh, p->mrt_read, mr, tmp) {
		HASH_DEL(p->mrt_read, mr);
		if (mr->mr)
			ibv_unimport_mr(mr->mr);
		free(mr);
	}
}

/* Shared mode: the daemon's PD in this process, imported when first
 * needed (ibv_import_pd(3)). */
static struct ibv_pd *pd_import(struct rdmad_profile *p, struct client_pd *pd)
{
	if (pd->pd || p->mode != RDMAD_MODE_SHARED)
		return pd->pd;
	errno = 0;
	pd->pd = ibv_import_pd(p->ctx, pd->handle);
	if (!pd->pd)
		errno = -client_set_error(errno ? errno : EIO,
					  "cannot import pd '%s' (handle "
					  "%u): %s",
					  pd->name, pd->handle,
					  strerror(errno ? errno : EIO));
	return pd->pd;
}

/* The daemon's MR of that handle on pd, imported and checked against
 * what rdmad announced of it (a handle that names another MR than
 * announced is EPROTO); NULL with errno set. */
static struct ibv_mr *import_checked(struct ibv_pd *pd, const char *name,
				     const char *over, uint32_t handle,
				     uint32_t rkey, uint64_t length)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_import_mr(pd, handle);
	if (!mr && errno == ENOENT) {
		/* Destroyed through the shared context since rdmad last
		 * looked: rdmad makes it again, under a new handle. */
		errno = -client_set_error(ESTALE,
					  "mr '%s'%s (handle %u) is gone from "
					  "the kernel: rdmad makes it again; "
					  "attach again",
					  name, over, handle);
		return NULL;
	}
	if (!mr) {
		int e = errno ? errno : EIO;

		errno = -client_set_error(e,
					  "cannot import mr '%s'%s (handle "
					  "%u): %s",
					  name, over, handle, strerror(e));
		return NULL;
	}
	if (mr->rkey != rkey || mr->length != length) {
		errno = -client_set_error(
		    EPROTO,
		    "mr '%s'%s (handle %u) imports with rkey %u and %zu "
		    "bytes, rdmad announced rkey %u and %llu bytes",
		    name, over, handle, mr->rkey, mr->length, rkey,
		    (unsigned long long)length);
		ibv_unimport_mr(mr);
		return NULL;
	}
	return mr;
}

/* Shared mode: the daemon's MR in this process, imported when first
 * asked for, and checked against what rdmad announced. */
static struct ibv_mr *mr_import(struct rdmad_profile *p, struct client_mr *mr)
{
	struct ibv_pd *pd;
	void *addr;

	if (mr->mr || p->mode != RDMAD_MODE_SHARED)
		return mr->mr;
	if (mr->stale) {
		errno = -client_set_error(ESTALE,
					  "mr '%s' was removed or changed by "
					  "a reload after the attach: attach "
					  "again for what rdmad has now",
					  mr->name);
		return NULL;
	}
	/* Its memory mapped first: nothing to undo if that fails. */
	addr = client_mr_addr(p, mr);
	pd = addr ? pd_import(p, &p->pd[mr->pd]) : NULL;
	mr->mr = pd ? import_checked(pd, mr->name, "", mr->handle, mr->rkey,
				     mr->length)
		    : NULL;
	if (!mr->mr)
		return NULL;
	/* Imported MRs carry no address: give ours, as ibv_reg_mr would. */
	mr->mr->addr = addr;
	return mr->mr;
}

void client_object_drained(struct rdmad_profile *p, const json_t *event)
{
	const char *kind = json_string_value(json_object_get(event, "kind"));
	const char *name = json_string_value(json_object_get(event, "name"));
	struct client_mr *mr;

	if (!p || !kind || !name || !streq(kind, "mr") ||
	    p->mode != RDMAD_MODE_SHARED)
		return;
	mr = find_mr(p, name);
	/* Imported: it stays usable, draining, until the detach. */
	if (mr && !mr->mr)
		mr->stale = true;
}

enum rdmad_mode rdmad_mode(struct rdmad_profile *p)
{
	if (!p) {
		errno = -client_set_error(EINVAL, "rdmad_mode: no profile");
		return 0;
	}
	return p->mode;
}

struct ibv_context *rdmad_context(struct rdmad_profile *p)
{
	if (!p) {
		errno = -client_set_error(EINVAL, "rdmad_context: no profile");
		return NULL;
	}
	return p->ctx;
}

int rdmad_port(struct rdmad_profile *p)
{
	return p ? p->port : client_set_error(EINVAL, "rdmad_port: no profile");
}

int rdmad_gid_index(struct rdmad_profile *p)
{
	return p ? p->gid_index
		 : client_set_error(EINVAL, "rdmad_gid_index: no profile");
}

struct ibv_pd *rdmad_pd(struct rdmad_profile *p, const char *name)
{
	struct client_pd *pd = find_pd(p, name);

	return pd ? pd_import(p, pd) : NULL;
}

static struct ibv_mr *dm_mr_import(struct rdmad_profile *p,
				   struct client_dm_mr *mr)
{
	if (mr->mr)
		return mr->mr;
	if (!pd_import(p, &p->pd[mr->pd]))
		return NULL;
	mr->mr =
	    import_checked(p->pd[mr->pd].pd, mr->name, " over device memory",
			   mr->handle, mr->rkey, mr->length);
	return mr->mr;
}

static struct ibv_mr *imr_register(struct rdmad_profile *p,
				   struct client_imr *mr)
{
	if (mr->mr)
		return mr->mr;
	if (!pd_import(p, &p->pd[mr->pd]))
		return NULL;
	errno = 0;
	mr->mr = ibv_reg_mr(p->pd[mr->pd].pd, NULL, SIZE_MAX,
			    mr->access | IBV_ACCESS_ON_DEMAND);
	if (!mr->mr)
		errno = -client_set_error(errno ? errno : EIO,
					  "cannot register implicit mr '%s' "
					  "(on-demand paging over the whole "
					  "address space): %s",
					  mr->name,
					  strerror(errno ? errno : EIO));
	return mr->mr;
}

struct ibv_mr *rdmad_mr(struct rdmad_profile *p, const char *name)
{
	struct client_mr *mr;

	/* Over device memory: imported when first asked for. */
	for (size_t i = 0; p && name && i < p->n_dm_mr; i++)
		if (streq(p->dm_mr[i].name, name))
			return dm_mr_import(p, &p->dm_mr[i]);
	/* Implicit: registered here, over this process's address space. */
	for (size_t i = 0; p && name && i < p->n_imr; i++)
		if (streq(p->imr[i].name, name))
			return imr_register(p, &p->imr[i]);
	mr = find_mr(p, name);
	return mr ? mr_import(p, mr) : NULL;
}

struct ibv_dm *rdmad_dm(struct rdmad_profile *p, const char *name)
{
	struct client_dm *d = NULL;

	for (size_t i = 0; p && name && i < p->n_dm; i++)
		if (streq(p->dm[i].name, name))
			d = &p->dm[i];
	if (!d) {
		errno = -client_set_error(
			ENOENT,
			"profile '%s' has no ready dm '%s'%s", p ? p->name : "NULL",
			name ? name : "NULL",
			p && p->mode == RDMAD_MODE_LOCAL
				? " in local mode (device memory is the "
				  "daemon's context's: attach in shared mode)"
				: "");
		return NULL;
	}
	if (d->dm)
		return d->dm;
	errno = 0;
	d->dm = ibv_import_dm(p->ctx, d->handle);
	if (!d->dm)
		errno = -client_set_error(errno ? errno : EIO,
					  "cannot import dm '%s' (handle %u): "
					  "%s",
					  name, d->handle,
					  strerror(errno ? errno : EIO));
	return d->dm;
}

const char *rdmad_pd_name(struct rdmad_profile *p, size_t i)
{
	return p && i < p->n_pd ? p->pd[i].name : NULL;
}

const char *rdmad_mr_name(struct rdmad_profile *p, size_t i)
{
	struct proto_mr_entry e;
	const char *name;

	if (p && p->mrt)
		return i < p->mrt_count &&
			       proto_mr_table_at(p->mrt, p->mrt_len,
						 (uint32_t)i, p->n_pd,
						 p->n_mem, &e, &name) == 0
			   ? name
			   : NULL;
	return p && i < p->n_mr ? p->mr[i].name : NULL;
}

void *rdmad_mr_map(struct rdmad_profile *p, const char *name, size_t *len)
{
	struct client_mr *mr = find_mr(p, name);

	if (!mr)
		return NULL;
	if (len)
		*len = mr->length;
	return client_mr_addr(p, mr);
}

uint64_t rdmad_mr_iova(struct rdmad_profile *p, const char *name)
{
	struct client_mr *mr = find_mr(p, name);

	return mr ? mr->iova : 0;
}

uint32_t rdmad_mr_rkey(struct rdmad_profile *p, const char *name)
{
	struct client_mr *mr = find_mr(p, name);

	return mr ? mr->rkey : 0;
}

static struct client_num *find_num(struct rdmad_profile *p, const char *kind,
				   const char *name)
{
	struct client_num *list = NULL;
	size_t n = 0;

	if (!p || !name) {
		errno = -client_set_error(EINVAL, "no profile or no name");
		return NULL;
	}
	list = streq(kind, "qp") ? p->qp : p->srq;
	n = streq(kind, "qp") ? p->n_qp : p->n_srq;
	for (size_t i = 0; i < n; i++)
		if (streq(list[i].name, name))
			return &list[i];
	errno = -client_set_error(ENOENT, "profile '%s' has no ready %s '%s'",
				  p->name, kind, name);
	return NULL;
}

uint32_t rdmad_qp_num(struct rdmad_profile *p, const char *name)
{
	struct client_num *q = find_num(p, "qp", name);

	return q ? q->num : 0;
}

uint32_t rdmad_srq_num(struct rdmad_profile *p, const char *name)
{
	struct client_num *q = find_num(p, "srq", name);

	if (q && !q->has_num) {
		errno = -client_set_error(EINVAL,
					  "srq '%s' is not an XRC SRQ: it has "
					  "no srq_num",
					  name);
		return 0;
	}
	return q ? q->num : 0;
}

struct ibv_qp *rdmad_open_qp(struct rdmad_profile *p, const char *name)
{
	struct client_num *q = find_num(p, "qp", name);
	struct ibv_qp_open_attr attr = { .qp_type = IBV_QPT_XRC_RECV };
	struct ibv_xrcd *xrcd;
	struct ibv_qp *qp;

	if (!q)
		return NULL;
	if (!q->xrc || !q->xrcd) {
		errno = -client_set_error(EINVAL,
					  "qp '%s' is not an XRC target QP "
					  "(xrc_recv): only those can be "
					  "opened",
					  name);
		return NULL;
	}
	xrcd = rdmad_xrcd(p, q->xrcd);
	if (!xrcd)
		return NULL;
	attr.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			 IBV_QP_OPEN_ATTR_TYPE;
	attr.qp_num = q->num;
	attr.xrcd = xrcd;
	qp = ibv_open_qp(p->ctx, &attr);
	if (!qp)
		errno = -client_set_error(errno, "ibv_open_qp '%s' (qpn %u): %s",
					  name, q->num, strerror(errno));
	return qp;
}

struct ibv_xrcd *rdmad_xrcd(struct rdmad_profile *p, const char *name)
{
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.oflags = 0, /* the daemon's domain: open, never create */
	};
	struct client_xrcd *x = NULL;

	for (size_t i = 0; p && name && i < p->n_xrcd; i++)
		if (streq(p->xrcd[i].name, name))
			x = &p->xrcd[i];
	if (!x) {
		errno = -client_set_error(ENOENT,
					  "profile '%s' shares no xrcd '%s'",
					  p ? p->name : "NULL",
					  name ? name : "NULL");
		return NULL;
	}
	if (x->xrcd)
		return x->xrcd;
	/* The same inode: the same XRC domain as the daemon's. */
	attr.fd = x->fd;
	x->xrcd = ibv_open_xrcd(p->ctx, &attr);
	if (!x->xrcd)
		errno = -client_set_error(errno, "ibv_open_xrcd '%s': %s", name,
					  strerror(errno));
	return x->xrcd;
}

