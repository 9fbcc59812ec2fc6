/* SPDX-License-Identifier: MIT */
/*
 * The kernel's own list of a device's RDMA resources, through RDMA
 * netlink (NETLINK_RDMA, the nldev RES_*_GET dumps that iproute2's
 * "rdma resource show" reads). rdmad uses it to tell its own objects in
 * a context from those that clients created there (orphans.c).
 *
 * What the kernel says (Linux 6.1, drivers/infiniband/core/nldev.c):
 * every entry has its kind's number (ctxn, pdn, cqn, lqpn, mrn, srqn:
 * restrack ids, except the QP number) and, for a user object, the pid of
 * the thread that created it (absent once that task is gone); PDs and
 * CQs carry the number of their context (ctxn), QPs, MRs and SRQs the
 * number of their PD (pdn), so that they join their context through it.
 * MR keys come only to a caller with CAP_NET_ADMIN.
 */
#ifndef RDMAD_RDMANL_H
#define RDMAD_RDMANL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rdmanl_kind {
	RDMANL_CTX,
	RDMANL_PD,
	RDMANL_CQ,
	RDMANL_QP,
	RDMANL_MR,
	RDMANL_SRQ,
	RDMANL_KINDS,
};

/* Which of the optional attributes an entry had. */
enum {
	RDMANL_HAS_PID = 1 << 0,
	RDMANL_HAS_CTXN = 1 << 1,
	RDMANL_HAS_PDN = 1 << 2,
	RDMANL_HAS_KEYS = 1 << 3, /* lkey and rkey */
	RDMANL_HAS_KERN = 1 << 4, /* a kernel object (it has a kern_name) */
	RDMANL_HAS_MRLEN = 1 << 5,
	RDMANL_HAS_CQE = 1 << 6,
	RDMANL_HAS_TYPE = 1 << 7, /* qp_type (QPs), srq type (SRQs) */
	RDMANL_HAS_STATE = 1 << 8, /* QPs: the state, as enum ibv_qp_state */
};

/* One resource, as the kernel listed it. */
struct rdmanl_res {
	enum rdmanl_kind kind;
	uint32_t dev_index;
	uint32_t id; /* the kind's number: ctxn, pdn, cqn, lqpn, mrn, srqn */
	uint32_t ctxn, pdn, pid;
	uint32_t lkey, rkey;
	uint64_t mrlen;
	uint32_t cqe;
	uint8_t type;
	uint8_t state;
	unsigned int has;
};

/* Called for each entry; a negative return stops the parse with it. */
typedef int (*rdmanl_res_fn)(void *ud, const struct rdmanl_res *r);

const char *rdmanl_kind_name(enum rdmanl_kind k);
/* The key of the kind's number in documents: "ctxn", "pdn", "cqn",
 * "lqpn", "mrn", "srqn" (rdma resource show's names). */
const char *rdmanl_id_name(enum rdmanl_kind k);

/*
 * Decode len bytes of netlink messages, the answer to a dump of kind
 * (seq and portid: the request's, 0 to accept any). Returns 1 when more
 * is to come, 0 once the dump is done (NLMSG_DONE), or -errno: the
 * kernel's error (NLMSG_ERROR; EOPNOTSUPP for a dump this kernel does
 * not have), -EINTR when the dump was interrupted by a change (try
 * again), -EBADMSG for a malformed message (an attribute of the wrong
 * size, an entry without its number, a message of another command),
 * or what fn returned. Pure: no I/O (tests and the fuzzer use it).
 */
int rdmanl_parse(const void *buf, size_t len, enum rdmanl_kind kind,
		 uint32_t seq, uint32_t portid, rdmanl_res_fn fn, void *ud);

/* Build the dump request for kind on device dev_index into buf (at least
 * RDMANL_REQUEST_SIZE bytes); returns its length. */
#define RDMANL_REQUEST_SIZE 64
size_t rdmanl_request(void *buf, enum rdmanl_kind kind, uint32_t dev_index,
		      uint32_t seq);

struct rdmanl;

/* A NETLINK_RDMA socket (CLOEXEC; non-blocking unless blocking). */
int rdmanl_open(bool blocking, struct rdmanl **out);
struct rdmanl *rdmanl_free(struct rdmanl *nl);
int rdmanl_fd(const struct rdmanl *nl);
/* Ask for a dump of kind on dev_index; read it with rdmanl_read(). */
int rdmanl_start(struct rdmanl *nl, enum rdmanl_kind kind, uint32_t dev_index);
/*
 * Read at most max_chunks of what the kernel has made of the dump (it
 * makes the next chunk as one is read), decoding each with fn. Returns
 * 1 when more is to come (on a non-blocking socket: wait for it to be
 * readable), 0 when the dump is done, -errno as rdmanl_parse(). After an
 * error the socket may hold the rest of the dump: free it.
 */
int rdmanl_read(struct rdmanl *nl, unsigned int max_chunks, rdmanl_res_fn fn,
		void *ud);
/* A whole dump, blocking (a fresh socket; for short dumps: contexts). */
int rdmanl_dump(enum rdmanl_kind kind, uint32_t dev_index, rdmanl_res_fn fn,
		void *ud);

#endif
