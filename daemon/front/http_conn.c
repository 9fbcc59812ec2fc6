// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <utlist.h>

#include "http_internal.h"
#include "http_screen.h"
#include "log.h"
#include "sysd.h"

static void listener_prio(struct listener *l)
{
	int64_t prio = l->n_fresh ? PRIO_FRESH : SD_EVENT_PRIORITY_NORMAL;

	if (l->io)
		sd_event_source_set_priority(l->io, prio);
	if (l->timer)
		sd_event_source_set_priority(l->timer, prio);
	if (l->again)
		sd_event_source_set_priority(l->again, prio);
}

void conn_unfresh(struct conn *cn)
{
	if (!cn->fresh)
		return;
	cn->fresh = false;
	if (!--cn->l->n_fresh)
		listener_prio(cn->l);
}


static void conn_unlist(struct conn *cn)
{
	struct http *h = cn->l->h;

	if (!cn->waiting)
		return;
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		h->wait_head = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	else
		h->wait_tail = cn->prev;
	cn->prev = cn->next = NULL;
	cn->waiting = false;
}

void conn_headers_done(struct conn *cn)
{
	conn_unlist(cn);
}

void conn_wait_headers(struct conn *cn)
{
	struct http *h = cn->l->h;

	conn_unlist(cn);
	sd_event_now(manager_loop(cn->l->m), CLOCK_MONOTONIC, &cn->since);
	cn->prev = h->wait_tail;
	if (h->wait_tail)
		h->wait_tail->next = cn;
	else
		h->wait_head = cn;
	h->wait_tail = cn;
	cn->waiting = true;
}


/*
 * libmicrohttpd's wake-up: its next timeout, or at once when it holds
 * work already (a pipelined request read with the one before, an answer
 * that came later, a stream's event). "At once" is the defer source,
 * not a timer due now: sd-event gives a timer its default accuracy,
 * 250 ms, and wakes it anywhere in that window, which served a
 * pipelined request every 0.25 s (issue 38).
 */
static void listener_rearm(struct listener *l)
{
	MHD_UNSIGNED_LONG_LONG ms;
	uint64_t now;

	if (sym_MHD_get_timeout(l->mhd, &ms) != MHD_YES) {
		sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
	} else if (!ms) {
		sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
		listener_kick(l);
	} else {
		sd_event_now(manager_loop(l->m), CLOCK_MONOTONIC, &now);
		sd_event_source_set_time(l->timer, now + ms * 1000);
		sd_event_source_set_enabled(l->timer, SD_EVENT_ONESHOT);
	}
}

void listener_kick(struct listener *l)
{
	if (l->again)
		sd_event_source_set_enabled(l->again, SD_EVENT_ONESHOT);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	struct listener *l = ud;

	(void)s;
	(void)fd;
	(void)revents;
	sym_MHD_run(l->mhd);
	listener_rearm(l);
	return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *ud)
{
	(void)s;
	(void)usec;
	return on_io(NULL, -1, 0, ud);
}

static int on_again(sd_event_source *s, void *ud)
{
	(void)s;
	return on_io(NULL, -1, 0, ud);
}

/* ---- connections: accepting, counting, deadlines ---- */

/* libmicrohttpd closes a connection it answered early (a body over the
 * limit, http.c): a copy of its fd lingers. This is called before its
 * close() (MHD_cleanup_connections), after its shutdown(SHUT_WR). */
static void conn_linger(struct conn *cn)
{
	const union MHD_ConnectionInfo *ci = sym_MHD_get_connection_info(
		cn->c, MHD_CONNECTION_INFO_CONNECTION_FD);
	int fd;

	if (!ci || ci->connect_fd < 0)
		return;
	fd = fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 3);
	if (fd >= 0)
		linger_start(cn->l->h, manager_loop(cn->l->m), fd);
}

