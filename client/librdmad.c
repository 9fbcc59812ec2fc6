// SPDX-License-Identifier: MIT
/*
 * librdmad's profiles: attach (the ATTACH, then the context imported in
 * shared mode, or the device opened and the memory registered here in
 * local mode) and detach. The connection they go over is
 * librdmad_conn.c's; the objects a program asks for, librdmad_objects.c's.
 */
#include <errno.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "librdmad_internal.h"
#include "util.h"

/* ---- profiles: setting up and tearing down ---- */

/* Memory i mapped in this process, once: shared mode maps a memory when
 * the program first asks for an MR in it (or its bytes), so that an
 * attach does not grow with the profile's memories. */
int client_memory_map(struct rdmad_profile *p, size_t i)
{
	struct client_memory *mem = client_memory(p, i);
	struct stat st;
	int err;

	if (!mem)
		return -EPROTO;
	if (mem->addr != MAP_FAILED)
		return 0;
	if (mem->fd < 0 && mem->ask) {
		err = client_memory_ask(p, mem);
		if (err < 0)
			return err;
	}
	if (mem->fd < 0)
		return client_set_error(EBADF,
					"memory '%s' is not mapped "
					"and its fd is gone",
					mem->name);
	if (fstat(mem->fd, &st) < 0) {
		err = errno;
		return client_set_error(err, "memory '%s': %s", mem->name,
					strerror(err));
	}
	/* Mapping past the end would SIGBUS on first touch. */
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size < mem->size)
		return client_set_error(
		    EPROTO,
		    "memory '%s' has %llu bytes, "
		    "rdmad said %zu",
		    mem->name, (unsigned long long)st.st_size, mem->size);
	mem->addr = mmap(NULL, mem->size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 mem->fd, 0);
	if (mem->addr == MAP_FAILED) {
		err = errno;
		return client_set_error(err,
					"cannot map memory '%s' (%zu bytes): "
					"%s",
					mem->name, mem->size, strerror(err));
	}
	/* The mapping keeps the memory alive. */
	closep(&mem->fd);
	return 0;
}

static int map_memory(struct rdmad_profile *p)
{
	for (size_t i = 0; i < p->n_mem; i++) {
		int r = client_memory_map(p, i);

		if (r < 0)
			return r;
	}
	return 0;
}

static int import_context(struct rdmad_profile *p)
{
	struct stat before, after;
	int err;

	if (fstat(p->cmd_fd, &before) < 0) {
		err = errno;
		return client_set_error(err, "cmd_fd: %s", strerror(err));
	}
	errno = 0;
	p->ctx = ibv_import_device(p->cmd_fd);
	if (!p->ctx) {
		err = errno ? errno : EOPNOTSUPP;
		/* Some of libibverbs' failure paths close the fd, some do
		 * not: close it only if it still is the same file. */
		if (fstat(p->cmd_fd, &after) == 0 &&
		    after.st_dev == before.st_dev &&
		    after.st_ino == before.st_ino &&
		    after.st_rdev == before.st_rdev)
			closep(&p->cmd_fd);
		p->cmd_fd = -1;
		return client_set_error(err,
					"cannot import the context of %s: %s",
					p->ibdev, strerror(err));
	}
	p->cmd_fd = -1; /* the context's now */
	return 0;
}

/* Shared mode: the context imported; each memory is mapped, and each
 * PD, MR and DM imported, when the program first asks for it
 * (librdmad_objects.c), so that an attach costs the same whatever the
 * profile holds. */
static int setup_shared(struct rdmad_profile *p)
{
	return import_context(p);
}

static bool has_cap_ipc_lock(void)
{
	struct __user_cap_header_struct h = {
	    .version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {0};

	/* If we cannot tell, let the kernel judge at registration. */
	if (syscall(SYS_capget, &h, d) < 0)
		return true;
	return d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &
	       CAP_TO_MASK(CAP_IPC_LOCK);
}

/* What this process has pinned already (VmPin), 0 if unknown. */
static uint64_t pinned_now(void)
{
	unsigned long long kb = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

/* What registering MRs [0, n) pins: their pages. */
static uint64_t pinned_by(const struct rdmad_profile *p, size_t n)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), bytes = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct client_mr *mr = &p->mr[i];
		uint64_t start = mr->offset & ~(page - 1);
		uint64_t end =
		    (mr->offset + mr->length + page - 1) & ~(page - 1);

		bytes += end - start;
	}
	return bytes;
}

