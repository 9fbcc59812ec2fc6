// SPDX-License-Identifier: MIT
#include <grp.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "control.h"
#include "control_internal.h"
#include "fdsink.h"
#include "log.h"
#include "proto.h"
#include "restore.h"
#include "sysd.h"

struct uid_count {
	uid_t uid;
	unsigned int n;
	UT_hash_handle hh;
};

/* Who goes first in the loop: new connections, then the first few
 * messages of a new session (HELLO and the first requests: a new client
 * is served however busy the others are), then the sessions at work,
 * in turn. */
#define SESSION_BOOST_MESSAGES 4
#define PRIO_ACCEPT (SD_EVENT_PRIORITY_IMPORTANT)
#define PRIO_NEW_SESSION (SD_EVENT_PRIORITY_NORMAL - 10)
#define PRIO_SESSION (SD_EVENT_PRIORITY_NORMAL)
/* ---- sessions ---- */

static void uid_count_put(struct control *c, uid_t uid)
{
	struct uid_count *u;

	HASH_FIND(hh, c->uids, &uid, sizeof(uid), u);
	if (u && !--u->n) {
		HASH_DEL(c->uids, u);
		free(u);
	}
}

/* End s: its attachments are released, its waits forgotten. */
void session_free(struct session *s)
{
	struct control *c = s->c;

	for (struct session **pp = &c->sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	control_waiters_drop(c, s);
	subscription_free(s->sub);
	control_laters_drop(s);
	for (size_t i = 0; i < s->n_att; i++) {
		session_publish(s, &s->att[i], EV_SESSION_DETACH,
				"session ended");
		attachment_release(c, &s->att[i]);
	}
	if (s->n_att)
		log_info("session %u (pid %d uid %u) ended: %zu attachments "
			 "released",
			 s->id, (int)s->cred.pid, (unsigned int)s->cred.uid,
			 s->n_att);
	free(s->att);
	free(s->groups);
	free(s->scope);
	/* Not to be served after all in the wake-up under way (a request
	 * of another session can end this one: a reload answers waiters). */
	for (int i = 0; i < c->n_ready; i++)
		if (c->ready[i].data.ptr == s)
			c->ready[i].data.ptr = NULL;
	if (s->io)
		sd_event_source_disable_unref(s->io);
	else
		epoll_ctl(c->ep, EPOLL_CTL_DEL, s->fd, NULL);
	sd_event_source_disable_unref(s->hello_timer);
	session_out_clear(s);
	/* Fds it sent may still be queued in it: released with it. */
	fdsink_close(TAKE_FD(s->fd));
	c->n_sessions--;
	uid_count_put(c, s->cred.uid);
	free(s);
}

/* Its first messages served: the session joins the others in the
 * control's epoll set. Should that fail, it keeps its own source, at
 * their priority. */
static void session_settle(struct session *s)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };

	if (epoll_ctl(s->c->ep, EPOLL_CTL_ADD, s->fd, &ev) < 0) {
		sd_event_source_set_priority(s->io, PRIO_SESSION);
		return;
	}
	s->io = sd_event_source_disable_unref(s->io);
}

/* No message of a client carries fds (PROTOCOL.md): the session ends,
 * and they are closed off the loop, whatever they are. */
static int refuse_fds(struct session *s, const uint8_t *frame, size_t len,
		      int *fds, size_t n_fds)
{
	struct proto_msg m;

	proto_drop_fds(fds, n_fds);
	proto_frame_ids(frame, len, &m);
	session_send_error(s, m.id, "bad_message",
			   "the control socket takes no file descriptors "
			   "from clients");
	session_free(s);
	return -1;
}

/* One message of s: 1 when handled, 0 when there was none, -1 when the
 * session ended (s is freed). */
