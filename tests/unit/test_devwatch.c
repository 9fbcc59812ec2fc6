// SPDX-License-Identifier: MIT
/*
 * daemon/verbs/devwatch.c: the device state machine fed events as its
 * sd_device_monitor hands them on (devwatch_new_detached), the kernel's
 * uevents (uevent.c: the parser, the socket) and the kernel source fed
 * through a socket pair and a made-up sysfs tree, and the async
 * event watcher on pipes standing in for a context's async fd (a real
 * device's events, through udevd, are tested in the VM:
 * tests/integration/test_devwatch.py).
 */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/netlink.h>
#include <cmocka.h>

#include "devwatch.h"
#include "uevent.h"
#include "util.h"

/* ---- the device state machine ---- */

struct fixture {
	struct devwatch *w;
	char log[1024]; /* "ADD rxe0;REMOVE rxe0;" */
	bool free_on_remove;
};

static void on_dev(void *ud, const char *ibdev, enum devwatch_action a)
{
	struct fixture *f = ud;
	size_t n = strlen(f->log);

	snprintf(f->log + n, sizeof(f->log) - n, "%s %s;",
		 a == DEVWATCH_ADD ? "ADD" : "REMOVE", ibdev);
	if (a == DEVWATCH_REMOVE && f->free_on_remove)
		f->w = devwatch_free(f->w);
}

/* Events as devwatch_new()'s monitor hands them on: IB for the
 * infiniband device, UV for its uverbs device (with the ibdev attribute
 * read at an add; NULL when it was already gone). */
static void ev(struct fixture *f, bool uverbs, sd_device_action_t a,
	       const char *name, const char *other, bool synthetic)
{
	struct devwatch_event e = {
	    .uverbs = uverbs,
	    .action = a,
	    .synthetic = synthetic,
	    .name = name,
	    .old_name = !uverbs ? other : NULL,
	    .ibdev = uverbs ? other : NULL,
	};

	devwatch_feed(f->w, &e);
}

#define IB(f, a, name) ev(f, false, SD_DEVICE_##a, name, NULL, false)
#define UV_ADD(f, name, ibdev) ev(f, true, SD_DEVICE_ADD, name, ibdev, false)
#define UV_REMOVE(f, name) ev(f, true, SD_DEVICE_REMOVE, name, NULL, false)
#define MOVE(f, old, new) ev(f, false, SD_DEVICE_MOVE, new, old, false)

static int setup_watch(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(devwatch_new_detached(on_dev, f, &f->w), 0);
	*state = f;
	return 0;
}

static int teardown_watch(void **state)
{
	struct fixture *f = *state;

	f->w = devwatch_free(f->w);
	free(f);
	return 0;
}

/* A device there before the test: its events, then a clean log. */
static void seed(struct fixture *f, const char *ibdev, const char *uverbs)
{
	IB(f, ADD, ibdev);
	if (uverbs)
		UV_ADD(f, uverbs, ibdev);
	f->log[0] = '\0';
}

/* rdma link add / del, in the kernel's order. */
static void test_watch_add_remove(void **state)
{
	struct fixture *f = *state;

	seed(f, "rxe1", "uverbs1");

	/* Registration: reported on the later of the two. */
	UV_ADD(f, "uverbs0", "rxe0");
	assert_string_equal(f->log, "");
	IB(f, ADD, "rxe0");
	assert_string_equal(f->log, "ADD rxe0;");
	/* Again (udevadm trigger --action=add): nothing new. */
	ev(f, false, SD_DEVICE_ADD, "rxe0", NULL, true);
	ev(f, true, SD_DEVICE_ADD, "uverbs0", "rxe0", true);
	assert_string_equal(f->log, "ADD rxe0;");

	/* Removal: reported on the first event. */
	UV_REMOVE(f, "uverbs0");
	assert_string_equal(f->log, "ADD rxe0;REMOVE rxe0;");
	IB(f, REMOVE, "rxe0");
	assert_string_equal(f->log, "ADD rxe0;REMOVE rxe0;");

	/* And back. */
	UV_ADD(f, "uverbs0", "rxe0");
	IB(f, ADD, "rxe0");
	assert_string_equal(f->log, "ADD rxe0;REMOVE rxe0;ADD rxe0;");

	/* A device there before goes like any other. */
	UV_REMOVE(f, "uverbs1");
	IB(f, REMOVE, "rxe1");
	assert_string_equal(f->log,
			    "ADD rxe0;REMOVE rxe0;ADD rxe0;REMOVE rxe1;");
}

/* udevd handles the two devices in parallel: either order is one ADD,
 * and a device removal seen first is one REMOVE. */
static void test_watch_other_order(void **state)
{
	struct fixture *f = *state;

	IB(f, ADD, "rxe0");
	assert_string_equal(f->log, "");
	UV_ADD(f, "uverbs0", "rxe0");
	assert_string_equal(f->log, "ADD rxe0;");
	IB(f, REMOVE, "rxe0");
	assert_string_equal(f->log, "ADD rxe0;REMOVE rxe0;");
	UV_REMOVE(f, "uverbs0");
	assert_string_equal(f->log, "ADD rxe0;REMOVE rxe0;");
	/* Nothing is left of it: a new device may take the uverbs name. */
	UV_ADD(f, "uverbs0", "rxe5");
	IB(f, ADD, "rxe5");
	assert_string_equal(f->log, "ADD rxe0;REMOVE rxe0;ADD rxe5;");
}

