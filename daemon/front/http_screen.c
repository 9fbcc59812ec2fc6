// SPDX-License-Identifier: MIT
/*
 * The first request head of a connection, checked before libmicrohttpd
 * reads it (http_screen.h says why). The grammar is RFC 9112's, read
 * strictly where libmicrohttpd would misbehave or where the RFC says a
 * server must refuse, and leniently elsewhere: leading empty lines and
 * bare LF line ends are taken, bytes over 0x7f in the target and in
 * field values are left to libmicrohttpd and the API.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http_screen.h"

enum { GOOD, BAD };

/* What the head has said so far. */
struct head {
	int major, minor;
	unsigned int n_host, n_cl, n_te;
	unsigned long long cl; /* capped at CL_CAP */
	bool te_chunked;       /* the one Transfer-Encoding is "chunked" */
	const char *why;       /* a 400's message */
};

#define CL_CAP 1000000000000000000ULL

static bool is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A byte of a request target: visible ASCII, or beyond (left to the
 * URL's own checks). */
static bool is_target(unsigned char c)
{
	return (c > 0x20 && c < 0x7f) || c >= 0x80;
}

/* A byte of a field value: RFC 9110's field-vchar, SP and HTAB. */
static bool is_field(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/*
 * METHOD SP TARGET SP HTTP/D.D, s[0..n) without its line end; complete:
 * the line end came, else s is what came of the line so far (and is
 * good when it can still become a request line).
 */
static int request_line(const unsigned char *s, size_t n, bool complete,
			struct head *hd)
{
	static const char proto[] = "HTTP/";
	size_t i = 0, t;

	while (i < n && is_tchar(s[i]))
		i++;
	if (i == n)
		return complete ? BAD : GOOD;
	if (!i || s[i++] != ' ')
		return BAD;
	for (t = i; i < n && is_target(s[i]); i++)
		;
	if (i == n)
		return complete ? BAD : GOOD;
	if (i == t || s[i++] != ' ')
		return BAD;
	for (size_t k = 0; k < sizeof(proto) - 1; k++, i++) {
		if (i == n)
			return complete ? BAD : GOOD;
		if (s[i] != (unsigned char)proto[k])
			return BAD;
	}
	/* DIGIT "." DIGIT, then the end */
	if (i == n)
		return complete ? BAD : GOOD;
	if (!is_digit(s[i]))
		return BAD;
	hd->major = s[i++] - '0';
	if (i == n)
		return complete ? BAD : GOOD;
	if (s[i++] != '.')
		return BAD;
	if (i == n)
		return complete ? BAD : GOOD;
	if (!is_digit(s[i]))
		return BAD;
	hd->minor = s[i++] - '0';
	return i == n ? GOOD : BAD;
}

/* Content-Length's value, without its surrounding whitespace. */
static int content_length(const unsigned char *v, size_t n, struct head *hd)
{
	unsigned long long x = 0;

	if (!n) {
		hd->why = "Content-Length is not a number";
		return BAD;
	}
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(v[i])) {
			hd->why = "Content-Length is not a number";
			return BAD;
		}
		x = x >= CL_CAP / 10 ? CL_CAP : x * 10 + (v[i] - '0');
	}
	if (hd->n_cl++ && x != hd->cl) {
		hd->why = "Content-Length is given twice, differently";
		return BAD;
	}
	hd->cl = x;
	return GOOD;
}

static bool name_is(const unsigned char *s, size_t n, const char *name)
{
	return n == strlen(name) && !strncasecmp((const char *)s, name, n);
}

/* What a whole field line says: the ones that decide the framing. */
static int field_value(const unsigned char *name, size_t nn,
		       const unsigned char *v, size_t n, struct head *hd)
{
	while (n && (*v == ' ' || *v == '\t')) {
		v++;
		n--;
	}
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	if (name_is(name, nn, "Content-Length"))
		return content_length(v, n, hd);
	if (name_is(name, nn, "Transfer-Encoding")) {
		hd->te_chunked = !hd->n_te++ && name_is(v, n, "chunked");
		return GOOD;
	}
	if (name_is(name, nn, "Host"))
		hd->n_host++;
	return GOOD;
}

/* NAME ":" VALUE, s[0..n) without its line end (complete) or what came
 * of it so far. */
static int field_line(const unsigned char *s, size_t n, bool complete,
		      struct head *hd)
{
	size_t i = 0;

