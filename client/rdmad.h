/* SPDX-License-Identifier: MIT */
/*
 * librdmad: the client library of rdmad (see librdmad(3)).
 *
 * A process connects to the daemon's unix socket, attaches to a profile
 * and gets the profile's verbs objects: imported from the daemon's own
 * context (shared mode) or registered by this process over the same
 * memory (local mode).
 *
 * Conventions: calls returning a pointer return NULL and set errno on
 * failure; calls returning int return 0 or a negative errno. Either way
 * rdmad_last_error() then says what went wrong, in this thread. A call
 * on a connection the daemon closed (it stopped or restarted) fails with
 * ECONNRESET: rdmad_reconnect().
 *
 * Threads: a struct rdmad, and the profiles attached through it, may be
 * used by one thread at a time (lock around them to share them). Calls
 * on different connections may run in parallel. The last error is per
 * thread.
 */
#ifndef RDMAD_H
#define RDMAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* From <infiniband/verbs.h>, which callers include to use them. */
struct ibv_context;
struct ibv_pd;
struct ibv_mr;
struct ibv_xrcd;
struct ibv_cq;
struct ibv_srq;
struct ibv_comp_channel;
struct ibv_qp_init_attr;
struct ibv_srq_init_attr;

/* A connection to rdmad. */
struct rdmad;
/* One attachment to a profile, and the objects it gives. */
struct rdmad_profile;

/* Where rdmad_connect(NULL) connects, unless $RDMAD_SOCKET is set. */
#define RDMAD_DEFAULT_SOCKET "/run/rdmad/rdmad.sock"

/* rdmad_attach() flags: at most one of SHARED and LOCAL, and WAIT. */
enum {
	/* Shared when the device can import, else local: the daemon picks. */
	RDMAD_ATTACH_AUTO = 0,
	/* Import the daemon's context, PDs and MRs; fail if impossible. */
	RDMAD_ATTACH_SHARED = 1 << 0,
	/* Open the device and register the same memory in this process. */
	RDMAD_ATTACH_LOCAL = 1 << 1,
	/*
	 * A profile that is not ready yet (its objects are still being
	 * created): wait until it is, it fails, or the attach timeout
	 * (rdmad_set_attach_timeout(), 30 s by default) passes, instead of
	 * failing with EAGAIN at once.
	 */
	RDMAD_ATTACH_WAIT = 1 << 2,
	/*
	 * Shared mode: map every memory of the profile before the attach
	 * returns (their fds come with the daemon's answer), so that the
	 * first rdmad_mr() of an MR is one import, with no round trip to
	 * the daemon. The attach then costs an fd and a mapping per memory
	 * of the profile. Local mode maps them all anyway.
	 */
	RDMAD_ATTACH_MAP = 1 << 3,
};

enum rdmad_mode {
	RDMAD_MODE_SHARED = 1, /* the objects are the daemon's, imported */
	RDMAD_MODE_LOCAL = 2,  /* the objects are this process's own */
};

/*
 * Connect to the daemon at socket_path (NULL: $RDMAD_SOCKET, else
 * RDMAD_DEFAULT_SOCKET) and offer the protocol versions this library
 * speaks. The daemon's answer is read with the first request's: a
 * daemon that refuses the session (no common version, too many
 * sessions) makes that first call fail, with its reason. Every answer
 * is awaited for at most 30 seconds (a waiting attach adds its wait).
 * NULL and errno on failure.
 */
struct rdmad *rdmad_connect(const char *socket_path);

/*
 * Detach every profile still attached through c (the pointers become
 * invalid), then close the connection. NULL is allowed.
 */
void rdmad_close(struct rdmad *c);

