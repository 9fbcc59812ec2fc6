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
	/* The alternate path (automatic path migration), loaded with
	 * RTR->RTS and armed (REARM) when has_alt: RC, UC and XRC. */
	bool has_alt;
	struct qp_alt_path {
		uint8_t port_num;
		uint16_t pkey_index;
		uint8_t timeout;
		uint16_t dlid;
		uint8_t sl;
		uint8_t src_path_bits;
		uint8_t static_rate;
		bool has_grh;
		union ibv_gid dgid;
		uint8_t sgid_index;
		uint8_t hop_limit;
		uint8_t traffic_class;
		uint32_t flow_label;
	} alt;
};

/* Linux loads alternate paths on InfiniBand ports only (the core bans
 * them on RoCE: ib_modify_qp() answers EINVAL). */
#define QP_ALT_PATH_IB_ONLY                                                    \
	"alt_path: Linux loads alternate paths (APM) on InfiniBand ports "     \
	"only, and this port is Ethernet (RoCE)"

/* The alternate path as the primary one is (what alt_path keys then
 * change). */
void qp_alt_from_primary(const struct qp_path *p, struct qp_alt_path *alt);

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

/*
 * Change a QP that is in RTS without leaving it for RESET: the attributes
 * of path that mask (IBV_QP_*) names, within QP_RTS_MASK. IB lets
 * min_rnr_timer and the access flags change RTS->RTS; timeout, retry_cnt,
 * rnr_retry and max_rd_atomic only in SQD, so those go RTS->SQD (send
 * queue drained), SQD->SQD, SQD->RTS; after a failure in SQD the QP is
 * sent back to RTS unchanged. Returns 0 or -errno, *failed_at as for
 * qp_modify().
 */
#define QP_RTS_RTS_MASK (IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS)
#define QP_SQD_MASK                                                            \
	(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |                \
	 IBV_QP_MAX_QP_RD_ATOMIC)
#define QP_RTS_MASK (QP_RTS_RTS_MASK | QP_SQD_MASK)
int qp_modify_rts(struct ibv_qp *qp, const struct qp_path *path, int mask,
		  const char **failed_at);

/*
 * Migrate the QP in RTS to its alternate path (path_mig_state MIGRATED,
 * RTS->RTS), as a path failure would. Hardware wants the migration state
 * ARMED (the alternate path loaded and armed): -EINVAL otherwise, and
 * -ENOENT when no alternate path was loaded (state MIGRATED already, as
 * a QP starts). 0 or -errno, *failed_at as for qp_modify().
 */
int qp_migrate(struct ibv_qp *qp, const char **failed_at);
const char *qp_mig_state_name(enum ibv_mig_state s);

/* The IBV_QP_* attributes the keys of path document j name, for
 * qp_modify_rts(). -EINVAL, with the key in err, for a key that cannot
 * change in RTS. */
int qp_path_rts_mask(const json_t *j, int *mask, char *err, size_t errlen);

/* The path as JSON, in the config's vocabulary (keys = the field names
 * above; dgid as a string), and back. */
json_t *qp_path_json(const struct qp_path *p);
int qp_path_from_json(const json_t *j, struct qp_path *p, char *err,
		      size_t errlen);

/*
 * The remote end from its endpoint document (GET .../qp/{q}/endpoint on
 * the other host): qp_num -> dqpn, psn -> rq_psn, gid -> dgid (with a
 * GRH; null: none, LID routing), lid -> dlid, and mtu -> mtu, the
 * smaller of it and local_mtu (this port's active MTU; 0: the peer's).
 * port and gid_index are the peer's own and change nothing here; type,
 * when given, must be type (this QP's kind, e.g. "rc"). Only qp_num is
 * required. *p changes only on success; -EINVAL with a message in err.
 */
int qp_path_from_endpoint(const json_t *ep, const char *type,
			  enum ibv_mtu local_mtu, struct qp_path *p, char *err,
			  size_t errlen);

#endif
