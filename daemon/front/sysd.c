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
#include "durable.h"
#include "handover.h"
#include "log.h"
#include "manager.h"
#include "memory.h"
#include "proto.h"
#include "reclaim.h"
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

/*
 * What the store holds of a profile's context (restore.h): its cmd_fd
 * under ctx/P, and two durable records (durable.h), each stored once
 * and then rewritten in place: the state document (state/P, at each
 * change of the profile) and the lease record (lease/P, at each lease
 * taken or ended). So the store has the truth at every moment, not only
 * after a clean stop: a SIGKILL, an abort, an OOM kill or the watchdog
 * leaves the next run who holds what, and no change costs a message to
 * systemd. The records a previous run left are written on in place
 * (their files are in the store already), once the profile's restore
 * has read them.
 */
struct record {
	UT_hash_handle hh;
	int state_fd, lease_fd; /* in the store, ours to write; -1: not yet */
	int64_t ctxn;		/* the context stored under ctx/P */
	bool ctx_stored;
	bool leases_due; /* leases ended: written at the turn's end */
	/* The lease sets in the store (leaseset/ID/P, restore.h): each
	 * written once, before the lease record names it, and taken out
	 * once a lease record that names it no more is written; the
	 * previous run's too. */
	uint64_t *sets;
	size_t n_sets;
	char profile[];
};

static struct record *records;
static bool stopping;

static struct record *record_of(const char *profile, bool add)
{
	struct record *rec;
	size_t len = strlen(profile);

	HASH_FIND(hh, records, profile, len, rec);
	if (rec || !add)
		return rec;
	rec = calloc(1, sizeof(*rec) + len + 1);
	if (!rec)
		return NULL;
	memcpy(rec->profile, profile, len + 1);
	rec->state_fd = rec->lease_fd = -1;
	rec->ctxn = -1;
	HASH_ADD_KEYPTR(hh, records, rec->profile, len, rec);
	return rec;
}

static bool sets_have(const uint64_t *ids, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

static bool sets_add(uint64_t **sets, size_t *n, uint64_t id)
{
	uint64_t *more;

	if (sets_have(*sets, *n, id))
		return true;
	more = realloc(*sets, (*n + 1) * sizeof(**sets));
	if (!more)
		return false;
	more[(*n)++] = id;
	*sets = more;
	return true;
}

/* A lease set the previous run stored (leaseset/ID/P): ours to take out
 * once our lease record names it no more. */
static void set_adopt(const char *name)
{
	const char *slash = strchr(name, '/');
	struct record *rec;
	uint64_t id;
	char *end;

	if (!slash || slash - name != MANAGER_SET_ID_LEN)
		return;
	errno = 0;
	id = strtoull(name, &end, 16);
	if (errno || end != slash || !(rec = record_of(slash + 1, true)))
		return;
	(void)sets_add(&rec->sets, &rec->n_sets, id);
}

/* A record the previous run left under name, kept to write on when it
 * is one (an older run's plain text is replaced by a new file). */
static void records_adopt(const char *name, int fd)
{
	bool state = !strncmp(name, RESTORE_FDNAME_STATE,
			      strlen(RESTORE_FDNAME_STATE));
	bool lease = !strncmp(name, RESTORE_FDNAME_LEASE,
			      strlen(RESTORE_FDNAME_LEASE));
	struct record *rec;
	int *slot, copy;

	if (!strncmp(name, RESTORE_FDNAME_LEASESET,
		     strlen(RESTORE_FDNAME_LEASESET))) {
		set_adopt(name + strlen(RESTORE_FDNAME_LEASESET));
		return;
	}
	if ((!state && !lease) || !durable_is(fd))
		return;
	rec = record_of(name + strlen(state ? RESTORE_FDNAME_STATE
					    : RESTORE_FDNAME_LEASE),
			true);
	if (!rec)
		return;
	slot = state ? &rec->state_fd : &rec->lease_fd;
	copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (copy < 0)
		return;
	if (*slot >= 0)
		close(*slot);
	*slot = copy;
}

static void record_forget(const char *profile)
{
	struct record *rec = record_of(profile, false);

	if (!rec)
		return;
	HASH_DEL(records, rec);
	if (rec->state_fd >= 0)
		close(rec->state_fd);
	if (rec->lease_fd >= 0)
		close(rec->lease_fd);
	free(rec->sets);
	free(rec);
}

static void unstore_set(const char *profile, uint64_t id)
{
	char sid[MANAGER_SET_ID_LEN + 1];

	manager_set_id(id, sid);
	sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=" RESTORE_FDNAME_LEASESET "%s/%s",
		   sid, profile);
}

