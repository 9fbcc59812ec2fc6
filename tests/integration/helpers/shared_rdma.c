// SPDX-License-Identifier: MIT
/*
 * shared_rdma: a librdmad client that moves data by RDMA through a
 * profile's MR, for tests/integration/test_shared_mode.py. It attaches
 * (MODE auto, shared or local), makes a CQ and two RC QPs of its own on
 * the MR's PD (in shared mode the daemon's PD, imported), connects them to
 * each other and works through the MR's rkey and IOVA, as a remote peer
 * would.
 *
 *   shared_rdma SOCKET PROFILE MODE OP [ARGS...]
 *
 * OP:
 *   write MR OFFSET SEED LEN   RDMA WRITE LEN bytes of pattern SEED into MR
 *                              at OFFSET, then RDMA READ them back
 *   read MR OFFSET SEED LEN    RDMA READ LEN bytes at OFFSET, check they
 *                              are pattern SEED
 *   stream MR                  RDMA WRITE 64 KiB at a time into MR and
 *                              READ it back, checked, until killed
 *                              ("streaming" after the first, "n=K" every
 *                              64th), taking the connection's events as
 *                              a program polling rdmad_fd() would
 *                              ("event resumed", "event gone", "event
 *                              T"); with STREAM_DETACH=1, a line on stdin
 *                              detaches ("detached") and ends the stream;
 *                              STREAM_BASE=N works at offset N of MR;
 *                              STREAM_BUF=N registers a buffer of N
 *                              bytes (at least 64 KiB) of its own;
 *                              it then exits when stdin closes
 *   loop N                     attach, import, detach, N times
 *
 * With PEER_QPN=N in the environment, the first QP is connected to QP N
 * (a QP of the daemon's, on the same device) instead of the second one:
 * the helper prints "qpn=Q" (its QP, for the peer to connect to) and
 * waits for a line on stdin (the peer is connected) before OP.
 * Prints "ok MODE lkey=L rkey=R iova=I" (the MR's, as this process sees
 * it) once OP is done; with HOLD=1 in the environment, then waits for
 * stdin to close before detaching. Exit status 0, or 1 with "error WHAT:
 * MESSAGE" on stdout.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

#define CHUNK (64u << 10)
#define TIMEOUT_S 10

struct pair {
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	struct ibv_mr *buf_mr;
	unsigned char *buf;
	size_t len;
};

static int fail(const char *what, const char *msg)
{
	printf("error %s: %s\n", what, msg ? msg : strerror(errno));
	fflush(stdout);
	return 1;
}

static unsigned char pattern(uint64_t seed, size_t i)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + i;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	return (unsigned char)(x >> 32);
}

static int to_rts(struct ibv_qp *qp, uint32_t dest, int port, int gid_index,
		  const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = (uint8_t)port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};
	int r;

	r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (r)
		return r;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = (uint8_t)port,
			     .grh = { .dgid = *gid, .hop_limit = 1,
				      .sgid_index = (uint8_t)gid_index } },
	};
	r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER);
	if (r)
		return r;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = 14,
				  .retry_cnt = 7, .rnr_retry = 7,
				  .max_rd_atomic = 1 };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
					 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void pair_free(struct pair *p)
{
	for (int i = 0; i < 2; i++)
		if (p->qp[i])
			ibv_destroy_qp(p->qp[i]);
	if (p->buf_mr)
		ibv_dereg_mr(p->buf_mr);
	if (p->cq)
		ibv_destroy_cq(p->cq);
	free(p->buf);
}

/* A connected pair of QPs on pd, and a buffer of len bytes of ours. */
static int pair_make(struct rdmad_profile *prof, struct ibv_pd *pd,
		     size_t len, struct pair *p)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	union ibv_gid gid;
	int port = rdmad_port(prof), gi = rdmad_gid_index(prof);

	*p = (struct pair){ .len = len };
	p->buf = calloc(1, len);
	p->cq = ibv_create_cq(pd->context, 32, NULL, NULL, 0);
	if (!p->buf || !p->cq)
		return fail("cq", NULL);
	p->buf_mr = ibv_reg_mr(pd, p->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!p->buf_mr)
		return fail("reg_mr", NULL);
	qa.send_cq = qa.recv_cq = p->cq;
	for (int i = 0; i < 2; i++)
		if (!(p->qp[i] = ibv_create_qp(pd, &qa)))
			return fail("create_qp", NULL);
	if (ibv_query_gid(pd->context, (uint8_t)port, gi, &gid))
		return fail("query_gid", NULL);
	for (int i = 0; i < 2; i++) {
		uint32_t dest = p->qp[!i]->qp_num;

		if (i == 0 && getenv("PEER_QPN"))
			dest = (uint32_t)strtoul(getenv("PEER_QPN"), NULL, 0);
		errno = to_rts(p->qp[i], dest, port, gi, &gid);
		if (errno)
			return fail("modify_qp", NULL);
	}
	/* A peer QP of the daemon's: it is connected to ours now. */
	if (getenv("PEER_QPN")) {
		char line[64];

		printf("qpn=%u\n", p->qp[0]->qp_num);
		if (!fgets(line, sizeof(line), stdin))
			return fail("peer", "stdin closed before the peer was");
	}
	return 0;
}