/*
 * Attach to profile (NULL: $RDMAD_PROFILE, which a container given a
 * profile through CDI has). Either fully succeeds or leaves nothing behind
 * (no fd, mapping, verbs object or lease). NULL and errno on failure:
 * ENOENT no such profile, EACCES not allowed, EAGAIN profile not ready
 * (or, with RDMAD_ATTACH_WAIT, it failed while waited for), ETIMEDOUT
 * RDMAD_ATTACH_WAIT and still not ready when the timeout passed,
 * EOPNOTSUPP shared mode asked on a device that cannot import, ENOMEM
 * RLIMIT_MEMLOCK too low for local mode, ENODEV device not found, ...
 */
struct rdmad_profile *rdmad_attach(struct rdmad *c, const char *profile,
				   unsigned int flags);

/*
 * How long rdmad_attach() with RDMAD_ATTACH_WAIT waits for a profile
 * that is not ready: timeout_ms milliseconds (30000 until set; 0: not
 * at all, as without the flag), or as long as it takes if negative.
 * The daemon does the waiting; the library waits for its answer that
 * long plus the usual 30 seconds. 0, or -EINVAL for a NULL c.
 */
int rdmad_set_attach_timeout(struct rdmad *c, int timeout_ms);

/*
 * Release the profile's objects in this process (they must no longer be
 * in use: destroy the QPs, CQs, ... created on them first), tell the
 * daemon, and free p. p is freed even when this fails: 0 or -errno.
 * When the daemon has gone (it stopped or restarted: its side of the
 * attachment ended with the session) or after rdmad_reconnect(), only
 * the release here is done, and 0 returned.
 */
int rdmad_detach(struct rdmad_profile *p);

/* RDMAD_MODE_SHARED or RDMAD_MODE_LOCAL; 0 (errno EINVAL) for NULL. */
enum rdmad_mode rdmad_mode(struct rdmad_profile *p);

/* The device context: imported (shared) or opened here (local). */
struct ibv_context *rdmad_context(struct rdmad_profile *p);

/* The profile's port number and GID index, to build QPs and AHs. */
int rdmad_port(struct rdmad_profile *p);
int rdmad_gid_index(struct rdmad_profile *p);

/* A PD or MR by its name in the profile; NULL and ENOENT if none. An
 * MR's addr is its first byte in this process (as rdmad_mr_map). */
struct ibv_pd *rdmad_pd(struct rdmad_profile *p, const char *name);
struct ibv_mr *rdmad_mr(struct rdmad_profile *p, const char *name);

/* The names of the profile's PDs and MRs: i from 0 until NULL. */
const char *rdmad_pd_name(struct rdmad_profile *p, size_t i);
const char *rdmad_mr_name(struct rdmad_profile *p, size_t i);

/* The MR's bytes in this process; *len (if len) gets their count. */
void *rdmad_mr_map(struct rdmad_profile *p, const char *name, size_t *len);

/*
 * The MR's first byte in its IOVA space: the address for work requests
 * with rdmad_mr()'s lkey (both modes register with the daemon's IOVA),
 * and for a remote peer with rdmad_mr_rkey() or rdmad_mr()'s rkey.
 * 0 for a zero-based MR. 0 and errno ENOENT for an unknown name.
 */
uint64_t rdmad_mr_iova(struct rdmad_profile *p, const char *name);

/* The rkey of the daemon's own registration of the MR (the same as
 * rdmad_mr()'s in shared mode). 0 and errno ENOENT if unknown. */
uint32_t rdmad_mr_rkey(struct rdmad_profile *p, const char *name);

/* The XRC domain name of the profile (declared with a file), opened in
 * this process's context from the file descriptor the daemon passed
 * (ibv_open_xrcd): the same domain as the daemon's. Opened on the first
 * call; rdmad_detach() closes it. NULL with errno ENOENT for a name the
 * profile does not share, or ibv_open_xrcd()'s errno (EOPNOTSUPP on a
 * device without XRC, such as rxe). */
struct ibv_xrcd *rdmad_xrcd(struct rdmad_profile *p, const char *name);

/* (RDMAD_0.5) The number of the profile's ready QP name (any type),
 * e.g. what a remote sender names; 0 with errno ENOENT if unknown. */
