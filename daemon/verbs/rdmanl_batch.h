/* SPDX-License-Identifier: MIT */
/*
 * RDMA netlink dumps (rdmanl.h) of several kinds and devices, read on a
 * thread of its own, the records handed over at the end.
 *
 * Why a thread: the kernel makes a dump one chunk (at most 32 KiB) per
 * read, and for each chunk walks the device's table of that kind from its
 * start to where the last chunk stopped (Linux 6.1, nldev.c:
 * res_get_common_dumpit() skips the first entries one by one). A dump of
 * N objects thus costs the reader O(N^2 / chunk) in the kernel: 61,000
 * MRs are seconds of system time under emulation, about 30 ms a chunk.
 * On the event loop every client waits behind each chunk; here the loop
 * only sorts the records once they are in.
 */
#ifndef RDMAD_RDMANL_BATCH_H
#define RDMAD_RDMANL_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "rdmanl.h"

struct rdmanl_batch;

/* Dump every kind from first to RDMANL_KINDS - 1 of each of the n_devs
 * devices (their indexes copied), in order, on a new thread, which adds
 * 1 to the caller's eventfd done_fd once it is done (the caller reads
 * it, and keeps it from one batch to the next). A device's first failing
 * dump ends its part (its error kept); an SRQ dump the kernel does not
 * have (before 5.19) counts as empty. 0, or -errno. */
int rdmanl_batch_start(const uint32_t *devs, size_t n_devs,
		       enum rdmanl_kind first, int done_fd,
		       struct rdmanl_batch **out);
/* Ask the thread to stop at its next record or chunk (the result is then
 * -ECANCELED for the devices left). Safe to call from the loop any time. */
void rdmanl_batch_cancel(struct rdmanl_batch *b);
/*
 * Wait for the thread (at once when done_fd was readable), then hand over
 * what it read: the records in *recs (*n of them, the caller's to free)
 * and each device's result, 0 or -errno, in errs[i] (n_devs of them, as
 * given to start). Frees b. 0, or -ECANCELED after a cancel (nothing
 * handed over).
 */
int rdmanl_batch_finish(struct rdmanl_batch *b, struct rdmanl_res **recs,
			size_t *n, int *errs);
#endif
