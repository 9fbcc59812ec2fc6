// SPDX-License-Identifier: MIT
/*
 * attach_bench: what an rdmad attach costs next to the verbs calls it
 * replaces.
 *
 *   attach_bench [-s SOCKET] [-n N] [-r ROUNDS] [-m auto|shared|local] PROFILE
 *
 * Meant for a profile with one small memory, one PD and one MR over it.
 * In each round it times, N times each and interleaved round by round:
 *
 *   bare     ibv_get_device_list, ibv_open_device, ibv_alloc_pd and
 *            ibv_reg_mr of a 4 KiB buffer (setup), then ibv_dereg_mr,
 *            ibv_dealloc_pd, ibv_close_device (teardown): what a process
 *            does without rdmad, on the profile's device, with the MR's
 *            length and the access of attach_bench.sh's profile (local
 *            and remote write, remote read);
 *   attach   rdmad_attach (setup) and rdmad_detach (teardown) on one
 *            connection;
 *   connect  rdmad_connect + rdmad_attach (setup), rdmad_detach +
 *            rdmad_close (teardown): a process that attaches once;
 *   request  rdmad_request GET /v1/health: one round trip to the daemon,
 *            the floor of what an attach adds to the verbs calls.
 *
 * and prints the median and mean of each phase in microseconds and the
 * ratios of the medians to bare's. Run it where there is an RDMA device
 * (tests/vm/run on this project's machines).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

struct samples {
	double *v;
	size_t n;
};

struct phase {
	const char *name;
	struct samples setup, teardown, cycle;
};

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void add(struct samples *s, double v)
{
	s->v[s->n++] = v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(struct samples *s)
{
	qsort(s->v, s->n, sizeof(*s->v), cmp_double);
	if (!s->n)
		return 0;
	return s->n % 2 ? s->v[s->n / 2]
			: (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
}

static double mean(const struct samples *s)
{
	double sum = 0;

	for (size_t i = 0; i < s->n; i++)
		sum += s->v[i];
	return s->n ? sum / (double)s->n : 0;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "attach_bench: %s: %s\n", what, why);
	exit(1);
}

/* What the bare loop needs to do the same as the profile's attach. */
struct bare {
	char ibdev[64];
	unsigned int access;
	void *buf;
	size_t len;
};

static void bare_once(const struct bare *b, struct phase *ph)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	double t0, t1, t2;
	int n = 0, i;

	t0 = now_us();
	list = ibv_get_device_list(&n);
	if (!list)
		die("ibv_get_device_list", strerror(errno));
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), b->ibdev))
			break;
	if (i < n)
		ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		die(b->ibdev, "cannot open");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd", strerror(errno));
	mr = ibv_reg_mr(pd, b->buf, b->len, (int)b->access);
	if (!mr)
		die("ibv_reg_mr", strerror(errno));
	t1 = now_us();
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	t2 = now_us();
	add(&ph->setup, t1 - t0);
	add(&ph->teardown, t2 - t1);
	add(&ph->cycle, t2 - t0);
}

static void attach_once(struct rdmad *c, const char *profile,
			unsigned int flags, struct phase *ph)
{
	struct rdmad_profile *p;
	double t0, t1, t2;

	t0 = now_us();
	p = rdmad_attach(c, profile, flags);
	if (!p)
		die("rdmad_attach", rdmad_last_error());
	t1 = now_us();
	if (rdmad_detach(p) < 0)
		die("rdmad_detach", rdmad_last_error());
	t2 = now_us();
	add(&ph->setup, t1 - t0);
	add(&ph->teardown, t2 - t1);
	add(&ph->cycle, t2 - t0);
}

static void request_once(struct rdmad *c, struct phase *ph)
{
	double t0, t1;
	int status = 0;

	t0 = now_us();
	if (rdmad_request(c, "GET", "/v1/health", NULL, &status, NULL) < 0)
		die("rdmad_request", rdmad_last_error());
	t1 = now_us();
	add(&ph->setup, t1 - t0);
	add(&ph->teardown, 0);
	add(&ph->cycle, t1 - t0);
}

static void connect_once(const char *sock, const char *profile,
			 unsigned int flags, struct phase *ph)
{
	struct rdmad_profile *p;
	struct rdmad *c;
	double t0, t1, t2;

	t0 = now_us();
	c = rdmad_connect(sock);
	if (!c)
		die("rdmad_connect", rdmad_last_error());
	p = rdmad_attach(c, profile, flags);
	if (!p)
		die("rdmad_attach", rdmad_last_error());
	t1 = now_us();
	if (rdmad_detach(p) < 0)
		die("rdmad_detach", rdmad_last_error());
	rdmad_close(c);
	t2 = now_us();
	add(&ph->setup, t1 - t0);
	add(&ph->teardown, t2 - t1);
	add(&ph->cycle, t2 - t0);
}

