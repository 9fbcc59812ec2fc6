// SPDX-License-Identifier: MIT
/*
 * Memory and what maps it: memory, device memory, memory regions and
 * memory windows, each kind's table (kinds.h).
 */
#include <stdio.h>
#include <sys/stat.h>

#include "access.h"
#include "hugepages.h"
#include "kinds.h"
#include "log.h"
#include "objects.h"
#include "restore.h"
#include "verbs_spec.h"

/* ---- memory ---- */

static int memory_obj_create(struct profile *p, struct object *o)
{
	const struct conf_memory *c = o->conf;
	struct memory_spec m = memory_of(c);
	char key[256], why[256];
	int r;

	/* The key under which a restart finds it again (fd store). */
	snprintf(key, sizeof(key), "%s/%s", profile_name(p), c->name);
	r = memory_create_keyed(&m, key, profile_stop_flag(p), &o->u.mem, why,
				sizeof(why));
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

static void memory_reset(struct object *o)
{
	o->u.mem.fd = -1;
}

static void memory_json_unready(const struct object *o, json_t *j)
{
	/* Its job only ever sets the stats it shares, atomically. */
	if (o->state == OBJ_CREATING)
		memory_progress_json(o, j);
}

static enum attach_part memory_attach(struct profile *p _unused_,
				      const struct object *o,
				      bool shared _unused_)
{
	return o->u.mem.fd >= 0 ? PART_MEMORY : PART_NONE;
}

const struct object_kind kind_memory = {
	.kind = OBJ_MEMORY,
	.parents = 0,
	.uverbs = UH_KINDS,
	.netlink = RDMANL_KINDS,
	.on_loop = false,
	.kept_by_restart = false,
	.reset = memory_reset,
	.create = memory_obj_create,
	.connect = kind_no_connect,
	.start = kind_no_start,
	.destroy = memory_obj_destroy,
	.take_over = kind_no_take_over,
	.hand_over = kind_no_hand_over,
	.drain = kind_no_drain,
	.held_handles = kind_no_held_handles,
	.lose = kind_never_lost,
	.handle = kind_no_handle,
	.json = memory_json,
	.json_unready = memory_json_unready,
	.identity = kind_no_json,
	.attach = memory_attach,
};

/* ---- dm ---- */

static int dm_create(struct profile *p, struct object *o)
{
	const struct conf_dm *c = o->conf;
	struct ibv_alloc_dm_attr attr = { .length = c->size };

	o->u.dm = ibv_alloc_dm(profile_ctx(p), &attr);
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

static void dm_json(const struct object *o, json_t *j)
{
	const struct conf_dm *c = o->conf;

	SET_INT(j, "handle", o->u.dm->handle);
	SET_INT(j, "size", c->size);
}

static void dm_lose(struct object *o)
{
	if (o->u.dm)
		ibv_unimport_dm(o->u.dm);
}

static bool dm_handle(const struct object *o, uint32_t *h)
{
	return o->u.dm && (*h = o->u.dm->handle, true);
}

/* The context's: imported in shared mode (ibv_import_dm), out of reach
 * in local. */
static enum attach_part dm_attach(struct profile *p _unused_,
				  const struct object *o _unused_, bool shared)
{
	return shared ? PART_DM : PART_NONE;
}

const struct object_kind kind_dm = {
	.kind = OBJ_DM,
	.parents = 0,
	.uverbs = UH_DM,
	.netlink = RDMANL_KINDS,
	.on_loop = false,
	.kept_by_restart = false,
	.reset = kind_no_reset,
	.create = dm_create,
	.connect = kind_no_connect,
	.start = kind_no_start,
	.destroy = dm_destroy,
	.take_over = kind_no_take_over,
	.hand_over = kind_no_hand_over,
	.drain = kind_no_drain,
	.held_handles = kind_no_held_handles,
	.lose = dm_lose,
	.handle = dm_handle,
	.json = dm_json,
	.json_unready = kind_no_json,
	.identity = kind_no_json,
	.attach = dm_attach,
};

/* ---- mr ---- */

/* An mr over device memory: offsets into it, from IOVA 0. */
static int dm_mr_create(struct profile *p, struct object *o,
			struct object *pd)
{
	const struct conf_mr *c = o->conf;
	struct object *dm = object_dep(p, o, OBJ_DM, c->dm);
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
	struct object *pd = object_dep(p, o, OBJ_PD, c->pd);
	struct object *mem;

	if (pd && c->dm)
		return dm_mr_create(p, o, pd);
	if (pd && !c->memory)
		return implicit_mr_create(o, pd);
	mem = pd ? object_dep(p, o, OBJ_MEMORY, c->memory) : NULL;
	struct restore_mr_was was;
	uint64_t len;
	char *addr;

	if (!mem)
		return -o->err;
	addr = (char *)mem->u.mem.addr + c->offset;
	len = c->length ? c->length : mem->u.mem.size - c->offset;
	/* The previous run's MR, when nothing about it changed and its
	 * memory came back too: same pages, same keys (restore.h). */
	if (restore_claimed(profile_restored(p), "pd", c->pd) &&
	    mem->u.mem.kept &&
	    restore_mr(profile_restored(p), c->name,
		       &(struct restore_mr){.pd = c->pd,
					    .memory = c->memory,
					    .offset = c->offset,
					    .length = len,
					    .access = c->access,
					    .zero_based = c->zero_based},
		       &was)) {
		o->u.mr.mr = ibv_import_mr(pd->u.pd, was.handle);
		if (o->u.mr.mr && mr_is(o->u.mr.mr, &was)) {
			restore_claim(profile_restored(p), "mr", c->name);
			o->u.mr.iova = was.iova;
			o->u.mr.restored = true;
			o->u.mr.stats = memory_stats_hold(&mem->u.mem, len);
			return 0;
		}
		log_warn(o->u.mr.mr ? 0 : -errno,
			 "profile %s: mr %s of the previous run (handle %u) "
			 "cannot be taken back%s; registering it again",
			 profile_name(p), c->name, was.handle,
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

static void mr_hand_over(struct object *o)
{
	if (o->u.mr.mr)
		ibv_unimport_mr(o->u.mr.mr);
}

static void mr_lose(struct object *o)
{
	uint64_t len;

	if (!o->u.mr.mr)
		return;
	len = o->u.mr.mr->length;
	ibv_unimport_mr(o->u.mr.mr);
	memory_stats_release(TAKE_PTR(o->u.mr.stats), len);
}

static bool mr_handle(const struct object *o, uint32_t *h)
{
	return o->u.mr.mr && (*h = o->u.mr.mr->handle, true);
}

/* A draining MR: which kernel object it is (the incarnation that
 * drains, maybe beside a running one of its name). */
static void mr_json_unready(const struct object *o, json_t *j)
{
	const struct ibv_mr *mr;

	/* Only then: while it is created, its job owns o->u. */
	if (o->state != OBJ_DRAINING)
		return;
	mr = o->u.mr.mr;
	if (!mr)
		return;
	SET_INT(j, "handle", mr->handle);
	SET_INT(j, "lkey", mr->lkey);
	SET_INT(j, "rkey", mr->rkey);
	SET_INT(j, "length", mr->length);
}

static void mr_identity(const struct object *o, json_t *j)
{
	json_object_set_new(j, "lkey", json_integer(o->u.mr.mr->lkey));
	json_object_set_new(j, "rkey", json_integer(o->u.mr.mr->rkey));
}

static enum attach_part mr_attach(struct profile *p, const struct object *o,
				  bool shared)
{
	const struct conf_mr *mr = o->conf;
	struct object *m;

	if (mr->dm)
		return shared ? PART_DM_MR : PART_NONE;
	/* Implicit: the daemon's covers the daemon's memory. */
	if (!mr->memory)
		return PART_IMPLICIT_MR;
	m = profile_find(p, OBJ_MEMORY, mr->memory);
	/* Anonymous memory is not shareable. */
	return m && m->u.mem.fd >= 0 ? PART_MR : PART_NONE;
}

const struct object_kind kind_mr = {
	.kind = OBJ_MR,
	.parents = KIND_BIT(OBJ_PD) | KIND_BIT(OBJ_MEMORY) | KIND_BIT(OBJ_DM),
	.uverbs = UH_MR,
	.netlink = RDMANL_MR,
	.on_loop = false,
	.kept_by_restart = true,
	.reset = kind_no_reset,
	.create = mr_create,
	.connect = kind_no_connect,
	.start = kind_no_start,
	.destroy = mr_destroy,
	.take_over = kind_no_take_over,
	.hand_over = mr_hand_over,
	.drain = kind_no_drain,
	.held_handles = kind_no_held_handles,
	.lose = mr_lose,
	.handle = mr_handle,
	.json = mr_json,
	.json_unready = mr_json_unready,
	.identity = mr_identity,
	.attach = mr_attach,
};

/* ---- mw ---- */

static int mw_create(struct profile *p, struct object *o)
{
	const struct conf_mw *c = o->conf;
	struct object *pd = object_dep(p, o, OBJ_PD, c->pd);

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

static void mw_json(const struct object *o, json_t *j)
{
	const struct conf_mw *c = o->conf;

	SET_INT(j, "handle", o->u.mw->handle);
	SET_STR(j, "pd", c->pd);
	SET_INT(j, "type", c->type);
	SET_INT(j, "rkey", o->u.mw->rkey);
}

static void mw_lose(struct object *o)
{
	object_keep_remains(o->u.mw);
}

static bool mw_handle(const struct object *o, uint32_t *h)
{
	return o->u.mw && (*h = o->u.mw->handle, true);
}

static void mw_identity(const struct object *o, json_t *j)
{
	json_object_set_new(j, "rkey", json_integer(o->u.mw->rkey));
}

const struct object_kind kind_mw = {
	.kind = OBJ_MW,
	.parents = KIND_BIT(OBJ_PD),
	.uverbs = UH_MW,
	.netlink = RDMANL_KINDS,
	.on_loop = false,
	.kept_by_restart = false,
	.reset = kind_no_reset,
	.create = mw_create,
	.connect = kind_no_connect,
	.start = kind_no_start,
	.destroy = mw_destroy,
	.take_over = kind_no_take_over,
	.hand_over = kind_no_hand_over,
	.drain = kind_no_drain,
	.held_handles = kind_no_held_handles,
	.lose = mw_lose,
	.handle = mw_handle,
	.json = mw_json,
	.json_unready = kind_no_json,
	.identity = mw_identity,
	.attach = kind_not_attached,
};
