// SPDX-License-Identifier: MIT
/*
 * Why raw ioctls: libibverbs acts on a handle only through an object of
 * its own (ibv_destroy_qp() takes a struct ibv_qp the provider made),
 * and lists none. The kernel's ioctl interface (Linux 4.20 and later)
 * takes the handle itself; its layout is the uapi of
 * <rdma/rdma_user_ioctl_cmds.h> and <rdma/ib_user_ioctl_cmds.h>.
 */
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "uhandle.h"
#include "util.h"

/* The attributes one call carries, at most. */
#define MAX_ATTRS 5

/* The header and its attributes, one block (the header ends in a
 * flexible array of them). */
struct call {
	union {
		struct ib_uverbs_ioctl_hdr hdr;
		uint8_t space[sizeof(struct ib_uverbs_ioctl_hdr) +
			      MAX_ATTRS * sizeof(struct ib_uverbs_attr)];
	};
};

static void call_init(struct call *c, uint16_t object, uint16_t method)
{
	*c = (struct call){ .hdr = { .object_id = object, .method_id = method } };
}

static void add_attr(struct call *c, uint16_t id, uint16_t len, uint64_t data)
{
	c->hdr.attrs[c->hdr.num_attrs++] = (struct ib_uverbs_attr){
		.attr_id = id,
		.len = len,
		.flags = UVERBS_ATTR_F_MANDATORY,
		.data = data,
	};
}

static int call_raw(int fd, struct call *c)
{
	c->hdr.length = (uint16_t)(sizeof(c->hdr) +
				   c->hdr.num_attrs * sizeof(c->hdr.attrs[0]));
	if (ioctl(fd, RDMA_VERBS_IOCTL, c) < 0)
		return errno == ENOTTY || errno == EPROTONOSUPPORT ? -EOPNOTSUPP
								    : -errno;
	return 0;
}

/*
 * The kernel refuses (EINVAL) a call whose header does not name the
 * device's driver (enum rdma_driver_id), which rdma-core fills in from
 * its provider and does not tell. Learnt once per device (the fd's
 * character device): the first id an INFO_HANDLES call is not refused
 * with. A handful of devices per host: a small table.
 */
#define DRIVER_IDS 64
static struct {
	dev_t rdev;
	uint32_t id;
} drivers[16];
static size_t n_drivers;

static int driver_of(int fd, uint32_t *id)
{
	struct stat st;
	uint32_t total;
	uint32_t h[1];

	if (fstat(fd, &st) < 0)
		return -errno;
	for (size_t i = 0; i < n_drivers; i++)
		if (drivers[i].rdev == st.st_rdev) {
			*id = drivers[i].id;
			return 0;
		}
	for (uint32_t d = 0; d < DRIVER_IDS; d++) {
		struct call c;
		int r;

		call_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INFO_HANDLES);
		c.hdr.driver_id = d;
		c.hdr.attrs[c.hdr.num_attrs++] = (struct ib_uverbs_attr){
			.attr_id = UVERBS_ATTR_INFO_OBJECT_ID,
			.len = sizeof(uint64_t),
			.flags = UVERBS_ATTR_F_MANDATORY,
			.data = UVERBS_OBJECT_PD,
		};
		c.hdr.attrs[c.hdr.num_attrs++] = (struct ib_uverbs_attr){
			.attr_id = UVERBS_ATTR_INFO_TOTAL_HANDLES,
			.len = sizeof(total),
			.flags = UVERBS_ATTR_F_MANDATORY,
			.data = (uintptr_t)&total,
		};
		c.hdr.attrs[c.hdr.num_attrs++] = (struct ib_uverbs_attr){
			.attr_id = UVERBS_ATTR_INFO_HANDLES_LIST,
			.len = sizeof(h),
			.flags = UVERBS_ATTR_F_MANDATORY,
			.data = (uintptr_t)h,
		};
		r = call_raw(fd, &c);
		if (r == -EINVAL)
			continue;
		if (r < 0)
			return r;
		if (n_drivers < ARRAY_SIZE(drivers))
			drivers[n_drivers++] =
				(typeof(drivers[0])){ st.st_rdev, d };
		*id = d;
		return 0;
	}
	return -EOPNOTSUPP;
}

