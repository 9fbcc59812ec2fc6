/* SPDX-License-Identifier: MIT */
/* A profile's device context's async events (asyncev.c). */
#ifndef RDMAD_ASYNCEV_H
#define RDMAD_ASYNCEV_H

#include <stdbool.h>

#include "profile.h"

struct events;

/*
 * One async event of p's context: published on events, and acted on
 * (GID selected again, a QP's error noted, an SRQ's limit armed again).
 * Returns true when the device failed (IBV_EVENT_DEVICE_FATAL): the
 * caller stops p then; nothing else of p was touched.
 */
bool asyncev_handle(struct events *events, struct profile *p,
		    const struct ibv_async_event *ev);

#endif
