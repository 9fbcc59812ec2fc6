// SPDX-License-Identifier: MIT
/*
 * RDMA devices coming and going, from sd-device (udevd's events) or from
 * the kernel's uevents and sysfs where udevd does not run, and a
 * context's async events.
 *
 * A device is two kernel devices, each with its own events (Linux 6.1):
 *
 *   infiniband/rxe0          SUBSYSTEM=infiniband, NAME=rxe0
 *   infiniband_verbs/uverbs0 SUBSYSTEM=infiniband_verbs, the char device
 *                            that ibv_open_device() opens
 *
 * Registration sends uverbs0's add first and rxe0's add last (the kernel
 * holds rxe0's back until every client, uverbs included, has the device).
 * Removal sends uverbs0's remove first; rxe0's remove only comes once every
 * context on a device without disassociate support has been closed. udevd
 * keeps that order only for related devices: these two may come the other
 * way round; the kernel's own events come in its order. A uverbs event
 * does not name its device: the name is its
 * "ibdev" attribute while the device exists (at its add, or at start), and
 * remembered for its remove.
 *
 * Each device is therefore tracked with two facts, "announced" (the
 * infiniband device exists) and its uverbs device (if any). It is up, and
 * reported ADD, when it has both; it is reported REMOVE when it loses either.
 * A rename (move) is REMOVE old, ADD new. Synthetic events (written to a
 * uevent file by udevadm trigger) change nothing on the device: a synthetic
 * remove or move is ignored; a synthetic add is harmless (an add of a device
 * we know changes nothing) and so is taken.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/epoll.h>

#include "devwatch.h"
#include "uevent.h"
#include "util.h"

/* More RDMA devices than any machine has (SR-IOV included): a bound on what
 * a flood of events can make us allocate. */
#define DEVWATCH_MAX_DEVS 4096

struct dev {
	char ibdev[DEVWATCH_NAME_MAX];
	/* Its uverbs device, "" while there is none. */
	char uverbs[DEVWATCH_NAME_MAX];
	/* The infiniband device exists. */
	bool announced;
	/* Reported ADD (or found at start): announced, with a uverbs. */
	bool up;
};

struct devset {
	struct dev *v;
	size_t n, cap;
};

static void devset_done(struct devset *s)
{
	free(s->v);
	*s = (struct devset){0};
}

static struct dev *devset_find(struct devset *s, const char *ibdev)
{
	for (size_t i = 0; i < s->n; i++)
		if (streq(s->v[i].ibdev, ibdev))
			return &s->v[i];
	return NULL;
}

static struct dev *devset_find_uverbs(struct devset *s, const char *uverbs)
{
	for (size_t i = 0; i < s->n; i++)
		if (streq(s->v[i].uverbs, uverbs))
			return &s->v[i];
	return NULL;
}

/* The entry for ibdev, made if needed; NULL when out of memory or room. */
static struct dev *devset_get(struct devset *s, const char *ibdev)
{
	struct dev *d = devset_find(s, ibdev);

	if (d)
		return d;
	if (strlen(ibdev) >= DEVWATCH_NAME_MAX || s->n >= DEVWATCH_MAX_DEVS)
		return NULL;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		struct dev *v = reallocarray(s->v, cap, sizeof(*v));

		if (!v)
			return NULL;
		s->v = v;
		s->cap = cap;
	}
	d = &s->v[s->n++];
	*d = (struct dev){0};
	strcpy(d->ibdev, ibdev);
	return d;
}

/* Forget d once nothing of it exists. d is invalid afterwards. */
static void devset_put(struct devset *s, struct dev *d)
{
	if (d->announced || d->uverbs[0] || d->up)
		return;
	*d = s->v[--s->n];
}

struct devwatch {
	enum devwatch_source source;
	/* udev: */
	sd_device_monitor *mon;
	/* kernel: the uevent socket, and where sysfs is */
	sd_event_source *uevents;
	int fd;
	char *sysfs;
	bool any_sender; /* tests: fd is not the kernel's socket */
	devwatch_cb cb;
	void *ud;
	struct devset devs;
	bool dispatching;
	bool freeing; /* devwatch_free() from a callback: free when done */
};

