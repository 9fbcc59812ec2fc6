/* SPDX-License-Identifier: MIT */
/*
 * The kernel's own device events (uevents), read from its netlink group,
 * for hosts where systemd-udevd does not run (a container, an initrd, a
 * minimal VM): devwatch.c reads them there instead of sd-device's
 * monitor, which hears udevd's group only.
 *
 * One message is "ACTION@DEVPATH" and then "KEY=VALUE" strings, each
 * ended by a NUL (lib/kobject_uevent.c, Linux 6.1):
 *
 *   add@/devices/virtual/infiniband/rxe0\0ACTION=add\0
 *   DEVPATH=/devices/virtual/infiniband/rxe0\0SUBSYSTEM=infiniband\0
 *   NAME=rxe0\0SEQNUM=2071\0
 *
 * A rename (move) carries DEVPATH_OLD; an event someone wrote to a
 * device's uevent file with a UUID ("add 8d1b...") carries SYNTH_UUID.
 */
#ifndef RDMAD_UEVENT_H
#define RDMAD_UEVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-device.h>

/* The largest message read: the kernel's are at most its 2 KiB of
 * variables (UEVENT_BUFFER_SIZE) and the "ACTION@DEVPATH" header. */
#define UEVENT_MSG_MAX 8192

/* One uevent; the strings point into the message parsed. */
struct uevent {
	/* _SD_DEVICE_ACTION_INVALID: an action this code does not know. */
	sd_device_action_t action;
	const char *devpath;	 /* /devices/virtual/infiniband/rxe0 */
	const char *subsystem;	 /* infiniband */
	const char *devpath_old; /* move: the device's path before; or NULL */
	const char *sysname;	 /* DEVPATH's last component: rxe0 */
	const char *old_sysname; /* DEVPATH_OLD's, or NULL */
	bool synthetic;		 /* SYNTH_UUID is set */
	uint64_t seqnum;	 /* SEQNUM, 0 when absent */
};

/*
 * Parse one message of len bytes. It must end with a NUL, start with
 * "ACTION@DEVPATH" (DEVPATH absolute, with no empty, "." or ".."
 * component), and have ACTION and DEVPATH equal to the header's and a
 * SUBSYSTEM; every other string must be KEY=VALUE with a KEY. A key that
 * matters here (ACTION, DEVPATH, DEVPATH_OLD, SUBSYSTEM, SEQNUM) may come
 * only once. Other keys are ignored. Returns 0, or -EBADMSG and ev
 * untouched.
 */
int uevent_parse(const char *msg, size_t len, struct uevent *ev);

/*
 * A socket on the kernel's uevent group (NETLINK_KOBJECT_UEVENT, group
 * 1), close-on-exec and non-blocking, passing its senders' credentials,
 * with a receive buffer large enough for a burst (forced past rmem_max
 * where CAP_NET_ADMIN allows). Returns the fd, or -errno.
 */
int uevent_open(void);

/*
 * Read one message into buf (size bytes, at least UEVENT_MSG_MAX: one
 * more byte is not needed, the message ends with its own NUL). Only the
 * kernel's are taken (sender port 0 and credentials pid 0, uid 0):
 * anything else is read and dropped with -EPERM, unless any_sender is
 * set (tests read from a socket pair). Returns the length, or -EAGAIN
 * (nothing to read), -ENOBUFS (the kernel dropped messages: the socket's
 * buffer was full), -EPERM, -EMSGSIZE (longer than size: dropped) or
 * another -errno.
 */
ssize_t uevent_receive(int fd, char *buf, size_t size, bool any_sender);

#endif
