/* SPDX-License-Identifier: MIT */
/* Backing memory for MRs: memfd, hugetlb memfd, a file, or anonymous. */
#ifndef RDMAD_MEMORY_H
#define RDMAD_MEMORY_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "util.h"

enum memory_backing {
	MEMORY_MEMFD,
	MEMORY_HUGETLB,
	MEMORY_FILE,
	MEMORY_ANONYMOUS,
};

/* What memory to make: verbs/ knows no configuration, and the layers
 * above translate theirs into this (model/verbs_spec.h). */
struct memory_spec {
	const char *name; /* the memfd's name (/proc/PID/fd shows it) */
	uint64_t size;
	enum memory_backing backing;
	const char *path; /* MEMORY_FILE */
	uint64_t page_size; /* MEMORY_HUGETLB; 0: the host's default */
	/* Transparent huge pages refused (anonymous, memfd); otherwise
	 * asked for, and the host's policy decides. */
	bool no_thp;
};

/*
 * What a large memory (populate_large(): more than 64 MiB) says of itself: its
 * population's progress, which the loop reads while a worker makes it,
 * the bytes its MRs registered, and the page size it really got. Shared
 * by the memory and each MR over it (refs), each adding what it holds.
 */
struct memory_stats {
	atomic_uint refs;
	_Atomic uint64_t populated;  /* bytes faulted in so far */
	_Atomic uint64_t registered; /* bytes of MRs over it */
	uint64_t page_size;  /* what backs most of it (smaps); 0: unknown */
	uint64_t huge_bytes; /* of it in transparent huge pages */
};

struct memory {
	int fd; /* -1 for anonymous memory */
	bool kept; /* its fd came back from the previous run (fd store) */
	void *addr;
	size_t size;
	/* Large memories only, else NULL; set as soon as the creation
	 * starts populating (the loop may look meanwhile). */
	_Atomic(struct memory_stats *) stats;
};

/* Whether memory of this backing outlives the process only through its
 * fd, so that the fd store keeps it for the next run (memory_keep()):
 * memfds. A file keeps its contents by itself; anonymous memory cannot. */
static inline bool memory_keepable(enum memory_backing b)
{
	return b == MEMORY_MEMFD || b == MEMORY_HUGETLB;
}

/* Create and map the memory of m. Returns 0 or -errno; *mem untouched on
 * failure. */
int memory_create(const struct memory_spec *m, struct memory *mem);
/*
 * The same, reusing a kept fd of this key (see memory_keep()) when its
 * size is m's: what was in it is still there. key NULL: never. A large
 * memory is populated on several threads (populate.h) unless kept; a set
 * *stop (may be NULL) ends that with -ECANCELED. On failure, why (may be
 * NULL) says more than the errno when it can ("" otherwise).
 */
int memory_create_keyed(const struct memory_spec *m, const char *key,
			const atomic_bool *stop, struct memory *mem,
			char *why, size_t why_size);
void memory_destroy(struct memory *mem);

/* Another holder of mem's stats (an MR over it, with its bytes), and
 * the end of one. NULL stats: nothing. */
struct memory_stats *memory_stats_hold(struct memory *mem,
				       uint64_t registered);
void memory_stats_release(struct memory_stats *st, uint64_t registered);

/* Memory fds that outlived the previous run (systemd's fd store), by
 * key. All are added before the workers start; memory_create_keyed()
 * takes them from any thread. memory_keep() owns fd from the call on. */
int memory_keep(const char *key, int fd);
/* Closes the kept fds no memory took; calls gone(key) for each first. */
void memory_keep_done(void (*gone)(const char *key));

#endif
