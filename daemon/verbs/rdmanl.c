// SPDX-License-Identifier: MIT
/*
 * RDMA netlink dumps, decoded with libmnl: its attribute walkers check
 * every length against the message (mnl_attr_ok) and its validators
 * check each attribute's size for its type, so a malformed message is
 * refused here rather than read past.
 */
#include <limits.h>
#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <time.h>

#include "rdmanl.h"
#include "util.h"

/* A dump's chunks are at most this long (iproute2 reads 32 KiB too); a
 * longer one would be cut (MSG_TRUNC), which is an error. */
#define RDMANL_BUF 32768

static const struct {
	const char *name, *id_name;
	uint16_t cmd;
	uint16_t table, entry, id; /* attributes */
} kinds[RDMANL_KINDS] = {
	[RDMANL_CTX] = { "ctx", "ctxn", RDMA_NLDEV_CMD_RES_CTX_GET,
			 RDMA_NLDEV_ATTR_RES_CTX, RDMA_NLDEV_ATTR_RES_CTX_ENTRY,
			 RDMA_NLDEV_ATTR_RES_CTXN },
	[RDMANL_PD] = { "pd", "pdn", RDMA_NLDEV_CMD_RES_PD_GET,
			RDMA_NLDEV_ATTR_RES_PD, RDMA_NLDEV_ATTR_RES_PD_ENTRY,
			RDMA_NLDEV_ATTR_RES_PDN },
	[RDMANL_CQ] = { "cq", "cqn", RDMA_NLDEV_CMD_RES_CQ_GET,
			RDMA_NLDEV_ATTR_RES_CQ, RDMA_NLDEV_ATTR_RES_CQ_ENTRY,
			RDMA_NLDEV_ATTR_RES_CQN },
	[RDMANL_QP] = { "qp", "lqpn", RDMA_NLDEV_CMD_RES_QP_GET,
			RDMA_NLDEV_ATTR_RES_QP, RDMA_NLDEV_ATTR_RES_QP_ENTRY,
			RDMA_NLDEV_ATTR_RES_LQPN },
	[RDMANL_MR] = { "mr", "mrn", RDMA_NLDEV_CMD_RES_MR_GET,
			RDMA_NLDEV_ATTR_RES_MR, RDMA_NLDEV_ATTR_RES_MR_ENTRY,
			RDMA_NLDEV_ATTR_RES_MRN },
	[RDMANL_SRQ] = { "srq", "srqn", RDMA_NLDEV_CMD_RES_SRQ_GET,
			 RDMA_NLDEV_ATTR_RES_SRQ, RDMA_NLDEV_ATTR_RES_SRQ_ENTRY,
			 RDMA_NLDEV_ATTR_RES_SRQN },
};

const char *rdmanl_kind_name(enum rdmanl_kind k)
{
	return k < RDMANL_KINDS ? kinds[k].name : "?";
}

const char *rdmanl_id_name(enum rdmanl_kind k)
{
	return k < RDMANL_KINDS ? kinds[k].id_name : "?";
}

/* ---- decoding ---- */

/* The attributes this file reads and the type each must have; the rest
 * (and those newer than our header) are skipped. */
static int attr_type(uint16_t type)
{
	switch (type) {
	case RDMA_NLDEV_ATTR_DEV_INDEX:
	case RDMA_NLDEV_ATTR_RES_CTXN:
	case RDMA_NLDEV_ATTR_RES_PDN:
	case RDMA_NLDEV_ATTR_RES_CQN:
	case RDMA_NLDEV_ATTR_RES_MRN:
	case RDMA_NLDEV_ATTR_RES_SRQN:
	case RDMA_NLDEV_ATTR_RES_LQPN:
	case RDMA_NLDEV_ATTR_RES_PID:
	case RDMA_NLDEV_ATTR_RES_LKEY:
	case RDMA_NLDEV_ATTR_RES_RKEY:
	case RDMA_NLDEV_ATTR_RES_CQE:
		return MNL_TYPE_U32;
	case RDMA_NLDEV_ATTR_RES_MRLEN:
		return MNL_TYPE_U64;
	case RDMA_NLDEV_ATTR_RES_TYPE:
	case RDMA_NLDEV_ATTR_RES_STATE:
		return MNL_TYPE_U8;
	case RDMA_NLDEV_ATTR_RES_KERN_NAME:
		return MNL_TYPE_NUL_STRING;
	case RDMA_NLDEV_ATTR_RES_CTX:
	case RDMA_NLDEV_ATTR_RES_PD:
	case RDMA_NLDEV_ATTR_RES_CQ:
	case RDMA_NLDEV_ATTR_RES_QP:
	case RDMA_NLDEV_ATTR_RES_MR:
	case RDMA_NLDEV_ATTR_RES_SRQ:
	case RDMA_NLDEV_ATTR_RES_CTX_ENTRY:
	case RDMA_NLDEV_ATTR_RES_PD_ENTRY:
	case RDMA_NLDEV_ATTR_RES_CQ_ENTRY:
	case RDMA_NLDEV_ATTR_RES_QP_ENTRY:
	case RDMA_NLDEV_ATTR_RES_MR_ENTRY:
	case RDMA_NLDEV_ATTR_RES_SRQ_ENTRY:
		return MNL_TYPE_NESTED;
	default:
		return -1;
	}
}

