// SPDX-License-Identifier: MIT
/*
 * ATTACHED as the engine sees it (attach_view.h): which object goes into
 * it in a mode and how, the document, the fds and the leases. The
 * document and the view come from walks over the objects in the same
 * order, so that an fd's index in the document is its place in the
 * message.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "attach_view.h"
#include "attached.h"
#include "kinds.h"
#include "mcast.h"
#include "mr_table.h"
#include "objects.h"
#include "profile_index.h"

static enum attach_part attach_part(struct profile *p, const struct object *o,
				    bool shared)
{
	if (o->state != OBJ_READY)
		return PART_NONE;
	return object_kind(o->kind)->attach(p, o, shared);
}

/* Whether the client reaches o (a ready QP or SRQ) by number, so that it
 * must not go under it (leased): an XRC target QP (ibv_open_qp() in its
 * XRC domain) or an XRC SRQ. */
static bool number_leased(const struct object *o)
{
	if (o->kind == OBJ_QP)
		return ((const struct conf_qp *)o->conf)->type == QPK_XRC_RECV;
	return ((const struct conf_srq *)o->conf)->type == SRQK_XRC;
}

/* Whether the client holds what a part names, so that it must not go
 * under it (a lease). An implicit MR is the client's own, on the
 * profile's PD. */
static bool attach_leased(const struct object *o, enum attach_part part)
{
	if (part == PART_NUMBER)
		return number_leased(o);
	return part != PART_NONE && part != PART_IMPLICIT_MR;
}

/* Counted, then filled: each list's room, by part. */
struct fill {
	struct proto_attached *a;
	size_t n[PART_MCAST + 1];
	int n_fds;
	bool memory_fds; /* the memories' fds go with the document */
};

static int fill_alloc(struct fill *f)
{
	struct proto_attached *a = f->a;

#define ROOM(list, part)                                                       \
	(a->list = calloc(f->n[part] ? f->n[part] : 1, sizeof(*a->list)))
	if (!ROOM(memory, PART_MEMORY) || !ROOM(xrcd, PART_XRCD) ||
	    !ROOM(pd, PART_PD) || !ROOM(qp, PART_NUMBER) ||
	    !ROOM(srq, PART_NUMBER) || !ROOM(dm, PART_DM) ||
	    !ROOM(dm_mr, PART_DM_MR) || !ROOM(implicit_mr, PART_IMPLICIT_MR) ||
	    !ROOM(mr, PART_MR) || !ROOM(mcast, PART_MCAST))
		return -ENOMEM;
#undef ROOM
	return 0;
}

/* An MR (over memory or device memory) as ATTACHED gives it. */
static int fill_mr(struct proto_att_mr *m, const struct object *o)
{
	const struct conf_mr *c = o->conf;
	const struct ibv_mr *mr = o->u.mr.mr;

	*m = (struct proto_att_mr){
		.name = strdup(object_name(o)), .pd = strdup(c->pd),
		.memory = c->memory ? strdup(c->memory) : NULL,
		.dm = c->dm ? strdup(c->dm) : NULL,
		.handle = mr->handle, .lkey = mr->lkey, .rkey = mr->rkey,
		.length = mr->length, .offset = c->offset,
		.iova = o->u.mr.iova, .zero_based = c->zero_based || c->dm,
		.odp = c->odp, .access = c->access,
	};
	return m->name && m->pd && (m->memory || m->dm) ? 0 : -ENOMEM;
}

