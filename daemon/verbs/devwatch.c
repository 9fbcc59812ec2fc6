// SPDX-License-Identifier: MIT
/*
 * RDMA devices coming and going, from the kernel's uevents, and a context's
 * async events.
 *
 * A device is two kernel devices, each with its own uevents (Linux 6.1):
 *
 *   infiniband/rxe0          SUBSYSTEM=infiniband, NAME=rxe0
 *   infiniband_verbs/uverbs0 SUBSYSTEM=infiniband_verbs, the char device
 *                            that ibv_open_device() opens
 *
 * Registration sends uverbs0's add first and rxe0's add last (the kernel
 * holds rxe0's back until every client, uverbs included, has the device).
 * Removal sends uverbs0's remove first; rxe0's remove only comes once every
 * context on a device without disassociate support has been closed. A
 * uverbs uevent does not name its device: the name is read from
 * /sys/class/infiniband_verbs/uverbsN/ibdev while the device exists (at its
 * add, or at start), and remembered for its remove.
 *
 * Each device is therefore tracked with two facts, "announced" (the
 * infiniband device exists) and its uverbs device (if any). It is up, and
 * reported ADD, when it has both; it is reported REMOVE when it loses either.
 * A rename (move) is REMOVE old, ADD new. Synthetic uevents (written to a
 * uevent file by udevadm trigger) change nothing on the device: a synthetic
 * remove or move is ignored; a synthetic add is harmless (an add of a device
 * we know changes nothing) and so is taken.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <linux/netlink.h>

#include "devwatch.h"
#include "util.h"

/* ---- the parser ---- */

/* Whether the string kv, whose '=' is at eq, has the key key. */
static bool key_is(const char *kv, const char *eq, const char *key)
{
	size_t n = strlen(key);

	return (size_t)(eq - kv) == n && memcmp(kv, key, n) == 0;
}

/* The last component of a DEVPATH, as a kernel device name. */
static int devpath_name(const char *devpath, char *name)
{
	const char *slash = strrchr(devpath, '/');
	size_t n;

	if (devpath[0] != '/' || !slash)
		return -EBADMSG;
	n = strlen(slash + 1);
	if (n == 0 || n >= DEVWATCH_NAME_MAX || streq(slash + 1, ".") ||
	    streq(slash + 1, ".."))
		return -EBADMSG;
	memcpy(name, slash + 1, n + 1);
	return 0;
}

int devwatch_parse(const char *buf, size_t len, struct devwatch_uevent *ev)
{
	static const char libudev[] = "libudev";
	const char *action = NULL, *devpath = NULL, *subsys = NULL;
	const char *devpath_old = NULL, *at, *p, *end = buf + len;
	bool synthetic = false;
	size_t n;
	int r;

	if (!buf && len)
		return -EBADMSG;
	/* udevd's own re-broadcast: a binary header, then its properties. */
	if (len >= sizeof(libudev) &&
	    memcmp(buf, libudev, sizeof(libudev)) == 0)
		return 0;
	if (len == 0 || buf[len - 1] != '\0')
		return -EBADMSG;

	/* "ACTION@DEVPATH", then "KEY=VALUE" strings. */
	n = strlen(buf);
	at = memchr(buf, '@', n);
	if (!at || at == buf)
		return -EBADMSG;
	for (p = buf + n + 1; p < end; p += n + 1) {
		const char *eq, **slot = NULL;

		n = strlen(p);
		eq = memchr(p, '=', n);
		if (!eq || eq == p)
			return -EBADMSG;
		if (key_is(p, eq, "ACTION"))
			slot = &action;
		else if (key_is(p, eq, "DEVPATH"))
			slot = &devpath;
		else if (key_is(p, eq, "SUBSYSTEM"))
			slot = &subsys;
		else if (key_is(p, eq, "DEVPATH_OLD"))
			slot = &devpath_old;
		else if (key_is(p, eq, "SYNTH_UUID"))
			synthetic = true;
		if (slot) {
			if (*slot)
				return -EBADMSG;
			*slot = eq + 1;
		}
	}
	if (!action || !devpath || !subsys)
		return -EBADMSG;
	/* The header says the same as ACTION and DEVPATH. */
	if ((size_t)(at - buf) != strlen(action) ||
	    memcmp(buf, action, (size_t)(at - buf)) != 0 ||
	    !streq(at + 1, devpath))
		return -EBADMSG;

	if (streq(subsys, "infiniband"))
		ev->cls = DEVWATCH_CLASS_IB;
	else if (streq(subsys, "infiniband_verbs"))
		ev->cls = DEVWATCH_CLASS_UVERBS;
	else
		return 0;
	if (streq(action, "add"))
		ev->action = DEVWATCH_UEVENT_ADD;
	else if (streq(action, "remove"))
		ev->action = DEVWATCH_UEVENT_REMOVE;
	else if (streq(action, "move"))
		ev->action = DEVWATCH_UEVENT_MOVE;
	else
		return 0; /* change, bind, unbind, online, offline */

	r = devpath_name(devpath, ev->name);
	if (r < 0)
		return r;
	ev->old_name[0] = '\0';
	if (ev->action == DEVWATCH_UEVENT_MOVE) {
		if (!devpath_old)
			return -EBADMSG;
		r = devpath_name(devpath_old, ev->old_name);
		if (r < 0)
			return r;
	}
	ev->synthetic = synthetic;
	return 1;
}

