// SPDX-License-Identifier: MIT
/*
 * regserve: the floor of the loop-responsiveness bench. A bare server
 * with rdmad's shape: one thread with one epoll loop answers HTTP
 * requests (a fixed 200 with a small JSON body, keep-alive) on a TCP
 * port and echoes every datagram on a SOCK_SEQPACKET socket, while
 * another thread of the same process registers a big memfd MR, as
 * rdmad's worker does. What the probes see here is what the machine
 * (the kernel pinning pages, the vCPUs TCG emulates) costs a server that
 * does nothing else; rdmad's figures are compared with it.
 *
 *   regserve -p PORT -s SOCKET -d IBDEV -z BYTES
 *
 * Prints "listening"; then reads commands on stdin, one a line:
 *   reg    register BYTES (memfd, mapped shared, as rdmad's memory) on
 *          another thread; prints "registered SECONDS" once done
 *   dereg  deregister and unmap it, on another thread too (as rdmad's
 *          worker does); prints "deregistered" once done
 * EOF or SIGTERM ends it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define MAX_FRAME (64 * 1024)

static const char response[] = "HTTP/1.1 200 OK\r\n"
			       "Content-Type: application/json\r\n"
			       "Content-Length: 15\r\n\r\n"
			       "{\"status\":\"ok\"}";

struct reg {
	struct ibv_pd *pd;
	size_t size;
	int fd;
	void *addr;
	struct ibv_mr *mr;
};

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *do_reg(void *arg)
{
	struct reg *g = arg;
	double t0 = now();

	g->fd = memfd_create("regserve", MFD_CLOEXEC);
	if (g->fd < 0 || ftruncate(g->fd, (off_t)g->size) < 0)
		die("memfd");
	g->addr = mmap(NULL, g->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       g->fd, 0);
	if (g->addr == MAP_FAILED)
		die("mmap");
	g->mr = ibv_reg_mr(g->pd, g->addr, g->size, IBV_ACCESS_LOCAL_WRITE);
	if (!g->mr)
		die("ibv_reg_mr");
	printf("registered %.3f\n", now() - t0);
	fflush(stdout);
	return NULL;
}

static int listen_tcp(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 128) < 0)
		die("tcp listen");
	return fd;
}

static int listen_seq(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
			0);

	if (fd < 0 || strlen(path) >= sizeof(sa.sun_path))
		die("unix socket");
	strcpy(sa.sun_path, path);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 128) < 0)
		die("unix listen");
	return fd;
}

/* Connections are told apart by a tag in the epoll data's high bits. */
enum { T_TCP_LISTEN = 1, T_SEQ_LISTEN, T_HTTP, T_SEQ, T_STDIN };
#define TAG(t, fd) (((uint64_t)(t) << 32) | (uint32_t)(fd))

static void add(int ep, int t, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG(t, fd) };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl");
}

static void *do_dereg(void *arg)
{
	struct reg *g = arg;

	ibv_dereg_mr(g->mr);
	munmap(g->addr, g->size);
	close(g->fd);
	printf("deregistered\n");
	fflush(stdout);
	return NULL;
}

/* running: a registration made (or under way) on *th; once "dereg"
 * comes, *th deregisters it, and is joined before the next "reg". */
static void command(struct reg *g, pthread_t *th, bool *running)
{
	static bool dereging;
	char line[64];

	if (!fgets(line, sizeof(line), stdin))
		exit(0);
	if (!strncmp(line, "reg", 3) && !*running) {
		if (dereging)
			pthread_join(*th, NULL);
		dereging = false;
		*running = true;
		if (pthread_create(th, NULL, do_reg, g))
			die("pthread_create");
	} else if (!strncmp(line, "dereg", 5) && *running) {
		pthread_join(*th, NULL);
		*running = false;
		dereging = true;
		if (pthread_create(th, NULL, do_dereg, g))
			die("pthread_create");
	}
}

int main(int argc, char **argv)
{
	const char *sock = NULL, *ibdev = NULL;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct reg g = { .size = 0 };
	bool running = false;
	pthread_t th;
	int port = 0, opt, ep, n;
	uint8_t buf[MAX_FRAME];

	while ((opt = getopt(argc, argv, "p:s:d:z:")) != -1) {
		switch (opt) {
		case 'p': port = atoi(optarg); break;
		case 's': sock = optarg; break;
		case 'd': ibdev = optarg; break;
		case 'z': g.size = strtoull(optarg, NULL, 0); break;
		default: goto usage;
		}
	}
	if (!port || !sock || !ibdev || !g.size)
		goto usage;
	list = ibv_get_device_list(NULL);
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), ibdev))
			ctx = ibv_open_device(list[i]);
	if (!ctx || !(g.pd = ibv_alloc_pd(ctx)))
		die(ibdev);
	ep = epoll_create1(EPOLL_CLOEXEC);
	add(ep, T_TCP_LISTEN, listen_tcp(port));
	add(ep, T_SEQ_LISTEN, listen_seq(sock));
	add(ep, T_STDIN, 0);
	printf("listening\n");
	fflush(stdout);
	for (;;) {
		struct epoll_event evs[64];

		n = epoll_wait(ep, evs, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			int t = (int)(evs[i].data.u64 >> 32);
			int fd = (int)(uint32_t)evs[i].data.u64, c;
			ssize_t r;

			switch (t) {
			case T_TCP_LISTEN:
			case T_SEQ_LISTEN:
				c = accept4(fd, NULL, NULL,
					    SOCK_CLOEXEC | SOCK_NONBLOCK);
				if (c >= 0)
					add(ep, t == T_TCP_LISTEN ? T_HTTP
								  : T_SEQ, c);
				break;
			case T_HTTP:
				/* The probe sends one small request and
				 * waits: one read holds it whole. */
				r = recv(fd, buf, sizeof(buf), 0);
				if (r <= 0) {
					close(fd);
					break;
				}
				if (memmem(buf, (size_t)r, "\r\n\r\n", 4))
					send(fd, response, sizeof(response) - 1,
					     MSG_NOSIGNAL);
				break;
			case T_SEQ:
				r = recv(fd, buf, sizeof(buf), 0);
				if (r <= 0) {
					close(fd);
					break;
				}
				send(fd, buf, (size_t)r, MSG_NOSIGNAL);
				break;
			case T_STDIN:
				command(&g, &th, &running);
				break;
			}
		}
	}
usage:
	fprintf(stderr, "usage: regserve -p PORT -s SOCKET -d IBDEV -z BYTES\n");
	return 64;
}