/* One name a message: systemd reads the first FDNAME= of each. */
static void unstore_ctx(const char *profile)
{
	struct record *rec = record_of(profile, false);

	for (size_t i = 0; rec && i < rec->n_sets; i++)
		unstore_set(profile, rec->sets[i]);
	sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=" RESTORE_FDNAME_CTX "%s",
		   profile);
	sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=" RESTORE_FDNAME_STATE "%s",
		   profile);
	sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=" RESTORE_FDNAME_LEASE "%s",
		   profile);
	record_forget(profile);
}

/* text as the new version of the record in *fd, stored under prefix +
 * profile the first time. */
static bool record_write(int *fd, const char *prefix, const char *profile,
			 const char *text, size_t len)
{
	_cleanup_close_ int nfd = -1;

	if (*fd >= 0 && durable_write(*fd, text, len) > 0)
		return true;
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	nfd = memfd_create("rdmad-record", MFD_CLOEXEC);
	if (nfd < 0 || durable_write(nfd, text, len) <= 0 ||
	    !store_named(prefix, profile, nfd))
		return false;
	*fd = TAKE_FD(nfd);
	return true;
}

/* An import-capable context goes to the store with the document of its
 * PDs and MRs: a restart takes them back, keys and all. The context
 * once per file: a new one (retired, or its device back) replaces the
 * one kept before; the one taken back from the previous run is there
 * already (systemd keeps one copy of a file). */
static bool store_ctx(const struct profile *p)
{
	struct kept_context k;
	_cleanup_free_ char *text = NULL;
	struct record *rec;
	bool ok = true;

	if (profile_kept_context(p, &k) < 0)
		return false;
	text = k.text;
	rec = record_of(profile_name(p), true);
	if (!rec)
		return false;
	if (!rec->ctx_stored || k.ctxn < 0 || k.ctxn != rec->ctxn) {
		char msg[512];

		snprintf(msg, sizeof(msg),
			 "FDSTORE=1\nFDNAME=" RESTORE_FDNAME_CTX "%s",
			 profile_name(p));
		ok = !rec->ctx_stored && k.taken_back
			     ? sd_pid_notify_with_fds(0, 0, msg, &k.cmd_fd,
						      1) > 0
			     : store_named(RESTORE_FDNAME_CTX, profile_name(p),
					   k.cmd_fd);
		rec->ctx_stored = ok;
		rec->ctxn = k.ctxn;
	}
	return record_write(&rec->state_fd, RESTORE_FDNAME_STATE,
			    profile_name(p), text, k.len) &&
	       ok;
}

/* The lease sets a lease record about to be written names: each stored
 * first, if it is not in the store yet. */
struct sets_named {
	struct record *rec;
	uint64_t *ids;
	size_t n;
	/* Not named, but the next attach's: left in the store if there
	 * (a worker that attaches and detaches in a loop stores its set
	 * once, not at each attach). */
	uint64_t *kept;
	size_t n_kept;
	bool ok; /* every one is in the store */
};

static bool store_set(const struct record *rec, uint64_t id,
		      const char *leases, size_t len)
{
	char sid[MANAGER_SET_ID_LEN + 1], name[MANAGER_SET_ID_LEN + 2 + 256];
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int fd = -1;
	int n;

	manager_set_id(id, sid);
	n = asprintf(&text, "{\"version\":2,\"id\":\"%s\",\"leases\":[%.*s]}",
		     sid, (int)len, leases);
	if (n < 0) {
		text = NULL;
		return false;
	}
	snprintf(name, sizeof(name), "%s/%s", sid, rec->profile);
	/* Written once: the store's copy is all we need of it. */
	return record_write(&fd, RESTORE_FDNAME_LEASESET, name, text,
			    (size_t)n);
}

