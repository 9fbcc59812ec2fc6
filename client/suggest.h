/* SPDX-License-Identifier: MIT */
/*
 * "Did you mean ...?" for rdmactl: the closest of a few names to a word
 * that matched none of them.
 */
#ifndef RDMAD_SUGGEST_H
#define RDMAD_SUGGEST_H

#include <stddef.h>

/* Edit distance: insertions, deletions, substitutions and swaps of two
 * neighbours, one each; (size_t)-1 for words longer than 255 bytes. */
size_t suggest_distance(const char *a, const char *b);

/* The first of the n candidates nearest to word, when near enough to be a
 * likely typo (at most one edit per three characters of word, at least
 * one); NULL otherwise, or when word is one of them. */
const char *suggest_closest(const char *word, const char *const *candidates,
			    size_t n);

#endif
