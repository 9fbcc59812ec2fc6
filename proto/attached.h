/* SPDX-License-Identifier: MIT */
/*
 * ATTACHED, typed: everything the daemon gives a client that attaches a
 * profile (proto/PROTOCOL.md, "ATTACH / ATTACHED", has the table of its
 * fields), one encoder that writes the payload and one decoder that
 * reads and checks it. The daemon builds a struct proto_attached and
 * encodes it; librdmad (and the fuzzer, and the tests) decode it.
 *
 * Conventions, for every struct below:
 *   - strings are owned (decode allocates them; proto_attached_free()
 *     frees them); NULL is "absent" for an optional one;
 *   - every integer is a uint64_t, range-checked by the decoder against
 *     the bound PROTOCOL.md gives it;
 *   - an optional number has a has_ flag beside it;
 *   - fd fields are indexes into the message's fds, never fds;
 *   - a reference by name (mr.pd, ...) is resolved by the decoder into
 *     the index of the object in its list (the *_index fields; the
 *     encoder ignores them and writes the name).
 * The encoder checks nothing but memory: the daemon's view is right by
 * construction, and the decoder is where the checks are.
 */
#ifndef RDMAD_PROTO_ATTACHED_H
#define RDMAD_PROTO_ATTACHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

enum proto_attach_mode {
	PROTO_ATTACH_SHARED = 1, /* "shared": import by handle from cmd_fd */
	PROTO_ATTACH_LOCAL = 2,	 /* "local": open ibdev, register again */
};

/* "memory": shareable memory, with its fd unless the ATTACH asked for
 * none ("memory_fds": false: the client asks with MAP). */
struct proto_att_memory {
	char *name;
	uint64_t size; /* bytes, > 0 */
	char *backing; /* "memfd", "hugetlbfs", ...; optional */
	bool has_fd;
	uint64_t fd; /* index into the message's fds */
};

/* "xrcd": an XRC domain the daemon shares by its file. */
struct proto_att_xrcd {
	char *name;
	char *file; /* optional: the path, for information */
	uint64_t fd;
};

/* "pd" */
struct proto_att_pd {
	char *name;
	uint64_t handle; /* <= UINT32_MAX */
};

/* "qp" and "srq": by number. */
struct proto_att_qp {
	char *name;
	char *type;	 /* "rc", "ud", "xrc_recv", ...; optional */
	bool has_qp_num;
	uint64_t qp_num; /* <= 0xffffff */
	char *xrcd;	 /* an XRC target QP's domain (a name in "xrcd" or
			    not: the client reports it when used), or NULL */
};

struct proto_att_srq {
	char *name;
	char *type; /* "basic", "xrc", ...; optional */
	bool has_srq_num;
	uint64_t srq_num; /* XRC SRQs */
};

/* "dm": device memory (shared mode only). */
struct proto_att_dm {
	char *name;
	uint64_t handle;
	uint64_t size;
};

/* "mr" and "dm_mr": memory regions, by handle. mr, dm_mr and
 * implicit_mr share one namespace. */
struct proto_att_mr {
	char *name;
	char *pd;
	char *memory; /* "mr": a name in "memory"; "dm_mr": NULL */
	char *dm;     /* "dm_mr": a name in "dm"; "mr": NULL */
	uint64_t handle, lkey, rkey;
	uint64_t length; /* > 0; offset + length within the memory */
	uint64_t offset;
	uint64_t iova;
	bool zero_based;
	bool odp;
	unsigned int access; /* IBV_ACCESS_* bits (proto/access.h) */
	/* Resolved by the decoder. */
	size_t pd_index;
	size_t memory_index; /* "mr" */
	size_t dm_index;     /* "dm_mr" */
};

/* "implicit_mr": ODP MRs without memory, for the client to register. */
struct proto_att_imr {
	char *name;
	char *pd;
	unsigned int access;
	size_t pd_index;
};

/* An AH's attributes (a joined multicast group's "ah"). */
struct proto_att_ah {
	bool has_handle;
	uint64_t handle;
	uint64_t port_num; /* 1..255 */
	uint64_t dlid;	   /* <= 0xffff */
	uint64_t sl, src_path_bits, static_rate, sgid_index, hop_limit,
		traffic_class; /* each <= 255 */
	uint64_t flow_label;   /* <= 0xfffff */
	bool is_global;
	bool has_dgid;
	uint8_t dgid[16]; /* text as an IPv6 address (mgid's form) */
};

/* A multicast group's QP ("mcast"[].qps). */
struct proto_att_mcast_qp {
	char *name;
	uint64_t qp_num;
	bool attached;
};

/* "mcast": a ready multicast group. A joined one (join_state "joined")
 * has mgid, mlid and ah; a group being joined again has none. */
