// SPDX-License-Identifier: MIT
/*
 * attachb: the cost of getting a registered buffer (4 KiB unless told),
 * N times in one process, four ways:
 *
 *   attachb -m attach -s SOCKET -P PROFILE -n N [-j PROCS]
 *       rdmad_attach(PROFILE, local mode) + rdmad_detach, on one
 *       connection (librdmad: receive the memfd, map it, open the
 *       device, allocate a PD, register the MR, report the keys; then
 *       undo all of it).
 *   attachb -m shared -s SOCKET -P PROFILE -n N [-j PROCS]
 *       the same in shared mode (RDMAD_ATTACH_SHARED): receive the
 *       daemon's cmd_fd and the MR table's (no memory's fd: each is
 *       asked for when first mapped), import the context
 *       (ibv_import_device); then close. The PDs, the MRs and the
 *       memories' mappings come when the program first asks for them
 *       (librdmad(3)), which this loop does not: -m firstuse measures
 *       that. Nothing is registered in this process.
 *   attachb -m verbs [-d IBDEV] [-b BYTES] -n N
 *       the bare verbs calls attach replaces: ibv_get_device_list,
 *       ibv_open_device, ibv_alloc_pd, memfd_create + ftruncate + mmap,
 *       ibv_reg_mr; then ibv_dereg_mr, munmap, close, ibv_dealloc_pd,
 *       ibv_close_device.
 *   attachb -m firstuse -s SOCKET -P PROFILE -M MR [-N MR2] -n N
 *       shared mode, N cycles of: attach, rdmad_pd() of the MR's PD
 *       (untimed), then, timed, the first rdmad_mr(MR) (librdmad finds
 *       it in the MR table, asks the daemon for its memory's fd, maps
 *       the memory, imports the MR and checks its keys) and, on the
 *       same context, a bare ibv_import_mr() of the same handle then
 *       ibv_unimport_mr() (the floor), in alternating order; with -N,
 *       then the first rdmad_mr(MR2), an MR of the same memory (mapped
 *       by then: the lookup, the import and the check); detach.
 *       Prints "first_use_us X", "bare_import_us Y" and with -N
 *       "first_use_mapped_us Z", the medians; X and Y each over the
 *       cycles in which that call came first after the PD (like with
 *       like: the call second finds the first's caches warm), and
 *       "first_use_second_us", "bare_import_second_us" over the others.
 *   attachb ... -A (shared, firstuse)
 *       attach with RDMAD_ATTACH_MAP too: every memory mapped before
 *       the attach returns (their fds with the answer), so that a first
 *       rdmad_mr() is the lookup, the import and the check.
 *   attachb -m scm [-k FDS] -n N
 *       the floor of any daemon that passes memory: one SCM_RIGHTS
 *       round trip over a SOCK_SEQPACKET socket pair (a request out, an
 *       answer back with a memfd, which is closed) with a forked server;
 *       with -k, FDS memfds in each answer (at most SCM_FDS_MAX), each
 *       closed: what handing a client every memory's fd with its
 *       attach would add per memory.
 *
 * -j PROCS (attach and shared): PROCS processes at once, each with its
 * own connection doing N attach + detach cycles (the 200-client loop of
 * tests/integration/test_shared_mode.py is -j 4 -n 50). They connect
 * first, then start together; the time is from their start to the last
 * one's end (each reads the clock after its last detach), over N *
 * PROCS, and "ops_per_s" is their attaches per second.
 *
 * -w (attach, shared, verbs): one cycle first, untimed: the process's
 * first device list and provider load stay out of a short loop.
 *
 * Prints "us_per_op X" (wall time of the loop / N).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* -w: one cycle first, untimed (the process's first device list and
 * provider load stay out); the loop then starts its clock here. */
static int warm;
static double t_start;
/* -A: RDMAD_ATTACH_MAP with shared attaches. */
static unsigned int map_flag;

static int fail(const char *what)
{
	fprintf(stderr, "attachb: %s: %s\n", what, strerror(errno));
	return 1;
}

static int attach_cycles(struct rdmad *c, const char *profile,
			 unsigned int flags, long n)
{
	struct rdmad_profile *p;

	for (long i = 0; i < n; i++) {
		p = rdmad_attach(c, profile, flags);
		if (!p) {
			fprintf(stderr, "attachb: attach %ld: %s\n", i,
				rdmad_last_error());
			return 1;
		}
		if ((flags & RDMAD_ATTACH_SHARED) &&
		    rdmad_mode(p) != RDMAD_MODE_SHARED) {
			fprintf(stderr, "attachb: attach %ld: not shared\n", i);
			return 1;
		}
		if (rdmad_detach(p) < 0) {
			fprintf(stderr, "attachb: detach %ld: %s\n", i,
				rdmad_last_error());
			return 1;
		}
	}
	return 0;
}

