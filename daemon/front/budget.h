/* SPDX-License-Identifier: MIT */
/*
 * What the front ends may spend on clients. Every client connection is a
 * descriptor; the daemon's own work (memory objects, device contexts,
 * the loop itself) needs descriptors too, so clients get the open-file
 * limit less a reserve, shared between the control socket and REST. At
 * a full descriptor table (EMFILE/ENFILE), a listener pauses and tries
 * again on a timer instead of spinning on a socket it cannot accept.
 */
#ifndef RDMAD_FRONT_BUDGET_H
#define RDMAD_FRONT_BUDGET_H

#include <stdbool.h>
#include <systemd/sd-event.h>

struct config;

/* Descriptors kept for the daemon's own work, beyond those its
 * configuration declares (memory objects, XRC domains, contexts). */
#define FRONT_RESERVED_FDS 256

struct front_caps {
	unsigned int sessions;	       /* control socket, all uids */
	unsigned int sessions_per_uid; /* control socket, one uid */
	unsigned int http;	       /* REST, all listeners */
	unsigned int nofile;	       /* the open-file limit they fit in */
	bool lowered;		       /* the configured caps did not fit */
};

/* The configured caps, lowered (in proportion) to fit in RLIMIT_NOFILE
 * less the reserve. */
void front_caps(const struct config *c, struct front_caps *out);

struct accept_pause {
	sd_event_source *io;	/* the listening socket's; not owned */
	sd_event_source *timer; /* owned */
	unsigned int delay_ms;
	bool paused;
	const char *what; /* for the log: "control socket", an address */
};

/*
 * accept4() on ap's socket failed with err (positive errno): when the
 * error says that descriptors or memory ran out, stop watching the
 * socket, try again later (50 ms, doubling up to 1 s), and return true;
 * otherwise false.
 */
bool accept_pause_on_error(struct accept_pause *ap, int err);
/* An accept succeeded: forget the back-off. */
void accept_pause_ok(struct accept_pause *ap);
void accept_pause_done(struct accept_pause *ap);

#endif
