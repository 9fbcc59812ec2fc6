/* SPDX-License-Identifier: MIT */
/*
 * The control socket's parts, for its files only. Calls go one way,
 * down this list; no file calls one above it:
 *
 *   control.c          the face: the socket, admission, sessions and
 *                      their messages, start and stop
 *   control_psock.c    the per-profile sockets, made and removed with
 *                      the profiles; what they accept goes to control.c
 *                      through the callback it gave control_psocks_start()
 *   control_attach.c   ATTACH, DETACH, REPORT and what attachments hear;
 *                      ends a session through the callback control.c
 *                      gave control_attach_start()
 *   control_request.c  REQUEST, and the REPLYs it caches
 *   control_stream.c   the event stream of a session
 *   control_peer.c     who a session's peer is, and sending to it
 */
#ifndef RDMAD_CONTROL_INTERNAL_H
#define RDMAD_CONTROL_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <uthash.h>

#include "api.h"
#include "budget.h"
#include "events.h"
#include "manager.h"

struct control;

/* One object a session holds: by incarnation, since a reload may put
 * another object under the same name. */
struct lease {
	enum obj_kind kind;
	char *name;
	uint64_t serial;
};

/*
 * What the attaches of a profile in one mode share while its attach
 * generation holds: the objects they lease (the engine counts the
 * attachments holding the generation's list once: attach_view_lease()),
 * their names (for a release one by one after the generation moved) and
 * their text for the lease record, made once, so that an attach costs
 * the same for 10,000 objects as for one. An object stays while an
 * attachment holds it; it goes when the last lets go.
 */
struct lease_set {
	unsigned int refs; /* the attachments holding it */
	/* Its name in the lease record (restore.h: a lease set of version
	 * 2), unique across runs. */
	uint64_t id;
	struct lease *leases;
	size_t n_leases;
	/* The view's mode and generation: while the profile's attach
	 * generation is still the set's, released in one count. */
	unsigned int mode;
	uint64_t generation;
	/* As the lease record writes them. */
	char *text;
	size_t len;
	/* The attach cache's pointer to it, cleared when it goes (NULL:
	 * the cache has let it go first). */
	struct lease_set **slot;
	/* Where the memories are in leases, for MAP. */
	size_t *memories;
	size_t n_memories;
};

struct attachment {
	uint32_t id;
	char *profile;
	bool shared;
	/* What the attach handed out (NULL: nothing leased). */
	struct lease_set *set;
	/* It took over what the previous run's adoption of this process
	 * held (ATTACH "resume"). */
	bool resumed;
	/* Its own leases beyond the set: those of the previous run it
	 * took over (ATTACH "resume"). */
	struct lease *leases;
	size_t n_leases;
	/* Shared: its own leases as the lease record writes them (rendered
	 * when they are taken), NULL: none. */
	char *lease_text;
	size_t lease_len;
	json_t *report; /* local mode: the client's keys */
};
/* a's lease_text, made again from its leases (after it took some). */
void attachment_render(struct control *c, struct attachment *a);
/* control_leases.c */
/* The lease set of the attaches of slot's generation, taken by one more
 * attachment: the one in *slot, or a new one made from v (its objects
 * leased on the way) and put there. NULL when out of memory. */
struct attach_view;
struct lease_set *lease_set_get(struct profile *p, struct lease_set **slot,
			       const struct attach_view *v,
			       uint64_t generation);
/* The attach cache lets set go: freed now if nobody holds it, else when
 * the last holder lets go. */
void lease_set_forget(struct lease_set *set);
void lease_set_free(struct lease_set *set);
/* The lease record's text of leases (manager_lease_put()); NULL: none,
 * or out of memory. */
char *leases_render(struct profile *p, const struct lease *l, size_t n,
		    size_t *len);
/* a's lease on the memory of that name (its own, taken over from the
 * previous run, first: what it was given then), or NULL. */
const struct lease *attachment_memory(const struct attachment *a,
				      const char *name);
/* Whether a holds that object (its set's or its own lease). */
bool attachment_holds(const struct attachment *a, enum obj_kind kind,
		      const char *name);
/* How many objects a holds. */
size_t attachment_n_leases(const struct attachment *a);

/* An ATTACH that waits for its profile to be ready ("wait_ms"). */
struct waiter {
	struct waiter *next;
	struct session *s;
	uint32_t id;
	json_t *req;
	sd_event_source *timer; /* NULL: waits as long as it takes */
};

#define CONTROL_MAX_WAITS_PER_SESSION 16
/* What REPORTs of one attachment may list, all parts together: a bound
 * on what a client makes the daemon keep, far above a profile's MRs. */
#define CONTROL_MAX_REPORT_MRS (1 << 17)

/*
 * A REPLY rendered once, for a document that changes only when the
 * engine says so (api_cacheable): later REQUESTs for it get the same
 * bytes, the header's id changed (what http.c's cache does for REST).
 */
