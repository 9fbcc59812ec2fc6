/* SPDX-License-Identifier: MIT */
/*
 * Reconcile: the objects of each running profile against what the
 * kernel has. A process that holds a profile's context (a shared client,
 * through the imported context) can destroy the daemon's objects in it:
 * ibv_dereg_mr() on an imported MR instead of ibv_unimport_mr(), or a
 * destroy by handle. Every RECONCILE_USEC, and before an ATTACH hands
 * out a profile's handles, each object with a uverbs handle is looked up
 * in the kernel's table of the context's file (uhandle.h: one ioctl per
 * kind), and a few MRs a round are asked for their keys (a handle the
 * kernel gave to a new MR after ours went is not ours). What is gone is
 * announced and made again (profile_mark_lost()).
 *
 * Only contexts that can be handed out (import-capable devices) are
 * checked: nobody else holds the others.
 */
#ifndef RDMAD_RECONCILE_H
#define RDMAD_RECONCILE_H

#include <jansson.h>
#include <stdbool.h>
#include <systemd/sd-event.h>

struct profile;
struct manager;
struct reconcile;

#define RECONCILE_USEC 1000000
/* MRs whose keys are checked per round and profile. */
#define RECONCILE_MR_KEYS 64

/* The checks of m's profiles, every RECONCILE_USEC (none while m
 * reloads); what a check finds lost is announced with m's sessions
 * attached then (manager_holders_json()). */
int reconcile_new(struct manager *m, struct reconcile **out);
struct reconcile *reconcile_free(struct reconcile *r);
/*
 * Before an ATTACH hands out p's handles, whenever the last check was.
 * With mrs, the kernel's listing of each kind the last check listed,
 * digested (uhandle_digest()); the whole check only when one differs
 * (something was destroyed, or made, in the context since). So an
 * attach costs one call per kind, not a lookup per object. What a
 * shared client destroyed is found either way: its handle leaves the
 * listing.
 *
 * Without mrs (the attach hands out an MR table, whose MRs the client
 * imports when first used: the kernel looks each handle up then, and
 * the client checks its keys), MRs are left to that import and to the
 * timer's rounds; every other kind's handles are looked for in a
 * listing that stops once it has found as many as p has
 * (uhandle_list_first()), so that the check does not grow with the
 * MRs. Returns as reconcile_profile() does.
 */
int reconcile_attach(struct reconcile *rc, struct profile *p, bool mrs);
/* Check p now, unless it was checked within max_age usec. Returns how
 * many of its objects were lost (their re-creation has started: p is
 * creating), 0, or -errno when the kernel cannot be asked. */
int reconcile_profile(struct reconcile *r, struct profile *p,
		      uint64_t max_age);

#endif