uint32_t rdmad_qp_num(struct rdmad_profile *p, const char *name);
/* (RDMAD_0.5) The srq_num of the profile's XRC SRQ name (what XRC
 * senders name); 0 with errno ENOENT if unknown, EINVAL for an SRQ that
 * is not XRC. */
uint32_t rdmad_srq_num(struct rdmad_profile *p, const char *name);
/* (RDMAD_0.5) Open the daemon's XRC target QP name (xrc_recv) in this
 * process, in its XRC domain (rdmad_xrcd()): ibv_open_qp(). The caller
 * destroys it (ibv_destroy_qp) before rdmad_detach(). NULL with errno:
 * ENOENT, EINVAL (not an XRC target QP), or what opening failed with. */
struct ibv_qp *rdmad_open_qp(struct rdmad_profile *p, const char *name);
/* (RDMAD_0.6) The profile's device memory name, imported in this process
 * (ibv_import_dm) when first asked for; the profile unimports it at
 * detach. Shared mode only: device memory is the daemon's context's.
 * Its MRs (declared with dm = "...") are reached with rdmad_mr(); they
 * are zero-based (addresses from 0 into the device memory). NULL with
 * errno: ENOENT (unknown, not ready, or local mode), or what importing
 * failed with (EOPNOTSUPP where the provider cannot import it). */
struct ibv_dm *rdmad_dm(struct rdmad_profile *p, const char *name);

/* ---- events (RDMAD_0.3) ---- */

enum rdmad_event_type {
	/*
	 * The profile's RDMA device went away (removed, or failed). Its
	 * objects are dead: release them (destroy the QPs, CQs, ... made
	 * on them, then rdmad_detach()), and attach again once the device
	 * is back. In local mode this matters beyond this process: some
	 * drivers (rxe) hold the device's removal until every context on
	 * it is closed.
	 */
	RDMAD_EVENT_DEVICE_REMOVED = 1,
	/* A reload of the daemon removed the profile. What the attachment
	 * holds stays until rdmad_detach(). */
	RDMAD_EVENT_PROFILE_REMOVED = 2,
	/*
	 * The daemon closed the connection: it stopped or restarted (or
	 * ended the session). The attachments made through it ended with
	 * it on the daemon's side: rdmad_detach() releases them here and
	 * returns 0. rdmad_reconnect() to go on. The last event of a
	 * connection.
	 */
	RDMAD_EVENT_DAEMON_GONE = 3,
	/* (RDMAD_0.4) An event of the daemon's whole stream, after
	 * rdmad_subscribe(): rdmad_event_json() has it. The last one of a
	 * subscriber too slow to keep up is "overflow". */
	RDMAD_EVENT_STREAM = 4,
	/* (RDMAD_0.4) The port of an attached profile went down / came
	 * back up (device says which; the objects stay). */
	RDMAD_EVENT_PORT_DOWN = 5,
	RDMAD_EVENT_PORT_ACTIVE = 6,
	/* (RDMAD_0.4) A reload removed or changed an object the attachment
	 * holds (reason names it; rdmad_event_json() has its kind and
	 * name): it stays, draining, until rdmad_detach(); attach again
	 * for what the configuration declares now. */
	RDMAD_EVENT_OBJECT_DRAINING = 7,
	/* The daemon went away (it stopped, restarted or
	 * crashed) and came back, and the attachment was taken back in a
	 * new session: what it gave stays valid, its leases held all
	 * along, rdmad_detach() works as before. Sent once per shared
	 * attachment resumed; see rdmad_next_event(). */
	RDMAD_EVENT_RESUMED = 8,
	/* Newer daemons may add types: ignore those you do not know. */
};

struct rdmad_event {
	enum rdmad_event_type type;
	/* The attachment concerned, if it is still attached through this
	 * connection; NULL if not (detached already) or for DAEMON_GONE. */
	struct rdmad_profile *profile;
	/* The strings are valid until the next rdmad_next_event() or
	 * rdmad_close() on the connection. */
	const char *profile_name; /* NULL for DAEMON_GONE */
	const char *device;	  /* DEVICE_REMOVED: e.g. "rxe0"; else NULL */
	const char *reason;	  /* a sentence, or "" */
};

