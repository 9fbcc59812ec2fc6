// SPDX-License-Identifier: MIT
/*
 * tests/rxe-import/selftest: checks on a real rxe device that the
 * import-capable provider (tests/rxe-import/build) does what rdmad needs.
 *
 *   selftest [DEVICE]                     (default rxe0)
 *   selftest --expect-no-import [DEVICE]
 *
 * Process A opens DEVICE, allocates a PD, registers 1 MiB of memfd memory
 * and fork+execs itself as B with a dup of its cmd_fd, the PD and MR
 * handles and the MR's address. B imports the context, PD and MR, creates
 * its own CQ (on a completion channel), SRQ, two RC QPs on the imported PD
 * and connects them to each other (port 1, GID index 1: RoCE v2), then
 * binds a type 1 MW, creates an AH, RDMA WRITEs into A's MR, SENDs to the
 * SRQ, RDMA READs from A's MR and uses the imported lkey as a local key.
 * A then checks the bytes in its memfd pages and that `rdma resource show
 * mr` lists the MR once while both hold it, lets B unimport and exit, and
 * deregisters.
 *
 * --expect-no-import: only check that ibv_import_device() fails with
 * EOPNOTSUPP, as it does with the stock rxe provider.
 *
 * Exit status 0 if everything held, 1 otherwise (the reason on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#define MR_LEN (1u << 20)
#define XFER_LEN (64u * 1024)
#define WRITE_OFF 4096u	       /* B writes its data here */
#define READ_OFF (512u * 1024) /* B reads A's pattern from here */
#define COPY_OFF (768u * 1024) /* B copies READ_OFF here (imported lkey) */
#define MSG_LEN 64u
#define PORT 1
#define GID_INDEX 1
#define ACCESS                                                                 \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ)
#define WC_TIMEOUT_MS 30000
#define PEER_TIMEOUT_MS 180000

static const char *who = "A";

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("selftest %s: ", who);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
	va_end(ap);
}

static void __attribute__((noreturn)) fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	fprintf(stderr, "selftest %s: FAIL: ", who);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static uint8_t pattern_a(size_t off)
{
	return (uint8_t)(off * 7 + 13);
}

static uint8_t pattern_b(size_t i)
{
	return (uint8_t)((i * 31 + 101) ^ 0x5a);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned long parse_ul(const char *s, const char *what)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || !*s || *end)
		fail("bad %s '%s'", what, s);
	return v;
}

/* Reads one line (up to \n) from fd within timeout_ms; "" on EOF. */
static void read_line(int fd, char *buf, size_t size, int timeout_ms)
{
	size_t n = 0;
	uint64_t end = now_ms() + timeout_ms;

	while (n + 1 < size) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = (int64_t)(end - now_ms());
		ssize_t r;

		if (left <= 0)
			fail("timed out after %d s waiting for the other "
			     "process",
			     timeout_ms / 1000);
		if (poll(&p, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			fail("poll: %s", strerror(errno));
		}
		if (!p.revents)
			continue;
		r = read(fd, buf + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail("read: %s", strerror(errno));
		if (r == 0 || buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
}

static void write_line(int fd, const char *line)
{
	size_t len = strlen(line);

	if (write(fd, line, len) != (ssize_t)len)
		fail("writing to the other process: %s", strerror(errno));
}

/* ---- B: the importer ---------------------------------------------------- */

/* Waits for one completion; checks its status, opcode and wr_id. */
static void wait_wc(struct ibv_cq *cq, enum ibv_wc_opcode opcode,
		    uint64_t wr_id, const char *what)
{
	uint64_t end = now_ms() + WC_TIMEOUT_MS;
	struct ibv_wc wc;
	int n;

	for (;;) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			fail("%s: ibv_poll_cq failed (%d)", what, n);
		if (n == 1)
			break;
		if (now_ms() > end)
			fail("%s: no completion within %d s", what,
			     WC_TIMEOUT_MS / 1000);
		usleep(1000);
	}
	if (wc.status != IBV_WC_SUCCESS)
		fail("%s: completion status %s (%d), vendor_err 0x%x", what,
		     ibv_wc_status_str(wc.status), wc.status, wc.vendor_err);
	if (wc.opcode != opcode || wc.wr_id != wr_id)
		fail("%s: completion opcode %d wr_id %" PRIu64
		     ", expected opcode %d wr_id %" PRIu64,
		     what, wc.opcode, wc.wr_id, opcode, wr_id);
}

/* Waits on the completion channel for the CQ's next event. */
static void wait_cq_event(struct ibv_comp_channel *ch, struct ibv_cq *cq)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int r;

	do
		r = poll(&p, 1, WC_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		fail("poll on the completion channel: %s", strerror(errno));
	if (r == 0)
		fail("no completion event within %d s", WC_TIMEOUT_MS / 1000);
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
		fail("ibv_get_cq_event: %s", strerror(errno));
	if (ev_cq != cq)
		fail("completion event for another CQ");
	ibv_ack_cq_events(cq, 1);
}

static void to_rts(struct ibv_qp *qp, uint32_t dest_qpn,
		   const union ibv_gid *dgid, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a;
	int r;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = PORT;
	a.qp_access_flags = ACCESS;
	r = ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      IBV_QP_ACCESS_FLAGS);
	if (r)
		fail("QP %u to INIT: %s", qp->qp_num, strerror(r));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = PORT;
	r = ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (r)
		fail("QP %u to RTR: %s", qp->qp_num, strerror(r));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	r = ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			      IBV_QP_MAX_QP_RD_ATOMIC);
	if (r)
		fail("QP %u to RTS: %s", qp->qp_num, strerror(r));
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq,
			      struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.srq = srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_send_sge = 1;
	if (!srq) {
		ia.cap.max_recv_wr = 16;
		ia.cap.max_recv_sge = 1;
	}
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		fail("ibv_create_qp on the imported PD: %s", strerror(errno));
	return qp;
}

