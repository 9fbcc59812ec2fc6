// SPDX-License-Identifier: MIT
/*
 * daemon/verbs/devwatch.c: the uevent parser on the kernel's own texts, the device
 * state machine on a socketpair and a sysfs tree in a temporary directory,
 * and the async event watcher on pipes standing in for a context's async
 * fd (a real device's events are tested in the VM:
 * tests/integration/test_devwatch.py).
 *
 * The uevent texts below were captured in the VM harness (Debian's 6.1
 * kernel, rxe) from NETLINK_KOBJECT_UEVENT group 1, byte for byte; the
 * command that caused each is above it.
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
#include <linux/netlink.h>

#include "devwatch.h"
#include "util.h"

/* ---- captured uevents ---- */

/* rdma link add rxe0 type rxe netdev veth0: first the char device... */
static const char uverbs0_add[] =
	"add@/devices/virtual/infiniband_verbs/uverbs0\0"
	"ACTION=add\0"
	"DEVPATH=/devices/virtual/infiniband_verbs/uverbs0\0"
	"SUBSYSTEM=infiniband_verbs\0"
	"MAJOR=231\0"
	"MINOR=192\0"
	"DEVNAME=infiniband/uverbs0\0"
	"DEVMODE=0666\0"
	"SEQNUM=734\0";
/* ...then the device, 7 ms later. */
static const char rxe0_add[] = "add@/devices/virtual/infiniband/rxe0\0"
			       "ACTION=add\0"
			       "DEVPATH=/devices/virtual/infiniband/rxe0\0"
			       "SUBSYSTEM=infiniband\0"
			       "NAME=rxe0\0"
			       "SEQNUM=735\0";
/* rdma link del rxe0 with a context open: this, then nothing until the
 * context is closed... */
static const char uverbs0_remove[] =
	"remove@/devices/virtual/infiniband_verbs/uverbs0\0"
	"ACTION=remove\0"
	"DEVPATH=/devices/virtual/infiniband_verbs/uverbs0\0"
	"SUBSYSTEM=infiniband_verbs\0"
	"MAJOR=231\0"
	"MINOR=192\0"
	"DEVNAME=infiniband/uverbs0\0"
	"DEVMODE=0666\0"
	"SEQNUM=732\0";
/* ...then this. */
static const char rxe0_remove[] = "remove@/devices/virtual/infiniband/rxe0\0"
				  "ACTION=remove\0"
				  "DEVPATH=/devices/virtual/infiniband/rxe0\0"
				  "SUBSYSTEM=infiniband\0"
				  "NAME=rxe0\0"
				  "SEQNUM=733\0";
/* rdma link add rxeA type rxe netdev vethA (its uverbs device is uverbs2);
 * rdma dev set rxeA name rxeB: */
static const char rxeA_move[] = "move@/devices/virtual/infiniband/rxeB\0"
				"ACTION=move\0"
				"DEVPATH=/devices/virtual/infiniband/rxeB\0"
				"SUBSYSTEM=infiniband\0"
				"DEVPATH_OLD=/devices/virtual/infiniband/rxeA\0"
				"NAME=rxeB\0"
				"SEQNUM=748\0";
static const char uverbs2_remove[] =
	"remove@/devices/virtual/infiniband_verbs/uverbs2\0"
	"ACTION=remove\0"
	"DEVPATH=/devices/virtual/infiniband_verbs/uverbs2\0"
	"SUBSYSTEM=infiniband_verbs\0"
	"MAJOR=231\0"
	"MINOR=194\0"
	"DEVNAME=infiniband/uverbs2\0"
	"DEVMODE=0666\0"
	"SEQNUM=749\0";
/* ip link add vethA type veth peer name vethB */
static const char vethB_add[] = "add@/devices/virtual/net/vethB\0"
				"ACTION=add\0"
				"DEVPATH=/devices/virtual/net/vethB\0"
				"SUBSYSTEM=net\0"
				"INTERFACE=vethB\0"
				"IFINDEX=4\0"
				"SEQNUM=732\0";
static const char vethB_queue_add[] =
	"add@/devices/virtual/net/vethB/queues/rx-0\0"
	"ACTION=add\0"
	"DEVPATH=/devices/virtual/net/vethB/queues/rx-0\0"
	"SUBSYSTEM=queues\0"
	"SEQNUM=733\0";
/* ip link del veth0 */
static const char veth0_remove[] = "remove@/devices/virtual/net/veth0\0"
				   "ACTION=remove\0"
				   "DEVPATH=/devices/virtual/net/veth0\0"
				   "SUBSYSTEM=net\0"
				   "INTERFACE=veth0\0"
				   "IFINDEX=3\0"
				   "SEQNUM=737\0";