/* One work request from qp 0 on [buf, buf+len) and remote addr/rkey. */
static int post_wait(struct pair *p, enum ibv_wr_opcode op, size_t len,
		     uint64_t addr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)p->buf,
			       .length = (uint32_t)len,
			       .lkey = p->buf_mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = addr,
					       .rkey = rkey } },
			   *bad;
	struct ibv_wc wc;
	time_t end = time(NULL) + TIMEOUT_S;
	int n;

	if (ibv_post_send(p->qp[0], &wr, &bad))
		return fail("post_send", NULL);
	while ((n = ibv_poll_cq(p->cq, 1, &wc)) == 0)
		if (time(NULL) > end)
			return fail("poll_cq", "no completion in time");
	if (n < 0)
		return fail("poll_cq", NULL);
	if (wc.status != IBV_WC_SUCCESS)
		return fail("completion", ibv_wc_status_str(wc.status));
	return 0;
}

static void take_events(void);
static bool detach_asked(void);

static int do_io(struct rdmad_profile *prof, const char *op, char **args)
{
	const char *name = args[0];
	struct ibv_mr *mr = rdmad_mr(prof, name);
	uint64_t off, seed, iova;
	uint32_t rkey;
	size_t len, i;
	struct pair p;
	int r;

	if (!mr)
		return fail("mr", rdmad_last_error());
	rkey = rdmad_mr_rkey(prof, name);
	iova = rdmad_mr_iova(prof, name);
	if (!strcmp(op, "stream")) {
		size_t buf = getenv("STREAM_BUF")
				     ? strtoull(getenv("STREAM_BUF"), NULL, 0)
				     : 0;

		if (pair_make(prof, mr->pd, buf > CHUNK ? buf : CHUNK, &p)) {
			pair_free(&p);
			return 1;
		}
		/* STREAM_BASE: where in the MR (16 chunks from there). */
		uint64_t base = getenv("STREAM_BASE")
					? strtoull(getenv("STREAM_BASE"), NULL, 0)
					: 0;

		for (unsigned long k = 0;; k++) {
			uint64_t at = iova + base + (k % 16) * CHUNK;

			for (i = 0; i < CHUNK; i++)
				p.buf[i] = pattern(k, i);
			if (post_wait(&p, IBV_WR_RDMA_WRITE, CHUNK, at, rkey)) {
				pair_free(&p);
				return 1;
			}
			memset(p.buf, 0, CHUNK);
			if (post_wait(&p, IBV_WR_RDMA_READ, CHUNK, at, rkey)) {
				pair_free(&p);
				return 1;
			}
			for (i = 0; i < CHUNK; i++)
				if (p.buf[i] != pattern(k, i)) {
					printf("error data: chunk %lu byte %zu\n",
					       k, i);
					pair_free(&p);
					return 1;
				}
			/* A client at work, not a CPU hog: the daemon and
			 * the tests share the (emulated) CPUs with it. */
			nanosleep(&(struct timespec){ .tv_nsec = 2000000 },
				  NULL);
			if (k == 0)
				printf("streaming\n");
			else if (k % 64 == 0)
				printf("n=%lu\n", k);
			take_events();
			if (detach_asked()) {
				pair_free(&p);
				if (rdmad_detach(prof) < 0)
					return fail("detach", rdmad_last_error());
				printf("detached\n");
				/* Alive, holding nothing: until stdin
				 * closes. */
				while (getchar() != EOF)
					;
				exit(0);
			}
		}
	}
	off = strtoull(args[1], NULL, 0);
	seed = strtoull(args[2], NULL, 0);
	len = strtoull(args[3], NULL, 0);
	if (!len)
		return fail("args", "LEN must be positive");
	r = pair_make(prof, mr->pd, len, &p);
	if (!r && !strcmp(op, "write")) {
		for (i = 0; i < len; i++)
			p.buf[i] = pattern(seed, i);
		r = post_wait(&p, IBV_WR_RDMA_WRITE, len, iova + off, rkey);
		memset(p.buf, 0, len);
	}
	if (!r)
		r = post_wait(&p, IBV_WR_RDMA_READ, len, iova + off, rkey);
	for (i = 0; !r && i < len; i++)
		if (p.buf[i] != pattern(seed, i)) {
			printf("error data: byte %zu is %#x, not %#x\n", i,
			       p.buf[i], pattern(seed, i));
			r = 1;
		}
	pair_free(&p);
	return r;
}

