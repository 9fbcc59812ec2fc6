// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for uevent_parse (daemon/verbs/uevent.c), the parser
 * of the kernel's uevents that rdmad reads where udevd does not run,
 * and for the device state machine they feed (devwatch.c).
 *
 * The input is messages one per line (a message has NULs, never a
 * newline). Each must parse into what uevent_parse() promises (strings
 * inside the message, DEVPATH absolute, the sysnames its last
 * components), or be refused whole. Those of the infiniband and
 * infiniband_verbs subsystems then go to a detached watcher as the
 * kernel source hands them on, an IBDEV= variable standing in for the
 * uverbs device's sysfs attribute: whatever comes, a device is reported
 * ADD only while down and REMOVE only while up, and the watcher's view
 * agrees with what it reported.
 */
#include <stdint.h>

#include "devwatch.h"
#include "fuzz_util.h"
#include "uevent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_UP 64

struct seen {
	char up[MAX_UP][DEVWATCH_NAME_MAX];
	size_t n;
};

static int find(struct seen *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->up[i], name) == 0)
			return (int)i;
	return -1;
}

static void on_dev(void *ud, const char *ibdev, enum devwatch_action a)
{
	struct seen *s = ud;
	int i = find(s, ibdev);

	check(strlen(ibdev) < DEVWATCH_NAME_MAX, "a name too long reported");
	if (a == DEVWATCH_ADD) {
		check(i < 0, "ADD of a device that is up");
		if (s->n < MAX_UP)
			strcpy(s->up[s->n++], ibdev);
	} else {
		check(a == DEVWATCH_REMOVE, "an unknown action reported");
		/* (Past MAX_UP names the record is partial.) */
		check(i >= 0 || s->n == MAX_UP, "REMOVE of a device not up");
		if (i >= 0)
			memcpy(s->up[i], s->up[--s->n], DEVWATCH_NAME_MAX);
	}
}

static bool inside(const char *p, const uint8_t *msg, size_t len)
{
	return p >= (const char *)msg && p < (const char *)msg + len &&
	       p + strlen(p) < (const char *)msg + len;
}

/* The value of KEY in a message uevent_parse() took, or NULL. */
static const char *value_of(const uint8_t *msg, size_t len, const char *key)
{
	size_t klen = strlen(key);

	for (const char *s = (const char *)msg; s < (const char *)msg + len;
	     s += strlen(s) + 1)
		if (strncmp(s, key, klen) == 0 && s[klen] == '=')
			return s + klen + 1;
	return NULL;
}

static void one(struct devwatch *w, const uint8_t *msg, size_t len)
{
	struct uevent u;
	struct devwatch_event ev = {0};

	if (uevent_parse((const char *)msg, len, &u) < 0)
		return;
	check(inside(u.devpath, msg, len) && inside(u.subsystem, msg, len),
	      "a string outside the message");
	check(u.devpath[0] == '/' && *u.subsystem, "DEVPATH or SUBSYSTEM");
	check(u.sysname > u.devpath && u.sysname[-1] == '/' && *u.sysname &&
		  !strchr(u.sysname, '/') &&
		  u.sysname + strlen(u.sysname) ==
		      u.devpath + strlen(u.devpath),
	      "sysname is not DEVPATH's last component");
	check(!u.devpath_old ||
		  (inside(u.devpath_old, msg, len) && u.old_sysname &&
		   *u.old_sysname && !strchr(u.old_sysname, '/')),
	      "DEVPATH_OLD");
	check(!strstr(u.devpath, "/../") && !strstr(u.devpath, "//"),
	      "DEVPATH leaves its tree");
	check(u.action == _SD_DEVICE_ACTION_INVALID ||
		  (u.action >= 0 && u.action < _SD_DEVICE_ACTION_MAX),
	      "action");

	ev.uverbs = strcmp(u.subsystem, "infiniband_verbs") == 0;
	if (!ev.uverbs && strcmp(u.subsystem, "infiniband") != 0)
		return;
	ev.action = u.action;
	ev.synthetic = u.synthetic;
	ev.name = u.sysname;
	ev.old_name = u.action == SD_DEVICE_MOVE ? u.old_sysname : NULL;
	if (ev.uverbs && u.action == SD_DEVICE_ADD)
		ev.ibdev = value_of(msg, len, "IBDEV");
	devwatch_feed(w, &ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;
	struct seen s = {.n = 0};
	struct devwatch *w = NULL;

	check(devwatch_new_detached(on_dev, &s, &w) == 0, "watcher");
	while (p < end) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl ? nl : end) - p);

		one(w, p, len);
		p = nl ? nl + 1 : end;
	}
	for (size_t i = 0; i < s.n && s.n < MAX_UP; i++)
		check(devwatch_is_up(w, s.up[i]), "reported up, not up");
	devwatch_free(w);
	return 0;
}
