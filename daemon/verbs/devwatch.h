/* SPDX-License-Identifier: MIT */
/*
 * RDMA devices coming and going (devwatch) and a device context's async
 * events (asyncwatch), on the daemon's sd-event loop.
 *
 * What the kernel does (Linux 6.1, rxe; seen in the VM harness), and what it
 * means for the caller:
 *
 * - A device without disassociate support (rxe, and every driver that does
 *   not implement disassociate_ucontext) cannot go away while a context on
 *   it is open: "rdma link del", or deleting its netdev, blocks in the
 *   kernel (uninterruptible) until every process has closed its contexts.
 *   The open context sees nothing: no async event, no POLLERR/POLLHUP, and
 *   every verb keeps working (even ibv_alloc_pd). The only sign is the
 *   uevent removing the device's uverbs char device. So on DEVWATCH_REMOVE
 *   the caller must free everything it holds on the device and close the
 *   context at once; the kernel then finishes the removal.
 * - A device with disassociate support (mlx5, mlx4, ...; none here to try)
 *   does not wait, by the kernel's source: its contexts get
 *   IBV_EVENT_DEVICE_FATAL on the async fd, then POLLERR, reads fail with
 *   EIO, and so does every later verb, destroys included, unless the
 *   environment has RDMAV_ALLOW_DISASSOC_DESTROY set when libibverbs
 *   initialises (then libibverbs takes EIO from a destroy as success; without
 *   it the object's user-space memory is never freed). The daemon should set
 *   it. ibv_close_device() still releases the context.
 *
 * On rxe, ibv_destroy_qp/srq/cq/comp_channel, ibv_dealloc_mw, ibv_dereg_mr,
 * ibv_dealloc_pd and ibv_close_device() all return 0 while the removal
 * waits, and the removal then completes.
 */
#ifndef RDMAD_DEVWATCH_H
#define RDMAD_DEVWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <infiniband/verbs.h>
#include <systemd/sd-device.h>
#include <systemd/sd-event.h>

enum devwatch_action { DEVWATCH_ADD, DEVWATCH_REMOVE };

/*
 * ADD: ibdev is registered and its uverbs device exists, so it can be opened
 * (reported on the later of the two events: the kernel sends the
 * infiniband_verbs add first and the infiniband add last, as its "device
 * ready" mark, but udevd may pass them on in either order: the two devices'
 * paths are unrelated, so it processes them in parallel).
 * REMOVE: on the first sign of removal, the infiniband_verbs remove; see
 * above: close everything on ibdev now.
 * A rename (rdma dev set X name Y) is REMOVE X then ADD Y. Note: a process
 * that listed the device before the rename still sees the old name in
 * ibv_get_device_list() (libibverbs 44 caches it), the kernel the new one.
 * Devices present when devwatch_new() runs are not reported; every REMOVE
 * follows an ADD or such a device. Callbacks run from the event loop only;
 * cb may call devwatch_free().
 */
typedef void (*devwatch_cb)(void *ud, const char *ibdev,
			    enum devwatch_action a);
struct devwatch;

/*
 * Where devwatch_new() hears of devices coming and going:
 *
 * udev: from systemd-udevd (an sd_device_monitor on its netlink group),
 * when udevd runs. Events arrive after udevd has run its rules (device
 * nodes' owners and symlinks), and only devices udevd has seen count
 * (sd-device's enumerator skips the others); udevd may pass the two
 * devices of an RDMA device on in either order.
 * kernel: from the kernel's own uevents (its netlink group, uevent.c)
 * and sysfs, when udevd does not run: a container without /run/udev, an
 * initrd, a minimal VM. Events arrive as the kernel sends them, in its
 * order, before any udev rule (there is none to wait for); the device
 * nodes are devtmpfs's. An overflowing socket buffer is seen (ENOBUFS),
 * and the devices are then read again from sysfs.
 *
 * Which one is decided once per process, on the first call: udev when
 * udevd's control socket exists (/run/udev/control, what libudev and
 * sd-device look at to tell whether udevd runs; RDMAD_UDEV_CONTROL
 * names another path, for tests), else kernel. devmatch.c lists devices
 * the same way (devices udevd has not seen do not match while it runs).
 */
