// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "attach_view.h"
#include "config.h"
#include "handover.h"
#include "log.h"
#include "manager.h"
#include "memory.h"
#include "proto.h"
#include "restore.h"
#include "sysd.h"
#include <uthash.h>

/* The fd store's name of a memory object's fd: FDNAME_MEM profile/memory. */
#define FDNAME_MEM "mem/"
/* The configuration as loaded (config_keep()): the next run takes it
 * back instead of parsing files that did not change. */
#define FDNAME_CONFIG "config"
/* A kept configuration bigger than this is not ours. */
#define CONFIG_KEPT_MAX ((size_t)256 << 20)

/* While creation progresses, the start (or reload) may take this much
 * longer than TimeoutStartSec= from each step: a creation that stalls
 * still times out, one that moves on does not. */
#define EXTEND_USEC (30ULL * 1000000)
/* STATUS= at most this often. */
#define STATUS_USEC 200000ULL

struct passed {
	int fd;
	char *name;
};

static struct passed *passed;
static size_t n_passed;
/* The previous run's configuration (FDNAME_CONFIG), until taken; and
 * whether this run loaded it (then the store has it already). */
static int kept_config = -1;
static bool config_reused;

int sysd_listen_init(void)
{
	char **names = NULL;
	int n;

	/* unset: our children (none today) must not think them theirs. */
	n = sd_listen_fds_with_names(1, &names);
	if (n <= 0)
		return n;
	passed = calloc((size_t)n, sizeof(*passed));
	if (!passed) {
		for (int i = 0; i < n; i++) {
			close(SD_LISTEN_FDS_START + i);
			free(names[i]);
		}
		free(names);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;

		/* Memory from our previous run (the fd store): for
		 * memory_create_keyed(), not a socket. */
		if (!strncmp(names[i], FDNAME_MEM, strlen(FDNAME_MEM))) {
			fcntl(fd, F_SETFD, FD_CLOEXEC);
			memory_keep(names[i] + strlen(FDNAME_MEM), fd);
			free(names[i]);
			continue;
		}
		if (streq(names[i], FDNAME_CONFIG)) {
			fcntl(fd, F_SETFD, FD_CLOEXEC);
			if (kept_config >= 0)
				close(kept_config);
			kept_config = fd;
			free(names[i]);
			continue;
		}
		/* A device context and what it holds (restore.h). */
		if (!strncmp(names[i], RESTORE_FDNAME_CTX,
			     strlen(RESTORE_FDNAME_CTX)) ||
		    !strncmp(names[i], RESTORE_FDNAME_STATE,
			     strlen(RESTORE_FDNAME_STATE))) {
			fcntl(fd, F_SETFD, FD_CLOEXEC);
			restore_keep(names[i], fd);
			free(names[i]);
			continue;
		}
		passed[n_passed].fd = fd;
		passed[n_passed++].name = names[i];
	}
	free(names);
	return n;
}

int sysd_take_config(char **out, size_t *len)
{
	_cleanup_close_ int fd = TAKE_FD(kept_config);

	if (fd < 0)
		return -ENOENT;
	/* A memfd: written by the previous run, its offset at the end. */
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	return read_all(fd, CONFIG_KEPT_MAX, -1, out, len);
}

void sysd_config_reused(void)
{
	config_reused = true;
}

/* Passed sockets come inheritable and blocking; ours are neither. */
static int take(size_t i)
{
	int fd = passed[i].fd;
	int fl = fcntl(fd, F_GETFL);

	passed[i].fd = -1;
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	log_info("listening on the socket systemd passed (%s)", passed[i].name);
	return fd;
}

int sysd_listen_take_unix(const char *name, int type, const char *path)
{
	for (size_t i = 0; i < n_passed; i++)
		if (passed[i].fd >= 0 && name && streq(passed[i].name, name))
			return take(i);
	for (size_t i = 0; i < n_passed; i++)
		if (passed[i].fd >= 0 &&
		    sd_is_socket_unix(passed[i].fd, type, 1, path, 0) > 0)
			return take(i);
	return -ENOENT;
}

int sysd_listen_take_inet(const struct sockaddr *sa, socklen_t len)
{
	for (size_t i = 0; i < n_passed; i++)
		if (passed[i].fd >= 0 &&
		    sd_is_socket_sockaddr(passed[i].fd, SOCK_STREAM, sa, len,
					  1) > 0)
			return take(i);
	return -ENOENT;
}

