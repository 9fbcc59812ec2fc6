/* SPDX-License-Identifier: MIT */
/*
 * Everything the engine knows of an object kind, in one table per kind
 * (as networkd's NetDevVTable): how it is made, connected, started,
 * taken over, handed over, drained, destroyed and lost, its uverbs and
 * RDMA netlink kinds, the handles it holds, its document, its part of
 * ATTACHED and the kinds it names. The tables are in kind_pd.c (xrcd, pd), kind_memory.c (memory,
 * dm, mr, mw), kind_queue.c (cq, srq, qp, ah) and kind_remote.c
 * (target, mcast); objects.c holds them by kind and dispatches.
 *
 * No slot is ever NULL: a kind without an operation names the kind_no_*
 * below that says so (tests/unit/test_kinds.c fails on an empty slot or
 * a kind without its table). The kinds' order, which is the creation
 * order, is enum obj_kind's (config.h).
 */
#ifndef RDMAD_KINDS_H
#define RDMAD_KINDS_H

#include "profile_index.h"

/* How an object goes into ATTACHED, in one mode (attach_view.c). */
enum attach_part {
	PART_NONE,	  /* not in ATTACHED */
	PART_MEMORY,	  /* "memory", with its fd */
	PART_XRCD,	  /* "xrcd", with an fd of its file (shared by inode) */
	PART_PD,	  /* "pd", by handle */
	PART_NUMBER,	  /* "qp" or "srq", by number */
	PART_DM,	  /* "dm", imported in shared mode */
	PART_DM_MR,	  /* "dm_mr" */
	PART_IMPLICIT_MR, /* "implicit_mr": the client registers its own */
	PART_MR,	  /* "mr", over a memory with an fd */
	PART_MCAST,	  /* "mcast": a group's MGID, MLID, qkey and AH */
};

#define KIND_BIT(k) (1u << (k))

struct object_kind {
	enum obj_kind kind;
	/* The kinds its declaration may name (KIND_BIT()s): all of them
	 * before it in the creation order (a QP's peer is a link). */
	unsigned int parents;
	/* Its kernel object as the uverbs handle tables and RDMA netlink
	 * list it; UH_KINDS, RDMANL_KINDS: they do not. A kind with a
	 * uverbs kind is a kernel object of the context: a process that
	 * holds the context's file can destroy it (lose). */
	enum uhandle_kind uverbs;
	enum rdmanl_kind netlink;
	/* It has event sources on the loop (a target's listener, a
	 * group's watch): destroyed there at once, never buried. */
	bool on_loop;
	/* A stop that hands the context over to the next run keeps it
	 * there (hand_over), instead of destroying it. */
	bool kept_by_restart;
	/* o->u as it is before a creation, once zeroed (fds at -1). */
	void (*reset)(struct object *o);
	/* object_build(), object_connect(), object_start(): the same rules
	 * (objects.h). create frees nothing of a half-way failure: destroy
	 * does, called after it. */
	int (*create)(struct profile *p, struct object *o);
	int (*connect)(struct profile *p, struct object *o);
	int (*start)(struct profile *p, struct object *o);
	/* Free what o holds, whatever it got to. */
	void (*destroy)(struct object *o);
	/* p took o over (a reload): o tells p of its changes from now. */
	void (*take_over)(struct profile *p, struct object *o);
	/* Our part of the kernel's object freed, the kernel's kept for the
	 * next run (object_hand_over()). */
	void (*hand_over)(struct object *o);
	/* o drains: its declaration went, a lease keeps it. */
	void (*drain)(struct object *o);
	/* The handles of what it made in the context beside its own: the
	 * daemon's, not leftovers (reclaim.c). */
	void (*held_handles)(const struct object *o,
			     void (*add)(void *ud, enum uhandle_kind k,
					 uint32_t h),
			     void *ud);
	/* The kernel lost o's object: what of it is ours goes, without a
	 * kernel call (object_lose()). */
	void (*lose)(struct object *o);
	/* Its uverbs handle, when it holds its kernel object. */
	bool (*handle)(const struct object *o, uint32_t *h);
	/* Its document's own fields: ready; in another state (a creating
	 * memory's progress, a draining PD's handle, ...). */
	void (*json)(const struct object *o, json_t *j);
	void (*json_unready)(const struct object *o, json_t *j);
	/* What a client knew of it beside its handle (object_lost). */
	void (*identity)(const struct object *o, json_t *j);
	/* Its part of ATTACHED, ready, in a mode. */
	enum attach_part (*attach)(struct profile *p, const struct object *o,
				   bool shared);
};

/* The table of kind k (objects.c). */
const struct object_kind *object_kind(enum obj_kind k);

extern const struct object_kind kind_memory, kind_xrcd, kind_pd, kind_dm,
	kind_mr, kind_mw, kind_cq, kind_srq, kind_qp, kind_ah, kind_target,
	kind_mcast;

/* The slots of a kind that has no such operation (kind_common.c). */
void kind_no_reset(struct object *o);
int kind_no_connect(struct profile *p, struct object *o);
int kind_no_start(struct profile *p, struct object *o);
void kind_no_take_over(struct profile *p, struct object *o);
void kind_no_hand_over(struct object *o);
void kind_no_drain(struct object *o);
void kind_no_held_handles(const struct object *o,
			  void (*add)(void *ud, enum uhandle_kind k, uint32_t h),
			  void *ud);
void kind_never_lost(struct object *o);
bool kind_no_handle(const struct object *o, uint32_t *h);
void kind_no_json(const struct object *o, json_t *j);
enum attach_part kind_not_attached(struct profile *p, const struct object *o,
				   bool shared);

/* A dependency of o, which must be ready; fails o otherwise. */
struct object *object_dep(struct profile *p, struct object *o,
			  enum obj_kind kind, const char *name);
/* Keep what the provider made for a lost object, never used again. */
void object_keep_remains(void *v);

#define SET_INT(j, k, v) json_object_set_new(j, k, json_integer((json_int_t)(v)))
#define SET_STR(j, k, v)                                                       \
	do {                                                                   \
		if (v)                                                         \
			json_object_set_new(j, k, json_string(v));             \
	} while (0)

#endif