/* The device, MR access and MR length the bare loop should use. */
static void learn_profile(struct rdmad *c, const char *profile,
			  unsigned int flags, struct bare *b)
{
	struct rdmad_profile *p = rdmad_attach(c, profile, flags);
	const char *name;
	struct ibv_mr *mr;

	if (!p)
		die("rdmad_attach", rdmad_last_error());
	snprintf(b->ibdev, sizeof(b->ibdev), "%s",
		 ibv_get_device_name(rdmad_context(p)->device));
	name = rdmad_mr_name(p, 0);
	if (!name)
		die(profile, "the profile has no MR to compare with");
	mr = rdmad_mr(p, name);
	b->len = mr->length;
	b->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		    IBV_ACCESS_REMOTE_READ;
	printf("profile %s: %s mode on %s, mr %s of %zu bytes\n", profile,
	       rdmad_mode(p) == RDMAD_MODE_SHARED ? "shared" : "local",
	       b->ibdev, name, b->len);
	if (rdmad_detach(p) < 0)
		die("rdmad_detach", rdmad_last_error());
}

static void report(struct phase *ph, struct phase *base)
{
	double s = median(&ph->setup), t = median(&ph->teardown),
	       cy = median(&ph->cycle);

	printf("%-8s setup %9.1f (mean %9.1f)  teardown %9.1f (mean %9.1f)  "
	       "cycle %9.1f",
	       ph->name, s, mean(&ph->setup), t, mean(&ph->teardown), cy);
	if (ph != base)
		printf("  x%.2f setup, x%.2f cycle", s / median(&base->setup),
		       cy / median(&base->cycle));
	printf("\n");
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: attach_bench [-s SOCKET] [-n N] [-r ROUNDS] "
		"[-m auto|shared|local] PROFILE\n"
		"Time N attach+detach cycles per round against the bare "
		"verbs calls.\n");
}

int main(int argc, char **argv)
{
	const char *sock = NULL, *profile, *mode = "local";
	struct phase bare = {.name = "bare"}, att = {.name = "attach"},
		     conn = {.name = "connect"}, req = {.name = "request"};
	struct phase *all[] = {&bare, &att, &conn, &req};
	unsigned int flags;
	struct bare b = {0};
	struct rdmad *c;
	int n = 200, rounds = 5, opt;

	while ((opt = getopt(argc, argv, "s:n:r:m:h")) != -1) {
		switch (opt) {
		case 's':
			sock = optarg;
			break;
		case 'n':
			n = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'm':
			mode = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind != argc - 1 || n < 1 || rounds < 1) {
		usage(stderr);
		return 1;
	}
	profile = argv[optind];
	if (!strcmp(mode, "auto"))
		flags = RDMAD_ATTACH_AUTO;
	else if (!strcmp(mode, "shared"))
		flags = RDMAD_ATTACH_SHARED;
	else if (!strcmp(mode, "local"))
		flags = RDMAD_ATTACH_LOCAL;
	else
		die(mode, "not auto, shared or local");

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		struct samples *s[] = {&all[i]->setup, &all[i]->teardown,
				       &all[i]->cycle};

		for (size_t j = 0; j < 3; j++) {
			s[j]->v = calloc((size_t)n * rounds, sizeof(double));
			if (!s[j]->v)
				die("calloc", strerror(errno));
		}
	}

	c = rdmad_connect(sock);
	if (!c)
		die("rdmad_connect", rdmad_last_error());
	learn_profile(c, profile, flags, &b);
	b.buf = mmap(NULL, b.len, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (b.buf == MAP_FAILED)
		die("mmap", strerror(errno));
	memset(b.buf, 0, b.len);

	/* Warm up every path once, untimed. */
	{
		struct phase warm = {0};
		double v[3];

		warm.setup.v = &v[0];
		warm.teardown.v = &v[1];
		warm.cycle.v = &v[2];
		bare_once(&b, &warm);
		warm.setup.n = warm.teardown.n = warm.cycle.n = 0;
		attach_once(c, profile, flags, &warm);
		warm.setup.n = warm.teardown.n = warm.cycle.n = 0;
		connect_once(sock, profile, flags, &warm);
	}
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < n; i++)
			bare_once(&b, &bare);
		for (int i = 0; i < n; i++)
			attach_once(c, profile, flags, &att);
		for (int i = 0; i < n; i++)
			connect_once(sock, profile, flags, &conn);
		for (int i = 0; i < n; i++)
			request_once(c, &req);
	}
	rdmad_close(c);

	printf("%d rounds of %d cycles; microseconds, medians:\n", rounds, n);
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		report(all[i], &bare);
	return 0;
}