/*
 * The connection's file descriptor, to poll(2) for POLLIN next to the
 * program's own: it is readable when the daemon has sent an event or
 * closed the connection. Read nothing from it: call rdmad_next_event().
 * Other calls on c may set events aside as they read answers, which
 * poll() then does not see: call rdmad_next_event() until it returns 0
 * before polling again. rdmad_reconnect() changes the descriptor.
 */
int rdmad_fd(struct rdmad *c);

/*
 * Without blocking: 1 and the oldest event in *ev, or 0 if there is
 * none (now), or a negative errno (a message from the daemon that
 * breaks the protocol: the connection is broken). Events are set aside
 * in the order they came, whichever call read them.
 *
 * When the daemon goes away while shared attachments are granted, the
 * connection resumes by itself: rdmad_fd() stays the same number, now
 * readable when the next try is due (after 0.1 s, then twice as long
 * each time, at most 5 s apart), and each try here connects again and
 * takes each shared attachment back (RDMAD_EVENT_RESUMED); a try may
 * wait for the daemon's answers, as other calls do. An attachment the
 * new daemon does not take back, or a daemon not back within two
 * minutes, gives RDMAD_EVENT_DAEMON_GONE as before. Local-mode
 * attachments do not resume. RDMAD_RESUME=0 in the environment turns
 * this off (DAEMON_GONE at once, as before).
 */
int rdmad_next_event(struct rdmad *c, struct rdmad_event *ev);

/*
 * (RDMAD_0.4) Subscribe c to the daemon's event stream (the events of
 * GET /v1/events: object and profile states, reloads, devices, ports,
 * async events, sessions): each comes as RDMAD_EVENT_STREAM, in order.
 * 0 or -errno (EEXIST: subscribed already).
 */
int rdmad_subscribe(struct rdmad *c);
/* (RDMAD_0.4) The JSON text of the event rdmad_next_event() gave last
 * (one object, as the daemon sent it), valid until the next call on c;
 * NULL for RDMAD_EVENT_DAEMON_GONE or before any. */
const char *rdmad_event_json(struct rdmad *c);

/*
 * Close c's connection and connect again to the same socket (for
 * instance after RDMAD_EVENT_DAEMON_GONE or ECONNRESET: the daemon
 * restarted), keeping c. Profiles attached through c stay usable in
 * this process, but the new session does not hold them: rdmad_detach()
 * them (that releases them here, and returns 0) and attach again.
 * Events not yet read stay to be read. 0 or -errno, as rdmad_connect():
 * on failure c is as it was, and the call may be retried.
 */
int rdmad_reconnect(struct rdmad *c);

/* ---- targets (RDMAD_0.4) ---- */

struct ibv_qp;
struct rdmad_target_conn;

/* A memory window a target granted: RDMA reads and writes to
 * [addr, addr + length) with rkey, as the target declares. */
struct rdmad_target_range {
	uint64_t addr;
	uint32_t rkey;
	uint64_t length;
};

/*
 * Connect qp, an RC QP of the caller's in state RESET (on the attached
 * context, or any context of the device the route to address leaves
 * from), to the rdmad target at address ("192.0.2.1:7471",
 * "[fd00::1]:7471") over rdma_cm, sending token (token_len bytes, at
 * most 56; NULL and 0 for none). The QP ends in RTS, connected. Returns
 * the number of ranges the target granted (1 to 8; the first max_ranges
 * are written to ranges, in the target's order) and the connection in
 * *conn, or a negative errno with rdmad_last_error() set: -ECONNREFUSED
 * when the target refused (the message carries its reason: address not
 * allowed, wrong token, too many connections), -EXDEV when the route
 * leaves from another device than qp's.
 */
int rdmad_target_connect(struct ibv_qp *qp, const char *address,
			 const void *token, size_t token_len,
			 struct rdmad_target_range *ranges, size_t max_ranges,
			 struct rdmad_target_conn **conn);
