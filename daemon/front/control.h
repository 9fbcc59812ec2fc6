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

#define CONTROL_MAX_SESSIONS_PER_UID 256

/* Listen on daemon.control_socket (mode 0660, group control_group).
 * Returns 0 or -errno. */
int control_start(struct manager *m);
/* Tell every session goodbye and stop listening. */
void control_stop(struct manager *m);
#define CONTROL_ATTACH_BUCKETS 8
extern const double control_attach_bucket_le[CONTROL_ATTACH_BUCKETS];

struct control_stats {
	unsigned int sessions, attachments;
	unsigned long long attaches, attach_failures;
	unsigned long long attach_buckets[CONTROL_ATTACH_BUCKETS];
	double attach_seconds;
};

/* Counters for /metrics (zeros while the socket is not up). */
void control_stats(struct manager *m, struct control_stats *out);

/* [{session, pid, uid, gid, admin, attachments:[{attachment, profile, mode,
 *   leases, report}]}] for GET /v1/sessions. */
json_t *control_sessions_json(struct manager *m);

#endif