static int loop_attach(const char *sock, const char *profile,
		       unsigned int flags, long n)
{
	struct rdmad *c = rdmad_connect(sock);
	int r;

	if (!c) {
		fprintf(stderr, "attachb: connect: %s\n", rdmad_last_error());
		return 1;
	}
	r = 0;
	if (warm) {
		r = attach_cycles(c, profile, flags, 1);
		t_start = now();
	}
	if (!r)
		r = attach_cycles(c, profile, flags, n);
	rdmad_close(c);
	return r;
}

/*
 * procs processes, each connected, then all released at once: the time
 * from their release to the last one's end, in *secs.
 */
static int loop_attach_procs(const char *sock, const char *profile,
			     unsigned int flags, long n, long procs,
			     double *secs)
{
	int ready[2], go[2], ends[2], st, r = 0;
	double t0, end, last = 0;
	char b;
	long i;

	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0 ||
	    pipe2(ends, O_CLOEXEC) < 0)
		return fail("pipe");
	for (i = 0; i < procs; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return fail("fork");
		if (pid == 0) {
			struct rdmad *c;

			close(go[1]);
			c = rdmad_connect(sock);
			if (!c) {
				fprintf(stderr, "attachb: connect: %s\n",
					rdmad_last_error());
				/* Not ready, but the others are released. */
				(void)!write(ready[1], "x", 1);
				_exit(1);
			}
			if (write(ready[1], "r", 1) != 1 ||
			    read(go[0], &b, 1) < 0)
				_exit(1);
			if (attach_cycles(c, profile, flags, n))
				_exit(1);
			end = now();
			if (write(ends[1], &end, sizeof(end)) !=
			    (ssize_t)sizeof(end))
				_exit(1);
			rdmad_close(c);
			_exit(0);
		}
	}
	close(ready[1]);
	close(ends[1]);
	close(go[0]);
	for (i = 0; i < procs; i++)
		if (read(ready[0], &b, 1) != 1 || b != 'r')
			r = 1;
	t0 = now();
	close(go[1]); /* every child's read() returns: go */
	while (read(ends[0], &end, sizeof(end)) == (ssize_t)sizeof(end))
		last = end > last ? end : last;
	while (wait(&st) > 0)
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			r = 1;
	*secs = last - t0;
	return r;
}

static int loop_verbs(const char *ibdev, size_t bytes, long n)
{
	for (long i = warm ? -1 : 0; i < n; i++) {
		struct ibv_context *ctx = NULL;
		struct ibv_device **list;
		struct ibv_pd *pd;
		struct ibv_mr *mr;
		void *addr;
		int k, fd;

		list = ibv_get_device_list(&k);
		if (!list)
			return fail("ibv_get_device_list");
		while (k-- > 0 && !ctx)
			if (!strcmp(ibv_get_device_name(list[k]), ibdev))
				ctx = ibv_open_device(list[k]);
		ibv_free_device_list(list);
		if (!ctx)
			return fail("ibv_open_device");
		pd = ibv_alloc_pd(ctx);
		if (!pd)
			return fail("ibv_alloc_pd");
		fd = memfd_create("attachb", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0)
			return fail("memfd");
		addr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			    0);
		if (addr == MAP_FAILED)
			return fail("mmap");
		mr = ibv_reg_mr(pd, addr, bytes, IBV_ACCESS_LOCAL_WRITE);
		if (!mr)
			return fail("ibv_reg_mr");
		ibv_dereg_mr(mr);
		munmap(addr, bytes);
		close(fd);
		ibv_dealloc_pd(pd);
		ibv_close_device(ctx);
		if (i < 0)
			t_start = now();
	}
	return 0;
}

/* The kernel's limit of fds in one SCM_RIGHTS message (SCM_MAX_FD). */
#define SCM_FDS_MAX 253

