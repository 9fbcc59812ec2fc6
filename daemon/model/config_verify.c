// SPDX-License-Identifier: MIT
/*
 * The verify pass: what a single key cannot check. Names are valid and
 * unique, references name declared objects, and each object's keys fit
 * together (a QP's type and its CQs, an MR inside its memory).
 */
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include <uthash.h>

#include "config_internal.h"
#include "config_mcast.h"
#include "qpstate.h"

#define NAME_MAX_LEN 64

/* A name for messages: an object without one (an error of its own) is
 * '?'. */
static const char *unnamed(const char *name)
{
	return name ? name : "?";
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (; *s; s++)
		if (!(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') ||
		      ('0' <= *s && *s <= '9') || *s == '_' || *s == '-' ||
		      *s == '.'))
			return false;
	return true;
}

/*
 * Index the names of the n objects of arr (each size bytes, beginning
 * with loc and name) into *out, and report the invalid ones and every
 * duplicate, which names the first object of its name. The index keeps
 * that first one: what a lookup finds.
 */
static void index_names(struct parser *p, const char *what, const void *arr,
			size_t n, size_t size, struct conf_names **out)
{
	struct conf_names *ix;

	if (!n)
		return; /* nothing to find: no index (lookups scan nothing) */
	ix = conf_names_new(arr, size, n);
	if (!ix) {
		p->oom = 1;
		return;
	}
	*out = ix;
	for (size_t i = 0; i < n; i++) {
		const void *o = (const char *)arr + i * size;
		const struct conf_loc *loc = o, *first;
		const char *name = conf_obj_name(o);
		const void *prev;
		int r;

		if (!name)
			continue;
		if (!valid_name(name))
			parser_error(p, *loc,
				     "%s name '%s' is invalid (1-64 of A-Z "
				     "a-z 0-9 _ - .)",
				     what, name);
		r = conf_names_add(ix, o, &prev);
		if (r == -EEXIST) {
			first = prev;
			parser_error(p, *loc,
				     "duplicate %s '%s' (first at %s:%d)", what,
				     name, first->file, first->line);
		} else if (r < 0) {
			p->oom = 1;
			return;
		}
	}
}

/* Which key of which kind names an object of which kind. */
struct reference {
	enum obj_kind kind;
	const char *key;
	size_t offset; /* char * in struct conf_<kind> */
	enum obj_kind target;
};

