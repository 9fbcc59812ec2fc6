/* SPDX-License-Identifier: MIT */
/*
 * A restart that keeps a profile's device context, and with it the keys
 * of its PDs and MRs (import-capable devices: mlx5).
 *
 * While it runs, the daemon hands systemd's fd store, per profile, the
 * context's cmd_fd ("ctx/P") and a state document ("state/P": a memfd
 * holding {version, ibdev, tids, ctxn, objects: [{kind, name, handle,
 * ...}]}; restore_doc.h reads it). At exit it destroys every object
 * of such a profile but its PDs and MRs, so that the context the store
 * holds keeps exactly those.
 * After a restart the profile imports the context (ibv_import_device)
 * and takes each PD and MR back by handle (ibv_import_pd/mr) when it is
 * declared the same way and its memory came back from the store too;
 * whatever is not taken back is destroyed once the profile has settled,
 * but for what a shared client of the previous run still leases: that
 * drains while the client lives (the leases outlive the process).
 * Other kinds cannot be imported: they are made again. Taken-back MRs
 * show "restored": true.
 */
#ifndef RDMAD_RESTORE_H
#define RDMAD_RESTORE_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>
#include <jansson.h>

struct profile;
struct restored;

/* The fd store's names: FDNAME_CTX P and FDNAME_STATE P. */
#define RESTORE_FDNAME_CTX "ctx/"
#define RESTORE_FDNAME_STATE "state/"
/* The lease record of a profile (durable.h: rewritten in place at each
 * change): {version, holders: [...], makers: [...]}, who holds what in
 * its context. In version 2 a holder names the lease sets it holds
 * ({pid, start, uid, gid, sets: [ID], leases: [its own]}), each a
 * record of its own under FDNAME_LEASESET ID/P, written once, before a
 * holder names it: {version: 2, id: ID, leases: [{kind, name, handle}]}.
 * A shared attach of 10,000 objects then rewrites a few bytes, not the
 * 10,000 leases. */
#define RESTORE_FDNAME_LEASE "lease/"
#define RESTORE_FDNAME_LEASESET "leaseset/"

/* Keep an fd systemd passed under name (one of the prefixes and a
 * profile name, or a lease set's ID/P), for restore_take(). Takes fd
 * (closed on failure). -EINVAL when the name is none of them. */
int restore_keep(const char *name, int fd);
/* Read the kept state documents on a thread of their own, while the
 * daemon loads its configuration (6000 entries take a while under
 * emulation); restore_take() and restore_done() wait for it. Once,
 * after the last restore_keep(). */
void restore_read_ahead(void);
/* The context kept for p's profile, when it was on p->ibdev and imports:
 * *ctx is set and the kept handles are returned (the profile's until
 * restore_finish()). NULL when there is none (*ctx untouched); a kept
 * one that does not fit is logged and dropped. On the loop. */
struct restored *restore_take(const struct profile *p,
			      struct ibv_context **ctx);
/* The previous run's context number (RDMA netlink), and its threads
 * (the caller's to free; NULL when none were recorded). */
int64_t restore_ctxn(const struct restored *r);
pid_t *restore_take_tids(struct restored *r, size_t *n);
/*
 * The PD of this name kept, imported into ctx and claimed, once it is
 * known to be a PD of the context (the context's list of PDs has its
 * handle; without such a list, a window can be made in it). NULL, and
 * *was_kept false, when none of that name was kept; NULL, *was_kept
 * true, errno set and *handle the kept one, when it cannot be taken
 * back. Any thread; each name is asked for by one thread only (its
 * creation's).
 */
struct ibv_pd *restore_pd(struct restored *r, struct ibv_context *ctx,
			  const char *name, uint32_t *handle, bool *was_kept);
/* What an MR must match to be taken back. */
struct restore_mr {
	const char *pd, *memory;
	uint64_t offset, length;
	unsigned int access;
	bool zero_based;
};
/* What the previous run's MR was: its handle and IOVA, and the keys and
 * length an import of the handle must show (0 keys: a state without
 * them, not checked). */
struct restore_mr_was {
	uint32_t handle, lkey, rkey;
	uint64_t iova, length;
};
bool restore_mr(struct restored *r, const char *name,
		const struct restore_mr *want, struct restore_mr_was *was);
/* It was imported: restore_finish() leaves it alone. kind "pd"/"mr". */
void restore_claim(struct restored *r, const char *kind, const char *name);
/* Was it? (A PD's MRs ask, once the PD's creation is over.) */
bool restore_claimed(struct restored *r, const char *kind,
		     const char *name);
/*
 * What was kept and not taken back: what a live holder of the previous
 * run leases (restore_state()'s holders) is imported and handed to
 * keep(ud, "pd"|"mr", name, struct ibv_pd * | struct ibv_mr *), to drain
 * while the holder lives; the rest is destroyed (MRs, then PDs) in ctx.
 * r is freed. Returns how many were destroyed. On the loop.
 */
typedef void (*restore_keep_fn)(void *ud, const char *kind, const char *name,
				void *obj);
size_t restore_finish(struct restored *r, struct ibv_context *ctx,
		      restore_keep_fn keep, void *ud);
/* Handles of the previous run that named another object than the state
 * document said, by the time they were to be kept or destroyed (left
 * alone), since the start. */
unsigned long long restore_stale_total(void);
/* The previous run's holders (see restore_state()): a new reference. */
json_t *restore_holders(const struct restored *r);
/* Who made what in its context, as its lease record said (reclaim.h:
 * reclaim_restore()); NULL: nothing. r's. */
const json_t *restore_makers(const struct restored *r);
/* Is the holder {pid, start} the process that held, alive? */
bool restore_holder_alive(const json_t *holder);
/* Process pid's start time (clock ticks since boot), 0 if unknown. */
unsigned long long restore_start_time(pid_t pid);
/* Start-up is over: drop what no profile took; gone(profile) hears of
 * each profile whose kept context went unused. */
void restore_done(void (*gone)(const char *profile));
/* p's state document, for the store: its text (the caller's to free)
 * of *len bytes, NULL when p has no context (or out of memory).
 * holders (borrowed; NULL: none): the shared clients that hold its
 * objects, [{pid, start, uid, leases: [{kind, name}]}], so that the next
 * run keeps what they lease while they live. */
char *restore_state(const struct profile *p, json_t *holders, size_t *len);
#endif
