// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>

#include "nameidx.h"

int nameidx_init(struct nameidx *ix, size_t cap)
{
	size_t size = 4;

	/* At most half full: probes stay short. */
	while (size < 2 * cap)
		size *= 2;
	if (size > (size_t)UINT32_MAX)
		return -ENOMEM;
	ix->slot = calloc(size, sizeof(*ix->slot));
	if (!ix->slot)
		return -ENOMEM;
	ix->mask = (uint32_t)(size - 1);
	ix->n = 0;
	return 0;
}

void nameidx_done(struct nameidx *ix)
{
	free(ix->slot);
	ix->slot = NULL;
	ix->mask = 0;
	ix->n = 0;
}

uint32_t nameidx_hash(const char *s, uint32_t salt)
{
	/* FNV-1a, then a final mix so that the low bits (the slot) depend
	 * on every character. */
	uint32_t h = 2166136261u ^ salt;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	h ^= h >> 12;
	return h;
}

uint32_t nameidx_find(const struct nameidx *ix, uint32_t h, nameidx_eq_fn eq,
		      const void *ctx, const void *key)
{
	if (!ix->slot)
		return NAMEIDX_NONE;
	for (uint32_t at = h & ix->mask;; at = (at + 1) & ix->mask) {
		uint32_t s = ix->slot[at];

		if (!s)
			return NAMEIDX_NONE;
		if (eq(ctx, s - 1, key))
			return s - 1;
	}
}

int nameidx_add(struct nameidx *ix, uint32_t h, uint32_t i)
{
	uint32_t at;

	if (!ix->slot || (size_t)ix->n + 1 > ((size_t)ix->mask + 1) / 2 ||
	    i == NAMEIDX_NONE)
		return -ENOSPC;
	for (at = h & ix->mask; ix->slot[at]; at = (at + 1) & ix->mask)
		;
	ix->slot[at] = i + 1;
	ix->n++;
	return 0;
}
