// SPDX-License-Identifier: MIT
/* Large memory (verbs/memory.c, populate.c, hostmem.c) on this host, no
 * device needed: a population counts every byte once, on as many threads
 * as the budget gives, and stops between pieces when told; a memory of
 * more than 64 MiB gets its stats (populated, page size from smaps), a
 * smaller one none; a file on a filesystem is reserved; a memory larger
 * than what is free fails before any page is touched, saying why; MRs
 * holding the stats keep them after the memory goes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostmem.h"
#include "memory.h"
#include "populate.h"

#define MIB (1ull << 20)

static void populate_counts_every_byte(void **state)
{
	size_t len = 40 * MIB + 4096; /* not a whole number of pieces */
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	_Atomic uint64_t done = 0;
	uint64_t page, huge;

	(void)state;
	assert_ptr_not_equal(p, MAP_FAILED);
	populate_set_threads(4);
	assert_int_equal(populate(p, len, 0, &done, NULL), 0);
	assert_int_equal(done, len);
	/* Faulted in: the kernel says so, whatever the page size. */
	assert_int_equal(hostmem_mapping(p, &page, &huge), 0);
	assert_true(page >= 4096);
	assert_int_equal(p[len - 1], 0);
	munmap(p, len);
}

static void populate_stops_when_told(void **state)
{
	size_t len = 64 * MIB;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	_Atomic uint64_t done = 0;
	atomic_bool stop = true;

	(void)state;
	assert_ptr_not_equal(p, MAP_FAILED);
	assert_int_equal(populate(p, len, 0, &done, &stop), -ECANCELED);
	assert_int_equal(done, 0);
	munmap(p, len);
}

static void stats_for_large_memories_only(void **state)
{
	struct memory_spec big = { .name = "big", .size = 66 * MIB,
				   .backing = MEMORY_MEMFD },
			   small = { .name = "small", .size = 64 * MIB,
				     .backing = MEMORY_MEMFD };
	struct memory m = { .fd = -1 }, s = { .fd = -1 };
	struct memory_stats *st, *held;
	char why[256];

	(void)state;
	assert_int_equal(memory_create_keyed(&big, NULL, NULL, &m, why,
					     sizeof(why)),
			 0);
	st = atomic_load(&m.stats);
	assert_non_null(st);
	assert_int_equal(atomic_load(&st->populated), big.size);
	assert_true(st->page_size >= 4096);
	assert_int_equal(memory_create(&small, &s), 0);
	assert_null(atomic_load(&s.stats));
	/* An MR over the big one counts its bytes, and keeps the stats
	 * alive past the memory (ASan would see a use after free). */
	held = memory_stats_hold(&m, 4096);
	assert_ptr_equal(held, st);
	assert_int_equal(atomic_load(&st->registered), 4096);
	memory_destroy(&m);
	assert_null(atomic_load(&m.stats));
	assert_int_equal(atomic_load(&held->registered), 4096);
	memory_stats_release(held, 4096);
	memory_destroy(&s);
}

static void file_blocks_are_reserved(void **state)
{
	char dir[] = "/tmp/rdmad-test-memory.XXXXXX", path[64];
	struct memory_spec f = { .name = "f", .size = 8 * MIB,
				 .backing = MEMORY_FILE, .path = path };
	struct memory m = { .fd = -1 };
	struct stat st;
	char why[256];
	int r;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/m", dir);
	r = memory_create_keyed(&f, NULL, NULL, &m, why, sizeof(why));
	if (r == -EOPNOTSUPP) {
		/* /tmp on a filesystem without fallocate: said so. */
		assert_non_null(strstr(why, "cannot reserve the file's blocks"));
	} else {
		assert_int_equal(r, 0);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_size, f.size);
		/* Reserved: the blocks are there, not a hole. */
		assert_true((uint64_t)st.st_blocks * 512 >= f.size);
		memory_destroy(&m);
	}
	unlink(path);
	rmdir(dir);
}

static void more_than_is_free_fails_first(void **state)
{
	struct hostmem h;
	struct memory_spec big = { .name = "huge", .backing = MEMORY_ANONYMOUS };
	struct memory m = { .fd = -1 };
	char why[256];

	(void)state;
	assert_int_equal(hostmem_read(&h), 0);
	big.size = h.available + h.swap_free + 1024 * MIB;
	assert_int_equal(memory_create_keyed(&big, NULL, NULL, &m, why,
					     sizeof(why)),
			 -ENOMEM);
	assert_non_null(strstr(why, "more than this host has free"));
	assert_null(m.addr);
}

static void thp_policy_words(void **state)
{
	(void)state;
	assert_true(hostmem_thp_usable(false, "madvise"));
	assert_true(hostmem_thp_usable(false, "always"));
	assert_false(hostmem_thp_usable(false, "never"));
	assert_true(hostmem_thp_usable(true, "advise"));
	assert_true(hostmem_thp_usable(true, "within_size"));
	assert_false(hostmem_thp_usable(true, "never"));
	assert_false(hostmem_thp_usable(true, "deny"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(populate_counts_every_byte),
		cmocka_unit_test(populate_stops_when_told),
		cmocka_unit_test(stats_for_large_memories_only),
		cmocka_unit_test(file_blocks_are_reserved),
		cmocka_unit_test(more_than_is_free_fails_first),
		cmocka_unit_test(thp_policy_words),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
