// SPDX-License-Identifier: MIT
/*
 * loopback: drives qp_modify() and selftest_run() on a real device, for
 * tests/integration/test_qpstate_selftest.py. Two QPs on one device are
 * connected to each other (on rxe, traffic between two devices does not
 * flow; within one device it does, with the semantics of a remote peer).
 *
 *   loopback [-d DEV] [-g GID_INDEX] [--shared-cq] [--zero-based]
 *            [--stray] [--repeat N] [--mtu BYTES] MODE
 *
 * MODE:
 *   selftest  connect an RC pair, run selftest_run (N times)
 *   precond   selftest_run where a precondition fails, one case each
 *   ud        a UD pair to RTS, then one UD send between them
 *   hold      connect an RC pair, print it, wait for stdin to close
 *   recover   move a connected pair back and forth (RTS->INIT, ERR->RTS)
 *   badpath   paths the device must refuse, and where qp_modify stops
 *   failure   transfers that fail, and selftest_run's report of them
 *
 * Prints one JSON document on stdout. Exit status: 0 when the mode's
 * expectation held, 1 when not, 2 when the setup failed.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "qpstate.h"
#include "selftest.h"
#include "util.h"

#define BUF_LEN (1u << 20)
#define TIMEOUT_MS 10000
#define STRAY_WR_ID 0xdeadbeefULL

struct opts {
	const char *dev;
	int gid_index;
	bool shared_cq, zero_based, stray;
	int repeat, mtu;
};

struct ctx {
	const struct opts *o;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t *buf;
	struct ibv_mr *mr;
	struct ibv_cq *cq[2];
	char gid[INET6_ADDRSTRLEN];
};

_printf_(1, 2) __attribute__((noreturn)) static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "loopback: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void emit(json_t *j)
{
	if (json_dumpf(j, stdout, JSON_SORT_KEYS) || fputc('\n', stdout) < 0 ||
	    fflush(stdout))
		die("cannot write the result");
	json_decref(j);
}

static const char *state_str(enum ibv_qp_state s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS",
					 "SQD",	  "SQE",  "ERR" };

	return (unsigned int)s < ARRAY_SIZE(n) ? n[s] : "UNKNOWN";
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init))
		die("ibv_query_qp on qpn %u failed", qp->qp_num);
	return attr.qp_state;
}

static void ctx_open(struct ctx *c, const struct opts *o)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	unsigned int access = IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	union ibv_gid gid;
	int fd;

	memset(c, 0, sizeof(*c));
	c->o = o;
	for (int i = 0; list && list[i]; i++)
		if (streq(ibv_get_device_name(list[i]), o->dev))
			c->ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!c->ctx)
		die("cannot open device %s", o->dev);
	if (ibv_query_gid(c->ctx, 1, o->gid_index, &gid))
		die("ibv_query_gid %s port 1 index %d failed", o->dev,
		    o->gid_index);
	if (!inet_ntop(AF_INET6, gid.raw, c->gid, sizeof(c->gid)))
		die("inet_ntop");
	c->pd = ibv_alloc_pd(c->ctx);
	if (!c->pd)
		die("ibv_alloc_pd failed");

	/* Backed by a memfd, as the daemon's "memfd" memory is. */
	fd = memfd_create("loopback", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, BUF_LEN))
		die("memfd: %s", strerror(errno));
	c->buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (c->buf == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	if (o->zero_based)
		c->mr = ibv_reg_mr_iova(c->pd, c->buf, BUF_LEN, 0, access);
	else
		c->mr = ibv_reg_mr(c->pd, c->buf, BUF_LEN, access);
	if (!c->mr)
		die("ibv_reg_mr: %s", strerror(errno));

	for (int i = 0; i < (o->shared_cq ? 1 : 2); i++) {
		c->cq[i] = ibv_create_cq(c->ctx, 256, NULL, NULL, 0);
		if (!c->cq[i])
			die("ibv_create_cq failed");
	}
	if (o->shared_cq)
		c->cq[1] = c->cq[0];
}

/* QP number i uses CQ i % 2: with two CQs, a and b each have their own. */
static struct ibv_qp *qp_new(struct ctx *c, enum ibv_qp_type type, int i)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = c->cq[i % 2],
		.recv_cq = c->cq[i % 2],
		.qp_type = type,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(c->pd, &ia);

	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	return qp;
}