/* ---- the source ---- */

const char *devwatch_udev_control(void)
{
	const char *p = getenv("RDMAD_UDEV_CONTROL");

	return p && *p ? p : "/run/udev/control";
}

enum devwatch_source devwatch_source(void)
{
	static int decided = DEVWATCH_SOURCE_NONE;
	int s = __atomic_load_n(&decided, __ATOMIC_RELAXED);

	if (s == DEVWATCH_SOURCE_NONE) {
		s = access(devwatch_udev_control(), F_OK) == 0
			? DEVWATCH_SOURCE_UDEV
			: DEVWATCH_SOURCE_KERNEL;
		__atomic_store_n(&decided, s, __ATOMIC_RELAXED);
	}
	return (enum devwatch_source)s;
}

const char *devwatch_source_name(enum devwatch_source s)
{
	switch (s) {
	case DEVWATCH_SOURCE_UDEV:
		return "udev";
	case DEVWATCH_SOURCE_KERNEL:
		return "kernel";
	default:
		return "none";
	}
}

/* ---- the devices there at start, from sd-device (udev source) ---- */

static int enumerate(const char *subsystem, sd_device_enumerator **out)
{
	_cleanup_(sd_device_enumerator_unrefp) sd_device_enumerator *en = NULL;
	int r;

	r = sd_device_enumerator_new(&en);
	if (r >= 0)
		r = sd_device_enumerator_add_match_subsystem(en, subsystem, 1);
	if (r < 0)
		return r;
	*out = TAKE_PTR(en);
	return 0;
}

/* The devices there now, their "up" computed. */
static int scan(struct devset *s)
{
	_cleanup_(sd_device_enumerator_unrefp) sd_device_enumerator *ib = NULL;
	_cleanup_(sd_device_enumerator_unrefp) sd_device_enumerator *uv = NULL;
	const char *name, *ibdev;
	struct dev *d;
	int r;

	/* No such subsystem (no RDMA in this kernel, yet): no devices. */
	r = enumerate("infiniband", &ib);
	if (r < 0)
		return r;
	for (sd_device *dev = sd_device_enumerator_get_device_first(ib); dev;
	     dev = sd_device_enumerator_get_device_next(ib)) {
		if (sd_device_get_sysname(dev, &name) < 0)
			continue;
		d = devset_get(s, name);
		if (!d)
			return -ENOMEM;
		d->announced = true;
	}

	r = enumerate("infiniband_verbs", &uv);
	if (r < 0)
		return r;
	for (sd_device *dev = sd_device_enumerator_get_device_first(uv); dev;
	     dev = sd_device_enumerator_get_device_next(uv)) {
		if (sd_device_get_sysname(dev, &name) < 0 ||
		    strlen(name) >= DEVWATCH_NAME_MAX ||
		    sd_device_get_sysattr_value(dev, "ibdev", &ibdev) < 0)
			continue;
		d = devset_get(s, ibdev);
		if (!d)
			return -ENOMEM;
		strcpy(d->uverbs, name);
	}

	for (size_t i = 0; i < s->n; i++)
		s->v[i].up = s->v[i].announced && s->v[i].uverbs[0];
	return 0;
}

/* ---- the devices there at start, from sysfs (kernel source) ---- */

/*
 * The name in sysfs file path (an "ibdev" attribute: "rxe0\n") into out
 * (DEVWATCH_NAME_MAX bytes). 0, or -errno when it cannot be read or is
 * no device name.
 */
static int read_name(int dirfd, const char *path, char *out)
{
	_cleanup_close_ int fd = -1;
	char buf[DEVWATCH_NAME_MAX + 1];
	ssize_t n;

	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	if (n == 0 || (size_t)n >= DEVWATCH_NAME_MAX || strchr(buf, '/') ||
	    strlen(buf) != (size_t)n)
		return -EINVAL;
	memcpy(out, buf, (size_t)n + 1);
	return 0;
}

/* Call f for each entry of sysfs/class/CLASS (none when the class does
 * not exist: no RDMA in this kernel, yet). f returns 0 or -errno, which
 * stops the walk. */
