// SPDX-License-Identifier: MIT
/*
 * life: runs one program and times its lifecycle through the sd_notify
 * protocol, the way a service manager sees it.
 *
 *   life [-l LOG] [-t SECONDS] -- CMD [ARGS...]
 *
 * Reads commands from stdin, one a line, and answers each on stdout with
 * one line (flushed), so that a driver can change files between steps:
 *
 *   start   fork + exec CMD with NOTIFY_SOCKET set to a private abstract
 *           unix datagram socket; wait for READY=1.
 *           -> "ready SECONDS" | "exited STATUS SECONDS" | "timeout SECONDS"
 *   run     fork + exec CMD and wait for it to exit (no notify protocol).
 *           -> "exited STATUS SECONDS" | "timeout SECONDS"
 *   rss     -> "rss VMRSS_KIB RSS_KIB": VmRSS from /proc/PID/status, and
 *           Rss from /proc/PID/smaps_rollup. They are the same quantity,
 *           but until Linux 6.2 VmRSS adds up per-thread counters that
 *           are synced only every 64 page faults, and pages the kernel
 *           maps itself at mmap() (rxe's CQ and QP rings) can stay out
 *           of it for good; smaps_rollup walks the page tables.
 *   hup     send SIGHUP; wait for RELOADING=1, then for the next READY=1.
 *           -> "reload SECONDS" | "exited ..." | "timeout ..."
 *   term    send SIGTERM; wait for the exit.
 *           -> "exited STATUS SECONDS" | "timeout SECONDS"
 *   kill    SIGKILL and reap (cleanup after a failure). -> "killed"
 *
 * STATUS is the exit code, or 128+N for a death by signal N. Times are
 * measured here, in C, from just before fork()/kill() to the moment the
 * message (or the exit) is seen: the driver's own overhead stays out.
 * The notify socket is drained all the time, also between commands, so a
 * daemon that sends many STATUS= messages never blocks on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int notify_fd = -1;
static char notify_name[64];
static pid_t child = -1;
static int child_pidfd = -1; /* readable when the child exits */
static int child_status = -1;
static const char *log_path = "/dev/null";
static double timeout_s = 600;
static char **cmd;
/* What the notify socket said since the flags were last cleared. */
static bool seen_ready, seen_reloading;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "life: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int notify_open(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, big = 8 << 20;
	socklen_t len;

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die("socket");
	/* Abstract name: no file, nothing to clean up, works on any fs. */
	snprintf(notify_name, sizeof(notify_name), "@bench-life-%d-%ld",
		 (int)getpid(), (long)(now() * 1e6));
	sa.sun_path[0] = 0;
	memcpy(sa.sun_path + 1, notify_name + 1, strlen(notify_name) - 1);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
			  strlen(notify_name));
	if (bind(fd, (struct sockaddr *)&sa, len) < 0)
		die("bind notify socket");
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	return fd;
}

/* Read every queued notify datagram; note READY=1 and RELOADING=1. */
static void notify_drain(void)
{
	char buf[4096];
	ssize_t n;

	while ((n = recv(notify_fd, buf, sizeof(buf) - 1, 0)) > 0) {
		char *save = NULL, *line;

		buf[n] = 0;
		for (line = strtok_r(buf, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			if (!strcmp(line, "READY=1"))
				seen_ready = true;
			else if (!strcmp(line, "RELOADING=1"))
				seen_reloading = true;
		}
	}
}

static bool child_reap(bool block)
{
	int st;
	pid_t r;

	if (child < 0)
		return true;
	r = waitpid(child, &st, block ? 0 : WNOHANG);
	if (r != child)
		return false;
	child_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	child = -1;
	if (child_pidfd >= 0)
		close(child_pidfd);
	child_pidfd = -1;
	return true;
}

static void spawn(bool with_notify)
{
	int fd;

	child_status = -1;
	seen_ready = seen_reloading = false;
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		if (with_notify)
			setenv("NOTIFY_SOCKET", notify_name, 1);
		else
			unsetenv("NOTIFY_SOCKET");
		fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0)
			dup2(fd, 0);
		execvp(cmd[0], cmd);
		_exit(127);
	}
	child_pidfd = pidfd_open(child, 0);
}

