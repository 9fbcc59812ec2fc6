// SPDX-License-Identifier: MIT
/*
 * target_peer: a remote peer of an rdmad target, with librdmad's helper.
 * It attaches to a profile (for a context and a PD), connects an RC QP of
 * its own to the target, RDMA-writes TEXT into the first range the target
 * granted, reads it back, and prints what it got.
 *
 *   target_peer [-s SOCKET] [-t TOKEN] [-o OFFSET] PROFILE PD ADDRESS TEXT
 *
 * Exit status: 0 when the text came back, 1 when an RDMA operation
 * failed (printed: its completion status), 2 when setting up failed.
 *
 * Build: cc target_peer.c $(pkg-config --cflags --libs rdmad libibverbs)
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

#define BUF 4096

/* Post one RDMA operation and wait for its completion: its status. */
static int rdma_op(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
		   enum ibv_wr_opcode op, size_t len,
		   const struct rdmad_target_range *r, uint64_t off)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr,
			       .length = (uint32_t)len,
			       .lkey = mr->lkey };
	struct ibv_send_wr *bad, wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = r->addr + off, .rkey = r->rkey },
	};
	struct ibv_wc wc;
	int n;

	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	return n < 0 ? -1 : (int)wc.status;
}

int main(int argc, char **argv)
{
	const char *sock = NULL, *token = NULL;
	struct rdmad_target_range r[8];
	struct rdmad_target_conn *conn;
	struct rdmad_profile *p;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	struct rdmad *c;
	uint64_t off = 0;
	char *buf;
	size_t len;
	int opt, n, st;

	while ((opt = getopt(argc, argv, "s:t:o:h")) != -1) {
		if (opt == 's')
			sock = optarg;
		else if (opt == 't')
			token = optarg;
		else if (opt == 'o')
			off = strtoull(optarg, NULL, 0);
		else {
			fprintf(opt == 'h' ? stdout : stderr,
				"Usage: target_peer [-s SOCKET] [-t TOKEN] "
				"[-o OFFSET] PROFILE PD ADDRESS TEXT\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (argc - optind != 4) {
		fprintf(stderr, "target_peer: PROFILE PD ADDRESS TEXT\n");
		return 2;
	}
	len = strlen(argv[optind + 3]);
	if (!(c = rdmad_connect(sock)) ||
	    !(p = rdmad_attach(c, argv[optind], 0)) ||
	    !(pd = rdmad_pd(p, argv[optind + 1]))) {
		fprintf(stderr, "target_peer: %s\n", rdmad_last_error());
		return 2;
	}
	buf = calloc(1, BUF);
	cq = ibv_create_cq(rdmad_context(p), 8, NULL, NULL, 0);
	mr = buf ? ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE) : NULL;
	qp = cq ? ibv_create_qp(pd, &(struct ibv_qp_init_attr){
					    .send_cq = cq, .recv_cq = cq,
					    .qp_type = IBV_QPT_RC,
					    .cap = { .max_send_wr = 4,
						     .max_recv_wr = 1,
						     .max_send_sge = 1,
						     .max_recv_sge = 1 } })
		: NULL;
	if (!mr || !qp || len == 0 || len > BUF) {
		fprintf(stderr, "target_peer: cannot set up a QP\n");
		return 2;
	}
	n = rdmad_target_connect(qp, argv[optind + 2], token,
				 token ? strlen(token) : 0, r, 8, &conn);
	if (n < 0) {
		fprintf(stderr, "target_peer: %s\n", rdmad_last_error());
		return 2;
	}
	for (int i = 0; i < n && i < 8; i++)
		printf("range %d addr 0x%" PRIx64 " rkey 0x%x length %" PRIu64
		       "\n",
		       i, r[i].addr, r[i].rkey, r[i].length);
	memcpy(buf, argv[optind + 3], len);
	st = rdma_op(qp, cq, mr, IBV_WR_RDMA_WRITE, len, &r[0], off);
	if (st != IBV_WC_SUCCESS) {
		printf("write: %s\n", st < 0 ? "post failed"
					     : ibv_wc_status_str(st));
		return 1;
	}
	memset(buf, 0, len);
	st = rdma_op(qp, cq, mr, IBV_WR_RDMA_READ, len, &r[0], off);
	if (st != IBV_WC_SUCCESS) {
		printf("read: %s\n", st < 0 ? "post failed"
					    : ibv_wc_status_str(st));
		return 1;
	}
	printf("read back: %.*s\n", (int)len, buf);
	st = memcmp(buf, argv[optind + 3], len) ? 1 : 0;
	rdmad_target_disconnect(conn);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	free(buf);
	rdmad_detach(p);
	rdmad_close(c);
	return st;
}
