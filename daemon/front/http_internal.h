/* SPDX-License-Identifier: MIT */
/*
 * The REST front end's parts, for its files only (they call each other
 * by name):
 *
 *   http.c         the face: requests and answers, the document cache,
 *                  start and stop
 *   http_stream.c  GET /v1/events
 *   http_conn.c    listening, accepting, the caps and deadlines of
 *                  connections, libmicrohttpd on the loop; it hands
 *                  libmicrohttpd the face's request callbacks
 *                  (http_on_request(), http_on_completed()), and each
 *                  turn of its sweep pings the streams
 *   http_early.c   what is answered before libmicrohttpd: request heads
 *                  judged before it reads them (http_screen.c, which
 *                  calls nothing), answers on the socket, lingering
 *                  closes
 *
 * and http_host.c, which calls nothing: whom a request's Host and
 * Origin name (http.c asks it at each request's headers).
 */
#ifndef RDMAD_HTTP_INTERNAL_H
#define RDMAD_HTTP_INTERNAL_H

#include "mhd.h"
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <uthash.h>

#include "budget.h"
#include "events.h"
#include "http_host.h"
#include "manager.h"

#define HTTP_MAX_BODY (64 * 1024)
/* What libmicrohttpd may hold for one connection: the request line,
 * headers and the reply's head (bodies are ours, HTTP_MAX_BODY). */
#define HTTP_CONNECTION_MEMORY (32 * 1024)

/*
 * We accept connections ourselves and hand them to libmicrohttpd
 * (MHD_add_connection): so that a full descriptor table pauses the
 * listener instead of stopping libmicrohttpd's accepting for good, that
 * a client beyond the caps is told so at once, and that clients off the
 * machine are counted per address.
 */
struct listener {
	struct http *h;
	struct manager *m;
	struct MHD_Daemon *mhd;
	int fd;
	bool local; /* unix or loopback: not limited per address */
	bool tls;
	char *addr; /* the config's goes at a reload: our own copy */
	sd_event_source *accept_io;
	struct accept_pause pause;
	sd_event_source *io;
	sd_event_source *timer;
	sd_event_source *again; /* libmicrohttpd again, at the next turn */
	unsigned int n_fresh; /* connections before their first reply */
	char *unix_path;      /* to unlink at stop */
};

/* Connections per client address (non-loopback TCP). */
struct peer {
	unsigned char key[17]; /* family, then the address */
	unsigned int n;
	UT_hash_handle hh;
};

/* One connection: until its request's headers are in, it is on the
 * header list, oldest first, and is closed when header_timeout passes. */
struct conn {
	struct conn *prev, *next;
	struct listener *l;
	struct MHD_Connection *c;
	struct peer *peer;
	uint64_t since;
	bool waiting;
	bool fresh;  /* no reply yet */
	bool linger; /* answered before its body was read: see lingering */
	bool refused; /* a request refused here: nothing more is served */
	/* Its last request came without the token: it holds one of the
	 * anonymous clients' connections (http.anon_max) until a request
	 * with the token comes on it, or it closes. */
	bool anon;
	/*
	 * Where its next request starts, while that is known: then the
	 * next head is judged before libmicrohttpd reads it, as a first
	 * one is (http_conn.c, conn_request_done).
	 */
	bool tracked;
	uint64_t used;   /* the bytes of its requests done */
	uint64_t length; /* the bytes of the request in hand */
	unsigned int looks;
	sd_event_source *next_io;
	/* A pipelined request found bad in the first bytes, answered when
	 * the bad_after requests before it are done. */
	unsigned int done, bad_after;
	struct screen_result *bad;
};

/*
 * A connection accepted on a plain (not TLS) listener, before
 * libmicrohttpd has it: its first request head is peeked at and judged
 * (http_screen.h) as its bytes come, then the connection goes to
 * libmicrohttpd, which reads it all itself, or is answered here. It
 * counts towards the caps, and is closed when header_timeout passes.
 */