/* What an EACCES from the send doorbell means. */
static const char *doorbell_hint(int r)
{
	if (r != EACCES)
		return "";
	return " (the send doorbell went through write(), which the kernel "
	       "refuses after exec)";
}

static void post(struct ibv_qp *qp, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad = NULL;
	int r;

	r = ibv_post_send(qp, wr, &bad);
	if (r)
		fail("%s: ibv_post_send: %s%s", what, strerror(r),
		     doorbell_hint(r));
}

static int child(int argc, char **argv)
{
	int cmd_fd, up, down;
	uint32_t pd_handle, mr_handle, a_lkey, a_rkey;
	uint64_t a_addr;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr, *lmr;
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	union ibv_gid gid;
	char gidstr[INET6_ADDRSTRLEN], line[64];
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_srq_init_attr sia;
	struct ibv_qp *qp1, *qp2;
	struct ibv_mw *mw;
	struct ibv_mw_bind bind;
	struct ibv_ah_attr aha;
	struct ibv_ah *ah;
	struct ibv_sge sge;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_send_wr wr;
	struct ibv_wc wc[2];
	uint8_t *local, *src, *rd1, *rd2, *msg, *rmsg;
	size_t local_len = 4 * XFER_LEN, i;
	int r, k, got, seen_send = 0, seen_recv = 0;
	uint64_t end;

	who = "B";
	if (argc != 11)
		fail("usage: selftest --child DEVICE CMD_FD PD MR ADDR LKEY "
		     "RKEY UP DOWN");
	cmd_fd = (int)parse_ul(argv[3], "cmd_fd");
	pd_handle = (uint32_t)parse_ul(argv[4], "PD handle");
	mr_handle = (uint32_t)parse_ul(argv[5], "MR handle");
	a_addr = parse_ul(argv[6], "address");
	a_lkey = (uint32_t)parse_ul(argv[7], "lkey");
	a_rkey = (uint32_t)parse_ul(argv[8], "rkey");
	up = (int)parse_ul(argv[9], "fd");
	down = (int)parse_ul(argv[10], "fd");

	ctx = ibv_import_device(cmd_fd);
	if (!ctx)
		fail("ibv_import_device(%d) on %s: %s%s", cmd_fd, argv[2],
		     strerror(errno),
		     errno == EOPNOTSUPP
			 ? " (the provider cannot import: set RDMAV_DRIVERS "
			   "to what tests/rxe-import/build prints)"
			 : "");
	say("imported the context of %s (cmd_fd %d, num_comp_vectors %d)",
	    ibv_get_device_name(ctx->device), cmd_fd, ctx->num_comp_vectors);

	pd = ibv_import_pd(ctx, pd_handle);
	if (!pd)
		fail("ibv_import_pd(%u): %s", pd_handle, strerror(errno));
	if (pd->handle != pd_handle)
		fail("imported PD has handle %u, not %u", pd->handle,
		     pd_handle);

	mr = ibv_import_mr(pd, mr_handle);
	if (!mr)
		fail("ibv_import_mr(%u): %s", mr_handle, strerror(errno));
	say("imported PD %u and MR %u: lkey 0x%x rkey 0x%x length %zu addr %p",
	    pd->handle, mr->handle, mr->lkey, mr->rkey, mr->length, mr->addr);
	if (mr->lkey != a_lkey || mr->rkey != a_rkey)
		fail("imported MR keys lkey 0x%x rkey 0x%x, A's are 0x%x 0x%x",
		     mr->lkey, mr->rkey, a_lkey, a_rkey);
	if (mr->length != MR_LEN)
		fail("imported MR length %zu, not %u", mr->length, MR_LEN);

	/* Queries: through the ioctl path, as everything below. */
	if (ibv_query_device(ctx, &dattr))
		fail("ibv_query_device: %s", strerror(errno));
	r = ibv_query_port(ctx, PORT, &pattr);
	if (r)
		fail("ibv_query_port(%d): %s", PORT, strerror(r));
	if (pattr.state != IBV_PORT_ACTIVE)
		fail("port %d is %s", PORT, ibv_port_state_str(pattr.state));
	if (ibv_query_gid(ctx, PORT, GID_INDEX, &gid))
		fail("ibv_query_gid(%d, %d): %s", PORT, GID_INDEX,
		     strerror(errno));
	inet_ntop(AF_INET6, gid.raw, gidstr, sizeof(gidstr));
	say("port %d active, mtu %d, GID %d %s", PORT, 128 << pattr.active_mtu,
	    GID_INDEX, gidstr);

	local = aligned_alloc(4096, local_len);
	if (!local)
		fail("out of memory");
	memset(local, 0, local_len);
	src = local;
	rd1 = local + XFER_LEN;
	rd2 = local + 2 * XFER_LEN;
	msg = local + 3 * XFER_LEN;
	rmsg = msg + 1024;
	for (i = 0; i < XFER_LEN; i++)
		src[i] = pattern_b(i);
	lmr = ibv_reg_mr(pd, local, local_len, ACCESS | IBV_ACCESS_MW_BIND);
	if (!lmr)
		fail("ibv_reg_mr on the imported PD: %s", strerror(errno));

	ch = ibv_create_comp_channel(ctx);
	if (!ch)
		fail("ibv_create_comp_channel: %s", strerror(errno));
	cq = ibv_create_cq(ctx, 64, NULL, ch, 0);
	if (!cq)
		fail("ibv_create_cq: %s", strerror(errno));
	r = ibv_req_notify_cq(cq, 0);
	if (r)
		fail("ibv_req_notify_cq: %s", strerror(r));

	memset(&sia, 0, sizeof(sia));
	sia.attr.max_wr = 16;
	sia.attr.max_sge = 1;
	srq = ibv_create_srq(pd, &sia);
	if (!srq)
		fail("ibv_create_srq on the imported PD: %s", strerror(errno));
	sge.addr = (uintptr_t)rmsg;
	sge.length = MSG_LEN;
	sge.lkey = lmr->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 100;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	r = ibv_post_srq_recv(srq, &rwr, &rbad);
	if (r)
		fail("ibv_post_srq_recv: %s", strerror(r));

	qp1 = make_qp(pd, cq, NULL);
	qp2 = make_qp(pd, cq, srq);
	to_rts(qp1, qp2->qp_num, &gid, pattr.active_mtu);
	to_rts(qp2, qp1->qp_num, &gid, pattr.active_mtu);
	say("QPs %u and %u connected (RC, port %d, GID index %d)", qp1->qp_num,
	    qp2->qp_num, PORT, GID_INDEX);

	/* A type 1 MW, bound through the send queue's doorbell. */
	mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	if (!mw)
		fail("ibv_alloc_mw on the imported PD: %s", strerror(errno));
	memset(&bind, 0, sizeof(bind));
	bind.wr_id = 1;
	bind.send_flags = IBV_SEND_SIGNALED;
	bind.bind_info.mr = lmr;
	bind.bind_info.addr = (uintptr_t)rd1;
	bind.bind_info.length = 4096;
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	r = ibv_bind_mw(qp1, mw, &bind);
	if (r)
		fail("ibv_bind_mw: %s%s", strerror(r), doorbell_hint(r));
	wait_cq_event(ch, cq);
	wait_wc(cq, IBV_WC_BIND_MW, 1, "MW bind");
	say("MW bound (rkey 0x%x), completion seen through the channel",
	    mw->rkey);

	memset(&aha, 0, sizeof(aha));
	aha.is_global = 1;
	aha.grh.dgid = gid;
	aha.grh.sgid_index = GID_INDEX;
	aha.grh.hop_limit = 64;
	aha.port_num = PORT;
	ah = ibv_create_ah(pd, &aha);
	if (!ah)
		fail("ibv_create_ah on the imported PD: %s", strerror(errno));
	r = ibv_destroy_ah(ah);
	if (r)
		fail("ibv_destroy_ah: %s", strerror(r));

	/* RDMA WRITE into A's MR, at A's address. */
	sge.addr = (uintptr_t)src;
	sge.length = XFER_LEN;
	sge.lkey = lmr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = a_addr + WRITE_OFF;
	wr.wr.rdma.rkey = mr->rkey;
	post(qp1, &wr, "RDMA WRITE");
	wait_wc(cq, IBV_WC_RDMA_WRITE, 2, "RDMA WRITE");
	say("RDMA WRITE of %u bytes to A's MR at 0x%" PRIx64 " done", XFER_LEN,
	    a_addr + WRITE_OFF);

	/* SEND to the QP on the SRQ. */
	snprintf((char *)msg, MSG_LEN, "hello from pid %d", (int)getpid());
	sge.addr = (uintptr_t)msg;
	sge.length = MSG_LEN;
	wr.wr_id = 3;
	wr.opcode = IBV_WR_SEND;
	post(qp1, &wr, "SEND");
	end = now_ms() + WC_TIMEOUT_MS;
	while (!seen_send || !seen_recv) {
		got = ibv_poll_cq(cq, 2, wc);
		if (got < 0)
			fail("SEND: ibv_poll_cq failed (%d)", got);
		for (k = 0; k < got; k++) {
			if (wc[k].status != IBV_WC_SUCCESS)
				fail("SEND: completion wr_id %" PRIu64
				     " status %s",
				     wc[k].wr_id,
				     ibv_wc_status_str(wc[k].status));
			if (wc[k].opcode == IBV_WC_SEND && wc[k].wr_id == 3)
				seen_send = 1;
			else if (wc[k].opcode == IBV_WC_RECV &&
				 wc[k].wr_id == 100 &&
				 wc[k].qp_num == qp2->qp_num)
				seen_recv = 1;
			else
				fail("SEND: unexpected completion opcode %d "
				     "wr_id %" PRIu64,
				     wc[k].opcode, wc[k].wr_id);
		}
		if (now_ms() > end)
			fail("SEND: no completions within %d s",
			     WC_TIMEOUT_MS / 1000);
		if (!got)
			usleep(1000);
	}
	if (memcmp(msg, rmsg, MSG_LEN))
		fail("the message received on the SRQ differs from the one "
		     "sent");
	say("SEND received through the SRQ: \"%s\"", (char *)rmsg);

	/* RDMA READ of A's own bytes, and of what we wrote. */
	sge.addr = (uintptr_t)rd1;
	sge.length = XFER_LEN;
	wr.wr_id = 4;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = a_addr + READ_OFF;
	post(qp1, &wr, "RDMA READ");
	wait_wc(cq, IBV_WC_RDMA_READ, 4, "RDMA READ");
	for (i = 0; i < XFER_LEN; i++)
		if (rd1[i] != pattern_a(READ_OFF + i))
			fail("RDMA READ from A's MR: byte %zu is 0x%02x, A "
			     "wrote 0x%02x",
			     i, rd1[i], pattern_a(READ_OFF + i));
	sge.addr = (uintptr_t)rd2;
	wr.wr_id = 5;
	wr.wr.rdma.remote_addr = a_addr + WRITE_OFF;
	post(qp1, &wr, "RDMA READ back");
	wait_wc(cq, IBV_WC_RDMA_READ, 5, "RDMA READ back");
	if (memcmp(rd2, src, XFER_LEN))
		fail("RDMA READ back differs from what the RDMA WRITE sent");
	say("RDMA READ of A's bytes and of the written bytes match");

	/* The imported lkey as a local key: copy within A's MR. */
	sge.addr = a_addr + READ_OFF;
	sge.length = XFER_LEN;
	sge.lkey = mr->lkey;
	wr.wr_id = 6;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = a_addr + COPY_OFF;
	wr.wr.rdma.rkey = mr->rkey;
	post(qp1, &wr, "RDMA WRITE from the imported MR");
	wait_wc(cq, IBV_WC_RDMA_WRITE, 6, "RDMA WRITE from the imported MR");
	say("RDMA WRITE with the imported lkey as source done");

	/* A checks its pages and the kernel's view while we hold the MR. */
	write_line(up, "ok\n");
	read_line(down, line, sizeof(line), PEER_TIMEOUT_MS);
	if (strcmp(line, "go"))
		fail("A did not answer (got '%s')", line);

	r = ibv_dealloc_mw(mw);
	if (r)
		fail("ibv_dealloc_mw: %s", strerror(r));
	if ((r = ibv_destroy_qp(qp1)) || (r = ibv_destroy_qp(qp2)))
		fail("ibv_destroy_qp: %s", strerror(r));
	r = ibv_destroy_srq(srq);
	if (r)
		fail("ibv_destroy_srq: %s", strerror(r));
	r = ibv_destroy_cq(cq);
	if (r)
		fail("ibv_destroy_cq: %s", strerror(r));
	r = ibv_destroy_comp_channel(ch);
	if (r)
		fail("ibv_destroy_comp_channel: %s", strerror(r));
	r = ibv_dereg_mr(lmr);
	if (r)
		fail("ibv_dereg_mr (B's own MR): %s", strerror(r));
	free(local);
	ibv_unimport_mr(mr);
	ibv_unimport_pd(pd);
	r = ibv_close_device(ctx);
	if (r)
		fail("ibv_close_device: %s", strerror(r));
	say("unimported MR and PD, closed the imported context");
	return 0;
}