void sysd_listen_done(void)
{
	for (size_t i = 0; i < n_passed; i++) {
		if (passed[i].fd >= 0) {
			log_warn(0,
				 "systemd passed socket %s, which the "
				 "configuration does not listen on; "
				 "closing it",
				 passed[i].name);
			close(passed[i].fd);
		}
		free(passed[i].name);
	}
	free(passed);
	passed = NULL;
	n_passed = 0;
}

/* One name a message: systemd reads the first FDNAME= of each. */
static void unstore_ctx(const char *profile)
{
	sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=" RESTORE_FDNAME_CTX "%s",
		   profile);
	sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=" RESTORE_FDNAME_STATE "%s",
		   profile);
}

static void unstore_kept_ctx(const char *profile)
{
	log_info("the device context of profile %s kept from the previous "
		 "run was not taken back; dropping it",
		 profile);
	unstore_ctx(profile);
}

/* fd to the store as prefix + name, in place of a file kept under that
 * name before. systemd keeps one copy of a file however often it is
 * sent, but a new context (one retired, or its device back) is another
 * file under the same name: the old one goes first, or the next run
 * could take it, and it would hold its objects for ever. */
static bool store_named(const char *prefix, const char *name, int fd)
{
	char msg[512];

	sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s%s", prefix, name);
	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s%s", prefix, name);
	return sd_pid_notify_with_fds(0, 0, msg, &fd, 1) > 0;
}

/* An import-capable context goes to the store with a document of its
 * PDs and MRs (restore.h): a restart takes them back, keys and all. */
static bool store_ctx(const struct profile *p, json_t *holders)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int fd = -1;
	size_t len = 0;
	int cmd_fd = profile_kept_context(p, holders, &text, &len);

	if (cmd_fd < 0)
		return false;
	fd = memfd_create("rdmad-state", MFD_CLOEXEC);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		return false;
	return store_named(RESTORE_FDNAME_CTX, profile_name(p), cmd_fd) &&
	       store_named(RESTORE_FDNAME_STATE, profile_name(p), fd);
}

/*
 * What the fd store has of ours, by FDNAME (profile/memory): the serial
 * of the object whose fd went there. A profile changes often (every
 * reload, attach, state), and storing its memory again each time was a
 * message and a socket per memory object: 10k memfds made a reload with
 * no change send 30k. Now only what is not there yet goes.
 */
struct stored {
	UT_hash_handle hh;
	uint64_t serial;
	char name[];
};

static struct stored *stored;

static void stored_forget(const char *name)
{
	struct stored *e;

	HASH_FIND_STR(stored, name, e);
	if (e) {
		HASH_DEL(stored, e);
		free(e);
	}
}

/* Whether name's fd is there as serial's; noted as such if not. */
static bool stored_already(const char *name, uint64_t serial)
{
	struct stored *e;
	size_t len = strlen(name);

	HASH_FIND(hh, stored, name, len, e);
	if (e && e->serial == serial)
		return true;
	if (!e) {
		e = malloc(sizeof(*e) + len + 1);
		if (!e)
			return false; /* sent each time, as before */
		memcpy(e->name, name, len + 1);
		HASH_ADD_KEYPTR(hh, stored, e->name, len, e);
	}
	e->serial = serial;
	return false;
}

/*
 * The memory fds' messages on one socket, kept: libsystemd's
 * sd_pid_notify_with_fds opens (and sizes, and closes) a socket for each
 * message, and a start of 10k memfds sent 10k of them from the loop (13%
 * of such a start in perf). The same datagram goes to $NOTIFY_SOCKET,
 * the fd as SCM_RIGHTS; systemd takes the sender's credentials from the
 * kernel (SO_PASSCRED). Addresses other than a path or an abstract name
 * go through libsystemd, as before.
 */
static int notify_fd = -1;
static struct sockaddr_un notify_sa;
static socklen_t notify_sa_len;

static void notify_open(void)
{
	const char *e = getenv("NOTIFY_SOCKET");
	int sndbuf = 8 << 20;
	size_t n;

	if (notify_fd >= 0 || !e || (e[0] != '/' && e[0] != '@'))
		return;
	n = strlen(e);
	if (n < 2 || n >= sizeof(notify_sa.sun_path))
		return;
	notify_sa.sun_family = AF_UNIX;
	memcpy(notify_sa.sun_path, e, n);
	if (e[0] == '@')
		notify_sa.sun_path[0] = '\0';
	notify_sa_len = offsetof(struct sockaddr_un, sun_path) + n +
			(e[0] == '/');
	notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	/* As libsystemd does: room for a burst of messages. */
	if (notify_fd >= 0)
		(void)setsockopt(notify_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf,
				 sizeof(sndbuf));
}

