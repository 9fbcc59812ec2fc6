// SPDX-License-Identifier: MIT
/*
 * The MR table's memories and its name hash (proto/mr_table.c,
 * PROTOCOL.md "The MR table"): the writer puts the profile's memories after the
 * index and says where in head bytes that were reserved, which a reader of the
 * first layout does not look at; the reader hands a memory out only when its
 * record and its name lie within the table. The oracle is the layout
 * PROTOCOL.md gives, read here from the raw bytes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mr_table.h"

static uint32_t u32_at(const void *buf, size_t at)
{
	uint32_t v;

	memcpy(&v, (const char *)buf + at, sizeof(v));
	return v;
}

static uint64_t u64_at(const void *buf, size_t at)
{
	uint64_t v;

	memcpy(&v, (const char *)buf + at, sizeof(v));
	return v;
}

/* n memories m0.. of 4096 * (i + 1) bytes, one PD, an MR in each. */
static void profile_of(struct proto_attached *a, size_t n)
{
	*a = (struct proto_attached){0};
	a->memory = calloc(n, sizeof(*a->memory));
	a->mr = calloc(n, sizeof(*a->mr));
	a->pd = calloc(1, sizeof(*a->pd));
	assert_non_null(a->memory);
	assert_non_null(a->mr);
	assert_non_null(a->pd);
	a->pd[0].name = strdup("pd");
	a->n_pd = 1;
	for (size_t i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "m%zu", i);
		a->memory[i].name = strdup(name);
		a->memory[i].size = 4096 * (i + 1);
		a->mr[i].memory = strdup(name);
		snprintf(name, sizeof(name), "r%zu", i);
		a->mr[i].name = strdup(name);
		a->mr[i].pd = strdup("pd");
		a->mr[i].length = 4096;
		a->mr[i].handle = (uint64_t)(100 + i);
	}
	a->n_memory = n;
	a->n_mr = n;
}

static void test_memories_after_the_index(void **state)
{
	struct proto_attached a;
	struct proto_mr_table_memory m;
	struct proto_mr_entry e;
	const char *name;
	void *buf;
	size_t len;
	uint32_t count, off;

	(void)state;
	profile_of(&a, 5);
	assert_int_equal(proto_mr_table_encode(&a, &buf, &len), 0);
	/* The head as PROTOCOL.md lays it out. */
	assert_memory_equal(buf, "RDMADMRT", 8);
	assert_int_equal(u32_at(buf, 8), 1);  /* version */
	assert_int_equal(u32_at(buf, 12), 5); /* MRs */
	off = u32_at(buf, 40);		      /* the memories */
	assert_int_equal(u32_at(buf, 44), 5);
	assert_int_equal(u32_at(buf, 48), 24);
	assert_int_equal(off % 8, 0);
	/* After the index (at 24, count uint32s). */
	assert_true(off >= u32_at(buf, 24) + 5 * 4);
	for (uint32_t i = 0; i < 5; i++) {
		uint32_t name_off = u32_at(buf, off + 24 * i);
		uint32_t name_len = u32_at(buf, off + 24 * i + 4);
		const char *names = (const char *)buf + u32_at(buf, 28);
		char want[32];

		snprintf(want, sizeof(want), "m%u", i);
		assert_int_equal(name_len, strlen(want));
		assert_memory_equal(names + name_off, want, name_len + 1);
		assert_int_equal(u64_at(buf, off + 24 * i + 8), 4096 * (i + 1));
		/* And as the reader gives it. */
		assert_int_equal(proto_mr_table_memory(buf, len, i, &m, &name),
				 0);
		assert_string_equal(name, want);
		assert_int_equal(m.size, 4096 * (i + 1));
	}
	assert_int_equal(proto_mr_table_memories(buf, len), 5);
	assert_int_equal(proto_mr_table_memory(buf, len, 5, &m, &name),
			 -ERANGE);
	/* The MRs read as before, their memory an index into the same. */
	assert_int_equal(proto_mr_table_check(buf, len, &count), 0);
	assert_int_equal(count, 5);
	assert_int_equal(proto_mr_table_at(buf, len, 3, 1, 5, &e, &name), 0);
	assert_string_equal(name, "r3");
	assert_int_equal(e.memory, 3);
	assert_int_equal(proto_mr_table_find(buf, len, "r4"), 4);
	free(buf);
	proto_attached_free(&a);
}

static void test_a_table_without_memories(void **state)
{
	struct proto_attached a;
	struct proto_mr_table_memory m;
	const char *name;
	void *buf;
	size_t len;

	(void)state;
	profile_of(&a, 2);
	assert_int_equal(proto_mr_table_encode(&a, &buf, &len), 0);
	/* As an older daemon writes it: the bytes that were reserved, 0. */
	memset((char *)buf + 40, 0, 12);
	assert_int_equal(proto_mr_table_memories(buf, len), 0);
	assert_int_equal(proto_mr_table_memory(buf, len, 0, &m, &name),
			 -ERANGE);
	free(buf);
	proto_attached_free(&a);
}