static int each_in_class(const char *sysfs, const char *class,
			 int (*f)(void *ud, int dirfd, const char *name),
			 void *ud)
{
	char path[PATH_MAX];
	DIR *dir;
	struct dirent *de;
	int r = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/class/%s", sysfs, class) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? 0 : -errno;
	while (r == 0 && (errno = 0, de = readdir(dir)))
		if (de->d_name[0] != '.' &&
		    strlen(de->d_name) < DEVWATCH_NAME_MAX)
			r = f(ud, dirfd(dir), de->d_name);
	if (r == 0 && errno)
		r = -errno;
	closedir(dir);
	return r;
}

static int add_announced(void *ud, int dirfd _unused_, const char *name)
{
	struct dev *d = devset_get(ud, name);

	if (!d)
		return -ENOMEM;
	d->announced = true;
	return 0;
}

/* A uverbs device and its ibdev (class/infiniband_verbs also holds the
 * file abi_version: no ibdev in it). */
static int add_uverbs(void *ud, int dirfd, const char *name)
{
	char path[2 * DEVWATCH_NAME_MAX], ibdev[DEVWATCH_NAME_MAX];
	struct dev *d;

	snprintf(path, sizeof(path), "%s/ibdev", name);
	if (read_name(dirfd, path, ibdev) < 0)
		return 0;
	d = devset_get(ud, ibdev);
	if (!d)
		return -ENOMEM;
	strcpy(d->uverbs, name);
	return 0;
}

/* The devices there now, their "up" computed. */
static int scan_sysfs(const char *sysfs, struct devset *s)
{
	int r = each_in_class(sysfs, "infiniband", add_announced, s);

	if (r >= 0)
		r = each_in_class(sysfs, "infiniband_verbs", add_uverbs, s);
	if (r < 0)
		return r;
	for (size_t i = 0; i < s->n; i++)
		s->v[i].up = s->v[i].announced && s->v[i].uverbs[0];
	return 0;
}

struct uverbs_of {
	const char *ibdev;
	char *uverbs;
	bool found;
};

static int match_uverbs(void *ud, int dirfd, const char *name)
{
	struct uverbs_of *q = ud;
	char path[2 * DEVWATCH_NAME_MAX], ibdev[DEVWATCH_NAME_MAX];

	snprintf(path, sizeof(path), "%s/ibdev", name);
	if (read_name(dirfd, path, ibdev) < 0 || !streq(ibdev, q->ibdev))
		return 0;
	strcpy(q->uverbs, name);
	q->found = true;
	return 1; /* stop */
}

/* The uverbs device of ibdev there now, into uverbs (DEVWATCH_NAME_MAX
 * bytes): true when there is one. */
static bool find_uverbs(const struct devwatch *w, const char *ibdev,
			char *uverbs)
{
	_cleanup_(sd_device_enumerator_unrefp) sd_device_enumerator *uv = NULL;
	struct uverbs_of q = {.ibdev = ibdev, .uverbs = uverbs};
	const char *name, *of;

	if (w->source == DEVWATCH_SOURCE_KERNEL) {
		(void)each_in_class(w->sysfs, "infiniband_verbs", match_uverbs,
				    &q);
		return q.found;
	}
	if (w->source != DEVWATCH_SOURCE_UDEV ||
	    enumerate("infiniband_verbs", &uv) < 0)
		return false;
	for (sd_device *dev = sd_device_enumerator_get_device_first(uv); dev;
	     dev = sd_device_enumerator_get_device_next(uv))
		if (sd_device_get_sysname(dev, &name) >= 0 &&
		    strlen(name) < DEVWATCH_NAME_MAX &&
		    sd_device_get_sysattr_value(dev, "ibdev", &of) >= 0 &&
		    streq(of, ibdev)) {
			strcpy(uverbs, name);
			return true;
		}
	return false;
}

/* ---- the state machine ---- */

static void emit(struct devwatch *w, const char *ibdev, enum devwatch_action a)
{
	if (!w->freeing)
		w->cb(w->ud, ibdev, a);
}