/*
 * Wait until pred() holds, the child exits, or the timeout. 0: pred,
 * 1: exited, 2: timeout. The child's pidfd wakes us when it exits
 * (without one, a 1 ms poll period bounds the error).
 */
static int wait_for(bool (*pred)(void), double t0)
{
	struct pollfd pfd[2] = {
		{ .fd = notify_fd, .events = POLLIN },
		{ .fd = child_pidfd, .events = POLLIN },
	};

	for (;;) {
		notify_drain();
		if (pred && pred())
			return 0;
		if (child_reap(false))
			return 1;
		if (now() - t0 > timeout_s)
			return 2;
		poll(pfd, 2, child_pidfd >= 0 ? 1000 : 1);
	}
}

static bool ready(void)
{
	return seen_ready;
}

static bool reloaded(void)
{
	return seen_reloading && seen_ready;
}

static void answer(int r, const char *what, double t0)
{
	double dt = now() - t0;

	if (r == 0)
		printf("%s %.6f\n", what, dt);
	else if (r == 1)
		printf("exited %d %.6f\n", child_status, dt);
	else
		printf("timeout %.6f\n", dt);
	fflush(stdout);
}

/* The value of the first "KEY: N kB" line of /proc/PID/FILE. */
static long proc_kib(const char *file, const char *fmt)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)child, file);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* One line from fd 0 (unbuffered: poll() must see what is left). */
static bool read_line(char *buf, size_t cap)
{
	size_t n = 0;
	char c;

	for (;;) {
		ssize_t r = read(0, &c, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			buf[n] = 0;
			return n > 0;
		}
		if (c == '\n')
			break;
		if (n + 1 < cap)
			buf[n++] = c;
	}
	buf[n] = 0;
	return true;
}

static void command(const char *c)
{
	double t0;
	int r;

	if (!strcmp(c, "start")) {
		t0 = now();
		spawn(true);
		answer(wait_for(ready, t0), "ready", t0);
	} else if (!strcmp(c, "run")) {
		t0 = now();
		spawn(false);
		r = wait_for(NULL, t0);
		answer(r == 1 ? 1 : 2, "", t0);
	} else if (!strcmp(c, "rss")) {
		if (child > 0)
			printf("rss %ld %ld\n", proc_kib("status", "VmRSS: %ld kB"),
			       proc_kib("smaps_rollup", "Rss: %ld kB"));
		else
			printf("rss -1 -1\n");
		fflush(stdout);
	} else if (!strcmp(c, "hup")) {
		notify_drain();
		seen_ready = seen_reloading = false;
		t0 = now();
		if (child > 0)
			kill(child, SIGHUP);
		answer(wait_for(reloaded, t0), "reload", t0);
	} else if (!strcmp(c, "term")) {
		t0 = now();
		if (child > 0)
			kill(child, SIGTERM);
		r = wait_for(NULL, t0);
		answer(r == 1 ? 1 : 2, "", t0);
	} else if (!strcmp(c, "kill")) {
		if (child > 0) {
			kill(child, SIGKILL);
			child_reap(true);
		}
		printf("killed\n");
		fflush(stdout);
	} else {
		printf("error unknown command '%s'\n", c);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	struct pollfd pfd[2];
	char line[256];
	int opt;

	while ((opt = getopt(argc, argv, "+l:t:")) != -1) {
		switch (opt) {
		case 'l':
			log_path = optarg;
			break;
		case 't':
			timeout_s = atof(optarg);
			break;
		default:
			fprintf(stderr, "usage: life [-l LOG] [-t SECONDS] -- "
					"CMD [ARGS...]\n");
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "life: no command\n");
		return 2;
	}
	cmd = argv + optind;
	signal(SIGPIPE, SIG_IGN);
	notify_fd = notify_open();
	pfd[0] = (struct pollfd){ .fd = 0, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = notify_fd, .events = POLLIN };
	for (;;) {
		if (poll(pfd, 2, 100) < 0 && errno != EINTR)
			die("poll");
		notify_drain();
		child_reap(false);
		if (!(pfd[0].revents & (POLLIN | POLLHUP)))
			continue;
		if (!read_line(line, sizeof(line)))
			break;
		line[strcspn(line, "\r")] = 0;
		if (line[0])
			command(line);
	}
	/* The driver went away: leave nothing running. */
	if (child > 0) {
		kill(child, SIGKILL);
		child_reap(true);
	}
	return 0;
}