static int fill_number(struct proto_attached *a, const struct object *o)
{
	uint32_t num;

	if (o->kind == OBJ_QP) {
		const struct conf_qp *c = o->conf;
		struct proto_att_qp *q = &a->qp[a->n_qp++];

		*q = (struct proto_att_qp){
			.name = strdup(object_name(o)),
			.type = strdup(qp_kind_name(c->type)),
			.has_qp_num = true,
			.qp_num = o->u.qp.qp->qp_num,
			.xrcd = c->xrcd ? strdup(c->xrcd) : NULL,
		};
		return q->name && q->type && (q->xrcd || !c->xrcd) ? 0
								  : -ENOMEM;
	}
	struct proto_att_srq *q = &a->srq[a->n_srq++];

	*q = (struct proto_att_srq){
		.name = strdup(object_name(o)),
		.type = strdup(srq_kind_name(
			((const struct conf_srq *)o->conf)->type)),
	};
	if (!ibv_get_srq_num(o->u.srq, &num)) {
		q->has_srq_num = true;
		q->srq_num = num;
	}
	return q->name && q->type ? 0 : -ENOMEM;
}

/* An object of the profile as its part of ATTACHED. */
static int fill_part(struct fill *f, const struct object *o,
		     enum attach_part part)
{
	struct proto_attached *a = f->a;
	const char *name = object_name(o);

	switch (part) {
	case PART_MEMORY: {
		const struct conf_memory *c = o->conf;
		struct proto_att_memory *m = &a->memory[a->n_memory++];

		*m = (struct proto_att_memory){
		    .name = strdup(name),
		    .size = c->size,
		    .backing = strdup(mem_backing_name(c->backing)),
		    .has_fd = f->memory_fds,
		    .fd = f->memory_fds ? (uint64_t)f->n_fds++ : 0,
		};
		return m->name && m->backing ? 0 : -ENOMEM;
	}
	case PART_XRCD: {
		struct proto_att_xrcd *x = &a->xrcd[a->n_xrcd++];

		*x = (struct proto_att_xrcd){
			.name = strdup(name),
			.file = strdup(((const struct conf_xrcd *)o->conf)->file),
			.fd = (uint64_t)f->n_fds++,
		};
		return x->name && x->file ? 0 : -ENOMEM;
	}
	case PART_PD:
		a->pd[a->n_pd] = (struct proto_att_pd){
			.name = strdup(name), .handle = o->u.pd->handle
		};
		return a->pd[a->n_pd++].name ? 0 : -ENOMEM;
	case PART_NUMBER:
		return fill_number(a, o);
	case PART_DM:
		a->dm[a->n_dm] = (struct proto_att_dm){
			.name = strdup(name), .handle = o->u.dm->handle,
			.size = ((const struct conf_dm *)o->conf)->size,
		};
		return a->dm[a->n_dm++].name ? 0 : -ENOMEM;
	case PART_DM_MR:
		return fill_mr(&a->dm_mr[a->n_dm_mr++], o);
	case PART_MR:
		return fill_mr(&a->mr[a->n_mr++], o);
	case PART_IMPLICIT_MR: {
		const struct conf_mr *c = o->conf;
		struct proto_att_imr *m = &a->implicit_mr[a->n_implicit_mr++];

		*m = (struct proto_att_imr){ .name = strdup(name),
					     .pd = strdup(c->pd),
					     .access = c->access };
		return m->name && m->pd ? 0 : -ENOMEM;
	}
	case PART_MCAST:
		a->mcast[a->n_mcast].name = strdup(name);
		if (!a->mcast[a->n_mcast].name)
			return -ENOMEM;
		return mcast_attached(o->u.mcast, &a->mcast[a->n_mcast++]);
	default:
		return 0;
	}
}

int profile_attach_fill(struct profile *p, unsigned int how,
			struct proto_attached *a)
{
	bool shared = how & ATTACH_SHARED;
	struct fill f = {.a = a,
			 .n_fds = shared,
			 .memory_fds = !(how & ATTACH_NO_MEMORY_FDS)};
	int import_err = profile_import_err(p);
	size_t n = profile_n_objects(p);
	int r;

