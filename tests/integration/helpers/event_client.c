// SPDX-License-Identifier: MIT
/*
 * event_client: a librdmad program that attaches to a profile and
 * waits for what the daemon tells it, for test_client_events.py.
 *
 *   event_client [-i SECONDS] [-t SECONDS] SOCKET PROFILE
 *
 * Attaches in local mode, prints "attached MODE IBDEV", then polls
 * rdmad_fd() and reads events:
 *   DEVICE_REMOVED  prints "event device_removed PROFILE DEVICE same|other",
 *                   detaches (prints "detached R") and exits 0; with -i,
 *                   ignores it: holds everything SECONDS more, then exits.
 *   OBJECT_DRAINING prints "event object_draining PROFILE REASON",
 *                   detaches ("detached R") and exits 0.
 *   DAEMON_GONE     prints "event daemon_gone", then what a call on the
 *                   old connection says ("old ERRNO MESSAGE"), detaches
 *                   ("detached R ..."), reconnects until the daemon is
 *                   back ("reconnected"), attaches again ("reattached
 *                   MODE"), detaches and exits 0.
 * Every line is flushed at once: the test reads them as they come.
 * -t: give up (exit 2) after SECONDS (120 by default).
 */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

static time_t deadline;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void fail(const char *what)
{
	say("error %s: %s", what, rdmad_last_error());
	exit(1);
}

static void check_time(void)
{
	if (time(NULL) > deadline) {
		say("error timed out");
		exit(2);
	}
}

static int on_gone(struct rdmad *c, struct rdmad_profile *p,
		   const char *profile)
{
	int status = 0, r;

	say("event daemon_gone");
	r = rdmad_request(c, "GET", "/v1/health", NULL, &status, NULL);
	say("old %s %s", r == -ECONNRESET ? "ECONNRESET" : strerror(-r),
	    rdmad_last_error());
	r = rdmad_detach(p);
	say("detached %d %s", r, r ? rdmad_last_error() : "");
	while ((r = rdmad_reconnect(c)) < 0) {
		check_time();
		usleep(200 * 1000);
	}
	say("reconnected");
	rdmad_set_attach_timeout(c, 60000);
	p = rdmad_attach(c, profile, RDMAD_ATTACH_LOCAL | RDMAD_ATTACH_WAIT);
	if (!p)
		fail("attach again");
	say("reattached %s %s",
	    rdmad_mode(p) == RDMAD_MODE_LOCAL ? "local" : "shared",
	    ibv_get_device_name(rdmad_context(p)->device));
	r = rdmad_detach(p);
	say("detached %d", r);
	rdmad_close(c);
	return r ? 1 : 0;
}

int main(int argc, char **argv)
{
	int ignore = -1, limit = 120, opt, r;
	struct rdmad_profile *p;
	struct rdmad_event ev;
	struct rdmad *c;

	while ((opt = getopt(argc, argv, "i:t:")) != -1) {
		switch (opt) {
		case 'i':
			ignore = atoi(optarg);
			break;
		case 't':
			limit = atoi(optarg);
			break;
		default:
			return 64;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: event_client [-i S] [-t S] SOCKET "
				"PROFILE\n");
		return 64;
	}
	deadline = time(NULL) + limit;
	c = rdmad_connect(argv[optind]);
	if (!c)
		fail("connect");
	p = rdmad_attach(c, argv[optind + 1], RDMAD_ATTACH_LOCAL);
	if (!p)
		fail("attach");
	say("attached %s %s",
	    rdmad_mode(p) == RDMAD_MODE_LOCAL ? "local" : "shared",
	    ibv_get_device_name(rdmad_context(p)->device));
	for (;;) {
		struct pollfd pfd = {.fd = rdmad_fd(c), .events = POLLIN};

		/* Events other calls set aside first, then the socket. */
		while ((r = rdmad_next_event(c, &ev)) == 1) {
			switch (ev.type) {
			case RDMAD_EVENT_DEVICE_REMOVED:
				say("event device_removed %s %s %s",
				    ev.profile_name, ev.device,
				    ev.profile == p ? "same" : "other");
				if (ignore >= 0) {
					sleep(ignore);
					say("exiting without detaching");
					return 0;
				}
				r = rdmad_detach(p);
				say("detached %d", r);
				rdmad_close(c);
				return r ? 1 : 0;
			case RDMAD_EVENT_PROFILE_REMOVED:
				say("event profile_removed %s",
				    ev.profile_name);
				break;
			case RDMAD_EVENT_DAEMON_GONE:
				return on_gone(c, p, argv[optind + 1]);
			case RDMAD_EVENT_RESUMED: /* local mode: never */
				say("event resumed %s", ev.profile_name);
				break;
			case RDMAD_EVENT_PORT_DOWN:
			case RDMAD_EVENT_PORT_ACTIVE:
				say("event %s %s %s",
				    ev.type == RDMAD_EVENT_PORT_DOWN
					    ? "port_down"
					    : "port_active",
				    ev.profile_name, ev.device);
				break;
			case RDMAD_EVENT_OBJECT_DRAINING:
				/* Let go, so that the old object goes. */
				say("event object_draining %s %s",
				    ev.profile_name, ev.reason);
				r = rdmad_detach(p);
				say("detached %d", r);
				rdmad_close(c);
				return r ? 1 : 0;
			case RDMAD_EVENT_STREAM:
				break;
			}
		}
		if (r < 0)
			fail("next event");
		check_time();
		poll(&pfd, 1, 1000);
	}
}
