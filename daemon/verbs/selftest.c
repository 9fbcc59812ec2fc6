// SPDX-License-Identifier: MIT
/*
 * Data-path self-check between two connected RC QPs: one RDMA write, one
 * send/receive, both verified byte for byte. See selftest.h.
 *
 * The MR is cut into four slices of the same size: write source, write
 * destination, send source, receive destination. Each destination is
 * filled with the complement of its source first, so every byte must
 * change for the check to pass.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "selftest.h"
#include "util.h"

#define SLICE_MAX (64 * 1024)
/* "SELFT" in the top five bytes, then 16 bits of run counter, then the
 * WR's kind. */
#define WRID_MAGIC 0x53454c4654000000ULL
#define MAX_STRAY 32

enum { WR_WRITE = 1, WR_SEND, WR_RECV };
enum { SL_WRITE_SRC, SL_WRITE_DST, SL_SEND_SRC, SL_RECV_DST };

struct expect {
	const char *what; /* "the RDMA write on QP a" */
	struct ibv_cq *cq;
	uint64_t wr_id;
	uint32_t qp_num;
	bool done;
	struct ibv_wc wc;
};

struct run {
	const struct selftest_end *a, *b;
	const struct selftest_mr *mr;
	int timeout_ms;
	size_t slice;
	uint64_t wrid_base;
	uint64_t seed;
	json_t *report;
	size_t n_stray;
};

static uint64_t run_counter;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *state_name(enum ibv_qp_state s)
{
	static const char *const n[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT",
		[IBV_QPS_RTR] = "RTR",	   [IBV_QPS_RTS] = "RTS",
		[IBV_QPS_SQD] = "SQD",	   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return (unsigned int)s < ARRAY_SIZE(n) && n[s] ? n[s] : "UNKNOWN";
}

static const char *type_name(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC:
		return "RC";
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_UD:
		return "UD";
	case IBV_QPT_RAW_PACKET:
		return "RAW_PACKET";
	case IBV_QPT_XRC_SEND:
		return "XRC_SEND";
	case IBV_QPT_XRC_RECV:
		return "XRC_RECV";
	default:
		return "of another type";
	}
}

static int verbs_err(int r)
{
	if (r > 0)
		return -r;
	return errno > 0 ? -errno : -EIO;
}

/* A uint64_t as JSON: an integer, or above INT64_MAX a decimal string
 * (devinfo.c's rule). */
static json_t *json_u64(uint64_t v)
{
	char buf[24];

	if (v <= INT64_MAX)
		return json_integer((json_int_t)v);
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return json_string(buf);
}

_printf_(3, 4) static void set_fmt(json_t *obj, const char *key,
				   const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_object_set_new(obj, key, json_string(buf));
}

/* ---- preconditions ---- */

struct problems {
	char buf[1024];
	size_t len;
	int n;
};

_printf_(2, 3) static void problem(struct problems *p, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (p->len >= sizeof(p->buf) - 1)
		return;
	if (p->n++)
		p->len += (size_t)snprintf(p->buf + p->len,
					   sizeof(p->buf) - p->len, "; ");
	if (p->len >= sizeof(p->buf) - 1)
		return;
	va_start(ap, fmt);
	w = vsnprintf(p->buf + p->len, sizeof(p->buf) - p->len, fmt, ap);
	va_end(ap);
	if (w > 0)
		p->len += (size_t)w;
	if (p->len > sizeof(p->buf) - 1)
		p->len = sizeof(p->buf) - 1;
}

