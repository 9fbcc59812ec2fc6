/* SPDX-License-Identifier: MIT */
/*
 * A compact name index: an open-addressed table of 32-bit positions into
 * an array the caller owns, sized once for the number of entries it will
 * hold. Four to eight bytes per entry, where a uthash handle costs 56
 * plus its buckets: the configuration and the profiles index every
 * object by name, and tens of thousands of objects are normal.
 */
#ifndef RDMAD_NAMEIDX_H
#define RDMAD_NAMEIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nameidx {
	uint32_t *slot; /* position + 1; 0: empty */
	uint32_t mask;
	uint32_t n;
};

#define NAMEIDX_NONE UINT32_MAX

/* Does entry i have the key? */
typedef bool (*nameidx_eq_fn)(const void *ctx, uint32_t i, const void *key);

/* Room for cap entries. Returns 0 or -ENOMEM. */
int nameidx_init(struct nameidx *ix, size_t cap);
void nameidx_done(struct nameidx *ix);
/* The hash of a name, salted (e.g. with an object's kind). */
uint32_t nameidx_hash(const char *s, uint32_t salt);
/* The position of the entry with hash h for which eq() holds, or
 * NAMEIDX_NONE. */
uint32_t nameidx_find(const struct nameidx *ix, uint32_t h, nameidx_eq_fn eq,
		      const void *ctx, const void *key);
/* Add position i under hash h (the caller has checked that its key is
 * not there yet). Returns 0, or -ENOSPC past the capacity given. */
int nameidx_add(struct nameidx *ix, uint32_t h, uint32_t i);

#endif