static struct rdmad *conn;

/* What the connection has to say, taken without waiting. */
static void take_events(void)
{
	struct pollfd pfd = { .fd = rdmad_fd(conn), .events = POLLIN };
	struct rdmad_event ev;

	if (poll(&pfd, 1, 0) <= 0)
		return;
	while (rdmad_next_event(conn, &ev) > 0) {
		if (ev.type == RDMAD_EVENT_RESUMED)
			printf("event resumed\n");
		else if (ev.type == RDMAD_EVENT_DAEMON_GONE)
			printf("event gone\n");
		else
			printf("event %d\n", (int)ev.type);
	}
}

/* STREAM_DETACH=1 and a line on stdin: time to detach. */
static bool detach_asked(void)
{
	struct pollfd pfd = { .fd = 0, .events = POLLIN };

	return getenv("STREAM_DETACH") && poll(&pfd, 1, 0) > 0;
}

static int loop(struct rdmad *c, const char *profile, unsigned int flags,
		long n)
{
	for (long i = 0; i < n; i++) {
		struct rdmad_profile *p = rdmad_attach(c, profile, flags);

		if (!p)
			return fail("attach", rdmad_last_error());
		if (!rdmad_pd(p, rdmad_pd_name(p, 0)))
			return fail("pd", rdmad_last_error());
		if (rdmad_detach(p) < 0)
			return fail("detach", rdmad_last_error());
	}
	printf("attached %ld\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	struct rdmad_profile *prof;
	struct ibv_mr *mr = NULL;
	unsigned int flags;
	struct rdmad *c;
	const char *op;
	int r = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 5) {
		fprintf(stderr, "Usage: shared_rdma SOCKET PROFILE "
				"auto|shared|local OP [ARGS...]\n");
		return 64;
	}
	op = argv[4];
	flags = !strcmp(argv[3], "shared") ? RDMAD_ATTACH_SHARED
		: !strcmp(argv[3], "local") ? RDMAD_ATTACH_LOCAL
					      : RDMAD_ATTACH_AUTO;
	c = conn = rdmad_connect(argv[1]);
	if (!c)
		return fail("connect", rdmad_last_error());
	if (!strcmp(op, "loop") && argc == 6)
		return loop(c, argv[2], flags, atol(argv[5]));
	if (!((!strcmp(op, "stream") && argc == 6) ||
	      ((!strcmp(op, "write") || !strcmp(op, "read")) && argc == 9)))
		return fail("args", "unknown OP or wrong number of arguments");
	prof = rdmad_attach(c, argv[2], flags);
	if (!prof)
		return fail("attach", rdmad_last_error());
	r = do_io(prof, op, argv + 5);
	mr = rdmad_mr(prof, argv[5]);
	if (!r)
		printf("ok %s lkey=%u rkey=%u iova=%" PRIu64 "\n",
		       rdmad_mode(prof) == RDMAD_MODE_SHARED ? "shared"
							     : "local",
		       mr->lkey, mr->rkey, rdmad_mr_iova(prof, argv[5]));
	if (!r && getenv("HOLD")) {
		char b[64];

		while (read(0, b, sizeof(b)) > 0)
			;
	}
	if (rdmad_detach(prof) < 0 && !r)
		r = fail("detach", rdmad_last_error());
	rdmad_close(c);
	return r;
}