/* The ENOMEM of a limit too low: what is needed, and how to get it. */
static int memlock_error(uint64_t need, uint64_t pinned,
			 const struct rlimit *rl)
{
	uint64_t total = need + pinned;
	char s_need[32], s_pinned[64] = "", s_limit[32], s_total[32],
			 s_hard[96] = "";

	client_size_str(need, s_need, sizeof(s_need));
	client_size_str(rl->rlim_cur, s_limit, sizeof(s_limit));
	client_size_str(total, s_total, sizeof(s_total));
	if (pinned) {
		char s[32];

		client_size_str(pinned, s, sizeof(s));
		snprintf(s_pinned, sizeof(s_pinned), " (%s pinned already)", s);
	}
	if (rl->rlim_max != RLIM_INFINITY && rl->rlim_max < total) {
		char s[32];

		client_size_str(rl->rlim_max, s, sizeof(s));
		snprintf(s_hard, sizeof(s_hard),
			 "; the hard limit is %s: raising it needs root", s);
	}
	return client_set_error(ENOMEM,
				"local mode registers %s%s but "
				"RLIMIT_MEMLOCK is %s: raise it to at least "
				"%s (ulimit -l %llu, LimitMEMLOCK=%lluK)%s",
				s_need, s_pinned, s_limit, s_total,
				(unsigned long long)((total + 1023) / 1024),
				(unsigned long long)((total + 1023) / 1024),
				s_hard);
}

/*
 * Registering pins the pages, counted against RLIMIT_MEMLOCK (unless
 * CAP_IPC_LOCK): when the MRs alone exceed it, fail before registering
 * anything, with the numbers rather than with the kernel's bare ENOMEM.
 * Whether what the process has pinned already pushes them over is
 * left to the kernel, which counts it anyway: reading it here
 * (/proc/self/status) would cost every attach more than registering a
 * small MR; memlock_explain() reads it when the kernel says ENOMEM.
 */
static int memlock_check(const struct rdmad_profile *p)
{
	uint64_t need = pinned_by(p, p->n_mr);
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 ||
	    rl.rlim_cur == RLIM_INFINITY || need <= rl.rlim_cur ||
	    has_cap_ipc_lock())
		return 0;
	return memlock_error(need, pinned_now(), &rl);
}

/*
 * Registering MR n failed with ENOMEM: if RLIMIT_MEMLOCK is why, say so
 * as memlock_check() would have, counting what MRs [0, n) pinned as
 * part of the need rather than as pinned already. 0 if it is not.
 */
static int memlock_explain(const struct rdmad_profile *p, size_t n)
{
	uint64_t need = pinned_by(p, p->n_mr), ours = pinned_by(p, n);
	uint64_t pinned = pinned_now();
	struct rlimit rl;

	pinned = pinned > ours ? pinned - ours : 0;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 ||
	    rl.rlim_cur == RLIM_INFINITY || need + pinned <= rl.rlim_cur ||
	    has_cap_ipc_lock())
		return 0;
	return memlock_error(need, pinned, &rl);
}

/* The device named p->ibdev in list, or NULL. */
static struct ibv_device *find_device(const struct rdmad_profile *p,
				      struct ibv_device **list, int n)
{
	int i;

	for (i = 0; list && i < n; i++)
		if (streq(ibv_get_device_name(list[i]), p->ibdev))
			return list[i];
	return NULL;
}

static int open_device(struct rdmad_profile *p)
{
	struct ibv_device **list = TAKE_PTR(p->devs), *dev;
	int n = p->n_devs, err;

	/* Listed before the daemon named the device: one that came
	 * since is not in it. */
	dev = find_device(p, list, n);
	if (!dev && list) {
		ibv_free_device_list(list);
		list = NULL;
	}
	if (!list) {
		errno = 0;
		list = ibv_get_device_list(&n);
		if (!list) {
			err = errno ? errno : ENODEV;
			/* ENOSYS: no RDMA in this kernel, so no such
			 * device. */
			return client_set_error(err == ENOSYS ? ENODEV : err,
						"RDMA device %s not found: "
						"cannot list RDMA devices: %s",
						p->ibdev, strerror(err));
		}
		dev = find_device(p, list, n);
	}
	if (!dev) {
		ibv_free_device_list(list);
		return client_set_error(ENODEV,
					"RDMA device %s not found in this "
					"process (%d devices seen)",
					p->ibdev, n);
	}
	errno = 0;
	p->ctx = ibv_open_device(dev);
	err = errno ? errno : EIO;
	ibv_free_device_list(list);
	if (!p->ctx)
		return client_set_error(err, "cannot open %s: %s", p->ibdev,
					strerror(err));
	return 0;
}