static int call_run(int fd, struct call *c)
{
	int r = driver_of(fd, &c->hdr.driver_id);

	return r < 0 ? r : call_raw(fd, c);
}

/* Each kind: its uverbs object, and its DESTROY method and attributes;
 * resp: the size of the response a DESTROY of it must take (0: none). */
static const struct {
	const char *name;
	uint16_t object, destroy, handle_attr, resp_attr, resp;
} kinds[UH_KINDS] = {
	[UH_QP] = { "qp", UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY,
		    UVERBS_ATTR_DESTROY_QP_HANDLE, UVERBS_ATTR_DESTROY_QP_RESP,
		    sizeof(struct ib_uverbs_destroy_qp_resp) },
	[UH_MW] = { "mw", UVERBS_OBJECT_MW, UVERBS_METHOD_MW_DESTROY,
		    UVERBS_ATTR_DESTROY_MW_HANDLE, 0, 0 },
	[UH_AH] = { "ah", UVERBS_OBJECT_AH, UVERBS_METHOD_AH_DESTROY,
		    UVERBS_ATTR_DESTROY_AH_HANDLE, 0, 0 },
	[UH_SRQ] = { "srq", UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY,
		     UVERBS_ATTR_DESTROY_SRQ_HANDLE,
		     UVERBS_ATTR_DESTROY_SRQ_RESP,
		     sizeof(struct ib_uverbs_destroy_srq_resp) },
	[UH_CQ] = { "cq", UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY,
		    UVERBS_ATTR_DESTROY_CQ_HANDLE, UVERBS_ATTR_DESTROY_CQ_RESP,
		    sizeof(struct ib_uverbs_destroy_cq_resp) },
	[UH_MR] = { "mr", UVERBS_OBJECT_MR, UVERBS_METHOD_MR_DESTROY,
		    UVERBS_ATTR_DESTROY_MR_HANDLE, 0, 0 },
	[UH_DM] = { "dm", UVERBS_OBJECT_DM, UVERBS_METHOD_DM_FREE,
		    UVERBS_ATTR_FREE_DM_HANDLE, 0, 0 },
	[UH_PD] = { "pd", UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY,
		    UVERBS_ATTR_DESTROY_PD_HANDLE, 0, 0 },
	[UH_XRCD] = { "xrcd", UVERBS_OBJECT_XRCD, UVERBS_METHOD_XRCD_DESTROY,
		      UVERBS_ATTR_DESTROY_XRCD_HANDLE, 0, 0 },
};

const char *uhandle_kind_name(enum uhandle_kind k)
{
	return k < UH_KINDS ? kinds[k].name : "?";
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int list_handles(int cmd_fd, enum uhandle_kind k, size_t cap, bool sort,
			bool grow, uint32_t **out, size_t *n, int *complete)
{
	*out = NULL;
	*n = 0;
	*complete = 1;
	for (;;) {
		uint32_t *h = malloc(cap * sizeof(*h)), total = 0;
		struct call c;
		int r;

		if (!h)
			return -ENOMEM;
		call_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INFO_HANDLES);
		add_attr(&c, UVERBS_ATTR_INFO_OBJECT_ID, sizeof(uint64_t),
			 kinds[k].object);
		add_attr(&c, UVERBS_ATTR_INFO_TOTAL_HANDLES, sizeof(total),
			 (uintptr_t)&total);
		add_attr(&c, UVERBS_ATTR_INFO_HANDLES_LIST,
			 (uint16_t)(cap * sizeof(*h)), (uintptr_t)h);
		r = call_run(cmd_fd, &c);
		if (r < 0) {
			free(h);
			return r;
		}
		/* The kernel stops at the list's size: a full list may
		 * have left some out. */
		if (total < cap || cap == UHANDLE_LIST_MAX || !grow) {
			*complete = total < cap;
			if (sort)
				qsort(h, total, sizeof(*h), cmp_u32);
			if (!total) {
				free(h);
				h = NULL;
			}
			*out = h;
			*n = total;
			return 0;
		}
		free(h);
		cap = cap * 4 > UHANDLE_LIST_MAX ? UHANDLE_LIST_MAX : cap * 4;
	}
}

