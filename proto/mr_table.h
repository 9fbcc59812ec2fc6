/* SPDX-License-Identifier: MIT */
/*
 * The MR table (PROTOCOL.md, "The MR table"): ATTACHED's "mr" list of a
 * shared attach, laid out in a sealed memfd that the daemon writes once
 * per profile generation and every attach maps, instead of the list in
 * the message. A client finds an MR by name in it (its hash) when
 * it first asks for it, so that an attach costs the same whatever the
 * profile holds. The layout is fixed-size records, host byte order (the
 * two ends share a machine):
 *
 *   head     64 bytes: magic "RDMADMRT", version 1, count, entry size,
 *            where the entries, the name index and the names are; and
 *            where the memories are, how many, their record's size
 *   entries  count records of 64 bytes, in ATTACHED's order
 *   index    count uint32_t: the entries' numbers sorted by name
 *   hash     the entries by name hash, so that a lookup reads a slot, an
 *            entry and a name, not a page of the index and one of the
 *            names per step of a binary search
 *   memories the profile's memories, records of 24 bytes in ATTACHED's
 *            "memory" order, for a client that asked for them here
 *            ("memory_table"); a reader of version 1 that knows nothing
 *            of them skips them (they sit in what was reserved)
 *   names    each name NUL-terminated, the MRs' then the memories'
 *
 * The reader checks every offset it follows: a table is data from
 * another process.
 */
#ifndef RDMAD_PROTO_MR_TABLE_H
#define RDMAD_PROTO_MR_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "attached.h"

#define PROTO_MR_TABLE_MAGIC "RDMADMRT"
#define PROTO_MR_TABLE_VERSION 1u

/* Flags of an entry. */
#define PROTO_MR_ZERO_BASED 0x1u
#define PROTO_MR_ODP 0x2u

struct proto_mr_table_head {
	char magic[8];
	uint32_t version;
	uint32_t count;
	uint32_t entry_size; /* sizeof(struct proto_mr_entry) */
	uint32_t entries_off, index_off, names_off;
	uint64_t names_len;
	/* 0, 0, 0 in a table without its memories (an older daemon's). */
	uint32_t memories_off, memory_count, memory_size;
	/* The name hash (FNV-1a of 32 bits, PROTOCOL.md): hash_slots uint32_t at
	 * hash_off, a power of two, each an entry's number + 1 or 0 (empty),
	 * open addressing with linear probing; 0, 0 in a table without it
	 * (an older daemon's: the reader searches the index then). */
	uint32_t hash_off, hash_slots;
	uint8_t reserved[4];
};

struct proto_mr_entry {
	uint32_t name_off, name_len; /* into names: name_len bytes, then NUL */
	uint32_t pd;		     /* an index into ATTACHED's "pd" */
	uint32_t memory; /* an index into ATTACHED's "memory" (or the
			  * table's memories) */
	uint32_t handle, lkey, rkey;
	uint32_t access; /* IBV_ACCESS_* bits */
	uint64_t offset, length, iova;
	uint32_t flags; /* PROTO_MR_* */
	uint32_t reserved;
};

/* A memory of the profile: what ATTACHED's "memory" list says of it but
 * its fd (asked for with MAP) and its backing. */
struct proto_mr_table_memory {
	uint32_t name_off, name_len; /* as an entry's */
	uint64_t size;
	uint64_t reserved;
};

/*
 * The table of a's "mr" list and its "memory" list, its pd and memory names
 * resolved against a's "pd" and "memory" lists: malloc'ed into *buf, *len
 * bytes. 0, -ENOMEM, or -EINVAL when an MR names a pd or memory a does not
 * list.
 */
int proto_mr_table_encode(const struct proto_attached *a, void **buf,
			  size_t *len);

/* Whether buf (len bytes) is a table this reader knows, with count
 * entries and its parts within len: 0, or -EPROTO. */
int proto_mr_table_check(const void *buf, size_t len, uint32_t *count);

/*
 * Entry i (in ATTACHED's order) of a checked table, each field bounded:
 * its name within the names and NUL-terminated (*name points into buf),
 * pd < n_pd, memory < n_memory. 0, -ERANGE (no entry i) or -EPROTO.
 */
int proto_mr_table_at(const void *buf, size_t len, uint32_t i,
		      size_t n_pd, size_t n_memory,
		      struct proto_mr_entry *e, const char **name);

/* Memory i of a checked table, its name within the names and
 * NUL-terminated (*name points into buf). 0, -ERANGE (no memory i) or
 * -EPROTO. */
int proto_mr_table_memory(const void *buf, size_t len, uint32_t i,
			  struct proto_mr_table_memory *m, const char **name);
/* How many memories a checked table has (0 when it has none). */
uint32_t proto_mr_table_memories(const void *buf, size_t len);
/* The number of the entry named name (through the hash; a binary search
 * of the index in a table without one), or -ENOENT; -EPROTO for a table
 * that breaks its own bounds. */
int64_t proto_mr_table_find(const void *buf, size_t len, const char *name);

#endif