enum devwatch_source {
	DEVWATCH_SOURCE_NONE, /* a detached watcher, or none at all */
	DEVWATCH_SOURCE_UDEV,
	DEVWATCH_SOURCE_KERNEL,
};
enum devwatch_source devwatch_source(void);
/* The path looked at: /run/udev/control, or RDMAD_UDEV_CONTROL's. */
const char *devwatch_udev_control(void);
/* "none", "udev", "kernel": GET /v1/health's device_events. */
const char *devwatch_source_name(enum devwatch_source s);

/*
 * Watch RDMA devices coming and going on e, from devwatch_source()
 * (above), and list the devices already there (sd-device's enumerator,
 * or sysfs). A host without udevd gets hot-plug from the kernel's
 * events. With udevd, events lost to an overflowing socket buffer are
 * lost (sd-device does not report the overflow); the buffer is made
 * large for bursts. Returns 0 or -errno.
 */
int devwatch_new(sd_event *e, devwatch_cb cb, void *ud, struct devwatch **out);
/* Accepts NULL; returns NULL. */
struct devwatch *devwatch_free(struct devwatch *w);
/* Where w hears of devices (NONE for NULL). */
enum devwatch_source devwatch_get_source(const struct devwatch *w);
/* Is ibdev up: reported ADD (or found at start) and not REMOVEd since? */
bool devwatch_is_up(const struct devwatch *w, const char *ibdev);

/* IB_DEVICE_NAME_MAX: the longest kernel device name, with its NUL. */
#define DEVWATCH_NAME_MAX 64

/* One device event, as devwatch_new()'s source reads it (sd-device's
 * monitor or a kernel uevent). */
struct devwatch_event {
	bool uverbs; /* SUBSYSTEM=infiniband_verbs (uverbs0), else infiniband (rxe0) */
	sd_device_action_t action; /* ADD, REMOVE, MOVE; others are ignored */
	/* SYNTH_UUID: someone wrote to the device's uevent file (udevadm
	 * trigger); nothing happened to the device. */
	bool synthetic;
	const char *name;     /* sysname: rxe0, uverbs0 */
	const char *old_name; /* MOVE: sysname of DEVPATH_OLD */
	const char *ibdev;    /* uverbs ADD: its "ibdev" attribute, or NULL */
};

/*
 * For tests of the state machine without udevd: a watcher with no monitor
 * and no devices, fed events by devwatch_feed() (which may free w through
 * cb). Returns 0 or -errno.
 */
int devwatch_new_detached(devwatch_cb cb, void *ud, struct devwatch **out);
void devwatch_feed(struct devwatch *w, const struct devwatch_event *ev);

/*
 * For tests of the kernel source without the kernel: a watcher that reads
 * uevents from fd (a datagram socket, taken over even on failure) whatever
 * their sender, and sysfs below the directory sysfs (class/infiniband/,
 * class/infiniband_verbs/NAME/ibdev, and DEVPATH/ibdev for a uverbs add).
 * Returns 0 or -errno.
 */
int devwatch_new_uevent_fd(sd_event *e, int fd, const char *sysfs,
			   devwatch_cb cb, void *ud, struct devwatch **out);

/*
 * ev is a copy, valid during the call only. The event was acknowledged
 * (ibv_ack_async_event) before cb runs, so cb may destroy the objects it
 * names, free the watcher and close the context.
 */
typedef void (*asyncwatch_cb)(void *ud, const struct ibv_async_event *ev);
struct asyncwatch;

/*
 * Read ctx's async events on e. ctx->async_fd is made non-blocking and
 * close-on-exec (and left so). IBV_EVENT_DEVICE_FATAL is delivered like any
 * other event, but at most once: it ends the event stream, and the watcher
 * stops reading. When the fd reports POLLERR or POLLHUP, or reading an
 * event fails other than with EAGAIN, a synthesized IBV_EVENT_DEVICE_FATAL
 * (element zero) is delivered instead. Returns 0 or -errno.
 */
int asyncwatch_new(sd_event *e, struct ibv_context *ctx, asyncwatch_cb cb,
		   void *ud, struct asyncwatch **out);
/* Accepts NULL; returns NULL. Call it before ibv_close_device(). */
struct asyncwatch *asyncwatch_free(struct asyncwatch *w);

#endif
