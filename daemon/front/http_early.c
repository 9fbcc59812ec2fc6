// SPDX-License-Identifier: MIT
/*
 * What the REST front end answers before libmicrohttpd does, or instead
 * of it (issue 38): request heads judged as their bytes come, before
 * libmicrohttpd reads them (http_screen.h says why) -- a connection's
 * first, and a later one where it is known where it starts; answers
 * written on the socket; connections that linger after such an answer.
 * It calls no other file of the front end but http_screen.c.
 */
#include <errno.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* tcpi_bytes_received, which glibc's lacks */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <utlist.h>

#include "http_internal.h"
#include "http_screen.h"
#include "log.h"

/* ---- lingering closes ---- */

void linger_end(struct lingering *lg)
{
	struct http *h = lg->h;

	DL_DELETE(h->lingering, lg);
	h->n_lingering--;
	sd_event_source_disable_unref(lg->io);
	close(lg->fd);
	free(lg);
}

static int on_linger(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	struct lingering *lg = ud;
	char buf[16384];

	(void)s;
	(void)revents;
	/* At most 16 reads a turn, so that one client sending fast does not
	 * hold the loop; what is left is read on the next turn (epoll is
	 * level-triggered). Only the client's close, an error or the byte
	 * bound end the linger early: ending it while bytes still come
	 * would reset the connection before the client read its answer. */
	for (int i = 0; i < 16; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n <= 0)
			break; /* the client has closed: so do we */
		lg->drained += (size_t)n;
		if (lg->drained > HTTP_LINGER_BYTES)
			break;
		if (i == 15)
			return 0;
	}
	linger_end(lg);
	return 0;
}

/* fd (taken), its side shut down already: read what still comes, then
 * close it. */
void linger_start(struct http *h, sd_event *event, int fd)
{
	struct lingering *lg = NULL;
	uint64_t now;

	/* A lingering connection is still open, and holds its share of
	 * the descriptors: within the cap (one over it for a moment, while
	 * libmicrohttpd's copy closes). */
	if (h->n_conns + h->n_pending + h->n_lingering <= h->max_conns)
		lg = calloc(1, sizeof(*lg));
	if (!lg) {
		close(fd);
		return;
	}
	lg->h = h;
	lg->fd = fd;
	if (sd_event_add_io(event, &lg->io, fd, EPOLLIN | EPOLLRDHUP,
			    on_linger, lg) < 0) {
		close(fd);
		free(lg);
		return;
	}
	sd_event_now(event, CLOCK_MONOTONIC, &now);
	lg->until = now + HTTP_LINGER_USEC;
	DL_APPEND(h->lingering, lg);
	h->n_lingering++;
}

/* An error answer written on a socket with nothing else to send (a new
 * connection, or one whose answers are out): its buffer takes it whole,
 * or nothing (plain HTTP only). */
void answer_direct(int fd, unsigned int status, const char *reason,
		   const char *code, const char *why, bool head,
		   unsigned int retry_after)
{
	char body[384], msg[672], retry[32] = "";
	int n;

	snprintf(body, sizeof(body),
		 "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code,
		 why);
	if (retry_after)
		snprintf(retry, sizeof(retry), "Retry-After: %u\r\n",
			 retry_after);
	n = snprintf(msg, sizeof(msg),
		     "HTTP/1.1 %u %s\r\n"
		     "Content-Type: application/json\r\n%s"
		     "Connection: close\r\nContent-Length: %zu\r\n"
		     "\r\n%s",
		     status, reason, retry, strlen(body), head ? "" : body);
	(void)!send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* A peer with no connection left is forgotten. */
void peer_put(struct http *h, struct peer *p)
{
	if (p && !p->n) {
		HASH_DEL(h->peers, p);
		free(p);
	}
}

/* ---- later request heads, judged where it is known where they start ---- */

/*
 * The bytes libmicrohttpd has read of a TCP connection: all those
 * received, less those still queued (asked in this order, bytes that
 * come in between make it larger, never smaller). -1: not TCP.
 */
static int tcp_consumed(int fd, uint64_t *out)
{
	struct tcp_info ti = { 0 };
	socklen_t len = sizeof(ti);
	int inq;

	if (ioctl(fd, FIONREAD, &inq) < 0 ||
	    getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_received) +
			  sizeof(ti.tcpi_bytes_received))
		return -1;
	*out = ti.tcpi_bytes_received - (uint64_t)inq;
	return 0;
}

