// SPDX-License-Identifier: MIT
/*
 * The domains: XRC domains and protection domains, each kind's table
 * (kinds.h).
 */
#include <fcntl.h>
#include <stdio.h>

#include "kinds.h"
#include "log.h"
#include "objects.h"
#include "restore.h"

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
	o->u.xrcd.xrcd = ibv_open_xrcd(profile_ctx(p), &attr);
	if (!o->u.xrcd.xrcd) {
		int err = errno;

		closep(&o->u.xrcd.fd);
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

static void xrcd_json(const struct object *o, json_t *j)
{
	const struct conf_xrcd *c = o->conf;

	SET_STR(j, "file", c->file);
}

static void xrcd_reset(struct object *o)
{
	o->u.xrcd.fd = -1;
}

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

static bool xrcd_handle(const struct object *o, uint32_t *h)
{
	const struct xrcd_mirror *x = (const void *)o->u.xrcd.xrcd;

	return x && (*h = x->handle, true);
}

static void xrcd_lose(struct object *o)
{
	object_keep_remains(o->u.xrcd.xrcd);
	closep(&o->u.xrcd.fd);
}

static enum attach_part xrcd_attach(struct profile *p _unused_,
				    const struct object *o,
				    bool shared _unused_)
{
	return ((const struct conf_xrcd *)o->conf)->file ? PART_XRCD
							 : PART_NONE;
}

const struct object_kind kind_xrcd = {
	.kind = OBJ_XRCD,
	.parents = 0,
	.uverbs = UH_XRCD,
	.netlink = RDMANL_KINDS,
	.on_loop = false,
	.kept_by_restart = false,
	.reset = xrcd_reset,
	.create = xrcd_create,
	.connect = kind_no_connect,
	.start = kind_no_start,
	.destroy = xrcd_destroy,
	.take_over = kind_no_take_over,
	.hand_over = kind_no_hand_over,
	.drain = kind_no_drain,
	.held_handles = kind_no_held_handles,
	.lose = xrcd_lose,
	.handle = xrcd_handle,
	.json = xrcd_json,
	.json_unready = kind_no_json,
	.identity = kind_no_json,
	.attach = xrcd_attach,
};

/* ---- pd ---- */

static int pd_create(struct profile *p, struct object *o)
{
	uint32_t handle;
	bool kept;

	/* The previous run's, by handle (restore.h): its MRs' keys too. */
	o->u.pd = restore_pd(profile_restored(p), profile_ctx(p),
			     object_name(o), &handle, &kept);
	if (o->u.pd)
		return 0;
	if (kept)
		log_warn(-errno,
			 "profile %s: pd %s of the previous run "
			 "(handle %u) cannot be taken back; making "
			 "it again",
			 profile_name(p), object_name(o), handle);
	o->u.pd = ibv_alloc_pd(profile_ctx(p));
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

static void pd_json(const struct object *o, json_t *j)
{
	SET_INT(j, "handle", o->u.pd->handle);
}

/* Handed over, or lost: the kernel's PD is not ours to free. */
static void pd_unimport(struct object *o)
{
	if (o->u.pd)
		ibv_unimport_pd(o->u.pd);
}

static bool pd_handle(const struct object *o, uint32_t *h)
{
	return o->u.pd && (*h = o->u.pd->handle, true);
}

/* A draining PD: which kernel object it is (the incarnation that
 * drains, maybe beside a running one of its name). */
static void pd_json_unready(const struct object *o, json_t *j)
{
	if (o->state == OBJ_DRAINING && o->u.pd)
		SET_INT(j, "handle", o->u.pd->handle);
}

static enum attach_part pd_attach(struct profile *p _unused_,
				  const struct object *o _unused_,
				  bool shared _unused_)
{
	return PART_PD;
}

const struct object_kind kind_pd = {
	.kind = OBJ_PD,
	.parents = 0,
	.uverbs = UH_PD,
	.netlink = RDMANL_PD,
	.on_loop = false,
	.kept_by_restart = true,
	.reset = kind_no_reset,
	.create = pd_create,
	.connect = kind_no_connect,
	.start = kind_no_start,
	.destroy = pd_destroy,
	.take_over = kind_no_take_over,
	.hand_over = pd_unimport,
	.drain = kind_no_drain,
	.held_handles = kind_no_held_handles,
	.lose = pd_unimport,
	.handle = pd_handle,
	.json = pd_json,
	.json_unready = pd_json_unready,
	.identity = kind_no_json,
	.attach = pd_attach,
};
