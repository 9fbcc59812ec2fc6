/* SPDX-License-Identifier: MIT */
/*
 * Print the device and port documents of daemon/devinfo.c exactly as
 * pyverbs (rdma-core 44) prints them, so that rdmactl's output can be
 * compared line by line with pyverbs.
 */
#ifndef RDMAD_DEVPRINT_H
#define RDMAD_DEVPRINT_H

#include <stdio.h>
#include <jansson.h>

/* str(ctx.query_device()): pyverbs' DeviceAttr. */
void devprint_device(FILE *f, json_t *dev);
/* str(ctx.query_port(n)): pyverbs' PortAttr. */
void devprint_port(FILE *f, json_t *port);
/* str(ctx.query_device_ex().odp_caps), from the device document: the only
 * extended attributes pyverbs prints. */
void devprint_odp_caps(FILE *f, json_t *dev);

#endif
