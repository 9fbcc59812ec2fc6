// SPDX-License-Identifier: MIT
/* fdsink (fdsink.h): a close that takes seconds (a TCP socket with
 * unsent data and SO_LINGER, whose peer never reads) is never waited for
 * by the caller, and the fds handed over after it are still closed. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "fdsink.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A loopback listener that accepts nothing and reads nothing. */
static int listener(struct sockaddr_in *at)
{
	socklen_t len = sizeof(*at);
	int small = 4096, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	/* Its connections' windows close soon, and stay closed. */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	*at = (struct sockaddr_in){ .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	assert_int_equal(bind(fd, (struct sockaddr *)at, sizeof(*at)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)at, &len), 0);
	return fd;
}

/* A socket to at whose send queue is full and whose close lingers for
 * linger seconds. */
static int lingering(const struct sockaddr_in *at, int linger)
{
	struct linger l = { .l_onoff = 1, .l_linger = linger };
	int small = 4096, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char chunk[4096] = { 0 };

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	assert_int_equal(connect(fd, (const struct sockaddr *)at, sizeof(*at)), 0);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	/* Full: nothing more goes, even after a while. */
	for (int tries = 0; tries < 3; tries++) {
		while (send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL) > 0)
			;
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		usleep(20000);
	}
	fcntl(fd, F_SETFL, 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)), 0);
	return fd;
}

/* Does the reader see the writer's end closed within a second? */
static bool closed_soon(int reader)
{
	struct pollfd p = { .fd = reader, .events = POLLIN };
	char c;

	return poll(&p, 1, 1000) == 1 && read(reader, &c, 1) == 0;
}

static void test_a_lingering_close_is_not_waited_for(void **state)
{
	struct sockaddr_in at;
	struct fdsink_stats st;
	int l = listener(&at), slow[2], pipes[2][2];
	double t;

	(void)state;
	/* Two closes stuck in turn: each holds a thread for 10 s. */
	for (int i = 0; i < 2; i++) {
		slow[i] = lingering(&at, 10);
		t = now();
		fdsink_close(slow[i]);
		assert_true(now() - t < 0.5);
		usleep((FDSINK_STUCK_MSEC + 50) * 1000);
	}
	fdsink_stats(&st);
	assert_int_equal(st.busy, 2);
	assert_int_equal(st.threads, 2);
	/* What comes after is closed all the same, at once. */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pipe2(pipes[i], O_CLOEXEC), 0);
		t = now();
		fdsink_close(pipes[i][1]);
		assert_true(now() - t < 0.5);
		assert_true(closed_soon(pipes[i][0]));
		close(pipes[i][0]);
	}
	fdsink_stats(&st);
	assert_int_equal(st.threads, 3); /* one more, for them */
	assert_int_equal(st.kept_open, 0);
	close(l);
}

static void test_close_all_hands_every_fd_over(void **state)
{
	int p[3][2], w[3];

	(void)state;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(pipe2(p[i], O_CLOEXEC), 0);
		w[i] = p[i][1];
	}
	fdsink_close_all(w, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(w[i], -1);
		assert_true(closed_soon(p[i][0]));
		close(p[i][0]);
	}
	fdsink_close(-1); /* nothing */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_lingering_close_is_not_waited_for),
		cmocka_unit_test(test_close_all_hands_every_fd_over),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
