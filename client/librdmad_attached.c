// SPDX-License-Identifier: MIT
/*
 * An ATTACHED answer (proto/PROTOCOL.md) read into a profile: every list
 * checked whole (names, numbers in range, fds where the document says),
 * before anything is opened or mapped.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "librdmad_internal.h"
#include "util.h"

/* ---- profiles: parsing ATTACHED ---- */

void client_profile_free(struct rdmad_profile *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->n_mem; i++) {
		free(p->mem[i].name);
		closep(&p->mem[i].fd);
	}
	for (i = 0; i < p->n_pd; i++)
		free(p->pd[i].name);
	for (i = 0; i < p->n_mr; i++)
		free(p->mr[i].name);
	for (i = 0; i < p->n_xrcd; i++) {
		free(p->xrcd[i].name);
		closep(&p->xrcd[i].fd);
	}
	for (i = 0; i < p->n_qp; i++) {
		free(p->qp[i].name);
		free(p->qp[i].xrcd);
	}
	for (i = 0; i < p->n_srq; i++)
		free(p->srq[i].name);
	for (i = 0; i < p->n_dm; i++)
		free(p->dm[i].name);
	for (i = 0; i < p->n_dm_mr; i++)
		free(p->dm_mr[i].name);
	for (i = 0; i < p->n_imr; i++)
		free(p->imr[i].name);
	client_mcasts_free(p);
	free(p->imr);
	free(p->dm);
	free(p->dm_mr);
	free(p->qp);
	free(p->srq);
	free(p->mem);
	free(p->pd);
	free(p->mr);
	free(p->xrcd);
	closep(&p->cmd_fd);
	if (p->devs)
		ibv_free_device_list(p->devs);
	free(p->ibdev);
	free(p->name);
	free(p);
}

static int malformed(const struct rdmad_profile *p, const char *fmt, ...)
	_printf_(2, 3);
static int malformed(const struct rdmad_profile *p, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return client_set_error(EPROTO,
				"rdmad's ATTACHED for profile '%s' is "
				"malformed: %s",
				p->name, why);
}

/* A non-empty string, copied. */
static char *get_name(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s && *s ? strdup(s) : NULL;
}

/* Take fd number index of m (each may be taken once). */
static int take_fd(const struct rdmad_profile *p, struct proto_msg *m,
		   uint64_t index, const char *what, int *fd)
{
	if (index >= m->n_fds)
		return malformed(p, "%s: fd %llu of %zu", what,
				 (unsigned long long)index, m->n_fds);
	if (m->fds[index] < 0)
		return malformed(p, "%s: fd %llu given twice", what,
				 (unsigned long long)index);
	*fd = TAKE_FD(m->fds[index]);
	return 0;
}

static json_t *get_array(const json_t *o, const char *key, size_t *n)
{
	json_t *a = json_object_get(o, key);

	if (!a) { /* nothing of that kind */
		*n = 0;
		return NULL;
	}
	*n = json_is_array(a) ? json_array_size(a) : (size_t)-1;
	return a;
}