/* rmmod rdma_ucm */
static const char rdma_cm_remove[] = "remove@/devices/virtual/misc/rdma_cm\0"
				     "ACTION=remove\0"
				     "DEVPATH=/devices/virtual/misc/rdma_cm\0"
				     "SUBSYSTEM=misc\0"
				     "MAJOR=10\0"
				     "MINOR=124\0"
				     "DEVNAME=infiniband/rdma_cm\0"
				     "DEVMODE=0666\0"
				     "SEQNUM=757\0";
static const char module_remove[] = "remove@/module/rdma_ucm\0"
				    "ACTION=remove\0"
				    "DEVPATH=/module/rdma_ucm\0"
				    "SUBSYSTEM=module\0"
				    "SEQNUM=758\0";
/* echo add > /sys/class/infiniband/rxe1/uevent (what udevadm trigger
 * does) */
static const char rxe1_synth_add[] =
	"add@/devices/virtual/infiniband/rxe1\0"
	"ACTION=add\0"
	"DEVPATH=/devices/virtual/infiniband/rxe1\0"
	"SUBSYSTEM=infiniband\0"
	"SYNTH_UUID=0\0"
	"NAME=rxe1\0"
	"SEQNUM=732\0";
/* echo change > /sys/class/infiniband/rxe1/uevent */
static const char rxe1_synth_change[] =
	"change@/devices/virtual/infiniband/rxe1\0"
	"ACTION=change\0"
	"DEVPATH=/devices/virtual/infiniband/rxe1\0"
	"SUBSYSTEM=infiniband\0"
	"SYNTH_UUID=0\0"
	"NAME=rxe1\0"
	"SEQNUM=733\0";
/* echo remove > /sys/class/infiniband_verbs/uverbs1/uevent: the device
 * stays. */
static const char uverbs1_synth_remove[] =
	"remove@/devices/virtual/infiniband_verbs/uverbs1\0"
	"ACTION=remove\0"
	"DEVPATH=/devices/virtual/infiniband_verbs/uverbs1\0"
	"SUBSYSTEM=infiniband_verbs\0"
	"SYNTH_UUID=0\0"
	"MAJOR=231\0"
	"MINOR=193\0"
	"DEVNAME=infiniband/uverbs1\0"
	"DEVMODE=0666\0"
	"SEQNUM=734\0";
/* echo "add 2d7e...7a10 A=1" > /sys/class/infiniband_verbs/uverbs1/uevent */
static const char uverbs1_synth_add[] =
	"add@/devices/virtual/infiniband_verbs/uverbs1\0"
	"ACTION=add\0"
	"DEVPATH=/devices/virtual/infiniband_verbs/uverbs1\0"
	"SUBSYSTEM=infiniband_verbs\0"
	"SYNTH_UUID=2d7e2b4c-8c3f-4b1e-9a51-1f5c9d3e7a10\0"
	"SYNTH_ARG_A=1\0"
	"MAJOR=231\0"
	"MINOR=193\0"
	"DEVNAME=infiniband/uverbs1\0"
	"DEVMODE=0666\0"
	"SEQNUM=735\0";

/* Not captured (no udevd in the VM): udevd's re-broadcast on group 2, a
 * "libudev\0" prefix, a binary header (magic 0xfeedcafe, big-endian, header
 * size 40, properties at 40), then the properties. */
static const char libudev_msg[] =
	"libudev\0"
	"\xfe\xed\xca\xfe"
	"\x28\x00\x00\x00\x28\x00\x00\x00\x54\x00\x00\x00"
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
	"ACTION=remove\0"
	"DEVPATH=/devices/virtual/infiniband/rxe0\0"
	"SUBSYSTEM=infiniband\0"
	"SEQNUM=733\0";

/* ---- the parser ---- */

/* A literal without the NUL C adds after the uevent's last one. */
#define MSG(s) (s), (sizeof(s) - 1)

struct parse_case {
	const char *what;
	const char *buf;
	size_t len;
	int ret;
	enum devwatch_class cls;
	enum devwatch_uevent_action action;
	bool synthetic;
	const char *name;
	const char *old_name;
};

/* m: a literal or array; its length without the NUL C adds. */
#define CASE(w, m, r) { .what = (w), .buf = (m), .len = sizeof(m) - 1, .ret = (r) }
#define OURS(w, m, c, a, s, n, o)                                              \
	{ .what = (w), .buf = (m), .len = sizeof(m) - 1, .ret = 1, .cls = (c), \
	  .action = (a), .synthetic = (s), .name = (n), .old_name = (o) }