	/* The context's cmd_fd is the message's first fd. */
	*a = (struct proto_attached){
	    .profile = strdup(profile_name(p)),
	    .mode = shared ? PROTO_ATTACH_SHARED : PROTO_ATTACH_LOCAL,
	    .ibdev = strdup(profile_ibdev(p)),
	    .port = (uint64_t)profile_device(p)->port,
	    .gid_index = (uint64_t)profile_gid_index(p),
	    .has_import_capable = true,
	    .import_capable = !import_err,
	    .import_error = import_err ? strdup(errno_desc(-import_err)) : NULL,
	    .has_cmd_fd = shared,
	    .cmd_fd = 0,
	};
	if (!a->profile || !a->ibdev || (import_err && !a->import_error))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		f.n[attach_part(p, profile_object_at(p, i), shared)]++;
	r = fill_alloc(&f);
	for (size_t i = 0; r == 0 && i < n; i++) {
		const struct object *o = profile_object_at(p, i);

		r = fill_part(&f, o, attach_part(p, o, shared));
	}
	return r;
}

char *profile_attach_text(struct profile *p, unsigned int how, size_t *len)
{
	struct proto_attached a;
	char *text = NULL;

	if (profile_attach_fill(p, how, &a) < 0 ||
	    proto_attached_encode(&a, PROTO_ATTACHED_NO_ID, &text, len) < 0)
		text = NULL;
	proto_attached_free(&a);
	return text;
}

int profile_attach_table(struct profile *p, unsigned int how, char **text,
			 size_t *len, void **table, size_t *table_len)
{
	struct proto_attached a;
	int r = profile_attach_fill(p, how | ATTACH_SHARED, &a);

	*text = NULL;
	*table = NULL;
	if (r == 0)
		r = proto_mr_table_encode(&a, table, table_len);
	if (r == 0) {
		size_t n_mr = a.n_mr, n_memory = a.n_memory;
		bool memories = how & ATTACH_MEMORY_TABLE;

		/* The list is in the table now: left out of the text (and
		 * put back for the free), and so are the memories if the
		 * client reads them there. The table's memfd comes after
		 * every fd the lists name: the context's, the memories'
		 * (unless asked for one by one), the XRC domains'. */
		a.n_mr = 0;
		a.has_mr_table = true;
		a.mr_table = (struct proto_att_mr_table){
		    .fd = 1 + a.n_xrcd +
			  (how & ATTACH_NO_MEMORY_FDS ? 0 : a.n_memory),
		    .count = n_mr,
		    .size = *table_len,
		    .has_memories = memories,
		    .memories = memories ? n_memory : 0,
		};
		/* Their fds, if they come, one after the other from the
		 * first memory's (a profile's objects are by kind, memories
		 * first: nothing comes between them). */
		if (memories && !(how & ATTACH_NO_MEMORY_FDS) && n_memory) {
			a.mr_table.has_memory_fd = true;
			a.mr_table.memory_fd = a.memory[0].fd;
			for (size_t i = 0; i < n_memory; i++)
				if (a.memory[i].fd != a.memory[0].fd + i)
					r = -EINVAL;
		}
		if (memories)
			a.n_memory = 0;
		if (r == 0)
			r = proto_attached_encode(&a, PROTO_ATTACHED_NO_ID,
						  text, len);
		a.n_mr = n_mr;
		a.n_memory = n_memory;
	}
	proto_attached_free(&a);
	if (r < 0) {
		free(*table);
		*table = NULL;
	}
	return r;
}

void attach_view_clear(struct attach_view *v)
{
	for (size_t i = 0; i < v->n_opened; i++)
		close(v->opened[i]);
	free(v->fds);
	free(v->opened);
	free(v->leases);
	*v = (struct attach_view){ 0 };
}

int profile_attach_view(struct profile *p, unsigned int how,
			struct attach_view *v)
{
	bool shared = how & ATTACH_SHARED;
	/* The context's cmd_fd, each object's, and room for an MR
	 * table's memfd (the caller's). */
	size_t n_objects = profile_n_objects(p), n = n_objects + 2;