struct cached_reply {
	char *path;
	uint64_t generation;
	uint8_t *frame;
	size_t len;
	UT_hash_handle hh;
	/* The payload of the last REQUEST answered with it: the same bytes
	 * again are the same request, answered without decoding them. */
	uint8_t *request;
	size_t request_len;
	UT_hash_handle hh_request;
};

/* Profiles come and go: a bound, not an eviction policy. */
#define CONTROL_MAX_CACHED 64

/* A REQUEST whose answer comes later (api.h: POST /v1/reload). */
struct later {
	struct api_later later;
	struct later *next;
	struct session *s;
	uint32_t id;
};

/* A message the socket did not take at once: its payload and fds (dups,
 * the queue's own), and the next of its frames to send. */
struct outmsg {
	struct outmsg *next;
	uint16_t type;
	uint32_t id;
	char *payload;
	size_t len;
	int *fds;
	size_t n_fds;
	size_t frame, n_frames;
};

/*
 * A session's output: what the socket does not take at once waits here
 * and goes out as it drains (src, EPOLLOUT on a dup of the session's
 * fd, as the event stream's: the fd itself is in an epoll set already).
 * Nothing passes what waits, so that the frames of one message are
 * never split by another message. Bounded: past CONTROL_OUT_MAX_BYTES,
 * or past the uid's or all sessions' budget (daemon.output_budget_per_uid,
 * daemon.output_budget), an EVENT is dropped, and any other message ends
 * the session.
 */
struct session_out {
	struct outmsg *head, *tail;
	size_t bytes;
	int fd; /* -1 until a message waits */
	sd_event_source *src;
};

/* Above any one message (PROTO_MAX_MESSAGE), which is taken whole if
 * nothing waits: the bound is on what piles up behind it. */
#define CONTROL_OUT_MAX_BYTES (8u * 1024 * 1024)
/* Past this much waiting at once, the heap is trimmed when it is all
 * gone (sessions_out_trim()). */
#define CONTROL_TRIM_BYTES (4u * 1024 * 1024)

struct session {
	struct control *c;
	struct session *next;
	unsigned int id;
	unsigned int waits;
	int fd;
	/* A new session's own source, while its first messages go first
	 * (boost); then NULL, and fd is in the control's epoll set. */
	sd_event_source *io;
	sd_event_source *hello_timer; /* until HELLO is answered */
	uint64_t last_active;	      /* CLOCK_MONOTONIC usec */
	unsigned int boost;	      /* first messages, served first */
	struct ucred cred;
	/* The peer's start time (restore_start_time()), read once, when
	 * its leases are first written down (0: unknown). */
	unsigned long long start;
	bool start_read;
	gid_t *groups; /* supplementary, at connect time */
	size_t n_groups;
	/* Accepted on this profile's own socket (control_psock.c): it sees
	 * and attaches that profile only, and is never admin. NULL: the
	 * main socket. */
	char *scope;
	bool admin;
	bool welcomed;
	struct attachment *att;
	size_t n_att;
	struct subscription *sub; /* REQUEST GET /v1/events */
	struct later *laters;	  /* REQUESTs answered later */
	/* The version WELCOME chose (1 before): how messages are framed. */
	uint16_t version;
	struct session_out out;
};

/*
 * A session's subscription to the event stream: each event goes out as
 * an EVENT carrying the subscribing REQUEST's id. What the socket does
 * not take at once waits in a bounded queue, sent as the socket drains
 * (out, on a dup of the session's fd: the fd itself is in an epoll set
 * already); a session that lets the queue fill is dropped from the
 * stream with a last "overflow" event.
 */
struct subscription {
	struct session *s;
	uint32_t id;
	int out_fd;
	sd_event_source *out;
	struct events_queue q;
};


struct control {
	struct manager *m;
	struct waiter *waiters;
	unsigned long long attaches, attach_failures;
	unsigned long long attach_buckets[SESSION_ATTACH_BUCKETS];
	double attach_seconds;
	int fd;
	bool passed; /* by systemd (rdmad.socket) */
	char *path;
	sd_event_source *io;
	struct accept_pause pause;
	struct front_caps caps;
	unsigned int n_sessions;
	struct uid_count *uids; /* sessions per uid */
	/* What waits in the sessions' output queues, bytes, and its peak
	 * since the heap was last trimmed. */
	size_t out_bytes, out_peak;
	unsigned long long refused, evicted, timed_out;
	/* The sessions at work, in an epoll set of their own: one wake-up
	 * of the loop serves every one that has something to read
	 * (on_sessions). */
	int ep;
	sd_event_source *sessions_io;
	struct epoll_event *ready; /* while on_sessions serves them */
	int n_ready;
	uint8_t *frame; /* PROTO_RECV_BYTES: every message is read here */
	struct cached_reply *cache;
	struct cached_reply *cache_by_request; /* by their request's bytes */
	struct attach_cache *attach_cache;	/* by "profile/mode" */
	struct session *sessions;
	unsigned int next_session, next_attachment;
	struct control_psocks *psocks; /* the per-profile sockets */
};