/* Report d's change of state, if any, and forget it once gone. */
static void sync_dev(struct devwatch *w, struct dev *d)
{
	bool up = d->announced && d->uverbs[0];

	if (up != d->up) {
		d->up = up;
		emit(w, d->ibdev, up ? DEVWATCH_ADD : DEVWATCH_REMOVE);
	}
	devset_put(&w->devs, d);
}

static void handle_move(struct devwatch *w, const struct devwatch_event *ev)
{
	struct dev *d, *stale;

	/* Nothing can hold the new name already; if our view says otherwise,
	 * the view is wrong about that one. */
	stale = devset_find(&w->devs, ev->name);
	if (stale) {
		stale->announced = false;
		stale->uverbs[0] = '\0';
		sync_dev(w, stale);
	}
	d = devset_find(&w->devs, ev->old_name);
	if (!d) {
		d = devset_get(&w->devs, ev->name);
		if (!d)
			return;
	} else if (d->up) {
		d->up = false;
		emit(w, d->ibdev, DEVWATCH_REMOVE);
	}
	strcpy(d->ibdev, ev->name);
	d->announced = true;
	sync_dev(w, d);
}

static void handle_ib(struct devwatch *w, const struct devwatch_event *ev)
{
	struct dev *d;

	switch (ev->action) {
	case SD_DEVICE_ADD:
		d = devset_get(&w->devs, ev->name);
		if (!d)
			return;
		d->announced = true;
		/*
		 * udevd orders the events of one device path, not of two: the
		 * new uverbs device's add can come before the old device's
		 * remove (rdma link del that waited, then rdma link add), and
		 * that remove forgot it. Ask what is there now.
		 */
		if (!d->uverbs[0])
			find_uverbs(w, d->ibdev, d->uverbs);
		sync_dev(w, d);
		return;
	case SD_DEVICE_REMOVE:
		d = devset_find(&w->devs, ev->name);
		if (!d)
			return;
		/* A device's uverbs goes before it; if we missed that, it
		 * is gone now anyway. */
		d->announced = false;
		d->uverbs[0] = '\0';
		sync_dev(w, d);
		return;
	case SD_DEVICE_MOVE:
		if (ev->old_name)
			handle_move(w, ev);
		return;
	default:
		return; /* change, bind, unbind, online, offline */
	}
}

static void handle_uverbs(struct devwatch *w, const struct devwatch_event *ev)
{
	struct dev *d;

	switch (ev->action) {
	case SD_DEVICE_ADD:
		/* Gone again already (or unreadable): its remove follows. */
		if (!ev->ibdev)
			return;
		d = devset_find_uverbs(&w->devs, ev->name);
		if (d && !streq(d->ibdev, ev->ibdev)) {
			d->uverbs[0] = '\0';
			sync_dev(w, d);
		}
		d = devset_get(&w->devs, ev->ibdev);
		if (!d)
			return;
		strcpy(d->uverbs, ev->name);
		sync_dev(w, d);
		return;
	case SD_DEVICE_REMOVE:
		d = devset_find_uverbs(&w->devs, ev->name);
		if (!d)
			return;
		d->uverbs[0] = '\0';
		sync_dev(w, d);
		return;
	default:
		return; /* uverbs devices are not renamed */
	}
}

/* After a gap in the events (the kernel's were dropped): the devices
 * there now replace what we knew, each change reported as it would have
 * been. */
static void resync(struct devwatch *w)
{
	struct devset now = {0};
	struct dev *d, *nd;

	if (scan_sysfs(w->sysfs, &now) < 0) {
		devset_done(&now);
		return;
	}
	/* Backwards: devset_put() moves the last entry into the place of
	 * the one it forgets, and the last one is done already. */
	for (size_t i = w->devs.n; i-- > 0 && !w->freeing;) {
		d = &w->devs.v[i];
		nd = devset_find(&now, d->ibdev);
		d->announced = nd && nd->announced;
		strcpy(d->uverbs, nd ? nd->uverbs : "");
		sync_dev(w, d);
	}
	for (size_t i = 0; i < now.n && !w->freeing; i++) {
		nd = &now.v[i];
		d = devset_find(&w->devs, nd->ibdev);
		if (d)
			continue;
		d = devset_get(&w->devs, nd->ibdev);
		if (!d)
			break;
		d->announced = nd->announced;
		strcpy(d->uverbs, nd->uverbs);
		sync_dev(w, d);
	}
	devset_done(&now);
}