static int parse_memory(struct rdmad_profile *p, struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i, j;
	uint64_t v;
	int r;

	a = get_array(m->payload, "memory", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"memory\" is not an array");
	p->mem = calloc(n ? n : 1, sizeof(*p->mem));
	if (!p->mem)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_memory *mem = &p->mem[p->n_mem++];

		mem->fd = -1;
		mem->addr = MAP_FAILED;
		mem->name = get_name(o, "name");
		if (!mem->name)
			return malformed(p, "memory %zu has no name", i);
		for (j = 0; j < i; j++)
			if (streq(p->mem[j].name, mem->name))
				return malformed(p, "memory '%s' twice",
						 mem->name);
		if (!client_json_uint(o, "size", SIZE_MAX, &v) || v == 0)
			return malformed(p, "memory '%s': bad size", mem->name);
		mem->size = v;
		if (!client_json_uint(o, "fd", UINT32_MAX, &v))
			return malformed(p, "memory '%s' has no fd", mem->name);
		r = take_fd(p, m, v, mem->name, &mem->fd);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Optional: XRC domains the daemon shares by their file. */
static int parse_xrcds(struct rdmad_profile *p, struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i;
	uint64_t v;
	int r;

	a = get_array(m->payload, "xrcd", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"xrcd\" is not an array");
	p->xrcd = calloc(n ? n : 1, sizeof(*p->xrcd));
	if (!p->xrcd)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_xrcd *x = &p->xrcd[p->n_xrcd++];

		x->fd = -1;
		x->name = get_name(o, "name");
		if (!x->name)
			return malformed(p, "xrcd %zu has no name", i);
		if (!client_json_uint(o, "fd", UINT32_MAX, &v))
			return malformed(p, "xrcd '%s' has no fd", x->name);
		r = take_fd(p, m, v, x->name, &x->fd);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Optional (daemons before 0.5 send none): QPs or SRQs (key) and their
 * numbers (num_key: qp_num, srq_num; an SRQ that is not XRC has none). */
static int parse_nums(struct rdmad_profile *p, const struct proto_msg *m,
		      const char *key, const char *num_key,
		      struct client_num **out, size_t *n_out)
{
	const char *xrc_type = streq(key, "qp") ? "xrc_recv" : "xrc";
	json_t *a, *o;
	size_t n, i;
	uint64_t v;

	a = get_array(m->payload, key, &n);
	if (n == (size_t)-1)
		return malformed(p, "\"%s\" is not an array", key);
	*out = calloc(n ? n : 1, sizeof(**out));
	if (!*out)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_num *q = &(*out)[(*n_out)++];
		const char *type =
			json_string_value(json_object_get(o, "type"));

		q->name = get_name(o, "name");
		if (!q->name)
			return malformed(p, "%s %zu has no name", key, i);
		q->xrc = type && streq(type, xrc_type);
		if (json_object_get(o, "xrcd")) {
			q->xrcd = get_name(o, "xrcd");
			if (!q->xrcd)
				return malformed(p, "%s '%s': bad xrcd", key,
						 q->name);
		}
		if (client_json_uint(o, num_key, UINT32_MAX, &v)) {
			q->num = (uint32_t)v;
			q->has_num = true;
		} else if (json_object_get(o, num_key)) {
			return malformed(p, "%s '%s': bad %s", key, q->name,
					 num_key);
		}
	}
	return 0;
}

static int parse_pds(struct rdmad_profile *p, const struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i, j;
	uint64_t v;

	a = get_array(m->payload, "pd", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"pd\" is not an array");
	p->pd = calloc(n ? n : 1, sizeof(*p->pd));
	if (!p->pd)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_pd *pd = &p->pd[p->n_pd++];

		pd->name = get_name(o, "name");
		if (!pd->name)
			return malformed(p, "pd %zu has no name", i);
		for (j = 0; j < i; j++)
			if (streq(p->pd[j].name, pd->name))
				return malformed(p, "pd '%s' twice", pd->name);
		if (!client_json_uint(o, "handle", UINT32_MAX, &v))
			return malformed(p, "pd '%s' has no handle", pd->name);
		pd->handle = v;
	}
	return 0;
}

static const struct {
	const char *name;
	unsigned int flag;
} access_names[] = {
	{ "local_write", IBV_ACCESS_LOCAL_WRITE },
	{ "remote_write", IBV_ACCESS_REMOTE_WRITE },
	{ "remote_read", IBV_ACCESS_REMOTE_READ },
	{ "remote_atomic", IBV_ACCESS_REMOTE_ATOMIC },
	{ "mw_bind", IBV_ACCESS_MW_BIND },
	{ "relaxed_ordering", IBV_ACCESS_RELAXED_ORDERING },
};

static int parse_access(const struct rdmad_profile *p, const char *mr,
			const json_t *a, unsigned int *access)
{
	const json_t *v;
	size_t i, k;

	if (!json_is_array(a))
		return malformed(p, "mr '%s' has no access list", mr);
	*access = 0;
	json_array_foreach(a, i, v)
	{
		const char *s = json_string_value(v);

		for (k = 0; s && k < ARRAY_SIZE(access_names); k++)
			if (streq(s, access_names[k].name))
				break;
		if (!s || k == ARRAY_SIZE(access_names))
			return malformed(p, "mr '%s': unknown access '%s'", mr,
					 s ? s : "?");
		*access |= access_names[k].flag;
	}
	return 0;
}

static bool find_index(const struct rdmad_profile *p, bool pd, const char *name,
		       size_t *out)
{
	size_t i, n = pd ? p->n_pd : p->n_mem;

	for (i = 0; name && i < n; i++)
		if (streq(pd ? p->pd[i].name : p->mem[i].name, name)) {
			*out = i;
			return true;
		}
	return false;
}

