/* SPDX-License-Identifier: MIT */
/*
 * A device context's objects by their uverbs handles, through the
 * kernel's ioctl interface on the context's command fd (the raw
 * RDMA_VERBS_IOCTL of <rdma/rdma_user_ioctl.h>: libibverbs has no call
 * for either).
 *
 * Handles are per open file, not per process: every process that holds
 * the file (the daemon, and each shared client that imported it) sees
 * and acts on the same table, and the kernel gives a freed handle to the
 * next object made in the file, of any kind. Two calls:
 *
 *   uhandle_list     UVERBS_METHOD_INFO_HANDLES: the handles of one kind
 *                    that exist in the file now (Linux 5.0 and later);
 *   uhandle_destroy  the kind's DESTROY method on one handle: what
 *                    ibv_destroy_qp() etc. send, without the provider's
 *                    user-space object (which the caller may not have:
 *                    a dead client's QP, say).
 *
 * The kernel wants each call's header to name the device's driver
 * (enum rdma_driver_id), which libibverbs keeps to itself: it is learnt
 * once per device, by trying the ids (driver_of()). Not thread-safe:
 * the loop's alone.
 *
 * Neither touches libibverbs' objects: a destroyed handle's user-space
 * part, if any process has one, is that process's to drop.
 */
#ifndef RDMAD_UHANDLE_H
#define RDMAD_UHANDLE_H

#include <stddef.h>
#include <stdint.h>

/* The kinds with handles, in the order children go before parents. */
enum uhandle_kind {
	UH_QP,
	UH_MW,
	UH_AH,
	UH_SRQ,
	UH_CQ,
	UH_MR,
	UH_DM,
	UH_PD,
	UH_XRCD,
	UH_KINDS,
};

const char *uhandle_kind_name(enum uhandle_kind k);

/* The most handles one INFO_HANDLES call can return: the attribute's
 * length is 16 bits. A kind with more in the file is listed in part
 * (*complete false). */
#define UHANDLE_LIST_MAX (65535 / 4)

/*
 * The handles of kind k in the file of cmd_fd, sorted, in *out (the
 * caller's to free; NULL when there are none) and *n. *complete is
 * false when the file holds more than UHANDLE_LIST_MAX of the kind
 * (the list is then the first of them, in creation order). 0, or -errno
 * (-EOPNOTSUPP: a kernel without the method).
 */
int uhandle_list(int cmd_fd, enum uhandle_kind k, uint32_t **out, size_t *n,
		 int *complete);
/*
 * The first cap handles of kind k in the file, sorted (as
 * uhandle_list()): the kernel walks the file's table only until it has
 * found cap of them, so asking for as many as one expects of a kind
 * that was made early (a profile's PDs) costs little whatever else the
 * file holds. 0, or -errno.
 */
int uhandle_list_first(int cmd_fd, enum uhandle_kind k, size_t cap,
		       uint32_t **out, size_t *n);
/*
 * What a kind's handles in the file add up to, whatever their order:
 * equal lists have equal digests, and a list that lost or gained a
 * handle has another but by a 2^-64 chance. So a check against the
 * kernel can tell "nothing changed since" with one call and no sort.
 */
struct uhandle_digest {
	uint64_t n, sum, x;
};
void uhandle_digest_of(const uint32_t *h, size_t n, struct uhandle_digest *d);
/* The digest of kind k's handles in the file now: 0, or -errno (-E2BIG:
 * more than UHANDLE_LIST_MAX of them). */
int uhandle_digest(int cmd_fd, enum uhandle_kind k, struct uhandle_digest *d);
/* Sort a list of handles, for uhandle_in(). */
void uhandle_sort(uint32_t *list, size_t n);
/* Is h in the sorted list? */
int uhandle_in(const uint32_t *list, size_t n, uint32_t h);
/* Destroy the object of kind k with handle h in the file of cmd_fd. 0,
 * or -errno: -ENOENT or -EINVAL (no such handle of that kind), -EBUSY
 * (objects still use it: destroy those first). */
int uhandle_destroy(int cmd_fd, enum uhandle_kind k, uint32_t h);
/* UVERBS_METHOD_QUERY_MR: the keys and, if length is not NULL, the
 * length of MR handle h (0 or -errno). */
int uhandle_query_mr(int cmd_fd, uint32_t h, uint32_t *lkey, uint32_t *rkey,
		     uint64_t *length);

#endif
