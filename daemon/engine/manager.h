/* SPDX-License-Identifier: MIT */
/* The manager owns the running configuration, the profiles, the event loop
 * and the front ends, and reacts to reloads and to devices coming and
 * going. */
#ifndef RDMAD_MANAGER_H
#define RDMAD_MANAGER_H

#include <systemd/sd-event.h>
#include <time.h>

#include "config.h"
#include "profile.h"

struct http;
struct devwatch;
struct control;

struct manager {
	sd_event *event;
	struct config *config;
	struct profile **profiles;
	size_t n_profiles;
	struct http *http;
	struct control *control;
	struct devwatch *devwatch;
	char *token; /* REST bearer token, NULL: mutating calls refused */
	struct timespec started; /* CLOCK_MONOTONIC */
	unsigned int reloads, reload_failures;
};

/* Takes config over (freed with the manager, or at once on failure). */
int manager_new(struct config *config, struct manager **out);
/* Open the devices, create every profile's objects, watch devices. */
int manager_start(struct manager *m);
/* Destroy everything created, children first. */
void manager_stop(struct manager *m);
struct manager *manager_free(struct manager *m);
static inline void manager_freep(struct manager **m)
{
	manager_free(*m);
}

/*
 * Read the configuration file again; if it has errors, change nothing and
 * return -EINVAL with {"errors":[...]}; otherwise apply the difference and
 * return 0 with {"changes":[...], "kept": N}. Both in *result.
 */
int manager_reload(struct manager *m, json_t **result);

/* Read daemon.http.token_file (at least 16 characters, first line). */
int manager_load_token(struct manager *m);

struct profile *manager_profile(struct manager *m, const char *name);
/* Is ibdev used by a profile? */
int manager_device_used(struct manager *m, const char *ibdev);
double manager_uptime(struct manager *m);

/* Can this device import a context (ibv_import_device on a dup of its
 * cmd_fd)? Returns 0 when it can, -errno (EOPNOTSUPP on rxe) otherwise. */
int device_probe_import(struct ibv_context *ctx);

/* The configuration's errors as [{"file","line","message"}]. */
json_t *config_errors_json(const struct config *c);

#endif
