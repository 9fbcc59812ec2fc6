// SPDX-License-Identifier: MIT
/*
 * The configuration's strings: packed into blocks that the config frees
 * at once, and interned while it loads, so that a name stands once in
 * memory however many objects refer to it ("pd0" in ten thousand MRs),
 * without a malloc chunk (32 bytes at least) for each.
 */
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "nameidx.h"

#define BLOCK_BYTES (16384 - 64)

struct block {
	struct block *next;
	size_t used, cap;
	char data[];
};

struct conf_strings {
	struct block *blocks; /* the current one first */
	/* While loading: every distinct string, open-addressed. */
	const char **set;
	size_t mask, n;
};

static char *pool_alloc(struct conf_strings *s, size_t len)
{
	struct block *b = s->blocks;

	if (!b || b->cap - b->used < len) {
		size_t cap = len > BLOCK_BYTES ? len : BLOCK_BYTES;

		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->used = 0;
		b->cap = cap;
		/* A big string gets a block of its own; the current block
		 * keeps its room for the next small ones. */
		if (s->blocks && len > BLOCK_BYTES) {
			b->next = s->blocks->next;
			s->blocks->next = b;
		} else {
			b->next = s->blocks;
			s->blocks = b;
		}
	}
	b->used += len;
	return b->data + b->used - len;
}

static int set_grow(struct conf_strings *s)
{
	size_t size = s->set ? 2 * (s->mask + 1) : 256;
	const char **set = calloc(size, sizeof(*set));

	if (!set)
		return -ENOMEM;
	for (size_t i = 0; s->set && i <= s->mask; i++) {
		size_t at;

		if (!s->set[i])
			continue;
		at = nameidx_hash(s->set[i], 0) & (size - 1);
		while (set[at])
			at = (at + 1) & (size - 1);
		set[at] = s->set[i];
	}
	free(s->set);
	s->set = set;
	s->mask = size - 1;
	return 0;
}

char *conf_strdup(struct config *c, const char *str)
{
	struct conf_strings *s = c->strings;
	size_t len = strlen(str) + 1, at;
	char *copy;

	if (!s && !(s = c->strings = calloc(1, sizeof(*s))))
		return NULL;
	if (!s->set || 2 * (s->n + 1) > s->mask + 1) {
		if (set_grow(s) < 0)
			return NULL;
	}
	for (at = nameidx_hash(str, 0) & s->mask; s->set[at];
	     at = (at + 1) & s->mask)
		if (streq(s->set[at], str))
			return (char *)s->set[at];
	copy = pool_alloc(s, len);
	if (!copy)
		return NULL;
	memcpy(copy, str, len);
	s->set[at] = copy;
	s->n++;
	return copy;
}

void conf_strings_seal(struct config *c)
{
	if (!c->strings)
		return;
	free(c->strings->set);
	c->strings->set = NULL;
	c->strings->mask = c->strings->n = 0;
}

void conf_strings_free(struct config *c)
{
	struct conf_strings *s = c->strings;

	if (!s)
		return;
	while (s->blocks) {
		struct block *b = s->blocks;

		s->blocks = b->next;
		free(b);
	}
	free(s->set);
	free(s);
	c->strings = NULL;
}