/* Collect the attributes we know into tb (the last of each wins, as in
 * the kernel's own parser); one of the wrong size fails the message. */
static int collect(const struct nlattr *a, void *ud)
{
	const struct nlattr **tb = ud;
	uint16_t type = mnl_attr_get_type(a);
	int t = type <= RDMA_NLDEV_ATTR_MAX ? attr_type(type) : -1;

	if (t < 0)
		return MNL_CB_OK;
	if (mnl_attr_validate(a, (enum mnl_attr_data_type)t) < 0) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	tb[type] = a;
	return MNL_CB_OK;
}

/* Do the attributes of nest fill it? mnl's walkers stop quietly at bytes
 * that are not a whole attribute: here they make the message malformed. */
static bool nest_whole(const struct nlattr *nest)
{
	const char *end = (const char *)mnl_attr_get_payload(nest) +
			  mnl_attr_get_payload_len(nest);
	const struct nlattr *a;

	mnl_attr_for_each_nested(a, nest)
		;
	return (const char *)a >= end;
}

struct parse {
	enum rdmanl_kind kind;
	uint32_t dev_index;
	rdmanl_res_fn fn;
	void *ud;
	int err; /* fn's, or the DONE message's */
};

static int entry(const struct nlattr *nest, struct parse *ps)
{
	const struct nlattr *tb[RDMA_NLDEV_ATTR_MAX + 1] = { 0 };
	struct rdmanl_res r = { .kind = ps->kind, .dev_index = ps->dev_index };
	uint16_t id = kinds[ps->kind].id;
	int e;

	if (!nest_whole(nest) || mnl_attr_parse_nested(nest, collect, tb) < 0)
		return -EBADMSG;
	if (!tb[id])
		return -EBADMSG; /* every entry has its number */
	r.id = mnl_attr_get_u32(tb[id]);
	if (tb[RDMA_NLDEV_ATTR_RES_CTXN]) {
		r.ctxn = mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_RES_CTXN]);
		r.has |= RDMANL_HAS_CTXN;
	}
	if (tb[RDMA_NLDEV_ATTR_RES_PDN]) {
		r.pdn = mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_RES_PDN]);
		r.has |= RDMANL_HAS_PDN;
	}
	if (tb[RDMA_NLDEV_ATTR_RES_PID]) {
		r.pid = mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_RES_PID]);
		r.has |= RDMANL_HAS_PID;
	}
	if (tb[RDMA_NLDEV_ATTR_RES_LKEY] && tb[RDMA_NLDEV_ATTR_RES_RKEY]) {
		r.lkey = mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_RES_LKEY]);
		r.rkey = mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_RES_RKEY]);
		r.has |= RDMANL_HAS_KEYS;
	}
	if (tb[RDMA_NLDEV_ATTR_RES_KERN_NAME])
		r.has |= RDMANL_HAS_KERN;
	if (tb[RDMA_NLDEV_ATTR_RES_MRLEN]) {
		r.mrlen = mnl_attr_get_u64(tb[RDMA_NLDEV_ATTR_RES_MRLEN]);
		r.has |= RDMANL_HAS_MRLEN;
	}
	if (tb[RDMA_NLDEV_ATTR_RES_CQE]) {
		r.cqe = mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_RES_CQE]);
		r.has |= RDMANL_HAS_CQE;
	}
	if (tb[RDMA_NLDEV_ATTR_RES_TYPE]) {
		r.type = mnl_attr_get_u8(tb[RDMA_NLDEV_ATTR_RES_TYPE]);
		r.has |= RDMANL_HAS_TYPE;
	}
	if (tb[RDMA_NLDEV_ATTR_RES_STATE]) {
		r.state = mnl_attr_get_u8(tb[RDMA_NLDEV_ATTR_RES_STATE]);
		r.has |= RDMANL_HAS_STATE;
	}
	e = ps->fn ? ps->fn(ps->ud, &r) : 0;
	return e < 0 ? e : 0;
}

