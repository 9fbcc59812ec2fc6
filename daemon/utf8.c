// SPDX-License-Identifier: MIT
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */

size_t utf8_seq_len(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	uint32_t cp;
	size_t len;

	if (!n)
		return 0;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool utf8_valid(const char *s)
{
	size_t n = strlen(s);

	while (n) {
		size_t l = utf8_seq_len(s, n);

		if (!l)
			return false;
		s += l;
		n -= l;
	}
	return true;
}

char *utf8_sanitize(const char *s)
{
	size_t n = strlen(s), o = 0;
	/* At worst every byte becomes three. */
	char *out = malloc(3 * n + 1);

	if (!out)
		return NULL;
	while (n) {
		size_t l = utf8_seq_len(s, n);

		if (l) {
			memcpy(out + o, s, l);
			o += l;
		} else {
			memcpy(out + o, REPLACEMENT, 3);
			o += 3;
			l = 1;
		}
		s += l;
		n -= l;
	}
	out[o] = '\0';
	return out;
}

void utf8_trim_cut(char *s)
{
	size_t n = strlen(s), start = n;

	/* Back to the lead byte of the last sequence (at most 3 back). */
	while (start > 0 && n - start < 4 &&
	       ((unsigned char)s[start - 1] & 0xc0) == 0x80)
		start--;
	if (start == 0 || n - start >= 4)
		return;
	start--; /* the lead byte */
	if ((unsigned char)s[start] >= 0xc0 &&
	    !utf8_seq_len(s + start, n - start))
		s[start] = '\0';
}
