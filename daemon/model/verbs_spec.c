// SPDX-License-Identifier: MIT
#include "verbs_spec.h"

struct devmatch_spec devmatch_of(const struct conf_device *d)
{
	static const int types[] = {
		[GIDK_IB] = IBV_GID_TYPE_IB,
		[GIDK_ROCE_V1] = IBV_GID_TYPE_ROCE_V1,
		[GIDK_ROCE_V2] = IBV_GID_TYPE_ROCE_V2,
	};
	static const enum devmatch_family families[] = {
		[GIDF_ANY] = DEVMATCH_ANY_FAMILY,
		[GIDF_IPV4] = DEVMATCH_IPV4,
		[GIDF_IPV6] = DEVMATCH_IPV6,
	};

	return (struct devmatch_spec){
		.ibdev = d->ibdev,
		.guid = d->guid,
		.netdev = d->netdev,
		.pci = d->pci,
		.driver = d->driver,
		.port = d->port,
		.gid_index = d->gid_index,
		.gid_type = d->gid_type == GIDK_ANY ? -1 : types[d->gid_type],
		.gid_family = families[d->gid_family],
	};
}

struct memory_spec memory_of(const struct conf_memory *c)
{
	static const enum memory_backing backings[] = {
		[MEM_MEMFD] = MEMORY_MEMFD,
		[MEM_HUGETLB] = MEMORY_HUGETLB,
		[MEM_FILE] = MEMORY_FILE,
		[MEM_ANONYMOUS] = MEMORY_ANONYMOUS,
	};

	return (struct memory_spec){
		.name = c->name,
		.size = c->size,
		.backing = backings[c->backing],
		.path = c->path,
		.page_size = c->page_size,
		.no_thp = c->thp == CONF_FALSE,
	};
}