	if (n && (s[0] == ' ' || s[0] == '\t')) {
		hd->why = "header fields are not folded onto more lines "
			  "(RFC 9112, 5.2)";
		return BAD;
	}
	while (i < n && is_tchar(s[i]))
		i++;
	if (i == n && !complete)
		return GOOD;
	if (!i || i == n || s[i] != ':') {
		hd->why = "a header field is not NAME: VALUE (a token, then a "
			  "colon at once)";
		return BAD;
	}
	for (size_t k = i + 1; k < n; k++) {
		if (!is_field(s[k])) {
			hd->why = "a header field's value holds a control "
				  "byte";
			return BAD;
		}
	}
	return complete ? field_value(s, i, s + i + 1, n - i - 1, hd) : GOOD;
}

/* The head is whole: is its framing one libmicrohttpd handles? */
static enum screen_verdict reject(struct screen_result *r,
				  unsigned int status, const char *reason,
				  const char *code, const char *message)
{
	r->status = status;
	r->reason = reason;
	r->code = code;
	snprintf(r->message, sizeof(r->message), "%s", message);
	return SCREEN_REJECT;
}

static enum screen_verdict bad_request(struct screen_result *r,
				       const char *message)
{
	return reject(r, 400, "Bad Request", "bad_request", message);
}

/* The head is whole: is its framing one libmicrohttpd handles? */
static enum screen_verdict head_done(const struct head *hd, size_t max_body,
				     struct screen_result *r)
{
	if (hd->minor >= 1 ? hd->n_host != 1 : hd->n_host > 1)
		return bad_request(r, "an HTTP/1.1 request has exactly one "
				      "Host header field (RFC 9112, 3.2)");
	if (hd->n_te && hd->n_cl)
		return bad_request(r, "a request has Content-Length or "
				      "Transfer-Encoding, not both");
	if (hd->n_te && !hd->minor)
		return bad_request(r, "an HTTP/1.0 request has no "
				      "Transfer-Encoding");
	if (hd->n_te && !hd->te_chunked)
		return reject(r, 501, "Not Implemented", "not_implemented",
			      "the one transfer coding taken is chunked");
	if (hd->cl > max_body) {
		reject(r, 413, "Content Too Large", "body_too_large", "");
		snprintf(r->message, sizeof(r->message),
			 "request bodies are limited to %zu bytes", max_body);
		return SCREEN_REJECT;
	}
	return SCREEN_PASS;
}

void http_screen_too_long(const char *buf, size_t len,
			  struct screen_result *r)
{
	const char *s = buf, *end = buf + len;

	while (s < end && (*s == '\r' || *s == '\n'))
		s++;
	r->head = end - s >= 5 && !memcmp(s, "HEAD ", 5);
	if (!memchr(s, '\n', (size_t)(end - s)))
		reject(r, 414, "URI Too Long", "uri_too_long", "");
	else
		reject(r, 431, "Request Header Fields Too Large",
		       "header_too_large", "");
	snprintf(r->message, sizeof(r->message),
		 "request heads are limited to %d bytes", HTTP_SCREEN_WINDOW);
}

enum screen_verdict http_screen(const char *buf, size_t len,
				size_t max_body, struct screen_result *r)
{
	const unsigned char *s = (const unsigned char *)buf;
	const unsigned char *end = s + len;
	struct head hd = { .major = -1 };
	bool first = true;

	r->head = false;
	r->sized = false;
	r->length = 0;
	/* Empty lines before the request line are taken (RFC 9112, 2.2). */
	while (s < end && (*s == '\n' || (*s == '\r' && s + 1 < end &&
					  s[1] == '\n')))
		s += *s == '\r' ? 2 : 1;
	r->head = end - s >= 5 && !memcmp(s, "HEAD ", 5);
	while (s < end || !first) {
		const unsigned char *lf = memchr(s, '\n', (size_t)(end - s));
		size_t n = (size_t)((lf ? lf : end) - s);
		int bad;

		/* The line end is CRLF or LF; a CR waiting for its LF is
		 * not judged yet. */
		if (n && s[n - 1] == '\r' && (lf || s + n == end))
			n--;
		if (first) {
			bad = request_line(s, n, lf != NULL, &hd);
			if (!bad && hd.major >= 0 && hd.major != 1 && lf)
				return reject(r, 505,
					      "HTTP Version Not Supported",
					      "version_not_supported",
					      "this server speaks HTTP/1.0 "
					      "and HTTP/1.1");
			if (bad)
				hd.why = "the request line is not METHOD TARGET "
					 "HTTP/1.x";
		} else if (lf && !n) {
			r->sized = !hd.n_te;
			r->length = (unsigned long long)(lf + 1 -
							 (const unsigned char *)buf) +
				    hd.cl;
			return head_done(&hd, max_body, r);
		} else {
			bad = field_line(s, n, lf != NULL, &hd);
		}
		if (bad)
			return bad_request(r, hd.why);
		if (!lf)
			break;
		s = lf + 1;
		first = false;
	}
	return SCREEN_MORE;
}