// clang-format off
static const struct parse_case parse_cases[] = {
	/* Ours. */
	OURS("uverbs add", uverbs0_add, DEVWATCH_CLASS_UVERBS, DEVWATCH_UEVENT_ADD,
	     false, "uverbs0", ""),
	OURS("ib add", rxe0_add, DEVWATCH_CLASS_IB, DEVWATCH_UEVENT_ADD, false,
	     "rxe0", ""),
	OURS("uverbs remove", uverbs0_remove, DEVWATCH_CLASS_UVERBS,
	     DEVWATCH_UEVENT_REMOVE, false, "uverbs0", ""),
	OURS("ib remove", rxe0_remove, DEVWATCH_CLASS_IB, DEVWATCH_UEVENT_REMOVE,
	     false, "rxe0", ""),
	OURS("ib rename", rxeA_move, DEVWATCH_CLASS_IB, DEVWATCH_UEVENT_MOVE, false,
	     "rxeB", "rxeA"),
	OURS("synthetic ib add", rxe1_synth_add, DEVWATCH_CLASS_IB,
	     DEVWATCH_UEVENT_ADD, true, "rxe1", ""),
	OURS("synthetic uverbs remove", uverbs1_synth_remove, DEVWATCH_CLASS_UVERBS,
	     DEVWATCH_UEVENT_REMOVE, true, "uverbs1", ""),
	OURS("synthetic uverbs add with a UUID", uverbs1_synth_add,
	     DEVWATCH_CLASS_UVERBS, DEVWATCH_UEVENT_ADD, true, "uverbs1", ""),
	/* Someone else's, or an action we do not follow. */
	CASE("net add", vethB_add, 0),
	CASE("net queue add", vethB_queue_add, 0),
	CASE("net remove", veth0_remove, 0),
	CASE("misc remove", rdma_cm_remove, 0),
	CASE("module remove", module_remove, 0),
	CASE("ib change", rxe1_synth_change, 0),
	CASE("libudev", libudev_msg, 0),
	CASE("ib bind",
	     "bind@/devices/virtual/infiniband/rxe0\0ACTION=bind\0"
	     "DEVPATH=/devices/virtual/infiniband/rxe0\0"
	     "SUBSYSTEM=infiniband\0SEQNUM=1\0",
	     0),
	CASE("net device with a name too long for an ib device",
	     "add@/devices/virtual/net/"
	     "n123456789012345678901234567890123456789012345678901234567890123\0"
	     "ACTION=add\0DEVPATH=/devices/virtual/net/"
	     "n123456789012345678901234567890123456789012345678901234567890123\0"
	     "SUBSYSTEM=net\0SEQNUM=1\0",
	     0),
	/* Malformed. */
	CASE("empty", "", -EBADMSG),
	CASE("one NUL", "\0", -EBADMSG),
	{ .what = "no NUL at the end", .buf = rxe0_add,
	  .len = sizeof(rxe0_add) - 2, .ret = -EBADMSG },
	CASE("no NUL at all",
	     "add@/devices/virtual/infiniband/rxe0ACTION=addSUBSYSTEM="
	     "infiniband",
	     -EBADMSG),
	CASE("libudev without its NUL", "libudev", -EBADMSG),
	CASE("no ACTION",
	     "add@/devices/virtual/infiniband/rxe0\0"
	     "DEVPATH=/devices/virtual/infiniband/rxe0\0"
	     "SUBSYSTEM=infiniband\0SEQNUM=1\0",
	     -EBADMSG),
	CASE("no DEVPATH",
	     "add@/devices/virtual/infiniband/rxe0\0ACTION=add\0"
	     "SUBSYSTEM=infiniband\0SEQNUM=1\0",
	     -EBADMSG),
	CASE("no SUBSYSTEM",
	     "add@/devices/virtual/infiniband/rxe0\0ACTION=add\0"
	     "DEVPATH=/devices/virtual/infiniband/rxe0\0SEQNUM=1\0",
	     -EBADMSG),
	CASE("header without @",
	     "add /devices/virtual/infiniband/rxe0\0ACTION=add\0"
	     "DEVPATH=/devices/virtual/infiniband/rxe0\0"
	     "SUBSYSTEM=infiniband\0",
	     -EBADMSG),
	CASE("header and ACTION differ",
	     "remove@/devices/virtual/infiniband/rxe0\0ACTION=add\0"
	     "DEVPATH=/devices/virtual/infiniband/rxe0\0"
	     "SUBSYSTEM=infiniband\0",
	     -EBADMSG),
	CASE("header and DEVPATH differ",
	     "add@/devices/virtual/infiniband/rxe1\0ACTION=add\0"
	     "DEVPATH=/devices/virtual/infiniband/rxe0\0"
	     "SUBSYSTEM=infiniband\0",
	     -EBADMSG),
	CASE("ACTION twice",
	     "add@/devices/virtual/infiniband/rxe0\0ACTION=add\0"
	     "ACTION=remove\0DEVPATH=/devices/virtual/infiniband/rxe0\0"
	     "SUBSYSTEM=infiniband\0",
	     -EBADMSG),
	CASE("an empty string",
	     "add@/devices/virtual/infiniband/rxe0\0ACTION=add\0\0"
	     "DEVPATH=/devices/virtual/infiniband/rxe0\0"
	     "SUBSYSTEM=infiniband\0",
	     -EBADMSG),
	CASE("a string without =",
	     "add@/devices/virtual/infiniband/rxe0\0ACTION=add\0"
	     "DEVPATH=/devices/virtual/infiniband/rxe0\0"
	     "SUBSYSTEM=infiniband\0NAME\0",
	     -EBADMSG),
	CASE("a string without key",
	     "add@/devices/virtual/infiniband/rxe0\0ACTION=add\0"
	     "DEVPATH=/devices/virtual/infiniband/rxe0\0"
	     "SUBSYSTEM=infiniband\0=rxe0\0",
	     -EBADMSG),
	CASE("ib name of 64 characters",
	     "add@/devices/virtual/infiniband/"
	     "r123456789012345678901234567890123456789012345678901234567890123\0"
	     "ACTION=add\0DEVPATH=/devices/virtual/infiniband/"
	     "r123456789012345678901234567890123456789012345678901234567890123\0"
	     "SUBSYSTEM=infiniband\0",
	     -EBADMSG),
	CASE("relative DEVPATH",
	     "add@rxe0\0ACTION=add\0DEVPATH=rxe0\0SUBSYSTEM=infiniband\0",
	     -EBADMSG),
	CASE("DEVPATH ending in /",
	     "add@/devices/virtual/infiniband/\0ACTION=add\0"
	     "DEVPATH=/devices/virtual/infiniband/\0SUBSYSTEM=infiniband\0",
	     -EBADMSG),
	CASE("DEVPATH ending in ..",
	     "remove@/devices/virtual/infiniband_verbs/..\0ACTION=remove\0"
	     "DEVPATH=/devices/virtual/infiniband_verbs/..\0"
	     "SUBSYSTEM=infiniband_verbs\0",
	     -EBADMSG),
	CASE("move without DEVPATH_OLD",
	     "move@/devices/virtual/infiniband/rxeB\0ACTION=move\0"
	     "DEVPATH=/devices/virtual/infiniband/rxeB\0"
	     "SUBSYSTEM=infiniband\0NAME=rxeB\0",
	     -EBADMSG),
	CASE("move from a bad DEVPATH_OLD",
	     "move@/devices/virtual/infiniband/rxeB\0ACTION=move\0"
	     "DEVPATH=/devices/virtual/infiniband/rxeB\0"
	     "SUBSYSTEM=infiniband\0DEVPATH_OLD=rxeA\0",
	     -EBADMSG),
};
// clang-format on

