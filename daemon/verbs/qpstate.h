/* SPDX-License-Identifier: MIT */
/*
 * QP state transitions from one description of the remote end, in the
 * sense of python-rdma's IBPath: the same struct fills the INIT, RTR and
 * RTS attributes, whichever the QP type needs.
 */
#ifndef RDMAD_QPSTATE_H
#define RDMAD_QPSTATE_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <jansson.h>

struct qp_path {
	/* INIT */
	uint8_t port_num;
	uint16_t pkey_index;
	uint32_t qkey;		/* UD */
	unsigned int access;	/* qp_access_flags (RC, UC, XRC) */
	/* RTR: the remote end */
	uint32_t dqpn;
	uint32_t rq_psn;
	enum ibv_mtu mtu;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	bool has_grh;		/* RoCE: always */
	union ibv_gid dgid;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint32_t flow_label;
	/* RTS */
	uint32_t sq_psn;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t max_rd_atomic;
};

/* Sensible defaults (IBPath's): mtu 1024, timeout 14, retry_cnt 7,
 * rnr_retry 7, min_rnr_timer 12, hop_limit 64, rd atomics 1, qkey
 * 0x11111111, port 1. */
void qp_path_init(struct qp_path *p);

/*
 * Move qp from its current state (ibv_query_qp) to target, one legal
 * transition at a time (RESET -> INIT -> RTR -> RTS), with the attribute
 * masks the QP's type needs. A QP already past target, or in ERR/SQE,
 * goes through RESET first. Returns 0 or -errno; *failed_at (may be NULL)
 * names the transition that failed, e.g. "INIT->RTR".
 */
int qp_modify(struct ibv_qp *qp, enum ibv_qp_state target,
	      const struct qp_path *path, const char **failed_at);

/* The path as JSON, in the config's vocabulary (keys = the field names
 * above; dgid as a string), and back. */
json_t *qp_path_json(const struct qp_path *p);
int qp_path_from_json(const json_t *j, struct qp_path *p, char *err,
		      size_t errlen);

#endif
