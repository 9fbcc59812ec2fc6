/* SPDX-License-Identifier: MIT */
/* Which RDMA device a device section means, and which GID it uses. */
#ifndef RDMAD_DEVMATCH_H
#define RDMAD_DEVMATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <infiniband/verbs.h>

/* Which GIDs of a port will do, by address family. */
enum devmatch_family {
	DEVMATCH_ANY_FAMILY,
	DEVMATCH_IPV4,
	DEVMATCH_IPV6,
};

/*
 * What a device is chosen by: verbs/ knows no configuration, and the
 * layers above translate theirs into this (model/verbs_spec.h). Small, and
 * passed by value, so that a caller builds it in the call.
 */
struct devmatch_spec {
	/* The matchers: each given (not NULL) must hold. */
	const char *ibdev;
	const char *guid;
	const char *netdev;
	const char *pci;
	const char *driver;
	int port;
	int gid_index; /* -1: chosen by type and family */
	int gid_type;  /* an enum ibv_gid_type, or -1: any */
	enum devmatch_family gid_family;
};

/*
 * The first device (in name order) that can be opened (has a uverbs
 * device) and for which every matcher of d holds: ibdev (name), guid
 * (node GUID as "xxxx:xxxx:xxxx:xxxx"), netdev (its own network device: a
 * software device's "parent" attribute or a function of the same parent
 * device; or one in the GID table of one of its ports), pci (the address
 * of the nearest PCI device above it, e.g. "0000:3b:00.0") and driver (the
 * kernel driver of its parent device, e.g. "mlx5_core"; software devices
 * such as rxe have no parent device, so pci and driver never match them).
 * Everything is read through sd-device (sysfs); where udevd runs, only
 * the devices it has seen count, as for devwatch (devwatch.h). Writes its
 * name to ibdev. Returns 0, -ENODEV, or -errno when the devices cannot
 * be listed.
 */
int devmatch_find(struct devmatch_spec d, char *ibdev, size_t len);

/* Is ibdev among the devices devmatch_find() picks from? */
bool devmatch_openable(const char *ibdev);

/* "ibdev rxe0, netdev veth0": the matchers of d, for messages. */
void devmatch_describe(struct devmatch_spec d, char *buf, size_t len);

/* Does the device named ibdev satisfy d's matchers? */
bool devmatch_matches(struct devmatch_spec d, const char *ibdev);

/*
 * The GID of d's port to use: the index given, or the first entry whose
 * type and family match (any when not given; with neither, RoCE v2 IPv4
 * is preferred, then the first valid entry). Returns 0 or -ENOENT.
 */
int devmatch_gid(struct ibv_context *ctx, struct devmatch_spec d,
		 int *index, union ibv_gid *gid);

#endif
