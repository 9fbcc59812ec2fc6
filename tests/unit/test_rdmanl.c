// SPDX-License-Identifier: MIT
/*
 * daemon/verbs/rdmanl.c: decoding RDMA netlink resource dumps. The
 * messages are built here the way the kernel builds them (nldev.c: a
 * message per device, attributes DEV_INDEX, DEV_NAME, then a table nest
 * of entry nests), then broken on purpose: every malformed one must be
 * refused, never read past. The real kernel's answers are checked in
 * the VM (tests/integration/test_orphans.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <infiniband/verbs.h>
#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>

#include "rdmanl.h"
#include "util.h"

#define SEQ 77
#define PORT 4242

struct buf {
	char b[8192] __attribute__((aligned(8)));
	size_t len;
};

struct got {
	struct rdmanl_res r[16];
	size_t n;
	int fail; /* return this from the callback */
};

static int collect(void *ud, const struct rdmanl_res *r)
{
	struct got *g = ud;

	if (g->fail)
		return g->fail;
	assert_true(g->n < ARRAY_SIZE(g->r));
	g->r[g->n++] = *r;
	return 0;
}

static struct nlmsghdr *msg(struct buf *b, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(b->b + b->len);

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	nlh->nlmsg_seq = SEQ;
	nlh->nlmsg_pid = PORT;
	return nlh;
}

static void end(struct buf *b, struct nlmsghdr *nlh)
{
	b->len += nlh->nlmsg_len;
}

static uint16_t nldev(uint16_t cmd)
{
	return RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd);
}

/* A QP dump message of device 3: a user QP and a kernel one. */
static struct nlmsghdr *qp_message(struct buf *b)
{
	struct nlmsghdr *nlh = msg(b, nldev(RDMA_NLDEV_CMD_RES_QP_GET),
				   NLM_F_MULTI);
	struct nlattr *table, *e;

	mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_DEV_INDEX, 3);
	mnl_attr_put_strz(nlh, RDMA_NLDEV_ATTR_DEV_NAME, "rxe0");
	table = mnl_attr_nest_start(nlh, RDMA_NLDEV_ATTR_RES_QP);
	e = mnl_attr_nest_start(nlh, RDMA_NLDEV_ATTR_RES_QP_ENTRY);
	mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
	mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_RES_LQPN, 17);
	mnl_attr_put_u8(nlh, RDMA_NLDEV_ATTR_RES_TYPE, 2);
	mnl_attr_put_u8(nlh, RDMA_NLDEV_ATTR_RES_STATE, 6); /* IB_QPS_ERR */
	mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_RES_PDN, 5);
	mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_RES_PID, 1234);
	/* An attribute newer than our header: skipped. */
	mnl_attr_put_u16(nlh, RDMA_NLDEV_ATTR_MAX + 7, 9);
	mnl_attr_nest_end(nlh, e);
	e = mnl_attr_nest_start(nlh, RDMA_NLDEV_ATTR_RES_QP_ENTRY);
	mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_RES_LQPN, 1);
	mnl_attr_put_strz(nlh, RDMA_NLDEV_ATTR_RES_KERN_NAME, "ib_core");
	mnl_attr_nest_end(nlh, e);
	mnl_attr_nest_end(nlh, table);
	return nlh;
}

static void done(struct buf *b, int err)
{
	struct nlmsghdr *nlh = msg(b, NLMSG_DONE, NLM_F_MULTI);
	int *p = mnl_nlmsg_put_extra_header(nlh, sizeof(int));

	*p = err;
	end(b, nlh);
}

static int parse(struct buf *b, enum rdmanl_kind kind, struct got *g)
{
	return rdmanl_parse(b->b, b->len, kind, SEQ, PORT, collect, g);
}