/* The path as a config would say it, through qp_path_from_json(). */
static void path_for(const struct ctx *c, uint32_t dqpn, json_t *access,
		     json_t *extra, struct qp_path *p)
{
	char err[256];
	json_t *j;

	qp_path_init(p);
	if (!access)
		access = json_array();
	j = json_pack("{s:s, s:i, s:I, s:i, s:o}", "dgid", c->gid,
		      "sgid_index", c->o->gid_index, "dqpn", (json_int_t)dqpn,
		      "mtu", c->o->mtu, "access", access);
	if (!j)
		die("json_pack");
	if (extra && json_object_update(j, extra))
		die("json_object_update");
	if (qp_path_from_json(j, p, err, sizeof(err)))
		die("qp_path_from_json: %s", err);
	json_decref(j);
	json_decref(extra);
}

static json_t *names(const char *name)
{
	return name ? json_pack("[s]", name) : json_array();
}

/* Connects q to the peer qpn: returns qp_modify()'s result. */
static int connect_ex(struct ctx *c, struct ibv_qp *q, uint32_t peer,
		      const char *access, json_t *extra,
		      enum ibv_qp_state target, const char **failed_at)
{
	struct qp_path p;

	path_for(c, peer, names(access), extra, &p);
	return qp_modify(q, target, &p, failed_at);
}

static int connect_qp(struct ctx *c, struct ibv_qp *q, uint32_t peer,
		      const char *access, enum ibv_qp_state target,
		      const char **failed_at)
{
	struct qp_path p;

	path_for(c, peer, names(access), NULL, &p);
	return qp_modify(q, target, &p, failed_at);
}

static void connect_pair(struct ctx *c, struct ibv_qp *a, struct ibv_qp *b,
			 const char *access_a, const char *access_b,
			 enum ibv_qp_state target)
{
	const char *at;
	int r;

	r = connect_qp(c, a, b->qp_num, access_a, target, &at);
	if (!r)
		r = connect_qp(c, b, a->qp_num, access_b, target, &at);
	if (r)
		die("qp_modify to %s failed at %s: %s", state_str(target),
		    at ? at : "?", strerror(-r));
}

static struct selftest_mr st_mr(const struct ctx *c)
{
	return (struct selftest_mr){
		.addr = c->buf,
		.iova = c->o->zero_based ? 0 : (uint64_t)(uintptr_t)c->buf,
		.length = BUF_LEN,
		.lkey = c->mr->lkey,
		.rkey = c->mr->rkey,
		.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ,
	};
}

static struct selftest_end st_end(struct ibv_qp *qp)
{
	return (struct selftest_end){
		.qp = qp, .send_cq = qp->send_cq, .recv_cq = qp->recv_cq
	};
}

static json_t *run_json(int rc, json_t *report)
{
	return json_pack("{s:i, s:o}", "rc", rc, "report",
			 report ? report : json_null());
}

static json_t *qp_json(struct ibv_qp *qp, uint32_t peer)
{
	return json_pack("{s:i, s:i, s:s}", "qp_num", (int)qp->qp_num,
			 "peer", (int)peer, "state", state_str(qp_state(qp)));
}

/* A signaled write whose completion nobody but selftest_run will poll. */
static void post_stray(struct ctx *c, struct ibv_qp *qp)
{
	struct ibv_sge sge = {
		.addr = c->o->zero_based ? 0 : (uint64_t)(uintptr_t)c->buf,
		.length = 64,
		.lkey = c->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = STRAY_WR_ID,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = sge.addr + BUF_LEN - 64,
			     .rkey = c->mr->rkey },
	}, *bad;

	if (ibv_post_send(qp, &wr, &bad))
		die("posting the stray write failed");
}

