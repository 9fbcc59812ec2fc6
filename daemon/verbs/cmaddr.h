/* SPDX-License-Identifier: MIT */
/* Which RDMA device an IP address belongs to, as rdma_cm sees it. */
#ifndef RDMAD_CMADDR_H
#define RDMAD_CMADDR_H

#include <stddef.h>
#include <sys/socket.h>

/*
 * The name of the RDMA device (and its port) that rdma_cm binds sa's
 * address to, into ibdev: 0, -EADDRNOTAVAIL when no RDMA device has the
 * address, or another -errno (no rdma_cm here, say). The port of sa is
 * not taken: the address alone decides.
 */
int cmaddr_device(const struct sockaddr *sa, char *ibdev, size_t len,
		  int *port);

/* A wildcard address (0.0.0.0, ::), which is on every device or none. */
int cmaddr_is_any(const struct sockaddr *sa);

#endif
