// SPDX-License-Identifier: MIT
/*
 * ATTACHED's decoder: one generic walk over the field tables
 * (attached_fields.c) reads and range-checks every field, then the
 * checks that span fields: names unique per namespace, references
 * resolved, MRs within their memory, fds used once, what shared mode
 * and joined groups require. Linear in the objects (but for sorting
 * names): a profile of 10,000 MRs is one pass.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "attached_internal.h"

struct dctx {
	size_t n_fds;
	uint8_t *fd_used; /* n_fds flags */
	char *why;
	size_t why_len;
	int err; /* the first error */
};

static int fail(struct dctx *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail(struct dctx *d, const char *fmt, ...)
{
	va_list ap;

	if (d->err)
		return d->err;
	d->err = -EBADMSG;
	if (d->why_len) {
		va_start(ap, fmt);
		vsnprintf(d->why, d->why_len, fmt, ap);
		va_end(ap);
	}
	return d->err;
}

static int nomem(struct dctx *d)
{
	if (!d->err)
		d->err = -ENOMEM;
	return d->err;
}

/* An integer JSON value in [min, max] (max 0: any that JSON holds). */
static bool get_u64(const json_t *v, uint64_t min, uint64_t max,
		    uint64_t *out)
{
	json_int_t i;

	if (!json_is_integer(v))
		return false;
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (max && (uint64_t)i > max))
		return false;
	*out = (uint64_t)i;
	return true;
}

static int decode_struct(struct dctx *d, const json_t *o,
			 const struct att_struct *s, void *base,
			 const char *where);

static int decode_list(struct dctx *d, const json_t *a,
		       const struct att_field *f, void *base,
		       const char *where)
{
	const struct att_struct *s = f->sub;
	size_t n = json_array_size(a), i;
	char *items;
	json_t *o;
	int r;

	if (!json_is_array(a))
		return fail(d, "%s\"%s\" is not an array", where, f->key);
	items = calloc(n ? n : 1, s->size);
	if (!items)
		return nomem(d);
	*(void **)ATT_AT(base, f) = items;
	json_array_foreach(a, i, o)
	{
		char label[96];
		const char *name =
			json_string_value(json_object_get(o, "name"));

		if (name && *name)
			snprintf(label, sizeof(label), "%s%s '%.40s': ", where,
				 s->what, name);
		else
			snprintf(label, sizeof(label), "%s%s %zu: ", where,
				 s->what, i);
		if (!json_is_object(o))
			return fail(d, "%sis not an object", label);
		/* Counted as it is filled, so that free sees what was. */
		(*(size_t *)((char *)base + f->count_off))++;
		r = decode_struct(d, o, s, items + i * s->size, label);
		if (r < 0)
			return r;
	}
	return 0;
}

static int decode_fd(struct dctx *d, const json_t *v, uint64_t *out,
		     const char *where, const char *key)
{
	if (!get_u64(v, 0, UINT32_MAX, out) || *out >= d->n_fds)
		return fail(d, "%s%s %lld of %zu", where, key,
			    (long long)json_integer_value(v), d->n_fds);
	if (d->fd_used[*out])
		return fail(d, "%s%s: fd %llu given twice", where, key,
			    (unsigned long long)*out);
	d->fd_used[*out] = 1;
	return 0;
}

static int decode_access(struct dctx *d, const json_t *v, unsigned int *out,
			 const char *where, const char *key)
{
	const json_t *e = NULL;
	size_t i;

	if (proto_access_parse(v, out) == 0)
		return 0;
	if (!json_is_array(v))
		return fail(d, "%s%s is not a list", where, key);
	json_array_foreach(v, i, e)
		if (!proto_access_flag(json_string_value(e)))
			break;
	return fail(d, "%sunknown access '%.40s'", where,
		    json_is_string(e) ? json_string_value(e) : "?");
}