static void on_connection(void *cls, struct MHD_Connection *c,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct listener *l = cls;
	struct http *h = l->h;
	struct conn *cn = *socket_context;

	(void)c;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		cn = calloc(1, sizeof(*cn));
		if (!cn)
			return; /* not counted: nothing to undo at close */
		cn->l = l;
		cn->c = c;
		cn->peer = h->adding;
		if (cn->peer)
			cn->peer->n++;
		cn->tracked = h->adding_tracked;
		cn->length = h->adding_length;
		cn->bad = h->adding_bad;
		cn->bad_after = h->adding_bad_after;
		h->adding_bad = NULL;
		h->n_conns++;
		conn_wait_headers(cn);
		cn->fresh = true;
		if (!l->n_fresh++)
			listener_prio(l);
		*socket_context = cn;
		return;
	}
	if (!cn)
		return;
	if (cn->linger && !cn->l->tls)
		conn_linger(cn);
	cn->next_io = sd_event_source_disable_unref(cn->next_io);
	free(cn->bad);
	conn_unlist(cn);
	conn_unfresh(cn);
	if (cn->anon)
		h->n_anon--;
	h->n_conns--;
	if (cn->peer && !--cn->peer->n) {
		HASH_DEL(h->peers, cn->peer);
		free(cn->peer);
	}
	free(cn);
	*socket_context = NULL;
}


/*
 * libmicrohttpd 0.9.75 answers a Content-Length it cannot read (-1,
 * abc, past 2^64) with two response heads: parse_connection_headers()
 * queues its error answer and builds its head (transmit_error_response),
 * then the MHD_CONNECTION_HEADERS_RECEIVED case of
 * MHD_connection_handle_idle() sets the state back to
 * MHD_CONNECTION_HEADERS_PROCESSED, and the head is built again. A head
 * judged before libmicrohttpd reads it never gets there (http_early.c);
 * one it reads unjudged does (a first head that trickled in; a later one
 * where it is not known where it starts: after a pipelined request or a
 * chunked body, on a unix socket, on TLS), and libmicrohttpd's log
 * line, written before either head, is all we hear of it. The
 * connection is the one whose headers are in (REQUEST_HEADER_SIZE is
 * known from MHD_CONNECTION_HEADERS_RECEIVED on) but not yet handed to
 * us (still on the header list): it is answered here, once, and its
 * sending side shut down, so that libmicrohttpd's heads go nowhere and
 * it closes the connection (which lingers). On TLS nothing can be said
 * outside libmicrohttpd's session: the connection is just closed.
 */
static void bad_length_later(struct listener *l, bool too_large)
{
	for (struct conn *cn = l->h->wait_head; cn; cn = cn->next) {
		const union MHD_ConnectionInfo *ci;

		if (cn->l != l || !sym_MHD_get_connection_info(
					  cn->c,
					  MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE))
			continue;
		if (cn->refused)
			return; /* answered already (http_early.c) */
		ci = sym_MHD_get_connection_info(
			cn->c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci)
			return;
		if (l->tls) {
			shutdown(ci->connect_fd, SHUT_RDWR);
			return;
		}
		if (too_large)
			answer_direct(ci->connect_fd, 413, "Content Too Large",
				      "body_too_large",
				      "the request's Content-Length is over "
				      "the body limit",
				      false, 0);
		else
			answer_direct(ci->connect_fd, 400, "Bad Request",
				      "bad_request",
				      "Content-Length is not a number", false,
				      0);
		shutdown(ci->connect_fd, SHUT_WR);
		cn->linger = true;
		cn->refused = true;
		log_debug("%s: a later request's Content-Length refused",
			  l->addr);
		return;
	}
}

/* libmicrohttpd's own complaints (a peer gone, a socket option a unix
 * socket does not have): for debugging, and counted when they repeat.
 * Two of them are acted on (bad_length_later). */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	size_t n;

	if (strstr(fmt, "`Content-Length' header"))
		bad_length_later(cls, false);
	else if (strstr(fmt, "'Content-Length' header"))
		bad_length_later(cls, true);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	log_debug("libmicrohttpd: %s", buf);
}

unsigned int conns_open(const struct http *h)
{
	return h->n_conns + h->n_pending + h->n_lingering;
}

/* Often enough for the header deadline, and for libmicrohttpd to
 * finish with connections that have ended. */
static uint64_t sweep_interval(const struct http *h)
{
	return h->header_timeout / 4 < 1000000 ? h->header_timeout / 4
					       : 1000000;
}

/* Connections whose headers are late: shut their sockets down, and
 * libmicrohttpd, reading the end, closes them as it closes any other. */