/* ---- the set of devices ---- */

/* More RDMA devices than any machine has (SR-IOV included): a bound on what
 * a flood of uevents can make us allocate. */
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

/* ---- sysfs ---- */

struct devwatch {
	sd_event_source *src;
	int fd;
	bool netlink;
	char *sysfs;
	devwatch_cb cb;
	void *ud;
	struct devset devs;
	bool dispatching;
	bool freeing; /* devwatch_free() from a callback: free when done */
};

/* The device a uverbs device belongs to, from its "ibdev" attribute. */
static int read_ibdev(const struct devwatch *w, const char *uverbs,
		      char ibdev[DEVWATCH_NAME_MAX])
{
	_cleanup_close_ int fd = -1;
	char path[PATH_MAX];
	ssize_t n;
	int len;

	len = snprintf(path, sizeof(path), "%s/class/infiniband_verbs/%s/ibdev",
		       w->sysfs, uverbs);
	if (len < 0 || (size_t)len >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, ibdev, DEVWATCH_NAME_MAX);
	if (n < 0)
		return -errno;
	if (n > 0 && ibdev[n - 1] == '\n')
		n--;
	if (n == 0 || n >= DEVWATCH_NAME_MAX || memchr(ibdev, '/', (size_t)n) ||
	    memchr(ibdev, '\0', (size_t)n))
		return -EBADMSG;
	ibdev[n] = '\0';
	return 0;
}

