/* SPDX-License-Identifier: MIT */
/* Backing memory for MRs: memfd, hugetlb memfd, a file, or anonymous. */
#ifndef RDMAD_MEMORY_H
#define RDMAD_MEMORY_H

#include <stddef.h>
#include "config.h"
#include "util.h"

struct memory {
	int fd; /* -1 for anonymous memory */
	void *addr;
	size_t size;
};

/* Create and map the memory of m. Returns 0 or -errno; *mem untouched on
 * failure. */
int memory_create(const struct conf_memory *m, struct memory *mem);
void memory_destroy(struct memory *mem);

#endif