static int on_sweep(sd_event_source *s, uint64_t usec, void *ud)
{
	struct http *h = ud;
	uint64_t now;

	(void)usec;
	sd_event_now(sd_event_source_get_event(s), CLOCK_MONOTONIC, &now);
	while (h->wait_head && h->wait_head->since + h->header_timeout <= now) {
		struct conn *cn = h->wait_head;
		const union MHD_ConnectionInfo *ci = sym_MHD_get_connection_info(
			cn->c, MHD_CONNECTION_INFO_CONNECTION_FD);

		conn_unlist(cn);
		h->timed_out++;
		if (ci)
			shutdown(ci->connect_fd, SHUT_RDWR);
		log_debug("%s: request headers not in within %llu s, closing",
			  cn->l->addr,
			  (unsigned long long)(h->header_timeout / 1000000));
	}
	while (h->pending && h->pending->since + h->header_timeout <= now) {
		h->timed_out++;
		log_debug("%s: request headers not in within %llu s, closing",
			  h->pending->l->addr,
			  (unsigned long long)(h->header_timeout / 1000000));
		pending_end(h->pending, false);
	}
	while (h->lingering && h->lingering->until <= now)
		linger_end(h->lingering);
	/* Keep-alives for the streams. */
	streams_ping(h, now, false);
	sd_event_source_set_time(s, now + sweep_interval(h));
	for (size_t i = 0; i < h->n; i++)
		if (h->l[i].mhd)
			on_io(NULL, -1, 0, &h->l[i]);
	return 0;
}

/* Refused at once, with the reason (on plain HTTP; a TLS client just
 * sees the connection close: we cannot speak to it before a handshake). */
static void refuse(struct listener *l, int fd, const char *code,
		   const char *why)
{
	l->h->refused++;
	log_notice("%s: refused a connection: %s", l->addr, why);
	if (!l->tls)
		answer_direct(fd, 503, "Service Unavailable", code, why, false,
			      HTTP_RETRY_AFTER);
	close(fd);
}

static struct peer *peer_of(struct http *h, const struct sockaddr *sa,
			    bool create)
{
	unsigned char key[17] = { 0 };
	struct peer *p;

	if (sa->sa_family == AF_INET) {
		key[0] = 4;
		memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		key[0] = 6;
		memcpy(key + 1, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		       16);
	} else {
		return NULL;
	}
	HASH_FIND(hh, h->peers, key, sizeof(key), p);
	if (p || !create)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	memcpy(p->key, key, sizeof(key));
	HASH_ADD(hh, h->peers, key, sizeof(p->key), p);
	return p;
}

static bool sockaddr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >>
			24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a =
			&((const struct sockaddr_in6 *)sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return true; /* unix */
}

/*
 * At the cap, a new connection takes the place of one that holds it
 * without a request in hand: a lingering one (answered already), one
 * that has not sent a whole request head (the oldest: the header
 * deadline's order), or one libmicrohttpd reads a head of that was not
 * judged whole (trickling in). Anonymous clients hold the others up to
 * their share (http.anon_max), so that the reserve is always one of
 * these or a token holder's: whoever sends a request head at once (the
 * token holder's client does) is served. Returns whether a place is
 * made (a libmicrohttpd connection shut down leaves at its next run).
 */
static bool make_room(struct http *h)
{
	if (h->lingering) {
		linger_end(h->lingering);
		return true;
	}
	if (pending_evict(h))
		return true;
	for (struct conn *cn = h->wait_head; cn; cn = cn->next) {
		const union MHD_ConnectionInfo *ci;

		if (cn->done || cn->tracked || cn->refused)
			continue;
		ci = sym_MHD_get_connection_info(
			cn->c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci)
			continue;
		conn_unlist(cn);
		shutdown(ci->connect_fd, SHUT_RDWR);
		h->evicted++;
		log_debug("%s: a connection trickling a request head gives "
			  "its place to a new one",
			  cn->l->addr);
		return true;
	}
	return false;
}