/* Optional (daemons before 0.6 send none; empty in local mode): device
 * memory and the MRs over it, by handle. */
static int parse_dms(struct rdmad_profile *p, const struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i, j;
	uint64_t v;

	a = get_array(m->payload, "dm", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"dm\" is not an array");
	p->dm = calloc(n ? n : 1, sizeof(*p->dm));
	if (!p->dm)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_dm *d = &p->dm[p->n_dm++];

		d->name = get_name(o, "name");
		if (!d->name)
			return malformed(p, "dm %zu has no name", i);
		for (j = 0; j < i; j++)
			if (streq(p->dm[j].name, d->name))
				return malformed(p, "dm '%s' twice", d->name);
		if (!client_json_uint(o, "handle", UINT32_MAX, &v))
			return malformed(p, "dm '%s' has no handle", d->name);
		d->handle = (uint32_t)v;
		if (!client_json_uint(o, "size", UINT64_MAX, &d->size))
			return malformed(p, "dm '%s' has no size", d->name);
	}
	a = get_array(m->payload, "dm_mr", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"dm_mr\" is not an array");
	p->dm_mr = calloc(n ? n : 1, sizeof(*p->dm_mr));
	if (!p->dm_mr)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_dm_mr *mr = &p->dm_mr[p->n_dm_mr++];
		const char *s;

		mr->name = get_name(o, "name");
		if (!mr->name)
			return malformed(p, "dm_mr %zu has no name", i);
		for (j = 0; j < p->n_mr; j++)
			if (streq(p->mr[j].name, mr->name))
				return malformed(p, "mr '%s' twice", mr->name);
		for (j = 0; j < i; j++)
			if (streq(p->dm_mr[j].name, mr->name))
				return malformed(p, "mr '%s' twice", mr->name);
		s = json_string_value(json_object_get(o, "pd"));
		if (!find_index(p, true, s, &mr->pd))
			return malformed(p, "mr '%s': no pd '%s'", mr->name,
					 s ? s : "");
		if (!client_json_uint(o, "handle", UINT32_MAX, &v))
			return malformed(p, "mr '%s' has no handle", mr->name);
		mr->handle = (uint32_t)v;
		if (!client_json_uint(o, "rkey", UINT32_MAX, &v))
			return malformed(p, "mr '%s' has no rkey", mr->name);
		mr->rkey = (uint32_t)v;
		if (!client_json_uint(o, "length", UINT64_MAX, &mr->length))
			return malformed(p, "mr '%s' has no length", mr->name);
	}
	return 0;
}

static int parse_mrs(struct rdmad_profile *p, const struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i, j;
	uint64_t v;
	int r;

	a = get_array(m->payload, "mr", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"mr\" is not an array");
	p->mr = calloc(n ? n : 1, sizeof(*p->mr));
	if (!p->mr)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_mr *mr = &p->mr[p->n_mr++];
		const char *s;
		size_t size;

		mr->name = get_name(o, "name");
		if (!mr->name)
			return malformed(p, "mr %zu has no name", i);
		for (j = 0; j < i; j++)
			if (streq(p->mr[j].name, mr->name))
				return malformed(p, "mr '%s' twice", mr->name);
		s = json_string_value(json_object_get(o, "pd"));
		if (!find_index(p, true, s, &mr->pd))
			return malformed(p, "mr '%s': no pd '%s'", mr->name,
					 s ? s : "");
		s = json_string_value(json_object_get(o, "memory"));
		if (!find_index(p, false, s, &mr->memory))
			return malformed(p, "mr '%s': no memory '%s'", mr->name,
					 s ? s : "");
		size = p->mem[mr->memory].size;
		if (!client_json_uint(o, "offset", size - 1, &mr->offset) ||
		    !client_json_uint(o, "length", size - mr->offset, &mr->length) ||
		    mr->length == 0)
			return malformed(p,
					 "mr '%s': offset and length do not "
					 "fit memory '%s' (%zu bytes)",
					 mr->name, p->mem[mr->memory].name,
					 size);
		if (!client_json_uint(o, "handle", UINT32_MAX, &v))
			return malformed(p, "mr '%s' has no handle", mr->name);
		mr->handle = v;
		if (!client_json_uint(o, "rkey", UINT32_MAX, &v))
			return malformed(p, "mr '%s' has no rkey", mr->name);
		mr->rkey = v;
		mr->zero_based = json_is_true(json_object_get(o, "zero_based"));
		/* Registered here as the daemon did: paged on demand too. */
		mr->odp = json_is_true(json_object_get(o, "odp"));
		if (!client_json_uint(o, "iova", UINT64_MAX, &mr->iova))
			return malformed(p, "mr '%s' has no iova", mr->name);
		if (mr->zero_based)
			mr->iova = 0;
		r = parse_access(p, mr->name, json_object_get(o, "access"),
				 &mr->access);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Optional (daemons before 0.6 send none): implicit MRs to register. */
static int parse_imrs(struct rdmad_profile *p, const struct proto_msg *m)
{
	json_t *a, *o;
	size_t n, i, j;
	int r;

	a = get_array(m->payload, "implicit_mr", &n);
	if (n == (size_t)-1)
		return malformed(p, "\"implicit_mr\" is not an array");
	p->imr = calloc(n ? n : 1, sizeof(*p->imr));
	if (!p->imr)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		struct client_imr *mr = &p->imr[p->n_imr++];
		const char *s;

		mr->name = get_name(o, "name");
		if (!mr->name)
			return malformed(p, "implicit mr %zu has no name", i);
		for (j = 0; j < p->n_mr; j++)
			if (streq(p->mr[j].name, mr->name))
				return malformed(p, "mr '%s' twice", mr->name);
		for (j = 0; j < i; j++)
			if (streq(p->imr[j].name, mr->name))
				return malformed(p, "mr '%s' twice", mr->name);
		s = json_string_value(json_object_get(o, "pd"));
		if (!find_index(p, true, s, &mr->pd))
			return malformed(p, "mr '%s': no pd '%s'", mr->name,
					 s ? s : "");
		r = parse_access(p, mr->name, json_object_get(o, "access"),
				 &mr->access);
		if (r < 0)
			return r;
	}
	return 0;
}