static void destroy(struct devwatch *w)
{
	sd_device_monitor_unref(w->mon);
	sd_event_source_disable_unref(w->uevents);
	closep(&w->fd);
	free(w->sysfs);
	devset_done(&w->devs);
	free(w);
}

static void feed_one(struct devwatch *w, const struct devwatch_event *ev)
{
	if (!ev->name || strlen(ev->name) >= DEVWATCH_NAME_MAX ||
	    (ev->old_name && strlen(ev->old_name) >= DEVWATCH_NAME_MAX) ||
	    (ev->ibdev && strlen(ev->ibdev) >= DEVWATCH_NAME_MAX))
		return;
	if (ev->synthetic && ev->action != SD_DEVICE_ADD)
		return;
	if (ev->uverbs)
		handle_uverbs(w, ev);
	else
		handle_ib(w, ev);
}

void devwatch_feed(struct devwatch *w, const struct devwatch_event *ev)
{
	w->dispatching = true;
	feed_one(w, ev);
	w->dispatching = false;
	if (w->freeing)
		destroy(w);
}

/* ---- the udev source: sd-device's monitor ---- */

static int on_device(sd_device_monitor *m _unused_, sd_device *dev, void *ud)
{
	struct devwatch_event ev = {0};
	const char *subsys, *old;

	if (sd_device_get_subsystem(dev, &subsys) < 0 ||
	    sd_device_get_action(dev, &ev.action) < 0 ||
	    sd_device_get_sysname(dev, &ev.name) < 0)
		return 0;
	ev.uverbs = streq(subsys, "infiniband_verbs");
	if (!ev.uverbs && !streq(subsys, "infiniband"))
		return 0;
	ev.synthetic =
	    sd_device_get_property_value(dev, "SYNTH_UUID", NULL) >= 0;
	if (ev.action == SD_DEVICE_MOVE &&
	    sd_device_get_property_value(dev, "DEVPATH_OLD", &old) >= 0) {
		const char *slash = strrchr(old, '/');

		ev.old_name = slash && slash[1] ? slash + 1 : NULL;
	}
	if (ev.uverbs && ev.action == SD_DEVICE_ADD &&
	    sd_device_get_sysattr_value(dev, "ibdev", &ev.ibdev) < 0)
		ev.ibdev = NULL;
	devwatch_feed(ud, &ev);
	return 0;
}

static int start_udev(struct devwatch *w, sd_event *e)
{
	int r;

	r = sd_device_monitor_new(&w->mon);
	if (r < 0)
		return r;
	/* Room for a burst (udevadm trigger, many VFs at once); sd-device
	 * forces it with CAP_NET_ADMIN, else the kernel caps it at rmem_max.
	 * A smaller buffer works until a burst. */
	(void)sd_device_monitor_set_receive_buffer_size(w->mon, 4 << 20);
	r = sd_device_monitor_filter_add_match_subsystem_devtype(
	    w->mon, "infiniband", NULL);
	if (r >= 0)
		r = sd_device_monitor_filter_add_match_subsystem_devtype(
		    w->mon, "infiniband_verbs", NULL);
	if (r >= 0)
		r = sd_device_monitor_attach_event(w->mon, e);
	if (r >= 0)
		(void)sd_device_monitor_set_description(w->mon, "devwatch");
	/* The monitor listens before the scan: what changes during it
	 * arrives as events afterwards, and applying them again changes
	 * nothing. */
	if (r >= 0)
		r = sd_device_monitor_start(w->mon, on_device, w);
	if (r >= 0)
		r = scan(&w->devs);
	return r;
}

/* ---- the kernel source: uevents (uevent.c) and sysfs ---- */

/* Messages read per wake-up at most, so that a flood does not hold the
 * loop; the rest wait for the next turn. */
#define UEVENT_BATCH 64