/* One message with fd on the kept socket; 1, or -errno. */
static int notify_send_fd(const char *msg, int fd)
{
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = strlen(msg) };
	int r = proto_sendmsg(notify_fd, (struct sockaddr *)&notify_sa,
			      notify_sa_len, &iov, 1, &fd, 1);

	return r < 0 ? r : 1;
}

/* sd_pid_notify_with_fds(0, 0, msg, &fd, 1), on the kept socket. */
static int notify_with_fd(const char *msg, int fd)
{
	/* Opened before notify_send_fd() reads the address: the first
	 * message went to no address (ENOTCONN) when it opened there. */
	notify_open();
	return notify_fd < 0 ? sd_pid_notify_with_fds(0, 0, msg, &fd, 1)
			     : notify_send_fd(msg, fd);
}

/* A memory object's fd goes to systemd's fd store (FileDescriptorStoreMax=
 * in the unit): after a restart it comes back in LISTEN_FDS, and the
 * memory is created from it with its contents. Only what is not there
 * yet goes (stored_already()); removing goes by name. */
struct memory_store {
	const char *profile;
	bool remove;
};

static void store_memory(void *ud, const char *memory, uint64_t serial,
			 int fd)
{
	const struct memory_store *ms = ud;
	char name[400], msg[512];

	snprintf(name, sizeof(name), "%s/%s", ms->profile, memory);
	if (ms->remove)
		stored_forget(name);
	else if (stored_already(name, serial))
		return;
	snprintf(msg, sizeof(msg), "%s=1\nFDNAME=" FDNAME_MEM "%s",
		 ms->remove ? "FDSTOREREMOVE" : "FDSTORE", name);
	if (ms->remove)
		sd_notify(0, msg);
	else if (notify_with_fd(msg, fd) < 0)
		stored_forget(name); /* not there: try again */
}

static void store_profile(const struct profile *p, bool remove)
{
	struct memory_store ms = { .profile = profile_name(p),
				   .remove = remove };

	if (remove)
		unstore_ctx(ms.profile);
	else
		store_ctx(p, NULL);
	profile_each_kept_memory(p, !remove, store_memory, &ms);
}

static void unstore_key(const char *key)
{
	log_info("memory %s kept from the previous run is no longer "
		 "declared (or has another size); dropping it",
		 key);
	sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=" FDNAME_MEM "%s", key);
	/* By name: whatever of ours was stored under it went too. */
	stored_forget(key);
}

struct sysd {
	struct manager *m;
	uint64_t last_status;
	size_t last_objects;
	uint64_t last_bytes;
	bool ready;
	/* The configuration in the store: that of this many reloads. */
	bool config_stored;
	unsigned int config_reloads;
};

static struct sysd sysd;

/* The configuration to the store (config_keep()), once ready and again
 * after each reload applied: the next run takes it back instead of
 * parsing the same files again. Only a cost saved: a next run that does
 * not find it, or finds it stale, parses. */
static void store_config(struct sysd *s)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = -1;
	size_t len = 0;
	int r;

	/* What the store holds is this run's until a reload is applied:
	 * the image this run was loaded from, or the one stored last. */
	if (s->config_stored && s->config_reloads == s->m->reloads_applied)
		return;
	s->config_stored = true;
	s->config_reloads = s->m->reloads_applied;
	if (!getenv("NOTIFY_SOCKET"))
		return;
	r = config_keep(s->m->config, &buf, &len);
	if (r == -ENOTSUP)
		return; /* no build ID: no way to tell a next binary */
	fd = r < 0 ? -1 : memfd_create("rdmad-config", MFD_CLOEXEC);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len ||
	    !store_named(FDNAME_CONFIG, "", fd))
		log_debug("cannot store the configuration for a restart: %s",
			  strerror(r < 0 ? -r : errno));
}

