/* SPDX-License-Identifier: MIT */
/*
 * A record that outlives the process at every moment: a memfd kept in
 * systemd's fd store once, then rewritten in place at each change, so
 * that a SIGKILL, an abort or an OOM kill at any moment leaves the next
 * run the last whole version, never a torn one, and no change costs a
 * message to systemd.
 *
 * The file holds a header at offset 0 and the version it names further
 * on. A new version is written where it does not overlap the one the
 * header names, then the header is rewritten (one write of 48 bytes
 * within one page: a process that dies completes it or not at all).
 * The header carries a generation and checksums (XXH64) of itself and
 * of the version it names.
 */
#ifndef RDMAD_DURABLE_H
#define RDMAD_DURABLE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where the versions begin; the header is the page before. */
#define DURABLE_DATA_OFFSET 4096u

/* Does fd hold a durable record (its header is whole)? A file that
 * does not (an older run's plain text, an empty memfd) is rewritten
 * as one by durable_write(). */
bool durable_is(int fd);
/*
 * Write text as fd's new version. Returns the generation written (> 0)
 * or -errno; on failure the previous version is still the one read.
 */
int64_t durable_write(int fd, const void *text, size_t len);
/*
 * The version fd names, NUL-terminated in *out (to free), of at most
 * max bytes. -EBADMSG when the header or the version does not check,
 * -EMSGSIZE past max, -ENOENT when fd is not a durable record. *gen
 * (may be NULL) gets its generation.
 */
int durable_read(int fd, size_t max, char **out, size_t *len, uint64_t *gen);

#endif