/*
 * libmicrohttpd has read exactly the requests done, no byte of the next:
 * the next one starts at the kernel's queue. It read at most what came,
 * and it has used at least what the heads said (used, counted by the
 * heads we judged); equal, it holds nothing of the next request. A
 * connection whose count is lost (a chunked body, a pipelining client,
 * a head we did not judge, a unix socket) is judged no more.
 */
static bool conn_at_boundary(struct conn *cn, int *fd)
{
	const union MHD_ConnectionInfo *ci = sym_MHD_get_connection_info(
		cn->c, MHD_CONNECTION_INFO_CONNECTION_FD);
	uint64_t consumed;

	if (!ci || tcp_consumed(ci->connect_fd, &consumed) < 0 ||
	    consumed != cn->used) {
		cn->tracked = false;
		return false;
	}
	*fd = ci->connect_fd;
	return true;
}

static void conn_next_off(struct conn *cn)
{
	if (cn->next_io)
		sd_event_source_set_enabled(cn->next_io, SD_EVENT_OFF);
}

/* A later head refused: its bytes are taken from the queue, so that
 * libmicrohttpd never reads them, it is answered, and the sending side
 * shut down, so that libmicrohttpd says nothing more; the connection
 * closes when the client closes it, or at its header deadline. */
static void conn_next_reject(struct conn *cn, int fd,
			     const struct screen_result *r)
{
	char buf[4096];

	log_debug("%s: a later request refused before libmicrohttpd: %u %s",
		  cn->l->addr, r->status, r->message);
	for (int i = 0; i < 16; i++)
		if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			break;
	answer_direct(fd, r->status, r->reason, r->code, r->message, r->head,
		      0);
	shutdown(fd, SHUT_WR);
	cn->linger = true;
	cn->refused = true;
	cn->tracked = false;
}

static int on_next_bytes(sd_event_source *s, int fd_, uint32_t revents,
			 void *ud)
{
	struct conn *cn = ud;
	char buf[HTTP_SCREEN_WINDOW];
	struct screen_result r;
	ssize_t n;
	int fd;

	(void)s;
	(void)fd_;
	if (!conn_at_boundary(cn, &fd)) {
		conn_next_off(cn);
		return 0;
	}
	n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n <= 0)
		return 0; /* libmicrohttpd sees the end, or nothing yet */
	switch (http_screen(buf, (size_t)n, HTTP_MAX_BODY, &r)) {
	case SCREEN_MORE:
		if ((size_t)n == sizeof(buf)) {
			http_screen_too_long(buf, (size_t)n, &r);
			conn_next_reject(cn, fd, &r);
		} else if ((revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ||
			   ++cn->looks >= HTTP_SCREEN_LOOKS) {
			cn->tracked = false;
		} else {
			return 0;
		}
		break;
	case SCREEN_PASS:
		cn->tracked = r.sized;
		cn->length = r.length;
		break;
	case SCREEN_REJECT:
		conn_next_reject(cn, fd, &r);
		break;
	}
	conn_next_off(cn);
	return 0;
}

/*
 * A pipelined request judged bad in a connection's first bytes, whose
 * turn has come: libmicrohttpd has sent the answers before it and not
 * yet read it from its buffer (MHD_REQUEST_TERMINATED_COMPLETED_OK is
 * told before the next request is parsed). It is answered here, and
 * the sending side shut down: whatever libmicrohttpd makes of it goes
 * nowhere, and it is not served (conn.refused).
 */