static void test_parse_table(void **state _unused_)
{
	for (size_t i = 0; i < ARRAY_SIZE(parse_cases); i++) {
		const struct parse_case *c = &parse_cases[i];
		struct devwatch_uevent ev;
		int r;

		memset(&ev, 0xa5, sizeof(ev));
		r = devwatch_parse(c->buf, c->len, &ev);
		if (r != c->ret)
			fail_msg("%s: returned %d, expected %d", c->what, r,
				 c->ret);
		if (r != 1)
			continue;
		if (ev.cls != c->cls || ev.action != c->action ||
		    ev.synthetic != c->synthetic || !streq(ev.name, c->name) ||
		    !streq(ev.old_name, c->old_name))
			fail_msg("%s: got class %d action %d synthetic %d "
				 "name '%s' old '%s'",
				 c->what, ev.cls, ev.action, ev.synthetic,
				 ev.name, ev.old_name);
	}
}

/* The literals are the captured datagrams, byte for byte. */
static void test_parse_captured_sizes(void **state _unused_)
{
	assert_int_equal(sizeof(uverbs0_add) - 1, 205);
	assert_int_equal(sizeof(rxe0_add) - 1, 131);
	assert_int_equal(sizeof(uverbs0_remove) - 1, 211);
	assert_int_equal(sizeof(rxe0_remove) - 1, 137);
	assert_int_equal(sizeof(rxeA_move) - 1, 178);
	assert_int_equal(sizeof(uverbs2_remove) - 1, 211);
	assert_int_equal(sizeof(vethB_add) - 1, 128);
	assert_int_equal(sizeof(vethB_queue_add) - 1, 129);
	assert_int_equal(sizeof(veth0_remove) - 1, 134);
	assert_int_equal(sizeof(rdma_cm_remove) - 1, 174);
	assert_int_equal(sizeof(module_remove) - 1, 91);
	assert_int_equal(sizeof(rxe1_synth_add) - 1, 144);
	assert_int_equal(sizeof(rxe1_synth_change) - 1, 150);
	assert_int_equal(sizeof(uverbs1_synth_remove) - 1, 224);
	assert_int_equal(sizeof(uverbs1_synth_add) - 1, 267);
}