static void qp_dump_decodes_every_entry(void **state)
{
	struct buf b = { .len = 0 };
	struct got g = { .n = 0 };

	(void)state;
	end(&b, qp_message(&b));
	assert_int_equal(parse(&b, RDMANL_QP, &g), 1); /* more to come */
	assert_int_equal(g.n, 2);
	assert_int_equal(g.r[0].kind, RDMANL_QP);
	assert_int_equal(g.r[0].dev_index, 3);
	assert_int_equal(g.r[0].id, 17);
	assert_int_equal(g.r[0].pdn, 5);
	assert_int_equal(g.r[0].pid, 1234);
	assert_int_equal(g.r[0].type, 2);
	assert_int_equal(g.r[0].state, IBV_QPS_ERR);
	assert_int_equal(g.r[0].has, RDMANL_HAS_PDN | RDMANL_HAS_PID |
					     RDMANL_HAS_TYPE |
					     RDMANL_HAS_STATE);
	assert_int_equal(g.r[1].id, 1);
	assert_int_equal(g.r[1].has, RDMANL_HAS_KERN);

	g.n = 0;
	done(&b, 0);
	assert_int_equal(parse(&b, RDMANL_QP, &g), 0); /* and done */
	assert_int_equal(g.n, 2);
}

/* Each kind's number, and what joins it to its context. */
static void every_kind_has_its_number(void **state)
{
	static const struct {
		enum rdmanl_kind kind;
		uint16_t cmd, table, entry, id;
	} t[] = {
		{ RDMANL_CTX, RDMA_NLDEV_CMD_RES_CTX_GET, RDMA_NLDEV_ATTR_RES_CTX,
		  RDMA_NLDEV_ATTR_RES_CTX_ENTRY, RDMA_NLDEV_ATTR_RES_CTXN },
		{ RDMANL_PD, RDMA_NLDEV_CMD_RES_PD_GET, RDMA_NLDEV_ATTR_RES_PD,
		  RDMA_NLDEV_ATTR_RES_PD_ENTRY, RDMA_NLDEV_ATTR_RES_PDN },
		{ RDMANL_CQ, RDMA_NLDEV_CMD_RES_CQ_GET, RDMA_NLDEV_ATTR_RES_CQ,
		  RDMA_NLDEV_ATTR_RES_CQ_ENTRY, RDMA_NLDEV_ATTR_RES_CQN },
		{ RDMANL_MR, RDMA_NLDEV_CMD_RES_MR_GET, RDMA_NLDEV_ATTR_RES_MR,
		  RDMA_NLDEV_ATTR_RES_MR_ENTRY, RDMA_NLDEV_ATTR_RES_MRN },
		{ RDMANL_SRQ, RDMA_NLDEV_CMD_RES_SRQ_GET,
		  RDMA_NLDEV_ATTR_RES_SRQ, RDMA_NLDEV_ATTR_RES_SRQ_ENTRY,
		  RDMA_NLDEV_ATTR_RES_SRQN },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		struct buf b = { .len = 0 };
		struct got g = { .n = 0 };
		struct nlmsghdr *nlh = msg(&b, nldev(t[i].cmd), NLM_F_MULTI);
		struct nlattr *table, *e;

		mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_DEV_INDEX, 1);
		table = mnl_attr_nest_start(nlh, t[i].table);
		e = mnl_attr_nest_start(nlh, t[i].entry);
		mnl_attr_put_u32(nlh, t[i].id, 40 + (uint32_t)i);
		if (t[i].kind != RDMANL_PD)
			mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_RES_PDN, 6);
		if (t[i].kind != RDMANL_CTX)
			mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_RES_CTXN, 2);
		if (t[i].kind == RDMANL_MR) {
			mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_RES_LKEY, 0x10);
			mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_RES_RKEY, 0x11);
			mnl_attr_put_u64(nlh, RDMA_NLDEV_ATTR_RES_MRLEN, 4096);
		}
		if (t[i].kind == RDMANL_CQ)
			mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_RES_CQE, 255);
		mnl_attr_nest_end(nlh, e);
		mnl_attr_nest_end(nlh, table);
		end(&b, nlh);
		done(&b, 0);
		assert_int_equal(parse(&b, t[i].kind, &g), 0);
		assert_int_equal(g.n, 1);
		assert_int_equal(g.r[0].kind, t[i].kind);
		assert_int_equal(g.r[0].id, 40 + i);
		/* A context's own number is its id (and ctxn too). */
		assert_int_equal(g.r[0].ctxn, t[i].kind == RDMANL_CTX ? 40 : 2);
		assert_true(g.r[0].has & RDMANL_HAS_CTXN);
		if (t[i].kind == RDMANL_MR) {
			assert_int_equal(g.r[0].lkey, 0x10);
			assert_int_equal(g.r[0].rkey, 0x11);
			assert_int_equal(g.r[0].mrlen, 4096);
			assert_true(g.r[0].has & RDMANL_HAS_KEYS);
		}
		if (t[i].kind == RDMANL_CQ)
			assert_int_equal(g.r[0].cqe, 255);
	}
	assert_string_equal(rdmanl_id_name(RDMANL_QP), "lqpn");
	assert_string_equal(rdmanl_kind_name(RDMANL_SRQ), "srq");
}

