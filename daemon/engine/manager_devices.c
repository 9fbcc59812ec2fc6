// SPDX-License-Identifier: MIT
/*
 * The manager's view of the host's RDMA devices, which GET /v1/devices
 * shows (issue 45, item 8). What a device says of itself without being
 * opened (devinfo_summary) and whether it can import (a probe that
 * opens it) are read when the daemon starts and when a device comes or
 * goes (devwatch's events), once per change and for the changed device
 * only: a request, anonymous or not, opens nothing. A request adds what
 * the manager knows at that moment (used, up), which costs no system
 * call. Without a watcher (no device events) the view is read again at
 * each request, as there is nothing else to go by.
 */
#include <string.h>

#include "devinfo.h"
#include "devmatch.h"
#include "devwatch.h"
#include "log.h"
#include "manager_internal.h"

struct devview_entry {
	json_t *summary; /* devinfo_summary()'s document */
	int import;	 /* the import probe: 0, or -errno */
};

struct manager_devices {
	struct devview_entry *e;
	size_t n;
	/* Devices that went away (devwatch's REMOVE) and did not come back:
	 * the kernel may list one until its last context is closed, and
	 * opening it then would hold its removal up. */
	char **gone;
	size_t n_gone;
	bool read;
};

static void entries_free(struct devview_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		json_decref(e[i].summary);
	free(e);
}

static bool is_gone(const struct manager_devices *v, const char *name)
{
	for (size_t i = 0; i < v->n_gone; i++)
		if (streq(v->gone[i], name))
			return true;
	return false;
}

/* name is gone (went true) or back (false). */
static void set_gone(struct manager_devices *v, const char *name, bool went)
{
	char **g;

	for (size_t i = 0; i < v->n_gone; i++)
		if (streq(v->gone[i], name)) {
			if (!went) {
				free(v->gone[i]);
				v->gone[i] = v->gone[--v->n_gone];
			}
			return;
		}
	if (!went)
		return;
	g = realloc(v->gone, (v->n_gone + 1) * sizeof(*g));
	if (!g)
		return;
	v->gone = g;
	g[v->n_gone] = strdup(name);
	if (g[v->n_gone])
		v->n_gone++;
}

/* The import probe of a device seen before with the same summary (the
 * same name, index and GUID): kept; 1 when there is none. */
static int known_import(const struct manager_devices *v, const json_t *sum)
{
	for (size_t i = 0; i < v->n; i++)
		if (json_equal(v->e[i].summary, (json_t *)sum))
			return v->e[i].import;
	return 1;
}

static int probe_import(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	int e;

	if (!ctx)
		return -(errno ? errno : ENODEV);
	e = devinfo_probe_import(ctx);
	ibv_close_device(ctx);
	return e;
}

/* The host's devices read again; those seen before are not opened. */
static int devices_read(struct manager_devices *v)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct devview_entry *e = NULL;
	size_t n = 0, cap = 0;

	for (struct ibv_device **d = list; d && *d; d++) {
		json_t *sum = NULL;

		if (is_gone(v, ibv_get_device_name(*d)) ||
		    devinfo_summary(*d, &sum) < 0)
			continue;
		if (n == cap) {
			struct devview_entry *ne;

			cap = cap ? cap * 2 : 4;
			ne = realloc(e, cap * sizeof(*e));
			if (!ne) {
				json_decref(sum);
				entries_free(e, n);
				ibv_free_device_list(list);
				return -ENOMEM;
			}
			e = ne;
		}
		e[n].summary = sum;
		e[n].import = known_import(v, sum);
		if (e[n].import == 1)
			e[n].import = probe_import(*d);
		n++;
	}
	if (list)
		ibv_free_device_list(list);
	entries_free(v->e, v->n);
	v->e = e;
	v->n = n;
	v->read = true;
	return 0;
}

void manager_devices_changed(struct manager *m, const char *ibdev,
			     bool gone)
{
	struct manager_devices *v = m->devices;
	int r;

	if (!v) {
		v = m->devices = calloc(1, sizeof(*v));
		if (!v)
			return;
	}
	if (ibdev)
		set_gone(v, ibdev, gone);
	r = devices_read(v);
	if (r < 0)
		log_warn(r, "cannot read the RDMA devices, ignoring");
}

void manager_devices_free(struct manager *m)
{
	struct manager_devices *v = m->devices;

	if (!v)
		return;
	entries_free(v->e, v->n);
	for (size_t i = 0; i < v->n_gone; i++)
		free(v->gone[i]);
	free(v->gone);
	free(v);
	m->devices = NULL;
}

/* One device's document: its summary, then what the manager knows. */
static json_t *device_json(struct manager *m, const struct devview_entry *e)
{
	json_t *j = json_copy(e->summary);
	const char *name = json_string_value(json_object_get(j, "name"));

	if (!j || !name)
		goto fail;
	if (json_object_set_new(j, "used", json_boolean(manager_device_used(
						   m, name))) < 0 ||
	    json_object_set_new(j, "up",
				json_boolean(manager_device_up(m, name))) < 0 ||
	    json_object_set_new(j, "import_capable",
				json_boolean(e->import == 0)) < 0)
		goto fail;
	if (e->import && json_object_set_new(j, "import_error",
					     json_string(strerror(-e->import))) <
				 0)
		goto fail;
	return j;
fail:
	json_decref(j);
	return NULL;
}

json_t *manager_devices_json(struct manager *m)
{
	json_t *a;

	/* Without device events, nothing says when to read them again. */
	if (!m->devices || !m->devices->read || !m->devwatch)
		manager_devices_changed(m, NULL, false);
	if (!m->devices)
		return NULL;
	a = json_array();
	for (size_t i = 0; a && i < m->devices->n; i++) {
		json_t *j = device_json(m, &m->devices->e[i]);

		if (!j || json_array_append_new(a, j) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* ---- queries ---- */

int manager_device_used(struct manager *m, const char *ibdev)
{
	for (size_t i = 0; i < m->n_profiles; i++)
		if (profile_ctx(m->profiles[i]) &&
		    streq(profile_ibdev(m->profiles[i]), ibdev))
			return 1;
	return 0;
}

bool manager_device_up(struct manager *m, const char *ibdev)
{
	if (m->devwatch)
		return devwatch_is_up(m->devwatch, ibdev);
	return devmatch_openable(ibdev);
}

const char *manager_device_events(struct manager *m)
{
	return devwatch_source_name(devwatch_get_source(m->devwatch));
}