/* Every prefix and every one-byte change of a real uevent: no crash, no
 * read outside the buffer (ASan), and a result in range. */
static void test_parse_mutations(void **state _unused_)
{
	static const struct {
		const char *buf;
		size_t len;
	} seeds[] = {
	    {MSG(uverbs0_add)}, {MSG(rxeA_move)}, {MSG(uverbs1_synth_add)}};
	struct devwatch_uevent ev;

	for (size_t s = 0; s < ARRAY_SIZE(seeds); s++) {
		size_t len = seeds[s].len;
		char *copy;

		for (size_t n = 0; n <= len; n++) {
			/* Exactly n bytes on the heap: ASan sees overreads. */
			copy = malloc(n ? n : 1);
			assert_non_null(copy);
			memcpy(copy, seeds[s].buf, n);
			int r = devwatch_parse(copy, n, &ev);
			assert_true(r == 1 || r == 0 || r == -EBADMSG);
			/* Only the whole message ends in its NUL. */
			if (n < len)
				assert_true(r != 1 || copy[n - 1] == '\0');
			free(copy);
		}
		copy = malloc(len);
		assert_non_null(copy);
		for (size_t i = 0; i < len; i++) {
			static const char subst[] = {'\0', '=', '@', '/', 'x'};

			for (size_t k = 0; k < sizeof(subst); k++) {
				memcpy(copy, seeds[s].buf, len);
				copy[i] = subst[k];
				int r = devwatch_parse(copy, len, &ev);
				assert_true(r == 1 || r == 0 || r == -EBADMSG);
				if (r == 1)
					assert_true(strlen(ev.name) <
						    DEVWATCH_NAME_MAX);
			}
		}
		free(copy);
	}
}

static void test_parse_name_lengths(void **state _unused_)
{
	struct devwatch_uevent ev;
	char name[DEVWATCH_NAME_MAX + 1];
	char buf[512];
	int n;

	/* 63 characters is the longest a kernel name can be; 64 is one too
	 * many (also in the table, from the other end). */
	for (size_t len = 62; len <= 64; len++) {
		memset(name, 'u', len);
		name[len] = '\0';
		n = snprintf(
		    buf, sizeof(buf),
		    "remove@/devices/virtual/infiniband_verbs/%s%c"
		    "ACTION=remove%cDEVPATH=/devices/virtual/"
		    "infiniband_verbs/%s%cSUBSYSTEM=infiniband_verbs%c",
		    name, 0, 0, name, 0, 0);
		assert_true(n > 0 && (size_t)n < sizeof(buf));
		int r = devwatch_parse(buf, (size_t)n, &ev);
		if (len < DEVWATCH_NAME_MAX) {
			assert_int_equal(r, 1);
			assert_string_equal(ev.name, name);
		} else {
			assert_int_equal(r, -EBADMSG);
		}
	}
}

/* ---- the device state machine ---- */

struct fixture {
	char root[256]; /* the fake sysfs */
	sd_event *e;
	int peer; /* we send the uevents here */
	struct devwatch *w;
	char log[1024]; /* "ADD rxe0;REMOVE rxe0;" */
	bool free_on_remove;
};

static void sysfs_mkdir(struct fixture *f, const char *fmt, ...) _printf_(2, 3);
static void sysfs_mkdir(struct fixture *f, const char *fmt, ...)
{
	char rel[256], path[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), "%s/%s", f->root, rel);
	assert_int_equal(mkdir(path, 0755), 0);
}

static void sysfs_add_ib(struct fixture *f, const char *ibdev)
{
	sysfs_mkdir(f, "class/infiniband/%s", ibdev);
}

static void sysfs_add_uverbs(struct fixture *f, const char *uverbs,
			     const char *ibdev)
{
	char path[512];
	FILE *fp;

	sysfs_mkdir(f, "class/infiniband_verbs/%s", uverbs);
	snprintf(path, sizeof(path), "%s/class/infiniband_verbs/%s/ibdev",
		 f->root, uverbs);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fprintf(fp, "%s\n", ibdev);
	fclose(fp);
}

static void sysfs_rm(struct fixture *f, const char *cls, const char *name)
{
	char path[512];

	if (streq(cls, "infiniband_verbs")) {
		snprintf(path, sizeof(path), "%s/class/%s/%s/ibdev", f->root,
			 cls, name);
		assert_int_equal(unlink(path), 0);
	}
	snprintf(path, sizeof(path), "%s/class/%s/%s", f->root, cls, name);
	assert_int_equal(rmdir(path), 0);
}