static void test_memories_out_of_bounds(void **state)
{
	struct proto_attached a;
	struct proto_mr_table_memory m;
	const char *name;
	char *buf;
	size_t len;
	uint32_t off, v;

	(void)state;
	profile_of(&a, 3);
	assert_int_equal(proto_mr_table_encode(&a, (void **)&buf, &len), 0);
	off = u32_at(buf, 40);
	/* A record size this reader does not know. */
	v = 32;
	memcpy(buf + 48, &v, 4);
	assert_int_equal(proto_mr_table_memory(buf, len, 0, &m, &name),
			 -EPROTO);
	v = 24;
	memcpy(buf + 48, &v, 4);
	/* More records than the table holds. */
	v = (uint32_t)(len / 24 + 1);
	memcpy(buf + 44, &v, 4);
	assert_int_equal(proto_mr_table_memory(buf, len, 0, &m, &name),
			 -EPROTO);
	assert_int_equal(proto_mr_table_memories(buf, len), 0);
	v = 3;
	memcpy(buf + 44, &v, 4);
	/* A name past the names. */
	v = (uint32_t)len;
	memcpy(buf + off + 24, &v, 4);
	assert_int_equal(proto_mr_table_memory(buf, len, 1, &m, &name),
			 -EPROTO);
	/* A size of 0. */
	memset(buf + off + 48 + 8, 0, 8);
	assert_int_equal(proto_mr_table_memory(buf, len, 2, &m, &name),
			 -EPROTO);
	/* The first still reads. */
	assert_int_equal(proto_mr_table_memory(buf, len, 0, &m, &name), 0);
	assert_string_equal(name, "m0");
	free(buf);
	proto_attached_free(&a);
}

/* FNV-1a of 32 bits, as PROTOCOL.md names it, written here from its
 * definition (offset basis 2166136261, prime 16777619). */
static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static void test_found_through_the_hash(void **state)
{
	struct proto_attached a;
	char *buf, name[32];
	size_t len;
	uint32_t hash_off, slots, v;

	(void)state;
	profile_of(&a, 1000);
	assert_int_equal(proto_mr_table_encode(&a, (void **)&buf, &len), 0);
	hash_off = u32_at(buf, 52);
	slots = u32_at(buf, 56);
	/* A power of two, at most half full, 4-aligned, within the table
	 * and clear of the index and the memories. */
	assert_true(slots >= 2000 && (slots & (slots - 1)) == 0);
	assert_int_equal(hash_off % 4, 0);
	assert_true(hash_off >= u32_at(buf, 24) + 1000 * 4);
	assert_true(hash_off + (size_t)slots * 4 <= u32_at(buf, 40));
	for (uint32_t i = 0; i < 1000; i++) {
		uint32_t s;

		snprintf(name, sizeof(name), "r%u", i);
		/* Entry i + 1 in the first slot from its hash on that is
		 * either it or taken by another. */
		s = fnv1a(name) & (slots - 1);
		while (u32_at(buf, hash_off + 4 * s) != i + 1) {
			assert_int_not_equal(u32_at(buf, hash_off + 4 * s), 0);
			s = (s + 1) & (slots - 1);
		}
		assert_int_equal(proto_mr_table_find(buf, len, name), i);
	}
	assert_int_equal(proto_mr_table_find(buf, len, "r1000"), -ENOENT);
	assert_int_equal(proto_mr_table_find(buf, len, "r"), -ENOENT);
	/* A table without the hash (an older daemon's): the index. */
	memset(buf + 52, 0, 8);
	assert_int_equal(proto_mr_table_find(buf, len, "r777"), 777);
	assert_int_equal(proto_mr_table_find(buf, len, "r1000"), -ENOENT);
	/* Slots that are not a power of two, or past the end: the index. */
	v = slots - 1;
	memcpy(buf + 52, &hash_off, 4);
	memcpy(buf + 56, &v, 4);
	assert_int_equal(proto_mr_table_find(buf, len, "r5"), 5);
	v = (uint32_t)(len / 4);
	while (v & (v - 1))
		v &= v - 1;
	v <<= 1;
	memcpy(buf + 56, &v, 4);
	assert_int_equal(proto_mr_table_find(buf, len, "r5"), 5);
	/* Every slot taken, by entry 0: a name not there ends, unfound. */
	memcpy(buf + 56, &slots, 4);
	v = 1;
	for (uint32_t s = 0; s < slots; s++)
		memcpy(buf + hash_off + 4 * s, &v, 4);
	assert_int_equal(proto_mr_table_find(buf, len, "r0"), 0);
	assert_int_equal(proto_mr_table_find(buf, len, "zz"), -ENOENT);
	/* A slot naming an entry past the count. */
	v = 1001;
	memcpy(buf + hash_off + 4 * (fnv1a("r9") & (slots - 1)), &v, 4);
	assert_int_equal(proto_mr_table_find(buf, len, "r9"), -EPROTO);
	free(buf);
	proto_attached_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_memories_after_the_index),
	    cmocka_unit_test(test_a_table_without_memories),
	    cmocka_unit_test(test_memories_out_of_bounds),
	    cmocka_unit_test(test_found_through_the_hash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