/* One end; returns -errno only if the QP cannot be queried. */
static int check_end(struct problems *p, json_t *report, const char *name,
		     const struct selftest_end *e, const struct ibv_qp *peer,
		     bool responder)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	int r;

	if (!e->qp) {
		problem(p, "end %s has no QP", name);
		return 0;
	}
	r = ibv_query_qp(e->qp, &attr,
			 IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_DEST_QPN,
			 &init);
	if (r) {
		r = verbs_err(r);
		set_fmt(report, "error",
			"ibv_query_qp on QP %s (qpn %" PRIu32 "): %s", name,
			e->qp->qp_num, strerror(-r));
		return r;
	}
	if (e->qp->qp_type != IBV_QPT_RC) {
		/* Connection and access mean nothing for the others. */
		problem(p, "QP %s (qpn %" PRIu32 ") is %s, not RC", name,
			e->qp->qp_num, type_name(e->qp->qp_type));
		return 0;
	}
	if (attr.qp_state != IBV_QPS_RTS)
		problem(p, "QP %s (qpn %" PRIu32 ") is in state %s, not RTS",
			name, e->qp->qp_num, state_name(attr.qp_state));
	else if (peer && attr.dest_qp_num != peer->qp_num)
		problem(p,
			"QP %s (qpn %" PRIu32 ") is connected to qpn %" PRIu32
			", not to the other end (qpn %" PRIu32 ")",
			name, e->qp->qp_num, attr.dest_qp_num, peer->qp_num);
	if (responder) {
		if (!(attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
			problem(p,
				"QP %s (qpn %" PRIu32 ") does not allow "
				"remote_write",
				name, e->qp->qp_num);
		if (!e->recv_cq)
			problem(p, "end %s has no receive CQ", name);
		else if (e->recv_cq != e->qp->recv_cq)
			problem(p,
				"end %s's recv_cq is not the receive CQ of "
				"QP %s",
				name, name);
	} else {
		if (!e->send_cq)
			problem(p, "end %s has no send CQ", name);
		else if (e->send_cq != e->qp->send_cq)
			problem(p,
				"end %s's send_cq is not the send CQ of QP %s",
				name, name);
	}
	return 0;
}

static int check_preconditions(struct run *r)
{
	const struct selftest_mr *mr = r->mr;
	const unsigned int need = IBV_ACCESS_LOCAL_WRITE |
				  IBV_ACCESS_REMOTE_WRITE;
	struct problems p = { .len = 0 };
	int err;

	err = check_end(&p, r->report, "a", r->a, r->b->qp, false);
	if (!err)
		err = check_end(&p, r->report, "b", r->b, r->a->qp, true);
	if (err)
		return err;
	if (!mr->addr)
		problem(&p, "the MR has no address");
	if (mr->length < 4)
		problem(&p, "the MR has %zu bytes, fewer than 4", mr->length);
	if ((mr->access & need) != need)
		problem(&p, "the MR lacks%s%s",
			mr->access & IBV_ACCESS_LOCAL_WRITE ? ""
							    : " local_write",
			mr->access & IBV_ACCESS_REMOTE_WRITE ? ""
							     : " remote_write");
	if (r->timeout_ms <= 0)
		problem(&p, "timeout_ms is %d, not positive", r->timeout_ms);
	if (!p.n)
		return 0;
	set_fmt(r->report, "error", "preconditions not met: %s", p.buf);
	return -EINVAL;
}

/* ---- completions ---- */

static void stray_add(struct run *r, const struct ibv_wc *wc)
{
	json_t *arr = json_object_get(r->report, "stray_completions");
	json_t *s;

	r->n_stray++;
	json_object_set_new(r->report, "n_stray_completions",
			    json_integer((json_int_t)r->n_stray));
	if (!arr) {
		arr = json_array();
		if (json_object_set_new(r->report, "stray_completions", arr))
			return;
	}
	if (json_array_size(arr) >= MAX_STRAY)
		return;
	s = json_object();
	json_object_set_new(s, "wr_id", json_u64(wc->wr_id));
	json_object_set_new(s, "qp_num", json_integer(wc->qp_num));
	json_object_set_new(s, "status",
			    json_string(ibv_wc_status_str(wc->status)));
	json_object_set_new(s, "opcode", json_integer(wc->opcode));
	json_object_set_new(s, "byte_len", json_integer(wc->byte_len));
	json_array_append_new(arr, s);
}

static struct expect *match(struct expect *e, size_t n,
			    const struct ibv_wc *wc)
{
	for (size_t i = 0; i < n; i++)
		if (!e[i].done && e[i].wr_id == wc->wr_id &&
		    e[i].qp_num == wc->qp_num)
			return &e[i];
	return NULL;
}

/*
 * Polls until every expectation has its completion. One completion at a
 * time: a batch could swallow more of other QPs' completions than needed.
 * Returns 0; -EIO with *bad set when a completion failed; -ETIMEDOUT with
 * *bad the first one still missing; -EIO with *bad NULL if polling failed.
 */
static int wait_all(struct run *r, struct expect *e, size_t n,
		    struct expect **bad)
{
	uint64_t deadline = now_ns() + (uint64_t)r->timeout_ms * 1000000u;
	size_t left = n;

	*bad = NULL;
	for (;;) {
		bool got = false;

		for (size_t i = 0; i < n; i++) {
			struct expect *m;
			struct ibv_wc wc;
			int k;

			if (e[i].done)
				continue;
			k = ibv_poll_cq(e[i].cq, 1, &wc);
			if (k < 0)
				return -EIO;
			if (!k)
				continue;
			got = true;
			m = match(e, n, &wc);
			if (!m) {
				stray_add(r, &wc);
				continue;
			}
			m->done = true;
			m->wc = wc;
			left--;
			if (wc.status != IBV_WC_SUCCESS) {
				*bad = m;
				return -EIO;
			}
		}
		if (!left)
			return 0;
		if (now_ns() >= deadline) {
			for (size_t i = 0; i < n && !*bad; i++)
				if (!e[i].done)
					*bad = &e[i];
			return -ETIMEDOUT;
		}
		if (!got)
			sched_yield();
	}
}

/* ---- transfers ---- */

static uint8_t *slice_ptr(const struct run *r, int slice)
{
	return (uint8_t *)r->mr->addr + (size_t)slice * r->slice;
}

static uint64_t slice_iova(const struct run *r, int slice)
{
	return r->mr->iova + (uint64_t)slice * r->slice;
}

/* xorshift64: enough to make stale or misplaced data show. */
static void fill(struct run *r, int src, int dst)
{
	uint8_t *s = slice_ptr(r, src), *d = slice_ptr(r, dst);
	uint64_t x = r->seed;

	for (size_t i = 0; i < r->slice; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		s[i] = (uint8_t)(x >> 32);
		d[i] = (uint8_t)~s[i];
	}
	r->seed = x;
}

/* Returns true when the slices agree; else says where they differ. */
static bool verify(const struct run *r, int src, int dst, json_t *phase,
		   const char *after)
{
	const uint8_t *s = slice_ptr(r, src), *d = slice_ptr(r, dst);
	size_t first = 0, bad = 0;

	if (!memcmp(s, d, r->slice))
		return true;
	for (size_t i = 0; i < r->slice; i++)
		if (s[i] != d[i] && !bad++)
			first = i;
	set_fmt(phase, "error",
		"data mismatch after the %s: %zu of %zu bytes differ, the "
		"first at offset %zu (expected 0x%02x, got 0x%02x)",
		after, bad, r->slice, first, s[first], d[first]);
	return false;
}

static json_t *phase_new(struct run *r, const char *name)
{
	json_t *ph = json_object();

	json_object_set_new(ph, "bytes", json_integer((json_int_t)r->slice));
	json_object_set_new(ph, "ok", json_false());
	json_object_set_new(r->report, name, ph);
	return ph;
}

static void phase_ok(json_t *ph, uint64_t t0, uint64_t t1)
{
	json_object_set_new(ph, "ok", json_true());
	json_object_set_new(ph, "usec",
			    json_integer((json_int_t)((t1 - t0) / 1000)));
}

static const char *hint(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_REM_ACCESS_ERR:
		return " (do the MR and b's QP allow remote_write, and is "
		       "the MR in b's PD?)";
	case IBV_WC_LOC_PROT_ERR:
		return " (is the MR in the QP's PD and does it allow "
		       "local_write?)";
	case IBV_WC_RETRY_EXC_ERR:
		return " (no ACK from the responder: is the path right?)";
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return " (the responder had no receive posted)";
	default:
		return "";
	}
}