static void on_manager_event(void *ud, const struct manager_event *ev)
{
	struct sysd *s = ud;
	struct profile_progress pr;
	uint64_t now;

	switch (ev->kind) {
	case MANAGER_PROGRESS:
		sd_event_now(s->m->event, CLOCK_MONOTONIC, &now);
		if (now - s->last_status < STATUS_USEC)
			return;
		s->last_status = now;
		manager_progress(s->m, &pr);
		sd_notifyf(0,
			   "STATUS=creating objects: %zu of %zu, %llu of %llu "
			   "MiB populated, %llu of %llu MiB registered",
			   pr.objects, pr.objects_total,
			   (unsigned long long)(pr.populated >> 20),
			   (unsigned long long)(pr.populated_total >> 20),
			   (unsigned long long)(pr.bytes >> 20),
			   (unsigned long long)(pr.bytes_total >> 20));
		/* Only progress buys time: a creation stuck on one object
		 * runs into TimeoutStartSec= as it should. */
		if (pr.objects != s->last_objects ||
		    pr.bytes + pr.populated != s->last_bytes)
			sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%llu",
				   (unsigned long long)EXTEND_USEC);
		s->last_objects = pr.objects;
		s->last_bytes = pr.bytes + pr.populated;
		return;
	case MANAGER_SETTLED:
		/* What parsing and creating freed goes back to the system:
		 * a daemon holds its memory for a long time. */
		malloc_trim(0);
		/* Kept memory that no object took by now is not coming
		 * back (its profile may still be pending: a loss). The
		 * store has what a restart needs before READY=1 says so: a
		 * restart right after it must find the context there. */
		if (!s->ready) {
			memory_keep_done(unstore_key);
			restore_done(unstore_kept_ctx);
			/* FDSTOREREMOVE goes by name: a name kept twice (a
			 * reload had resized it) took the live fd out too. */
			for (size_t i = 0; i < s->m->n_profiles; i++)
				store_profile(s->m->profiles[i], false);
		}
		sd_notify(0, "READY=1\nSTATUS=running");
		if (!s->ready)
			log_ctx(LOG_INFO, 0,
				&(struct log_ctx){.message_id = MSGID_READY},
				"ready: %zu profiles", s->m->n_profiles);
		s->ready = true;
		store_config(s);
		return;
	case MANAGER_PROFILE_CHANGED:
		/* Before the first READY=1 the store waits for it (above):
		 * it keeps memory for the next run and gates nothing of
		 * this one, and 10k memfds are 10k messages. */
		if (s->ready)
			store_profile(ev->profile, false);
		return;
	case MANAGER_PROFILE_REMOVED:
		store_profile(ev->profile, true);
		return;
	case MANAGER_DEVICE_LOST:
		/* That context is dead: nothing to take back. */
		unstore_ctx(profile_name(ev->profile));
		return;
	}
}

int sysd_start(struct manager *m)
{
	int r;

	sysd.m = m;
	/* The store holds this run's configuration already: the image it
	 * was loaded from. */
	sysd.config_stored = config_reused;
	/* sd-event pings at half of WatchdogSec= when the loop runs; a
	 * loop stuck anywhere stops the pings, and systemd restarts us. */
	r = sd_event_set_watchdog(m->event, true);
	if (r < 0)
		return r;
	if (r > 0)
		log_debug("watchdog on");
	return manager_subscribe(m, on_manager_event, &sysd);
}

void sysd_reloading(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	sd_notifyf(0, "RELOADING=1\nSTATUS=reloading\nMONOTONIC_USEC=%llu",
		   (unsigned long long)ts.tv_sec * 1000000ULL +
		       (unsigned long long)ts.tv_nsec / 1000);
}

void sysd_reload_refused(void)
{
	sd_notify(0, "READY=1\nSTATUS=running");
}

void sysd_stopping(void)
{
	sd_notify(0, "STOPPING=1");
	/* What went to the store stays for the next run: a restart takes
	 * it back; a stop empties the store, and the kernel frees it. */
	if (!sysd.m || !getenv("NOTIFY_SOCKET"))
		return;
	for (size_t i = 0; i < sysd.m->n_profiles; i++) {
		struct profile *p = sysd.m->profiles[i];
		json_t *holders;

		if (!profile_leave_context(p))
			continue;
		/* Who holds what now: the next run keeps what they lease
		 * while they live (the leases outlive this process). */
		holders = manager_holders_json(sysd.m, p);
		if (json_array_size(holders) && !store_ctx(p, holders))
			log_warn(0, "profile %s: cannot store who holds its "
				    "objects: the next run may destroy what "
				    "its clients use",
				 profile_name(p));
		json_decref(holders);
	}
}