struct proto_att_mcast {
	char *name;
	char *group;	  /* the address or GID configured; optional */
	char *join;	  /* "full", "send_only", ...; optional */
	char *join_state; /* "joined", "joining", "error"; absent: not
			     joined */
	char *join_error; /* why the last join failed; optional */
	bool has_mgid;
	uint8_t mgid[16];
	bool has_mlid;
	uint64_t mlid; /* <= 0xffff */
	bool has_qkey;
	uint64_t qkey; /* <= UINT32_MAX */
	bool has_remote_qpn;
	uint64_t remote_qpn; /* <= 0xffffff */
	bool has_rejoins;
	uint64_t rejoins;
	bool has_ah;
	struct proto_att_ah ah;
	struct proto_att_mcast_qp *qps;
	size_t n_qps;
};

/* A shared attach's "mr" list as an MR table (mr_table.h) in a sealed
 * memfd: the list itself is then left out of the message. */
struct proto_att_mr_table {
	uint64_t fd;	/* index into the message's fds */
	uint64_t count; /* its entries: the MRs */
	uint64_t size;	/* bytes of the memfd */
	/* "memory_table": the memories are in the table, not in the
	 * message's "memory" list: how many. */
	bool has_memories;
	uint64_t memories;
	/* "memory_fd": the memories' fds came too, memory i's the
	 * message's fd memory_fd + i (absent: none came, MAP asks). */
	bool has_memory_fd;
	uint64_t memory_fd;
};

struct proto_attached {
	char *profile;
	bool has_attachment; /* see PROTO_ATTACHED_NO_ID */
	uint64_t attachment; /* <= UINT32_MAX */
	enum proto_attach_mode mode;
	char *ibdev;
	uint64_t port;	    /* 1..255 */
	uint64_t gid_index; /* <= INT32_MAX */
	bool has_import_capable;
	bool import_capable;
	char *import_error; /* optional */
	bool has_cmd_fd;    /* shared mode: required; local: absent */
	uint64_t cmd_fd;
	struct proto_att_memory *memory;
	size_t n_memory;
	struct proto_att_xrcd *xrcd;
	size_t n_xrcd;
	struct proto_att_pd *pd;
	size_t n_pd;
	struct proto_att_qp *qp;
	size_t n_qp;
	struct proto_att_srq *srq;
	size_t n_srq;
	struct proto_att_dm *dm;
	size_t n_dm;
	struct proto_att_mr *dm_mr;
	size_t n_dm_mr;
	struct proto_att_imr *implicit_mr;
	size_t n_implicit_mr;
	struct proto_att_mcast *mcast;
	size_t n_mcast;
	struct proto_att_mr *mr;
	size_t n_mr;
	/* Shared mode, for a client that asked for it: the MRs are there,
	 * and "mr" is empty. */
	bool has_mr_table;
	struct proto_att_mr_table mr_table;
};

/* Encode without "attachment" (whatever has_attachment says): the text
 * then starts with "{" and the caller writes `{"attachment":N,` and the
 * text past its "{" (the daemon keeps one text per profile and mode,
 * and librdmad recognises the same text past the id). */
#define PROTO_ATTACHED_NO_ID 0x1u

/*
 * The payload of an ATTACHED for a, as compact JSON: "attachment" first
 * (unless flags has PROTO_ATTACHED_NO_ID), then the context's fields,
 * then each non-empty list, in the order of the struct. An empty list
 * is left out; so is an absent optional field. *text is NUL-terminated,
 * *len its length without the NUL; free() it. Returns 0, -ENOMEM, or
 * -EINVAL for a mode that is neither shared nor local or an object
 * without a name.
 */
int proto_attached_encode(const struct proto_attached *a, unsigned int flags,
			  char **text, size_t *len);

/* The same, as a JSON object (a new reference) in *out. */
int proto_attached_to_json(const struct proto_attached *a, unsigned int flags,
			   json_t **out);

/*
 * Read and check an ATTACHED payload that came with n_fds fds into out
 * (overwritten; proto_attached_free() it in all cases, success or not).
 * Checks, every one that PROTOCOL.md's field tables state: the fields
 * required are there and of their type, numbers in their ranges, names
 * non-empty and unique within a list (mr, dm_mr and implicit_mr as one
 * namespace), references resolve (mr.pd, mr.memory, dm_mr.pd, dm_mr.dm,
 * implicit_mr.pd), an MR's offset + length fit its memory, each fd
 * index < n_fds and used once, cmd_fd present in shared mode, a joined
 * multicast group has mgid, mlid, qkey, remote_qpn and ah. Unknown keys
 * are ignored; an absent list reads as an empty one. Returns 0,
 * -EBADMSG with a sentence in why (if why_len > 0) naming the field,
 * or -ENOMEM.
 */
int proto_attached_decode(const json_t *payload, size_t n_fds,
			  struct proto_attached *out, char *why,
			  size_t why_len);

/* Free what decode allocated (and a struct the caller filled with
 * malloc'ed strings and arrays) and zero a. NULL is fine. */
void proto_attached_free(struct proto_attached *a);

#endif