/* A failed wait, into the phase's report; returns err. */
static int wait_failed(struct run *r, json_t *ph, int err,
		       const struct expect *bad)
{
	if (err == -ETIMEDOUT)
		set_fmt(ph, "error",
			"no completion for %s within %d ms (the WR is still "
			"outstanding)",
			bad->what, r->timeout_ms);
	else if (bad) {
		set_fmt(ph, "error", "%s completed with status '%s'%s",
			bad->what, ibv_wc_status_str(bad->wc.status),
			hint(bad->wc.status));
		json_object_set_new(ph, "status",
				    json_string(ibv_wc_status_str(
					    bad->wc.status)));
		json_object_set_new(ph, "vendor_err",
				    json_integer(bad->wc.vendor_err));
	} else
		set_fmt(ph, "error", "ibv_poll_cq failed");
	return err;
}

static int run_write(struct run *r)
{
	json_t *ph = phase_new(r, "rdma_write");
	struct ibv_sge sge = {
		.addr = slice_iova(r, SL_WRITE_SRC),
		.length = (uint32_t)r->slice,
		.lkey = r->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = r->wrid_base | WR_WRITE,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {
			.remote_addr = slice_iova(r, SL_WRITE_DST),
			.rkey = r->mr->rkey,
		},
	}, *bad_wr;
	struct expect e = {
		.what = "the RDMA write on QP a",
		.cq = r->a->send_cq,
		.wr_id = wr.wr_id,
		.qp_num = r->a->qp->qp_num,
	}, *bad;
	uint64_t t0, t1;
	int err;

	fill(r, SL_WRITE_SRC, SL_WRITE_DST);
	t0 = now_ns();
	err = ibv_post_send(r->a->qp, &wr, &bad_wr);
	if (err) {
		err = verbs_err(err);
		set_fmt(ph, "error", "ibv_post_send (RDMA write) on QP a: %s",
			strerror(-err));
		return err;
	}
	err = wait_all(r, &e, 1, &bad);
	t1 = now_ns();
	if (err)
		return wait_failed(r, ph, err, bad);
	if (!verify(r, SL_WRITE_SRC, SL_WRITE_DST, ph, "RDMA write"))
		return -EIO;
	phase_ok(ph, t0, t1);
	return 0;
}