/* Anything else leaves the state alone. */
static void test_watch_ignores(void **state)
{
	struct fixture *f = *state;
	static const sd_device_action_t others[] = {
	    SD_DEVICE_CHANGE, SD_DEVICE_BIND, SD_DEVICE_UNBIND,
	    SD_DEVICE_ONLINE, SD_DEVICE_OFFLINE};
	char longname[DEVWATCH_NAME_MAX + 1];

	seed(f, "rxe1", "uverbs1");
	/* Written to uevent files: nothing happened to the devices. */
	ev(f, true, SD_DEVICE_REMOVE, "uverbs1", NULL, true);
	ev(f, false, SD_DEVICE_REMOVE, "rxe1", NULL, true);
	ev(f, false, SD_DEVICE_MOVE, "rxe9", "rxe1", true);
	for (size_t i = 0; i < ARRAY_SIZE(others); i++) {
		ev(f, false, others[i], "rxe1", NULL, false);
		ev(f, true, others[i], "uverbs1", "rxe1", false);
	}
	/* Removes of what we do not know. */
	UV_REMOVE(f, "uverbs0");
	IB(f, REMOVE, "rxe0");
	/* A uverbs device gone before its ibdev could be read. */
	UV_ADD(f, "uverbs0", NULL);
	/* A move without DEVPATH_OLD. */
	MOVE(f, NULL, "rxe1");
	/* Names no kernel gives. */
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	IB(f, ADD, longname);
	UV_ADD(f, "uverbs8", longname);
	IB(f, ADD, NULL);
	assert_string_equal(f->log, "");

	/* Still watching. */
	UV_REMOVE(f, "uverbs1");
	assert_string_equal(f->log, "REMOVE rxe1;");
}

/* ib_uverbs loaded after the device registered: only the uverbs add
 * comes. */
static void test_watch_late_uverbs(void **state)
{
	struct fixture *f = *state;

	seed(f, "rxe1", NULL);
	UV_ADD(f, "uverbs3", "rxe1");
	assert_string_equal(f->log, "ADD rxe1;");
	/* rmmod ib_uverbs: the device stays, but cannot be opened. */
	UV_REMOVE(f, "uverbs3");
	assert_string_equal(f->log, "ADD rxe1;REMOVE rxe1;");
	IB(f, REMOVE, "rxe1");
	assert_string_equal(f->log, "ADD rxe1;REMOVE rxe1;");
}

/* A device without uverbs (ib_uverbs not loaded) is never up. */
static void test_watch_no_uverbs(void **state)
{
	struct fixture *f = *state;

	IB(f, ADD, "rxe7");
	IB(f, REMOVE, "rxe7");
	assert_string_equal(f->log, "");
}

/* rdma dev set rxeA name rxeB */
static void test_watch_rename(void **state)
{
	struct fixture *f = *state;

	seed(f, "rxeA", "uverbs2");
	MOVE(f, "rxeA", "rxeB");
	assert_string_equal(f->log, "REMOVE rxeA;ADD rxeB;");
	/* The uverbs device now belongs to the new name. */
	UV_REMOVE(f, "uverbs2");
	assert_string_equal(f->log, "REMOVE rxeA;ADD rxeB;REMOVE rxeB;");
}

/* A rename of a device we missed: taken as its add. */
static void test_watch_rename_unknown(void **state)
{
	struct fixture *f = *state;

	UV_ADD(f, "uverbs2", "rxeA");
	assert_string_equal(f->log, "");
	MOVE(f, "rxeA", "rxeB");
	assert_string_equal(f->log, "ADD rxeB;");
}

/* The callback frees the watcher in the middle of a rename. */
static void test_watch_free_in_callback(void **state)
{
	struct fixture *f = *state;

	seed(f, "rxeA", "uverbs2");
	f->free_on_remove = true;
	MOVE(f, "rxeA", "rxeB");
	assert_null(f->w);
	assert_string_equal(f->log, "REMOVE rxeA;");
}

/* The real thing: an sd_device_monitor and the devices of this machine
 * (none here; the VM has some: tests/integration/test_devwatch.py). */
static void test_watch_monitor(void **state)
{
	struct fixture *f = *state;
	sd_event *e;
	int r;

	f->w = devwatch_free(f->w);
	assert_int_equal(sd_event_new(&e), 0);
	r = devwatch_new(e, on_dev, f, &f->w);
	if (r == -EAFNOSUPPORT || r == -EPROTONOSUPPORT || r == -EPERM ||
	    r == -EACCES) {
		sd_event_unref(e);
		skip();
	}
	assert_int_equal(r, 0);
	assert_true(sd_event_run(e, 0) >= 0);
	assert_string_equal(f->log, "");
	f->w = devwatch_free(f->w);
	assert_null(devwatch_free(NULL));
	sd_event_unref(e);
}

static void test_watch_einval(void **state)
{
	struct fixture *f = *state;
	struct devwatch *w = NULL;
	sd_event *e;

	assert_int_equal(sd_event_new(&e), 0);
	assert_int_equal(devwatch_new(NULL, on_dev, f, &w), -EINVAL);
	assert_int_equal(devwatch_new(e, NULL, f, &w), -EINVAL);
	assert_int_equal(devwatch_new(e, on_dev, f, NULL), -EINVAL);
	assert_int_equal(devwatch_new_detached(NULL, f, &w), -EINVAL);
	assert_int_equal(devwatch_new_detached(on_dev, f, NULL), -EINVAL);
	assert_null(w);
	sd_event_unref(e);
}