static void conn_bad_turn(struct conn *cn)
{
	const union MHD_ConnectionInfo *ci = sym_MHD_get_connection_info(
		cn->c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct screen_result *r = cn->bad;

	cn->bad = NULL;
	if (ci) {
		log_debug("%s: a pipelined request refused: %u %s",
			  cn->l->addr, r->status, r->message);
		answer_direct(ci->connect_fd, r->status, r->reason, r->code,
			      r->message, r->head, 0);
		shutdown(ci->connect_fd, SHUT_WR);
		cn->linger = true;
		cn->refused = true;
		cn->tracked = false;
	}
	free(r);
}

/* Where the next request starts is asked when its bytes come
 * (on_next_bytes), not here: one question per request. */
void conn_request_done(struct conn *cn)
{
	const union MHD_ConnectionInfo *ci;
	int fd;

	cn->done++;
	if (cn->bad && cn->done >= cn->bad_after)
		conn_bad_turn(cn);
	if (!cn->tracked || cn->l->tls)
		return;
	cn->used += cn->length;
	cn->length = 0;
	cn->looks = 0;
	ci = sym_MHD_get_connection_info(cn->c,
					 MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci) {
		cn->tracked = false;
		return;
	}
	fd = ci->connect_fd;
	if (!cn->next_io) {
		/* Before libmicrohttpd's turn on the same bytes. */
		if (sd_event_add_io(manager_loop(cn->l->m), &cn->next_io, fd,
				    EPOLLIN | EPOLLRDHUP | EPOLLET,
				    on_next_bytes, cn) < 0) {
			cn->tracked = false;
			return;
		}
		sd_event_source_set_priority(cn->next_io, PRIO_FRESH - 1);
	}
	sd_event_source_set_enabled(cn->next_io, SD_EVENT_ON);
}

/* ---- first request heads, judged before libmicrohttpd has them ---- */

/* pd is done with; its fd is returned, or closed (keep false). */
int pending_end(struct pending *pd, bool keep)
{
	struct http *h = pd->l->h;
	int fd = pd->fd;

	DL_DELETE(h->pending, pd);
	h->n_pending--;
	sd_event_source_disable_unref(pd->io);
	if (pd->peer)
		pd->peer->n--;
	peer_put(h, pd->peer);
	free(pd);
	if (!keep) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * The requests after a first good one in the first bytes (a pipelining
 * client), judged as far as their lengths are known: the first bad one,
 * and how many come before it (*after), or NULL.
 */
static struct screen_result *pipelined_bad(const char *buf, size_t n,
					   const struct screen_result *first,
					   unsigned int *after)
{
	unsigned long long off = first->length;
	bool sized = first->sized;
	struct screen_result r, *bad;

	for (unsigned int k = 1; sized && off < n && k < HTTP_SCREEN_PIPELINED;
	     k++) {
		switch (http_screen(buf + off, n - (size_t)off, HTTP_MAX_BODY,
				    &r)) {
		case SCREEN_MORE:
			return NULL;
		case SCREEN_PASS:
			off += r.length;
			sized = r.sized;
			break;
		case SCREEN_REJECT:
			bad = malloc(sizeof(*bad));
			if (bad) {
				*bad = r;
				*after = k;
			}
			return bad;
		}
	}
	return NULL;
}

/* To libmicrohttpd, which reads everything from the start; r: the
 * judged head, or NULL; bad, after: see pipelined_bad (taken). */
static void pending_pass(struct pending *pd, const struct screen_result *r,
			 struct screen_result *bad, unsigned int after)
{
	struct listener *l = pd->l;
	struct http *h = l->h;
	struct sockaddr_storage sa = pd->sa;
	socklen_t len = pd->len;
	struct peer *p = pd->peer;
	int fd;

	/* Held for the connection being added (on_connection). */
	if (p)
		p->n++;
	fd = pending_end(pd, true);
	if (p)
		p->n--;
	h->adding = p;
	h->adding_tracked = r && r->sized;
	h->adding_length = r ? r->length : 0;
	h->adding_bad = bad;
	h->adding_bad_after = after;
	/* MHD closes fd when it cannot take it. */
	if (sym_MHD_add_connection(l->mhd, fd, (struct sockaddr *)&sa, len) !=
	    MHD_YES)
		log_debug("%s: libmicrohttpd did not take a connection",
			  l->addr);
	h->adding = NULL;
	h->adding_tracked = false;
	free(h->adding_bad); /* not taken by a connection */
	h->adding_bad = NULL;
	peer_put(h, p);
	/* libmicrohttpd reads it at the next turn (listener_kick). */
	sd_event_source_set_enabled(l->again, SD_EVENT_ONESHOT);
}

/* Whether pd may give its place: it has sent nothing, or a head it has
 * not finished (looked at already). One whose bytes wait for their
 * first look may be a whole request: it is judged at its turn. */
static bool pending_evictable(const struct pending *pd)
{
	int inq = 0;

	return pd->looks || ioctl(pd->fd, FIONREAD, &inq) < 0 || !inq;
}

bool pending_evict(struct http *h)
{
	struct pending *pd;
	int fd;

	DL_FOREACH(h->pending, pd)
		if (pending_evictable(pd))
			break;
	if (!pd)
		return false;
	log_debug("%s: a connection without a whole request head gives its "
		  "place to a new one",
		  pd->l->addr);
	h->evicted++;
	fd = pending_end(pd, true);
	answer_direct(fd, 503, "Service Unavailable", "too_many_connections",
		      "the daemon's REST connections are all taken: this one, "
		      "without a whole request head yet, made way for a new "
		      "one",
		      false, HTTP_RETRY_AFTER);
	close(fd);
	return true;
}

static void pending_reject(struct pending *pd, const struct screen_result *r)
{
	struct listener *l = pd->l;
	int fd;

	log_debug("%s: a request refused before libmicrohttpd: %u %s", l->addr,
		  r->status, r->message);
	fd = pending_end(pd, true);
	answer_direct(fd, r->status, r->reason, r->code, r->message, r->head,
		      0);
	shutdown(fd, SHUT_WR);
	linger_start(l->h, manager_loop(l->m), fd);
}

static int on_first_bytes(sd_event_source *s, int fd, uint32_t revents,
			  void *ud)
{
	struct pending *pd = ud;
	char buf[HTTP_SCREEN_WINDOW];
	struct screen_result r, *bad;
	unsigned int after = 0;
	ssize_t n;

	(void)s;
	n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		/* closed (or broken) before a byte */
		pending_end(pd, false);
		return 0;
	}
	switch (http_screen(buf, (size_t)n, HTTP_MAX_BODY, &r)) {
	case SCREEN_MORE:
		if ((size_t)n == sizeof(buf)) {
			http_screen_too_long(buf, (size_t)n, &r);
			pending_reject(pd, &r);
		} else if ((revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ||
			   ++pd->looks >= HTTP_SCREEN_LOOKS) {
			/* A head cut short (libmicrohttpd reads it, and
			 * closes as it would), or trickling in. */
			pending_pass(pd, NULL, NULL, 0);
		}
		break;
	case SCREEN_PASS:
		bad = pipelined_bad(buf, (size_t)n, &r, &after);
		pending_pass(pd, &r, bad, after);
		break;
	case SCREEN_REJECT:
		pending_reject(pd, &r);
		break;
	}
	return 0;
}

/* fd (taken) waits for its first bytes; p: its address's count, or
 * NULL. Edge-triggered: a peek leaves the bytes readable, and the next
 * event is the next bytes. */
void pending_start(struct listener *l, int fd, const struct sockaddr *sa,
		   socklen_t len, struct peer *p)
{
	struct http *h = l->h;
	struct pending *pd = calloc(1, sizeof(*pd));

	if (!pd || sd_event_add_io(manager_loop(l->m), &pd->io, fd,
				   EPOLLIN | EPOLLRDHUP | EPOLLET,
				   on_first_bytes, pd) < 0) {
		free(pd);
		close(fd);
		peer_put(h, p);
		return;
	}
	/* A new connection's first request goes first (PRIO_FRESH). */
	sd_event_source_set_priority(pd->io, PRIO_FRESH);
	pd->l = l;
	pd->fd = fd;
	pd->peer = p;
	if (p)
		p->n++;
	memcpy(&pd->sa, sa, len);
	pd->len = len;
	sd_event_now(manager_loop(l->m), CLOCK_MONOTONIC, &pd->since);
	DL_APPEND(h->pending, pd);
	h->n_pending++;
}