static int session_handle_one(struct session *s)
{
	uint8_t *frame = s->c->frame;
	const uint8_t *raw = NULL;
	int fds[PROTO_MAX_FDS];
	size_t len, n_fds, raw_len = 0;
	struct proto_msg m;
	uint16_t version;
	int r;

	r = proto_recv_frame(s->fd, frame, PROTO_RECV_BYTES, &len, fds,
			     &n_fds);
	if (r == -EAGAIN)
		return 0;
	sd_event_now(manager_loop(s->c->m), CLOCK_MONOTONIC, &s->last_active);
	if (s->boost && !--s->boost)
		session_settle(s);
	if (r == -EPIPE || r == -ECONNRESET) {
		session_free(s);
		return -1;
	}
	if (r == 0 && n_fds)
		return refuse_fds(s, frame, len, fds, n_fds);
	if (r == 0) {
		r = control_answer_again(s, frame, len, n_fds);
		if (r == 1 || r == -EAGAIN)
			return 1;
		if (r < 0) {
			session_free(s);
			return -1;
		}
		raw = proto_frame_payload(frame, len, n_fds, PROTO_REQUEST,
					  &raw_len);
		r = proto_decode_frame(frame, len, fds, n_fds, &m);
	} else {
		proto_frame_ids(frame, len, &m);
	}
	if (r < 0) {
		/* Malformed, oversized, unexpected fds (closed by the codec),
		 * wrong version: say why, then end this session only. */
		struct proto_msg e;

		log_warn(r, "session %u (pid %d uid %u): bad message", s->id,
			 (int)s->cred.pid, (unsigned int)s->cred.uid);
		proto_msg_init(&e);
		/* Not between the frames of a message that waits: the
		 * session ends with it unsent anyway. */
		if (!s->out.head && proto_error(&e, m.id, r) == 0)
			proto_send(s->fd, &e);
		proto_msg_clear(&e);
		proto_msg_clear(&m);
		session_free(s);
		return -1;
	}
	if (!proto_type_allowed(m.type, PROTO_PEER_CLIENT) ||
	    (!s->welcomed && m.type != PROTO_HELLO)) {
		session_send_error(s, m.id, "bad_request", "%s is not expected here",
			   proto_type_name(m.type));
		proto_msg_clear(&m);
		session_free(s);
		return -1;
	}
	switch (m.type) {
	case PROTO_HELLO:
		r = proto_negotiate(m.payload, &version);
		if (r < 0) {
			session_send_error(s, m.id, "unsupported_version",
				   "this daemon speaks protocol versions "
				   "%d to %d",
				   PROTO_VERSION_MIN, PROTO_VERSION_MAX);
			proto_msg_clear(&m);
			session_free(s);
			return -1;
		} else {
			struct proto_msg w;

			proto_msg_init(&w);
			r = proto_welcome(&w, m.id, version, RDMAD_VERSION);
			if (r == 0)
				r = proto_send(s->fd, &w);
			proto_msg_clear(&w);
			s->welcomed = r == 0;
			if (s->welcomed)
				s->version = version;
			if (s->welcomed)
				s->hello_timer = sd_event_source_disable_unref(
					s->hello_timer);
		}
		break;
	case PROTO_ATTACH:
		r = control_attach(s, m.id, m.payload);
		break;
	case PROTO_DETACH:
		r = control_detach(s, m.id, m.payload);
		break;
	case PROTO_REPORT:
		r = control_report(s, m.id, m.payload);
		break;
	case PROTO_MADE:
		r = control_made(s, m.id, m.payload);
		break;
	case PROTO_MAP:
		r = control_map(s, m.id, m.payload);
		break;
	case PROTO_REQUEST:
		r = control_request(s, m.id, m.payload, raw, raw_len);
		break;
	}
	proto_msg_clear(&m);
	if (r < 0 && r != -EAGAIN) {
		session_free(s);
		return -1;
	}
	return 1;
}

/* A few messages per wake-up: a busy client (or pipelined requests) costs
 * fewer trips through the loop, and the other sessions still get their
 * turn. The sockets are level-triggered: what a batch leaves unread
 * wakes us again. */
#define SESSION_BATCH 8

static void session_serve(struct session *s)
{
	for (int i = 0; i < SESSION_BATCH; i++)
		if (session_handle_one(s) <= 0)
			break;
}

/* A new session, on its own source while boosted. */
static int on_session(sd_event_source *es, int fd, uint32_t revents,
		      void *ud)
{
	(void)es;
	(void)fd;
	(void)revents;
	session_serve(ud);
	return 0;
}