/* A device with nothing of the kind: a message without the table. */
static void empty_device(void **state)
{
	struct buf b = { .len = 0 };
	struct got g = { .n = 0 };
	struct nlmsghdr *nlh = msg(&b, nldev(RDMA_NLDEV_CMD_RES_PD_GET),
				   NLM_F_MULTI);

	(void)state;
	mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_DEV_INDEX, 1);
	end(&b, nlh);
	done(&b, 0);
	assert_int_equal(parse(&b, RDMANL_PD, &g), 0);
	assert_int_equal(g.n, 0);
	/* Nothing at all is not the end of a dump. */
	assert_int_equal(rdmanl_parse(b.b, 0, RDMANL_PD, SEQ, PORT, collect,
				      &g),
			 1);
}

static void kernel_errors_come_back(void **state)
{
	struct buf b = { .len = 0 };
	struct got g = { .n = 0 };
	struct nlmsghdr *nlh = msg(&b, NLMSG_ERROR, 0);
	struct nlmsgerr *e = mnl_nlmsg_put_extra_header(nlh, sizeof(*e));

	(void)state;
	/* A kernel without SRQ dumps. */
	e->error = -EOPNOTSUPP;
	end(&b, nlh);
	assert_int_equal(parse(&b, RDMANL_SRQ, &g), -EOPNOTSUPP);

	/* A dump that failed midway says so in its DONE. */
	b.len = 0;
	end(&b, qp_message(&b));
	done(&b, -EMSGSIZE);
	assert_int_equal(parse(&b, RDMANL_QP, &g), -EMSGSIZE);

	/* Not an errno at all (and not one to negate): EIO. */
	b.len = 0;
	done(&b, INT32_MIN);
	assert_int_equal(parse(&b, RDMANL_QP, &g), -EIO);

	/* The list changed while it was dumped: try again. */
	b.len = 0;
	nlh = qp_message(&b);
	nlh->nlmsg_flags |= NLM_F_DUMP_INTR;
	end(&b, nlh);
	assert_int_equal(parse(&b, RDMANL_QP, &g), -EINTR);

	/* The callback's error stops the parse. */
	b.len = 0;
	end(&b, qp_message(&b));
	g.fail = -ENOMEM;
	assert_int_equal(parse(&b, RDMANL_QP, &g), -ENOMEM);
}

/* Break a QP message in one way; it must be refused as malformed. */
static void assert_refused(void (*breakit)(struct buf *b,
					   struct nlmsghdr *nlh))
{
	struct buf b = { .len = 0 };
	struct got g = { .n = 0 };
	struct nlmsghdr *nlh = qp_message(&b);

	breakit(&b, nlh);
	assert_int_equal(parse(&b, RDMANL_QP, &g), -EBADMSG);
}

static struct nlattr *find(struct nlmsghdr *nlh, uint16_t type)
{
	struct nlattr *a;

	mnl_attr_for_each(a, nlh, 0)
		if (mnl_attr_get_type(a) == type)
			return a;
	return NULL;
}

static struct nlattr *first_entry(struct nlmsghdr *nlh)
{
	return mnl_attr_get_payload(find(nlh, RDMA_NLDEV_ATTR_RES_QP));
}

static void short_pid(struct buf *b, struct nlmsghdr *nlh)
{
	struct nlattr *e = first_entry(nlh), *a;

	mnl_attr_for_each_nested(a, e)
		if (mnl_attr_get_type(a) == RDMA_NLDEV_ATTR_RES_PID)
			a->nla_len = 6; /* a u16 where a u32 belongs */
	end(b, nlh);
}

