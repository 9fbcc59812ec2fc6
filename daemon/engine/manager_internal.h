/* SPDX-License-Identifier: MIT */
/*
 * What manager.c (the configuration, the profiles, reload) and
 * manager_device.c (profiles on their devices, async events, devices
 * coming and going) share, and nothing else may use.
 */
#ifndef RDMAD_MANAGER_INTERNAL_H
#define RDMAD_MANAGER_INTERNAL_H

#include "devwatch.h"
#include "manager.h"

/* manager.c: tell every subscriber (one may unsubscribe itself). */
void manager_announce_event(struct manager *m, const struct manager_event *ev);
void manager_announce(struct manager *m, enum manager_event_kind kind,
		      struct profile *p);

/* manager_device.c */
/* Watch p's context for async events, once it has one. */
void manager_watch_profile(struct manager *m, struct profile *p);
/* Start p; its creation goes on on the workers, logged when it settles. */
void manager_start_profile(struct manager *m, struct profile *p);
/* Stop p; lost: its device went (memory stays for its return). */
void manager_stop_profile(struct manager *m, struct profile *p,
			  const char *reason, bool lost);
/* Log p's state, and each of its objects that failed. */
void manager_log_profile(const struct profile *p);
/* devwatch's callback (ud: the manager). */
void manager_on_device(void *ud, const char *ibdev, enum devwatch_action a);

#endif
