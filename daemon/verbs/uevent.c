// SPDX-License-Identifier: MIT
/*
 * The kernel's uevents, read and parsed by hand: sd-device's monitor
 * (and libudev's) can only be opened on udevd's group in public API, and
 * on a host without udevd nothing is ever sent there. The format is
 * small and stable (kernel's lib/kobject_uevent.c; what udevd itself
 * parses in device_new_from_nulstr()).
 */
#include <sys/socket.h>
#include <linux/netlink.h>

#include "uevent.h"
#include "util.h"

/* The kernel's action names (kobject_actions[]) in sd-device's terms. */
static const char *const actions[] = {
    [SD_DEVICE_ADD] = "add",	   [SD_DEVICE_REMOVE] = "remove",
    [SD_DEVICE_CHANGE] = "change", [SD_DEVICE_MOVE] = "move",
    [SD_DEVICE_ONLINE] = "online", [SD_DEVICE_OFFLINE] = "offline",
    [SD_DEVICE_BIND] = "bind",	   [SD_DEVICE_UNBIND] = "unbind",
};

static sd_device_action_t action_from_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(actions); i++)
		if (actions[i] && streq(actions[i], name))
			return (sd_device_action_t)i;
	return _SD_DEVICE_ACTION_INVALID;
}

/* Absolute, and no empty, "." or ".." component: a path below /sys
 * that can be joined to it as it is. */
static bool devpath_valid(const char *p)
{
	if (p[0] != '/')
		return false;
	while (*p == '/') {
		const char *c = p + 1;
		size_t n = strcspn(c, "/");

		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		p = c + n;
	}
	return true;
}

static const char *last_component(const char *path)
{
	return strrchr(path, '/') + 1;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

/* *slot = value, unless the key came already. */
static bool set_once(const char **slot, const char *value)
{
	if (*slot)
		return false;
	*slot = value;
	return true;
}

int uevent_parse(const char *msg, size_t len, struct uevent *ev)
{
	const char *end = msg + len, *at, *action = NULL, *devpath = NULL;
	const char *seqnum = NULL;
	struct uevent u = {0};
	size_t hlen;

	if (len == 0 || msg[len - 1] != '\0')
		return -EBADMSG;
	/* The header: ACTION@DEVPATH. */
	hlen = strlen(msg);
	at = memchr(msg, '@', hlen);
	if (!at || at == msg)
		return -EBADMSG;
	for (const char *s = msg + hlen + 1; s < end; s += strlen(s) + 1) {
		const char *eq = strchr(s, '=');
		size_t klen;
		bool ok = true;

		if (!eq || eq == s)
			return -EBADMSG;
		klen = (size_t)(eq - s);
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(s, k, klen) == 0)
		if (KEY("ACTION"))
			ok = set_once(&action, eq + 1);
		else if (KEY("DEVPATH"))
			ok = set_once(&devpath, eq + 1);
		else if (KEY("SUBSYSTEM"))
			ok = set_once(&u.subsystem, eq + 1);
		else if (KEY("DEVPATH_OLD"))
			ok = set_once(&u.devpath_old, eq + 1);
		else if (KEY("SEQNUM"))
			ok = set_once(&seqnum, eq + 1);
		else if (KEY("SYNTH_UUID"))
			u.synthetic = true;
#undef KEY
		if (!ok)
			return -EBADMSG;
	}
	/* The header says what the variables say. */
	if (!action || !devpath || !u.subsystem || !*u.subsystem ||
	    strlen(action) != (size_t)(at - msg) ||
	    memcmp(action, msg, strlen(action)) != 0 ||
	    !streq(devpath, at + 1) || !devpath_valid(devpath))
		return -EBADMSG;
	if (u.devpath_old && !devpath_valid(u.devpath_old))
		return -EBADMSG;
	if (seqnum && !parse_u64(seqnum, &u.seqnum))
		return -EBADMSG;
	u.action = action_from_name(action);
	u.devpath = devpath;
	u.sysname = last_component(devpath);
	u.old_sysname = u.devpath_old ? last_component(u.devpath_old) : NULL;
	*ev = u;
	return 0;
}

int uevent_open(void)
{
	struct sockaddr_nl addr = {.nl_family = AF_NETLINK, .nl_groups = 1};
	/* Room for a burst (many VFs at once); forcing it past rmem_max
	 * needs CAP_NET_ADMIN, else the kernel caps it there. A smaller
	 * buffer works until a burst, and an overflow is seen (ENOBUFS). */
	int size = 4 << 20, one = 1;
	_cleanup_close_ int fd = -1;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    NETLINK_KOBJECT_UEVENT);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size,
				 sizeof(size));
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		return -errno;
	return TAKE_FD(fd);
}

/* Closes the fds an SCM_RIGHTS message brought (never the kernel's: a
 * socket pair's, in tests); returns the credentials, if any came. */
static bool take_control(struct msghdr *mh, struct ucred *cred)
{
	bool have = false;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_RIGHTS) {
			size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int fd;

			for (size_t i = 0; i < n; i++) {
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int),
				       sizeof(fd));
				close(fd);
			}
		} else if (c->cmsg_type == SCM_CREDENTIALS &&
			   c->cmsg_len == CMSG_LEN(sizeof(*cred))) {
			memcpy(cred, CMSG_DATA(c), sizeof(*cred));
			have = true;
		}
	}
	return have;
}

ssize_t uevent_receive(int fd, char *buf, size_t size, bool any_sender)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(struct ucred)) +
		       CMSG_SPACE(4 * sizeof(int))];
	} control;
	struct sockaddr_nl addr = {0};
	struct iovec iov = {.iov_base = buf, .iov_len = size};
	struct msghdr mh = {
	    .msg_name = &addr,
	    .msg_namelen = sizeof(addr),
	    .msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = &control,
	    .msg_controllen = sizeof(control),
	};
	struct ucred cred;
	bool have_cred;
	ssize_t n;

	n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	have_cred = take_control(&mh, &cred);
	if ((size_t)n > size || (mh.msg_flags & MSG_TRUNC))
		return -EMSGSIZE;
	if (any_sender)
		return n;
	/* The kernel sends from port 0 with zero credentials; anyone else
	 * on the group (a process with CAP_NET_ADMIN may send there) is
	 * not the kernel. */
	if ((mh.msg_flags & MSG_CTRUNC) || mh.msg_namelen != sizeof(addr) ||
	    addr.nl_family != AF_NETLINK || addr.nl_pid != 0 || !have_cred ||
	    cred.pid != 0 || cred.uid != 0)
		return -EPERM;
	return n;
}
