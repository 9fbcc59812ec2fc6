/* SPDX-License-Identifier: MIT */
/*
 * A profile at run time: its own device context and the objects its
 * configuration declares, created in dependency order (the kind order of
 * enum obj_kind) and destroyed in reverse. Objects a device refuses are
 * failed with the reason; the rest of the profile still runs.
 */
#ifndef RDMAD_PROFILE_H
#define RDMAD_PROFILE_H

#include "profile_index.h"

/* Build the object list of c (nothing is created yet); its objects are
 * created on w, and its owner m hears how it goes
 * (manager_profile_changed(); NULL: nobody). */
int profile_new(const struct config *cfg, const struct conf_profile *c,
		struct workers *w, struct manager *owner, struct profile **out);
/* Find and open the device and start creating every object on the
 * workers (state creating; PROFILE_SETTLED when done). Returns 0 when
 * the profile runs or is being created, -ENODEV when the device is
 * absent (pending), or -errno when it cannot be opened. */
int profile_start(struct profile *p);
/* Stop the creation under way (waiting for the jobs that run), destroy
 * every object, children first, and close the context. reason says why
 * (NULL: "stopped"); the profile becomes pending. */
void profile_stop(struct profile *p, const char *reason);
/* The device went: as profile_stop(), but memory stays, contents and
 * all, for the objects profile_start() builds over it again when the
 * device comes back. */
void profile_lose_device(struct profile *p, const char *reason);
/*
 * Take over the running objects of old that next declares the same way
 * (same attributes, same dependencies), destroy the rest of old (children
 * first), then start creating what is new or changed (parents first). A
 * creation under way in old is stopped first. old is left empty, to be
 * freed. report() is told each object's action.
 */
int profile_reload(struct profile *next, struct profile *old,
		   void (*report)(void *ud, const struct object *o,
				  enum obj_action a),
		   void *ud);
struct profile *profile_free(struct profile *p);
/*
 * A profile a reload removes: stop its creation, destroy what no session
 * holds (children first) and set the leased objects apart to drain, its
 * context open under them. Its configuration is forgotten (conf and dev
 * become NULL). Returns true while objects drain: free it once
 * profile_release() has let the last one go (n_draining is 0).
 */
bool profile_retire(struct profile *p);

/* One lease of o ends; a draining object without leases is destroyed. */
void profile_release(struct profile *p, struct object *o);

/*
 * Objects of p the kernel lost (reconcile.c): each is announced
 * (object_lost, with holders: the sessions attached, a JSON array,
 * borrowed), let go of without a kernel call, and marked to be made
 * again with what depends on it (what stands on it is destroyed first;
 * a leased one drains). A lost draining object just goes with its last
 * lease. Returns how many objects profile_create_lost() is to make.
 */
size_t profile_mark_lost(struct profile *p, struct object *const *lost,
			 size_t n, json_t *holders);
/* Make what profile_mark_lost() marked (p is creating until they are);
 * each is announced again once ready (object_recreated). */
void profile_create_lost(struct profile *p);

/* JSON documents for the control surfaces. */
json_t *profile_json(const struct profile *p, int detail);
/* The creation under way: p->progress, with the bytes of its large
 * memories populated by now (their workers count them as they go). */
void profile_progress_now(const struct profile *p,
			  struct profile_progress *out);
/* The same as the document's "progress" (and the event's fields). */
json_t *profile_progress_json(const struct profile *p);

#endif
