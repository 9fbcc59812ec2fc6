/* SPDX-License-Identifier: MIT */
/* The manager owns the running configuration, the profiles, the event loop
 * and the front ends. */
#ifndef RDMAD_MANAGER_H
#define RDMAD_MANAGER_H

#include <systemd/sd-event.h>
#include <time.h>

#include "config.h"
#include "profile.h"

struct http;

struct manager {
	sd_event *event;
	struct config *config;
	struct profile **profiles;
	size_t n_profiles;
	struct http *http;
	struct timespec started; /* CLOCK_MONOTONIC */
};

int manager_new(struct config *config, struct manager **out);
/* Open the devices and create every profile's objects. */
int manager_start(struct manager *m);
/* Destroy everything created, children first. */
void manager_stop(struct manager *m);
struct manager *manager_free(struct manager *m);
static inline void manager_freep(struct manager **m)
{
	manager_free(*m);
}

struct profile *manager_profile(struct manager *m, const char *name);
/* Is ibdev used by a profile? */
int manager_device_used(struct manager *m, const char *ibdev);
double manager_uptime(struct manager *m);

/* Can this device import a context (ibv_import_device on a dup of its
 * cmd_fd)? Returns 0 when it can, -errno (EOPNOTSUPP on rxe) otherwise. */
int device_probe_import(struct ibv_context *ctx);

#endif
