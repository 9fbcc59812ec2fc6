// SPDX-License-Identifier: MIT
/*
 * probe: is the daemon's event loop answering? Two threads ask rdmad's
 * liveness, one with GET /v1/health over HTTP/1.1 (keep-alive), one with
 * REQUEST GET /v1/health on the control socket, each on a fixed schedule
 * (every INTERVAL ms), until SIGTERM; then each writes one line per
 * probe to OUT: "http MS" or "ctl MS"; and "late MS" per probe sent, how
 * late this prober itself woke for it (its own share of the machine: a
 * stall of the whole machine shows there, one of the daemon's does not).
 *
 *   probe -p PORT -s SOCKET [-i INTERVAL_MS] [-e] -o OUT
 *
 * -e: the control socket is an echo server (bench/regserve), which
 * answers HELLO with its own bytes, not WELCOME.
 *
 * The schedule is open loop: probe k is due at start + k * INTERVAL and
 * its latency is counted from that moment, not from when it was sent.
 * A loop that stalls for 2 s therefore shows 2 s / INTERVAL slow probes,
 * not one (the "coordinated omission" that a closed-loop client would
 * hide). The probes that fell due while one was waiting are not sent
 * late, one after another (that would add this prober's own service
 * time to the stall): each counts as answered when the waiting one was,
 * as HdrHistogram's correction for an expected interval does. On
 * SIGTERM the probe under way is awaited.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ctl.h"

#define MAX_PROBES 2000000

struct series {
	const char *name;
	double *ms;
	size_t n;
	double *late; /* how late the thread woke for each probe sent */
	size_t n_late;
	int (*connect)(void);
	int (*ask)(int fd); /* 0, or <0: reconnect and ask again */
	int fd;
};

static int http_port;
static const char *sock_path;
/* -e: the control socket is an echo server (regserve), not rdmad. */
static int echo;
static double interval_s = 0.005;
static atomic_int stop;
static double stop_at;
static uint8_t req[1024];
static size_t req_len;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	double d = t - now();
	struct timespec ts;

	if (d <= 0)
		return;
	ts.tv_sec = (time_t)d;
	ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

static int http_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)http_port) };
	int fd, one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

/* One GET /v1/health: the whole response, headers and body. */
static int http_ask(int fd)
{
	static const char get[] = "GET /v1/health HTTP/1.1\r\n"
				  "Host: 127.0.0.1\r\n\r\n";
	char buf[8192], *end, *cl;
	size_t have = 0, want;
	ssize_t n;

	if (send(fd, get, sizeof(get) - 1, MSG_NOSIGNAL) < 0)
		return -errno;
	for (;;) {
		n = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
		if (n <= 0)
			return -EPIPE;
		have += (size_t)n;
		buf[have] = 0;
		end = strstr(buf, "\r\n\r\n");
		if (!end)
			continue;
		cl = strcasestr(buf, "Content-Length:");
		want = (size_t)(end + 4 - buf) +
		       (cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0);
		if (have >= want)
			return 0;
	}
}

static int ctl_connect_hello(void)
{
	int fd = ctl_connect(sock_path), r;

	if (fd < 0)
		return fd;
	r = ctl_hello(fd, !echo);
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

static int ctl_ask(int fd)
{
	uint8_t buf[PROTO_MAX_FRAME];

	if (send(fd, req, req_len, MSG_NOSIGNAL) != (ssize_t)req_len)
		return -EPIPE;
	return recv(fd, buf, sizeof(buf), 0) > 0 ? 0 : -EPIPE;
}

static void *run(void *arg)
{
	struct series *s = arg;
	double t0 = now(), due, done;

	s->fd = -1;
	for (size_t k = 0; k < MAX_PROBES;) {
		due = t0 + (double)k * interval_s;
		if (atomic_load(&stop) && due > stop_at)
			break;
		sleep_until(due);
		s->late[s->n_late++] = (now() - due) * 1e3;
		for (int tries = 0; tries < 1000; tries++) {
			if (s->fd < 0)
				s->fd = s->connect();
			if (s->fd >= 0 && s->ask(s->fd) == 0)
				break;
			if (s->fd >= 0)
				close(s->fd);
			s->fd = -1;
			usleep(1000);
		}
		done = now();
		s->ms[s->n++] = (done - due) * 1e3;
		/* The slots that fell due meanwhile, never sent. */
		while (++k < MAX_PROBES) {
			due = t0 + (double)k * interval_s;
			if (due >= done || (atomic_load(&stop) && due > stop_at))
				break;
			s->ms[s->n++] = (done - due) * 1e3;
		}
	}
	if (s->fd >= 0)
		close(s->fd);
	return NULL;
}

static void on_term(int sig)
{
	(void)sig;
	stop_at = now();
	atomic_store(&stop, 1);
}

int main(int argc, char **argv)
{
	struct series ser[2] = {
		{ .name = "http", .connect = http_connect, .ask = http_ask },
		{ .name = "ctl", .connect = ctl_connect_hello, .ask = ctl_ask },
	};
	const char *out = NULL;
	pthread_t th[2];
	sigset_t mask;
	FILE *f;
	int opt;

	while ((opt = getopt(argc, argv, "p:s:i:o:e")) != -1) {
		switch (opt) {
		case 'p':
			http_port = atoi(optarg);
			break;
		case 's':
			sock_path = optarg;
			break;
		case 'i':
			interval_s = atof(optarg) / 1e3;
			break;
		case 'o':
			out = optarg;
			break;
		case 'e':
			echo = 1;
			break;
		default:
			fprintf(stderr, "usage: probe -p PORT -s SOCKET "
					"[-i INTERVAL_MS] [-e] -o OUT\n");
			return 2;
		}
	}
	if (!http_port || !sock_path || !out || interval_s <= 0) {
		fprintf(stderr, "usage: probe -p PORT -s SOCKET "
				"[-i INTERVAL_MS] [-e] -o OUT\n");
		return 2;
	}
	if (ctl_request_bytes("/v1/health", req, sizeof(req), &req_len) < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	/* Only the main thread takes SIGTERM; the probes never see EINTR. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	for (int i = 0; i < 2; i++) {
		ser[i].ms = calloc(MAX_PROBES, sizeof(double));
		ser[i].late = calloc(MAX_PROBES, sizeof(double));
		if (!ser[i].ms || !ser[i].late)
			return 1;
		pthread_create(&th[i], NULL, run, &ser[i]);
	}
	signal(SIGTERM, on_term);
	pthread_sigmask(SIG_UNBLOCK, &mask, NULL);
	printf("probing\n");
	fflush(stdout);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	f = fopen(out, "we");
	if (!f)
		return 1;
	for (int i = 0; i < 2; i++)
		for (size_t k = 0; k < ser[i].n; k++)
			fprintf(f, "%s %.4f\n", ser[i].name, ser[i].ms[k]);
	for (int i = 0; i < 2; i++)
		for (size_t k = 0; k < ser[i].n_late; k++)
			fprintf(f, "late %.4f\n", ser[i].late[k]);
	return fclose(f) == 0 ? 0 : 1;
}
