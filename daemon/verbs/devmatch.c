// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <strings.h>
#include <systemd/sd-device.h>

#include "devmatch.h"
#include "devwatch.h"
#include "util.h"

/* Ports are numbered from 1 (0 on a switch); more than any device has. */
#define DEVMATCH_MAX_PORT 255

static bool guid_matches(sd_device *dev, const char *want)
{
	const char *guid;

	return sd_device_get_sysattr_value(dev, "node_guid", &guid) >= 0 &&
	       strcasecmp(guid, want) == 0;
}

/* A netdev appears in the GID table of one of the device's ports
 * (ports/P/gid_attrs/ndevs/I: what the kernel gives without a context). */
static bool gid_ndev_matches(sd_device *dev, const char *want)
{
	for (unsigned int p = 0; p <= DEVMATCH_MAX_PORT; p++) {
		char attr[64];
		const char *v;

		/* A directory: -EISDIR when it exists. Port 0 exists on
		 * switches only; past it, the first missing port is the
		 * last. */
		snprintf(attr, sizeof(attr), "ports/%u", p);
		if (sd_device_get_sysattr_value(dev, attr, &v) == -ENOENT) {
			if (p == 0)
				continue;
			break;
		}
		for (unsigned int i = 0;; i++) {
			int r;

			snprintf(attr, sizeof(attr),
				 "ports/%u/gid_attrs/ndevs/%u", p, i);
			r = sd_device_get_sysattr_value(dev, attr, &v);
			/* The end of the table; empty entries read as
			 * EINVAL. */
			if (r == -ENOENT)
				break;
			if (r >= 0 && streq(v, want))
				return true;
		}
	}
	return false;
}

/* The netdev is the device's own: a software device's "parent" attribute
 * (rxe, siw) names it, or both are functions of the same parent device (a
 * NIC's PCI function). Else it must be in the GID table (a VLAN, a bond). */
static bool netdev_matches(sd_device *dev, const char *want)
{
	_cleanup_(sd_device_unrefp) sd_device *net = NULL;
	sd_device *a, *b;
	const char *v, *pa, *pb;

	if (sd_device_new_from_subsystem_sysname(&net, "net", want) < 0)
		return false;
	if (sd_device_get_sysattr_value(dev, "parent", &v) >= 0 &&
	    streq(v, want))
		return true;
	if (sd_device_get_parent(dev, &a) >= 0 &&
	    sd_device_get_parent(net, &b) >= 0 &&
	    sd_device_get_syspath(a, &pa) >= 0 &&
	    sd_device_get_syspath(b, &pb) >= 0 && streq(pa, pb))
		return true;
	return gid_ndev_matches(dev, want);
}

/* The PCI device above it, however far (a parent may be an auxiliary
 * device on a PCI function). */
static bool pci_matches(sd_device *dev, const char *want)
{
	sd_device *pci;
	const char *name;

	return sd_device_get_parent_with_subsystem_devtype(dev, "pci", NULL,
							   &pci) >= 0 &&
	       sd_device_get_sysname(pci, &name) >= 0 && streq(name, want);
}

static bool driver_matches(sd_device *dev, const char *want)
{
	sd_device *parent;
	const char *drv;

	return sd_device_get_parent(dev, &parent) >= 0 &&
	       sd_device_get_driver(parent, &drv) >= 0 && streq(drv, want);
}

bool devmatch_matches(struct devmatch_spec d, const char *ibdev)
{
	_cleanup_(sd_device_unrefp) sd_device *dev = NULL;

	if (d.ibdev && !streq(d.ibdev, ibdev))
		return false;
	if (sd_device_new_from_subsystem_sysname(&dev, "infiniband", ibdev) < 0)
		return false;
	if (d.guid && !guid_matches(dev, d.guid))
		return false;
	if (d.netdev && !netdev_matches(dev, d.netdev))
		return false;
	if (d.pci && !pci_matches(dev, d.pci))
		return false;
	if (d.driver && !driver_matches(dev, d.driver))
		return false;
	return true;
}