static void on_dev(void *ud, const char *ibdev, enum devwatch_action a)
{
	struct fixture *f = ud;
	size_t n = strlen(f->log);

	snprintf(f->log + n, sizeof(f->log) - n, "%s %s;",
		 a == DEVWATCH_ADD ? "ADD" : "REMOVE", ibdev);
	if (a == DEVWATCH_REMOVE && f->free_on_remove)
		f->w = devwatch_free(f->w);
}

/* Run the loop until it has nothing to do; fail if it never stops. */
static int pump(sd_event *e)
{
	int n = 0;

	while (sd_event_run(e, 0) > 0)
		assert_true(++n < 1000);
	return n;
}

static void send_msg(struct fixture *f, const char *buf, size_t len)
{
	assert_int_equal(send(f->peer, buf, len, 0), (ssize_t)len);
	pump(f->e);
}

/* A uevent as the kernel writes one (the keys devwatch reads). */
static void send_uevent(struct fixture *f, const char *action,
			const char *subsys, const char *name,
			const char *old_name)
{
	char buf[1024];
	int n;

	n = snprintf(buf, sizeof(buf),
		     "%s@/devices/virtual/%s/%s%cACTION=%s%c"
		     "DEVPATH=/devices/virtual/%s/%s%cSUBSYSTEM=%s%c",
		     action, subsys, name, 0, action, 0, subsys, name, 0,
		     subsys, 0);
	if (old_name)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n,
			      "DEVPATH_OLD=/devices/virtual/%s/%s%c", subsys,
			      old_name, 0);
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "SEQNUM=1%c", 0);
	send_msg(f, buf, (size_t)n);
}

static int setup_sysfs(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");
	char path[512];
	FILE *fp;

	assert_non_null(f);
	snprintf(f->root, sizeof(f->root), "%s/devwatch.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->root));
	f->peer = -1;
	sysfs_mkdir(f, "class");
	sysfs_mkdir(f, "class/infiniband");
	sysfs_mkdir(f, "class/infiniband_verbs");
	snprintf(path, sizeof(path), "%s/class/infiniband_verbs/abi_version",
		 f->root);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("6\n", fp);
	fclose(fp);
	assert_int_equal(sd_event_new(&f->e), 0);
	*state = f;
	return 0;
}

/* Start watching through a socketpair, the devices in sysfs being there. */
static void start(struct fixture *f)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX,
				    SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
				    0, sv),
			 0);
	f->peer = sv[1];
	assert_int_equal(
	    devwatch_new_fd(f->e, sv[0], f->root, on_dev, f, &f->w), 0);
	pump(f->e);
}

static int teardown_sysfs(void **state)
{
	struct fixture *f = *state;
	char cmd[600];

	f->w = devwatch_free(f->w);
	closep(&f->peer);
	sd_event_unref(f->e);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->root);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* What the kernel sent for rdma link add / del, in its order. */
static void test_watch_add_remove(void **state)
{
	struct fixture *f = *state;

	sysfs_add_ib(f, "rxe1");
	sysfs_add_uverbs(f, "uverbs1", "rxe1");
	start(f);
	/* Found at start: not reported. */
	assert_string_equal(f->log, "");

	/* Registration: the device is in sysfs before either uevent. */
	sysfs_add_ib(f, "rxe0");
	sysfs_add_uverbs(f, "uverbs0", "rxe0");
	send_msg(f, MSG(uverbs0_add));
	assert_string_equal(f->log, "");
	send_msg(f, MSG(rxe0_add));
	assert_string_equal(f->log, "ADD rxe0;");
	/* Again (udevadm trigger): nothing new. */
	send_msg(f, MSG(rxe0_add));
	send_msg(f, MSG(uverbs0_add));
	assert_string_equal(f->log, "ADD rxe0;");

	/* Removal: reported on the first uevent, when sysfs is gone. */
	sysfs_rm(f, "infiniband_verbs", "uverbs0");
	send_msg(f, MSG(uverbs0_remove));
	assert_string_equal(f->log, "ADD rxe0;REMOVE rxe0;");
	sysfs_rm(f, "infiniband", "rxe0");
	send_msg(f, MSG(rxe0_remove));
	assert_string_equal(f->log, "ADD rxe0;REMOVE rxe0;");

	/* And back. */
	sysfs_add_ib(f, "rxe0");
	sysfs_add_uverbs(f, "uverbs0", "rxe0");
	send_msg(f, MSG(uverbs0_add));
	send_msg(f, MSG(rxe0_add));
	assert_string_equal(f->log, "ADD rxe0;REMOVE rxe0;ADD rxe0;");

	/* A device found at start goes like any other. */
	sysfs_rm(f, "infiniband_verbs", "uverbs1");
	send_uevent(f, "remove", "infiniband_verbs", "uverbs1", NULL);
	sysfs_rm(f, "infiniband", "rxe1");
	send_uevent(f, "remove", "infiniband", "rxe1", NULL);
	assert_string_equal(f->log,
			    "ADD rxe0;REMOVE rxe0;ADD rxe0;REMOVE rxe1;");
}