static void set_named(void *ud, uint64_t id, const char *text, size_t len)
{
	struct sets_named *sn = ud;
	struct record *rec = sn->rec;
	size_t before = sn->n;

	if (!sets_add(&sn->ids, &sn->n, id)) {
		sn->ok = false;
		return;
	}
	if (sn->n == before || sets_have(rec->sets, rec->n_sets, id))
		return; /* another holder's, or stored before */
	if (!store_set(rec, id, text, len) ||
	    !sets_add(&rec->sets, &rec->n_sets, id))
		sn->ok = false;
}

static void set_kept(void *ud, uint64_t id)
{
	struct sets_named *sn = ud;

	(void)sets_add(&sn->kept, &sn->n_kept, id);
}

/* The sets in the store that the lease record just written names no
 * more, nor the attach cache keeps: taken out. */
static void sets_unstore(struct record *rec, const struct sets_named *sn)
{
	size_t k = 0;

	for (size_t i = 0; i < rec->n_sets; i++) {
		if (sets_have(sn->ids, sn->n, rec->sets[i]) ||
		    sets_have(sn->kept, sn->n_kept, rec->sets[i]))
			rec->sets[k++] = rec->sets[i];
		else
			unstore_set(rec->profile, rec->sets[i]);
	}
	rec->n_sets = k;
}

/* Who holds what of p now, to the lease record: a new run adopts them
 * (manager_adopt.c) and keeps what they hold while they live. The lease
 * sets it names go to the store first (once each); the record itself
 * names them by id, so that an attach or a detach rewrites a few bytes
 * whatever the size of the profile. */