/* One message: an event of ours, fed to the state machine (which may
 * free w: the caller checks w->freeing). */
static void handle_uevent(struct devwatch *w, const char *msg, size_t len)
{
	struct devwatch_event ev = {0};
	char path[PATH_MAX], ibdev[DEVWATCH_NAME_MAX];
	struct uevent u;

	if (uevent_parse(msg, len, &u) < 0)
		return;
	ev.uverbs = streq(u.subsystem, "infiniband_verbs");
	if (!ev.uverbs && !streq(u.subsystem, "infiniband"))
		return;
	ev.action = u.action;
	ev.synthetic = u.synthetic;
	ev.name = u.sysname;
	ev.old_name = u.action == SD_DEVICE_MOVE ? u.old_sysname : NULL;
	/* The device's own attribute, while it exists (uevent_parse()
	 * checked that DEVPATH stays below sysfs). */
	if (ev.uverbs && ev.action == SD_DEVICE_ADD &&
	    (size_t)snprintf(path, sizeof(path), "%s%s/ibdev", w->sysfs,
			     u.devpath) < sizeof(path) &&
	    read_name(AT_FDCWD, path, ibdev) == 0)
		ev.ibdev = ibdev;
	feed_one(w, &ev);
}

static int on_uevent(sd_event_source *s _unused_, int fd,
		     uint32_t revents _unused_, void *ud)
{
	struct devwatch *w = ud;
	char buf[UEVENT_MSG_MAX];
	bool lost = false;
	ssize_t n;

	w->dispatching = true;
	for (int i = 0; i < UEVENT_BATCH && !w->freeing; i++) {
		n = uevent_receive(fd, buf, sizeof(buf), w->any_sender);
		if (n == -EAGAIN)
			break;
		if (n == -ENOBUFS)
			lost = true;
		else if (n > 0)
			handle_uevent(w, buf, (size_t)n);
		else if (n != -EINTR && n != -EPERM && n != -EMSGSIZE)
			break; /* the next turn tries again */
	}
	/* After what was still queued: sysfs has the last word. */
	if (lost && !w->freeing)
		resync(w);
	w->dispatching = false;
	if (w->freeing)
		destroy(w);
	return 0;
}

static int start_kernel(struct devwatch *w, sd_event *e, int fd,
			const char *sysfs)
{
	int r;

	w->fd = fd;
	w->sysfs = strdup(sysfs);
	if (!w->sysfs)
		return -ENOMEM;
	r = sd_event_add_io(e, &w->uevents, fd, EPOLLIN, on_uevent, w);
	if (r < 0)
		return r;
	(void)sd_event_source_set_description(w->uevents, "devwatch");
	/* Listening already (fd is bound): as with udev's monitor, what
	 * changes during the scan arrives as events afterwards. */
	return scan_sysfs(w->sysfs, &w->devs);
}

/* ---- watchers ---- */

int devwatch_new_detached(devwatch_cb cb, void *ud, struct devwatch **out)
{
	struct devwatch *w;

	if (!cb || !out)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = -1;
	w->cb = cb;
	w->ud = ud;
	*out = w;
	return 0;
}

int devwatch_new_uevent_fd(sd_event *e, int fd, const char *sysfs,
			   devwatch_cb cb, void *ud, struct devwatch **out)
{
	struct devwatch *w;
	int r;

	if (!e || fd < 0 || !sysfs || !out) {
		closep(&fd);
		return -EINVAL;
	}
	r = devwatch_new_detached(cb, ud, &w);
	if (r < 0) {
		close(fd);
		return r;
	}
	w->source = DEVWATCH_SOURCE_KERNEL;
	w->any_sender = true;
	r = start_kernel(w, e, fd, sysfs);
	if (r < 0) {
		destroy(w);
		return r;
	}
	*out = w;
	return 0;
}

