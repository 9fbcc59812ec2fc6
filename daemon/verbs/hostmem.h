/* SPDX-License-Identifier: MIT */
/*
 * The host's memory as a large memory sees it: RAM and swap
 * (/proc/meminfo), the transparent huge page policy (sysfs), and the
 * page sizes a mapping really got (/proc/self/smaps). Read each time:
 * all of them change under us.
 */
#ifndef RDMAD_HOSTMEM_H
#define RDMAD_HOSTMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hostmem {
	uint64_t ram, swap;	     /* MemTotal, SwapTotal */
	uint64_t available, swap_free; /* MemAvailable, SwapFree */
};
int hostmem_read(struct hostmem *out);

/* Transparent huge pages for anonymous memory ("enabled") or for shmem,
 * memfd included ("shmem_enabled"): the policy's word, "" if the kernel
 * has none (no THP). */
const char *hostmem_thp_policy(bool shmem, char *buf, size_t size);
/* Does MADV_HUGEPAGE get huge pages under that policy? */
bool hostmem_thp_usable(bool shmem, const char *policy);
/* The size of a PMD-mapped huge page (hpage_pmd_size), 0 without THP;
 * read once, as it cannot change. */
uint64_t hostmem_thp_size(void);

/* What backs the mapping at addr (/proc/self/smaps): the kernel's page
 * size, and the bytes mapped by huge pages (THP, PMD-mapped). -ENOENT
 * when no mapping starts there. */
int hostmem_mapping(const void *addr, uint64_t *page_size,
		    uint64_t *huge_bytes);

#endif
