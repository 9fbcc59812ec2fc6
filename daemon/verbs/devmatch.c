// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <strings.h>

#include "devmatch.h"
#include "util.h"

#define SYS_IB "/sys/class/infiniband"

/* The first line of a sysfs file, without its newline. */
static int read_line(const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* The last path component that link resolves to. */
static int link_base(const char *link, char *buf, size_t len)
{
	char target[PATH_MAX];
	const char *slash;

	if (!realpath(link, target))
		return -errno;
	slash = strrchr(target, '/');
	slash = slash ? slash + 1 : target;
	if (strlen(slash) >= len)
		return -ENAMETOOLONG;
	memcpy(buf, slash, strlen(slash) + 1);
	return 0;
}

static bool guid_matches(const char *ibdev, const char *want)
{
	char path[PATH_MAX], guid[64];

	snprintf(path, sizeof(path), SYS_IB "/%s/node_guid", ibdev);
	return read_line(path, guid, sizeof(guid)) == 0 &&
	       strcasecmp(guid, want) == 0;
}

/* A netdev appears in the GID table of one of the device's ports. */
static bool netdev_matches(const char *ibdev, const char *want)
{
	char path[PATH_MAX];
	struct dirent *port;
	bool found = false;
	DIR *ports;

	snprintf(path, sizeof(path), SYS_IB "/%s/ports", ibdev);
	ports = opendir(path);
	if (!ports)
		return false;
	while (!found && (port = readdir(ports))) {
		char dir[PATH_MAX];
		struct dirent *e;
		DIR *ndevs;

		if (port->d_name[0] == '.')
			continue;
		snprintf(dir, sizeof(dir), SYS_IB "/%s/ports/%s/gid_attrs/ndevs",
			 ibdev, port->d_name);
		ndevs = opendir(dir);
		if (!ndevs)
			continue;
		while (!found && (e = readdir(ndevs))) {
			char file[PATH_MAX + 256], name[64];

			if (e->d_name[0] == '.')
				continue;
			snprintf(file, sizeof(file), "%s/%s", dir, e->d_name);
			/* Empty entries read as EINVAL. */
			found = read_line(file, name, sizeof(name)) == 0 &&
				streq(name, want);
		}
		closedir(ndevs);
	}
	closedir(ports);
	return found;
}

static bool parent_matches(const char *ibdev, const char *what,
			   const char *want)
{
	char path[PATH_MAX], base[256];

	snprintf(path, sizeof(path), SYS_IB "/%s/%s", ibdev, what);
	return link_base(path, base, sizeof(base)) == 0 && streq(base, want);
}

bool devmatch_matches(const struct conf_device *d, const char *ibdev)
{
	if (d->ibdev && !streq(d->ibdev, ibdev))
		return false;
	if (d->guid && !guid_matches(ibdev, d->guid))
		return false;
	if (d->netdev && !netdev_matches(ibdev, d->netdev))
		return false;
	if (d->pci && !parent_matches(ibdev, "device", d->pci))
		return false;
	if (d->driver && !parent_matches(ibdev, "device/driver", d->driver))
		return false;
	return true;
}

void devmatch_describe(const struct conf_device *d, char *buf, size_t len)
{
	const char *keys[] = { "ibdev", "guid", "netdev", "pci", "driver" };
	const char *vals[] = { d->ibdev, d->guid, d->netdev, d->pci,
			       d->driver };
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(keys) && off < len; i++)
		if (vals[i])
			off += (size_t)snprintf(buf + off, len - off, "%s%s %s",
						off ? ", " : "", keys[i],
						vals[i]);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int devmatch_find(const struct conf_device *d, char *ibdev, size_t len)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	const char *names[256];
	size_t n = 0;
	int r = -ENODEV;

	/* NULL when the host has no RDMA device at all. */
	if (!list)
		return -ENODEV;
	for (struct ibv_device **dev = list; *dev && n < ARRAY_SIZE(names);
	     dev++)
		names[n++] = ibv_get_device_name(*dev);
	qsort(names, n, sizeof(*names), cmp_name);
	for (size_t i = 0; i < n; i++)
		if (devmatch_matches(d, names[i])) {
			snprintf(ibdev, len, "%s", names[i]);
			r = 0;
			break;
		}
	ibv_free_device_list(list);
	return r;
}

static bool is_v4_mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0,
					    0, 0, 0, 0, 0xff, 0xff };

	return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

static bool gid_fits(const struct ibv_gid_entry *e,
		     const struct conf_device *d)
{
	static const enum ibv_gid_type types[] = {
		[GIDK_IB] = IBV_GID_TYPE_IB,
		[GIDK_ROCE_V1] = IBV_GID_TYPE_ROCE_V1,
		[GIDK_ROCE_V2] = IBV_GID_TYPE_ROCE_V2,
	};

	if (d->gid_type != GIDK_ANY && e->gid_type != types[d->gid_type])
		return false;
	if (d->gid_family == GIDF_IPV4 && !is_v4_mapped(&e->gid))
		return false;
	if (d->gid_family == GIDF_IPV6 && is_v4_mapped(&e->gid))
		return false;
	return true;
}

int devmatch_gid(struct ibv_context *ctx, const struct conf_device *d,
		 int *index, union ibv_gid *gid)
{
	struct ibv_port_attr pattr;
	_cleanup_free_ struct ibv_gid_entry *t = NULL;
	struct ibv_device_attr attr;
	size_t cap = 0;
	ssize_t n;
	int best = -1;

	if (ibv_query_device(ctx, &attr) || ibv_query_port(ctx, d->port, &pattr))
		return -errno ? -errno : -EIO;
	if (d->gid_index >= 0) {
		if (d->gid_index >= pattr.gid_tbl_len ||
		    ibv_query_gid(ctx, d->port, d->gid_index, gid))
			return -ENOENT;
		*index = d->gid_index;
		return 0;
	}
	/* One table for every port. */
	for (int p = 1; p <= attr.phys_port_cnt; p++) {
		struct ibv_port_attr pa;

		if (!ibv_query_port(ctx, p, &pa))
			cap += pa.gid_tbl_len;
	}
	t = calloc(cap ? cap : 1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	n = ibv_query_gid_table(ctx, t, cap, 0);
	if (n < 0)
		return (int)n;
	for (ssize_t i = 0; i < n; i++) {
		const struct ibv_gid_entry *e = &t[i];
		bool preferred = e->gid_type == IBV_GID_TYPE_ROCE_V2 &&
				 is_v4_mapped(&e->gid);

		if (e->port_num != (uint32_t)d->port || !gid_fits(e, d))
			continue;
		if (best < 0 || (d->gid_type == GIDK_ANY &&
				 d->gid_family == GIDF_ANY && preferred &&
				 !(t[best].gid_type == IBV_GID_TYPE_ROCE_V2 &&
				   is_v4_mapped(&t[best].gid))))
			best = (int)i;
	}
	if (best < 0)
		return -ENOENT;
	*index = (int)t[best].gid_index;
	*gid = t[best].gid;
	return 0;
}