static int open_class(const struct devwatch *w, const char *cls, DIR **out)
{
	char path[PATH_MAX];
	int len;

	len = snprintf(path, sizeof(path), "%s/class/%s", w->sysfs, cls);
	if (len < 0 || (size_t)len >= sizeof(path))
		return -ENAMETOOLONG;
	*out = opendir(path);
	if (*out)
		return 0;
	/* No such class: no RDMA in this kernel (yet), no devices. */
	return errno == ENOENT ? 0 : -errno;
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

/* The devices sysfs shows now, their "up" computed. */
static int scan(const struct devwatch *w, struct devset *s)
{
	_cleanup_(closedirp) DIR *ib = NULL;
	_cleanup_(closedirp) DIR *uv = NULL;
	char ibdev[DEVWATCH_NAME_MAX];
	struct dirent *de;
	struct dev *d;
	int r;

	r = open_class(w, "infiniband", &ib);
	if (r < 0)
		return r;
	while (ib && (errno = 0, de = readdir(ib))) {
		if (de->d_name[0] == '.')
			continue;
		d = devset_get(s, de->d_name);
		if (!d)
			return -ENOMEM;
		d->announced = true;
	}
	if (ib && errno)
		return -errno;

	r = open_class(w, "infiniband_verbs", &uv);
	if (r < 0)
		return r;
	while (uv && (errno = 0, de = readdir(uv))) {
		/* abi_version is a file: it has no ibdev. */
		if (de->d_name[0] == '.' ||
		    strlen(de->d_name) >= DEVWATCH_NAME_MAX ||
		    read_ibdev(w, de->d_name, ibdev) < 0)
			continue;
		d = devset_get(s, ibdev);
		if (!d)
			return -ENOMEM;
		strcpy(d->uverbs, de->d_name);
	}
	if (uv && errno)
		return -errno;

	for (size_t i = 0; i < s->n; i++)
		s->v[i].up = s->v[i].announced && s->v[i].uverbs[0];
	return 0;
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

static void handle_move(struct devwatch *w, const struct devwatch_uevent *ev)
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

static void handle(struct devwatch *w, const struct devwatch_uevent *ev)
{
	char ibdev[DEVWATCH_NAME_MAX];
	struct dev *d;

	if (ev->synthetic && ev->action != DEVWATCH_UEVENT_ADD)
		return;

	if (ev->cls == DEVWATCH_CLASS_IB) {
		switch (ev->action) {
		case DEVWATCH_UEVENT_ADD:
			d = devset_get(&w->devs, ev->name);
			if (!d)
				return;
			d->announced = true;
			sync_dev(w, d);
			return;
		case DEVWATCH_UEVENT_REMOVE:
			d = devset_find(&w->devs, ev->name);
			if (!d)
				return;
			/* A device's uverbs goes before it; if we missed
			 * that, it is gone now anyway. */
			d->announced = false;
			d->uverbs[0] = '\0';
			sync_dev(w, d);
			return;
		case DEVWATCH_UEVENT_MOVE:
			handle_move(w, ev);
			return;
		}
		return;
	}

	switch (ev->action) {
	case DEVWATCH_UEVENT_ADD:
		/* Gone again already (or unreadable): its remove follows. */
		if (read_ibdev(w, ev->name, ibdev) < 0)
			return;
		d = devset_find_uverbs(&w->devs, ev->name);
		if (d && !streq(d->ibdev, ibdev)) {
			d->uverbs[0] = '\0';
			sync_dev(w, d);
		}
		d = devset_get(&w->devs, ibdev);
		if (!d)
			return;
		strcpy(d->uverbs, ev->name);
		sync_dev(w, d);
		return;
	case DEVWATCH_UEVENT_REMOVE:
		d = devset_find_uverbs(&w->devs, ev->name);
		if (!d)
			return;
		d->uverbs[0] = '\0';
		sync_dev(w, d);
		return;
	case DEVWATCH_UEVENT_MOVE:
		return; /* uverbs devices are not renamed */
	}
}

/* Uevents were lost (the socket's buffer overflowed): take sysfs's view and
 * report the difference. */
static void resync(struct devwatch *w)
{
	struct devset now = {0};
	struct dev *d;

	if (scan(w, &now) < 0) {
		devset_done(&now);
		return;
	}
	for (size_t i = 0; i < w->devs.n; i++) {
		d = devset_find(&now, w->devs.v[i].ibdev);
		if (w->devs.v[i].up && !(d && d->up))
			emit(w, w->devs.v[i].ibdev, DEVWATCH_REMOVE);
	}
	for (size_t i = 0; i < now.n; i++) {
		d = devset_find(&w->devs, now.v[i].ibdev);
		if (now.v[i].up && !(d && d->up))
			emit(w, now.v[i].ibdev, DEVWATCH_ADD);
	}
	devset_done(&w->devs);
	w->devs = now;
}

/* ---- the socket ---- */

/* 1: a datagram taken (or dropped), 0: none left, -errno. */
static int receive(struct devwatch *w)
{
	/* The kernel's uevents are at most 2 KiB (UEVENT_BUFFER_SIZE). */
	char buf[8192];
	struct sockaddr_nl sa = {0};
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr mh = {.msg_name = &sa,
			    .msg_namelen = sizeof(sa),
			    .msg_iov = &iov,
			    .msg_iovlen = 1};
	struct devwatch_uevent ev;
	ssize_t n;

	n = recvmsg(w->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	if (mh.msg_flags & MSG_TRUNC)
		return 1;
	/* Only the kernel's: port 0 is no process's. */
	if (w->netlink && (mh.msg_namelen < sizeof(sa) ||
			   sa.nl_family != AF_NETLINK || sa.nl_pid != 0))
		return 1;
	if (devwatch_parse(buf, (size_t)n, &ev) == 1)
		handle(w, &ev);
	return 1;
}

static void destroy(struct devwatch *w)
{
	sd_event_source_disable_unref(w->src);
	closep(&w->fd);
	devset_done(&w->devs);
	free(w->sysfs);
	free(w);
}

static int on_uevent(sd_event_source *s _unused_, int fd _unused_,
		     uint32_t revents _unused_, void *ud)
{
	struct devwatch *w = ud;
	int r;

	w->dispatching = true;
	/* A bounded batch: the loop has other work; level-triggered epoll
	 * brings us back for the rest. */
	for (int i = 0; i < 64 && !w->freeing; i++) {
		r = receive(w);
		if (r == -ENOBUFS) {
			resync(w);
			continue;
		}
		/* Other errors (sk_err) are one-shot: go on next time. */
		if (r <= 0)
			break;
	}
	w->dispatching = false;
	if (w->freeing)
		destroy(w);
	return 0;
}

int devwatch_new_fd(sd_event *e, int fd, const char *sysfs_root, devwatch_cb cb,
		    void *ud, struct devwatch **out)
{
	_cleanup_close_ int sock = fd;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct devwatch *w;
	int r;

	if (!e || fd < 0 || !sysfs_root || !cb || !out)
		return -EINVAL;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return -errno;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = TAKE_FD(sock);
	w->netlink = ss.ss_family == AF_NETLINK;
	w->cb = cb;
	w->ud = ud;
	w->sysfs = strdup(sysfs_root);
	if (!w->sysfs) {
		destroy(w);
		return -ENOMEM;
	}
	/* The socket exists before the scan: what changes during it arrives
	 * as uevents afterwards, and applying them again changes nothing. */
	r = scan(w, &w->devs);
	if (r >= 0)
		r = sd_event_add_io(e, &w->src, w->fd, EPOLLIN, on_uevent, w);
	if (r < 0) {
		destroy(w);
		return r;
	}
	(void)sd_event_source_set_description(w->src, "devwatch");
	*out = w;
	return 0;
}

int devwatch_new(sd_event *e, devwatch_cb cb, void *ud, struct devwatch **out)
{
	/* Group 1 is the kernel's; udevd re-broadcasts on group 2. */
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = 1};
	_cleanup_close_ int fd = -1;
	int size = 4 << 20;

	if (!e || !cb || !out)
		return -EINVAL;
	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    NETLINK_KOBJECT_UEVENT);
	if (fd < 0)
		return -errno;
	/* Room for a burst (udevadm trigger, many VFs at once). FORCE needs
	 * CAP_NET_ADMIN; without it the kernel caps at rmem_max. Losing
	 * uevents is survivable (ENOBUFS, then resync), so failing is too. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size,
				 sizeof(size));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	return devwatch_new_fd(e, TAKE_FD(fd), "/sys", cb, ud, out);
}

struct devwatch *devwatch_free(struct devwatch *w)
{
	if (!w)
		return NULL;
	if (w->dispatching) {
		w->freeing = true;
		(void)sd_event_source_set_enabled(w->src, SD_EVENT_OFF);
		return NULL;
	}
	destroy(w);
	return NULL;
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