static void accept_one(struct listener *l, int fd, struct sockaddr *sa,
		       socklen_t len)
{
	struct http *h = l->h;
	struct peer *p = NULL;
	char why[160];

	if (conns_open(h) >= h->max_conns) {
		/* Connections that have ended may wait for libmicrohttpd to
		 * notice: let it, before saying no. */
		for (size_t i = 0; i < h->n; i++)
			if (h->l[i].mhd)
				sym_MHD_run(h->l[i].mhd);
	}
	if (conns_open(h) >= h->max_conns && !make_room(h)) {
		snprintf(why, sizeof(why),
			 "the daemon has %u REST connections, its limit "
			 "(daemon.http.max_connections)",
			 h->max_conns);
		refuse(l, fd, "too_many_connections", why);
		return;
	}
	if (!l->local && !sockaddr_is_loopback(sa)) {
		p = peer_of(h, sa, true);
		if (!p) {
			refuse(l, fd, "internal", "out of memory");
			return;
		}
		if (p->n >= h->per_address) {
			snprintf(why, sizeof(why),
				 "this address has %u REST connections, the "
				 "limit (daemon.http.max_connections_per_"
				 "address)",
				 h->per_address);
			peer_put(h, p);
			refuse(l, fd, "too_many_connections", why);
			return;
		}
	}
	if (!l->tls) {
		/* Its first request is judged first (http_screen.h). */
		pending_start(l, fd, sa, len, p);
		return;
	}
	h->adding = p;
	/* MHD closes fd when it cannot take it. */
	if (sym_MHD_add_connection(l->mhd, fd, sa, len) != MHD_YES) {
		log_debug("%s: libmicrohttpd did not take a connection",
			  l->addr);
	}
	h->adding = NULL;
	peer_put(h, p);
}

#define ACCEPT_BATCH 64

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	struct listener *l = ud;

	(void)s;
	(void)revents;
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int cfd = accept4(fd, (struct sockaddr *)&ss, &len,
				  SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (cfd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
			    errno != ECONNABORTED &&
			    !accept_pause_on_error(&l->pause, errno))
				log_warn(errno, "%s: accept", l->addr);
			break;
		}
		accept_pause_ok(&l->pause);
		if (len < sizeof(sa_family_t)) {
			/* an unnamed unix peer */
			ss.ss_family = AF_UNIX;
			len = sizeof(sa_family_t);
		}
		accept_one(l, cfd, (struct sockaddr *)&ss, len);
	}
	listener_rearm(l);
	return 0;
}

int conns_start(struct manager *m, struct http *h)
{
	int r;

	r = sd_event_add_time_relative(manager_loop(m), &h->sweep, CLOCK_MONOTONIC,
				       sweep_interval(h), 100000, on_sweep, h);

	return r < 0 ? r : sd_event_source_set_enabled(h->sweep, SD_EVENT_ON);
}

void conns_stop(struct http *h)
{
	h->sweep = sd_event_source_disable_unref(h->sweep);
	while (h->lingering)
		linger_end(h->lingering);
}

/* Does a process still listen on this unix socket? */
static bool socket_in_use(const struct sockaddr_un *sun)
{
	_cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (probe < 0)
		return false;
	return connect(probe, (const struct sockaddr *)sun, sizeof(*sun)) == 0 ||
	       errno == EAGAIN;
}

/* A listening socket for "unix:/path", "[v6]:port" or "host:port". */
static int listen_socket(const char *addr, char **unix_path)
{
	_cleanup_close_ int fd = -1;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	_cleanup_free_ char *host = NULL;
	const char *port;
	int one = 1, r;

	if (!strncmp(addr, "unix:", 5)) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		const char *path = addr + 5;
		struct stat st;

		if (strlen(path) >= sizeof(sun.sun_path))
			return -ENAMETOOLONG;
		strcpy(sun.sun_path, path);
		/* Socket activation: systemd's, not ours to unlink. */
		fd = sysd_listen_take_unix(NULL, SOCK_STREAM, path);
		if (fd >= 0)
			return TAKE_FD(fd);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		if (fd < 0)
			return -errno;
		/* Replace a stale socket, never another kind of file nor a
		 * socket someone still listens on. */
		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
			if (socket_in_use(&sun))
				return -EADDRINUSE;
			unlink(path);
		}
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
		    listen(fd, SOMAXCONN) < 0)
			return -errno;
		*unix_path = strdup(path);
		if (!*unix_path)
			return -ENOMEM;
		return TAKE_FD(fd);
	}

	port = strrchr(addr, ':');
	if (addr[0] == '[')
		host = strndup(addr + 1, (size_t)(port - addr - 2));
	else
		host = strndup(addr, (size_t)(port - addr));
	if (!host)
		return -ENOMEM;
	r = getaddrinfo(host, port + 1, &hints, &ai);
	if (r)
		return -EADDRNOTAVAIL;
	fd = sysd_listen_take_inet(ai->ai_addr, ai->ai_addrlen);
	if (fd >= 0) {
		freeaddrinfo(ai);
		return TAKE_FD(fd);
	}
	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		freeaddrinfo(ai);
		return r;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
		r = -errno;
		freeaddrinfo(ai);
		return r;
	}
	freeaddrinfo(ai);
	return TAKE_FD(fd);
}