int client_parse_attached(struct rdmad_profile *p, struct proto_msg *m,
			  unsigned int flags)
{
	const json_t *doc = m->payload;
	const char *mode = json_string_value(json_object_get(doc, "mode"));
	uint64_t v;
	int r;

	if (!client_json_uint(doc, "attachment", UINT32_MAX, &v))
		return malformed(p, "no attachment id");
	p->attachment = v;
	p->granted = true;

	if (mode && streq(mode, "shared"))
		p->mode = RDMAD_MODE_SHARED;
	else if (mode && streq(mode, "local"))
		p->mode = RDMAD_MODE_LOCAL;
	else
		return malformed(p, "mode '%s'", mode ? mode : "");
	if (((flags & RDMAD_ATTACH_SHARED) && p->mode != RDMAD_MODE_SHARED) ||
	    ((flags & RDMAD_ATTACH_LOCAL) && p->mode != RDMAD_MODE_LOCAL))
		return client_set_error(EPROTO,
					"rdmad attached profile '%s' in %s "
					"mode, not in the mode asked",
					p->name, mode);

	p->ibdev = get_name(doc, "ibdev");
	if (!p->ibdev)
		return malformed(p, "no ibdev");
	if (!client_json_uint(doc, "port", 255, &v) || v == 0)
		return malformed(p, "no port");
	p->port = (int)v;
	if (!client_json_uint(doc, "gid_index", INT32_MAX, &v))
		return malformed(p, "no gid_index");
	p->gid_index = (int)v;

	if (p->mode == RDMAD_MODE_SHARED) {
		if (!client_json_uint(doc, "cmd_fd", UINT32_MAX, &v))
			return malformed(p, "shared mode without cmd_fd");
		r = take_fd(p, m, v, "cmd_fd", &p->cmd_fd);
		if (r < 0)
			return r;
	}
	r = parse_memory(p, m);
	if (r < 0)
		return r;
	r = parse_xrcds(p, m);
	if (r < 0)
		return r;
	r = parse_pds(p, m);
	if (r < 0)
		return r;
	r = parse_nums(p, m, "qp", "qp_num", &p->qp, &p->n_qp);
	if (r < 0)
		return r;
	r = parse_nums(p, m, "srq", "srq_num", &p->srq, &p->n_srq);
	if (r < 0)
		return r;
	r = parse_mrs(p, m);
	if (r < 0)
		return r;
	r = parse_imrs(p, m);
	if (r < 0)
		return r;
	r = client_parse_mcasts(p, m->payload);
	if (r < 0)
		return r;
	return parse_dms(p, m);
}