static int mode_selftest(struct ctx *c)
{
	struct ibv_qp *a = qp_new(c, IBV_QPT_RC, 0);
	struct ibv_qp *b = qp_new(c, IBV_QPT_RC, 1);
	struct selftest_end ea = st_end(a), eb = st_end(b);
	struct selftest_mr mr = st_mr(c);
	json_t *runs = json_array();
	int status = 0;

	connect_pair(c, a, b, "remote_write", "remote_write", IBV_QPS_RTS);
	if (c->o->stray)
		post_stray(c, a);
	for (int i = 0; i < c->o->repeat; i++) {
		json_t *report;
		int rc = selftest_run(&ea, &eb, &mr, TIMEOUT_MS, &report);

		json_array_append_new(runs, run_json(rc, report));
		if (rc)
			status = 1;
	}
	emit(json_pack("{s:o, s:o, s:o, s:I}", "runs", runs, "a",
		       qp_json(a, b->qp_num), "b", qp_json(b, a->qp_num),
		       "stray_wr_id", (json_int_t)STRAY_WR_ID));
	return status;
}

static json_t *precond_case(const char *name, struct ibv_qp *a,
			    struct ibv_qp *b, const struct selftest_mr *mr,
			    int *status)
{
	struct selftest_end ea = st_end(a), eb = st_end(b);
	json_t *report;
	int rc = selftest_run(&ea, &eb, mr, TIMEOUT_MS, &report);

	if (rc != -EINVAL)
		*status = 1;
	return json_pack("{s:s, s:i, s:o}", "case", name, "rc", rc, "report",
			 report ? report : json_null());
}

static int mode_precond(struct ctx *c)
{
	struct selftest_mr mr = st_mr(c), mr_ro = mr;
	json_t *cases = json_array();
	struct ibv_qp *a, *b, *x;
	int status = 0;

	/* Both left in INIT. */
	a = qp_new(c, IBV_QPT_RC, 0);
	b = qp_new(c, IBV_QPT_RC, 1);
	connect_pair(c, a, b, "remote_write", "remote_write", IBV_QPS_INIT);
	json_array_append_new(cases, precond_case("init", a, b, &mr, &status));

	/* Connected, but the MR lacks remote_write. */
	connect_pair(c, a, b, "remote_write", "remote_write", IBV_QPS_RTS);
	mr_ro.access = IBV_ACCESS_LOCAL_WRITE;
	json_array_append_new(cases, precond_case("mr_access", a, b, &mr_ro,
						  &status));

	/* a connected to a third QP, not to b (which still points at a). */
	x = qp_new(c, IBV_QPT_RC, 0);
	if (connect_qp(c, a, x->qp_num, NULL, IBV_QPS_RESET, NULL))
		die("resetting a failed");
	connect_pair(c, a, x, "remote_write", "remote_write", IBV_QPS_RTS);
	json_array_append_new(cases, precond_case("not_connected", a, b, &mr,
						  &status));

	/* b, the responder, without remote_write. */
	a = qp_new(c, IBV_QPT_RC, 0);
	b = qp_new(c, IBV_QPT_RC, 1);
	connect_pair(c, a, b, "remote_write", NULL, IBV_QPS_RTS);
	json_array_append_new(cases, precond_case("no_remote_write", a, b,
						  &mr, &status));

	/* Two UD QPs. */
	a = qp_new(c, IBV_QPT_UD, 0);
	b = qp_new(c, IBV_QPT_UD, 1);
	connect_pair(c, a, b, NULL, NULL, IBV_QPS_RTS);
	json_array_append_new(cases, precond_case("ud", a, b, &mr, &status));

	emit(json_pack("{s:o}", "cases", cases));
	return status;
}

/* Waits for wr_ids 1 (receive) and 2 (send), from whichever CQ. */
static void poll_two(struct ibv_cq *scq, struct ibv_cq *rcq, int rc[2],
		     struct ibv_wc *recv_wc)
{
	time_t end = time(NULL) + TIMEOUT_MS / 1000;
	struct ibv_cq *cqs[2] = { scq, rcq };
	bool done[2] = { false, false };

	rc[0] = rc[1] = -ETIMEDOUT;
	while ((!done[0] || !done[1]) && time(NULL) <= end) {
		for (int i = 0; i < 2; i++) {
			struct ibv_wc wc;
			int n = ibv_poll_cq(cqs[i], 1, &wc);

			if (n <= 0 || (wc.wr_id != 1 && wc.wr_id != 2))
				continue;
			done[wc.wr_id - 1] = true;
			rc[wc.wr_id - 1] =
				wc.status == IBV_WC_SUCCESS ? 0 : -EIO;
			if (wc.wr_id == 1)
				*recv_wc = wc;
		}
	}
}

