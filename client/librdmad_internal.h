/* SPDX-License-Identifier: MIT */
/*
 * librdmad's parts, for its own files: librdmad_conn.c (the connection:
 * messages, pipelining, events, resuming after the daemon comes back),
 * librdmad_request.c (REQUESTs), librdmad_errors.c (the last error), librdmad_attached.c (an
 * ATTACHED answer read into a profile), librdmad.c (attaching,
 * setting a profile up and tearing it down), librdmad_objects.c (the
 * objects a program asks for) and librdmad_reuse.c (the last ATTACHED
 * document, kept for the next with the same bytes).
 */
#ifndef LIBRDMAD_INTERNAL_H
#define LIBRDMAD_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <uthash.h>

#include "proto.h"
#include "rdmad.h"
#include "rdmad_internal.h"

/* How long an answer is awaited; a waiting ATTACH adds its own wait. */
#define CLIENT_TIMEOUT_MS 30000
/* RDMAD_ATTACH_WAIT's limit until rdmad_set_attach_timeout(). */
#define CLIENT_ATTACH_WAIT_MS 30000
/* Requests sent whose answers are still to be read, at most. */
#define CLIENT_MAX_PENDING 4
/* EVENTs set aside and not yet taken by rdmad_next_event(), at most:
 * a program that never asks loses the later ones, not its memory. */
#define CLIENT_MAX_EVENTS 256

/* This thread's last error (rdmad_last_error()). */
#define CLIENT_ERROR_MAX 512
extern __thread char client_last_error[CLIENT_ERROR_MAX];

/* A request sent whose answer has not been read yet. */
struct pending {
	uint32_t id;
	uint16_t type; /* the request's */
};

/* An EVENT set aside, or the end of the connection. */
struct client_event {
	struct client_event *next;
	enum rdmad_event_type type;
	struct rdmad_profile *profile; /* NULL: none (any more) */
	json_t *doc;		       /* the payload; NULL for DAEMON_GONE */
};

/* The last ATTACHED document read, and its bytes past the attachment id
 * (librdmad_reuse.c). */
struct client_reuse {
	char *rest;
	size_t len;
	json_t *doc;
};

struct rdmad {
	int fd;
	char *path; /* for rdmad_reconnect() */
	uint32_t last_id;
	bool broken; /* an answer was lost or garbled: no more requests */
	bool gone;   /* the daemon closed the connection */
	/* Oldest first; the payload of the last one handed out is kept
	 * for the strings it lent. */
	struct client_event *events, **events_tail;
	size_t n_events;
	json_t *delivered;
	char *delivered_text; /* rdmad_event_json() */
	uint16_t version; /* 0 until the WELCOME is read */
	int rcv_timeout_ms; /* SO_RCVTIMEO as set; 0: none */
	int attach_wait_ms; /* for RDMAD_ATTACH_WAIT; -1: no limit */
	bool local_seen; /* the last attach was in local mode */
	uint8_t *rbuf;	 /* PROTO_RECV_BYTES, for each datagram */
	struct client_reuse reuse;
	/* Oldest first: the order the daemon answers in. */
	struct pending pending[CLIENT_MAX_PENDING];
	size_t n_pending;
	struct rdmad_profile *profiles;
	/* The daemon went and shared attachments were granted: the
	 * connection is made again on its own, with backoff, and they are
	 * resumed (librdmad_conn.c). Meanwhile fd is a timer's, readable
	 * when the next try is due. */
	bool resuming;
	int resume_timer;     /* the timerfd, -1: none */
	int64_t resume_since; /* CLOCK_MONOTONIC ms */
	int64_t resume_next;
	int resume_backoff_ms;
};

struct client_memory {
	char *name; /* from the MR table: points into it, not ours */
	int fd;	    /* until mapped */
	bool ask;   /* no fd came with ATTACHED: asked for (MAP) */
	/* From the MR table: read from it when first needed (until then
	 * the rest is zero). */
	bool read;
	void *addr; /* MAP_FAILED until mapped */
	size_t size;
};