/* Disconnect and free conn; the QP stays the caller's (in error). */
void rdmad_target_disconnect(struct rdmad_target_conn *conn);

/*
 * A control request, as the REST API takes it: method "GET", "POST",
 * ...; path "/v1/..."; body_json a JSON object or NULL. On 0, *status
 * (if status) is the HTTP-style status and *reply_json (if reply_json)
 * the reply document as JSON text, to free(). A status >= 400 is still
 * 0: the document says why.
 */
int rdmad_request(struct rdmad *c, const char *method, const char *path,
		  const char *body_json, int *status, char **reply_json);

/* ---- what this process makes in a shared context (RDMAD_0.8) ---- */

/*
 * In shared mode a QP, CQ or SRQ made on rdmad_context() belongs to the
 * daemon's context and outlives this process; the kernel does not say
 * whose it is. Made through these helpers (or handed over with
 * rdmad_made()), the daemon destroys it by handle once this process is
 * gone, however it ends (rdmad(8), Orphans). Destroy one with
 * rdmad_destroy_*() (or rdmad_made() with RDMAD_MADE_UNDO before
 * ibv_destroy_*()): its handle is then free for another process's.
 * NULL / negative errno as the rest; local mode: -EINVAL (what this
 * process makes there dies with it).
 */
enum rdmad_made_kind {
	RDMAD_MADE_QP = 0, /* obj: struct ibv_qp * */
	RDMAD_MADE_CQ = 1, /* obj: struct ibv_cq * */
	RDMAD_MADE_SRQ = 2, /* obj: struct ibv_srq * */
};
#define RDMAD_MADE_UNDO 0x1u /* the object is about to be destroyed */
int rdmad_made(struct rdmad_profile *prof, enum rdmad_made_kind kind,
	       void *obj, unsigned int flags);
struct ibv_cq *rdmad_create_cq(struct rdmad_profile *prof, int cqe,
			       void *cq_context,
			       struct ibv_comp_channel *channel,
			       int comp_vector);
struct ibv_qp *rdmad_create_qp(struct rdmad_profile *prof, struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr);
struct ibv_srq *rdmad_create_srq(struct rdmad_profile *prof,
				 struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr);
int rdmad_destroy_qp(struct rdmad_profile *prof, struct ibv_qp *qp);
int rdmad_destroy_cq(struct rdmad_profile *prof, struct ibv_cq *cq);
int rdmad_destroy_srq(struct rdmad_profile *prof, struct ibv_srq *srq);

/* ---- multicast groups (RDMAD_0.7) ---- */

/* A group the daemon joined for the profile (kind mcast), as ATTACHED
 * described it: what a client needs to attach its own UD QPs
 * (ibv_attach_mcast(qp, mgid, mlid), the QPs' qkey set to qkey) and to
 * send to the group (an AH with these attributes on its own PD: is_global
 * = 1, grh.dgid = mgid; remote_qpn and qkey in each send). */
struct rdmad_mcast {
	uint8_t mgid[16];
	uint16_t mlid;
	uint32_t qkey;
	uint32_t remote_qpn; /* 0xffffff: every QP attached */
	uint8_t port_num, sl, src_path_bits, static_rate;
	uint8_t sgid_index, hop_limit, traffic_class;
	uint32_t flow_label;
	int send_only; /* joined as a send-only member */
};

/*
 * The group name of the attached profile p, into *out: 0, or -errno with
 * rdmad_last_error() set: -ENOENT when p has no such group, or it was
 * not joined when p was attached (it failed, or is being joined again).
 */
int rdmad_mcast(struct rdmad_profile *p, const char *name,
		struct rdmad_mcast *out);

/* The library's version, e.g. "0.1.0". */
const char *rdmad_version(void);

/* A message for a negative (or positive) errno. */
const char *rdmad_strerror(int err);

/* This thread's last detailed error, or "" if none. */
const char *rdmad_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