void devmatch_describe(struct devmatch_spec d, char *buf, size_t len)
{
	const char *keys[] = { "ibdev", "guid", "netdev", "pci", "driver" };
	const char *vals[] = { d.ibdev, d.guid, d.netdev, d.pci,
			       d.driver };
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

/*
 * The devices that can be opened: those with a uverbs device, by its
 * "ibdev" attribute (the kernel's current name, also after a rename),
 * sorted. Where udevd runs, only those it has seen (as devwatch hears
 * of them: after udevd); else every one in sysfs (devwatch.h). The
 * names stay valid while *en holds its devices.
 */
static int list_names(sd_device_enumerator **en, const char ***out,
		      size_t *out_n)
{
	_cleanup_free_ const char **names = NULL;
	size_t n = 0, cap = 0;
	int r;

	r = sd_device_enumerator_new(en);
	if (r >= 0)
		r = sd_device_enumerator_add_match_subsystem(
		    *en, "infiniband_verbs", 1);
	if (r >= 0 && devwatch_source() != DEVWATCH_SOURCE_UDEV)
		r = sd_device_enumerator_allow_uninitialized(*en);
	if (r < 0)
		return r;
	for (sd_device *dev = sd_device_enumerator_get_device_first(*en); dev;
	     dev = sd_device_enumerator_get_device_next(*en)) {
		const char *name;

		if (sd_device_get_sysattr_value(dev, "ibdev", &name) < 0)
			continue;
		if (n == cap) {
			const char **v;

			cap = cap ? 2 * cap : 16;
			v = reallocarray(names, cap, sizeof(*names));
			if (!v)
				return -ENOMEM;
			names = v;
		}
		names[n++] = name;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_name);
	*out = TAKE_PTR(names);
	*out_n = n;
	return 0;
}

int devmatch_find(struct devmatch_spec d, char *ibdev, size_t len)
{
	_cleanup_(sd_device_enumerator_unrefp) sd_device_enumerator *en = NULL;
	_cleanup_free_ const char **names = NULL;
	size_t n = 0;
	int r;

	r = list_names(&en, &names, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (devmatch_matches(d, names[i])) {
			snprintf(ibdev, len, "%s", names[i]);
			return 0;
		}
	return -ENODEV;
}

bool devmatch_openable(const char *ibdev)
{
	_cleanup_(sd_device_enumerator_unrefp) sd_device_enumerator *en = NULL;
	_cleanup_free_ const char **names = NULL;
	size_t n = 0;

	if (list_names(&en, &names, &n) < 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (streq(names[i], ibdev))
			return true;
	return false;
}

static bool is_v4_mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0,
					    0, 0, 0, 0, 0xff, 0xff };

	return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

static bool gid_fits(const struct ibv_gid_entry *e,
		     const struct devmatch_spec *d)
{
	if (d->gid_type >= 0 && e->gid_type != (uint32_t)d->gid_type)
		return false;
	if (d->gid_family == DEVMATCH_IPV4 && !is_v4_mapped(&e->gid))
		return false;
	if (d->gid_family == DEVMATCH_IPV6 && is_v4_mapped(&e->gid))
		return false;
	return true;
}

int devmatch_gid(struct ibv_context *ctx, struct devmatch_spec d,
		 int *index, union ibv_gid *gid)
{
	struct ibv_port_attr pattr;
	_cleanup_free_ struct ibv_gid_entry *t = NULL;
	struct ibv_device_attr attr;
	size_t cap = 0;
	ssize_t n;
	int best = -1;

	if (ibv_query_device(ctx, &attr) || ibv_query_port(ctx, d.port, &pattr))
		return -errno ? -errno : -EIO;
	if (d.gid_index >= 0) {
		if (d.gid_index >= pattr.gid_tbl_len ||
		    ibv_query_gid(ctx, d.port, d.gid_index, gid))
			return -ENOENT;
		*index = d.gid_index;
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

		if (e->port_num != (uint32_t)d.port || !gid_fits(e, &d))
			continue;
		if (best < 0 || (d.gid_type < 0 &&
				 d.gid_family == DEVMATCH_ANY_FAMILY && preferred &&
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