static int decode_field(struct dctx *d, const json_t *v,
			const struct att_field *f, void *base,
			const char *where)
{
	void *at = ATT_AT(base, f);
	const char *s;

	switch (f->type) {
	case AT_STR:
		s = json_string_value(v);
		if (!s || (f->nonempty && !*s))
			return fail(d, "%s%s is not a%s string", where, f->key,
				    f->nonempty ? " non-empty" : "");
		*(char **)at = strdup(s);
		return *(char **)at ? 0 : nomem(d);
	case AT_U64:
		if (!get_u64(v, f->min, f->max, at))
			return fail(d, "%s%s is not an integer in [%llu, %llu]",
				    where, f->key, (unsigned long long)f->min,
				    (unsigned long long)(f->max ? f->max
								: INT64_MAX));
		return 0;
	case AT_BOOL:
		if (!json_is_boolean(v))
			return fail(d, "%s%s is not true or false", where,
				    f->key);
		*(bool *)at = json_is_true(v);
		return 0;
	case AT_ACCESS:
		return decode_access(d, v, at, where, f->key);
	case AT_FD:
		return decode_fd(d, v, at, where, f->key);
	case AT_GID:
		s = json_string_value(v);
		if (!s || inet_pton(AF_INET6, s, at) != 1)
			return fail(d, "%s%s is not a GID", where, f->key);
		return 0;
	case AT_MODE:
		s = json_string_value(v);
		if (s && strcmp(s, "shared") == 0)
			*(enum proto_attach_mode *)at = PROTO_ATTACH_SHARED;
		else if (s && strcmp(s, "local") == 0)
			*(enum proto_attach_mode *)at = PROTO_ATTACH_LOCAL;
		else
			return fail(d, "%s%s '%.20s' is not \"shared\" or "
				    "\"local\"",
				    where, f->key, s ? s : "");
		return 0;
	case AT_OBJ:
		if (!json_is_object(v))
			return fail(d, "%s%s is not an object", where, f->key);
		return decode_struct(d, v, f->sub, at, where);
	case AT_LIST:
		return decode_list(d, v, f, base, where);
	}
	return fail(d, "%s%s: unknown field type", where, f->key);
}

static int decode_struct(struct dctx *d, const json_t *o,
			 const struct att_struct *s, void *base,
			 const char *where)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct att_field *f = &s->fields[i];
		const json_t *v = json_object_get(o, f->key);
		int r;

		if (!v) {
			if (f->required)
				return fail(d, "%sno %s", where, f->key);
			continue;
		}
		r = decode_field(d, v, f, base, where);
		if (r < 0)
			return r;
		if (f->has)
			*(bool *)((char *)base + f->has - 1) = true;
	}
	return 0;
}

/* ---- checks across fields ---- */

/* A name of a top-level list's element, for sorting. */
struct named {
	const char *name;
	size_t index;
	const char *what;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct named *)a)->name,
		      ((const struct named *)b)->name);
}

static const char *elem_name(const struct att_field *lf, const void *top,
			     size_t i)
{
	const char *items = *(char *const *)ATT_AT(top, lf);

	/* "name" is every list's first field, at offset 0. */
	return *(char *const *)(items + i * lf->sub->size);
}

static size_t list_count(const struct att_field *lf, const void *top)
{
	return *(const size_t *)((const char *)top + lf->count_off);
}

/* Sorted names of every list of namespace ns (or of list id when ns is
 * 0): *out, *n; the caller frees *out. */
static int collect(const void *top, int ns, enum att_list_id id,
		   struct named **out, size_t *n)
{
	size_t total = 0, k = 0;
	struct named *v;