/*
 * Sessions at work have something to read. sd-event dispatches one
 * source per turn of the loop, and each turn costs system calls of its
 * own (epoll_wait, gettid): with a source per session, busy clients
 * paid that per message. The sessions' own epoll set gives every ready
 * one in a single dispatch, in the order the kernel reports them.
 */
static int on_sessions(sd_event_source *es, int fd, uint32_t revents,
		       void *ud)
{
	struct control *c = ud;
	struct epoll_event ev[64];
	int n;

	(void)es;
	(void)revents;
	n = epoll_wait(fd, ev, ARRAY_SIZE(ev), 0);
	if (n <= 0)
		return 0;
	c->ready = ev;
	c->n_ready = n;
	for (int i = 0; i < n; i++)
		if (ev[i].data.ptr)
			session_serve(ev[i].data.ptr);
	c->ready = NULL;
	c->n_ready = 0;
	return 0;
}

static unsigned int sessions_of(struct control *c, uid_t uid)
{
	struct uid_count *u;

	HASH_FIND(hh, c->uids, &uid, sizeof(uid), u);
	return u ? u->n : 0;
}

/* Idle: holds nothing (no attachment, no waiting attach) and has said
 * nothing for a while. */
#define SESSION_IDLE_USEC 1000000

static bool session_idle(const struct session *s, uint64_t now)
{
	return !s->n_att && !s->waits && !s->sub &&
	       s->last_active + SESSION_IDLE_USEC <= now;
}

/* The idle session of uid (any uid: (uid_t)-1) quiet the longest. */
static struct session *oldest_idle(struct control *c, uid_t uid)
{
	struct session *best = NULL;
	uint64_t now;

	sd_event_now(manager_loop(c->m), CLOCK_MONOTONIC, &now);
	for (struct session *s = c->sessions; s; s = s->next)
		if ((uid == (uid_t)-1 || s->cred.uid == uid) &&
		    session_idle(s, now) &&
		    (!best || s->last_active < best->last_active))
			best = s;
	return best;
}

/* The uid with the most sessions, and how many. */
static uid_t busiest_uid(struct control *c, unsigned int *count)
{
	uid_t best = (uid_t)-1;

	*count = 0;
	for (struct uid_count *u = c->uids; u; u = u->hh.next)
		if (u->n > *count) {
			*count = u->n;
			best = u->uid;
		}
	return best;
}

static void evict(struct session *s, const char *why)
{
	/* The same line for a uid and a reason: a flood of them is
	 * counted, not repeated (log.c). */
	log_notice("control socket: closed an idle session of uid %u, idle "
		   "the longest, to make room: %s",
		   (unsigned int)s->cred.uid, why);
	session_send_error(s, 0, "too_many_sessions",
		   "closed to make room for a new session: %s", why);
	s->c->evicted++;
	session_free(s);
}

/*
 * Room for a session of uid? Idle sessions never lock out real work:
 * a uid at its cap loses its own oldest idle session to the newcomer;
 * at the global cap, the uid with the most sessions (if it has more
 * than the newcomer's) loses its oldest idle one. Sessions that hold
 * attachments are never closed: then the newcomer is refused.
 * Returns NULL when admitted, else why not.
 */
static const char *admit(struct control *c, uid_t uid, char *why, size_t n)
{
	unsigned int mine = sessions_of(c, uid), most;
	struct session *victim;
	uid_t busiest;

	if (mine >= c->caps.sessions_per_uid) {
		snprintf(why, n, "uid %u has %u sessions, the most one uid may "
				 "have (daemon.max_sessions_per_uid)",
			 (unsigned int)uid, c->caps.sessions_per_uid);
		victim = oldest_idle(c, uid);
		if (!victim)
			return why;
		evict(victim, why);
		return NULL;
	}
	if (c->n_sessions < c->caps.sessions)
		return NULL;
	snprintf(why, n, "the daemon has %u sessions, its limit "
			 "(daemon.max_sessions)",
		 c->caps.sessions);
	busiest = busiest_uid(c, &most);
	victim = most > mine + 1 ? oldest_idle(c, busiest) : NULL;
	if (!victim)
		return why;
	evict(victim, why);
	return NULL;
}

