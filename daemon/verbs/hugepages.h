/* SPDX-License-Identifier: MIT */
/*
 * The host's huge page pools (hugetlbfs): which page sizes it has, how
 * many pages each pool holds and has free, and what to tell an operator
 * whose pool is short. Read from sysfs and /proc/meminfo each time: the
 * pools change under us (vm.nr_hugepages).
 */
#ifndef RDMAD_HUGEPAGES_H
#define RDMAD_HUGEPAGES_H

#include <stddef.h>
#include <stdint.h>

/* The host's default huge page size in bytes (Hugepagesize), 0 if none. */
uint64_t hugepages_default_size(void);
/* The pool of page_size: 0 with *free and *total pages, -ENOENT when the
 * host has no such page size, other -errno. */
int hugepages_pool(uint64_t page_size, uint64_t *free, uint64_t *total);
/* "2M", "1G", "64K": a page size for people, into buf. */
const char *hugepages_label(uint64_t page_size, char *buf, size_t size);
/*
 * Why need_pages of page_size cannot be had, for an error message: the
 * pool is absent, or it has fewer free pages, and how to raise it.
 * Returns buf.
 */
const char *hugepages_shortage(uint64_t page_size, uint64_t need_pages,
			       char *buf, size_t size);

#endif
