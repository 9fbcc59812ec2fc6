// SPDX-License-Identifier: MIT
/*
 * The MR table's writer (the daemon's, once per profile generation) and
 * its reader's checks (librdmad's, at each first use of an MR): the
 * layout is mr_table.h's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mr_table.h"

_Static_assert(sizeof(struct proto_mr_table_head) == 64, "head layout");
_Static_assert(sizeof(struct proto_mr_entry) == 64, "entry layout");

/* The index of name in a list of n structs of size bytes whose first
 * member is the name; hint first (MRs of one memory come together). */
static int64_t index_of(const void *list, size_t n, size_t size,
			const char *name, size_t hint)
{
	const char *base = list;

	if (hint < n && !strcmp(*(char *const *)(base + hint * size), name))
		return (int64_t)hint;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(*(char *const *)(base + i * size), name))
			return (int64_t)i;
	return -1;
}

/* For the sort of the index: names, by the entries' numbers. */
struct sort_ctx {
	const struct proto_att_mr *mr;
};

static int by_name(const void *x, const void *y, void *ud)
{
	const struct sort_ctx *s = ud;

	return strcmp(s->mr[*(const uint32_t *)x].name,
		      s->mr[*(const uint32_t *)y].name);
}

/* FNV-1a, 32 bits, of the n bytes of a name (PROTOCOL.md): a name's
 * first slot is this modulo the slots. */
static uint32_t name_hash(const char *name, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)name[i]) * 16777619u;
	return h;
}

/* Slots for n entries: a power of two, at most half full. */
static size_t hash_slots(size_t n)
{
	size_t slots = 1;

	while (n && slots < 2 * n)
		slots <<= 1;
	return n ? slots : 0;
}

/* Entry i, named name (n bytes), into the hash (slots a power of two). */
static void hash_put(uint32_t *hash, size_t slots, const char *name, size_t n,
		     uint32_t i)
{
	size_t s = name_hash(name, n) & (slots - 1);

	while (hash[s])
		s = (s + 1) & (slots - 1);
	hash[s] = i + 1;
}

/* The memories' records, after the index, and their names after the
 * MRs'; *at moves past the names written. */
static void encode_memories(const struct proto_attached *a, char *out,
			    struct proto_mr_table_head *h, size_t *at)
{
	struct proto_mr_table_memory *m =
	    (struct proto_mr_table_memory *)(out + h->memories_off);

	for (size_t i = 0; i < a->n_memory; i++) {
		size_t n = strlen(a->memory[i].name);

		m[i] = (struct proto_mr_table_memory){
		    .name_off = (uint32_t)*at,
		    .name_len = (uint32_t)n,
		    .size = a->memory[i].size,
		};
		memcpy(out + h->names_off + *at, a->memory[i].name, n + 1);
		*at += n + 1;
	}
}

