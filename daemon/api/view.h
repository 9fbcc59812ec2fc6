/* SPDX-License-Identifier: MIT */
/*
 * What a read-only document shows to whom (rdmad(8), "What each
 * read-only route shows to whom"): other users' processes (pid, uid,
 * gid, whether admin, what they reported) and PSNs only to admins.
 * One rule for REST, the control socket and rdmactl --json, and for
 * the event stream on both.
 */
#ifndef RDMAD_VIEW_H
#define RDMAD_VIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

struct api_viewer {
	bool admin;   /* REST: the bearer token; socket: root, admin_group */
	bool has_uid; /* the socket's peer (SO_PEERCRED); REST: anonymous */
	uid_t uid;
};

/*
 * doc (taken over) as v may see it: in every object with a "pid" or a
 * "uid" that is not v's own (v has no uid, or another, and is no admin),
 * "pid", "uid", "gid", "admin" and "report" (here and below) are left
 * out; "psn" is left out unless v is an admin. Returns the document
 * (doc itself when nothing is hidden, else a copy), NULL when out of
 * memory (doc is dropped).
 */
json_t *api_view(json_t *doc, const struct api_viewer *v);
/* The same for an event the bus owns: a new reference. */
json_t *api_view_event(const json_t *ev, const struct api_viewer *v);

#endif