static int on_hello_timeout(sd_event_source *es, uint64_t usec, void *ud)
{
	struct session *s = ud;

	(void)es;
	(void)usec;
	log_debug("session %u (pid %d uid %u): no HELLO in %d s, closing",
		  s->id, (int)s->cred.pid, (unsigned int)s->cred.uid,
		  manager_config(s->c->m)->daemon.hello_timeout);
	session_send_error(s, 0, "timeout", "no HELLO within %d s (daemon.hello_timeout)",
		   manager_config(s->c->m)->daemon.hello_timeout);
	s->c->timed_out++;
	session_free(s);
	return 0;
}

/* Refuse at once, with the reason, rather than leave a client to time
 * out: the socket is ours for as long as it takes to say so. */
static void refuse(struct control *c, int fd, const struct ucred *cred,
		   const char *why)
{
	struct session tmp = { .c = c, .fd = fd, .cred = *cred,
			       .version = 1, .out = { .fd = -1 } };

	c->refused++;
	log_notice("control socket: refused a session of uid %u: %s",
		   (unsigned int)cred->uid, why);
	session_send_error(&tmp, 0, "too_many_sessions", "%s", why);
	session_out_clear(&tmp); /* not waited for */
	/* Closing a socket with unread messages resets it, and the client
	 * may lose the ERROR: read what came already (a HELLO sent right
	 * after connecting), closing any fds. */
	for (int i = 0; i < 4; i++) {
		int fds[PROTO_MAX_FDS];
		size_t len, n_fds = 0;
		int r;

		r = proto_recv_frame(fd, c->frame, PROTO_RECV_BYTES, &len, fds,
				     &n_fds);
		proto_drop_fds(fds, n_fds);
		if (r == -EAGAIN || r == -EPIPE || r == -ECONNRESET)
			break;
	}
	fdsink_close(fd);
}

/* A connection on the main socket (scope NULL) or on profile scope's
 * own socket. */
void control_accept_one(struct control *c, int cfd, const char *scope)
{
	int64_t admin = manager_config(c->m)->daemon.admin_gid;
	socklen_t len = sizeof(struct ucred);
	struct session *s;
	struct uid_count *u;
	struct ucred cred;
	const char *no;
	char why[160];
	int r;

	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		fdsink_close(cfd);
		return;
	}
#ifdef SO_PASSRIGHTS
	/* Where the kernel has it (Linux 6.16), fds a client sends are
	 * refused at its sendmsg(): none reaches us at all. */
	(void)setsockopt(cfd, SOL_SOCKET, SO_PASSRIGHTS, &(int){ 0 },
			 sizeof(int));
#endif
	no = admit(c, cred.uid, why, sizeof(why));
	if (no) {
		refuse(c, cfd, &cred, no);
		return;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		refuse(c, cfd, &cred, "out of memory");
		return;
	}
	s->c = c;
	s->fd = cfd;
	s->version = 1;
	s->out.fd = -1;
	s->cred = cred;
	s->id = ++c->next_session;
	s->boost = SESSION_BOOST_MESSAGES;
	sd_event_now(manager_loop(c->m), CLOCK_MONOTONIC, &s->last_active);
	r = session_read_groups(s);
	if (r == 0 && scope && !(s->scope = strdup(scope)))
		r = -ENOMEM;
	if (r < 0) {
		free(s->groups);
		free(s->scope);
		free(s);
		refuse(c, cfd, &cred, strerror(-r));
		return;
	}
	/* Root on the main socket is the operator; a profile's own socket
	 * (a container's) has no admin, whoever the peer is. */
	s->admin = !scope &&
		   (s->cred.uid == 0 ||
		    (admin >= 0 && session_in_group(s, (gid_t)admin)));
	r = sd_event_add_io(manager_loop(c->m), &s->io, cfd, EPOLLIN, on_session, s);
	if (r >= 0)
		r = sd_event_source_set_priority(s->io, PRIO_NEW_SESSION);
	if (r >= 0)
		r = sd_event_add_time_relative(
			manager_loop(c->m), &s->hello_timer, CLOCK_MONOTONIC,
			(uint64_t)manager_config(c->m)->daemon.hello_timeout * 1000000,
			100000, on_hello_timeout, s);
	if (r < 0) {
		sd_event_source_disable_unref(s->io);
		free(s->groups);
		free(s->scope);
		free(s);
		refuse(c, cfd, &cred, strerror(-r));
		return;
	}
	HASH_FIND(hh, c->uids, &cred.uid, sizeof(uid_t), u);
	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u) {
			sd_event_source_disable_unref(s->io);
			sd_event_source_disable_unref(s->hello_timer);
			free(s->groups);
			free(s->scope);
			free(s);
			refuse(c, cfd, &cred, "out of memory");
			return;
		}
		u->uid = cred.uid;
		HASH_ADD(hh, c->uids, uid, sizeof(uid_t), u);
	}
	u->n++;
	s->next = c->sessions;
	c->sessions = s;
	c->n_sessions++;
	log_debug("session %u: pid %d uid %u gid %u%s%s%s", s->id,
		  (int)s->cred.pid, (unsigned int)s->cred.uid,
		  (unsigned int)s->cred.gid, s->admin ? " (admin)" : "",
		  scope ? ", on the socket of profile " : "", scope ?: "");
}