/* ---- A: the exporter ---------------------------------------------------- */

static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list)
		fail("ibv_get_device_list: %s", strerror(errno));
	for (i = 0; i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), name))
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			fail("ibv_open_device(%s): %s", name, strerror(errno));
		break;
	}
	ibv_free_device_list(list);
	if (!ctx)
		fail("no RDMA device %s (%d devices)", name, n);
	return ctx;
}

/* `rdma resource show mr`: how many lines list an MR with this rkey. */
static int kernel_mr_count(const char *dev, uint32_t rkey)
{
	char line[1024], want_dev[128], want_rkey[32];
	FILE *f;
	int n = 0, st;

	snprintf(want_dev, sizeof(want_dev), "dev %s ", dev);
	snprintf(want_rkey, sizeof(want_rkey), " rkey 0x%x ", rkey);
	f = popen("rdma resource show mr 2>&1", "r");
	if (!f)
		fail("running rdma resource show mr: %s", strerror(errno));
	/* Each line as "<line> " (so that a field at the end matches too). */
	while (fgets(line, sizeof(line) - 1, f)) {
		size_t len = strcspn(line, "\n");

		while (len && line[len - 1] == ' ')
			len--;
		line[len] = ' ';
		line[len + 1] = '\0';
		if (strstr(line, want_dev) == line && strstr(line, want_rkey)) {
			n++;
			line[len] = '\0';
			say("rdma resource show mr: %s", line);
		}
	}
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st))
		fail("rdma resource show mr failed (status 0x%x; iproute2 "
		     "installed?)",
		     st);
	return n;
}