/* MRs per REPORT: one frame holds a few hundred of them (about 100
 * bytes each); a longer list goes in parts, each after the first with
 * "append" (PROTOCOL.md, REPORT). */
#define REPORT_MRS_PER_PART 256

/* One REPORT of MRs [first, first + n). */
static int report_part(struct rdmad_profile *p, size_t first, size_t n)
{
	struct proto_msg req;
	json_t *mrs = json_array();
	int r;

	for (size_t i = first; mrs && i < first + n; i++) {
		const struct client_mr *mr = &p->mr[i];

		if (json_array_append_new(
			mrs,
			json_pack("{s:s, s:I, s:I, s:I, s:I}", "name", mr->name,
				  "lkey", (json_int_t)mr->mr->lkey, "rkey",
				  (json_int_t)mr->mr->rkey, "iova",
				  (json_int_t)mr->iova, "length",
				  (json_int_t)mr->length)) < 0) {
			json_decref(mrs);
			mrs = NULL;
		}
	}
	r = client_request_msg(&req, PROTO_REPORT,
			       mrs ? json_pack("{s:I, s:o, s:b}", "attachment",
					       (json_int_t)p->attachment, "mr",
					       mrs, "append", first > 0)
			           : NULL);
	if (r < 0)
		return r;
	r = client_conn_send(p->conn, &req);
	proto_msg_clear(&req);
	return r;
}

/*
 * Tell the daemon the keys of this process's MRs. The answers are not
 * waited for: they carry nothing this process needs, and are read with
 * the next request's (conn_settle_one()).
 */
static int report(struct rdmad_profile *p)
{
	size_t first = 0;
	int r;

	do {
		size_t n = p->n_mr - first < REPORT_MRS_PER_PART
				   ? p->n_mr - first
				   : REPORT_MRS_PER_PART;

		r = report_part(p, first, n);
		first += n;
	} while (r >= 0 && first < p->n_mr);
	return r;
}

static int setup_local(struct rdmad_profile *p)
{
	size_t i;
	int r, err;

	r = memlock_check(p);
	if (r < 0)
		return r;
	r = map_memory(p);
	if (r < 0)
		return r;
	r = open_device(p);
	if (r < 0)
		return r;
	for (i = 0; i < p->n_pd; i++) {
		struct client_pd *pd = &p->pd[i];

		errno = 0;
		pd->pd = ibv_alloc_pd(p->ctx);
		if (!pd->pd) {
			err = errno ? errno : EIO;
			return client_set_error(err,
						"cannot allocate pd '%s' on "
						"%s: %s",
						pd->name, p->ibdev,
						strerror(err));
		}
	}
	for (i = 0; i < p->n_mr; i++) {
		struct client_mr *mr = &p->mr[i];

		/* The daemon's IOVA (0 when zero-based): one address
		 * serves both registrations. */
		errno = 0;
		mr->mr = ibv_reg_mr_iova(p->pd[mr->pd].pd, client_mr_addr(p, mr),
					 mr->length, mr->iova,
					 mr->access | (mr->odp ? IBV_ACCESS_ON_DEMAND
							       : 0));
		if (!mr->mr) {
			err = errno ? errno : EIO;
			if (err == ENOMEM && (r = memlock_explain(p, i)) < 0)
				return r;
			return client_set_error(err,
						"cannot register mr '%s' (%llu "
						"bytes) on %s: %s",
						mr->name,
						(unsigned long long)mr->length,
						p->ibdev, strerror(err));
		}
	}
	return report(p);
}

