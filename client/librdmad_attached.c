// SPDX-License-Identifier: MIT
/*
 * An ATTACHED answer (proto/PROTOCOL.md) read into a profile: decoded and
 * checked whole by the protocol's one decoder (proto/attached.h) before
 * anything is opened or mapped, then taken into the profile.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attached.h"
#include "librdmad_internal.h"
#include "mr_table.h"
#include "util.h"

/* ---- profiles: parsing ATTACHED ---- */

void client_profile_free(struct rdmad_profile *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->n_mem; i++) {
		/* A memory not read from the table yet may have its fd. */
		closep(&p->mem[i].fd);
		if (p->mem[i].read && !p->mem_in_table)
			free(p->mem[i].name);
	}
	for (i = 0; i < p->n_pd; i++)
		free(p->pd[i].name);
	for (i = 0; i < p->n_mr; i++)
		free(p->mr[i].name);
	client_table_mrs_free(p);
	if (p->mrt)
		munmap((void *)p->mrt, p->mrt_len);
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

static int malformed(const struct rdmad_profile *p, const char *why)
{
	return client_set_error(EPROTO,
				"rdmad's ATTACHED for profile '%s' is "
				"malformed: %s",
				p->name, why);
}

/* Take the string out of the decoded document. */
static char *steal(char **s)
{
	char *v = *s;

	*s = NULL;
	return v;
}

#define ALLOC(arr, n)                                                          \
	((arr) = calloc((n) ? (n) : 1, sizeof(*(arr))))

/* The objects of a decoded ATTACHED into p, fds taken out of m by the
 * indexes the decoder checked (each < m->n_fds, each once). */
static int fill(struct rdmad_profile *p, struct proto_attached *a,
		struct proto_msg *m)
{
	if (!ALLOC(p->mem, a->n_memory) || !ALLOC(p->xrcd, a->n_xrcd) ||
	    !ALLOC(p->pd, a->n_pd) || !ALLOC(p->qp, a->n_qp) ||
	    !ALLOC(p->srq, a->n_srq) || !ALLOC(p->mr, a->n_mr) ||
	    !ALLOC(p->imr, a->n_implicit_mr) || !ALLOC(p->dm, a->n_dm) ||
	    !ALLOC(p->dm_mr, a->n_dm_mr))
		return client_set_error(ENOMEM, "out of memory");
	for (size_t i = 0; i < a->n_memory; i++, p->n_mem++) {
		struct client_memory *mem = &p->mem[i];

		mem->name = steal(&a->memory[i].name);
		mem->size = a->memory[i].size;
		mem->addr = MAP_FAILED;
		mem->fd =
		    a->memory[i].has_fd ? TAKE_FD(m->fds[a->memory[i].fd]) : -1;
		mem->ask = !a->memory[i].has_fd;
		mem->read = true;
	}
	for (size_t i = 0; i < a->n_xrcd; i++, p->n_xrcd++) {
		p->xrcd[i].name = steal(&a->xrcd[i].name);
		p->xrcd[i].fd = TAKE_FD(m->fds[a->xrcd[i].fd]);
	}
	for (size_t i = 0; i < a->n_pd; i++, p->n_pd++) {
		p->pd[i].name = steal(&a->pd[i].name);
		p->pd[i].handle = (uint32_t)a->pd[i].handle;
	}
	for (size_t i = 0; i < a->n_qp; i++, p->n_qp++) {
		struct client_num *q = &p->qp[i];

		q->name = steal(&a->qp[i].name);
		q->xrcd = steal(&a->qp[i].xrcd);
		q->xrc = a->qp[i].type && streq(a->qp[i].type, "xrc_recv");
		q->has_num = a->qp[i].has_qp_num;
		q->num = (uint32_t)a->qp[i].qp_num;
	}
	for (size_t i = 0; i < a->n_srq; i++, p->n_srq++) {
		struct client_num *q = &p->srq[i];

		q->name = steal(&a->srq[i].name);
		q->xrc = a->srq[i].type && streq(a->srq[i].type, "xrc");
		q->has_num = a->srq[i].has_srq_num;
		q->num = (uint32_t)a->srq[i].srq_num;
	}
	for (size_t i = 0; i < a->n_mr; i++, p->n_mr++) {
		const struct proto_att_mr *d = &a->mr[i];
		struct client_mr *mr = &p->mr[i];

		mr->name = steal(&a->mr[i].name);
		mr->pd = d->pd_index;
		mr->memory = d->memory_index;
		mr->offset = d->offset;
		mr->length = d->length;
		mr->handle = (uint32_t)d->handle;
		mr->rkey = (uint32_t)d->rkey;
		mr->zero_based = d->zero_based;
		/* Registered here as the daemon did: paged on demand too. */
		mr->odp = d->odp;
		mr->iova = d->zero_based ? 0 : d->iova;
		mr->access = d->access;
	}
	for (size_t i = 0; i < a->n_implicit_mr; i++, p->n_imr++) {
		p->imr[i].name = steal(&a->implicit_mr[i].name);
		p->imr[i].pd = a->implicit_mr[i].pd_index;
		p->imr[i].access = a->implicit_mr[i].access;
	}
	for (size_t i = 0; i < a->n_dm; i++, p->n_dm++) {
		p->dm[i].name = steal(&a->dm[i].name);
		p->dm[i].handle = (uint32_t)a->dm[i].handle;
		p->dm[i].size = a->dm[i].size;
	}
	for (size_t i = 0; i < a->n_dm_mr; i++, p->n_dm_mr++) {
		struct client_dm_mr *mr = &p->dm_mr[i];

		mr->name = steal(&a->dm_mr[i].name);
		mr->pd = a->dm_mr[i].pd_index;
		mr->handle = (uint32_t)a->dm_mr[i].handle;
		mr->rkey = (uint32_t)a->dm_mr[i].rkey;
		mr->length = a->dm_mr[i].length;
	}
	return client_mcasts_take(p, a);
}

