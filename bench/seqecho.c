// SPDX-License-Identifier: MIT
/*
 * seqecho: the baseline of the control socket. A bare SOCK_SEQPACKET
 * server with one thread and one epoll loop, as rdmad has: it answers
 * every datagram with the bytes of REPLY_FILE (rdmad's own REPLY to the
 * same request, captured by `ctlload -w`), so both servers send the same
 * sizes. It neither decodes nor encodes anything: the least a server can
 * do per request.
 *
 *   seqecho -s SOCKET -r REPLY_FILE [-t THREADS]
 *
 * -t: also start THREADS threads that only wait, as rdmad's idle worker
 * pool does: a process with more than one thread pays for it on every
 * system call that takes an fd (the kernel's fd table is shared, so each
 * lookup takes a reference), which a single-threaded server does not.
 *
 * Prints "listening" once it accepts connections; runs until SIGTERM.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_FRAME (64 * 1024)

static uint8_t reply[MAX_FRAME];
static size_t reply_len;

static int listen_on(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	strcpy(sa.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 128) < 0)
		return -1;
	return fd;
}

static void on_client(int ep, int fd)
{
	uint8_t buf[MAX_FRAME];
	ssize_t n;

	for (;;) {
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0 || send(fd, reply, reply_len,
				   MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
			close(fd);
			return;
		}
	}
}

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *reply_file = NULL;
	struct epoll_event ev, evs[64];
	int opt, lfd, ep, n, threads = 0;
	pthread_t th;
	FILE *f;

	while ((opt = getopt(argc, argv, "s:r:t:")) != -1) {
		switch (opt) {
		case 's':
			path = optarg;
			break;
		case 'r':
			reply_file = optarg;
			break;
		case 't':
			threads = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: seqecho -s SOCKET -r REPLY_FILE\n");
			return 2;
		}
	}
	if (!path || !reply_file) {
		fprintf(stderr, "usage: seqecho -s SOCKET -r REPLY_FILE\n");
		return 2;
	}
	for (int i = 0; i < threads; i++)
		if (pthread_create(&th, NULL, idle, NULL)) {
			perror("pthread_create");
			return 1;
		}
	f = fopen(reply_file, "re");
	if (!f) {
		perror(reply_file);
		return 1;
	}
	reply_len = fread(reply, 1, sizeof(reply), f);
	fclose(f);
	if (!reply_len)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	lfd = listen_on(path);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (lfd < 0 || ep < 0) {
		perror(path);
		return 1;
	}
	ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = lfd };
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	printf("listening\n");
	fflush(stdout);
	for (;;) {
		n = epoll_wait(ep, evs, 64, -1);
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd, c;

			if (fd != lfd) {
				on_client(ep, fd);
				continue;
			}
			while ((c = accept4(lfd, NULL, NULL,
					    SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
				ev = (struct epoll_event){ .events = EPOLLIN,
							   .data.fd = c };
				epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
			}
		}
	}
}
