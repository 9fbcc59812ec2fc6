// SPDX-License-Identifier: MIT
/*
 * Edit distance for rdmactl's suggestions (optimal string alignment: a
 * swap of two neighbours counts once, as in "ingset" for "ingest").
 * Names are short: three rows of the table on the stack are enough.
 */
#include <string.h>

#include "suggest.h"

#define MAX_WORD 255

static size_t min3(size_t a, size_t b, size_t c)
{
	size_t m = a < b ? a : b;

	return m < c ? m : c;
}

size_t suggest_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	/* Rows i - 2, i - 1 and i of the table. */
	size_t rows[3][MAX_WORD + 1];

	if (la > MAX_WORD || lb > MAX_WORD)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		rows[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t *cur = rows[i % 3], *up = rows[(i - 1) % 3],
		       *up2 = rows[(i + 1) % 3];

		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];

			cur[j] = min3(up[j] + 1, cur[j - 1] + 1,
				      up[j - 1] + cost);
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && up2[j - 2] + 1 < cur[j])
				cur[j] = up2[j - 2] + 1;
		}
	}
	return rows[la % 3][lb];
}

const char *suggest_closest(const char *word, const char *const *candidates,
			    size_t n)
{
	size_t limit = strlen(word) / 3, best = (size_t)-1;
	const char *found = NULL;

	if (limit < 1)
		limit = 1;
	for (size_t i = 0; i < n; i++) {
		size_t d;

		if (!candidates[i])
			continue;
		d = suggest_distance(word, candidates[i]);
		if (d == 0)
			return NULL;
		if (d <= limit && d < best) {
			best = d;
			found = candidates[i];
		}
	}
	return found;
}