/* ---- kernel uevents (uevent.c) ---- */

/* A message as the kernel writes one: "ACTION@DEVPATH", ACTION, DEVPATH,
 * SUBSYSTEM, then the NULL-ended extra variables; returns its length. */
static size_t kmsg(char *buf, size_t size, const char *action,
		   const char *devpath, const char *subsystem, ...)
{
	size_t n = 0;
	const char *extra;
	va_list ap;

#define PUT(...)                                                               \
	do {                                                                   \
		int k = snprintf(buf + n, size - n, __VA_ARGS__);              \
		assert_true(k >= 0 && (size_t)k < size - n);                   \
		n += (size_t)k + 1;                                            \
	} while (0)
	PUT("%s@%s", action, devpath);
	PUT("ACTION=%s", action);
	PUT("DEVPATH=%s", devpath);
	PUT("SUBSYSTEM=%s", subsystem);
	va_start(ap, subsystem);
	while ((extra = va_arg(ap, const char *)))
		PUT("%s", extra);
	va_end(ap);
	PUT("SEQNUM=%d", 4242);
#undef PUT
	return n;
}

#define IB0 "/devices/virtual/infiniband/rxe0"
#define UV0 "/devices/virtual/infiniband_verbs/uverbs0"

static void test_uevent_parse_good(void **state _unused_)
{
	char buf[1024];
	struct uevent u;
	size_t n;

	n = kmsg(buf, sizeof(buf), "add", IB0, "infiniband", "NAME=rxe0", NULL);
	assert_int_equal(uevent_parse(buf, n, &u), 0);
	assert_int_equal(u.action, SD_DEVICE_ADD);
	assert_string_equal(u.devpath, IB0);
	assert_string_equal(u.subsystem, "infiniband");
	assert_string_equal(u.sysname, "rxe0");
	assert_null(u.devpath_old);
	assert_null(u.old_sysname);
	assert_false(u.synthetic);
	assert_int_equal(u.seqnum, 4242);

	/* A rename. */
	n = kmsg(buf, sizeof(buf), "move", "/devices/virtual/infiniband/rxe9",
		 "infiniband", "DEVPATH_OLD=" IB0, NULL);
	assert_int_equal(uevent_parse(buf, n, &u), 0);
	assert_int_equal(u.action, SD_DEVICE_MOVE);
	assert_string_equal(u.sysname, "rxe9");
	assert_string_equal(u.devpath_old, IB0);
	assert_string_equal(u.old_sysname, "rxe0");

	/* Written to a uevent file with a UUID; values may hold '=' and
	 * '@'; unknown keys and actions are no reason to refuse. */
	n = kmsg(buf, sizeof(buf), "remove", UV0, "infiniband_verbs",
		 "SYNTH_UUID=8d1b1f8e-2a6c-4a4b-9c1e-000000000001", "X=a=b@c",
		 "DEVNAME=infiniband/uverbs0", NULL);
	assert_int_equal(uevent_parse(buf, n, &u), 0);
	assert_int_equal(u.action, SD_DEVICE_REMOVE);
	assert_true(u.synthetic);
	assert_string_equal(u.sysname, "uverbs0");
	n = kmsg(buf, sizeof(buf), "frobnicate", IB0, "infiniband", NULL);
	assert_int_equal(uevent_parse(buf, n, &u), 0);
	assert_int_equal(u.action, _SD_DEVICE_ACTION_INVALID);
	for (int a = 0; a < _SD_DEVICE_ACTION_MAX; a++) {
		static const char *const names[] = {"add",  "remove", "change",
						    "move", "online", "offline",
						    "bind", "unbind"};

		n = kmsg(buf, sizeof(buf), names[a], IB0, "infiniband", NULL);
		assert_int_equal(uevent_parse(buf, n, &u), 0);
		assert_int_equal(u.action, a);
	}
}

