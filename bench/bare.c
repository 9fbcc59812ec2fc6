// SPDX-License-Identifier: MIT
/*
 * bare: the baseline of the daemon's start, stop and memory. It makes
 * the verbs calls a profile's objects need, in a plain loop, with
 * nothing around them: open the device, allocate PDs, create memfds,
 * map them and register MRs, create CQs, create QPs and move them to
 * INIT. Then it says READY=1 on $NOTIFY_SOCKET (sd_notify, as rdmad
 * does), waits for SIGTERM, destroys everything in reverse order and
 * exits. bench/life times both programs the same way.
 *
 *   bare [-d IBDEV] [-p PDS] [-m MRS] [-s MR_BYTES] [-c CQS] [-q QPS]
 *        [-T THREADS] [-x]
 *
 * MR i is registered in PD i % PDS (one PD is allocated when MRs or QPs
 * need one and -p is 0), with local_write access, over its own memfd of
 * MR_BYTES (default 4096). QPs are RC with 16 send/recv WRs and one SGE,
 * on PD 0 and CQ 0 (one CQ is created when -c is 0); CQs have 256
 * entries. These are rdmad's defaults: bench/run writes configurations
 * declaring exactly these objects. -T registers the MRs from THREADS
 * threads (MR i on thread i % THREADS), each doing its own memfd, mmap
 * and ibv_reg_mr. -x exits right after READY=1, without waiting.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <systemd/sd-daemon.h>

struct region {
	int fd;
	void *addr;
	struct ibv_mr *mr;
};

static struct ibv_context *ctx;
static struct ibv_pd **pds;
static struct region *mrs;
static struct ibv_cq **cqs;
static struct ibv_qp **qps;
static long n_pd, n_mr, n_cq, n_qp, n_threads = 1;
static size_t mr_bytes = 4096;

static void fail(const char *what, long i)
{
	fprintf(stderr, "bare: %s %ld: %s\n", what, i, strerror(errno));
	exit(1);
}

static void mr_create(long i)
{
	struct region *r = &mrs[i];

	r->fd = memfd_create("bare", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (r->fd < 0)
		fail("memfd_create", i);
	if (ftruncate(r->fd, (off_t)mr_bytes) < 0)
		fail("ftruncate", i);
	r->addr = mmap(NULL, mr_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		       r->fd, 0);
	if (r->addr == MAP_FAILED)
		fail("mmap", i);
	r->mr = ibv_reg_mr(pds[i % n_pd], r->addr, mr_bytes,
			   IBV_ACCESS_LOCAL_WRITE);
	if (!r->mr)
		fail("ibv_reg_mr", i);
}

static void *mr_thread(void *arg)
{
	long k = (long)arg;

	for (long i = k; i < n_mr; i += n_threads)
		mr_create(i);
	return NULL;
}

static void qp_create(long i)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cqs[0],
		.recv_cq = cqs[0],
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = 0,
	};

	qps[i] = ibv_create_qp(pds[0], &ia);
	if (!qps[i])
		fail("ibv_create_qp", i);
	errno = ibv_modify_qp(qps[i], &attr,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS);
	if (errno)
		fail("ibv_modify_qp INIT", i);
}

static void open_device(const char *name)
{
	struct ibv_device **list;
	int n;

	list = ibv_get_device_list(&n);
	if (!list)
		fail("ibv_get_device_list", 0);
	for (int i = 0; i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "bare: cannot open device %s\n", name);
		exit(1);
	}
}

static void *xcalloc(long n, size_t size)
{
	void *p = calloc(n ? (size_t)n : 1, size);

	if (!p)
		fail("calloc", n);
	return p;
}

int main(int argc, char **argv)
{
	const char *ibdev = "rxe0";
	bool hold = true;
	pthread_t *threads;
	sigset_t mask;
	int opt, sig;

	while ((opt = getopt(argc, argv, "d:p:m:s:c:q:T:x")) != -1) {
		switch (opt) {
		case 'd':
			ibdev = optarg;
			break;
		case 'p':
			n_pd = atol(optarg);
			break;
		case 'm':
			n_mr = atol(optarg);
			break;
		case 's':
			mr_bytes = strtoull(optarg, NULL, 0);
			break;
		case 'c':
			n_cq = atol(optarg);
			break;
		case 'q':
			n_qp = atol(optarg);
			break;
		case 'T':
			n_threads = atol(optarg);
			break;
		case 'x':
			hold = false;
			break;
		default:
			fprintf(stderr, "usage: bare [-d IBDEV] [-p PDS] "
					"[-m MRS] [-s MR_BYTES] [-c CQS] "
					"[-q QPS] [-T THREADS] [-x]\n");
			return 2;
		}
	}
	if ((n_mr || n_qp) && !n_pd)
		n_pd = 1;
	if (n_qp && !n_cq)
		n_cq = 1;
	if (n_threads < 1)
		n_threads = 1;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);

	pds = xcalloc(n_pd, sizeof(*pds));
	mrs = xcalloc(n_mr, sizeof(*mrs));
	cqs = xcalloc(n_cq, sizeof(*cqs));
	qps = xcalloc(n_qp, sizeof(*qps));

	open_device(ibdev);
	for (long i = 0; i < n_pd; i++)
		if (!(pds[i] = ibv_alloc_pd(ctx)))
			fail("ibv_alloc_pd", i);
	if (n_threads == 1) {
		for (long i = 0; i < n_mr; i++)
			mr_create(i);
	} else {
		threads = xcalloc(n_threads, sizeof(*threads));
		for (long k = 0; k < n_threads; k++)
			if ((errno = pthread_create(&threads[k], NULL,
						    mr_thread, (void *)k)))
				fail("pthread_create", k);
		for (long k = 0; k < n_threads; k++)
			pthread_join(threads[k], NULL);
		free(threads);
	}
	for (long i = 0; i < n_cq; i++)
		if (!(cqs[i] = ibv_create_cq(ctx, 256, NULL, NULL, 0)))
			fail("ibv_create_cq", i);
	for (long i = 0; i < n_qp; i++)
		qp_create(i);

	sd_notify(0, "READY=1");
	if (hold && getenv("NOTIFY_SOCKET"))
		sigwait(&mask, &sig);

	for (long i = n_qp; i-- > 0;)
		ibv_destroy_qp(qps[i]);
	for (long i = n_cq; i-- > 0;)
		ibv_destroy_cq(cqs[i]);
	for (long i = n_mr; i-- > 0;) {
		ibv_dereg_mr(mrs[i].mr);
		munmap(mrs[i].addr, mr_bytes);
		close(mrs[i].fd);
	}
	for (long i = n_pd; i-- > 0;)
		ibv_dealloc_pd(pds[i]);
	ibv_close_device(ctx);
	free(pds);
	free(mrs);
	free(cqs);
	free(qps);
	return 0;
}