struct pending {
	struct pending *prev, *next; /* utlist: oldest first */
	struct listener *l;
	int fd;
	sd_event_source *io;
	struct peer *peer;
	uint64_t since;
	unsigned int looks; /* peeks so far: HTTP_SCREEN_LOOKS at most */
	struct sockaddr_storage sa;
	socklen_t len;
};

/* Each look peeks and judges the head from its start again: a head that
 * comes in more pieces than this goes to libmicrohttpd as it is, so that
 * a client trickling bytes costs the loop no more than a few windows. */
#define HTTP_SCREEN_LOOKS 32

/*
 * A connection answered before its request was read whole (a refused
 * head, a body over the limit): closed at once, the bytes the client
 * still sends would make the kernel reset the connection, and the reset
 * can reach the client before it has read the answer. Its side is shut
 * down, and what comes is read and thrown away until the client closes,
 * for HTTP_LINGER_USEC or HTTP_LINGER_BYTES at most.
 */
struct lingering {
	struct lingering *prev, *next; /* utlist: oldest first */
	struct http *h;
	int fd;
	sd_event_source *io;
	uint64_t until;
	size_t drained;
};

#define HTTP_LINGER_USEC (2 * 1000000ULL)
#define HTTP_LINGER_BYTES (1024 * 1024)

/*
 * A new connection's first request is served before the control
 * socket's busy sessions (as a new session's first messages are): while
 * a listener has fresh connections, libmicrohttpd runs at that
 * priority; otherwise it takes its turn with the sessions.
 */
#define PRIO_FRESH (SD_EVENT_PRIORITY_NORMAL - 10)


/*
 * GET /v1/events: a Server-Sent Events stream. Each event of the bus is
 * queued (bounded: a reader too slow is dropped with a last "overflow"
 * event) and written as "id: SEQ\nevent: NAME\ndata: JSON\n\n" by
 * libmicrohttpd's content reader. With nothing to send, the connection
 * is suspended (libmicrohttpd neither polls nor times it out) until an
 * event comes or a keep-alive comment is due; the keep-alives show
 * that the stream is not idle, and find peers that have gone.
 */
struct stream {
	struct stream *prev, *next;
	struct http *h;
	struct listener *l;
	struct MHD_Connection *c;
	struct events_queue q;
	char *chunk; /* being written */
	size_t len, off;
	bool suspended;
	bool ping;   /* a keep-alive is due */
	bool ending; /* the last words are out: end of stream next */
	bool admin;  /* the bearer token: sees other users' processes */
};

struct screen_result;

/* Requests after the first that are judged in the first bytes of a
 * connection (a pipelining client), at most. */
#define HTTP_SCREEN_PIPELINED 64

/* Events streams at most: a share of the connections, so that
 * subscribers never hold every one. */
#define HTTP_STREAMS_SHARE 2
#define HTTP_STREAM_KEEPALIVE_USEC (15 * 1000000ULL)
/* Retry-After of a 503 for want of a connection (RFC 9110, 10.2.3):
 * seconds. */
#define HTTP_RETRY_AFTER 2

/* What the connections' part calls in the face: libmicrohttpd's
 * request and request-completed callbacks (their cls: the listener,
 * NULL), and sweep(ud, now) at each turn of the sweep (keep-alives). */
struct http {
	struct listener *l;
	size_t n;
	struct stream *streams;
	unsigned int n_streams;
	uint64_t last_ping;
	struct cached *cache;
	unsigned int n_conns, max_conns, per_address;
	/*
	 * Connections whose last request had no token (streams, idle
	 * keep-alives, requests in hand), at most anon_max: the rest of
	 * max_conns (daemon.http.reserved_connections) is for requests
	 * with the token, and at the cap a new connection takes the place
	 * of one that holds it without a request (http_conn.c,
	 * make_room): the token holder is never starved (issue 45).
	 */
	unsigned int n_anon, anon_max;
	unsigned long long evicted;
	struct host_names hosts; /* whom Host and Origin may name */
	unsigned long long refused, timed_out;
	uint64_t header_timeout; /* usec */
	struct conn *wait_head, *wait_tail;
	struct pending *pending;     /* oldest first */
	unsigned int n_pending;
	struct lingering *lingering; /* oldest first */
	unsigned int n_lingering;
	sd_event_source *sweep;
	struct peer *peers;
	struct peer *adding; /* the peer of the connection being added */
	bool adding_tracked; /* its first request's length is known: */
	uint64_t adding_length;
	struct screen_result *adding_bad; /* and a bad one after it */
	unsigned int adding_bad_after;
	char *cert, *key;    /* PEM, for TLS */
	struct manager *m;
	char *token; /* the bearer token (daemon.http.token_file), or NULL */
};