extern const double control_attach_bucket_le[SESSION_ATTACH_BUCKETS];

/* control_psock.c */
/* Keep one socket per profile of c's manager, from now on (start, and
 * after each reload), each accepted connection admitted as the control
 * socket's are (control_accept_one(), scope: the profile). */
int control_psocks_start(struct control *c);
/* Stop listening; the sockets go, their directories stay (containers
 * bind them: the next run's socket appears in the same directory). */
void control_psocks_stop(struct control *c);
/* daemon.control_group (a name or a number) as a gid. */
int control_group_gid(const char *name, gid_t *gid);

/* control_peer.c */
/* The peer's groups, from the kernel (SO_PEERGROUPS): what the process
 * holds, with no directory lookup. */
int session_read_groups(struct session *s);
bool session_in_group(const struct session *s, gid_t gid);
/* Whether s may attach to p (the profile's admit lists). */
bool session_allowed(const struct profile *p, const struct session *s);
/*
 * Send a message of type and id, its payload the concatenation of parts,
 * with fds: in one frame, or (version 2) as many as it takes. What the
 * socket does not take at once waits in s->out (the fds duplicated).
 * 0: sent or on its way. -EMSGSIZE: it does not fit one frame and the
 * session speaks version 1, or it is over the protocol's caps (nothing
 * sent). -EAGAIN: an EVENT dropped (the socket or the queue full).
 * Else the session is over (-ENOBUFS: its queue is over its bound).
 */
int session_send_message(struct session *s, uint16_t type, uint32_t id,
			 const struct iovec *parts, size_t n_parts,
			 const int *fds, size_t n_fds);
/* A dup of s's fd in *fd and an EPOLLOUT source on it, disabled: a
 * writer that waits for the socket to drain. */
int session_out_source(struct session *s, int *fd, sd_event_source **es,
		       sd_event_io_handler_t handler, void *ud);
/* Forget what waits to be sent (the session ends). */
void session_out_clear(struct session *s);
/* Once nothing waits for any session, the heap is trimmed if much did
 * (CONTROL_TRIM_BYTES). */
void sessions_out_trim(struct control *c);
int session_send_json(struct session *s, uint16_t type, uint32_t id,
		      json_t *payload, const int *fds, size_t n_fds);
int session_send_text(struct session *s, uint16_t type, uint32_t id,
		      const void *payload, size_t len);
int session_send_error(struct session *s, uint32_t id, const char *code,
		       const char *fmt, ...) _printf_(4, 5);

/* control_attach.c: each answers one message; a negative errno ends the
 * session. */
int control_attach(struct session *s, uint32_t id, json_t *req);
int control_detach(struct session *s, uint32_t id, json_t *req);
int control_report(struct session *s, uint32_t id, json_t *req);
int control_made(struct session *s, uint32_t id, json_t *req);
void attachment_release(struct control *c, struct attachment *a);
/* The session's attachment that req's "attachment" names, or NULL. */
struct attachment *session_attachment(struct session *s, const json_t *req);
/* control_map.c */
int control_map(struct session *s, uint32_t id, json_t *req);
void session_publish(struct session *s, const struct attachment *a,
		     enum event_kind what, const char *reason);
/* control.c: a session ends (its attachments released); a connection
 * accepted is admitted, on the control socket (scope NULL) or on a
 * profile's own. */
void session_free(struct session *s);
void control_accept_one(struct control *c, int cfd, const char *scope);
/* Forget the ATTACHes of s that wait. */
void control_waiters_drop(struct control *c, struct session *s);
/* Hear the engine (profiles ready, devices lost, reloads' changes). A
 * waiting attach answered once its profile is ready that cannot be sent
 * ends its session. */
int control_attach_start(struct control *c);
void control_attach_stop(struct control *c);
/* The lease sets of profile's shared attaches that the attach cache
 * keeps for the next attach, each to each(ud, id). */
void control_attach_sets(struct control *c, const char *profile,
			 void (*each)(void *ud, uint64_t id), void *ud);

/* control_request.c */
int control_request(struct session *s, uint32_t id, json_t *req,
		    const uint8_t *raw, size_t raw_len);
int control_answer_again(struct session *s, const uint8_t *frame, size_t len,
			 size_t n_fds);
void control_laters_drop(struct session *s);
void control_cache_clear(struct control *c);

/* control_stream.c */
int control_subscribe(struct session *s, uint32_t id);
void subscription_free(struct subscription *sub);
#endif