static int on_data(const struct nlmsghdr *nlh, void *ud)
{
	const struct nlattr *tb[RDMA_NLDEV_ATTR_MAX + 1] = { 0 };
	struct parse *ps = ud;
	const struct nlattr *table, *a;

	if (nlh->nlmsg_type !=
	    RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, kinds[ps->kind].cmd)) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	if (mnl_attr_parse(nlh, 0, collect, tb) < 0) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	if (!tb[RDMA_NLDEV_ATTR_DEV_INDEX]) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	ps->dev_index = mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
	table = tb[kinds[ps->kind].table];
	if (!table)
		return MNL_CB_OK; /* a device with nothing of the kind */
	if (!nest_whole(table)) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	mnl_attr_for_each_nested(a, table) {
		int e;

		if (mnl_attr_get_type(a) != kinds[ps->kind].entry)
			continue;
		e = entry(a, ps);
		if (e < 0) {
			ps->err = e;
			errno = -e;
			return MNL_CB_ERROR;
		}
	}
	return MNL_CB_OK;
}

/* An error the kernel sent, as -errno: one that is no errno (say
 * INT_MIN, which cannot even be negated) is -EIO. */
static int kernel_err(int e)
{
	return e < 0 && e >= -4095 ? e : -EIO;
}

/* NLMSG_DONE carries the dump's result: negative if it failed midway. */
static int on_done(const struct nlmsghdr *nlh, void *ud)
{
	struct parse *ps = ud;
	int err;

	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(err))
		return MNL_CB_STOP;
	memcpy(&err, mnl_nlmsg_get_payload(nlh), sizeof(err));
	if (err < 0) {
		ps->err = kernel_err(err);
		errno = -ps->err;
		return MNL_CB_ERROR;
	}
	return MNL_CB_STOP;
}

static int on_error(const struct nlmsghdr *nlh, void *ud)
{
	const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
	struct parse *ps = ud;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*e))) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	if (e->error >= 0)
		return MNL_CB_STOP; /* an acknowledgement */
	ps->err = kernel_err(e->error);
	errno = -ps->err;
	return MNL_CB_ERROR;
}

int rdmanl_parse(const void *buf, size_t len, enum rdmanl_kind kind,
		 uint32_t seq, uint32_t portid, rdmanl_res_fn fn, void *ud)
{
	mnl_cb_t ctl[NLMSG_MIN_TYPE] = { 0 };
	struct parse ps = { .kind = kind, .fn = fn, .ud = ud };
	size_t off = 0;
	int r;

	if (kind >= RDMANL_KINDS)
		return -EINVAL;
	if (len > INT_MAX)
		return -EMSGSIZE;
	/* Every message must lie whole in the buffer before libmnl walks
	 * it: mnl_nlmsg_ok() casts nlmsg_len to int, so that a length with
	 * the top bit set passes for short and mnl_nlmsg_next() jumps far
	 * past the buffer (found by tests/fuzz/fuzz_rdmanl); and
	 * mnl_cb_run() stops quietly at bytes that are not a whole
	 * message, which here are an error. */
	while (off < len) {
		const struct nlmsghdr *h =
			(const void *)((const char *)buf + off);

		if (len - off < sizeof(*h) || h->nlmsg_len < sizeof(*h) ||
		    h->nlmsg_len > len - off)
			return -EBADMSG;
		off += MNL_ALIGN(h->nlmsg_len);
	}
	ctl[NLMSG_DONE] = on_done;
	ctl[NLMSG_ERROR] = on_error;
	errno = 0;
	r = mnl_cb_run2(buf, len, seq, portid, on_data, &ps, ctl,
			NLMSG_MIN_TYPE);
	if (r == MNL_CB_ERROR) {
		if (ps.err)
			return ps.err;
		/* NLM_F_DUMP_INTR: the list changed while it was dumped. */
		if (errno == EINTR)
			return -EINTR;
		/* A stray sequence number or port: not ours to read. */
		return errno == ESRCH || errno == EPROTO || !errno ? -EBADMSG
								   : -errno;
	}
	return r == MNL_CB_STOP ? 0 : 1;
}