/* The seals that make a table ours to read: nobody can write, shrink
 * (a read past its end would be SIGBUS) or grow it any more. */
#define TABLE_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)

struct client_memory *client_memory(struct rdmad_profile *p, size_t i)
{
	struct client_memory *mem = &p->mem[i];
	struct proto_mr_table_memory m;
	const char *name;
	int fd = mem->fd;

	if (mem->read)
		return mem;
	if (proto_mr_table_memory(p->mrt, p->mrt_len, (uint32_t)i, &m, &name) <
		0 ||
	    m.size > SIZE_MAX) {
		malformed(p, "a memory in its MR table is not one this "
			     "librdmad reads");
		return NULL;
	}
	*mem = (struct client_memory){
	    .name = (char *)name,
	    .fd = fd,
	    .ask = fd < 0,
	    .read = true,
	    .addr = MAP_FAILED,
	    .size = (size_t)m.size,
	};
	return mem;
}

/* The memories in the table (t says so): n_mem of them, each read when
 * first used (client_memory()), so that an attach costs the same for 1
 * memory or 10,000; their fds taken from m where they came too. */
static int table_memories(struct rdmad_profile *p,
			  const struct proto_att_mr_table *t,
			  struct proto_msg *m)
{
	uint32_t n = proto_mr_table_memories(p->mrt, p->mrt_len);
	struct client_memory *mem;

	if (n != t->memories)
		return malformed(p, "its MR table has another number of "
				    "memories than said");
	mem = calloc(n ? n : 1, sizeof(*mem));
	if (!mem)
		return client_set_error(ENOMEM, "out of memory");
	/* Checked by the decoder: memory_fd + n fds are the message's. */
	for (uint32_t i = 0; i < n; i++)
		mem[i].fd = t->has_memory_fd
				    ? TAKE_FD(m->fds[t->memory_fd + i])
				    : -1;
	free(p->mem);
	p->mem = mem;
	p->n_mem = n;
	p->mem_in_table = true;
	return 0;
}

/* The MR table's memfd, fd, mapped read-only into p once checked;
 * populate: its pages mapped now (RDMAD_ATTACH_MAP: the first use of an
 * MR then takes no page fault on the table either). */
static int map_table(struct rdmad_profile *p,
		     const struct proto_att_mr_table *t, int fd, bool populate)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	void *at;
	int r;

	if (seals < 0 || (seals & TABLE_SEALS) != TABLE_SEALS)
		r = malformed(p, "its MR table is not sealed");
	else if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != t->size)
		r = malformed(p, "its MR table has another size than said");
	else if ((at = mmap(NULL, t->size, PROT_READ,
			    MAP_SHARED | (populate ? MAP_POPULATE : 0), fd,
			    0)) == MAP_FAILED)
		r = client_set_error(errno, "cannot map the MR table: %s",
				     strerror(errno));
	else {
		p->mrt = at;
		p->mrt_len = t->size;
		r = proto_mr_table_check(at, t->size, &p->mrt_count) < 0 ||
				    p->mrt_count != t->count
			    ? malformed(p, "its MR table is not one this "
					   "librdmad reads")
			    : 0;
	}
	close(fd);
	return r;
}

int client_parse_attached(struct rdmad_profile *p, struct proto_msg *m,
			  unsigned int flags)
{
	struct proto_attached a;
	char why[256];
	uint64_t v;
	int r;

	/* First, so that a malformed rest can still be detached. */
	if (!client_json_uint(m->payload, "attachment", UINT32_MAX, &v))
		return malformed(p, "no attachment id");
	p->attachment = v;
	p->granted = true;

	r = proto_attached_decode(m->payload, m->n_fds, &a, why, sizeof(why));
	if (r == -ENOMEM) {
		proto_attached_free(&a);
		return client_set_error(ENOMEM, "out of memory");
	}
	if (r < 0) {
		proto_attached_free(&a);
		return malformed(p, why);
	}
	p->mode = a.mode == PROTO_ATTACH_SHARED ? RDMAD_MODE_SHARED
						: RDMAD_MODE_LOCAL;
	if (((flags & RDMAD_ATTACH_SHARED) && p->mode != RDMAD_MODE_SHARED) ||
	    ((flags & RDMAD_ATTACH_LOCAL) && p->mode != RDMAD_MODE_LOCAL)) {
		proto_attached_free(&a);
		return client_set_error(EPROTO,
					"rdmad attached profile '%s' in %s "
					"mode, not in the mode asked",
					p->name,
					p->mode == RDMAD_MODE_SHARED ? "shared"
								     : "local");
	}
	p->ibdev = steal(&a.ibdev);
	p->port = (int)a.port;
	p->gid_index = (int)a.gid_index;
	if (p->mode == RDMAD_MODE_SHARED)
		p->cmd_fd = TAKE_FD(m->fds[a.cmd_fd]);
	r = fill(p, &a, m);
	if (r == 0 && a.has_mr_table)
		r = map_table(p, &a.mr_table, TAKE_FD(m->fds[a.mr_table.fd]),
			      flags & RDMAD_ATTACH_MAP);
	if (r == 0 && a.has_mr_table && a.mr_table.has_memories)
		r = table_memories(p, &a.mr_table, m);
	proto_attached_free(&a);
	return r;
}