/* http.c: libmicrohttpd's callbacks for a request (its access
 * handler) and for a request done (cls: the listener). */
enum MHD_Result http_on_request(void *cls, struct MHD_Connection *c,
				const char *url, const char *method,
				const char *version, const char *upload,
				size_t *upload_size, void **state);
void http_on_completed(void *cls, struct MHD_Connection *c, void **state,
		       enum MHD_RequestTerminationCode toe);

/* http_conn.c */
/* Its request's headers are in: no deadline until the next request. */
void conn_headers_done(struct conn *cn);
/* Its first reply is out: it no longer goes first. */
void conn_unfresh(struct conn *cn);
/* From now on, the headers of a request must be in within
 * header_timeout: appended, so that the list stays oldest first. */
void conn_wait_headers(struct conn *cn);
/* A PEM file, read whole (the key stays in memory only as long as
 * libmicrohttpd needs it: for the daemon's life). */
int read_pem(const char *path, char **out);
int listener_start(struct manager *m, struct http *h,
		   struct listener *l, const char *addr);
/* libmicrohttpd runs again at the next turn of the loop (a suspended
 * connection was resumed, or work is buffered). */
void listener_kick(struct listener *l);
void listener_stop(struct listener *l);

/* http_early.c */
/* Its request is done and it is kept alive: its next head is judged
 * before libmicrohttpd reads it, where it is known where it starts. */
void conn_request_done(struct conn *cn);
/* fd (taken) waits for its first bytes, which are judged before
 * libmicrohttpd has it; p: its address's count, or NULL. */
void pending_start(struct listener *l, int fd, const struct sockaddr *sa,
		   socklen_t len, struct peer *p);
/* pd is done with; its fd is returned, or closed (keep false). */
int pending_end(struct pending *pd, bool keep);
/* An error answer written on a fresh socket (plain HTTP only); head: to
 * a HEAD request, without its body; retry_after: seconds, 0: none. */
void answer_direct(int fd, unsigned int status, const char *reason,
		   const char *code, const char *why, bool head,
		   unsigned int retry_after);
/* At the cap: the oldest connection not yet handed to libmicrohttpd that
 * has not sent a whole request head (nothing, or a head looked at and
 * not finished) gives its place to a new one: told 503 (come back
 * later) and closed. false: there is none. */
bool pending_evict(struct http *h);
/* fd (taken), its sending side shut down already: what still comes is
 * read, then it is closed. */
void linger_start(struct http *h, sd_event *event, int fd);
void linger_end(struct lingering *lg);
/* A peer with no connection left is forgotten. */
void peer_put(struct http *h, struct peer *p);

/* http_conn.c */
/* The sweep of connections past their header deadline. */
int conns_start(struct manager *m, struct http *h);
/* The sweep ends, and the lingering connections are closed (after
 * every listener_stop()). */
void conns_stop(struct http *h);
/* Connections open: libmicrohttpd's, those not yet handed to it, and
 * those lingering. */
unsigned int conns_open(const struct http *h);

/* http_stream.c */
/* Whether the events streams hold their share of the connections. */
bool streams_full(const struct http *h);
/* GET /v1/events on c: its response queued (streams_full() false). */
/* admin: the request carried the bearer token (view.h). */
enum MHD_Result stream_start(struct listener *l, struct MHD_Connection *c,
			     bool admin);
/* Every stream gets a keep-alive when one is due; every stream ends
 * (stop): libmicrohttpd stops no daemon with suspended connections. */
void streams_ping(struct http *h, uint64_t now, bool end);

#endif