/* Each refused whole, ev untouched. */
static void test_uevent_parse_bad(void **state _unused_)
{
#define M(s)                                                                   \
	{                                                                      \
		s, sizeof(s) - 1                                               \
	}
	static const struct {
		const char *msg;
		size_t len;
	} bad[] = {
	    M(""),
	    /* No NUL at the end. */
	    M("add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x"),
	    /* No header, udev's own format, an empty action. */
	    M("ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0"),
	    M("libudev\0\xfe\xed\xca\xfe\0"),
	    M("@/d\0ACTION=\0DEVPATH=/d\0SUBSYSTEM=x\0"),
	    /* The header and the variables disagree. */
	    M("add@/d\0ACTION=remove\0DEVPATH=/d\0SUBSYSTEM=x\0"),
	    M("add@/d\0ACTION=add\0DEVPATH=/e\0SUBSYSTEM=x\0"),
	    M("addx@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0"),
	    /* Something missing. */
	    M("add@/d\0DEVPATH=/d\0SUBSYSTEM=x\0"),
	    M("add@/d\0ACTION=add\0SUBSYSTEM=x\0"),
	    M("add@/d\0ACTION=add\0DEVPATH=/d\0"),
	    M("add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=\0"),
	    /* Twice. */
	    M("add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0SUBSYSTEM=y\0"),
	    M("add@/d\0ACTION=add\0DEVPATH=/d\0DEVPATH=/d\0SUBSYSTEM=x\0"),
	    M("move@/d\0ACTION=move\0DEVPATH=/d\0SUBSYSTEM=x\0"
	      "DEVPATH_OLD=/a\0DEVPATH_OLD=/b\0"),
	    /* Not KEY=VALUE; an empty string; no key. */
	    M("add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0JUNK\0"),
	    M("add@/d\0ACTION=add\0\0DEVPATH=/d\0SUBSYSTEM=x\0"),
	    M("add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0=v\0"),
	    /* Paths that are not below /sys as they are. */
	    M("add@d\0ACTION=add\0DEVPATH=d\0SUBSYSTEM=x\0"),
	    M("add@/\0ACTION=add\0DEVPATH=/\0SUBSYSTEM=x\0"),
	    M("add@/d/\0ACTION=add\0DEVPATH=/d/\0SUBSYSTEM=x\0"),
	    M("add@/a//b\0ACTION=add\0DEVPATH=/a//b\0SUBSYSTEM=x\0"),
	    M("add@/a/../b\0ACTION=add\0DEVPATH=/a/../b\0SUBSYSTEM=x\0"),
	    M("add@/a/./b\0ACTION=add\0DEVPATH=/a/./b\0SUBSYSTEM=x\0"),
	    M("add@/..\0ACTION=add\0DEVPATH=/..\0SUBSYSTEM=x\0"),
	    M("move@/d\0ACTION=move\0DEVPATH=/d\0SUBSYSTEM=x\0"
	      "DEVPATH_OLD=/a/..\0"),
	    /* A SEQNUM that is no number, or too large for 64 bits. */
	    M("add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0SEQNUM=1x\0"),
	    M("add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0SEQNUM=\0"),
	    M("add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0"
	      "SEQNUM=18446744073709551616\0"),
	};
#undef M
	struct uevent u = {.seqnum = 77};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (uevent_parse(bad[i].msg, bad[i].len, &u) != -EBADMSG)
			fail_msg("bad message %zu taken", i);
		assert_int_equal(u.seqnum, 77);
	}
	/* The smallest good one, for contrast. */
	assert_int_equal(
	    uevent_parse(
		"add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0",
		sizeof("add@/d\0ACTION=add\0DEVPATH=/d\0SUBSYSTEM=x\0") - 1,
		&u),
	    0);
	assert_string_equal(u.sysname, "d");
}

/* A datagram socket pair stands in for the kernel's socket. */
static void test_uevent_receive(void **state _unused_)
{
	char buf[UEVENT_MSG_MAX], big[UEVENT_MSG_MAX + 10];
	int sv[2], p[2], fd = -1;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = (void *)"x", .iov_len = 2};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c;
	size_t n;

	assert_int_equal(socketpair(AF_UNIX,
				    SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
				    0, sv),
			 0);
	assert_int_equal(uevent_receive(sv[0], buf, sizeof(buf), true),
			 -EAGAIN);
	n = kmsg(buf, sizeof(buf), "add", IB0, "infiniband", NULL);
	assert_int_equal(send(sv[1], buf, n, 0), (ssize_t)n);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(uevent_receive(sv[0], buf, sizeof(buf), true),
			 (ssize_t)n);
	assert_string_equal(buf, "add@" IB0);

	/* Not from the kernel (no netlink address, no credentials):
	 * read, and dropped. */
	assert_int_equal(send(sv[1], buf, n, 0), (ssize_t)n);
	assert_int_equal(uevent_receive(sv[0], buf, sizeof(buf), false),
			 -EPERM);
	assert_int_equal(uevent_receive(sv[0], buf, sizeof(buf), true),
			 -EAGAIN);

	/* Longer than the buffer: dropped, not cut. */
	memset(big, 'a', sizeof(big));
	assert_int_equal(send(sv[1], big, sizeof(big), 0),
			 (ssize_t)sizeof(big));
	assert_int_equal(uevent_receive(sv[0], buf, sizeof(buf), true),
			 -EMSGSIZE);

	/* An fd that came along is closed, not leaked. */
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &p[0], sizeof(int));
	assert_int_equal(sendmsg(sv[1], &mh, 0), 2);
	closep(&p[0]);
	assert_int_equal(uevent_receive(sv[0], buf, sizeof(buf), true), 2);
	/* The passed read end was the last one: the pipe has no reader. */
	signal(SIGPIPE, SIG_IGN);
	assert_int_equal(write(p[1], "x", 1), -1);
	assert_int_equal(errno, EPIPE);
	closep(&p[1]);
	(void)fd;
	closep(&sv[0]);
	closep(&sv[1]);
}

/* The real socket: on the kernel's group, flags as promised, and what
 * a process sends to it is not taken for the kernel's. */
static void test_uevent_socket(void **state _unused_)
{
	struct sockaddr_nl me = {0}, to = {.nl_family = AF_NETLINK};
	socklen_t len = sizeof(me);
	char buf[UEVENT_MSG_MAX];
	int fd, other, on = 0;
	socklen_t olen = sizeof(on);
	size_t n;
	ssize_t r;

	fd = uevent_open();
	if (fd == -EAFNOSUPPORT || fd == -EPROTONOSUPPORT || fd == -EPERM ||
	    fd == -EACCES)
		skip();
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, &olen),
			 0);
	assert_true(on);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &len), 0);
	assert_int_equal(me.nl_groups, 1);
	assert_true(me.nl_pid != 0);

	other =
	    socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
	assert_true(other >= 0);
	n = kmsg(buf, sizeof(buf), "add", IB0, "infiniband", NULL);
	to.nl_pid = me.nl_pid;
	assert_int_equal(
	    sendto(other, buf, n, 0, (struct sockaddr *)&to, sizeof(to)),
	    (ssize_t)n);
	/* Real uevents of this machine may come first: skip them. */
	do
		r = uevent_receive(fd, buf, sizeof(buf), false);
	while (r > 0);
	assert_int_equal(r, -EPERM);
	close(other);
	close(fd);
}

