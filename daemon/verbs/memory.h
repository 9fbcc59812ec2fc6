/* SPDX-License-Identifier: MIT */
/* Backing memory for MRs: memfd, hugetlb memfd, a file, or anonymous. */
#ifndef RDMAD_MEMORY_H
#define RDMAD_MEMORY_H
#include <stdbool.h>
#include <stddef.h>
#include "config.h"
#include "util.h"

struct memory {
	int fd; /* -1 for anonymous memory */
	bool kept; /* its fd came back from the previous run (fd store) */
	void *addr;
	size_t size;
};

/* Create and map the memory of m. Returns 0 or -errno; *mem untouched on
 * failure. */
int memory_create(const struct conf_memory *m, struct memory *mem);
/* The same, reusing a kept fd of this key (see memory_keep()) when its
 * size is m's: what was in it is still there. key NULL: never. */
int memory_create_keyed(const struct conf_memory *m, const char *key,
			struct memory *mem);
void memory_destroy(struct memory *mem);

/* Memory fds that outlived the previous run (systemd's fd store), by
 * key. All are added before the workers start; memory_create_keyed()
 * takes them from any thread. memory_keep() owns fd from the call on. */
int memory_keep(const char *key, int fd);
/* Closes the kept fds no memory took; calls gone(key) for each first. */
void memory_keep_done(void (*gone)(const char *key));

#endif
