/* SPDX-License-Identifier: MIT */
/*
 * One textual form for a GID everywhere rdmad writes one (REST, the
 * control socket, rdmactl, logs): eight groups of four hex digits, as
 * ibv_devinfo, sysfs (.../ports/N/gids/I) and pyverbs print it. Input
 * takes any IPv6 text form (inet_pton), this one included.
 */
#ifndef RDMAD_GID_H
#define RDMAD_GID_H

#include <stdio.h>
#include <infiniband/verbs.h>

#define GID_TEXT_SIZE 40

static inline const char *gid_text(const union ibv_gid *gid,
				   char buf[GID_TEXT_SIZE])
{
	const uint8_t *g = gid->raw;

	snprintf(buf, GID_TEXT_SIZE,
		 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
		 "%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		 g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9],
		 g[10], g[11], g[12], g[13], g[14], g[15]);
	return buf;
}

#endif