/* ---- the kernel source: devwatch on a socket pair and a made-up sysfs
 * ---- */

struct ksrc {
	struct fixture f;
	sd_event *e;
	int peer; /* the "kernel" end */
	char sysfs[64];
};

static void mkfile(const char *dir, const char *rel, const char *text)
{
	char path[PATH_MAX], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	for (slash = strchr(path + strlen(dir) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		(void)mkdir(path, 0755);
		*slash = '/';
	}
	if (!text) {
		assert_int_equal(mkdir(path, 0755), 0);
		return;
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* A multicast group of NETLINK_USERSOCK that nothing else is likely to
 * listen to: a process may broadcast there without privileges, and a
 * receiver that overflows hears ENOBUFS, as on the kernel's group. */
#define TEST_GROUP 29

/* The watcher reads from a socket pair, or (netlink) from a
 * NETLINK_USERSOCK socket on TEST_GROUP with the smallest buffer. */
static int setup_ksrc_on(void **state, bool netlink)
{
	struct ksrc *k = calloc(1, sizeof(*k));
	int sv[2], one = 1;

	assert_non_null(k);
	strcpy(k->sysfs, "/tmp/test_devwatch.XXXXXX");
	assert_non_null(mkdtemp(k->sysfs));
	/* rxe1 there at start; class/infiniband_verbs also has a file. */
	mkfile(k->sysfs, "class/infiniband/rxe1", NULL);
	mkfile(k->sysfs, "class/infiniband_verbs/uverbs1/ibdev", "rxe1\n");
	mkfile(k->sysfs, "class/infiniband_verbs/abi_version", "6\n");
	/* What a uverbs add's DEVPATH names. */
	mkfile(k->sysfs, "devices/virtual/infiniband_verbs/uverbs0/ibdev",
	       "rxe0\n");
	assert_int_equal(sd_event_new(&k->e), 0);
	if (netlink) {
		struct sockaddr_nl a = {.nl_family = AF_NETLINK,
					.nl_groups = 1u << (TEST_GROUP - 1)};

		sv[0] =
		    socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
			   NETLINK_USERSOCK);
		sv[1] = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC,
			       NETLINK_USERSOCK);
		if (sv[0] < 0 || sv[1] < 0) {
			/* No netlink here (a sandbox): the test skips. */
			closep(&sv[0]);
			closep(&sv[1]);
			sv[0] = sv[1] = -1;
			k->peer = -1;
			*state = k;
			return 0;
		}
		assert_int_equal(
		    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &one, sizeof(one)),
		    0);
		assert_int_equal(bind(sv[0], (struct sockaddr *)&a, sizeof(a)),
				 0);
	} else {
		assert_int_equal(
		    socketpair(AF_UNIX,
			       SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0,
			       sv),
		    0);
	}
	k->peer = sv[1];
	assert_int_equal(devwatch_new_uevent_fd(k->e, sv[0], k->sysfs, on_dev,
						&k->f, &k->f.w),
			 0);
	*state = k;
	return 0;
}

static int setup_ksrc(void **state)
{
	return setup_ksrc_on(state, false);
}

static int setup_ksrc_nl(void **state)
{
	return setup_ksrc_on(state, true);
}

static int teardown_ksrc(void **state)
{
	struct ksrc *k = *state;
	char cmd[128];

	k->f.w = devwatch_free(k->f.w);
	closep(&k->peer);
	sd_event_unref(k->e);
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", k->sysfs);
	assert_int_equal(system(cmd), 0);
	free(k);
	return 0;
}

static void ksend(struct ksrc *k, const char *action, const char *devpath,
		  const char *subsystem, const char *extra)
{
	char buf[1024];
	size_t n =
	    kmsg(buf, sizeof(buf), action, devpath, subsystem, extra, NULL);

	assert_int_equal(send(k->peer, buf, n, 0), (ssize_t)n);
}

static void kpump(struct ksrc *k)
{
	int n = 0;

	while (sd_event_run(k->e, 0) > 0)
		assert_true(++n < 1000);
}