int devwatch_new(sd_event *e, devwatch_cb cb, void *ud, struct devwatch **out)
{
	struct devwatch *w;
	int r, fd;

	if (!e || !out)
		return -EINVAL;
	r = devwatch_new_detached(cb, ud, &w);
	if (r < 0)
		return r;
	w->source = devwatch_source();
	if (w->source == DEVWATCH_SOURCE_UDEV) {
		r = start_udev(w, e);
	} else {
		fd = uevent_open();
		r = fd < 0 ? fd : start_kernel(w, e, fd, "/sys");
	}
	if (r < 0) {
		destroy(w);
		return r;
	}
	*out = w;
	return 0;
}

struct devwatch *devwatch_free(struct devwatch *w)
{
	if (!w)
		return NULL;
	if (w->dispatching) {
		w->freeing = true;
		(void)sd_device_monitor_stop(w->mon);
		(void)sd_event_source_set_enabled(w->uevents, SD_EVENT_OFF);
		return NULL;
	}
	destroy(w);
	return NULL;
}

enum devwatch_source devwatch_get_source(const struct devwatch *w)
{
	return w ? w->source : DEVWATCH_SOURCE_NONE;
}

bool devwatch_is_up(const struct devwatch *w, const char *ibdev)
{
	if (!w)
		return false;
	for (size_t i = 0; i < w->devs.n; i++)
		if (streq(w->devs.v[i].ibdev, ibdev))
			return w->devs.v[i].up;
	return false;
}

/* ---- async events ---- */

/* Wakeups in a row that found nothing to read: past this the fd is not
 * behaving as an async event fd does, and reading on would spin. */
#define ASYNCWATCH_MAX_EMPTY 64

struct asyncwatch {
	sd_event_source *src;
	struct ibv_context *ctx;
	asyncwatch_cb cb;
	void *ud;
	unsigned int empty;
};

static int on_async(sd_event_source *s, int fd _unused_, uint32_t revents,
		    void *ud)
{
	struct asyncwatch *w = ud;
	bool broken = revents & (EPOLLERR | EPOLLHUP);
	struct ibv_async_event ev, copy;

	if (revents & EPOLLIN) {
		/* A short read fails without setting errno. */
		errno = 0;
		if (ibv_get_async_event(w->ctx, &ev) == 0) {
			copy = ev;
			/* Before cb: destroying a QP, CQ or SRQ waits for
			 * its events to be acknowledged. */
			ibv_ack_async_event(&ev);
			w->empty = 0;
			if (copy.event_type == IBV_EVENT_DEVICE_FATAL)
				(void)sd_event_source_set_enabled(s,
								  SD_EVENT_OFF);
			/* Last: cb may free w. */
			w->cb(w->ud, &copy);
			return 0;
		}
		if (!broken && (errno == EAGAIN || errno == EWOULDBLOCK) &&
		    ++w->empty < ASYNCWATCH_MAX_EMPTY)
			return 0;
		broken = true;
	}
	if (!broken)
		return 0;
	(void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
	copy = (struct ibv_async_event){.event_type = IBV_EVENT_DEVICE_FATAL};
	w->cb(w->ud, &copy);
	return 0;
}

int asyncwatch_new(sd_event *e, struct ibv_context *ctx, asyncwatch_cb cb,
		   void *ud, struct asyncwatch **out)
{
	struct asyncwatch *w;
	int fl, r;

	if (!e || !ctx || ctx->async_fd < 0 || !cb || !out)
		return -EINVAL;
	fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl < 0)
		return -errno;
	if (!(fl & O_NONBLOCK) &&
	    fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	fl = fcntl(ctx->async_fd, F_GETFD);
	if (fl < 0)
		return -errno;
	if (!(fl & FD_CLOEXEC) &&
	    fcntl(ctx->async_fd, F_SETFD, fl | FD_CLOEXEC) < 0)
		return -errno;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct asyncwatch){.ctx = ctx, .cb = cb, .ud = ud};
	r = sd_event_add_io(e, &w->src, ctx->async_fd, EPOLLIN, on_async, w);
	if (r < 0) {
		free(w);
		return r;
	}
	(void)sd_event_source_set_description(w->src, "asyncwatch");
	*out = w;
	return 0;
}

struct asyncwatch *asyncwatch_free(struct asyncwatch *w)
{
	if (!w)
		return NULL;
	sd_event_source_disable_unref(w->src);
	free(w);
	return NULL;
}