int main(int argc, char **argv)
{
	const char *dev = "rxe0";
	int expect_no_import = 0, i, fd, up[2], down[2], st, n;
	struct ibv_context *ctx, *ictx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;
	char line[64], self[4096];
	ssize_t len;
	size_t off;
	pid_t pid;

	if (argc > 1 && !strcmp(argv[1], "--child"))
		return child(argc, argv);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--expect-no-import"))
			expect_no_import = 1;
		else if (argv[i][0] == '-' || i != argc - 1)
			fail("usage: selftest [--expect-no-import] [DEVICE]");
		else
			dev = argv[i];
	}

	ctx = open_device(dev);

	if (expect_no_import) {
		fd = dup(ctx->cmd_fd);
		if (fd < 0)
			fail("dup: %s", strerror(errno));
		ictx = ibv_import_device(fd);
		if (ictx)
			fail("ibv_import_device succeeded on %s: the provider "
			     "in use can import (RDMAV_DRIVERS set?)",
			     dev);
		if (errno != EOPNOTSUPP)
			fail("ibv_import_device failed with %s, not EOPNOTSUPP",
			     strerror(errno));
		close(fd);
		ibv_close_device(ctx);
		say("PASS: ibv_import_device on %s fails with EOPNOTSUPP "
		    "(stock provider)",
		    dev);
		return 0;
	}

	pd = ibv_alloc_pd(ctx);
	if (!pd)
		fail("ibv_alloc_pd: %s", strerror(errno));
	fd = memfd_create("rxe-import-selftest", MFD_CLOEXEC);
	if (fd < 0)
		fail("memfd_create: %s", strerror(errno));
	if (ftruncate(fd, MR_LEN))
		fail("ftruncate: %s", strerror(errno));
	buf = mmap(NULL, MR_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (buf == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	for (off = 0; off < MR_LEN; off++)
		buf[off] = pattern_a(off);
	mr = ibv_reg_mr(pd, buf, MR_LEN, ACCESS);
	if (!mr)
		fail("ibv_reg_mr: %s", strerror(errno));
	say("%s: PD %u, MR %u over 1 MiB of memfd at %p: lkey 0x%x rkey 0x%x "
	    "(num_comp_vectors %d)",
	    dev, pd->handle, mr->handle, (void *)buf, mr->lkey, mr->rkey,
	    ctx->num_comp_vectors);

	/* B runs this program again (by its path: B's comm is selftest too). */
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len < 0)
		fail("readlink /proc/self/exe: %s", strerror(errno));
	self[len] = '\0';
	if (pipe2(up, O_CLOEXEC) || pipe2(down, O_CLOEXEC))
		fail("pipe2: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		/* dup() clears close-on-exec: these three survive exec. */
		char a[8][32];
		char *args[12];

		snprintf(a[0], sizeof(a[0]), "%d", dup(ctx->cmd_fd));
		snprintf(a[1], sizeof(a[1]), "%u", pd->handle);
		snprintf(a[2], sizeof(a[2]), "%u", mr->handle);
		snprintf(a[3], sizeof(a[3]), "0x%" PRIxPTR, (uintptr_t)buf);
		snprintf(a[4], sizeof(a[4]), "0x%x", mr->lkey);
		snprintf(a[5], sizeof(a[5]), "0x%x", mr->rkey);
		snprintf(a[6], sizeof(a[6]), "%d", dup(up[1]));
		snprintf(a[7], sizeof(a[7]), "%d", dup(down[0]));
		args[0] = argv[0];
		args[1] = "--child";
		args[2] = (char *)dev;
		for (i = 0; i < 8; i++)
			args[3 + i] = a[i];
		args[11] = NULL;
		execv(self, args);
		fprintf(stderr, "selftest A: FAIL: exec %s: %s\n", self,
			strerror(errno));
		_exit(127);
	}
	close(up[1]);
	close(down[0]);

	read_line(up[0], line, sizeof(line), PEER_TIMEOUT_MS);
	if (strcmp(line, "ok")) {
		waitpid(pid, &st, 0);
		fail("B failed (exit status %d)",
		     WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}

	for (off = 0; off < MR_LEN; off++) {
		uint8_t want;

		if (off >= WRITE_OFF && off < WRITE_OFF + XFER_LEN)
			want = pattern_b(off - WRITE_OFF);
		else if (off >= COPY_OFF && off < COPY_OFF + XFER_LEN)
			want = pattern_a(READ_OFF + off - COPY_OFF);
		else
			want = pattern_a(off);
		if (buf[off] != want)
			fail("memfd byte at offset %zu is 0x%02x, expected "
			     "0x%02x",
			     off, buf[off], want);
	}
	say("B's RDMA WRITEs landed in the memfd pages (and nothing else "
	    "changed)");

	n = kernel_mr_count(dev, mr->rkey);
	if (n != 1)
		fail("rdma resource show mr lists the MR (rkey 0x%x) %d times "
		     "while A and B both hold it, not once",
		     mr->rkey, n);

	write_line(down[1], "go\n");
	if (waitpid(pid, &st, 0) < 0)
		fail("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fail("B failed (exit status %d)",
		     WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));

	i = ibv_dereg_mr(mr);
	if (i)
		fail("ibv_dereg_mr after B unimported: %s", strerror(i));
	i = ibv_dealloc_pd(pd);
	if (i)
		fail("ibv_dealloc_pd: %s", strerror(i));
	munmap(buf, MR_LEN);
	close(fd);
	ibv_close_device(ctx);
	say("PASS: context, PD and MR imported and used by an exec'd process");
	return 0;
}