int listener_start(struct manager *m, struct http *h,
		   struct listener *l, const char *addr)
{
	const union MHD_DaemonInfo *info;
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
			     MHD_USE_NO_LISTEN_SOCKET |
			     MHD_ALLOW_SUSPEND_RESUME; /* GET /v1/events */
	struct MHD_OptionItem tls[3] = { { MHD_OPTION_END, 0, NULL } };
	int r;

	l->m = m;
	l->h = h;
	l->addr = strdup(addr);
	if (!l->addr)
		return -ENOMEM;
	l->fd = listen_socket(addr, &l->unix_path);
	if (l->fd < 0)
		return l->fd;
	l->local = !strncmp(addr, "unix:", 5);
	l->tls = h->cert && !l->local;
	if (l->tls) {
		flags |= MHD_USE_TLS;
		tls[0] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0,
						  h->cert };
		tls[1] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0,
						  h->key };
		tls[2] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	}
	/* The connection cap is ours (accept_one): libmicrohttpd's own
	 * is only a backstop. */
	l->mhd = sym_MHD_start_daemon(
		flags, 0, NULL, NULL, http_on_request, l,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, l,
		MHD_OPTION_CONNECTION_LIMIT, h->max_conns + 1,
		MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned int)manager_config(m)->daemon.http_idle_timeout,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT,
		(size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
		http_on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION,
		on_connection, l, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
	if (!l->mhd)
		return -EIO;
	info = sym_MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info)
		return -EIO;
	r = sd_event_add_io(manager_loop(m), &l->io, info->epoll_fd, EPOLLIN, on_io,
			    l);
	if (r < 0)
		return r;
	r = sd_event_add_time(manager_loop(m), &l->timer, CLOCK_MONOTONIC, 0, 0,
			      on_timer, l);
	if (r < 0)
		return r;
	r = sd_event_add_defer(manager_loop(m), &l->again, on_again, l);
	if (r < 0)
		return r;
	sd_event_source_set_enabled(l->again, SD_EVENT_OFF);
	r = sd_event_add_io(manager_loop(m), &l->accept_io, l->fd, EPOLLIN,
			    on_accept, l);
	if (r < 0)
		return r;
	/* A new connection is taken in however busy the others are. */
	r = sd_event_source_set_priority(l->accept_io,
					 SD_EVENT_PRIORITY_IMPORTANT);
	if (r < 0)
		return r;
	l->pause = (struct accept_pause){ .io = l->accept_io, .what = l->addr };
	listener_rearm(l);
	return 0;
}

void listener_stop(struct listener *l)
{
	struct pending *pd, *tmp;

	if (l->h)
		DL_FOREACH_SAFE(l->h->pending, pd, tmp)
			if (pd->l == l)
				pending_end(pd, false);
	accept_pause_done(&l->pause);
	l->accept_io = sd_event_source_disable_unref(l->accept_io);
	l->io = sd_event_source_disable_unref(l->io);
	l->timer = sd_event_source_disable_unref(l->timer);
	l->again = sd_event_source_disable_unref(l->again);
	if (l->mhd)
		sym_MHD_stop_daemon(l->mhd); /* closes its connections */
	l->mhd = NULL;
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	if (l->unix_path)
		unlink(l->unix_path);
	free(l->unix_path);
	l->unix_path = NULL;
	free(l->addr);
	l->addr = NULL;
}

int read_pem(const char *path, char **out)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	size_t len;

	if (fd < 0)
		return -errno;
	return read_all(fd, 1 << 20, -1, out, &len);
}