/* Undo what setup did, in reverse; the first error is returned. */
static int profile_teardown(struct rdmad_profile *p)
{
	bool shared = p->mode == RDMAD_MODE_SHARED;
	size_t i;
	int r = 0, e;

	for (i = 0; i < p->n_xrcd; i++) {
		if (p->xrcd[i].xrcd)
			ibv_close_xrcd(p->xrcd[i].xrcd);
		p->xrcd[i].xrcd = NULL;
	}
	/* Ours in either mode, on the profile's PD: before it goes. */
	for (i = 0; i < p->n_imr; i++) {
		if (p->imr[i].mr) {
			e = ibv_dereg_mr(p->imr[i].mr);
			if (e && !r)
				r = client_set_error(e,
						     "cannot deregister mr "
						     "'%s': %s",
						     p->imr[i].name,
						     strerror(e));
		}
		p->imr[i].mr = NULL;
	}
	/* Imported (shared mode only): the daemon's to destroy. */
	for (i = 0; i < p->n_dm_mr; i++) {
		if (p->dm_mr[i].mr)
			ibv_unimport_mr(p->dm_mr[i].mr);
		p->dm_mr[i].mr = NULL;
	}
	for (i = 0; i < p->n_dm; i++) {
		if (p->dm[i].dm)
			ibv_unimport_dm(p->dm[i].dm);
		p->dm[i].dm = NULL;
	}
	client_table_mrs_free(p);
	for (i = p->n_mr; i-- > 0;) {
		struct client_mr *mr = &p->mr[i];

		if (!mr->mr)
			continue;
		if (shared) {
			ibv_unimport_mr(mr->mr);
		} else {
			e = ibv_dereg_mr(mr->mr);
			if (e && !r)
				r = client_set_error(e,
						     "cannot deregister mr "
						     "'%s': %s",
						     mr->name, strerror(e));
		}
		mr->mr = NULL;
	}
	for (i = p->n_pd; i-- > 0;) {
		struct client_pd *pd = &p->pd[i];

		if (!pd->pd)
			continue;
		if (shared) {
			ibv_unimport_pd(pd->pd);
		} else {
			e = ibv_dealloc_pd(pd->pd);
			if (e && !r)
				r = client_set_error(
				    e,
				    "cannot deallocate pd '%s' "
				    "(objects still on it?): %s",
				    pd->name, strerror(e));
		}
		pd->pd = NULL;
	}
	if (p->ctx) {
		e = ibv_close_device(p->ctx);
		if (e && !r)
			r = client_set_error(errno, "cannot close %s: %s",
					     p->ibdev, strerror(errno));
		p->ctx = NULL;
	}
	for (i = 0; i < p->n_mem; i++) {
		struct client_memory *mem = &p->mem[i];

		/* Not read from the table yet: at most its fd to close. */
		if (!mem->read) {
			closep(&mem->fd);
			continue;
		}
		if (mem->addr != MAP_FAILED)
			munmap(mem->addr, mem->size);
		mem->addr = MAP_FAILED;
		closep(&mem->fd);
	}
	closep(&p->cmd_fd);
	return r;
}

/* Tell the daemon the attachment is over; detach_await() reads its
 * answer, with id. */
static int detach_send(struct rdmad_profile *p, uint32_t *id)
{
	struct proto_msg req;
	int r;

	r = client_request_msg(
	    &req, PROTO_DETACH,
	    json_pack("{s:I}", "attachment", (json_int_t)p->attachment));
	if (r == 0)
		r = client_conn_send(p->conn, &req);
	*id = req.id;
	proto_msg_clear(&req);
	p->granted = false;
	return r;
}

static int detach_await(struct rdmad_profile *p, uint32_t id)
{
	struct proto_msg ans;
	int r;

	proto_msg_init(&ans);
	r = client_conn_set_timeout(p->conn, CLIENT_TIMEOUT_MS);
	if (r == 0)
		r = client_conn_await(p->conn, id, "DETACH", &ans);
	proto_msg_clear(&ans);
	return r;
}

static int send_detach(struct rdmad_profile *p)
{
	uint32_t id;
	int r = detach_send(p, &id);

	return r < 0 ? r : detach_await(p, id);
}