static void test_kernel_source(void **state)
{
	struct ksrc *k = *state;

	/* What sysfs had at start is up, and not reported. */
	assert_int_equal(devwatch_get_source(k->f.w), DEVWATCH_SOURCE_KERNEL);
	assert_true(devwatch_is_up(k->f.w, "rxe1"));
	assert_false(devwatch_is_up(k->f.w, "rxe0"));
	kpump(k);
	assert_string_equal(k->f.log, "");

	/* rdma link add rxe0, in the kernel's order; the uverbs device's
	 * ibdev read from sysfs. Other subsystems and junk change
	 * nothing. */
	ksend(k, "add", "/devices/virtual/net/veth0", "net", NULL);
	ksend(k, "add", UV0, "infiniband_verbs", "DEVNAME=infiniband/uverbs0");
	assert_int_equal(send(k->peer, "junk", 4, 0), 4);
	kpump(k);
	assert_string_equal(k->f.log, "");
	ksend(k, "add", IB0, "infiniband", "NAME=rxe0");
	kpump(k);
	assert_string_equal(k->f.log, "ADD rxe0;");
	assert_true(devwatch_is_up(k->f.w, "rxe0"));

	/* udevadm trigger --uuid: nothing happened. */
	ksend(k, "remove", UV0, "infiniband_verbs", "SYNTH_UUID=1");
	kpump(k);
	assert_string_equal(k->f.log, "ADD rxe0;");

	/* rdma link del rxe0: on the first event. */
	ksend(k, "remove", UV0, "infiniband_verbs", NULL);
	ksend(k, "remove", IB0, "infiniband", NULL);
	kpump(k);
	assert_string_equal(k->f.log, "ADD rxe0;REMOVE rxe0;");

	/* rdma dev set rxe1 name rxe9. */
	ksend(k, "move", "/devices/virtual/infiniband/rxe9", "infiniband",
	      "DEVPATH_OLD=/devices/virtual/infiniband/rxe1");
	kpump(k);
	assert_string_equal(k->f.log,
			    "ADD rxe0;REMOVE rxe0;REMOVE rxe1;ADD rxe9;");
	assert_true(devwatch_is_up(k->f.w, "rxe9"));
	assert_false(devwatch_is_up(k->f.w, "rxe1"));
}

/* A uverbs add whose device is gone before its ibdev could be read. */
static void test_kernel_source_gone(void **state)
{
	struct ksrc *k = *state;

	ksend(k, "add", "/devices/virtual/infiniband_verbs/uverbs7",
	      "infiniband_verbs", NULL);
	ksend(k, "add", "/devices/virtual/infiniband/rxe7", "infiniband", NULL);
	kpump(k);
	assert_string_equal(k->f.log, "");
}

/* The callback frees the watcher with more messages waiting. */
static void test_kernel_source_free_in_callback(void **state)
{
	struct ksrc *k = *state;

	k->f.free_on_remove = true;
	ksend(k, "remove", "/devices/virtual/infiniband_verbs/uverbs1",
	      "infiniband_verbs", NULL);
	ksend(k, "remove", "/devices/virtual/infiniband/rxe1", "infiniband",
	      NULL);
	ksend(k, "add", UV0, "infiniband_verbs", NULL);
	kpump(k);
	assert_null(k->f.w);
	assert_string_equal(k->f.log, "REMOVE rxe1;");
}

/* Events lost (the socket's buffer overflowed: ENOBUFS): sysfs is read
 * again, and what changed meanwhile is reported. */
static void test_kernel_source_overflow(void **state)
{
	struct ksrc *k = *state;
	struct sockaddr_nl to = {.nl_family = AF_NETLINK,
				 .nl_groups = 1u << (TEST_GROUP - 1)};
	char cmd[256];

	if (!k->f.w)
		skip();
	assert_true(devwatch_is_up(k->f.w, "rxe1"));
	/* Meanwhile rxe1 went and rxe5 came, unheard. */
	snprintf(cmd, sizeof(cmd),
		 "rm -rf -- '%s/class/infiniband/rxe1' "
		 "'%s/class/infiniband_verbs/uverbs1'",
		 k->sysfs, k->sysfs);
	assert_int_equal(system(cmd), 0);
	mkfile(k->sysfs, "class/infiniband/rxe5", NULL);
	mkfile(k->sysfs, "class/infiniband_verbs/uverbs5/ibdev", "rxe5\n");
	/* Far more than the smallest buffer holds. (Each is also sent to
	 * port 0, where NETLINK_USERSOCK has no kernel socket: refused,
	 * once broadcast.) */
	for (int i = 0; i < 512; i++) {
		ssize_t r = sendto(k->peer, "junk", 5, 0,
				   (struct sockaddr *)&to, sizeof(to));

		if (r != 5 && errno != ECONNREFUSED)
			fail_msg("sendto: %s", strerror(errno));
	}
	kpump(k);
	assert_string_equal(k->f.log, "REMOVE rxe1;ADD rxe5;");
	assert_false(devwatch_is_up(k->f.w, "rxe1"));
	assert_true(devwatch_is_up(k->f.w, "rxe5"));
}

static void test_kernel_source_einval(void **state _unused_)
{
	struct fixture f = {0};
	struct devwatch *w = NULL;
	sd_event *e;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_int_equal(sd_event_new(&e), 0);
	assert_true(fd >= 0);
	/* Taken over even on failure: closed. */
	assert_int_equal(devwatch_new_uevent_fd(e, fd, NULL, on_dev, &f, &w),
			 -EINVAL);
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(devwatch_new_uevent_fd(e, -1, "/sys", on_dev, &f, &w),
			 -EINVAL);
	assert_null(w);
	assert_int_equal(devwatch_get_source(NULL), DEVWATCH_SOURCE_NONE);
	assert_false(devwatch_is_up(NULL, "rxe0"));
	sd_event_unref(e);
}

/* The decision is made once per process: these run in a fresh one,
 * this program run again (main() below) with the environment given. */
