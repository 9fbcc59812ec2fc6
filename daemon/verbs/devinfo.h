/* SPDX-License-Identifier: MIT */
/*
 * Device, port and GID attributes as JSON documents. The key names and value
 * encoding are described at the top of devinfo.c; the config, REST and
 * rdmactl --json all use them.
 */
#ifndef RDMAD_DEVINFO_H
#define RDMAD_DEVINFO_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <jansson.h>

/*
 * Each returns 0 and a new reference in *out, or -errno (*out untouched).
 * devinfo_port() and devinfo_gids() return -ENOENT for a port number the
 * device does not have.
 */

/* Summary plus every ibv_query_device_ex() attribute. */
int devinfo_device(struct ibv_context *ctx, json_t **out);
/* Every ibv_query_port() attribute. */
int devinfo_port(struct ibv_context *ctx, uint8_t port, json_t **out);
/* "active", "down", ...: as GET /v1/devices/{ibdev}/ports/{n} says. */
const char *devinfo_port_state_name(enum ibv_port_state s);
/* Array of the port's valid GIDs: {index, gid, type, netdev}. */
int devinfo_gids(struct ibv_context *ctx, uint8_t port, json_t **out);
/* What is known without opening the device: name, node and transport
 * type, index (-1 if the kernel does not say), node GUID (from sysfs). */
int devinfo_summary(struct ibv_device *dev, json_t **out);

/* Open the device named ibdev. NULL with errno ENODEV when there is no such
 * device (or none at all), or ibv_open_device's errno. */
struct ibv_context *devinfo_open(const char *ibdev);
/* The kernel's index of the device named ibdev (RDMA netlink's
 * dev_index), or -errno (-ENODEV: no such device). */
int devinfo_index(const char *ibdev);
/* Can this device import a context (ibv_import_device on a dup of its
 * cmd_fd)? Returns 0 when it can, -errno (EOPNOTSUPP on rxe) otherwise. */
int devinfo_probe_import(struct ibv_context *ctx);

#endif
