// SPDX-License-Identifier: MIT
/*
 * ctlload: request rate of a control socket. Each of CLIENTS threads
 * connects, says HELLO, then sends REQUEST GET /v1/health and waits for
 * the answer, again and again, for SECONDS; prints the total answers per
 * second. The request bytes are encoded once; an answer is received
 * whole and not decoded, so the client does the same work whether the
 * server is rdmad or bench/seqecho.
 *
 *   ctlload -s SOCKET [-c CLIENTS] [-d SECONDS] [-e]
 *   ctlload -s SOCKET -w FILE
 *
 * -e: the server is an echo server (its answer to HELLO is not checked).
 * -w: ask rdmad once, check that the REPLY says 200, write the REPLY
 * datagram to FILE (seqecho answers with those bytes) and exit.
 *
 * Output: "rps N" and "reply_bytes N".
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ctl.h"

static const char *sock_path;
static int echo_server;
static uint8_t req[1024];
static size_t req_len;
static atomic_int stop;
static atomic_long answers, reply_bytes, failures;
static pthread_barrier_t ready;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *client(void *arg)
{
	static _Thread_local uint8_t buf[PROTO_MAX_FRAME];
	int fd = ctl_connect(sock_path);
	long n = 0;
	ssize_t got = 0;

	(void)arg;
	if (fd < 0 || ctl_hello(fd, !echo_server) < 0) {
		atomic_fetch_add(&failures, 1);
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	pthread_barrier_wait(&ready);
	while (fd >= 0 && !atomic_load(&stop)) {
		if (send(fd, req, req_len, MSG_NOSIGNAL) != (ssize_t)req_len)
			break;
		got = recv(fd, buf, sizeof(buf), 0);
		if (got <= 0)
			break;
		n++;
	}
	if (fd >= 0 && !atomic_load(&stop))
		atomic_fetch_add(&failures, 1);
	atomic_fetch_add(&answers, n);
	if (got > 0)
		atomic_store(&reply_bytes, got);
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int capture(const char *file)
{
	struct proto_msg m;
	uint8_t buf[PROTO_MAX_FRAME];
	json_t *status;
	ssize_t got;
	FILE *f;
	int fd;

	fd = ctl_connect(sock_path);
	if (fd < 0 || ctl_hello(fd, 1) < 0) {
		fprintf(stderr, "ctlload: cannot connect to %s\n", sock_path);
		return 1;
	}
	if (send(fd, req, req_len, MSG_NOSIGNAL) != (ssize_t)req_len ||
	    (got = recv(fd, buf, sizeof(buf), 0)) <= 0) {
		fprintf(stderr, "ctlload: no answer\n");
		return 1;
	}
	if (proto_decode(buf, (size_t)got, 0, &m) < 0 ||
	    m.type != PROTO_REPLY ||
	    !(status = json_object_get(m.payload, "status")) ||
	    json_integer_value(status) != 200) {
		fprintf(stderr, "ctlload: the answer is not a REPLY with "
				"status 200\n");
		return 1;
	}
	proto_msg_clear(&m);
	f = fopen(file, "we");
	if (!f || fwrite(buf, 1, (size_t)got, f) != (size_t)got ||
	    fclose(f) != 0) {
		fprintf(stderr, "ctlload: cannot write %s\n", file);
		return 1;
	}
	printf("reply_bytes %zd\n", got);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *capture_file = NULL;
	double seconds = 3, t0, t1;
	pthread_t *threads;
	long clients = 1;
	int opt;

	while ((opt = getopt(argc, argv, "s:c:d:ew:")) != -1) {
		switch (opt) {
		case 's':
			sock_path = optarg;
			break;
		case 'c':
			clients = atol(optarg);
			break;
		case 'd':
			seconds = atof(optarg);
			break;
		case 'e':
			echo_server = 1;
			break;
		case 'w':
			capture_file = optarg;
			break;
		default:
			fprintf(stderr, "usage: ctlload -s SOCKET [-c CLIENTS] "
					"[-d SECONDS] [-e] | -s SOCKET "
					"-w FILE\n");
			return 2;
		}
	}
	if (!sock_path || clients < 1) {
		fprintf(stderr, "ctlload: -s SOCKET is required\n");
		return 2;
	}
	if (ctl_request_bytes("/v1/health", req, sizeof(req), &req_len) < 0)
		return 1;
	if (capture_file)
		return capture(capture_file);

	threads = calloc((size_t)clients, sizeof(*threads));
	pthread_barrier_init(&ready, NULL, (unsigned)clients + 1);
	for (long i = 0; i < clients; i++)
		pthread_create(&threads[i], NULL, client, NULL);
	pthread_barrier_wait(&ready);
	t0 = now();
	while (now() - t0 < seconds)
		usleep(10000);
	atomic_store(&stop, 1);
	t1 = now();
	for (long i = 0; i < clients; i++)
		pthread_join(threads[i], NULL);
	if (atomic_load(&failures)) {
		fprintf(stderr, "ctlload: %ld of %ld clients failed\n",
			atomic_load(&failures), clients);
		return 1;
	}
	printf("rps %.1f\nreply_bytes %ld\n",
	       (double)atomic_load(&answers) / (t1 - t0),
	       atomic_load(&reply_bytes));
	free(threads);
	return 0;
}
