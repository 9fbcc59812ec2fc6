/* SPDX-License-Identifier: MIT */
/*
 * A multicast group at run time: joined through rdma_cm on the profile's
 * device and port (RoCE: the IP multicast address, IGMP/MLD on the
 * netdev; IB: an SA join), each listed UD QP of the profile's context
 * attached with the group's MGID and MLID, and an address handle for
 * sending to the group made on the first QP's PD.
 *
 * mcast_new() joins and waits for the answer on a worker thread, so a
 * group is ready once joined; mcast_start() then watches rdma_cm on the
 * loop: a group the fabric drops (a multicast error, an address change)
 * is joined again there, its QPs attached again once it is. mcast_free()
 * detaches every QP, then leaves.
 */
#ifndef RDMAD_MCAST_H
#define RDMAD_MCAST_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <jansson.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "uhandle.h"

struct events;
struct profile;
struct mcast;
struct proto_att_mcast;

/* How long a join may take before the group fails (an SA that does not
 * answer). */
#define MCAST_JOIN_TIMEOUT_MS 10000

struct mcast_params {
	const char *profile;
	const struct conf_mcast *conf;
	const char *ibdev; /* the profile's device and port */
	int port;
	int gid_index; /* the profile's GID, the join's source */
	union ibv_gid gid;
	/* The member QPs, in the declaration's order (the profile's
	 * context), and the PD of the first: the group's AH's. */
	struct ibv_qp *qps[CONF_MCAST_MAX_QPS];
	size_t n_qps;
	struct ibv_pd *pd;
	struct events *events; /* join, rejoin and error events */
	/* Whose documents show it: touched on the loop when its document
	 * changes (profile_touch()); NULL: nobody's. */
	struct profile *owner;
};

/* Join, attach and make the AH (on a worker: nothing of the loop is
 * touched). On failure *why says why (malloc'ed) and -errno. */
int mcast_new(const struct mcast_params *mp, struct mcast **out, char **why);
/* Watch the group's rdma_cm events from the loop e. */
int mcast_start(struct mcast *m, sd_event *e);
/* Whose documents show it from now on (a reload took the group over). */
void mcast_set_owner(struct mcast *m, struct profile *owner);
/* The group is drained (a reload removed it while clients hold it): its
 * QPs are detached and its AH goes, the membership stays until
 * mcast_free(). */
void mcast_drain(struct mcast *m);
/* Detach every QP, leave the group, free. NULL-safe. */
struct mcast *mcast_free(struct mcast *m);
/* Changes whenever what mcast_json() says of the membership does (a
 * rejoin, its end): for caches of documents. */
uint64_t mcast_epoch(const struct mcast *m);
/* The group's fields for its object's document, into j: mgid, mlid,
 * qkey, join, join_state, qps (each name, qp_num, attached), ah. */
void mcast_json(const struct mcast *m, json_t *j);
/* What ATTACHED says of the group, into out (its name aside): the
 * strings and the list are malloc'ed, for proto_attached_free(). 0 or
 * -ENOMEM. */
int mcast_attached(const struct mcast *m, struct proto_att_mcast *out);
/* The handle of the AH m made in the profile's context, if any. */
void mcast_handles(const struct mcast *m,
		   void (*add)(void *ud, enum uhandle_kind k, uint32_t h),
		   void *ud);

#endif
