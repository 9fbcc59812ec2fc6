/* SPDX-License-Identifier: MIT */
/*
 * The Container Device Interface front end: a CDI specification
 * (daemon.cdi_spec, default /run/cdi/rdmad.json) that lets container
 * engines (podman, containerd, CRI-O) hand a profile to a container with
 * --device rdmad.io/profile=NAME: the profile device's uverbs node,
 * rdma_cm, the profile's own socket's directory (never the main socket)
 * and RDMAD_SOCKET/RDMAD_PROFILE.
 * It listens to the manager and writes the file again when what it says
 * changes; it is never called by the engine.
 */
#ifndef RDMAD_CDI_H
#define RDMAD_CDI_H

#include <jansson.h>

struct manager;
struct cdi;

/* The CDI kind of rdmad's devices: rdmad.io/profile=NAME. */
#define CDI_KIND "rdmad.io/profile"

/* Subscribe to m and write the specification as it stands (a profile
 * whose device is absent has no CDI device). Failing to write is logged,
 * not fatal: containers are one client among others. */
int cdi_start(struct manager *m, struct cdi **out);
/* Unsubscribe and remove the specification. Accepts NULL. */
struct cdi *cdi_stop(struct cdi *c);
static inline void cdi_stopp(struct cdi **c)
{
	cdi_stop(*c);
}

/* The specification for m's running profiles, whose own sockets are in
 * runtime_dir/profiles; NULL when no profile has a device (a CDI
 * specification must declare at least one device). */
json_t *cdi_spec_json(struct manager *m, const char *runtime_dir);

#endif