/* Anything else leaves the state alone. */
static void test_watch_ignores(void **state)
{
	struct fixture *f = *state;
	static const char garbage[] = "\xff\x00\x01@@@";

	sysfs_add_ib(f, "rxe1");
	sysfs_add_uverbs(f, "uverbs1", "rxe1");
	start(f);
	send_msg(f, MSG(uverbs1_synth_remove));
	send_msg(f, MSG(rxe1_synth_change));
	send_msg(f, MSG(rxe1_synth_add));
	send_msg(f, MSG(uverbs1_synth_add));
	send_msg(f, MSG(vethB_add));
	send_msg(f, MSG(veth0_remove));
	send_msg(f, MSG(rdma_cm_remove));
	send_msg(f, MSG(module_remove));
	send_msg(f, MSG(libudev_msg));
	send_msg(f, garbage, sizeof(garbage));
	send_msg(f, "", 0);
	/* Removes of what we do not know. */
	send_msg(f, MSG(uverbs0_remove));
	send_msg(f, MSG(rxe0_remove));
	/* A uverbs device gone before we could read its ibdev. */
	send_msg(f, MSG(uverbs0_add));
	assert_string_equal(f->log, "");

	/* Still watching. */
	sysfs_rm(f, "infiniband_verbs", "uverbs1");
	send_uevent(f, "remove", "infiniband_verbs", "uverbs1", NULL);
	assert_string_equal(f->log, "REMOVE rxe1;");
}

/* ib_uverbs loaded after the device registered: only the uverbs add
 * comes. */
static void test_watch_late_uverbs(void **state)
{
	struct fixture *f = *state;

	sysfs_add_ib(f, "rxe1");
	start(f);
	assert_string_equal(f->log, "");
	sysfs_add_uverbs(f, "uverbs3", "rxe1");
	send_uevent(f, "add", "infiniband_verbs", "uverbs3", NULL);
	assert_string_equal(f->log, "ADD rxe1;");
	/* rmmod ib_uverbs: the device stays, but cannot be opened. */
	sysfs_rm(f, "infiniband_verbs", "uverbs3");
	send_uevent(f, "remove", "infiniband_verbs", "uverbs3", NULL);
	assert_string_equal(f->log, "ADD rxe1;REMOVE rxe1;");
	sysfs_rm(f, "infiniband", "rxe1");
	send_uevent(f, "remove", "infiniband", "rxe1", NULL);
	assert_string_equal(f->log, "ADD rxe1;REMOVE rxe1;");
}

/* A device without uverbs (ib_uverbs not loaded) is never up. */
static void test_watch_no_uverbs(void **state)
{
	struct fixture *f = *state;

	start(f);
	sysfs_add_ib(f, "rxe7");
	send_uevent(f, "add", "infiniband", "rxe7", NULL);
	sysfs_rm(f, "infiniband", "rxe7");
	send_uevent(f, "remove", "infiniband", "rxe7", NULL);
	assert_string_equal(f->log, "");
}

/* rdma dev set rxeA name rxeB */
static void test_watch_rename(void **state)
{
	struct fixture *f = *state;
	static const char synth_move[] =
	    "move@/devices/virtual/infiniband/rxeC\0ACTION=move\0"
	    "DEVPATH=/devices/virtual/infiniband/rxeC\0"
	    "SUBSYSTEM=infiniband\0SYNTH_UUID=0\0"
	    "DEVPATH_OLD=/devices/virtual/infiniband/rxeB\0SEQNUM=1\0";

	sysfs_add_ib(f, "rxeA");
	sysfs_add_uverbs(f, "uverbs2", "rxeA");
	start(f);
	send_msg(f, MSG(rxeA_move));
	assert_string_equal(f->log, "REMOVE rxeA;ADD rxeB;");
	/* Written to a uevent file: renames nothing. */
	send_msg(f, MSG(synth_move));
	assert_string_equal(f->log, "REMOVE rxeA;ADD rxeB;");
	/* The uverbs device now belongs to the new name. */
	send_msg(f, MSG(uverbs2_remove));
	assert_string_equal(f->log, "REMOVE rxeA;ADD rxeB;REMOVE rxeB;");
}

/* A rename of a device we missed: taken as its add. */
static void test_watch_rename_unknown(void **state)
{
	struct fixture *f = *state;

	start(f);
	sysfs_add_ib(f, "rxeA");
	sysfs_add_uverbs(f, "uverbs2", "rxeA");
	send_msg(f, MSG(uverbs0_add)); /* not in sysfs: ignored */
	send_uevent(f, "add", "infiniband_verbs", "uverbs2", NULL);
	assert_string_equal(f->log, "");
	send_msg(f, MSG(rxeA_move));
	assert_string_equal(f->log, "ADD rxeB;");
}

