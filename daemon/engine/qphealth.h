/* SPDX-License-Identifier: MIT */
/*
 * QPs of the daemon's that went to the error state, and their way back.
 *
 * A QP goes to ERR (or SQE) when a work request on it fails: a remote
 * access error, a retry count exceeded, a local protection error. The
 * device tells with an async event only for some of these (responder
 * errors on most hardware: QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR; rxe
 * raises none), and never for a failed request on the send side, where
 * the completion says it to whoever polls it. So two sources feed this
 * file: the async events, at once, and the RDMA netlink scan (orphans.c),
 * which lists every QP of the device with the kernel's state, every
 * ORPHANS_SCAN_SECONDS.
 *
 * A QP found in error keeps its object state (ready: it exists, leases
 * stay valid); its document shows "qp_error" with the reason, and the
 * stream gets "qp_error". With recover = "reset" the QP is brought back
 * at once through RESET to its declared state and path, the same QP
 * (same qp_num, same kernel object), and the stream gets "qp_recovered"
 * (or "qp_recover_failed" with the step that failed: the next scan tries
 * again). Everything runs on the loop.
 */
#ifndef RDMAD_QPHEALTH_H
#define RDMAD_QPHEALTH_H

#include <stddef.h>

#include "profile_index.h"
#include "rdmanl.h"

/* o, a ready QP of p, is in error: why says how we know. Nothing when it
 * is already known to be (the same error seen twice). */
void qphealth_failed(struct profile *p, struct object *o, const char *why);
/* The scan's records (every kind, every device): p's QPs that the kernel
 * shows in ERR or SQE go to qphealth_failed(); those known in error that
 * are not any more (moved by hand, PATCH) are forgotten. */
void qphealth_scan(struct profile *p, const struct rdmanl_res *recs,
		   size_t n);
/* o was moved to a new state by hand: whatever error it had is over. */
void qphealth_clear(struct profile *p, struct object *o);

#endif
