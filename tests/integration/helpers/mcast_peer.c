// SPDX-License-Identifier: MIT
/*
 * mcast_peer: a client of a multicast group the daemon joined, for
 * test_mcast.py.
 *
 *   mcast_peer SOCKET PROFILE GROUP [NRECV]
 *
 * Attaches to PROFILE (local mode), takes the group with rdmad_mcast(),
 * and on the attached device makes, on a PD of its own, NRECV (default
 * 2) UD QPs attached to the group (ibv_attach_mcast with its MGID and
 * MLID, qkey the group's) and one more that sends one datagram to the
 * group through an AH of the group's attributes. Prints one JSON
 * document: {"mgid", "mlid", "qkey", "sent": bool, "payload",
 * "received": [text or null, ...]}. Exit status: 0 when it ran (what
 * arrived is for the test to judge), 1 when librdmad failed, 2 when the
 * verbs set-up failed. With MCAST_PEER_WAIT=MS in the environment it
 * sends nothing: it prints "attached" once its QPs are, then waits MS
 * for a datagram at each receiver (another process sends).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

#define GRH 40
#define SIZE 256
#define MAX_RX 4
#define WAIT_MS 3000

struct peer {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq[MAX_RX + 1];
	struct ibv_qp *qp[MAX_RX + 1];
	char buf[MAX_RX + 1][GRH + SIZE];
	struct ibv_mr *mr;
};

static void die(const char *what)
{
	fprintf(stderr, "mcast_peer: %s: %s\n", what, strerror(errno));
	exit(2);
}

static struct ibv_qp *ud_qp(struct peer *pr, struct ibv_cq *cq,
			    const struct rdmad_mcast *g)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = g->port_num,
				 .qkey = g->qkey };
	struct ibv_qp *qp = ibv_create_qp(pr->pd, &ia);

	if (!qp)
		die("ibv_create_qp");
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					  IBV_QP_PORT | IBV_QP_QKEY))
		die("modify to INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("modify to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify to RTS");
	return qp;
}

static void post_recv(struct peer *pr, int i)
{
	struct ibv_sge sge = { .addr = (uintptr_t)pr->buf[i],
			       .length = GRH + SIZE, .lkey = pr->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	if (ibv_post_recv(pr->qp[i], &wr, &bad))
		die("ibv_post_recv");
}

static void send_one(struct peer *pr, int i, const struct rdmad_mcast *g,
		     const char *payload)
{
	struct ibv_ah_attr aa = {
		.is_global = 1, .dlid = g->mlid, .sl = g->sl,
		.src_path_bits = g->src_path_bits,
		.static_rate = g->static_rate, .port_num = g->port_num,
		.grh = { .flow_label = g->flow_label,
			 .sgid_index = g->sgid_index,
			 .hop_limit = g->hop_limit,
			 .traffic_class = g->traffic_class },
	};
	struct ibv_sge sge = { .addr = (uintptr_t)pr->buf[i],
			       .length = (uint32_t)strlen(payload),
			       .lkey = pr->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_ah *ah;

	memcpy(aa.grh.dgid.raw, g->mgid, 16);
	ah = ibv_create_ah(pr->pd, &aa);
	if (!ah)
		die("ibv_create_ah");
	memcpy(pr->buf[i], payload, strlen(payload));
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = g->remote_qpn;
	wr.wr.ud.remote_qkey = g->qkey;
	if (ibv_post_send(pr->qp[i], &wr, &bad))
		die("ibv_post_send");
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	char got[MAX_RX][SIZE + 1] = { { 0 } }, mgid[INET6_ADDRSTRLEN];
	bool have[MAX_RX] = { false }, sent = false;
	struct peer pr = { 0 };
	struct rdmad_profile *p;
	struct rdmad_mcast g;
	int n = argc > 4 ? atoi(argv[4]) : 2, r;
	char payload[128];
	const char *wait_env = getenv("MCAST_PEER_WAIT");
	long wait_ms = wait_env ? atol(wait_env) : 0;
	struct rdmad *c;
	long end;

	if (argc < 4 || n < 0 || n > MAX_RX) {
		fprintf(stderr, "usage: mcast_peer SOCKET PROFILE GROUP [NRECV]\n");
		return 64;
	}
	c = rdmad_connect(argv[1]);
	p = c ? rdmad_attach(c, argv[2], RDMAD_ATTACH_LOCAL) : NULL;
	r = p ? rdmad_mcast(p, argv[3], &g) : -1;
	if (r < 0) {
		fprintf(stderr, "mcast_peer: %s\n", rdmad_last_error());
		return 1;
	}
	inet_ntop(AF_INET6, g.mgid, mgid, sizeof(mgid));
	pr.ctx = rdmad_context(p);
	if (!pr.ctx)
		die("rdmad_context");
	pr.pd = ibv_alloc_pd(pr.ctx);
	if (!pr.pd)
		die("ibv_alloc_pd");
	pr.mr = ibv_reg_mr(pr.pd, pr.buf, sizeof(pr.buf),
			   IBV_ACCESS_LOCAL_WRITE);
	if (!pr.mr)
		die("ibv_reg_mr");
	for (int i = 0; i <= n; i++) {
		pr.cq[i] = ibv_create_cq(pr.ctx, 8, NULL, NULL, 0);
		if (!pr.cq[i])
			die("ibv_create_cq");
		pr.qp[i] = ud_qp(&pr, pr.cq[i], &g);
	}
	for (int i = 0; i < n; i++) {
		if (ibv_attach_mcast(pr.qp[i], (union ibv_gid *)g.mgid,
				     g.mlid))
			die("ibv_attach_mcast");
		post_recv(&pr, i);
	}
	snprintf(payload, sizeof(payload), "to %s, pid %d", mgid,
		 (int)getpid());
	if (wait_ms) {
		printf("attached\n");
		fflush(stdout);
		sent = true;
	} else {
		send_one(&pr, n, &g, payload);
	}
	for (end = now_ms() + (wait_ms ? wait_ms : WAIT_MS); now_ms() < end;) {
		struct ibv_wc wc;
		bool all = sent;

		if (ibv_poll_cq(pr.cq[n], 1, &wc) == 1)
			sent = wc.status == IBV_WC_SUCCESS;
		for (int i = 0; i < n; i++) {
			if (!have[i] && ibv_poll_cq(pr.cq[i], 1, &wc) == 1) {
				have[i] = true;
				if (wc.status == IBV_WC_SUCCESS &&
				    wc.byte_len > GRH)
					memcpy(got[i], pr.buf[i] + GRH,
					       wc.byte_len - GRH < SIZE
						       ? wc.byte_len - GRH
						       : SIZE);
				else
					snprintf(got[i], sizeof(got[i]),
						 "status %d", wc.status);
			}
			all = all && have[i];
		}
		if (all)
			break;
		usleep(1000);
	}
	printf("{\"mgid\": \"%s\", \"mlid\": %u, \"qkey\": %u, \"sent\": %s, "
	       "\"payload\": \"%s\", \"received\": [",
	       mgid, g.mlid, g.qkey, sent ? "true" : "false", payload);
	for (int i = 0; i < n; i++)
		printf(have[i] ? "%s\"%s\"" : "%snull", i ? ", " : "", got[i]);
	printf("]}\n");
	for (int i = 0; i < n; i++)
		ibv_detach_mcast(pr.qp[i], (union ibv_gid *)g.mgid, g.mlid);
	rdmad_detach(p);
	rdmad_close(c);
	return 0;
}