static int run_send_recv(struct run *r)
{
	json_t *ph = phase_new(r, "send_recv");
	struct ibv_sge ssge = {
		.addr = slice_iova(r, SL_SEND_SRC),
		.length = (uint32_t)r->slice,
		.lkey = r->mr->lkey,
	};
	struct ibv_sge rsge = {
		.addr = slice_iova(r, SL_RECV_DST),
		.length = (uint32_t)r->slice,
		.lkey = r->mr->lkey,
	};
	struct ibv_recv_wr rwr = {
		.wr_id = r->wrid_base | WR_RECV,
		.sg_list = &rsge,
		.num_sge = 1,
	}, *bad_rwr;
	struct ibv_send_wr swr = {
		.wr_id = r->wrid_base | WR_SEND,
		.sg_list = &ssge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad_swr;
	struct expect e[] = {
		{ .what = "the receive on QP b",
		  .cq = r->b->recv_cq,
		  .wr_id = rwr.wr_id,
		  .qp_num = r->b->qp->qp_num },
		{ .what = "the send on QP a",
		  .cq = r->a->send_cq,
		  .wr_id = swr.wr_id,
		  .qp_num = r->a->qp->qp_num },
	}, *bad;
	uint64_t t0, t1;
	int err;

	fill(r, SL_SEND_SRC, SL_RECV_DST);
	t0 = now_ns();
	/* Through b's SRQ if it has one: the one receive posted there. */
	if (r->b->qp->srq)
		err = ibv_post_srq_recv(r->b->qp->srq, &rwr, &bad_rwr);
	else
		err = ibv_post_recv(r->b->qp, &rwr, &bad_rwr);
	if (err) {
		err = verbs_err(err);
		set_fmt(ph, "error", "%s on QP b: %s",
			r->b->qp->srq ? "ibv_post_srq_recv" : "ibv_post_recv",
			strerror(-err));
		return err;
	}
	err = ibv_post_send(r->a->qp, &swr, &bad_swr);
	if (err) {
		err = verbs_err(err);
		set_fmt(ph, "error",
			"ibv_post_send (send) on QP a: %s (a receive stays "
			"posted on QP b)",
			strerror(-err));
		return err;
	}
	err = wait_all(r, e, ARRAY_SIZE(e), &bad);
	t1 = now_ns();
	if (err)
		return wait_failed(r, ph, err, bad);
	if (e[0].wc.byte_len != r->slice) {
		set_fmt(ph, "error",
			"QP b received %" PRIu32 " bytes, expected %zu",
			e[0].wc.byte_len, r->slice);
		return -EIO;
	}
	if (!verify(r, SL_SEND_SRC, SL_RECV_DST, ph, "send"))
		return -EIO;
	phase_ok(ph, t0, t1);
	return 0;
}

int selftest_run(const struct selftest_end *a, const struct selftest_end *b,
		 const struct selftest_mr *mr, int timeout_ms, json_t **report)
{
	struct run r = {
		.a = a,
		.b = b,
		.mr = mr,
		.timeout_ms = timeout_ms,
	};
	const char *failed = NULL;
	json_t *ph;
	int err;

	if (!report)
		return -EINVAL;
	*report = NULL;
	r.report = json_object();
	if (!r.report)
		return -ENOMEM;
	if (!a || !b || !mr) {
		set_fmt(r.report, "error",
			"preconditions not met: no end a, end b or MR");
		*report = r.report;
		return -EINVAL;
	}
	err = check_preconditions(&r);
	if (err) {
		*report = r.report;
		return err;
	}

	r.slice = mr->length / 4 < SLICE_MAX ? mr->length / 4 : SLICE_MAX;
	run_counter++;
	r.wrid_base = WRID_MAGIC | (run_counter & 0xffff) << 8;
	r.seed = (now_ns() ^ run_counter * 0x9e3779b97f4a7c15ULL) | 1;

	err = run_write(&r);
	if (err)
		failed = "rdma_write";
	else {
		err = run_send_recv(&r);
		if (err)
			failed = "send_recv";
	}
	if (failed) {
		const char *why;

		ph = json_object_get(r.report, failed);
		why = json_string_value(json_object_get(ph, "error"));
		set_fmt(r.report, "error", "%s: %s", failed,
			why ? why : strerror(-err));
	}
	*report = r.report;
	return err;
}
