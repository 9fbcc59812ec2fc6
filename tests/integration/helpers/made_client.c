// SPDX-License-Identifier: MIT
/*
 * made_client: a librdmad client that makes a CQ, an SRQ and a QP in a
 * shared profile's context through rdmad_create_cq/srq/qp() (which tell
 * the daemon they are this process's), for tests/integration/
 * test_shared_orphans.py.
 *
 *   made_client SOCKET PROFILE PD
 *
 * Prints "qp_num=Q" once made, then waits for a line on stdin: "undo"
 * destroys them with rdmad_destroy_*() and prints "undone"; end of
 * input (or being killed) leaves them to the daemon. Exit status 0, or
 * 1 with "error WHAT: MESSAGE" on stdout.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

static int fail(const char *what, const char *msg)
{
	printf("error %s: %s\n", what, msg ? msg : strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct rdmad_profile *p;
	struct ibv_srq *srq;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_pd *pd;
	struct rdmad *c;
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 4)
		return fail("args", "made_client SOCKET PROFILE PD");
	c = rdmad_connect(argv[1]);
	if (!c)
		return fail("connect", rdmad_last_error());
	p = rdmad_attach(c, argv[2], RDMAD_ATTACH_SHARED);
	if (!p)
		return fail("attach", rdmad_last_error());
	pd = rdmad_pd(p, argv[3]);
	if (!pd)
		return fail("pd", rdmad_last_error());
	cq = rdmad_create_cq(p, 8, NULL, NULL, 0);
	if (!cq)
		return fail("cq", rdmad_last_error());
	srq = rdmad_create_srq(p, pd, &sa);
	if (!srq)
		return fail("srq", rdmad_last_error());
	qa.send_cq = qa.recv_cq = cq;
	qp = rdmad_create_qp(p, pd, &qa);
	if (!qp)
		return fail("qp", rdmad_last_error());
	printf("qp_num=%u\n", qp->qp_num);
	if (!fgets(line, sizeof(line), stdin))
		return 0;
	if (rdmad_destroy_qp(p, qp) < 0 || rdmad_destroy_srq(p, srq) < 0 ||
	    rdmad_destroy_cq(p, cq) < 0)
		return fail("destroy", rdmad_last_error());
	printf("undone\n");
	if (!fgets(line, sizeof(line), stdin))
		return 0;
	return 0;
}