	*v = (struct attach_view){.mode = shared ? 0 : 1};
	v->fds = malloc(n * sizeof(*v->fds));
	v->opened = malloc(n * sizeof(*v->opened));
	v->leases = malloc(n * sizeof(*v->leases));
	if (!v->fds || !v->opened || !v->leases) {
		attach_view_clear(v);
		return -ENOMEM;
	}
	if (shared)
		v->fds[v->n_fds++] = profile_ctx(p)->cmd_fd;
	for (size_t i = 0; i < n_objects; i++) {
		struct object *o = profile_object_at(p, i);
		enum attach_part part = attach_part(p, o, shared);
		int fd;

		if (part == PART_MEMORY && !(how & ATTACH_NO_MEMORY_FDS)) {
			v->fds[v->n_fds++] = o->u.mem.fd;
		} else if (part == PART_XRCD) {
			fd = open(((const struct conf_xrcd *)o->conf)->file,
				  O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			if (fd < 0) {
				int r = -errno;

				attach_view_clear(v);
				return r;
			}
			v->opened[v->n_opened++] = fd;
			v->fds[v->n_fds++] = fd;
		}
		if (attach_leased(o, part))
			v->leases[v->n_leases++] = (struct attach_lease){
				o->kind, object_name(o), o->serial, o
			};
	}
	return 0;
}

void attach_view_lease(struct profile *p, const struct attach_view *v)
{
	profile_hold(p, v->mode, v->leases, v->n_leases);
}

/* ---- what the control layer asks before an attach ---- */

size_t profile_memories(const struct profile *p)
{
	return profile_kind_count(p, OBJ_MEMORY);
}

/* Ready, and with a GID: a port whose GID table lost every entry the
 * profile's gid settings match (its address went) has none to give;
 * ATTACHED says a GID index, never -1. */
bool profile_attachable(const struct profile *p)
{
	enum profile_state s = profile_state(p);

	return profile_ctx(p) && profile_gid_index(p) >= 0 &&
	       (s == PROFILE_READY || s == PROFILE_DEGRADED);
}

bool profile_failed(const struct profile *p)
{
	return profile_state(p) == PROFILE_FAILED;
}

bool profile_settled_state(const struct profile *p)
{
	enum profile_state s = profile_state(p);

	return s == PROFILE_READY || s == PROFILE_DEGRADED ||
	       s == PROFILE_FAILED;
}

char *profile_state_sentence(const struct profile *p)
{
	const struct profile_progress *g = profile_progress(p);
	enum profile_state s = profile_state(p);
	const char *reason = profile_reason(p);
	char progress[96] = "", *text;
	int r;

	if (s == PROFILE_CREATING)
		snprintf(progress, sizeof(progress),
			 " (%zu of %zu objects, %llu of %llu bytes)",
			 g->objects, g->objects_total,
			 (unsigned long long)g->bytes,
			 (unsigned long long)g->bytes_total);
	if (profile_ctx(p) && profile_gid_index(p) < 0 &&
	    (s == PROFILE_READY || s == PROFILE_DEGRADED))
		r = asprintf(
		    &text,
		    "profile '%s' has no GID: no entry of %s port %d's "
		    "GID table matches its gid settings (now)",
		    profile_name(p), profile_ibdev(p), profile_device(p)->port);
	else
		r = asprintf(&text, "profile '%s' is %s%s%s%s", profile_name(p),
			     profile_state_name(s), progress,
			     reason ? ": " : "", reason ? reason : "");
	return r < 0 ? NULL : text;
}

bool profile_admits(const struct profile *p, uid_t uid, gid_t gid,
		    const gid_t *groups, size_t n_groups, bool admit_root)
{
	const struct conf_profile *c = profile_conf(p);

	if (uid == 0 && admit_root)
		return true;
	for (size_t i = 0; i < c->n_admit_uids; i++)
		if (c->admit_uids[i] == uid)
			return true;
	for (size_t i = 0; i < c->n_admit_gids; i++) {
		if (c->admit_gids[i] == gid)
			return true;
		for (size_t k = 0; k < n_groups; k++)
			if (groups[k] == c->admit_gids[i])
				return true;
	}
	return false;
}