static void scm_server(int s, int k)
{
	char cbuf[CMSG_SPACE(sizeof(int) * SCM_FDS_MAX)], req[64];
	int memfd[SCM_FDS_MAX];
	struct cmsghdr *cm;
	struct msghdr mh;
	struct iovec iov;

	for (int i = 0; i < k; i++) {
		memfd[i] = memfd_create("attachb", MFD_CLOEXEC);
		if (memfd[i] < 0 || ftruncate(memfd[i], 4096) < 0)
			_exit(1);
	}
	while (recv(s, req, sizeof(req), 0) > 0) {
		memset(cbuf, 0, sizeof(cbuf));
		iov = (struct iovec){ .iov_base = req, .iov_len = 16 };
		mh = (struct msghdr){ .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = cbuf,
				      .msg_controllen =
					  CMSG_SPACE(sizeof(int) * (size_t)k) };
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)k);
		memcpy(CMSG_DATA(cm), memfd, sizeof(int) * (size_t)k);
		if (sendmsg(s, &mh, MSG_NOSIGNAL) < 0)
			_exit(1);
	}
	_exit(0);
}

static int loop_scm(long n, int k)
{
	char cbuf[CMSG_SPACE(sizeof(int) * SCM_FDS_MAX)], buf[64] = "attach";
	int fds[SCM_FDS_MAX];
	struct cmsghdr *cm;
	struct msghdr mh;
	struct iovec iov;
	int sv[2], st;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return fail("socketpair");
	pid = fork();
	if (pid < 0)
		return fail("fork");
	if (pid == 0) {
		close(sv[0]);
		scm_server(sv[1], k);
	}
	close(sv[1]);
	for (long i = 0; i < n; i++) {
		if (send(sv[0], buf, 16, MSG_NOSIGNAL) < 0)
			return fail("send");
		iov = (struct iovec){ .iov_base = buf, .iov_len = sizeof(buf) };
		mh = (struct msghdr){ .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = cbuf,
				      .msg_controllen = sizeof(cbuf) };
		if (recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC) <= 0)
			return fail("recvmsg");
		cm = CMSG_FIRSTHDR(&mh);
		if (!cm || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len != CMSG_LEN(sizeof(int) * (size_t)k) ||
		    (mh.msg_flags & MSG_CTRUNC)) {
			errno = EPROTO;
			return fail("not the fds asked for in the answer");
		}
		memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)k);
		for (int j = 0; j < k; j++)
			close(fds[j]);
	}
	close(sv[0]);
	waitpid(pid, &st, 0);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_of(double *v, long n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The first rdmad_mr() of an MR against a bare ibv_import_mr() of it. */
static int loop_firstuse(const char *sock, const char *profile,
			 const char *name, const char *name2, long n)
{
	struct rdmad *c = rdmad_connect(sock);
	/* [0]: the cycles in which that call came first, [1]: second. */
	double *first[2] = {calloc((size_t)n, sizeof(double)),
			    calloc((size_t)n, sizeof(double))};
	double *bare[2] = {calloc((size_t)n, sizeof(double)),
			   calloc((size_t)n, sizeof(double))};
	long n_first[2] = {0, 0}, n_bare[2] = {0, 0};
	double *mapped = calloc((size_t)n, sizeof(double));
	uint32_t handle = 0; /* the MR's: the same in every cycle */
	int r = 0;

	if (!c || !first[0] || !first[1] || !bare[0] || !bare[1] || !mapped) {
		fprintf(stderr, "attachb: connect: %s\n", rdmad_last_error());
		return 1;
	}
	for (long i = 0; i < n && !r; i++) {
		struct rdmad_profile *p =
		    rdmad_attach(c, profile, RDMAD_ATTACH_SHARED | map_flag);
		struct ibv_mr *mr = NULL, *again;
		struct ibv_pd *pd = NULL;
		double t0, t1;

		if (!p || !(pd = rdmad_pd(p, rdmad_pd_name(p, 0)))) {
			fprintf(stderr, "attachb: attach: %s\n",
				rdmad_last_error());
			r = 1;
			break;
		}
		for (int k = 0; k < 2; k++) {
			/* Alternate which goes first: neither gets the
			 * other's warm caches every time. */
			if ((k == 0) == (i % 2 == 0)) {
				t0 = now();
				mr = rdmad_mr(p, name);
				t1 = now();
				first[k][n_first[k]++] = (t1 - t0) * 1e6;
				if (!mr)
					r = 1;
				else
					handle = mr->handle;
			} else {
				/* Cycle 0 (rdmad_mr() first) gave it. */
				if (!handle) {
					r = 1;
					break;
				}
				t0 = now();
				again = ibv_import_mr(pd, handle);
				t1 = now();
				bare[k][n_bare[k]++] = (t1 - t0) * 1e6;
				if (!again)
					r = 1;
				else
					ibv_unimport_mr(again);
			}
		}
		if (name2 && !r) {
			t0 = now();
			if (!rdmad_mr(p, name2))
				r = 1;
			mapped[i] = (now() - t0) * 1e6;
		}
		if (rdmad_detach(p) < 0)
			r = 1;
	}
	if (!r && (!n_first[0] || !n_bare[0] || !n_first[1] || !n_bare[1])) {
		fprintf(stderr, "attachb: first use: -n 2 at least\n");
		r = 1;
	} else if (!r) {
		printf("first_use_us %.3f\nbare_import_us %.3f\n"
		       "first_use_second_us %.3f\nbare_import_second_us %.3f\n",
		       median_of(first[0], n_first[0]),
		       median_of(bare[0], n_bare[0]),
		       median_of(first[1], n_first[1]),
		       median_of(bare[1], n_bare[1]));
		if (name2)
			printf("first_use_mapped_us %.3f\n",
			       median_of(mapped, n));
	} else {
		fprintf(stderr, "attachb: first use: %s\n",
			rdmad_last_error());
	}
	for (int k = 0; k < 2; k++) {
		free(first[k]);
		free(bare[k]);
	}
	free(mapped);
	rdmad_close(c);
	return r;
}

int main(int argc, char **argv)
{
	const char *mode = NULL, *sock = NULL, *profile = "p", *ibdev = "rxe0";
	const char *mr = "r0", *mr2 = NULL;
	size_t bytes = 4096;
	long n = 100, procs = 1;
	double t0, t1, secs = 0;
	int opt, r, scm_fds = 1;

	while ((opt = getopt(argc, argv, "m:s:P:d:b:n:j:k:wM:N:A")) != -1) {
		switch (opt) {
		case 'm':
			mode = optarg;
			break;
		case 's':
			sock = optarg;
			break;
		case 'P':
			profile = optarg;
			break;
		case 'd':
			ibdev = optarg;
			break;
		case 'b':
			bytes = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			n = atol(optarg);
			break;
		case 'j':
			procs = atol(optarg);
			break;
		case 'k':
			scm_fds = atoi(optarg);
			break;
		case 'A':
			map_flag = RDMAD_ATTACH_MAP;
			break;
		case 'w':
			warm = 1;
			break;
		case 'M':
			mr = optarg;
			break;
		case 'N':
			mr2 = optarg;
			break;
		default:
			mode = NULL;
			optind = argc + 1;
			break;
		}
	}
	if (!mode || n < 1 || procs < 1 || scm_fds < 1 ||
	    scm_fds > SCM_FDS_MAX || optind != argc) {
		fprintf(stderr,
			"usage: attachb -m attach|shared|firstuse|"
			"verbs|scm [-s SOCKET] [-P PROFILE] [-M MR] [-N MR2] "
			"[-d IBDEV] [-b BYTES] [-j PROCS] [-k FDS] [-w] -n N\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	t0 = now();
	if ((!strcmp(mode, "attach") || !strcmp(mode, "shared")) &&
	    procs > 1) {
		r = loop_attach_procs(sock, profile,
				      !strcmp(mode, "shared")
					  ? RDMAD_ATTACH_SHARED | map_flag
					  : RDMAD_ATTACH_LOCAL,
				      n, procs, &secs);
		if (r)
			return r;
		printf("us_per_op %.3f\nops_per_s %.1f\n",
		       secs * 1e6 / (double)(n * procs),
		       (double)(n * procs) / secs);
		return 0;
	}
	if (!strcmp(mode, "firstuse"))
		return loop_firstuse(sock, profile, mr, mr2, n);
	if (!strcmp(mode, "attach"))
		r = loop_attach(sock, profile, RDMAD_ATTACH_LOCAL, n);
	else if (!strcmp(mode, "shared"))
		r = loop_attach(sock, profile, RDMAD_ATTACH_SHARED | map_flag,
				n);
	else if (!strcmp(mode, "verbs"))
		r = loop_verbs(ibdev, bytes, n);
	else if (!strcmp(mode, "scm"))
		r = loop_scm(n, scm_fds);
	else
		r = 2;
	t1 = now();
	if (r)
		return r;
	if (t_start > 0)
		t0 = t_start;
	printf("us_per_op %.3f\n", (t1 - t0) * 1e6 / (double)n);
	return 0;
}