size_t rdmanl_request(void *buf, enum rdmanl_kind kind, uint32_t dev_index,
		      uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);

	nlh->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, kinds[kind].cmd);
	/* No NLM_F_ACK: a dump ends with NLMSG_DONE, and nothing may stay
	 * behind in the socket for the next one. */
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq;
	mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_DEV_INDEX, dev_index);
	return nlh->nlmsg_len;
}

/* ---- the socket ---- */

struct rdmanl {
	struct mnl_socket *sock;
	uint32_t portid, seq;
	enum rdmanl_kind kind;
	bool blocking;
	char *buf;
};

int rdmanl_open(bool blocking, struct rdmanl **out)
{
	struct rdmanl *nl = calloc(1, sizeof(*nl));
	struct timespec t;

	if (!nl)
		return -ENOMEM;
	nl->buf = malloc(RDMANL_BUF);
	nl->sock = mnl_socket_open2(NETLINK_RDMA,
				    SOCK_CLOEXEC | (blocking ? 0 : SOCK_NONBLOCK));
	if (!nl->buf || !nl->sock ||
	    mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		int err = nl->buf ? errno : ENOMEM;

		rdmanl_free(nl);
		return -(err ? err : EIO);
	}
	if (blocking) {
		/* The kernel answers at once; never wait forever on it. */
		struct timeval tv = { .tv_sec = 2 };

		setsockopt(mnl_socket_get_fd(nl->sock), SOL_SOCKET,
			   SO_RCVTIMEO, &tv, sizeof(tv));
	}
	nl->blocking = blocking;
	nl->portid = mnl_socket_get_portid(nl->sock);
	clock_gettime(CLOCK_MONOTONIC, &t);
	nl->seq = (uint32_t)t.tv_nsec | 1;
	*out = nl;
	return 0;
}

struct rdmanl *rdmanl_free(struct rdmanl *nl)
{
	if (!nl)
		return NULL;
	if (nl->sock)
		mnl_socket_close(nl->sock);
	free(nl->buf);
	free(nl);
	return NULL;
}

int rdmanl_fd(const struct rdmanl *nl)
{
	return mnl_socket_get_fd(nl->sock);
}

int rdmanl_start(struct rdmanl *nl, enum rdmanl_kind kind, uint32_t dev_index)
{
	char req[RDMANL_REQUEST_SIZE] __attribute__((aligned(8)));
	size_t len;

	if (kind >= RDMANL_KINDS)
		return -EINVAL;
	nl->kind = kind;
	nl->seq++;
	len = rdmanl_request(req, kind, dev_index, nl->seq);
	if (mnl_socket_sendto(nl->sock, req, len) < 0)
		return -errno;
	return 0;
}

int rdmanl_read(struct rdmanl *nl, unsigned int max_chunks, rdmanl_res_fn fn,
		void *ud)
{
	int fd = mnl_socket_get_fd(nl->sock);

	for (unsigned int i = 0; i < max_chunks; i++) {
		struct iovec iov = { nl->buf, RDMANL_BUF };
		struct sockaddr_nl sa;
		struct msghdr mh = { .msg_name = &sa, .msg_namelen = sizeof(sa),
				     .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n = recvmsg(fd, &mh, 0);
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return nl->blocking ? -ETIMEDOUT : 1; /* SO_RCVTIMEO */
		if (n < 0)
			return -errno;
		if (mh.msg_flags & MSG_TRUNC)
			return -EMSGSIZE;
		if (sa.nl_pid != 0)
			continue; /* not from the kernel */
		r = rdmanl_parse(nl->buf, (size_t)n, nl->kind, nl->seq,
				 nl->portid, fn, ud);
		if (r <= 0)
			return r;
	}
	return 1;
}

int rdmanl_dump(enum rdmanl_kind kind, uint32_t dev_index, rdmanl_res_fn fn,
		void *ud)
{
	struct rdmanl *nl = NULL;
	int r = rdmanl_open(true, &nl);

	if (r < 0)
		return r;
	r = rdmanl_start(nl, kind, dev_index);
	while (r >= 0) {
		r = rdmanl_read(nl, 16, fn, ud);
		if (r == 0)
			break;
	}
	rdmanl_free(nl);
	return r;
}