struct client_pd {
	char *name;
	uint32_t handle;
	struct ibv_pd *pd; /* shared mode: imported when first asked for */
};

struct client_mr {
	char *name; /* in the MR table (table): its mapping's, not ours */
	size_t pd, memory; /* indexes into the profile's arrays */
	uint32_t handle, rkey;
	uint64_t offset, length, iova;
	unsigned int access;
	bool zero_based;
	bool odp;
	/* A reload removed it before it was imported (OBJECT_DRAINING
	 * read): asking for it is ESTALE. */
	bool stale;
	bool table;
	struct ibv_mr *mr; /* shared mode: imported when first asked for */
	/* From the MR table: its entry, and the profile's index of those
	 * read so far (librdmad_objects.c). */
	uint32_t entry;
	UT_hash_handle hh;
};

/* Device memory of the daemon's context (shared mode), and the MRs over
 * it: imported by handle when first asked for. */
struct client_dm {
	char *name;
	uint32_t handle;
	uint64_t size;
	struct ibv_dm *dm;
};

struct client_dm_mr {
	char *name;
	size_t pd; /* index into the profile's PDs */
	uint32_t handle, rkey;
	uint64_t length;
	struct ibv_mr *mr;
};

/* An implicit MR (odp without memory): the client's own, over its own
 * address space, registered on the profile's PD when first asked for. */
struct client_imr {
	char *name;
	size_t pd;
	unsigned int access;
	struct ibv_mr *mr;
};

/* An XRC domain's file: opened on this context when first asked for. */
struct client_xrcd {
	char *name;
	int fd;
	struct ibv_xrcd *xrcd;
};

/* A QP or SRQ of the profile, by number (XRC: ibv_open_qp, srq_num). */
struct client_num {
	char *name;
	char *xrcd; /* an XRC target QP's domain, or NULL */
	bool xrc;   /* xrc_recv QP, XRC SRQ */
	bool has_num;
	uint32_t num;
};

struct rdmad_profile {
	struct rdmad *conn;
	struct rdmad_profile *next;
	char *name;
	uint32_t attachment;
	bool granted; /* the daemon holds an attachment for us */
	enum rdmad_mode mode;
	char *ibdev;
	int port, gid_index;
	int cmd_fd; /* shared mode, until imported */
	struct ibv_context *ctx;
	struct client_memory *mem;
	size_t n_mem;
	struct client_pd *pd;
	size_t n_pd;
	struct client_mr *mr;
	size_t n_mr;
	/* Shared mode, from a daemon that sends one: the MR table
	 * (proto/mr_table.h), mapped read-only, and the MRs read from it
	 * so far (mr is then empty). */
	const void *mrt;
	size_t mrt_len;
	uint32_t mrt_count;
	/* The memories are the table's (mem has n_mem, each read on
	 * first use: client_memory()). */
	bool mem_in_table;
	struct client_mr *mrt_read;
	struct client_xrcd *xrcd;
	size_t n_xrcd;
	struct client_num *qp, *srq;
	size_t n_qp, n_srq;
	struct client_dm *dm;
	size_t n_dm;
	struct client_dm_mr *dm_mr;
	size_t n_dm_mr;
	struct client_imr *imr;
	size_t n_imr;
	struct client_mcast *mcast; /* librdmad_mcast.c */
	size_t n_mcast;
	/* Local mode: the devices, listed while the daemon answered. */
	struct ibv_device **devs;
	int n_devs;
};


/* librdmad_conn.c */
/* Build a request of type with payload (taken, may be NULL on ENOMEM). */
int client_request_msg(struct proto_msg *m, uint16_t type, json_t *payload);

/*
 * Send req (its id is set here) without waiting for its answer: it is
 * read by client_conn_await() or settled on the way to a later one.
 */
