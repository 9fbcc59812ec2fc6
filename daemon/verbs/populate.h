/* SPDX-License-Identifier: MIT */
/*
 * Faulting in a large memory before it is registered, on several threads:
 * the kernel allocates and zeroes every page in the thread that touches
 * it first, so a single ibv_reg_mr of cold memory spends most of its
 * time zeroing pages one after another. MADV_POPULATE_WRITE on disjoint
 * chunks spreads that over the CPUs; the registration then only pins
 * pages that are there.
 */
#ifndef RDMAD_POPULATE_H
#define RDMAD_POPULATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Memories of more than 64 MiB are populated first; others are left to
 * the registration, as before: measured in the VM, a 64 MiB memory
 * populated first was no faster (ready_64m_vs_bare 1.11). */
#define POPULATE_ABOVE_BYTES (64ull << 20)

/* Is a memory of size bytes populated first (a "large" memory)? */
static inline bool populate_large(uint64_t size)
{
	return size > POPULATE_ABOVE_BYTES;
}

/* At most n threads populate at once in this process, all memories
 * together (the workers key; 0: the online CPUs). The first call, before
 * any population. */
void populate_set_threads(unsigned int n);
unsigned int populate_threads(void);

/*
 * Fault in [addr, addr + len) for writing, in chunks of at least align
 * bytes (the memory's page size; addr and len multiples of it), on the
 * calling thread and as many more as the budget above allows. *done
 * grows by each chunk's bytes as it is done (the loop reads it for
 * progress); a set *stop ends the work between chunks (-ECANCELED).
 * Returns 0 or -errno of the first chunk that failed.
 */
int populate(void *addr, size_t len, size_t align, _Atomic uint64_t *done,
	     const atomic_bool *stop);

#endif
