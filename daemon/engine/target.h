/* SPDX-License-Identifier: MIT */
/*
 * A target at run time: an rdma_cm listener on the profile's device whose
 * admitted connections each get an RC QP on the profile's context and PD
 * and one type-2 memory window per exposed range, bound on that QP only.
 * The peer learns the windows from the accept private data
 * (proto/target.h).
 *
 * A connection goes: binding (QP up, windows being bound), accepting
 * (accept sent), established, then revoked (its windows are gone; the QP
 * lingers TARGET_LINGER_MS in RTS so that the peer's next operation gets
 * a remote access error rather than a transport timeout, then the
 * connection is torn down). A peer that disconnects is torn down at once.
 * target_free() tears everything down at once, windows first.
 */
#ifndef RDMAD_TARGET_H
#define RDMAD_TARGET_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <jansson.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "uhandle.h"

struct events;
struct profile;

#define TARGET_LINGER_MS 2000

struct target;

/* One exposed range: what its windows bind. */
struct target_range_src {
	struct ibv_mr *mr;
	uint64_t addr; /* in the MR's address space (its iova + offset) */
	uint64_t length;
	unsigned int access; /* IBV_ACCESS_REMOTE_* */
};

struct target_params {
	const char *profile;
	const struct conf_target *conf;
	struct ibv_context *ctx; /* the profile's */
	const char *ibdev;
	int port;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	/* The CQ's completion channel (channel = true), or NULL: the
	 * binds' completions are then waited on there, not polled for. */
	struct ibv_comp_channel *channel;
	struct target_range_src range[CONF_TARGET_MAX_EXPOSE];
	size_t n_range;
	/* Where connect, disconnect, revoke and reject are published
	 * (NULL: nowhere). */
	struct events *events;
	/* Whose documents show the connections: touched on the loop when
	 * they change (profile_touch()); NULL: nobody's. */
	struct profile *owner;
};

/* What the target counted, for /metrics. */
struct target_stats {
	unsigned int connections; /* now, in any state */
	unsigned long long accepted, revoked, disconnected, failed;
	unsigned long long rejected_address, rejected_token, rejected_full;
};

/*
 * Listen on conf->listen (on a worker thread: nothing of the loop is
 * touched). The address must be on tp->ibdev port tp->port. On failure
 * *why says why (malloc'ed) and -errno is returned.
 */
int target_new(const struct target_params *tp, struct target **out,
	       char **why);
/* Whose documents show it from now on (a reload took the target over). */
void target_set_owner(struct target *t, struct profile *owner);
/* Serve connections from the loop e. */
int target_start(struct target *t, sd_event *e);
/* Tear every connection down (windows first) and stop listening. */
struct target *target_free(struct target *t);
/* Revoke connection id: -ENOENT when there is none (or it is revoked
 * already). */
int target_revoke(struct target *t, uint64_t id);
/* {"listen", "port", "listening", "connections": [...]} parts, into j. */
void target_json(const struct target *t, json_t *j);
/* The handles of what t made in the profile's context (each
 * connection's QP and windows): the daemon's, not leftovers. */
void target_handles(const struct target *t,
		    void (*add)(void *ud, enum uhandle_kind k, uint32_t h),
		    void *ud);
json_t *target_connections_json(const struct target *t);
void target_stats(const struct target *t, struct target_stats *out);

#endif