	for (int l = AL_NONE + 1; l < AL_MAX; l++) {
		const struct att_field *lf = att_list_field(l);

		if (ns ? lf->sub->ns == ns : (enum att_list_id)l == id)
			total += list_count(lf, top);
	}
	v = malloc((total ? total : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (int l = AL_NONE + 1; l < AL_MAX; l++) {
		const struct att_field *lf = att_list_field(l);

		if (!(ns ? lf->sub->ns == ns : (enum att_list_id)l == id))
			continue;
		for (size_t i = 0; i < list_count(lf, top); i++)
			v[k++] = (struct named){ elem_name(lf, top, i), i,
						 lf->sub->what };
	}
	qsort(v, total, sizeof(*v), by_name);
	*out = v;
	*n = total;
	return 0;
}

static int check_unique(struct dctx *d, const void *top)
{
	for (int ns = 1; ns <= 8; ns++) {
		struct named *v;
		size_t n;

		if (collect(top, ns, AL_NONE, &v, &n) < 0)
			return nomem(d);
		for (size_t i = 1; i < n; i++)
			if (strcmp(v[i - 1].name, v[i].name) == 0) {
				fail(d, "%s '%.40s' twice", v[i].what,
				     v[i].name);
				break;
			}
		free(v);
		if (d->err)
			return d->err;
	}
	return 0;
}

/* Every reference of list lf's elements to list target, resolved. */
static int resolve(struct dctx *d, const void *top,
		   const struct att_field *lf, const struct att_field *rf,
		   const struct named *v, size_t n)
{
	char *items = *(char *const *)ATT_AT(top, lf);

	for (size_t i = 0; i < list_count(lf, top); i++) {
		char *e = items + i * lf->sub->size;
		struct named key = { *(char **)ATT_AT(e, rf), 0, NULL };
		const struct named *hit =
			key.name ? bsearch(&key, v, n, sizeof(*v), by_name)
				 : NULL;

		if (!hit)
			return fail(d, "%s '%.40s': no %s '%.40s'",
				    lf->sub->what, elem_name(lf, top, i),
				    rf->key, key.name ? key.name : "");
		*(size_t *)(e + rf->ref_index) = hit->index;
	}
	return 0;
}

static int check_refs(struct dctx *d, const void *top)
{
	for (int t = AL_NONE + 1; t < AL_MAX; t++) {
		struct named *v = NULL;
		size_t n = 0;

		for (int l = AL_NONE + 1; l < AL_MAX && !d->err; l++) {
			const struct att_field *lf = att_list_field(l);

			for (size_t k = 0; k < lf->sub->n_fields; k++) {
				const struct att_field *rf =
					&lf->sub->fields[k];

				if (rf->ref != (enum att_list_id)t)
					continue;
				if (!v && collect(top, 0, t, &v, &n) < 0)
					return nomem(d);
				if (resolve(d, top, lf, rf, v, n) < 0)
					break;
			}
		}
		free(v);
		if (d->err)
			return d->err;
	}
	return 0;
}

/* An MR's bytes within what it is over (memory, device memory). */
static int fits(struct dctx *d, const char *list, const struct proto_att_mr *mr,
		const char *over, const char *over_name, uint64_t size)
{
	if (mr->offset < size && mr->length <= size - mr->offset)
		return 0;
	return fail(d,
		    "%s '%.40s': offset and length do not fit %s '%.40s' "
		    "(%llu bytes)",
		    list, mr->name, over, over_name, (unsigned long long)size);
}

static int check_extents(struct dctx *d, const struct proto_attached *a)
{
	for (size_t i = 0; i < a->n_mr; i++) {
		const struct proto_att_memory *m = &a->memory[a->mr[i].memory_index];

		if (fits(d, "mr", &a->mr[i], "memory", m->name, m->size) < 0)
			return d->err;
	}
	for (size_t i = 0; i < a->n_dm_mr; i++) {
		const struct proto_att_dm *m = &a->dm[a->dm_mr[i].dm_index];

		if (fits(d, "dm_mr", &a->dm_mr[i], "dm", m->name, m->size) < 0)
			return d->err;
	}
	return 0;
}

static int check_mode_and_groups(struct dctx *d, const struct proto_attached *a)
{
	if (a->mode == PROTO_ATTACH_SHARED && !a->has_cmd_fd)
		return fail(d, "shared mode without cmd_fd");
	if (a->has_mr_table && a->mode != PROTO_ATTACH_SHARED)
		return fail(d, "mr_table in local mode");
	if (a->has_mr_table && a->n_mr)
		return fail(d, "both mr and mr_table");
	if (a->has_mr_table && a->mr_table.has_memories && a->n_memory)
		return fail(d, "both memory and mr_table's memories");
	for (size_t i = 0; i < a->n_mcast; i++) {
		const struct proto_att_mcast *g = &a->mcast[i];

		if (!g->join_state || strcmp(g->join_state, "joined") != 0)
			continue;
		if (!g->has_mgid || !g->has_mlid || !g->has_qkey ||
		    !g->has_remote_qpn || !g->has_ah)
			return fail(d,
				    "mcast '%.40s' is joined without mgid, "
				    "mlid, qkey, remote_qpn and ah",
				    g->name);
	}
	return 0;
}

/* An MR table's memories' fds (memory_fd on, one each): every one of
 * them among the message's, and none that a list names too. */
static int check_memory_fds(struct dctx *d, const struct proto_attached *a)
{
	const struct proto_att_mr_table *t = &a->mr_table;

	if (!a->has_mr_table || !t->has_memory_fd)
		return 0;
	if (!t->has_memories)
		return fail(d, "mr_table: memory_fd without memories");
	if (t->memory_fd > d->n_fds || t->memories > d->n_fds - t->memory_fd)
		return fail(d,
			    "mr_table: memory_fd %llu and %llu memories, of "
			    "%zu fds",
			    (unsigned long long)t->memory_fd,
			    (unsigned long long)t->memories, d->n_fds);
	for (uint64_t i = t->memory_fd; i < t->memory_fd + t->memories; i++) {
		if (d->fd_used[i])
			return fail(d, "mr_table: memory_fd: fd %llu given "
				       "twice",
				    (unsigned long long)i);
		d->fd_used[i] = 1;
	}
	return 0;
}

int proto_attached_decode(const json_t *payload, size_t n_fds,
			  struct proto_attached *out, char *why,
			  size_t why_len)
{
	struct dctx d = { .n_fds = n_fds, .why = why, .why_len = why_len };

	memset(out, 0, sizeof(*out));
	if (why_len)
		why[0] = '\0';
	if (!json_is_object(payload))
		return fail(&d, "not an object");
	d.fd_used = calloc(n_fds ? n_fds : 1, 1);
	if (!d.fd_used)
		return -ENOMEM;
	if (decode_struct(&d, payload, &att_top, out, "") == 0 &&
	    check_unique(&d, out) == 0 && check_refs(&d, out) == 0 &&
	    check_extents(&d, out) == 0 && check_mode_and_groups(&d, out) == 0)
		check_memory_fds(&d, out);
	free(d.fd_used);
	return d.err;
}