static int mode_ud(struct ctx *c)
{
	struct ibv_qp *a = qp_new(c, IBV_QPT_UD, 0);
	struct ibv_qp *b = qp_new(c, IBV_QPT_UD, 1);
	const size_t grh = 40, len = 64;
	struct qp_path p;
	struct ibv_ah_attr ah_attr;
	struct ibv_ah *ah;
	struct ibv_wc wc = { .wr_id = 0 };
	uint64_t base = c->o->zero_based ? 0 : (uint64_t)(uintptr_t)c->buf;
	struct ibv_sge rsge = { base + 4096, (uint32_t)(grh + len),
				c->mr->lkey };
	struct ibv_sge ssge = { base, (uint32_t)len, c->mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 },
			   *bad_r;
	struct ibv_send_wr swr = {
		.wr_id = 2,
		.sg_list = &ssge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad_s;
	const char *at;
	int rc[2];
	bool same;

	path_for(c, 0, NULL, NULL, &p);
	if (qp_modify(a, IBV_QPS_RTS, &p, &at) ||
	    qp_modify(b, IBV_QPS_RTS, &p, &at))
		die("UD qp_modify failed at %s", at ? at : "?");

	ah_attr = (struct ibv_ah_attr){
		.is_global = 1,
		.port_num = p.port_num,
		.grh = { .dgid = p.dgid, .sgid_index = p.sgid_index,
			 .hop_limit = p.hop_limit },
	};
	ah = ibv_create_ah(c->pd, &ah_attr);
	if (!ah)
		die("ibv_create_ah: %s", strerror(errno));
	for (size_t i = 0; i < len; i++) {
		c->buf[i] = (uint8_t)(i * 7 + 1);
		c->buf[4096 + grh + i] = 0;
	}
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qpn = b->qp_num;
	swr.wr.ud.remote_qkey = p.qkey;
	if (ibv_post_recv(b, &rwr, &bad_r) || ibv_post_send(a, &swr, &bad_s))
		die("UD post failed");
	poll_two(a->send_cq, b->recv_cq, rc, &wc);
	same = !rc[0] && wc.byte_len == grh + len &&
	       !memcmp(c->buf, c->buf + 4096 + grh, len);
	emit(json_pack("{s:o, s:o, s:{s:i, s:i, s:b, s:I}}", "a",
		       qp_json(a, 0), "b", qp_json(b, 0), "send", "send_rc",
		       rc[1], "recv_rc", rc[0], "data_ok", same, "qkey",
		       (json_int_t)p.qkey));
	ibv_destroy_ah(ah);
	return !(qp_state(a) == IBV_QPS_RTS && qp_state(b) == IBV_QPS_RTS &&
		 !rc[1] && same);
}

static int mode_hold(struct ctx *c)
{
	struct ibv_qp *a = qp_new(c, IBV_QPT_RC, 0);
	struct ibv_qp *b = qp_new(c, IBV_QPT_RC, 1);
	struct qp_path p;
	char buf[256];

	connect_pair(c, a, b, "remote_write", "remote_write", IBV_QPS_RTS);
	path_for(c, b->qp_num, names("remote_write"), NULL, &p);
	emit(json_pack("{s:i, s:o, s:o, s:o}", "pid", (int)getpid(), "a",
		       qp_json(a, b->qp_num), "b", qp_json(b, a->qp_num),
		       "path_a", qp_path_json(&p)));
	while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
		;
	return 0;
}

static json_t *step_json(const char *what, struct ibv_qp *qp, int rc,
			 const char *at)
{
	return json_pack("{s:s, s:i, s:s?, s:s}", "step", what, "rc", rc,
			 "failed_at", at, "state", state_str(qp_state(qp)));
}

static int mode_recover(struct ctx *c)
{
	struct ibv_qp *a = qp_new(c, IBV_QPT_RC, 0);
	struct ibv_qp *b = qp_new(c, IBV_QPT_RC, 1);
	struct selftest_end ea = st_end(a), eb = st_end(b);
	struct selftest_mr mr = st_mr(c);
	struct ibv_qp_attr err_attr = { .qp_state = IBV_QPS_ERR };
	json_t *steps = json_array(), *before, *after;
	const char *at;
	int rc, rc_before, rc_after;

	connect_pair(c, a, b, "remote_write", "remote_write", IBV_QPS_RTS);
	rc_before = selftest_run(&ea, &eb, &mr, TIMEOUT_MS, &before);

	rc = connect_qp(c, a, b->qp_num, "remote_write", IBV_QPS_RTS, &at);
	json_array_append_new(steps, step_json("a RTS->RTS (no-op)", a, rc,
					       at));
	rc = connect_qp(c, a, b->qp_num, "remote_write", IBV_QPS_INIT, &at);
	json_array_append_new(steps, step_json("a RTS->INIT", a, rc, at));
	if (ibv_modify_qp(b, &err_attr, IBV_QP_STATE))
		die("moving b to ERR failed");
	json_array_append_new(steps, step_json("b forced to ERR", b, 0, NULL));
	rc = connect_qp(c, b, a->qp_num, "remote_write", IBV_QPS_RTS, &at);
	json_array_append_new(steps, step_json("b ERR->RTS", b, rc, at));
	rc = connect_qp(c, a, b->qp_num, "remote_write", IBV_QPS_RTS, &at);
	json_array_append_new(steps, step_json("a INIT->RTS", a, rc, at));
	rc = connect_qp(c, a, b->qp_num, "remote_write", IBV_QPS_ERR, &at);
	json_array_append_new(steps, step_json("a RTS->ERR", a, rc, at));
	rc = connect_qp(c, a, b->qp_num, "remote_write", IBV_QPS_RESET, &at);
	json_array_append_new(steps, step_json("a ERR->RESET", a, rc, at));
	rc = connect_qp(c, a, b->qp_num, "remote_write", IBV_QPS_RTS, &at);
	json_array_append_new(steps, step_json("a RESET->RTS", a, rc, at));
	rc_after = selftest_run(&ea, &eb, &mr, TIMEOUT_MS, &after);

	emit(json_pack("{s:o, s:o, s:o}", "before", run_json(rc_before, before),
		       "steps", steps, "after", run_json(rc_after, after)));
	return rc_before || rc_after;
}

static json_t *failure_case(struct ctx *c, const char *name,
			    json_t *extra_a, uint32_t rkey, int timeout_ms)
{
	struct ibv_qp *a = qp_new(c, IBV_QPT_RC, 0);
	struct ibv_qp *b = qp_new(c, IBV_QPT_RC, 1);
	struct selftest_end ea = st_end(a), eb = st_end(b);
	struct selftest_mr mr = st_mr(c);
	const char *at;
	json_t *report;
	int rc;

	if (connect_ex(c, a, b->qp_num, "remote_write", extra_a, IBV_QPS_RTS,
		       &at) ||
	    connect_qp(c, b, a->qp_num, "remote_write", IBV_QPS_RTS, &at))
		die("connecting the pair for %s failed at %s", name, at);
	if (rkey)
		mr.rkey = rkey;
	rc = selftest_run(&ea, &eb, &mr, timeout_ms, &report);
	return json_pack("{s:s, s:i, s:o, s:s, s:s}", "case", name, "rc", rc,
			 "report", report ? report : json_null(), "state_a",
			 state_str(qp_state(a)), "state_b",
			 state_str(qp_state(b)));
}

/* Transfers that must fail, and how selftest_run says so. */
static int mode_failure(struct ctx *c)
{
	unsigned int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	json_t *cases = json_array();
	struct ibv_mr *alias;
	void *other;

	json_array_append_new(cases, failure_case(c, "bad_rkey", NULL,
						  c->mr->rkey ^ 0x80,
						  TIMEOUT_MS));

	/* Another MR over other memory at the same IOVAs: the write
	 * succeeds, into the wrong memory. */
	/* Page-aligned: the kernel wants the IOVA and the address at the
	 * same offset within a page. */
	other = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (other == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	alias = ibv_reg_mr_iova(c->pd, other, BUF_LEN, st_mr(c).iova, access);
	if (!alias)
		die("ibv_reg_mr_iova: %s", strerror(errno));
	json_array_append_new(cases, failure_case(c, "wrong_mr", NULL,
						  alias->rkey, TIMEOUT_MS));

	/* a starts at PSN 0x100, b expects 0: b NAKs, a retries once. */
	json_array_append_new(cases,
			      failure_case(c, "psn_retry_exceeded",
					   json_pack("{s:i, s:i, s:i}",
						     "sq_psn", 0x100,
						     "retry_cnt", 1,
						     "timeout", 8),
					   0, TIMEOUT_MS));
	/* The same with a 2.4-hour ACK timeout: nothing within 2 s. */
	json_array_append_new(cases,
			      failure_case(c, "psn_timeout",
					   json_pack("{s:i, s:i}", "sq_psn",
						     0x100, "timeout", 31),
					   0, 2000));
	emit(json_pack("{s:o}", "cases", cases));
	return 0;
}

static json_t *bad_case(struct ctx *c, const char *name, enum ibv_qp_type t,
			json_t *extra)
{
	struct ibv_qp *q = qp_new(c, t, 0);
	struct qp_path p;
	const char *at;
	int rc;

	path_for(c, q->qp_num, names("remote_write"), extra, &p);
	rc = qp_modify(q, IBV_QPS_RTS, &p, &at);
	return json_pack("{s:s, s:i, s:s?, s:s}", "case", name, "rc", rc,
			 "failed_at", at, "state", state_str(qp_state(q)));
}

static int mode_badpath(struct ctx *c)
{
	json_t *cases = json_array();

	json_array_append_new(cases,
			      bad_case(c, "rc_bad_sgid_index", IBV_QPT_RC,
				       json_pack("{s:i}", "sgid_index", 200)));
	json_array_append_new(cases,
			      bad_case(c, "rc_no_grh", IBV_QPT_RC,
				       json_pack("{s:b, s:s}", "has_grh", 0,
						 "dgid", "::")));
	json_array_append_new(cases,
			      bad_case(c, "rc_port_2", IBV_QPT_RC,
				       json_pack("{s:i}", "port_num", 2)));
	json_array_append_new(cases,
			      bad_case(c, "ud_port_2", IBV_QPT_UD,
				       json_pack("{s:i}", "port_num", 2)));
	json_array_append_new(cases,
			      bad_case(c, "rc_max_rd_atomic_255", IBV_QPT_RC,
				       json_pack("{s:i}", "max_rd_atomic",
						 255)));
	json_array_append_new(cases,
			      bad_case(c, "uc_good", IBV_QPT_UC, NULL));
	json_array_append_new(cases,
			      bad_case(c, "rc_good", IBV_QPT_RC, NULL));
	emit(json_pack("{s:o}", "cases", cases));
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option long_opts[] = {
		{ "shared-cq", no_argument, NULL, 'S' },
		{ "zero-based", no_argument, NULL, 'Z' },
		{ "stray", no_argument, NULL, 'T' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "mtu", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct {
		const char *name;
		int (*fn)(struct ctx *c);
	} modes[] = {
		{ "selftest", mode_selftest }, { "precond", mode_precond },
		{ "ud", mode_ud },	       { "hold", mode_hold },
		{ "recover", mode_recover },   { "badpath", mode_badpath },
		{ "failure", mode_failure },
	};
	struct opts o = {
		.dev = "rxe0", .gid_index = 1, .repeat = 1, .mtu = 1024
	};
	struct ctx c;
	int ch;

	while ((ch = getopt_long(argc, argv, "d:g:", long_opts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			o.dev = optarg;
			break;
		case 'g':
			o.gid_index = atoi(optarg);
			break;
		case 'S':
			o.shared_cq = true;
			break;
		case 'Z':
			o.zero_based = true;
			break;
		case 'T':
			o.stray = true;
			break;
		case 'r':
			o.repeat = atoi(optarg);
			break;
		case 'm':
			o.mtu = atoi(optarg);
			break;
		default:
			die("usage: loopback [-d DEV] [-g GID_INDEX] "
			    "[--shared-cq] [--zero-based] [--stray] "
			    "[--repeat N] [--mtu BYTES] MODE");
		}
	}
	if (optind != argc - 1)
		die("one MODE expected (selftest, precond, ud, hold, recover, "
		    "badpath, failure)");
	for (size_t i = 0; i < ARRAY_SIZE(modes); i++)
		if (streq(argv[optind], modes[i].name)) {
			ctx_open(&c, &o);
			/* Objects go with the process: the kernel cleans up. */
			return modes[i].fn(&c);
		}
	die("unknown mode '%s'", argv[optind]);
}