int uhandle_list(int cmd_fd, enum uhandle_kind k, uint32_t **out, size_t *n,
		 int *complete)
{
	/* Grown until the kind fits, or the attribute's limit. */
	return list_handles(cmd_fd, k, 256, true, true, out, n, complete);
}

int uhandle_list_first(int cmd_fd, enum uhandle_kind k, size_t cap,
		       uint32_t **out, size_t *n)
{
	int complete;

	if (!cap || cap > UHANDLE_LIST_MAX)
		cap = UHANDLE_LIST_MAX;
	return list_handles(cmd_fd, k, cap, true, false, out, n, &complete);
}

/* A mix of one handle (splitmix64's finaliser): the digest's terms. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void uhandle_digest_of(const uint32_t *h, size_t n, struct uhandle_digest *d)
{
	*d = (struct uhandle_digest){ .n = n };
	for (size_t i = 0; i < n; i++) {
		d->sum += mix(h[i]);
		d->x ^= mix(h[i] ^ 0x5bd1e995u);
	}
}

int uhandle_digest(int cmd_fd, enum uhandle_kind k, struct uhandle_digest *d)
{
	uint32_t *h = NULL;
	size_t n = 0;
	int complete = 0;
	/* One call at the attribute's limit: no sort, no second try. */
	int r = list_handles(cmd_fd, k, UHANDLE_LIST_MAX, false, false, &h, &n,
			     &complete);

	if (r == 0 && !complete)
		r = -E2BIG;
	if (r == 0)
		uhandle_digest_of(h, n, d);
	free(h);
	return r;
}

void uhandle_sort(uint32_t *list, size_t n)
{
	if (n)
		qsort(list, n, sizeof(*list), cmp_u32);
}

int uhandle_in(const uint32_t *list, size_t n, uint32_t h)
{
	return n && bsearch(&h, list, n, sizeof(*list), cmp_u32) != NULL;
}

int uhandle_destroy(int cmd_fd, enum uhandle_kind k, uint32_t h)
{
	/* Large enough for any kind's response. */
	uint64_t resp[2] = { 0 };
	struct call c;

	if (k >= UH_KINDS)
		return -EINVAL;
	call_init(&c, kinds[k].object, kinds[k].destroy);
	add_attr(&c, kinds[k].handle_attr, 0, h);
	if (kinds[k].resp)
		add_attr(&c, kinds[k].resp_attr, kinds[k].resp,
			 (uintptr_t)resp);
	return call_run(cmd_fd, &c);
}

int uhandle_query_mr(int cmd_fd, uint32_t h, uint32_t *lkey, uint32_t *rkey,
		     uint64_t *length_out)
{
	uint64_t length = 0, iova = 0;
	struct call c;
	int r;

	call_init(&c, UVERBS_OBJECT_MR, UVERBS_METHOD_QUERY_MR);
	add_attr(&c, UVERBS_ATTR_QUERY_MR_HANDLE, 0, h);
	add_attr(&c, UVERBS_ATTR_QUERY_MR_RESP_LKEY, sizeof(*lkey),
		 (uintptr_t)lkey);
	add_attr(&c, UVERBS_ATTR_QUERY_MR_RESP_RKEY, sizeof(*rkey),
		 (uintptr_t)rkey);
	add_attr(&c, UVERBS_ATTR_QUERY_MR_RESP_LENGTH, sizeof(length),
		 (uintptr_t)&length);
	/* Optional (a kernel before 5.19 has no IOVA to give). */
	add_attr(&c, UVERBS_ATTR_QUERY_MR_RESP_IOVA, sizeof(iova),
		 (uintptr_t)&iova);
	c.hdr.attrs[4].flags = 0;
	r = call_run(cmd_fd, &c);
	if (r == 0 && length_out)
		*length_out = length;
	return r;
}