static void store_leases(struct manager *m, struct profile *p)
{
	_cleanup_free_ char *text = NULL, *holders = NULL, *makers = NULL;
	size_t hlen = 0, mlen = 0;
	struct record *rec;
	struct sets_named sn = { .ok = true };

	if (!profile_hands_over(p) || !getenv("NOTIFY_SOCKET"))
		return;
	rec = record_of(profile_name(p), true);
	if (rec) {
		rec->leases_due = false; /* this is the truth, now */
		sn.rec = rec;
		holders = manager_holders_text(
		    m, p, &hlen,
		    &(struct manager_lease_sets){set_named, set_kept, &sn});
	}
	makers = reclaim_record_text(p, &mlen);
	/* {"version":2,"holders":[...],"makers":[...]}: the arrays as they
	 * come. */
	if (holders && makers && sn.ok &&
	    asprintf(&text, "{\"version\":2,\"holders\":%.*s,\"makers\":%.*s}",
		     (int)hlen, holders, (int)mlen, makers) < 0)
		text = NULL;
	if (!text ||
	    !record_write(&rec->lease_fd, RESTORE_FDNAME_LEASE,
			  profile_name(p), text, strlen(text)))
		log_warn(0, "profile %s: cannot write down who holds its "
			    "objects: a crash now may destroy what its "
			    "clients use",
			 profile_name(p));
	else
		sets_unstore(rec, &sn);
	free(sn.ids);
	free(sn.kept);
}

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
			     strlen(RESTORE_FDNAME_STATE)) ||
		    !strncmp(names[i], RESTORE_FDNAME_LEASE,
			     strlen(RESTORE_FDNAME_LEASE)) ||
		    !strncmp(names[i], RESTORE_FDNAME_LEASESET,
			     strlen(RESTORE_FDNAME_LEASESET))) {
			fcntl(fd, F_SETFD, FD_CLOEXEC);
			records_adopt(names[i], fd);
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

static void unstore_kept_ctx(const char *profile)
{
	log_info("the device context of profile %s kept from the previous "
		 "run was not taken back; dropping it",
		 profile);
	unstore_ctx(profile);
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

/* p's memory to the store (or out of it), and its context unless
 * memory_only (stored already as it settled). */
static void store_profile(const struct profile *p, bool remove,
			  bool memory_only)
{
	struct memory_store ms = { .profile = profile_name(p),
				   .remove = remove };

	if (remove)
		unstore_ctx(ms.profile);
	else if (!memory_only)
		store_ctx(p);
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
	sd_event_source *leases_due; /* leases_later()'s */
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
	struct manager_counters mc;

	manager_counters(s->m, &mc);
	if (s->config_stored && s->config_reloads == mc.reloads_applied)
		return;
	s->config_stored = true;
	s->config_reloads = mc.reloads_applied;
	if (!getenv("NOTIFY_SOCKET"))
		return;
	r = config_keep(manager_config(s->m), &buf, &len);
	if (r == -ENOTSUP)
		return; /* no build ID: no way to tell a next binary */
	fd = r < 0 ? -1 : memfd_create("rdmad-config", MFD_CLOEXEC);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len ||
	    !store_named(FDNAME_CONFIG, "", fd))
		log_debug("cannot store the configuration for a restart: %s",
			  strerror(r < 0 ? -r : errno));
}

static int on_leases_due(sd_event_source *es, void *ud)
{
	struct sysd *s = ud;
	struct record *rec, *tmp;

	(void)es;
	HASH_ITER(hh, records, rec, tmp) {
		struct profile *p;

		if (!rec->leases_due)
			continue;
		rec->leases_due = false;
		p = stopping ? NULL : manager_profile(s->m, rec->profile);
		if (p)
			store_leases(s->m, p);
	}
	return 0;
}

/* p's lease record, written at the end of this turn of the loop. */
static void leases_later(struct sysd *s, struct profile *p)
{
	struct record *rec = record_of(profile_name(p), true);

	if (!rec || !getenv("NOTIFY_SOCKET"))
		return;
	rec->leases_due = true;
	if (!s->leases_due &&
	    sd_event_add_defer(manager_loop(s->m), &s->leases_due, on_leases_due,
			       s) < 0) {
		rec->leases_due = false;
		store_leases(s->m, p);
		return;
	}
	sd_event_source_set_enabled(s->leases_due, SD_EVENT_ONESHOT);
}

static void on_manager_event(void *ud, const struct event *ev)
{
	struct sysd *s = ud;
	struct profile_progress pr;
	uint64_t now;

	switch (ev->kind) {
	case EV_CREATION_STEP:
		sd_event_now(manager_loop(s->m), CLOCK_MONOTONIC, &now);
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
	case EV_SETTLED:
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
			for (size_t i = 0; i < manager_n_profiles(s->m); i++)
				store_profile(manager_profile_at(s->m, i), false, true);
		}
		sd_notify(0, "READY=1\nSTATUS=running");
		if (!s->ready)
			log_ctx(LOG_INFO, 0,
				&(struct log_ctx){.message_id = MSGID_READY},
				"ready: %zu profiles", manager_n_profiles(s->m));
		s->ready = true;
		store_config(s);
		return;
	case EV_PROFILE_CHANGED:
		if (stopping)
			return;
		/* Before the first READY=1 the store waits for it (above)
		 * with memory: it keeps memory for the next run and gates
		 * nothing of this one, and 10k memfds are 10k messages. The
		 * context and its document go at once: its clients may
		 * attach before the others are ready. */
		if (s->ready)
			store_profile(ev->profile, false, false);
		else if (getenv("NOTIFY_SOCKET"))
			store_ctx(ev->profile);
		return;
	case EV_LEASES_CHANGED:
		/* At the stop the sessions end: what they held stays as
		 * written then, for the next run. */
		if (stopping)
			return;
		/* A lease taken is written before the client gets its
		 * handles; ended ones once the loop's turn is over (a detach
		 * ends one per object: one write for them all). */
		if (ev->u.leases_ended)
			leases_later(s, ev->profile);
		else
			store_leases(s->m, ev->profile);
		return;
	case EV_PROFILE_REMOVED:
		store_profile(ev->profile, true, false);
		return;
	case EV_DEVICE_LOST:
		/* That context is dead: nothing to take back. */
		unstore_ctx(ev->profile_name);
		return;
	default:
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
	r = sd_event_set_watchdog(manager_loop(m), true);
	if (r < 0)
		return r;
	if (r > 0)
		log_debug("watchdog on");
	return events_subscribe(manager_bus(m), on_manager_event, &sysd);
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
	 * it back; a stop empties the store, and the kernel frees it. The
	 * records are written at every change: once more now, and no more
	 * (the sessions' ends below are not the clients' ends). */
	if (!sysd.m || !getenv("NOTIFY_SOCKET"))
		return;
	stopping = true;
	for (size_t i = 0; i < manager_n_profiles(sysd.m); i++) {
		struct profile *p = manager_profile_at(sysd.m, i);

		if (!profile_leave_context(p))
			continue;
		store_leases(sysd.m, p);
		if (!store_ctx(p))
			log_warn(0, "profile %s: cannot store its context's "
				    "state: the next run may not take it back",
				 profile_name(p));
	}
}
