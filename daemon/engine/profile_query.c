// SPDX-License-Identifier: MIT
/*
 * What the rest of the engine and api/ ask of a profile (profile_index.h,
 * attach_view.h): one function per fact, so that profile_fields.h stays
 * profile*.c's. Real functions, not inline ones: a field can change
 * without its readers being built again, and the compiler refuses a
 * read that goes around them. A call per object is cheap next to what
 * the callers do with it (a kernel call, a line of text).
 */
#include "profile_fields.h"

const char *profile_name(const struct profile *p)
{
	return p->conf->name;
}

const struct conf_profile *profile_conf(const struct profile *p)
{
	return p->conf;
}

const struct conf_device *profile_device(const struct profile *p)
{
	return p->dev;
}

enum profile_state profile_state(const struct profile *p)
{
	return p->state;
}

bool profile_busy(const struct profile *p)
{
	return p->state == PROFILE_CREATING;
}

const char *profile_reason(const struct profile *p)
{
	return p->reason;
}

/* ---- the device context ---- */

struct ibv_context *profile_ctx(const struct profile *p)
{
	return p->ctx;
}

const char *profile_ibdev(const struct profile *p)
{
	return p->ibdev;
}

const char *profile_uverbs_node(const struct profile *p)
{
	bool usable = p->state == PROFILE_READY ||
		      p->state == PROFILE_DEGRADED ||
		      p->state == PROFILE_CREATING;

	return usable && p->ctx && p->ctx->device && p->ctx->device->dev_name[0]
		   ? p->ctx->device->dev_name
		   : NULL;
}

int profile_import_err(const struct profile *p)
{
	return p->import_err;
}

int profile_gid_index(const struct profile *p)
{
	return p->gid_index;
}

const union ibv_gid *profile_gid(const struct profile *p)
{
	return &p->gid;
}

void profile_set_gid(struct profile *p, int gid_index, const union ibv_gid *gid)
{
	p->gid_index = gid_index;
	if (gid)
		p->gid = *gid;
}

uint32_t profile_dev_index(const struct profile *p)
{
	return p->dev_index;
}

int64_t profile_ctxn(const struct profile *p)
{
	return p->ctxn;
}

struct asyncwatch *profile_async(const struct profile *p)
{
	return p->async;
}

void profile_set_async(struct profile *p, struct asyncwatch *w)
{
	p->async = w;
}

/* ---- its objects ---- */

size_t profile_n_objects(const struct profile *p)
{
	return p->n_objects;
}

struct object *profile_object_at(const struct profile *p, size_t i)
{
	return &p->objects[i];
}

size_t profile_kind_first(const struct profile *p, enum obj_kind k)
{
	return p->kind_start[k];
}

/* From the starts, not the configuration: a retired profile has none. */
size_t profile_kind_count(const struct profile *p, enum obj_kind k)
{
	size_t end = k + 1 < OBJ_KIND_MAX ? p->kind_start[k + 1] : p->n_objects;

	return end - p->kind_start[k];
}

size_t profile_n_draining(const struct profile *p)
{
	return p->n_draining;
}

struct object *profile_draining_at(const struct profile *p, size_t i)
{
	return &p->draining[i];
}

/* ---- the creation under way ---- */

struct workers *profile_workers(const struct profile *p)
{
	return p->build.workers;
}

const atomic_bool *profile_stop_flag(const struct profile *p)
{
	return &p->build.stop;
}

const struct profile_progress *profile_progress(const struct profile *p)
{
	return &p->build.progress;
}

/* ---- who hears of it ---- */

struct manager *profile_owner(const struct profile *p)
{
	return p->notify.owner;
}

struct events *profile_events(const struct profile *p)
{
	return p->notify.events;
}

void profile_set_events(struct profile *p, struct events *ev)
{
	p->notify.events = ev;
}

uint64_t profile_populated_said(const struct profile *p)
{
	return p->notify.populated_said;
}

void profile_set_populated_said(struct profile *p, uint64_t populated)
{
	p->notify.populated_said = populated;
}

uint64_t profile_generation(const struct profile *p)
{
	return p->notify.generation;
}

uint64_t profile_attach_generation(const struct profile *p)
{
	return p->notify.attach_generation;
}

/* ---- a restart's part ---- */

struct restored *profile_restored(const struct profile *p)
{
	return p->restart.restored;
}

bool profile_ctx_kept(const struct profile *p)
{
	return p->restart.ctx_kept;
}

bool profile_prev_tid(const struct profile *p, uint32_t tid)
{
	for (size_t i = 0; i < p->restart.n_prev_tids; i++)
		if ((uint32_t)p->restart.prev_tids[i] == tid)
			return true;
	return false;
}

bool profile_kept_scanned(const struct profile *p)
{
	return p->restart.kept_scanned;
}

size_t profile_kept_orphans(const struct profile *p)
{
	return p->restart.kept_orphans;
}

void profile_set_kept_orphans(struct profile *p, size_t n)
{
	p->restart.kept_scanned = true;
	p->restart.kept_orphans = n;
}

void profile_set_hand_over(struct profile *p, bool hand_over)
{
	p->restart.hand_over = hand_over;
}

bool profile_adopting(const struct profile *p)
{
	return p->restart.adopt != NULL;
}

json_t *profile_take_adopt(struct profile *p)
{
	return TAKE_PTR(p->restart.adopt);
}

/* ---- what became of the context ---- */

/* As strchr(): its owners read it through a const profile as well. */
struct profile_health *profile_health(const struct profile *p)
{
	return (struct profile_health *)&p->health;
}

const struct ctx_view *profile_ctx_view(const struct profile *p)
{
	return &p->health.view;
}

const struct profile_faults *profile_faults(const struct profile *p)
{
	return &p->health.faults;
}