#define REF(k, st, key_, tgt)                                                  \
	{ k, #key_, offsetof(struct conf_##st, key_), tgt }

static const struct reference references[] = {
	REF(OBJ_MR, mr, pd, OBJ_PD),	   REF(OBJ_MR, mr, memory, OBJ_MEMORY),
	REF(OBJ_MR, mr, dm, OBJ_DM),
	REF(OBJ_MW, mw, pd, OBJ_PD),	   REF(OBJ_SRQ, srq, pd, OBJ_PD),
	REF(OBJ_SRQ, srq, xrcd, OBJ_XRCD), REF(OBJ_SRQ, srq, cq, OBJ_CQ),
	REF(OBJ_QP, qp, pd, OBJ_PD),	   REF(OBJ_QP, qp, send_cq, OBJ_CQ),
	REF(OBJ_QP, qp, recv_cq, OBJ_CQ),  REF(OBJ_QP, qp, srq, OBJ_SRQ),
	REF(OBJ_QP, qp, xrcd, OBJ_XRCD),   REF(OBJ_QP, qp, peer, OBJ_QP),
	REF(OBJ_AH, ah, pd, OBJ_PD),	   REF(OBJ_TARGET, target, pd, OBJ_PD),
	REF(OBJ_TARGET, target, cq, OBJ_CQ),
};

/* A target names its PD and CQ, and the MR of each exposed range. */
static size_t target_refs(const struct conf_target *t, struct conf_ref *out,
			  size_t max)
{
	size_t n = 0;

	if (t->pd && n < max)
		out[n++] = (struct conf_ref){ OBJ_PD, t->pd };
	if (t->cq && n < max)
		out[n++] = (struct conf_ref){ OBJ_CQ, t->cq };
	for (size_t i = 0; i < t->n_expose && n < max; i++) {
		bool seen = false;

		if (!t->expose[i].mr)
			continue;
		for (size_t j = 0; j < i; j++)
			seen |= t->expose[j].mr &&
				streq(t->expose[j].mr, t->expose[i].mr);
		if (!seen)
			out[n++] = (struct conf_ref){ OBJ_MR, t->expose[i].mr };
	}
	return n;
}

bool conf_peer_is_endpoint(const char *peer)
{
	return peer && (peer[0] == '@' || peer[0] == '{');
}

/* A QP's peer that is an endpoint document refers to nothing here. */
static bool is_endpoint_peer(enum obj_kind k, enum obj_kind target,
			     const char *name)
{
	return k == OBJ_QP && target == OBJ_QP && conf_peer_is_endpoint(name);
}

size_t conf_obj_refs(enum obj_kind k, const void *obj, struct conf_ref *out,
		     size_t max)
{
	size_t n = 0;

	if (k == OBJ_TARGET)
		return target_refs(obj, out, max);
	if (k == OBJ_MCAST)
		return conf_mcast_refs(obj, out, max);

	for (size_t r = 0; r < ARRAY_SIZE(references) && n < max; r++) {
		const char *name;

		if (references[r].kind != k)
			continue;
		name = *(char *const *)((const char *)obj + references[r].offset);
		if (name && !is_endpoint_peer(k, references[r].target, name))
			out[n++] = (struct conf_ref){ references[r].target,
						      name };
	}
	return n;
}

static void check_references(struct parser *p, const struct conf_profile *pr)
{
	for (size_t r = 0; r < ARRAY_SIZE(references); r++) {
		const struct reference *ref = &references[r];

		for (size_t i = 0; i < pr->n_objs[ref->kind]; i++) {
			const void *o = conf_obj(pr, ref->kind, i);
			const char *name =
				*(char *const *)((const char *)o + ref->offset);

			if (name &&
			    !is_endpoint_peer(ref->kind, ref->target, name) &&
			    !conf_obj_find(pr, ref->target, name))
				parser_error(p, *(const struct conf_loc *)o,
					     "%s '%s': %s '%s' is not declared "
					     "in profile '%s'",
					     conf_kind_names[ref->kind],
					     unnamed(conf_obj_name(o)),
					     ref->key, name, unnamed(pr->name));
		}
	}
}

/* The length of r: its own, or up to its memory's end (0: unknown). */
static uint64_t mr_length(const struct conf_profile *pr,
			  const struct conf_mr *r)
{
	const struct conf_memory *m = conf_obj_find(pr, OBJ_MEMORY, r->memory);

	if (r->length)
		return r->length;
	return m && m->size > r->offset ? m->size - r->offset : 0;
}

#define REMOTE_ACCESS                                                          \
	(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* The window is the only way in: no MR with remote rights of its own
 * may reach an exposed byte, or its rkey (which the profile document
 * shows) would open all of it, and revoking the window would not shut
 * it. The exposed MR must have none; another MR over the same memory
 * must not overlap the exposed range; an implicit MR reaches all. */
static void verify_expose_only_window(struct parser *p,
				      const struct conf_profile *pr,
				      const struct conf_target *t,
				      const struct conf_expose *e,
				      const struct conf_mr *r, uint64_t len)
{
	uint64_t from = r->offset + e->offset;
	uint64_t to = e->length	       ? from + e->length
		      : len > e->offset ? r->offset + len
					: UINT64_MAX;

	if (r->access & REMOTE_ACCESS) {
		parser_error(p, e->loc,
			     "target '%s': mr '%s' (%s:%d) has remote access "
			     "of its own: a peer with its rkey would reach "
			     "the whole MR around the windows; expose an mr "
			     "with \"mw_bind\" and local access only",
			     unnamed(t->name), e->mr, r->loc.file, r->loc.line);
		return;
	}
	for (size_t i = 0; i < pr->n_objs[OBJ_MR]; i++) {
		const struct conf_mr *q = conf_obj(pr, OBJ_MR, i);
		uint64_t qlen = mr_length(pr, q);
		bool implicit = !q->memory && !q->dm;

		if (q == r || !(q->access & REMOTE_ACCESS))
			continue;
		if (!implicit &&
		    (!(q->memory ? r->memory && streq(q->memory, r->memory)
				 : r->dm && q->dm && streq(q->dm, r->dm)) ||
		     q->offset >= to || (qlen && q->offset + qlen <= from)))
			continue;
		parser_error(p, e->loc,
			     "target '%s': mr '%s' (%s:%d) has remote access "
			     "and reaches the bytes exposed of mr '%s': a peer "
			     "with its rkey would go around the windows",
			     unnamed(t->name), unnamed(q->name), q->loc.file,
			     q->loc.line, e->mr);
	}
}

static void verify_expose(struct parser *p, const struct conf_profile *pr,
			  const struct conf_target *t,
			  const struct conf_expose *e)
{
	const struct conf_mr *r = conf_obj_find(pr, OBJ_MR, e->mr);
	uint64_t len;

	if (!e->mr)
		return;
	if (!r) {
		parser_error(p, e->loc,
			     "target '%s': expose mr '%s' is not declared in "
			     "profile '%s'",
			     unnamed(t->name), e->mr, unnamed(pr->name));
		return;
	}
	if (!r->memory && !r->dm) {
		parser_error(p, e->loc,
			     "target '%s': mr '%s' is implicit (the daemon's "
			     "whole address space): it cannot be exposed",
			     unnamed(t->name), e->mr);
		return;
	}
	if (!e->access)
		parser_error(p, e->loc,
			     "target '%s': expose of mr '%s' grants no access "
			     "(remote_read, remote_write, remote_atomic)",
			     unnamed(t->name), e->mr);
	if (t->pd && r->pd && !streq(t->pd, r->pd))
		parser_error(p, e->loc,
			     "target '%s': mr '%s' is on pd '%s', the target "
			     "on pd '%s' (a window binds to an MR of its own "
			     "PD)",
			     unnamed(t->name), e->mr, r->pd, t->pd);
	if (!(r->access & IBV_ACCESS_MW_BIND))
		parser_error(p, e->loc,
			     "target '%s': mr '%s' must allow \"mw_bind\" in "
			     "its access to be exposed through memory windows",
			     unnamed(t->name), e->mr);
	if ((e->access &
	     (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(r->access & IBV_ACCESS_LOCAL_WRITE))
		parser_error(p, e->loc,
			     "target '%s': remote_write and remote_atomic on "
			     "mr '%s' need local_write in its access",
			     unnamed(t->name), e->mr);
	len = mr_length(pr, r);
	if (len && (e->offset >= len || e->length > len - e->offset)) {
		parser_error(p, e->loc,
			     "target '%s': offset %" PRIu64 " + length %" PRIu64
			     " is outside mr '%s' (%" PRIu64 " bytes)",
			     unnamed(t->name), e->offset, e->length, e->mr,
			     len);
		return;
	}
	verify_expose_only_window(p, pr, t, e, r, len);
}

/* By name, what targets hold: their CQs, their listen addresses. */
struct held {
	const char *name;
	const struct conf_target *t;
	UT_hash_handle hh;
};

static const struct conf_target *held_find(struct held *set,
					   const char *name)
{
	struct held *h = NULL;

	if (name)
		HASH_FIND_STR(set, name, h);
	return h ? h->t : NULL;
}

/* Add name (held by t); the target that held it first, if any. */
static const struct conf_target *held_add(struct held **set,
					  const char *name,
					  const struct conf_target *t)
{
	const struct conf_target *first = held_find(*set, name);
	struct held *h;

	if (first || !(h = malloc(sizeof(*h))))
		return first;
	*h = (struct held){ .name = name, .t = t };
	HASH_ADD_KEYPTR(hh, *set, name, strlen(name), h);
	return NULL;
}

static void held_free(struct held **set)
{
	struct held *h, *tmp;

	HASH_ITER(hh, *set, h, tmp) {
		HASH_DEL(*set, h);
		free(h);
	}
}

/* What targets hold against each other and against QPs, in one pass
 * over each: no QP may use a target's CQ (the daemon polls it), no two
 * targets listen on one address and port. */
static void verify_targets_hold(struct parser *p,
				const struct conf_profile *pr)
{
	struct held *cqs = NULL, *listens = NULL;

	for (size_t i = 0; i < pr->n_objs[OBJ_TARGET]; i++) {
		const struct conf_target *t = conf_obj(pr, OBJ_TARGET, i);
		const struct conf_target *o;

		if (t->cq)
			held_add(&cqs, t->cq, t);
		if (t->listen && (o = held_add(&listens, t->listen, t)))
			parser_error(p, t->loc,
				     "target '%s': listen %s is taken by "
				     "target '%s' (%s:%d)",
				     unnamed(t->name), t->listen,
				     unnamed(o->name), o->loc.file, o->loc.line);
	}
	for (size_t i = 0; cqs && i < pr->n_objs[OBJ_QP]; i++) {
		const struct conf_qp *q = conf_obj(pr, OBJ_QP, i);
		const struct conf_target *t = held_find(cqs, q->send_cq);
		const char *cq = q->send_cq;

		if (!t) {
			t = held_find(cqs, q->recv_cq);
			cq = q->recv_cq;
		}
		if (t)
			parser_error(p, q->loc,
				     "qp '%s': cq '%s' is target '%s''s (the "
				     "daemon polls it): give the QP a CQ of "
				     "its own",
				     unnamed(q->name), cq, unnamed(t->name));
	}
	held_free(&cqs);
	held_free(&listens);
}

/* The peers' QPs are on the target's PD, and a QP reaches every MR of
 * its PD that has remote access, by its rkey (the profile document
 * shows it): such an MR would be open to every admitted peer. */
static void verify_target_pd(struct parser *p, const struct conf_profile *pr,
			     const struct conf_target *t)
{
	for (size_t i = 0; t->pd && i < pr->n_objs[OBJ_MR]; i++) {
		const struct conf_mr *q = conf_obj(pr, OBJ_MR, i);

		if (!q->pd || !streq(q->pd, t->pd) ||
		    !(q->access & REMOTE_ACCESS))
			continue;
		parser_error(p, t->loc,
			     "target '%s': mr '%s' (%s:%d) on its pd '%s' has "
			     "remote access: the peers' QPs are on that pd, and "
			     "its rkey would open it to them; give the target a "
			     "pd whose mrs have local access only",
			     unnamed(t->name), unnamed(q->name), q->loc.file,
			     q->loc.line, t->pd);
	}
}

static void verify_target(struct parser *p, const struct conf_profile *pr,
			  const struct conf_target *t)
{
	struct sockaddr_storage ss;

	/* Connections on another device could not use the profile's. */
	if (t->listen && !config_parse_sockaddr(t->listen, &ss) &&
	    (ss.ss_family == AF_INET
		     ? ((struct sockaddr_in *)&ss)->sin_addr.s_addr == 0
		     : IN6_IS_ADDR_UNSPECIFIED(
			       &((struct sockaddr_in6 *)&ss)->sin6_addr)))
		parser_error(p, t->loc,
			     "target '%s': listen %s is a wildcard: give an "
			     "address of the profile's device",
			     unnamed(t->name), t->listen);
	for (size_t i = 0; i < t->n_expose; i++)
		verify_expose(p, pr, t, &t->expose[i]);
	verify_target_pd(p, pr, t);
	if (!t->n_allow)
		parser_warning(p, t->loc,
			       "target '%s' has no allow list: it admits "
			       "nobody",
			       unnamed(t->name));
}

static void verify_memory(struct parser *p, const struct conf_memory *m)
{
	if (m->backing == MEM_FILE && !m->path)
		parser_error(p, m->loc,
			     "memory '%s': backing \"file\" needs a path",
			     unnamed(m->name));
	if (m->backing != MEM_FILE && m->path)
		parser_error(p, m->loc,
			     "memory '%s': path is only for backing \"file\"",
			     unnamed(m->name));
	if (m->thp != CONF_UNSET &&
	    (m->backing == MEM_HUGETLB || m->backing == MEM_FILE))
		parser_error(p, m->loc,
			     "memory '%s': thp is only for backing \"memfd\" "
			     "and \"anonymous\" (hugetlb pages are huge "
			     "already, a file's are its filesystem's)",
			     unnamed(m->name));
	if (!m->page_size)
		return;
	if (m->backing != MEM_HUGETLB)
		parser_error(p, m->loc,
			     "memory '%s': page_size is only for backing "
			     "\"hugetlb\"",
			     unnamed(m->name));
	else if (m->page_size & (m->page_size - 1) ||
		 m->page_size < (64u << 10) || m->page_size > (16ull << 30))
		parser_error(p, m->loc,
			     "memory '%s': page_size %" PRIu64 " is not a huge "
			     "page size (a power of two from 64K to 16G, such "
			     "as \"2M\" or \"1G\")",
			     unnamed(m->name), m->page_size);
	else if (m->size % m->page_size)
		parser_error(p, m->loc,
			     "memory '%s': size %" PRIu64 " is not a multiple "
			     "of its page_size %" PRIu64,
			     unnamed(m->name), m->size, m->page_size);
}

/* An mr over device memory: within it, zero-based, not paged. */
static void verify_dm_mr(struct parser *p, const struct conf_profile *pr,
			 const struct conf_mr *r)
{
	const struct conf_dm *d = conf_obj_find(pr, OBJ_DM, r->dm);

	if (d && d->size &&
	    (r->offset >= d->size || r->length > d->size - r->offset))
		parser_error(p, r->loc,
			     "mr '%s': offset %" PRIu64 " + length %" PRIu64
			     " is outside dm '%s' (%" PRIu64 " bytes)",
			     unnamed(r->name), r->offset, r->length,
			     unnamed(d->name), d->size);
	if (r->odp)
		parser_error(p, r->loc,
			     "mr '%s': odp is for host memory, not device "
			     "memory",
			     unnamed(r->name));
}

static void verify_mr(struct parser *p, const struct conf_profile *pr,
		      const struct conf_mr *r)
{
	const struct conf_memory *m = conf_obj_find(pr, OBJ_MEMORY, r->memory);

	if (r->memory && r->dm)
		parser_error(p, r->loc,
			     "mr '%s': give memory (host memory) or dm "
			     "(device memory), not both",
			     unnamed(r->name));
	else if (!r->memory && !r->dm && !r->odp)
		parser_error(p, r->loc,
			     "mr '%s': give memory (host memory) or dm "
			     "(device memory); or odp = true alone, for an "
			     "implicit mr over a whole address space",
			     unnamed(r->name));
	else if (!r->memory && !r->dm &&
		 (r->offset || r->length || r->zero_based))
		parser_error(p, r->loc,
			     "mr '%s': an implicit mr (odp without memory) "
			     "covers a whole address space: no offset, length "
			     "or zero_based",
			     unnamed(r->name));
	if (r->dm)
		verify_dm_mr(p, pr, r);

	if (m && m->size &&
	    (r->offset >= m->size || r->length > m->size - r->offset))
		parser_error(p, r->loc,
			     "mr '%s': offset %" PRIu64 " + length %" PRIu64
			     " is outside memory '%s' (%" PRIu64 " bytes)",
			     unnamed(r->name), r->offset, r->length,
			     unnamed(m->name), m->size);
	if ((r->access &
	     (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(r->access & IBV_ACCESS_LOCAL_WRITE))
		parser_error(p, r->loc,
			     "mr '%s': remote_write and remote_atomic need "
			     "local_write",
			     unnamed(r->name));
}

/* An AH routes by GID (with a GRH: RoCE, or IB across subnets) or by
 * LID alone (IB, no GRH). */
static void verify_ah(struct parser *p, const struct conf_ah *a)
{
	if (!a->dgid && !a->dlid)
		parser_error(p, a->loc,
			     "ah '%s' has neither dgid nor dlid: give dgid "
			     "(RoCE, or IB with a GRH) or dlid (IB LID "
			     "routing, no GRH)",
			     unnamed(a->name));
}

static void verify_srq(struct parser *p, const struct conf_srq *q)
{
	if (q->type == SRQK_XRC && (!q->xrcd || !q->cq))
		parser_error(p, q->loc,
			     "srq '%s': an XRC SRQ needs xrcd and cq",
			     unnamed(q->name));
	if (q->type == SRQK_BASIC && (q->xrcd || q->cq))
		parser_error(p, q->loc,
			     "srq '%s': xrcd and cq are for type \"xrc\" only",
			     unnamed(q->name));
	if (q->srq_limit > q->max_wr)
		parser_error(p, q->loc,
			     "srq '%s': srq_limit %u is above max_wr %u",
			     unnamed(q->name), q->srq_limit, q->max_wr);
}

/* What each QP type takes: the rest is an error. */
static void verify_qp_shape(struct parser *p, const struct conf_qp *q)
{
	bool xrc_recv = q->type == QPK_XRC_RECV;
	bool xrc_send = q->type == QPK_XRC_SEND;

	if (!xrc_recv && !q->pd)
		parser_error(p, q->loc, "qp '%s': missing required key 'pd'",
			     unnamed(q->name));
	if (!xrc_recv && !q->send_cq)
		parser_error(p, q->loc,
			     "qp '%s': missing required key 'send_cq'",
			     unnamed(q->name));
	if (!xrc_recv && !xrc_send && !q->recv_cq)
		parser_error(p, q->loc,
			     "qp '%s': missing required key 'recv_cq'",
			     unnamed(q->name));
	if (xrc_recv && (q->send_cq || q->recv_cq || q->srq))
		parser_error(p, q->loc,
			     "qp '%s': an xrc_recv QP takes no send_cq, "
			     "recv_cq or srq (its XRC SRQ receives)",
			     unnamed(q->name));
	if (xrc_recv != (q->xrcd != NULL))
		parser_error(p, q->loc, "qp '%s': xrcd is %s for type \"%s\"",
			     unnamed(q->name),
			     xrc_recv ? "required" : "not allowed",
			     qp_kind_name(q->type));
	if (xrc_send && (q->recv_cq || q->srq))
		parser_error(p, q->loc,
			     "qp '%s': an xrc_send QP takes no recv_cq or srq",
			     unnamed(q->name));
	if (q->type == QPK_UD && (q->access & ~IBV_ACCESS_LOCAL_WRITE))
		parser_error(p, q->loc,
			     "qp '%s': a UD QP takes no remote access flags",
			     unnamed(q->name));
	if (q->type == QPK_UC &&
	    (q->access & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
		parser_error(p, q->loc,
			     "qp '%s': a UC QP allows remote_write only (no "
			     "remote_read or remote_atomic)",
			     unnamed(q->name));
}

static bool connected_type(enum qp_kind k)
{
	return k == QPK_RC || k == QPK_UC || k == QPK_XRC_SEND ||
	       k == QPK_XRC_RECV;
}

/*
 * A peer given as the endpoint document of a QP on another host (what
 * GET /v1/profiles/{p}/qp/{q}/endpoint answers there): "@/path" of a
 * file holding it, or the JSON inline. Read and checked now, with the
 * QP's file:line; kept as compact JSON, so that a reload sees a file
 * that changed.
 */
static void load_peer_endpoint(struct parser *p, struct conf_qp *q)
{
	_cleanup_free_ char *text = NULL;
	const char *why = NULL, *from = q->peer;
	struct qp_path path;
	json_error_t jerr;
	char err[200];
	json_t *ep;
	size_t len;
	int r;

	if (!conf_peer_is_endpoint(q->peer))
		return;
	if (!connected_type(q->type)) {
		parser_error(p, q->loc,
			     "qp '%s': a peer's endpoint is for a connected QP "
			     "(rc, uc, xrc_send, xrc_recv), not %s",
			     unnamed(q->name), qp_kind_name(q->type));
		return;
	}
	if (q->peer[0] == '@') {
		if (q->peer[1] != '/') {
			parser_error(p, q->loc,
				     "qp '%s': peer \"%s\": the endpoint "
				     "file must be an absolute path",
				     unnamed(q->name), q->peer);
			return;
		}
		r = parser_read(p, q->peer + 1, &text, &len, &why);
		if (r == -ESTALE)
			return; /* config_load_known() says so */
		if (r < 0) {
			parser_error(p, q->loc,
				     "qp '%s': peer: cannot read %s: %s",
				     unnamed(q->name), q->peer + 1,
				     why ? why : strerror(-r));
			return;
		}
		from = text;
	}
	ep = json_loads(from, JSON_REJECT_DUPLICATES, &jerr);
	if (!ep) {
		parser_error(p, q->loc,
			     "qp '%s': peer: the endpoint document is not "
			     "JSON: %s (line %d, column %d)",
			     unnamed(q->name), jerr.text, jerr.line,
			     jerr.column);
		return;
	}
	qp_path_init(&path);
	if (!json_is_object(ep))
		parser_error(p, q->loc,
			     "qp '%s': peer: the endpoint document must be an "
			     "object",
			     unnamed(q->name));
	else if (qp_path_from_endpoint(ep, qp_kind_name(q->type),
				       IBV_MTU_4096, &path, err, sizeof(err)))
		parser_error(p, q->loc, "qp '%s': peer: endpoint: %s",
			     unnamed(q->name), err);
	else
		q->peer_endpoint = json_dumps(ep, JSON_COMPACT |
							  JSON_SORT_KEYS);
	json_decref(ep);
}

/* State rtr/rts: where the remote end comes from. */
static void verify_qp_remote(struct parser *p, const struct conf_profile *pr,
			     const struct conf_qp *q)
{
	bool beyond_init = q->state >= QPS_TARGET_RTR;
	const struct conf_qp *peer =
		conf_peer_is_endpoint(q->peer)
			? NULL
			: conf_obj_find(pr, OBJ_QP, q->peer);
	int64_t mtu = q->path ? q->path->mtu : -1;

	if (q->peer && q->path)
		parser_error(p, q->loc, "qp '%s': give peer or path, not both",
			     unnamed(q->name));
	if (q->pkey >= 0 && q->pkey_index)
		parser_error(p, q->loc,
			     "qp '%s': give pkey (its value) or pkey_index, "
			     "not both",
			     unnamed(q->name));
	if (q->pkey >= 0 && q->path && q->path->pkey_index >= 0)
		parser_error(p, q->loc,
			     "qp '%s': give pkey (its value) or the path's "
			     "pkey_index, not both",
			     unnamed(q->name));
	if (q->recover == QPR_RESET && q->state == QPS_TARGET_RESET)
		parser_error(p, q->loc,
			     "qp '%s': recover = \"reset\" brings a QP back to "
			     "its state, and \"reset\" is where it starts: "
			     "give state \"init\", \"rtr\" or \"rts\"",
			     unnamed(q->name));
	if (q->alt_path && (q->state != QPS_TARGET_RTS ||
			    !connected_type(q->type)))
		parser_error(p, q->loc,
			     "qp '%s': alt_path is for a connected QP (rc, uc, "
			     "xrc_send, xrc_recv) in state \"rts\" (it is "
			     "loaded with RTR->RTS), not a %s QP in \"%s\"",
			     unnamed(q->name), qp_kind_name(q->type),
			     qp_target_state_name(q->state));
	if (!beyond_init && (q->peer || q->path))
		parser_error(p, q->loc,
			     "qp '%s': peer and path are for state \"rtr\" or "
			     "\"rts\", not \"%s\"",
			     unnamed(q->name), qp_target_state_name(q->state));
	if (beyond_init && connected_type(q->type) && !q->peer &&
	    !(q->path && q->path->dqpn >= 0))
		parser_error(p, q->loc,
			     "qp '%s': state \"%s\" needs the remote end: "
			     "peer = \"QP\", or a path with dqpn",
			     unnamed(q->name), qp_target_state_name(q->state));
	if (q->path && mtu >= 0 && mtu != 256 && mtu != 512 &&
	    mtu != 1024 && mtu != 2048 && mtu != 4096)
		parser_error(p, q->loc,
			     "qp '%s': path mtu %" PRId64
			     " is not one of 256, 512, 1024, 2048, 4096",
			     unnamed(q->name), mtu);
	if (!peer)
		return;
	if (peer == q) {
		parser_error(p, q->loc, "qp '%s': a QP cannot be its own peer",
			     unnamed(q->name));
		return;
	}
	if (!(q->type == QPK_RC || q->type == QPK_UC) ||
	    peer->type != q->type)
		parser_error(p, q->loc,
			     "qp '%s': peer '%s' must be of the same type, "
			     "rc or uc (here %s and %s)",
			     unnamed(q->name), peer->name,
			     qp_kind_name(q->type), qp_kind_name(peer->type));
	/* A loopback pair: each names the other. */
	if (!q->name || !peer->peer || !streq(peer->peer, q->name))
		parser_error(p, q->loc,
			     "qp '%s': its peer '%s' must name '%s' as peer "
			     "too",
			     unnamed(q->name), peer->name, unnamed(q->name));
}

static void verify_device(struct parser *p, const struct conf_device *d)
{
	if (!d->ibdev && !d->guid && !d->netdev && !d->pci && !d->driver)
		parser_error(p, d->loc,
			     "device '%s': match needs at least one of ibdev, "
			     "guid, netdev, pci, driver",
			     unnamed(d->name));
	if (d->gid_index >= 0 &&
	    (d->gid_type != GIDK_ANY || d->gid_family != GIDF_ANY))
		parser_error(p, d->loc,
			     "device '%s': gid takes index, or type and "
			     "family, not both",
			     unnamed(d->name));
}

static void verify_profile(struct parser *p, struct conf_profile *pr)
{
	for (int k = 0; k < OBJ_KIND_MAX; k++)
		index_names(p, conf_kind_names[k], pr->objs[k], pr->n_objs[k],
			    conf_kinds[k].size, &pr->names[k]);
	if (pr->device && !config_device(p->c, pr->device))
		parser_error(p, pr->loc,
			     "profile '%s': device '%s' is not declared",
			     unnamed(pr->name), pr->device);
	check_references(p, pr);

	for (size_t i = 0; i < pr->n_objs[OBJ_MEMORY]; i++)
		verify_memory(p, conf_obj(pr, OBJ_MEMORY, i));
	for (size_t i = 0; i < pr->n_objs[OBJ_MR]; i++)
		verify_mr(p, pr, conf_obj(pr, OBJ_MR, i));
	for (size_t i = 0; i < pr->n_objs[OBJ_SRQ]; i++)
		verify_srq(p, conf_obj(pr, OBJ_SRQ, i));
	for (size_t i = 0; i < pr->n_objs[OBJ_AH]; i++)
		verify_ah(p, conf_obj(pr, OBJ_AH, i));
	for (size_t i = 0; i < pr->n_objs[OBJ_TARGET]; i++)
		verify_target(p, pr, conf_obj(pr, OBJ_TARGET, i));
	verify_targets_hold(p, pr);
	conf_verify_mcasts(p, pr);
	for (size_t i = 0; i < pr->n_objs[OBJ_QP]; i++) {
		struct conf_qp *q = (struct conf_qp *)conf_obj(pr, OBJ_QP, i);
		const struct conf_srq *srq = conf_obj_find(pr, OBJ_SRQ, q->srq);

		load_peer_endpoint(p, q);
		verify_qp_shape(p, q);
		verify_qp_remote(p, pr, q);
		if (srq && srq->type != SRQK_BASIC)
			parser_error(p, q->loc,
				     "qp '%s': srq '%s' is an XRC SRQ; a %s QP "
				     "takes a basic one",
				     unnamed(q->name), srq->name,
				     qp_kind_name(q->type));
	}
}

/* 127.0.0.0/8 and ::1 (unix sockets are local too). */
static bool listen_is_local(const char *s)
{
	if (!strncmp(s, "unix:", 5) || !strncmp(s, "127.", 4))
		return true;
	return !strncmp(s, "[::1]:", 6);
}

/* REST off the machine carries the bearer token: only over TLS, unless
 * the operator says otherwise. */
static void verify_http(struct parser *p)
{
	struct conf_daemon *d = &p->c->daemon;
	struct conf_loc loc = d->listen_loc.file ? d->listen_loc : d->http_loc;

	int max = d->http_max_connections ? d->http_max_connections
					  : CONFIG_DEFAULT_HTTP_MAX_CONNECTIONS;

	if (d->http_reserved && d->http_reserved >= max)
		parser_error(p, d->http_loc,
			     "daemon.http: 'reserved_connections' = %d is not "
			     "less than 'max_connections' (%d): anonymous "
			     "clients would have no connection at all",
			     d->http_reserved, max);
	if (!d->tls_cert != !d->tls_key)
		parser_error(p, d->http_loc,
			     "daemon.http: 'tls_cert' and 'tls_key' go "
			     "together");
	if (d->tls_cert || d->insecure)
		return;
	for (size_t i = 0; i < d->n_listen; i++)
		if (!listen_is_local(d->listen[i]))
			parser_error(p, loc,
				     "daemon.http: 'listen' = \"%s\" is not a "
				     "loopback address: set 'tls_cert' and "
				     "'tls_key' (HTTPS), or 'insecure = true' "
				     "for plain HTTP",
				     d->listen[i]);
}

void parser_verify(struct parser *p)
{
	struct config *c = p->c;

	verify_http(p);

	index_names(p, "device", c->devices, c->n_devices, sizeof(*c->devices),
		    &c->device_names);
	index_names(p, "profile", c->profiles, c->n_profiles,
		    sizeof(*c->profiles), &c->profile_names);
	for (size_t i = 0; i < c->n_devices; i++)
		verify_device(p, &c->devices[i]);
	for (size_t i = 0; i < c->n_profiles; i++)
		verify_profile(p, &c->profiles[i]);
}

