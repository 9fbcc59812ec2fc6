/* SPDX-License-Identifier: MIT */
/*
 * A request head of a REST connection, read (peeked) before
 * libmicrohttpd reads it (http_early.c: a connection's first, before
 * libmicrohttpd has the connection, and a later one where it is known
 * where it starts): what libmicrohttpd 0.9.75 answers badly or not at
 * all is answered there, at once, with one response head (issue 38):
 *
 *   - a request line that is not HTTP (binary bytes, a TLS hello on the
 *     plain port): libmicrohttpd waits for a line end, up to the header
 *     deadline;
 *   - a Content-Length that is not a number (-1, abc, "5, 5") or that
 *     overflows: libmicrohttpd queues its error answer, then answers
 *     again, two heads on one connection (parse_connection_headers()
 *     and the MHD_CONNECTION_HEADERS_RECEIVED case after it);
 *   - a Content-Length over the body limit: libmicrohttpd waits for a
 *     body that will be refused anyway;
 *   - a Transfer-Encoding other than chunked: libmicrohttpd waits for
 *     the end of the connection as the end of the body.
 *
 * It also refuses what RFC 9112 says a server must not take: whitespace
 * before a field's colon, line folding, control bytes in a field, both
 * Content-Length and Transfer-Encoding, an HTTP/1.1 request without
 * exactly one Host.
 */
#ifndef RDMAD_HTTP_SCREEN_H
#define RDMAD_HTTP_SCREEN_H

#include <stdbool.h>
#include <stddef.h>

/* The longest first request head: a longer one is refused (431), as
 * libmicrohttpd would refuse it past its memory for the connection. */
#define HTTP_SCREEN_WINDOW (16 * 1024)

enum screen_verdict {
	SCREEN_MORE,   /* a good start of a head: the rest is to come */
	SCREEN_PASS,   /* a whole head, to libmicrohttpd */
	SCREEN_REJECT, /* answered here: status, code, message */
};

struct screen_result {
	unsigned int status; /* 400, 413, 414, 431, 501 or 505 */
	const char *reason;  /* the status line's phrase */
	const char *code;    /* the error document's code */
	char message[128];   /* its message (no byte that JSON escapes) */
	bool head;           /* a HEAD request: the answer has no body */
	/* SCREEN_PASS: the request's bytes, empty lines before it, head
	 * and body, when its head says (sized: no Transfer-Encoding). */
	bool sized;
	unsigned long long length;
};

/*
 * The verdict on buf[0..len), the bytes a connection has sent so far
 * (the head is judged as soon as it is whole: what follows it is not
 * looked at). max_body: the body limit (a larger Content-Length gets
 * 413).
 */
enum screen_verdict http_screen(const char *buf, size_t len,
				size_t max_body, struct screen_result *r);
/* The answer to a head buf[0..len) that fills the window without an
 * end: 414 when its request line has not ended yet, else 431. */
void http_screen_too_long(const char *buf, size_t len,
			  struct screen_result *r);

#endif
