/* SPDX-License-Identifier: MIT */
/*
 * rdmactl's view of a creation under way: the "progress" of profile
 * documents as text, as a terminal progress bar, or as plain lines, and
 * following it until nothing is being made.
 */
#ifndef RDMACTL_PROGRESS_H
#define RDMACTL_PROGRESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* " (3/12 objects, 512/1024 MiB populated, 64/1088 MiB registered)"
 * for a profile being created, "" otherwise. Returns buf. */
const char *progress_text(json_t *profile, char *buf, size_t len);

/* Fetches the document again (the same path): 0 or a sysexits code. */
typedef int (*progress_fetch_fn)(void *ud, json_t **doc);

/*
 * While a profile of *doc (one profile, or an array of them) is being
 * created: every interval, fetch *doc again and show how far it came,
 * as a progress bar redrawn in place on a terminal (tty), else as a
 * plain line for each change. Returns 0 once nothing is being made
 * (*doc then holds the last document), or the failed fetch's code.
 */
int progress_follow(json_t **doc, progress_fetch_fn fetch, void *ud, bool tty);

#endif