int client_conn_send(struct rdmad *c, struct proto_msg *req);
/* How long a read waits for an answer; 0: as long as it takes. Set
 * only when it changes: a system call per change, none per request. */
int client_conn_set_timeout(struct rdmad *c, int ms);
/*
 * Read answers up to the one to request id, into ans: those to requests
 * sent ahead come first and are settled on the way. An ERROR answer
 * becomes the errno of its code. On 0, ans is the caller's to clear; on
 * failure it holds nothing.
 */
int client_conn_await(struct rdmad *c, uint32_t id, const char *what,
		      struct proto_msg *ans);
void client_conn_free(struct rdmad *c);

/* o[key], a JSON integer in [0, max], into *out; false when not (the
 * daemon's documents are checked, never trusted). */
static inline bool client_json_uint(const json_t *o, const char *key,
				    uint64_t max, uint64_t *out)
{
	const json_t *v = json_object_get(o, key);
	json_int_t i;

	if (!json_is_integer(v))
		return false;
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i > max)
		return false;
	*out = (uint64_t)i;
	return true;
}

/* librdmad_attached.c: memory i of p (i < p->n_mem), read from the MR
 * table first if it is there and was not yet; NULL with the error set
 * when the table's record is malformed. */
struct client_memory *client_memory(struct rdmad_profile *p, size_t i);
/* librdmad.c: memory i mapped in this process (once); 0 or -errno. */
int client_memory_map(struct rdmad_profile *p, size_t i);
/* librdmad_request.c: mem's fd, asked of the daemon (MAP) for p's
 * attachment, into mem->fd; 0 or -errno. */
int client_memory_ask(struct rdmad_profile *p, struct client_memory *mem);

/* Where MR mr begins in this process's mapping of its memory, mapped
 * now if it was not yet; NULL with errno when it cannot be. */
static inline void *client_mr_addr(struct rdmad_profile *p,
				   const struct client_mr *mr)
{
	int r = client_memory_map(p, mr->memory);

	if (r < 0) {
		errno = -r;
		return NULL;
	}
	/* Read by the map. */
	return (char *)p->mem[mr->memory].addr + mr->offset;
}

/* librdmad_objects.c */
/* An OBJECT_DRAINING of p's: an MR named in it that was not imported
 * yet is not imported any more (ESTALE). */
void client_object_drained(struct rdmad_profile *p, const json_t *event);
/* Undo what the MRs read from the table hold, and forget them. */
void client_table_mrs_free(struct rdmad_profile *p);

/* librdmad_reuse.c */
/* proto_decode_frame(), but an ATTACHED with the bytes of the last one
 * past its attachment id takes that one's document (shared: read it
 * only, and keep nothing of it past the message). */
int client_reuse_decode(struct client_reuse *u, const uint8_t *buf,
			size_t len, int *fds, size_t n_fds,
			struct proto_msg *m);
/* The same for a message received whole (proto_recv_raw), of one frame
 * or several; raw keeps no fd, and is the caller's to clear. */
int client_reuse_decode_raw(struct client_reuse *u, struct proto_raw *raw,
			    struct proto_msg *m);
void client_reuse_clear(struct client_reuse *u);

/* librdmad_attached.c */
/* Close, unmap and free everything p holds, and p. */
void client_profile_free(struct rdmad_profile *p);
/*
 * Fill p from ATTACHED, taking the fds it uses out of m (those it does
 * not use stay in m, to be closed with it). p->attachment and
 * p->granted are set first, so that a malformed rest can be detached.
 */
int client_parse_attached(struct rdmad_profile *p, struct proto_msg *m,
			  unsigned int flags);

/* librdmad_mcast.c: the joined groups of ATTACHED's "mcast" list
 * (optional: daemons before 0.7 send none), their names taken out of a,
 * and freeing them. */
struct proto_attached;
int client_mcasts_take(struct rdmad_profile *p, struct proto_attached *a);
void client_mcasts_free(struct rdmad_profile *p);

#endif