static int run_self(const char *what, const char *udev_control)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("RDMAD_UDEV_CONTROL", udev_control, 1);
		execl("/proc/self/exe", "test_devwatch", what, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* --source: exit 0 when the source is udev, 1 when kernel. */
static int child_source(void)
{
	enum devwatch_source s = devwatch_source();

	/* Decided: a change of the environment changes nothing. */
	unsetenv("RDMAD_UDEV_CONTROL");
	if (devwatch_source() != s)
		return 2;
	if (s == DEVWATCH_SOURCE_UDEV)
		return streq(devwatch_source_name(s), "udev") ? 0 : 2;
	return streq(devwatch_source_name(s), "kernel") ? 1 : 2;
}

static void test_source_decision(void **state _unused_)
{
	char dir[] = "/tmp/test_devwatch.XXXXXX", path[64];

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/control", dir);
	mkfile(dir, "control", "");
	assert_int_equal(run_self("--source", path), 0);
	assert_int_equal(run_self("--source", "/nonexistent/control"), 1);
	assert_string_equal(devwatch_source_name(DEVWATCH_SOURCE_NONE), "none");
	unlink(path);
	rmdir(dir);
}

/* --watch-kernel: devwatch_new() where udevd does not run: the kernel's
 * socket and this machine's sysfs. 77: not allowed here. */
static int child_watch_kernel(void)
{
	struct fixture f = {0};
	sd_event *e;
	int r;

	if (sd_event_new(&e) < 0)
		return 1;
	r = devwatch_new(e, on_dev, &f, &f.w);
	if (r == -EAFNOSUPPORT || r == -EPROTONOSUPPORT || r == -EPERM ||
	    r == -EACCES)
		return 77;
	if (r < 0 || devwatch_get_source(f.w) != DEVWATCH_SOURCE_KERNEL ||
	    sd_event_run(e, 0) < 0)
		return 2;
	f.w = devwatch_free(f.w);
	sd_event_unref(e);
	return 0;
}

static void test_watch_kernel(void **state _unused_)
{
	int rc = run_self("--watch-kernel", "/nonexistent/control");

	if (rc == 77)
		skip();
	assert_int_equal(rc, 0);
}

/* ---- async events ---- */

/* Run the loop until it has nothing to do; fail if it never stops. */
static int pump(sd_event *e)
{
	int n = 0;

	while (sd_event_run(e, 0) > 0)
		assert_true(++n < 1000);
	return n;
}

struct async_fixture {
	sd_event *e;
	int p[2];
	struct ibv_context ctx; /* only async_fd is used on these paths */
	struct asyncwatch *w;
	int calls;
	struct ibv_async_event last;
	bool free_in_cb;
};

static void on_async(void *ud, const struct ibv_async_event *ev)
{
	struct async_fixture *f = ud;

	f->calls++;
	f->last = *ev;
	if (f->free_in_cb) {
		/* What a daemon does on DEVICE_FATAL: free the watcher,
		 * then close the context (here: its fd). */
		f->w = asyncwatch_free(f->w);
		closep(&f->ctx.async_fd);
		f->ctx.async_fd = -1;
		f->p[0] = -1;
	}
}

static int setup_async(void **state)
{
	struct async_fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	/* Blocking and inheritable, so that asyncwatch_new must fix both. */
	assert_int_equal(pipe2(f->p, 0), 0);
	f->ctx.async_fd = f->p[0];
	assert_int_equal(sd_event_new(&f->e), 0);
	*state = f;
	return 0;
}

static int teardown_async(void **state)
{
	struct async_fixture *f = *state;

	f->w = asyncwatch_free(f->w);
	closep(&f->p[0]);
	closep(&f->p[1]);
	sd_event_unref(f->e);
	free(f);
	return 0;
}

static void assert_one_fatal(struct async_fixture *f)
{
	assert_int_equal(f->calls, 1);
	assert_int_equal(f->last.event_type, IBV_EVENT_DEVICE_FATAL);
	assert_null(f->last.element.qp);
}

static void test_async_fd_flags(void **state)
{
	struct async_fixture *f = *state;

	assert_int_equal(asyncwatch_new(f->e, &f->ctx, on_async, f, &f->w), 0);
	assert_true(fcntl(f->p[0], F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(f->p[0], F_GETFD) & FD_CLOEXEC);
	/* Nothing to read: nothing to say. */
	pump(f->e);
	assert_int_equal(f->calls, 0);
}

/* The writer went away: POLLHUP. One DEVICE_FATAL, then silence. */
static void test_async_hup(void **state)
{
	struct async_fixture *f = *state;

	assert_int_equal(asyncwatch_new(f->e, &f->ctx, on_async, f, &f->w), 0);
	closep(&f->p[1]);
	f->p[1] = -1;
	pump(f->e);
	assert_one_fatal(f);
	/* Disabled: the loop has nothing to run (no spinning on HUP). */
	assert_int_equal(pump(f->e), 0);
	assert_int_equal(f->calls, 1);
}

/* POLLERR without POLLIN: a pipe's write end whose reader is gone (the
 * state of an async fd after disassociation; reading it fails, EBADF
 * here, EIO there). */
static void test_async_err(void **state)
{
	struct async_fixture *f = *state;

	closep(&f->p[0]);
	f->p[0] = -1;
	f->ctx.async_fd = f->p[1];
	assert_int_equal(asyncwatch_new(f->e, &f->ctx, on_async, f, &f->w), 0);
	pump(f->e);
	assert_one_fatal(f);
	assert_int_equal(pump(f->e), 0);
}

/* Half an event: ibv_get_async_event fails. */
static void test_async_short_read(void **state)
{
	struct async_fixture *f = *state;

	assert_int_equal(asyncwatch_new(f->e, &f->ctx, on_async, f, &f->w), 0);
	assert_int_equal(write(f->p[1], "abc", 3), 3);
	pump(f->e);
	assert_one_fatal(f);
	assert_int_equal(write(f->p[1], "0123456789abcdef", 16), 16);
	assert_int_equal(pump(f->e), 0);
	assert_int_equal(f->calls, 1);
}

/* The callback frees the watcher and closes the context's fd. */
static void test_async_free_in_callback(void **state)
{
	struct async_fixture *f = *state;

	f->free_in_cb = true;
	assert_int_equal(asyncwatch_new(f->e, &f->ctx, on_async, f, &f->w), 0);
	closep(&f->p[1]);
	f->p[1] = -1;
	pump(f->e);
	assert_int_equal(f->calls, 1);
	assert_null(f->w);
	assert_int_equal(pump(f->e), 0);
}

/* Another reader of the same open file, at a higher priority, takes the
 * data between epoll saying "readable" and our read: EAGAIN. */
static int drain(sd_event_source *s _unused_, int fd, uint32_t revents _unused_,
		 void *ud _unused_)
{
	char buf[64];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	return 0;
}

static int spurious_wakeups(struct async_fixture *f, int rounds)
{
	sd_event_source *s = NULL;
	int dup_fd, i;

	dup_fd = fcntl(f->p[0], F_DUPFD_CLOEXEC, 0);
	assert_true(dup_fd >= 0);
	assert_int_equal(
	    sd_event_add_io(f->e, &s, dup_fd, EPOLLIN, drain, NULL), 0);
	assert_int_equal(sd_event_source_set_priority(s, -100), 0);
	for (i = 0; i < rounds && f->calls == 0; i++) {
		assert_int_equal(write(f->p[1], "0123456789abcdef", 16), 16);
		pump(f->e);
	}
	sd_event_source_disable_unref(s);
	close(dup_fd);
	return i;
}

static void test_async_spurious_wakeup(void **state)
{
	struct async_fixture *f = *state;

	assert_int_equal(asyncwatch_new(f->e, &f->ctx, on_async, f, &f->w), 0);
	/* A few: not a reason to give the device up. */
	assert_int_equal(spurious_wakeups(f, 10), 10);
	assert_int_equal(f->calls, 0);
	/* Still watching. */
	closep(&f->p[1]);
	f->p[1] = -1;
	pump(f->e);
	assert_one_fatal(f);
}

static void test_async_endless_wakeups(void **state)
{
	struct async_fixture *f = *state;
	int rounds;

	assert_int_equal(asyncwatch_new(f->e, &f->ctx, on_async, f, &f->w), 0);
	/* Forever readable and never anything to read: given up, once. */
	rounds = spurious_wakeups(f, 1000);
	assert_true(rounds < 1000);
	assert_one_fatal(f);
	assert_int_equal(write(f->p[1], "0123456789abcdef", 16), 16);
	assert_int_equal(pump(f->e), 0);
	assert_int_equal(f->calls, 1);
}

static void test_async_einval(void **state)
{
	struct async_fixture *f = *state;
	struct ibv_context bad = {.async_fd = -1};

	assert_int_equal(asyncwatch_new(NULL, &f->ctx, on_async, f, &f->w),
			 -EINVAL);
	assert_int_equal(asyncwatch_new(f->e, NULL, on_async, f, &f->w),
			 -EINVAL);
	assert_int_equal(asyncwatch_new(f->e, &f->ctx, NULL, f, &f->w),
			 -EINVAL);
	assert_int_equal(asyncwatch_new(f->e, &bad, on_async, f, &f->w),
			 -EINVAL);
	assert_null(f->w);
	assert_null(asyncwatch_free(NULL));
}

int main(int argc, char **argv)
{
	if (argc == 2 && streq(argv[1], "--source"))
		return child_source();
	if (argc == 2 && streq(argv[1], "--watch-kernel"))
		return child_watch_kernel();

	const struct CMUnitTest tests[] = {
#define W(t) cmocka_unit_test_setup_teardown(t, setup_watch, teardown_watch)
	    W(test_watch_add_remove),
	    W(test_watch_other_order),
	    W(test_watch_ignores),
	    W(test_watch_late_uverbs),
	    W(test_watch_no_uverbs),
	    W(test_watch_rename),
	    W(test_watch_rename_unknown),
	    W(test_watch_free_in_callback),
	    W(test_watch_monitor),
	    W(test_watch_einval),
#undef W
	    cmocka_unit_test(test_uevent_parse_good),
	    cmocka_unit_test(test_uevent_parse_bad),
	    cmocka_unit_test(test_uevent_receive),
	    cmocka_unit_test(test_uevent_socket),
#define K(t) cmocka_unit_test_setup_teardown(t, setup_ksrc, teardown_ksrc)
	    K(test_kernel_source),
	    K(test_kernel_source_gone),
	    K(test_kernel_source_free_in_callback),
#undef K
	    cmocka_unit_test_setup_teardown(test_kernel_source_overflow,
					    setup_ksrc_nl, teardown_ksrc),
	    cmocka_unit_test(test_kernel_source_einval),
	    cmocka_unit_test(test_source_decision),
	    cmocka_unit_test(test_watch_kernel),
#define A(t) cmocka_unit_test_setup_teardown(t, setup_async, teardown_async)
	    A(test_async_fd_flags),
	    A(test_async_hup),
	    A(test_async_err),
	    A(test_async_short_read),
	    A(test_async_free_in_callback),
	    A(test_async_spurious_wakeup),
	    A(test_async_endless_wakeups),
	    A(test_async_einval),
#undef A
	};

	return cmocka_run_group_tests_name("devwatch", tests, NULL, NULL);
}