int proto_mr_table_encode(const struct proto_attached *a, void **buf,
			  size_t *len)
{
	struct proto_mr_table_head *h;
	struct proto_mr_entry *e;
	uint32_t *index, *hash;
	size_t names = 0, at, size, mem_off, hash_off, slots;
	int64_t pd = 0, mem = 0;
	char *out;

	if (a->n_mr > UINT32_MAX / 2 || a->n_memory > UINT32_MAX / 2)
		return -EINVAL;
	for (size_t i = 0; i < a->n_mr; i++)
		names += strlen(a->mr[i].name) + 1;
	for (size_t i = 0; i < a->n_memory; i++)
		names += strlen(a->memory[i].name) + 1;
	/* The hash after the index, then the memories' records, 8-aligned. */
	hash_off = sizeof(*h) + a->n_mr * (sizeof(*e) + sizeof(*index));
	slots = hash_slots(a->n_mr);
	mem_off = (hash_off + slots * sizeof(*hash) + 7) & ~(size_t)7;
	size = mem_off + a->n_memory * sizeof(struct proto_mr_table_memory) +
	       names;
	if (size > UINT32_MAX)
		return -EINVAL;
	out = calloc(1, size);
	if (!out)
		return -ENOMEM;
	h = (struct proto_mr_table_head *)out;
	memcpy(h->magic, PROTO_MR_TABLE_MAGIC, sizeof(h->magic));
	h->version = PROTO_MR_TABLE_VERSION;
	h->count = (uint32_t)a->n_mr;
	h->entry_size = sizeof(*e);
	h->entries_off = sizeof(*h);
	h->index_off = (uint32_t)(h->entries_off + a->n_mr * sizeof(*e));
	h->hash_off = slots ? (uint32_t)hash_off : 0;
	h->hash_slots = (uint32_t)slots;
	h->memories_off = (uint32_t)mem_off;
	h->memory_count = (uint32_t)a->n_memory;
	h->memory_size = sizeof(struct proto_mr_table_memory);
	h->names_off =
	    (uint32_t)(mem_off +
		       a->n_memory * sizeof(struct proto_mr_table_memory));
	h->names_len = names;
	e = (struct proto_mr_entry *)(out + h->entries_off);
	index = (uint32_t *)(out + h->index_off);
	hash = (uint32_t *)(out + hash_off);
	at = 0;
	for (size_t i = 0; i < a->n_mr; i++) {
		const struct proto_att_mr *m = &a->mr[i];
		size_t n = strlen(m->name);

		pd = index_of(a->pd, a->n_pd, sizeof(*a->pd), m->pd,
			      (size_t)pd);
		mem = index_of(a->memory, a->n_memory, sizeof(*a->memory),
			       m->memory ? m->memory : "", (size_t)mem);
		if (pd < 0 || mem < 0) {
			free(out);
			return -EINVAL;
		}
		e[i] = (struct proto_mr_entry){
			.name_off = (uint32_t)at, .name_len = (uint32_t)n,
			.pd = (uint32_t)pd, .memory = (uint32_t)mem,
			.handle = (uint32_t)m->handle,
			.lkey = (uint32_t)m->lkey, .rkey = (uint32_t)m->rkey,
			.access = m->access, .offset = m->offset,
			.length = m->length, .iova = m->iova,
			.flags = (m->zero_based ? PROTO_MR_ZERO_BASED : 0) |
				 (m->odp ? PROTO_MR_ODP : 0),
		};
		memcpy(out + h->names_off + at, m->name, n + 1);
		at += n + 1;
		index[i] = (uint32_t)i;
		hash_put(hash, slots, m->name, n, (uint32_t)i);
	}
	encode_memories(a, out, h, &at);
	qsort_r(index, a->n_mr, sizeof(*index), by_name,
		&(struct sort_ctx){ a->mr });
	*buf = out;
	*len = size;
	return 0;
}

static const struct proto_mr_table_head *head_of(const void *buf, size_t len)
{
	const struct proto_mr_table_head *h = buf;
	uint64_t count;

	if (!buf || len < sizeof(*h) ||
	    memcmp(h->magic, PROTO_MR_TABLE_MAGIC, sizeof(h->magic)) ||
	    h->version != PROTO_MR_TABLE_VERSION ||
	    h->entry_size != sizeof(struct proto_mr_entry))
		return NULL;
	count = h->count;
	/* In 64 bits: no sum below wraps. */
	if ((uint64_t)h->entries_off + count * h->entry_size > len ||
	    (uint64_t)h->index_off + count * sizeof(uint32_t) > len ||
	    h->names_len > len || h->names_off > len - h->names_len ||
	    h->entries_off % 8 || h->index_off % 4)
		return NULL;
	return h;
}

/* A name of n bytes at off within the names, NUL-terminated, no NUL in
 * it: the pointer, or NULL. */
static const char *name_at(const void *buf, const struct proto_mr_table_head *h,
			   uint32_t off, uint32_t n)
{
	const char *names = (const char *)buf + h->names_off;

	if (n == 0 || (uint64_t)off + n + 1 > h->names_len ||
	    names[off + n] != '\0' || memchr(names + off, '\0', n))
		return NULL;
	return names + off;
}

/* The head if its memories lie within len, NULL if not. */
static const struct proto_mr_table_head *memories_of(const void *buf,
						     size_t len)
{
	const struct proto_mr_table_head *h = head_of(buf, len);

	if (!h || h->memory_count == 0)
		return h;
	if (h->memory_size != sizeof(struct proto_mr_table_memory) ||
	    h->memories_off % 8 ||
	    (uint64_t)h->memories_off +
		    (uint64_t)h->memory_count * h->memory_size >
		len)
		return NULL;
	return h;
}

