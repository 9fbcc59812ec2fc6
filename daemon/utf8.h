/* SPDX-License-Identifier: MIT */
/*
 * UTF-8 for messages built from input: configuration values, request
 * paths and bodies hold whatever bytes their authors wrote, and JSON
 * (jansson refuses to build a string that is not UTF-8) and terminals
 * need valid text.
 */
#ifndef RDMAD_UTF8_H
#define RDMAD_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when
 * the bytes there are not one (overlong forms, surrogates and code
 * points above U+10FFFF are not). */
size_t utf8_seq_len(const char *s, size_t n);
bool utf8_valid(const char *s);
/* s with every byte that is not part of a valid sequence replaced by
 * U+FFFD; a new string to free, or NULL when out of memory. */
char *utf8_sanitize(const char *s);
/* Drop what a fixed buffer cut off: a sequence left incomplete at the
 * end of s, which is NUL-terminated. */
void utf8_trim_cut(char *s);

#endif
