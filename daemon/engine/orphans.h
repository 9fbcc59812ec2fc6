/* SPDX-License-Identifier: MIT */
/*
 * Orphans: objects that clients created in a profile's shared context
 * and left there when they died (the kernel ties them to the context,
 * which the daemon still holds). A scan reads the kernel's list of every
 * used device's PDs, CQs, QPs, MRs and SRQs through RDMA netlink, on the
 * loop but never waiting (the socket is non-blocking; a few chunks per
 * wake-up), and sorts each object in a profile's context (ctxn) by who
 * made it: the daemon (a thread of ours, or a QP/MR the daemon holds by
 * number), a session attached to the profile, or nobody alive: an
 * orphan. Scans run every ORPHANS_SCAN_SECONDS, soon after a lease
 * ends (at most one a second) and soon after a profile changes, but not
 * during a reload (orphans_pause).
 *
 * Orphans are destroyed by handle where they can be told apart from a
 * live client's objects (reclaim.h). What cannot be is kept, or with
 * daemon.orphans = "retire" the context is retired once no session
 * holds any of its objects: closed (the kernel frees the orphans with
 * it) and opened afresh, the profile's objects created again over the
 * same memory (new handles, keys and QP numbers).
 */
#ifndef RDMAD_ORPHANS_H
#define RDMAD_ORPHANS_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

struct orphans;
struct manager;
struct profile;

#define ORPHANS_SCAN_SECONDS 10

/* The scans of m's profiles' contexts; they ask m who is attached, and
 * tell it to retire a context (manager_retire_ctx()). */
int orphans_new(struct manager *m, struct orphans **out);
struct orphans *orphans_free(struct orphans *o);
/* Scan soon: PACED after a lease ends (a client may have died), at most
 * one scan a second whatever the rate of asks; CHANGED when what a
 * context holds changed (a profile made, made again or gone): not held
 * back by that second (a profile that has just become ready is scanned
 * at once, not a second after the scan at start). Both no more than the
 * scans' duty cycle allows. */
enum orphans_why { ORPHANS_PACED, ORPHANS_CHANGED };
void orphans_request(struct orphans *o, enum orphans_why why);
/*
 * A reload begins: a scan under way stops, and none starts until
 * orphans_resume; one asked for meanwhile runs then. A scan would read
 * contexts the reload is changing, and its dumps (a record per object:
 * tens of thousands at 10k objects) take the CPU the reload's reading
 * and checking need.
 */
void orphans_pause(struct orphans *o);
void orphans_resume(struct orphans *o);
/* Someone looks at p's view: scan again if it is older than this. */
#define ORPHANS_FRESH_USEC 1000000
void orphans_refresh(struct orphans *o, const struct profile *p);
/* GET /v1/profiles/{p}/orphans: what the last scan saw in p's context. */
json_t *orphans_json(const struct profile *p);

#endif
