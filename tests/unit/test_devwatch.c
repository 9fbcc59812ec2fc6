// SPDX-License-Identifier: MIT
/*
 * daemon/verbs/devwatch.c: the device state machine fed events as its
 * sd_device_monitor hands them on (devwatch_new_detached), and the async
 * event watcher on pipes standing in for a context's async fd (a real
 * device's events, through udevd, are tested in the VM:
 * tests/integration/test_devwatch.py).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "devwatch.h"
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

int main(void)
{
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