/* The callback frees the watcher in the middle of a rename. */
static void test_watch_free_in_callback(void **state)
{
	struct fixture *f = *state;

	sysfs_add_ib(f, "rxeA");
	sysfs_add_uverbs(f, "uverbs2", "rxeA");
	start(f);
	f->free_on_remove = true;
	send_msg(f, MSG(rxeA_move));
	assert_null(f->w);
	assert_string_equal(f->log, "REMOVE rxeA;");
}

/* Lost uevents (ENOBUFS on a netlink socket): sysfs decides. The overflow
 * comes from NETLINK_USERSOCK multicast, which anyone may send; the
 * watcher drops those messages (not the kernel's) but sees the overflow. */
static void test_watch_resync(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
				 .nl_groups = 1u << 22};
	struct sockaddr_nl to = sa;
	int rx, tx, small = 1;
	char junk[1024];

	rx = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    NETLINK_USERSOCK);
	if (rx < 0)
		skip();
	/* The smallest buffer there is. */
	assert_int_equal(
	    setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	if (bind(rx, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(rx);
		skip();
	}
	tx = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_USERSOCK);
	assert_true(tx >= 0);
	to.nl_pid = 0;

	sysfs_add_ib(f, "rxe1");
	sysfs_add_uverbs(f, "uverbs1", "rxe1");
	sysfs_add_ib(f, "rxe2");
	sysfs_add_uverbs(f, "uverbs2", "rxe2");
	assert_int_equal(devwatch_new_fd(f->e, rx, f->root, on_dev, f, &f->w),
			 0);

	/* Changes the watcher hears nothing of. */
	sysfs_rm(f, "infiniband_verbs", "uverbs1");
	sysfs_rm(f, "infiniband", "rxe1");
	sysfs_add_ib(f, "rxe3");
	sysfs_add_uverbs(f, "uverbs3", "rxe3");
	memcpy(junk, rxe0_add, sizeof(rxe0_add));
	for (int i = 0; i < 64; i++) {
		ssize_t n = sendto(tx, junk, sizeof(junk), 0,
				   (struct sockaddr *)&to, sizeof(to));
		if (n < 0 && (errno == EPERM || errno == EACCES)) {
			close(tx);
			skip();
		}
		/* Multicast done, then the unicast part to port 0 fails:
		 * USERSOCK has no kernel socket. */
		assert_true(n == (ssize_t)sizeof(junk) ||
			    errno == ECONNREFUSED);
	}
	close(tx);
	pump(f->e);
	assert_string_equal(f->log, "REMOVE rxe1;ADD rxe3;");
}

/* The real thing: a NETLINK_KOBJECT_UEVENT socket on /sys. */
static void test_watch_netlink(void **state)
{
	struct fixture *f = *state;
	int r;

	r = devwatch_new(f->e, on_dev, f, &f->w);
	if (r == -EAFNOSUPPORT || r == -EPROTONOSUPPORT || r == -EPERM ||
	    r == -EACCES)
		skip();
	assert_int_equal(r, 0);
	pump(f->e);
	f->w = devwatch_free(f->w);
	assert_null(devwatch_free(NULL));
}

static void test_watch_einval(void **state)
{
	struct fixture *f = *state;
	struct devwatch *w = NULL;
	int fd;

	assert_int_equal(devwatch_new(NULL, on_dev, f, &w), -EINVAL);
	assert_int_equal(devwatch_new(f->e, NULL, f, &w), -EINVAL);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	/* Takes the fd also on failure. */
	assert_int_equal(devwatch_new_fd(f->e, fd, f->root, NULL, f, &w),
			 -EINVAL);
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	/* Not a socket. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(devwatch_new_fd(f->e, fd, f->root, on_dev, f, &w),
			 -ENOTSOCK);
	assert_null(w);
}

/* ---- async events ---- */

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
	    cmocka_unit_test(test_parse_table),
	    cmocka_unit_test(test_parse_captured_sizes),
	    cmocka_unit_test(test_parse_mutations),
	    cmocka_unit_test(test_parse_name_lengths),
#define W(t) cmocka_unit_test_setup_teardown(t, setup_sysfs, teardown_sysfs)
	    W(test_watch_add_remove),
	    W(test_watch_ignores),
	    W(test_watch_late_uverbs),
	    W(test_watch_no_uverbs),
	    W(test_watch_rename),
	    W(test_watch_rename_unknown),
	    W(test_watch_free_in_callback),
	    W(test_watch_resync),
	    W(test_watch_netlink),
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