/* Up to this many connections per turn of the loop: a burst of
 * connects is taken in quickly, and the loop still turns. */
#define ACCEPT_BATCH 64

static int on_accept(sd_event_source *es, int fd, uint32_t revents,
		     void *ud)
{
	struct control *c = ud;

	(void)es;
	(void)revents;
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (cfd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
			    !accept_pause_on_error(&c->pause, errno))
				log_warn(errno, "control socket: accept");
			return 0;
		}
		accept_pause_ok(&c->pause);
		control_accept_one(c, cfd, NULL);
	}
	return 0;
}

/* ---- the socket ---- */

static void control_stats(void *ud, struct session_stats *out);
static void control_front_stats(void *ud, struct front_stats *out);
static json_t *control_sessions_json(void *ud);
static json_t *control_holders_json(void *ud, const char *profile);
static bool control_attached(void *ud, const char *profile, pid_t pid);
static bool control_leases(void *ud, const char *profile, FILE *f,
			   const char **sep,
			   const struct manager_lease_sets *sets);

int control_start(struct manager *m, struct control **out)
{
	const struct conf_daemon *d = &manager_config(m)->daemon;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct control *c;
	struct stat st;
	mode_t old_mask;
	gid_t gid;
	int r;

	if (strlen(d->control_socket) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, d->control_socket);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->m = m;
	c->fd = -1;
	c->ep = -1;
	/* The caller's from here: control_stop() undoes a half-way start. */
	*out = c;
	c->frame = malloc(PROTO_RECV_BYTES);
	if (!c->frame)
		return -ENOMEM;
	c->ep = epoll_create1(EPOLL_CLOEXEC);
	if (c->ep < 0)
		return -errno;
	r = sd_event_add_io(manager_loop(m), &c->sessions_io, c->ep, EPOLLIN,
			    on_sessions, c);
	if (r < 0)
		return r;
	r = sd_event_source_set_priority(c->sessions_io, PRIO_SESSION);
	if (r < 0)
		return r;
	c->path = strdup(d->control_socket);
	if (!c->path)
		return -ENOMEM;
	/* Socket activation (rdmad.socket): systemd made it, with its
	 * mode and group, and keeps it across our restarts. */
	c->fd = sysd_listen_take_unix("control", SOCK_SEQPACKET, c->path);
	if (c->fd >= 0) {
		c->passed = true;
		goto listening;
	}
	if (mkdir(d->runtime_dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
		       0);
	if (c->fd < 0)
		return -errno;
	if (lstat(c->path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		/* Replace a stale socket, never a live one (another rdmad). */
		_cleanup_close_ int probe = socket(
			AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

		if (probe >= 0 &&
		    connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			return -EADDRINUSE;
		unlink(c->path);
	}
	/* Born with its final mode and group: bound under a temporary name
	 * (when it fits), made right, then renamed into place, so that no
	 * client of the group is ever refused for a moment. */
	if (strlen(c->path) + 1 < sizeof(sun.sun_path))
		strcat(sun.sun_path, "~");
	unlink(sun.sun_path);
	old_mask = umask(0117);
	r = bind(c->fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old_mask);
	if (r < 0 || listen(c->fd, SOMAXCONN) < 0)
		return -errno;
	if (chmod(sun.sun_path, 0660) < 0)
		return -errno;
	if (d->control_group) {
		r = control_group_gid(d->control_group, &gid);
		if (r < 0)
			return r;
		if (chown(sun.sun_path, (uid_t)-1, gid) < 0)
			return -errno;
	}
	if (!streq(sun.sun_path, c->path) && rename(sun.sun_path, c->path) < 0)
		return -errno;
listening:
	front_caps(manager_config(m), &c->caps);
	if (c->caps.lowered)
		log_notice("open-file limit %u: at most %u control sessions "
			   "(%u per uid) and %u REST connections",
			   c->caps.nofile, c->caps.sessions,
			   c->caps.sessions_per_uid, c->caps.http);
	r = sd_event_add_io(manager_loop(m), &c->io, c->fd, EPOLLIN, on_accept, c);
	if (r < 0)
		return r;
	r = sd_event_source_set_priority(c->io, PRIO_ACCEPT);
	if (r < 0)
		return r;
	c->pause = (struct accept_pause){ .io = c->io,
					  .what = "control socket" };
	r = control_attach_start(c);
	if (r < 0)
		return r;
	r = control_psocks_start(c);
	if (r < 0)
		return r;
	manager_set_sessions(m, &(struct manager_sessions){
					.json = control_sessions_json,
					.holders = control_holders_json,
					.stats = control_stats,
					.attached = control_attached,
					.leases_put = control_leases,
					.ud = c });
	manager_set_front(m, FRONT_CONTROL,
			  &(struct manager_front){ .stats = control_front_stats,
						   .ud = c });
	log_info("control socket on %s", c->path);
	return 0;
}

struct control *control_stop(struct control *c)
{
	struct manager *m;

	if (!c)
		return NULL;
	m = c->m;
	control_psocks_stop(c);
	control_attach_stop(c);
	manager_set_sessions(m, NULL);
	manager_set_front(m, FRONT_CONTROL, NULL);
	while (c->sessions)
		session_free(c->sessions);
	accept_pause_done(&c->pause);
	sd_event_source_disable_unref(c->io);
	sd_event_source_disable_unref(c->sessions_io);
	if (c->ep >= 0)
		close(c->ep);
	if (c->fd >= 0) {
		close(c->fd);
		/* A passed socket is systemd's: it listens on while we are
		 * gone, and starts us again at the next connection. */
		if (!c->passed)
			unlink(c->path);
	}
	control_cache_clear(c);
	free(c->frame);
	free(c->path);
	free(c);
	return NULL;
}

static void control_stats(void *ud, struct session_stats *out)
{
	struct control *c = ud;

	*out = (struct session_stats){ .bucket_le = control_attach_bucket_le };
	for (struct session *s = c->sessions; s; s = s->next) {
		out->sessions++;
		out->attachments += (unsigned int)s->n_att;
	}
	out->attaches = c->attaches;
	out->attach_failures = c->attach_failures;
	out->attach_seconds = c->attach_seconds;
	memcpy(out->attach_buckets, c->attach_buckets,
	       sizeof(out->attach_buckets));
}

static void control_front_stats(void *ud, struct front_stats *out)
{
	struct control *c = ud;

	*out = (struct front_stats){ .refused = c->refused,
				     .evicted = c->evicted,
				     .timed_out = c->timed_out };
	for (struct session *s = c->sessions; s; s = s->next)
		out->open++;
}

static bool control_attached(void *ud, const char *profile, pid_t pid)
{
	struct control *c = ud;

	for (struct session *s = c->sessions; s; s = s->next) {
		if (pid && s->cred.pid != pid)
			continue;
		/* A released attachment has no profile any more. */
		for (size_t i = 0; i < s->n_att; i++)
			if (s->att[i].profile &&
			    streq(s->att[i].profile, profile))
				return true;
	}
	return false;
}

/* What each process attached in shared mode to profile leases, for the
 * restart state (restore.h): each session as one holder, with the ids of
 * its attachments' lease sets (each handed to sets) and the leases they
 * took over from the previous run. */
static bool control_leases(void *ud, const char *profile, FILE *f,
			   const char **sep,
			   const struct manager_lease_sets *sets)
{
	struct control *c = ud;

	for (struct session *s = c->sessions; s; s = s->next) {
		_cleanup_free_ char *l = NULL;
		_cleanup_free_ uint64_t *ids = NULL;
		size_t n = 0, n_ids = 0;
		FILE *lf = NULL;
		bool holds = false;

		for (size_t i = 0; i < s->n_att; i++) {
			const struct attachment *t = &s->att[i];

			if (!t->profile || !t->shared ||
			    !streq(t->profile, profile))
				continue;
			holds = true;
			if (t->set && t->set->len) {
				if (!ids && !(ids = calloc(s->n_att,
							   sizeof(*ids)))) {
					if (lf)
						fclose(lf);
					return false;
				}
				ids[n_ids++] = t->set->id;
				if (sets && sets->each)
					sets->each(sets->ud, t->set->id,
						   t->set->text, t->set->len);
			}
			if (!t->lease_len)
				continue;
			if (!lf && !(lf = open_memstream(&l, &n)))
				return false;
			if (ftell(lf) > 0)
				putc(',', lf);
			fwrite(t->lease_text, 1, t->lease_len, lf);
		}
		if (lf && fclose(lf) != 0)
			return false;
		if (!holds)
			continue;
		if (!s->start_read) {
			s->start = restore_start_time(s->cred.pid);
			s->start_read = true;
		}
		manager_holder_put(f, s->cred.pid, s->start, s->cred.uid,
				   s->cred.gid, ids, n_ids, l ? l : "", n, sep);
	}
	if (sets && sets->kept)
		control_attach_sets(c, profile, sets->kept, sets->ud);
	return true;
}

static json_t *control_sessions_json(void *ud)
{
	struct control *c = ud;
	json_t *a = json_array();

	for (struct session *s = c->sessions; a && s; s = s->next) {
		json_t *atts = json_array();

		for (size_t i = 0; i < s->n_att; i++) {
			struct attachment *t = &s->att[i];
			json_t *j = json_pack(
				"{s:i, s:s, s:s, s:i}", "attachment",
				(int)t->id, "profile", t->profile, "mode",
				t->shared ? "shared" : "local", "leases",
				(int)attachment_n_leases(t));

			if (t->resumed)
				json_object_set_new(j, "resumed", json_true());
			if (t->report)
				json_object_set(j, "report", t->report);
			json_array_append_new(atts, j);
		}
		json_t *j = json_pack("{s:i, s:i, s:i, s:i, s:b, s:o}",
				      "session", (int)s->id, "pid",
				      (int)s->cred.pid, "uid", (int)s->cred.uid,
				      "gid", (int)s->cred.gid, "admin",
				      s->admin, "attachments", atts);

		/* Connected through a profile's own socket. */
		if (j && s->scope)
			json_object_set_new(j, "socket_profile",
					    json_string(s->scope));
		json_array_append_new(a, j);
	}
	/* The previous run's clients whose leases this run adopted. */
	if (a) {
		json_t *adopted = manager_adopted_json(c->m);

		json_array_extend(a, adopted);
		json_decref(adopted);
	}
	return a;
}

/* The attachments to profile, each {session, pid, uid, attachment,
 * mode}: who held it when one of its objects went. */
static json_t *control_holders_json(void *ud, const char *profile)
{
	struct control *c = ud;
	json_t *a = json_array();

	for (struct session *s = c->sessions; a && s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			const struct attachment *t = &s->att[i];

			if (!streq(t->profile, profile))
				continue;
			json_array_append_new(
				a, json_pack("{s:i, s:i, s:i, s:i, s:s}",
					     "session", (int)s->id, "pid",
					     (int)s->cred.pid, "uid",
					     (int)s->cred.uid, "attachment",
					     (int)t->id, "mode",
					     t->shared ? "shared" : "local"));
		}
	return a;
}

