/* SPDX-License-Identifier: MIT */
/* What the fuzz targets share: a check that aborts (libFuzzer keeps the
 * input), and the line-by-line reading of an input. */
#ifndef RDMAD_FUZZ_UTIL_H
#define RDMAD_FUZZ_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A property of the code under test does not hold: say which, and let
 * libFuzzer save the input. */
static inline void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "%s: %s\n", program_invocation_short_name,
			what);
		abort();
	}
}

/* The next line of [*p, end) as a string to free. */
static inline char *take_line(const uint8_t **p, const uint8_t *end)
{
	const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t len = (size_t)((nl ? nl : end) - *p);
	char *s = strndup((const char *)*p, len);

	*p = nl ? nl + 1 : end;
	check(s != NULL, "strndup");
	return s;
}

#endif