static void profile_unlink(struct rdmad_profile *p)
{
	struct rdmad_profile **pp;

	/* Events set aside about p stay, without it. */
	for (struct client_event *e = p->conn->events; e; e = e->next)
		if (e->profile == p)
			e->profile = NULL;

	for (pp = &p->conn->profiles; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
}

/* A failed attach: undo everything, keeping the error that made it fail. */
static void profile_abort(struct rdmad_profile *p)
{
	char saved[sizeof(client_last_error)];

	memcpy(saved, client_last_error, sizeof(saved));
	profile_teardown(p);
	if (p->granted && !p->conn->broken)
		send_detach(p);
	memcpy(client_last_error, saved, sizeof(saved));
	client_profile_free(p);
}

int rdmad_set_attach_timeout(struct rdmad *c, int timeout_ms)
{
	if (!c)
		return client_set_error(EINVAL, "rdmad_set_attach_timeout: no "
						"connection");
	c->attach_wait_ms = timeout_ms < 0 ? -1 : timeout_ms;
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The most memories a profile may have for their fds to come with a
 * shared attach (more: each memory's fd is asked for when first mapped):
 * an fd more in an attach costs about 1 us, a MAP a round trip to rdmad
 * (tens of us), so a few MAPs saved pay for a hundred fds. */
#define MEMORY_FDS_DEFAULT 128

/* RDMAD_MEMORY_FDS (librdmad(3)) if it is a number, else the default;
 * at most a quarter of what this process may open (RLIMIT_NOFILE), so
 * that the fds never fail an attach that would work without them. */
static long memory_fds_max(void)
{
	const char *e = secure_getenv("RDMAD_MEMORY_FDS");
	struct rlimit rl;
	char *end;
	long v = MEMORY_FDS_DEFAULT;

	if (e && *e) {
		errno = 0;
		v = strtol(e, &end, 10);
		if (*end || errno || v < 0 || v > PROTO_MAX_MESSAGE_FDS)
			v = MEMORY_FDS_DEFAULT;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)v > rl.rlim_cur / 4)
		v = (long)(rl.rlim_cur / 4);
	return v;
}

/*
 * ATTACH, and its answer. wait_ms: 0 the daemon answers at once; > 0 it
 * may hold the answer that long for a profile that is not ready yet;
 * -1 as long as it takes. The answer is awaited for that, plus the
 * usual time. list_devices: list the RDMA devices into p meanwhile.
 */
static int ask_attach(struct rdmad_profile *p, const char *mode, int wait_ms,
		      bool list_devices, bool map, struct proto_msg *ans)
{
	struct rdmad *c = p->conn;
	struct proto_msg req;
	int timeout = CLIENT_TIMEOUT_MS;
	int64_t t0 = 0;
	uint32_t id;
	json_t *doc;
	int r;

	proto_msg_init(ans);
	/* In shared mode, the MRs and the memories in a table we read
	 * when asked for one (proto/mr_table.h), not in the message; the
	 * memories' fds with it if there are few (memory_fds_max()), else
	 * each asked for (MAP) when first mapped. With RDMAD_ATTACH_MAP,
	 * the memories listed with their fds, all mapped before the
	 * attach returns. */
	doc = json_pack("{s:s, s:s, s:b, s:o, s:b}", "profile", p->name, "mode",
			mode, "mr_table", 1, "memory_fds",
			map ? json_true() : json_integer(memory_fds_max()),
			"memory_table", !map);
	if (doc && wait_ms &&
	    json_object_set_new(doc, "wait_ms", json_integer(wait_ms)) < 0) {
		json_decref(doc);
		doc = NULL;
	}
	r = client_request_msg(&req, PROTO_ATTACH, doc);
	if (r < 0)
		return r;
	if (wait_ms < 0)
		timeout = 0;
	else if (wait_ms > INT_MAX - CLIENT_TIMEOUT_MS)
		timeout = INT_MAX;
	else
		timeout += wait_ms;
	if (wait_ms > 0)
		t0 = now_ms();
	r = client_conn_send(c, &req);
	id = req.id;
	proto_msg_clear(&req);
	if (r == 0)
		r = client_conn_set_timeout(c, timeout);
	if (r < 0)
		return r;
	/* The device list is the slowest step of local mode (a netlink
	 * and sysfs walk) and needs nothing from the answer: take it
	 * while the daemon works. A failure here is met again later. */
	if (list_devices)
		p->devs = ibv_get_device_list(&p->n_devs);
	r = client_conn_await(c, id, "ATTACH", ans);
	/* not_ready once the whole wait has passed: the daemon gave up
	 * waiting (its message says so), the profile did not fail. */
	if (r == -EAGAIN && wait_ms > 0 && now_ms() - t0 >= wait_ms)
		r = -ETIMEDOUT;
	return r;
}

struct rdmad_profile *rdmad_attach(struct rdmad *c, const char *profile,
				   unsigned int flags)
{
	static const unsigned int modes =
	    RDMAD_ATTACH_SHARED | RDMAD_ATTACH_LOCAL;
	struct rdmad_profile *p;
	struct proto_msg ans;
	const char *mode;
	int wait_ms, r;

	/* A container given a profile through CDI has its name here. */
	if (!profile)
		profile = secure_getenv("RDMAD_PROFILE");
	if (!c || !profile || !*profile) {
		errno = -client_set_error(EINVAL, "rdmad_attach: no connection "
						  "or no profile name (nor "
						  "$RDMAD_PROFILE)");
		return NULL;
	}
	if ((flags & ~(modes | RDMAD_ATTACH_WAIT | RDMAD_ATTACH_MAP)) ||
	    (flags & modes) == modes) {
		errno = -client_set_error(EINVAL,
					  "rdmad_attach: flags 0x%x: at most "
					  "one of RDMAD_ATTACH_SHARED and "
					  "RDMAD_ATTACH_LOCAL, and "
					  "RDMAD_ATTACH_WAIT, RDMAD_ATTACH_MAP",
					  flags);
		return NULL;
	}
	mode = flags & RDMAD_ATTACH_SHARED  ? "shared"
	       : flags & RDMAD_ATTACH_LOCAL ? "local"
					    : "auto";

	/* Before asking: a granted attachment must always have a home. */
	p = calloc(1, sizeof(*p));
	if (p) {
		p->conn = c;
		p->cmd_fd = -1;
		p->name = strdup(profile);
	}
	if (!p || !p->name) {
		client_profile_free(p);
		errno = -client_set_error(ENOMEM, "out of memory");
		return NULL;
	}
	wait_ms = flags & RDMAD_ATTACH_WAIT ? c->attach_wait_ms : 0;
	/* Local mode expected (asked, or what the daemon chose last time
	 * on this connection) and a prompt answer: list the devices while
	 * waiting for it. */
	r = ask_attach(p, mode, wait_ms,
		       !wait_ms &&
			   ((flags & RDMAD_ATTACH_LOCAL) ||
			    (!(flags & RDMAD_ATTACH_SHARED) && c->local_seen)),
		       flags & RDMAD_ATTACH_MAP, &ans);
	if (r < 0) {
		client_profile_free(p);
		errno = -r;
		return NULL;
	}

	r = client_parse_attached(p, &ans, flags);
	proto_msg_clear(&ans); /* closes the fds nothing refers to */
	if (p->mode)
		c->local_seen = p->mode == RDMAD_MODE_LOCAL;
	if (p->devs && p->mode != RDMAD_MODE_LOCAL) {
		ibv_free_device_list(p->devs);
		p->devs = NULL;
	}
	if (r == 0)
		r = p->mode == RDMAD_MODE_SHARED ? setup_shared(p)
						 : setup_local(p);
	if (r == 0 && p->mode == RDMAD_MODE_SHARED &&
	    (flags & RDMAD_ATTACH_MAP))
		r = map_memory(p);
	if (r < 0) {
		profile_abort(p);
		errno = -r;
		return NULL;
	}
	p->next = c->profiles;
	c->profiles = p;
	return p;
}

int rdmad_detach(struct rdmad_profile *p)
{
	bool sent = false;
	uint32_t id = 0;
	int r, d = 0;

	if (!p)
		return client_set_error(EINVAL, "rdmad_detach: no profile");
	if (p->granted) {
		if (p->conn->gone)
			d = 0; /* its lease ended with the session */
		else if (p->conn->broken)
			d = client_set_error(ENOTCONN,
					     "profile '%s' detached here; the "
					     "daemon keeps its lease until the "
					     "connection closes (it failed "
					     "earlier)",
					     p->name);
		else
			sent = (d = detach_send(p, &id)) == 0;
	}
	/* The daemon ends its lease while this process releases its own
	 * objects; nothing of the one depends on the other. Its answer is
	 * not waited for: it says nothing a caller could act on (a DETACH
	 * of an attachment the session holds cannot fail), and is read
	 * with the connection's next call, as a request sent ahead
	 * (librdmad_conn.c); the session's end would release the same. */
	r = profile_teardown(p);
	/* The daemon went away meanwhile: the lease is over all the same. */
	if (!sent && d == -ECONNRESET && p->conn->gone)
		d = 0;
	profile_unlink(p);
	client_profile_free(p);
	return r < 0 ? r : d;
}

void rdmad_close(struct rdmad *c)
{
	int saved = errno;

	if (!c)
		return;
	while (c->profiles)
		rdmad_detach(c->profiles);
	client_conn_free(c);
	errno = saved;
}