int proto_mr_table_check(const void *buf, size_t len, uint32_t *count)
{
	const struct proto_mr_table_head *h = head_of(buf, len);

	if (!h)
		return -EPROTO;
	*count = h->count;
	return 0;
}

int proto_mr_table_at(const void *buf, size_t len, uint32_t i,
		      size_t n_pd, size_t n_memory,
		      struct proto_mr_entry *e, const char **name)
{
	const struct proto_mr_table_head *h = head_of(buf, len);

	if (!h)
		return -EPROTO;
	if (i >= h->count)
		return -ERANGE;
	memcpy(e, (const char *)buf + h->entries_off + (size_t)i * sizeof(*e),
	       sizeof(*e));
	/* The name and its NUL within the names; pd and memory within
	 * the message's lists; a length that no memory can hold. */
	*name = name_at(buf, h, e->name_off, e->name_len);
	if (!*name || e->pd >= n_pd || e->memory >= n_memory ||
	    e->length == 0 || e->offset + e->length < e->offset)
		return -EPROTO;
	return 0;
}

uint32_t proto_mr_table_memories(const void *buf, size_t len)
{
	const struct proto_mr_table_head *h = memories_of(buf, len);

	return h ? h->memory_count : 0;
}

int proto_mr_table_memory(const void *buf, size_t len, uint32_t i,
			  struct proto_mr_table_memory *m, const char **name)
{
	const struct proto_mr_table_head *h = memories_of(buf, len);

	if (!h)
		return -EPROTO;
	if (i >= h->memory_count)
		return -ERANGE;
	memcpy(m, (const char *)buf + h->memories_off + (size_t)i * sizeof(*m),
	       sizeof(*m));
	*name = name_at(buf, h, m->name_off, m->name_len);
	return *name && m->size ? 0 : -EPROTO;
}

/* name (want bytes) against entry i's name, bytewise as strcmp sorts,
 * within the entry's own bytes (a name with a NUL inside, a malformed
 * one, or missing its own reads no further): 0 and *c, or -EPROTO. */
static int name_cmp(const void *buf, const struct proto_mr_table_head *h,
		    uint32_t i, const char *name, size_t want, int *c)
{
	const char *names = (const char *)buf + h->names_off;
	struct proto_mr_entry e;

	if (i >= h->count)
		return -EPROTO;
	memcpy(&e, (const char *)buf + h->entries_off + (size_t)i * sizeof(e),
	       sizeof(e));
	if ((uint64_t)e.name_off + e.name_len + 1 > h->names_len)
		return -EPROTO;
	*c = memcmp(name, names + e.name_off,
		    want < e.name_len ? want : e.name_len);
	if (*c == 0)
		*c = want < e.name_len ? -1 : want > e.name_len;
	return 0;
}

/* The hash's slots, if the table has a hash within its bounds. */
static const uint32_t *hash_of(const void *buf, size_t len,
			       const struct proto_mr_table_head *h)
{
	uint32_t n = h->hash_slots;

	if (!n || n & (n - 1) || h->hash_off % 4 ||
	    (uint64_t)h->hash_off + (uint64_t)n * sizeof(uint32_t) > len)
		return NULL;
	return (const uint32_t *)((const char *)buf + h->hash_off);
}

int64_t proto_mr_table_find(const void *buf, size_t len, const char *name)
{
	const struct proto_mr_table_head *h = head_of(buf, len);
	const uint32_t *index, *hash;
	size_t lo = 0, hi, want = strlen(name);
	int c;

	if (!h)
		return -EPROTO;
	hash = hash_of(buf, len, h);
	if (hash) {
		/* Every slot at most once: a full table ends too. */
		uint32_t mask = h->hash_slots - 1;
		uint32_t s = name_hash(name, want) & mask;

		for (uint32_t k = 0; k <= mask && hash[s]; k++) {
			if (name_cmp(buf, h, hash[s] - 1, name, want, &c) < 0)
				return -EPROTO;
			if (c == 0)
				return hash[s] - 1;
			s = (s + 1) & mask;
		}
		return -ENOENT;
	}
	index = (const uint32_t *)((const char *)buf + h->index_off);
	hi = h->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (name_cmp(buf, h, index[mid], name, want, &c) < 0)
			return -EPROTO;
		if (c == 0)
			return index[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -ENOENT;
}
