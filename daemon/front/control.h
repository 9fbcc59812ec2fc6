/* SPDX-License-Identifier: MIT */
/*
 * The control socket (SOCK_SEQPACKET, proto/): sessions of clients that
 * attach to profiles and use their objects, and the same control
 * operations as REST. Identity comes from SO_PEERCRED only.
 */
#ifndef RDMAD_CONTROL_H
#define RDMAD_CONTROL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

struct manager;
struct control;

/* Listen on daemon.control_socket (mode 0660, group control_group), and
 * lend the manager the sessions for GET /v1/sessions and /metrics.
 * Returns 0 or -errno; *out is the front end, also when it failed half
 * way (control_stop() undoes what was done). */
int control_start(struct manager *m, struct control **out);
/* Tell every session goodbye and stop listening; NULL: nothing. Returns
 * NULL. */
struct control *control_stop(struct control *c);

/*
 * A profile's own socket, <runtime_dir>/profiles/<profile>/rdmad.sock:
 * its sessions see and attach that profile only (containers are given
 * it, cdi.c). Its directory is what a container binds, so that a new
 * socket made there (a restart) is reachable through the same mount.
 * false: the path does not fit a unix socket's (no socket is made).
 */
#define CONTROL_PROFILE_SOCKET "rdmad.sock"
static inline bool control_profile_dir(const char *runtime_dir,
				       const char *profile, char *buf,
				       size_t size)
{
	/* sun_path is 108 bytes with its NUL. */
	int n = snprintf(buf, size, "%s/profiles/%s", runtime_dir, profile);

	return n > 0 && (size_t)n < size &&
	       (size_t)n + sizeof("/" CONTROL_PROFILE_SOCKET) <= 108;
}
#endif
