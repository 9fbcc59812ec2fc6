/* SPDX-License-Identifier: MIT */
/*
 * The control socket (SOCK_SEQPACKET, proto/): sessions of clients that
 * attach to profiles and use their objects, and the same control
 * operations as REST. Identity comes from SO_PEERCRED only.
 */
#ifndef RDMAD_CONTROL_H
#define RDMAD_CONTROL_H

#include <jansson.h>

struct manager;

/* Listen on daemon.control_socket (mode 0660, group control_group), and
 * lend the manager the sessions for GET /v1/sessions and /metrics.
 * Returns 0 or -errno. */
int control_start(struct manager *m);
/* Tell every session goodbye and stop listening. */
void control_stop(struct manager *m);
#endif
