/* SPDX-License-Identifier: MIT */
/*
 * A data-path self-check between two RC QPs the daemon owns and has
 * connected to each other, through one MR the caller names.
 */
#ifndef RDMAD_SELFTEST_H
#define RDMAD_SELFTEST_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <jansson.h>

struct selftest_end {
	struct ibv_qp *qp;
	struct ibv_cq *send_cq, *recv_cq;
};

struct selftest_mr {
	void *addr;	/* where the CPU sees the MR's first byte */
	uint64_t iova;	/* its address for the HCA (0 for a zero-based MR) */
	size_t length;
	uint32_t lkey, rkey;
	/* The IBV_ACCESS_* flags the MR was registered with: verbs cannot
	 * query an MR, so the caller says (needs local_write|remote_write). */
	unsigned int access;
};

/*
 * RDMA-write a pattern from one part of the MR to another through a->qp
 * (b's QP is the responder), then send a second pattern from a to b;
 * verify both byte for byte. Uses min(length / 4, 64 KiB) bytes per
 * transfer in the MR's first four such slices and restores nothing.
 *
 * Completions are awaited by polling a->send_cq and b->recv_cq, up to
 * timeout_ms per transfer. The CQs may be shared between a and b and with
 * other QPs: completions are matched by wr_id and QP number, and any other
 * completion polled meanwhile is listed under "stray_completions" in the
 * report (it is consumed: its owner will not see it).
 *
 * Preconditions, checked first (-EINVAL and a report saying which failed):
 * both QPs RC, in RTS, connected to each other (dest_qp_num), b with
 * remote_write in its access flags, the MR with local_write and
 * remote_write and at least 4 bytes. When b receives through an SRQ, the
 * one receive is posted there (an SRQ's limit event can fire on it; a
 * send from another QP of that SRQ may take it first: -ETIMEDOUT).
 *
 * Returns 0, or -EINVAL, -ETIMEDOUT (a completion did not come; its WR may
 * still complete later), -EIO (a completion with an error status, or the
 * data did not arrive intact), another -errno from verbs, or -ENOMEM. On
 * every return but -ENOMEM, *report is a new object:
 *   {"rdma_write": {"bytes": N, "ok": true, "usec": U},
 *    "send_recv": {"bytes": N, "ok": true, "usec": U}}
 * and on failure also "error": "<what failed>"; a failed transfer has
 * "ok": false and its own "error" (with "status": ibv_wc_status_str() and
 * "vendor_err" for a failed completion). A transfer not attempted is
 * absent.
 */
int selftest_run(const struct selftest_end *a, const struct selftest_end *b,
		 const struct selftest_mr *mr, int timeout_ms, json_t **report);

#endif
