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
#include "objects.h"
#include "profile_index.h"

/* How an object goes into ATTACHED, in one mode. */
enum attach_part {
	PART_NONE,	  /* not in ATTACHED */
	PART_MEMORY,	  /* "memory", with its fd */
	PART_XRCD,	  /* "xrcd", with an fd of its file (shared by inode) */
	PART_PD,	  /* "pd", by handle */
	PART_NUMBER,	  /* "qp" or "srq", by number */
	PART_DM,	  /* "dm", imported in shared mode */
	PART_DM_MR,	  /* "dm_mr" */
	PART_IMPLICIT_MR, /* "implicit_mr": the client registers its own */
	PART_MR,	  /* "mr", over a memory with an fd */
	PART_MCAST,	  /* "mcast": a group's MGID, MLID, qkey and AH */
};

static enum attach_part attach_part(struct profile *p, const struct object *o,
				    bool shared)
{
	const struct conf_mr *mr = o->conf;
	struct object *m;

	if (o->state != OBJ_READY)
		return PART_NONE;
	switch (o->kind) {
	case OBJ_MEMORY:
		return o->u.mem.fd >= 0 ? PART_MEMORY : PART_NONE;
	case OBJ_XRCD:
		return ((const struct conf_xrcd *)o->conf)->file ? PART_XRCD
								 : PART_NONE;
	case OBJ_PD:
		return PART_PD;
	case OBJ_MCAST:
		return PART_MCAST;
	case OBJ_QP:
	case OBJ_SRQ:
		return PART_NUMBER;
	case OBJ_DM:
		/* The context's: imported in shared mode (ibv_import_dm),
		 * out of reach in local. */
		return shared ? PART_DM : PART_NONE;
	case OBJ_MR:
		if (mr->dm)
			return shared ? PART_DM_MR : PART_NONE;
		/* Implicit: the daemon's covers the daemon's memory. */
		if (!mr->memory)
			return PART_IMPLICIT_MR;
		m = profile_find(p, OBJ_MEMORY, mr->memory);
		/* Anonymous memory is not shareable. */
		return m && m->u.mem.fd >= 0 ? PART_MR : PART_NONE;
	default:
		return PART_NONE;
	}
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

/* A ready QP or SRQ: its name, type and number (qp_num; srq_num for an
 * XRC SRQ, which senders name). */
static json_t *attach_number(const struct object *o)
{
	json_t *j;
	uint32_t num;

	if (o->kind == OBJ_QP) {
		const struct conf_qp *c = o->conf;

		j = json_pack("{s:s, s:s, s:I}", "name", object_name(o), "type",
			      qp_kind_name(c->type), "qp_num",
			      (json_int_t)o->u.qp.qp->qp_num);
		if (j && c->xrcd)
			json_object_set_new(j, "xrcd", json_string(c->xrcd));
		return j;
	}
	j = json_pack("{s:s, s:s}", "name", object_name(o), "type",
		      srq_kind_name(((const struct conf_srq *)o->conf)->type));
	if (j && !ibv_get_srq_num(o->u.srq, &num))
		json_object_set_new(j, "srq_num", json_integer(num));
	return j;
}

/* An object as REST shows it, less what only REST needs: its kind (the
 * list says it), state (only ready objects are listed) and leases. */
static json_t *attach_object_json(const struct object *o)
{
	json_t *j = object_json(o);

	json_object_del(j, "kind");
	json_object_del(j, "state");
	json_object_del(j, "leases");
	return j;
}

/* An object of the profile as its part of ATTACHED. */
static json_t *attach_part_json(const struct object *o, enum attach_part part,
				int fd_index)
{
	json_t *j, *doc;

	switch (part) {
	case PART_MEMORY:
		j = attach_object_json(o);
		json_object_set_new(j, "fd", json_integer(fd_index));
		return j;
	case PART_XRCD:
		return json_pack("{s:s, s:s, s:i}", "name", object_name(o),
				 "file",
				 ((const struct conf_xrcd *)o->conf)->file,
				 "fd", fd_index);
	case PART_PD:
		return json_pack("{s:s, s:i}", "name", object_name(o), "handle",
				 (int)o->u.pd->handle);
	case PART_NUMBER:
		return attach_number(o);
	case PART_IMPLICIT_MR:
		doc = object_json(o);
		j = json_pack("{s:s, s:s, s:O}", "name", object_name(o), "pd",
			      ((const struct conf_mr *)o->conf)->pd, "access",
			      json_object_get(doc, "access"));
		json_decref(doc);
		return j;
	default: /* DM, DM_MR, MR: as in REST, but what is the daemon's */
		return attach_object_json(o);
	}
}

/* The key of ATTACHED's list for an object's part. */
static const char *attach_list(const struct object *o, enum attach_part part)
{
	static const char *const lists[] = {
		[PART_MEMORY] = "memory", [PART_XRCD] = "xrcd",
		[PART_PD] = "pd",	  [PART_DM] = "dm",
		[PART_DM_MR] = "dm_mr",	  [PART_IMPLICIT_MR] = "implicit_mr",
		[PART_MR] = "mr",	  [PART_MCAST] = "mcast",
	};

	if (part == PART_NUMBER)
		return o->kind == OBJ_QP ? "qp" : "srq";
	return lists[part];
}

/* The list of doc called key, made on first use: a kind with nothing
 * ready is left out (clients read an absent list as an empty one, and
 * every key less is less for each attach to parse). */
static json_t *attach_list_of(json_t *doc, const char *key)
{
	json_t *a = json_object_get(doc, key);

	if (a || json_object_set_new(doc, key, json_array()) < 0)
		return a;
	return json_object_get(doc, key);
}

char *profile_attach_text(struct profile *p, bool shared, size_t *len)
{
	json_t *doc = json_pack("{s:s, s:s, s:s, s:i, s:i, s:b}", "profile",
				p->conf->name, "mode",
				shared ? "shared" : "local", "ibdev", p->ibdev,
				"port", p->dev->port, "gid_index", p->gid_index,
				"import_capable", p->import_err == 0);
	int n_fds = shared; /* the context's cmd_fd is the first */
	char *text = NULL;

	if (!doc)
		return NULL;
	if (p->import_err)
		json_object_set_new(doc, "import_error",
				    json_string(errno_desc(-p->import_err)));
	if (shared)
		json_object_set_new(doc, "cmd_fd", json_integer(0));
	for (size_t i = 0; i < p->n_objects; i++) {
		const struct object *o = &p->objects[i];
		enum attach_part part = attach_part(p, o, shared);
		json_t *j;

		if (part == PART_NONE)
			continue;
		j = attach_part_json(o, part, n_fds);
		if (!j || json_array_append_new(
			      attach_list_of(doc, attach_list(o, part)), j) < 0)
			goto out;
		if (part == PART_MEMORY || part == PART_XRCD)
			n_fds++;
	}
	text = json_dumps(doc, JSON_COMPACT);
	if (text)
		*len = strlen(text);
out:
	json_decref(doc);
	return text;
}

uint64_t profile_attach_generation(const struct profile *p)
{
	return p->attach_generation;
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

int profile_attach_view(struct profile *p, bool shared, struct attach_view *v)
{
	size_t n = p->n_objects + 1;

	*v = (struct attach_view){ 0 };
	v->fds = malloc(n * sizeof(*v->fds));
	v->opened = malloc(n * sizeof(*v->opened));
	v->leases = malloc(n * sizeof(*v->leases));
	if (!v->fds || !v->opened || !v->leases) {
		attach_view_clear(v);
		return -ENOMEM;
	}
	if (shared)
		v->fds[v->n_fds++] = p->ctx->cmd_fd;
	for (size_t i = 0; i < p->n_objects; i++) {
		struct object *o = &p->objects[i];
		enum attach_part part = attach_part(p, o, shared);
		int fd;

		if (part == PART_MEMORY) {
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
				o->kind, object_name(o), o->serial
			};
	}
	return 0;
}

void attach_view_lease(struct profile *p, const struct attach_view *v)
{
	for (size_t i = 0; i < v->n_leases; i++) {
		const struct attach_lease *l = &v->leases[i];
		struct object *o =
			profile_find_serial(p, l->kind, l->name, l->serial);

		if (o)
			o->leases++;
	}
	profile_touch_leases(p);
}

/* ---- what the control layer asks before an attach ---- */

const char *profile_name(const struct profile *p)
{
	return p->conf->name;
}

bool profile_attachable(const struct profile *p)
{
	return p->ctx &&
	       (p->state == PROFILE_READY || p->state == PROFILE_DEGRADED);
}

bool profile_failed(const struct profile *p)
{
	return p->state == PROFILE_FAILED;
}

bool profile_settled_state(const struct profile *p)
{
	return p->state == PROFILE_READY || p->state == PROFILE_DEGRADED ||
	       p->state == PROFILE_FAILED;
}

int profile_import_err(const struct profile *p)
{
	return p->import_err;
}

const char *profile_ibdev(const struct profile *p)
{
	return p->ibdev;
}

char *profile_state_sentence(const struct profile *p)
{
	char progress[96] = "", *text;

	if (p->state == PROFILE_CREATING)
		snprintf(progress, sizeof(progress),
			 " (%zu of %zu objects, %llu of %llu bytes)",
			 p->progress.objects, p->progress.objects_total,
			 (unsigned long long)p->progress.bytes,
			 (unsigned long long)p->progress.bytes_total);
	if (asprintf(&text, "profile '%s' is %s%s%s%s", p->conf->name,
		     profile_state_name(p->state), progress,
		     p->reason ? ": " : "", p->reason ? p->reason : "") < 0)
		return NULL;
	return text;
}

bool profile_admits(const struct profile *p, uid_t uid, gid_t gid,
		    const gid_t *groups, size_t n_groups)
{
	const struct conf_profile *c = p->conf;

	if (uid == 0)
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
