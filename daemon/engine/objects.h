/* SPDX-License-Identifier: MIT */
/* Each object kind: how it is created, connected, destroyed and shown. */
#ifndef RDMAD_OBJECTS_H
#define RDMAD_OBJECTS_H

#include "profile_index.h"
#include "uhandle.h"

/*
 * Make o's verbs object in p (its dependencies are ready). On a worker
 * thread: it touches only o's own u, err and reason, and reads what o
 * depends on. On failure it frees what it made, sets err and reason and
 * returns -errno; the caller, on the loop, sets the state.
 */
int object_build(struct profile *p, struct object *o);
/* Second pass, once every object exists: QPs move to their target state
 * (their peers exist by now). Other kinds: nothing to do. Same rules as
 * object_build(). */
int object_connect(struct profile *p, struct object *o);
/* On the loop, once o is built (and connected): what serves from the
 * loop starts (a target's listener). Same rules as object_build(). */
int object_start(struct profile *p, struct object *o);
/* o was taken over by p (a reload): it tells p of its changes now. */
void object_take_over(struct profile *p, struct object *o);
/* Set o's state: the only assignment of it. */
void object_set_state(struct object *o, enum obj_state s);
/* The serial of a new incarnation (leases name the one they hold). */
uint64_t object_next_serial(void);
/* Free what o holds, whatever its state; o becomes pending. */
void object_destroy(struct object *o);
/* Let go of what o holds without freeing it (someone else took it over):
 * o becomes pending. */
void object_forget(struct object *o);
/* A PD or MR left in its context for the next run (restore.h): our
 * part of it freed, the kernel's kept; then forgotten. */
void object_hand_over(struct object *o);
/* o's uverbs handle and its kind, when o holds a kernel object of the
 * context that has one. */
bool object_handle(const struct object *o, enum uhandle_kind *k, uint32_t *h);
/* Whether kind k's objects are kernel objects of the context, which a
 * process holding its file can destroy (object_lose()). */
bool object_kind_losable(enum obj_kind k);
/* The uverbs kind of kind k's objects: UH_KINDS when they have no
 * handle in the context (a memory, a target). */
enum uhandle_kind object_kind_uverbs(enum obj_kind k);
/* The uverbs kind of what RDMA netlink lists as n: the kind tables'
 * (UH_KINDS for a context, which has no handle). */
enum uhandle_kind object_uverbs_of_netlink(enum rdmanl_kind n);
/* Whether o has event sources on the loop (a target, a group): it is
 * destroyed at once, never buried on a worker. */
bool object_on_loop(const struct object *o);
/* Whether a stop that hands the context to the next run keeps o there
 * (object_hand_over(): a PD, an MR) rather than destroying it. */
bool object_kept_by_restart(const struct object *o);
/* o drains (its declaration went, a lease keeps it): what its kind
 * does then (a group stays joined without the daemon's QPs). */
void object_drain(struct object *o);
/* The handles of what o made in the context beside its own (a
 * target's connections, a group's AH), to add. */
void object_held_handles(const struct object *o,
			 void (*add)(void *ud, enum uhandle_kind k, uint32_t h),
			 void *ud);
/* The kernel no longer has o's object (a process holding the context's
 * file destroyed it): what of it is ours goes, without a kernel call
 * (the handle may be another object's by now). o becomes pending; its
 * leases end. */
void object_lose(struct object *o);
/* Say why o failed: errno err (either sign) and a reason; the state is
 * the caller's to set. Returns -|err|. */
int object_fail(struct object *o, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Its document, with the sessions holding it (profile_object_leases()). */
json_t *object_json(const struct object *o, unsigned int leases);
/* Add to j what a client knew of o: its handle, an MR's keys, an MW's
 * rkey, a QP's number (the object_lost and object_recreated events). */
void object_identity_json(const struct object *o, json_t *j);
/*
 * What another host needs to connect to the ready QP o without rdma_cm:
 * {qp_num, port, lid, gid, gid_index, psn, mtu, type}. The GID is the
 * one the QP sends from (its AV's once connected, else the path's or the
 * profile's); psn is the QP's sq_psn once in RTS, else the one qp_modify()
 * would give it. NULL without memory; *err (-errno) when the device
 * cannot be asked.
 */
json_t *object_qp_endpoint(const struct profile *p, const struct object *o,
			   int *err);
/*
 * A reload: can QP declaration next take over was's QP, in RTS, by
 * changing in place (RTS->RTS, through SQD where IB wants it) what
 * differs? Only access, recover and the path's min_rnr_timer, timeout,
 * retry_cnt, rnr_retry and max_rd_atomic may differ, both declared
 * "rts". *mask: the IBV_QP_* attributes to change (0: none, recover
 * is the daemon's own).
 */
bool object_qp_in_place(const struct conf_qp *next,
			const struct conf_qp *was, int *mask);
/* Change the ready QP o (in RTS) to what its declaration says, for the
 * attributes of mask. On the loop. 0, or -errno with o's reason set. */
int object_qp_change(struct profile *p, struct object *o, int mask);
/* Arm a ready SRQ's limit event (srq_limit > 0; the device disarms it
 * when the event fires). 0, or -errno. */
int object_srq_arm(const struct object *o);

#endif