static void no_number(struct buf *b, struct nlmsghdr *nlh)
{
	struct nlattr *e = first_entry(nlh), *a;

	mnl_attr_for_each_nested(a, e)
		if (mnl_attr_get_type(a) == RDMA_NLDEV_ATTR_RES_LQPN)
			a->nla_type = RDMA_NLDEV_ATTR_MAX + 9;
	end(b, nlh);
}

static void entry_past_its_table(struct buf *b, struct nlmsghdr *nlh)
{
	first_entry(nlh)->nla_len += 64;
	end(b, nlh);
}

static void table_cut_short(struct buf *b, struct nlmsghdr *nlh)
{
	/* The table ends inside its second entry. */
	find(nlh, RDMA_NLDEV_ATTR_RES_QP)->nla_len -= 6;
	end(b, nlh);
}

static void no_device(struct buf *b, struct nlmsghdr *nlh)
{
	find(nlh, RDMA_NLDEV_ATTR_DEV_INDEX)->nla_type =
		RDMA_NLDEV_ATTR_MAX + 3;
	end(b, nlh);
}

static void another_command(struct buf *b, struct nlmsghdr *nlh)
{
	nlh->nlmsg_type = nldev(RDMA_NLDEV_CMD_RES_MR_GET);
	end(b, nlh);
}

static void cut_message(struct buf *b, struct nlmsghdr *nlh)
{
	end(b, nlh);
	b->len -= 10; /* the receive cut the last message */
}

static void message_longer_than_data(struct buf *b, struct nlmsghdr *nlh)
{
	end(b, nlh);
	nlh->nlmsg_len += 400;
}

/* A length with the top bit set must not pass for a short one. */
static void huge_length(struct buf *b, struct nlmsghdr *nlh)
{
	end(b, nlh);
	nlh->nlmsg_len = 0xdcdcdc50;
}

static void stray_sequence(struct buf *b, struct nlmsghdr *nlh)
{
	nlh->nlmsg_seq = SEQ + 1;
	end(b, nlh);
}

static void short_error(struct buf *b, struct nlmsghdr *nlh)
{
	(void)nlh;
	b->len = 0;
	nlh = msg(b, NLMSG_ERROR, 0);
	end(b, nlh); /* no struct nlmsgerr */
}

static void malformed_messages_are_refused(void **state)
{
	(void)state;
	assert_refused(short_pid);
	assert_refused(no_number);
	assert_refused(entry_past_its_table);
	assert_refused(table_cut_short);
	assert_refused(no_device);
	assert_refused(another_command);
	assert_refused(cut_message);
	assert_refused(message_longer_than_data);
	assert_refused(huge_length);
	assert_refused(stray_sequence);
	assert_refused(short_error);
}

static void request_asks_for_one_device(void **state)
{
	char b[RDMANL_REQUEST_SIZE] __attribute__((aligned(8)));
	size_t len = rdmanl_request(b, RDMANL_CQ, 7, 99);
	struct nlmsghdr *nlh = (struct nlmsghdr *)b;
	struct nlattr *a;

	(void)state;
	assert_int_equal(len, nlh->nlmsg_len);
	assert_true(len <= sizeof(b));
	assert_int_equal(nlh->nlmsg_type,
			 (RDMA_NL_NLDEV << 10) + RDMA_NLDEV_CMD_RES_CQ_GET);
	assert_int_equal(nlh->nlmsg_flags, NLM_F_REQUEST | NLM_F_DUMP);
	assert_int_equal(nlh->nlmsg_seq, 99);
	a = find(nlh, RDMA_NLDEV_ATTR_DEV_INDEX);
	assert_non_null(a);
	assert_int_equal(mnl_attr_get_u32(a), 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(qp_dump_decodes_every_entry),
		cmocka_unit_test(every_kind_has_its_number),
		cmocka_unit_test(empty_device),
		cmocka_unit_test(kernel_errors_come_back),
		cmocka_unit_test(malformed_messages_are_refused),
		cmocka_unit_test(request_asks_for_one_device),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
