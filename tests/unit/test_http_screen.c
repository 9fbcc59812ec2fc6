// SPDX-License-Identifier: MIT
/*
 * The first request head of a REST connection, judged before
 * libmicrohttpd reads it (daemon/front/http_screen.c): good heads pass,
 * a good start waits for the rest, and what libmicrohttpd 0.9.75 would
 * answer twice, late or never is refused with the right status. Every
 * case is also judged cut at every length: a prefix of a good head never
 * gets refused, and one of a bad head is never passed before it is whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "http_screen.h"

#define MAX_BODY 65536

struct screen_case {
	const char *name;
	const char *bytes;
	size_t len; /* 0: strlen(bytes) */
	unsigned int status; /* 0: passes once whole */
};

#define GET "GET /v1/health HTTP/1.1\r\nHost: x\r\n"
#define POST "POST /v1/reload HTTP/1.1\r\nHost: x\r\n"

static const struct screen_case cases[] = {
	{ "get", GET "\r\n", 0, 0 },
	{ "get, bare LF", "GET / HTTP/1.1\nHost: x\n\n", 0, 0 },
	{ "HTTP/1.0 without Host", "GET /v1/health HTTP/1.0\r\n\r\n", 0, 0 },
	{ "empty lines first", "\r\n\r\n" GET "\r\n", 0, 0 },
	{ "post with a body", POST "Content-Length: 2\r\n\r\n{}", 0, 0 },
	{ "Content-Length at the limit", POST "Content-Length: 65536\r\n\r\n",
	  0, 0 },
	{ "Content-Length twice, the same", POST "Content-Length: 2\r\n"
	  "content-length:2 \r\n\r\n{}", 0, 0 },
	{ "chunked", POST "Transfer-Encoding: Chunked\r\n\r\n0\r\n\r\n", 0, 0 },
	{ "pipelined", GET "\r\n" GET "\r\n", 0, 0 },
	{ "field values with obs-text and tabs", GET "X-A: \xc3\xa9\tb\r\n\r\n",
	  0, 0 },
	{ "HTTP/1.2", "GET / HTTP/1.2\r\nHost: x\r\n\r\n", 0, 0 },
	{ "garbage", "\x00\x01\x02\xff", 4, 400 },
	{ "garbage with a line end", "\x00\x01\x02\xff\r\n\r\n", 8, 400 },
	{ "TLS hello on the plain port", "\x16\x03\x01\x02\x00\x01", 6, 400 },
	{ "lower-case protocol", "GET / http/1.1\r\nHost: x\r\n\r\n", 0, 400 },
	{ "no version", "GET /v1/health\r\n\r\n", 0, 400 },
	{ "two spaces", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 0, 400 },
	{ "method not a token", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 0, 400 },
	{ "control byte in the target", "GET /a\x01 HTTP/1.1\r\n\r\n", 0, 400 },
	{ "a CR alone", "GET / HTTP/1.1\rHost: x\r\n\r\n", 0, 400 },
	{ "trailing bytes after the version", "GET / HTTP/1.1x\r\n\r\n", 0, 400 },
	{ "HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 0, 505 },
	{ "HTTP/0.9", "GET / HTTP/0.9\r\n\r\n", 0, 505 },
	{ "Content-Length -1", GET "Content-Length: -1\r\n\r\n", 0, 400 },
	{ "Content-Length abc", GET "Content-Length: abc\r\n\r\n", 0, 400 },
	{ "Content-Length +5", POST "Content-Length: +5\r\n\r\n", 0, 400 },
	{ "Content-Length empty", POST "Content-Length: \r\n\r\n", 0, 400 },
	{ "Content-Length a list", POST "Content-Length: 2, 2\r\n\r\n", 0, 400 },
	{ "Content-Length hex", POST "Content-Length: 0x10\r\n\r\n", 0, 400 },
	{ "Content-Length twice, differently", POST "Content-Length: 2\r\n"
	  "Content-Length: 3\r\n\r\n{}", 0, 400 },
	{ "Content-Length 70000", POST "Content-Length: 70000\r\n\r\n", 0, 413 },
	{ "Content-Length 1e12", POST "Content-Length: 1000000000000\r\n\r\n",
	  0, 413 },
	{ "Content-Length past 2^64", GET "Content-Length: "
	  "99999999999999999999999\r\n\r\n", 0, 413 },
	{ "Content-Length and Transfer-Encoding", POST "Content-Length: 5\r\n"
	  "Transfer-Encoding: chunked\r\n\r\n", 0, 400 },
	{ "Transfer-Encoding gzip", POST "Transfer-Encoding: gzip\r\n\r\n",
	  0, 501 },
	{ "Transfer-Encoding twice", POST "Transfer-Encoding: chunked\r\n"
	  "Transfer-Encoding: chunked\r\n\r\n", 0, 501 },
	{ "Transfer-Encoding in HTTP/1.0", "POST /v1/reload HTTP/1.0\r\n"
	  "Transfer-Encoding: chunked\r\n\r\n", 0, 400 },
	{ "HTTP/1.1 without Host", "GET /v1/health HTTP/1.1\r\n\r\n", 0, 400 },
	{ "two Hosts", GET "Host: y\r\n\r\n", 0, 400 },
	{ "space before the colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 0,
	  400 },
	{ "no colon", GET "Bogus header\r\n\r\n", 0, 400 },
	{ "empty name", GET ": x\r\n\r\n", 0, 400 },
	{ "folded", GET "X-A: a\r\n b\r\n\r\n", 0, 400 },
	{ "NUL in a value", GET "X-A: a\0b\r\n\r\n", sizeof(GET) + 9, 400 },
	{ "control byte in a value", GET "X-A: a\x01" "b\r\n\r\n", 0, 400 },
};

static size_t case_len(const struct screen_case *c)
{
	return c->len ? c->len : strlen(c->bytes);
}

static void test_whole(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct screen_case *c = &cases[i];
		struct screen_result r;
		enum screen_verdict v = http_screen(c->bytes, case_len(c),
						    MAX_BODY, &r);

		if (!c->status) {
			if (v != SCREEN_PASS)
				fail_msg("%s: %d, %s", c->name, v, r.message);
			continue;
		}
		if (v != SCREEN_REJECT || r.status != c->status)
			fail_msg("%s: verdict %d, status %u, not %u", c->name,
				 v, v == SCREEN_REJECT ? r.status : 0,
				 c->status);
		assert_non_null(r.code);
		assert_non_null(r.reason);
		assert_true(r.message[0]);
		/* The message goes into JSON as it is. */
		assert_null(strpbrk(r.message, "\"\\"));
	}
}

/* Cut anywhere: a good head's start waits for the rest; a bad head is
 * refused as soon as it is plain, and never passed. */
static void test_cut(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct screen_case *c = &cases[i];
		size_t len = case_len(c);

		for (size_t n = 0; n < len; n++) {
			struct screen_result r;
			enum screen_verdict v = http_screen(c->bytes, n,
							    MAX_BODY, &r);

			if (!c->status && v == SCREEN_REJECT)
				fail_msg("%s cut at %zu: refused (%s)",
					 c->name, n, r.message);
			if (c->status && v == SCREEN_PASS)
				fail_msg("%s cut at %zu: passed", c->name, n);
		}
	}
}

/* A head longer than the window is refused: 414 while its request line
 * goes on, 431 after; and HEAD's answer has no body. */
static void test_too_long_and_head(void **state)
{
	struct screen_result r;

	(void)state;
	http_screen_too_long(GET "X-A: aaaa", sizeof(GET) + 8, &r);
	assert_int_equal(r.status, 431);
	assert_string_equal(r.code, "header_too_large");
	http_screen_too_long("\r\nGET /aaaaaaaa", 15, &r);
	assert_int_equal(r.status, 414);
	assert_string_equal(r.code, "uri_too_long");
	assert_false(r.head);
	assert_int_equal(http_screen("HEAD / HTTP/1.1\r\nHost: x\r\n"
				     "Content-Length: -1\r\n\r\n",
				     48, MAX_BODY, &r),
			 SCREEN_REJECT);
	assert_true(r.head);
	assert_int_equal(http_screen("\x01", 1, MAX_BODY, &r),
			 SCREEN_REJECT);
	assert_false(r.head);
}

/* A head that passes says how many bytes its request is: what the
 * front end counts to know where the next request starts. */
static void test_length(void **state)
{
	static const char post[] = "\r\n" POST "Content-Length: 2\r\n\r\n{}";
	static const char two[] = GET "\r\n" GET "\r\n";
	static const char chunked[] = POST "Transfer-Encoding: chunked\r\n\r\n";
	struct screen_result r;

	(void)state;
	assert_int_equal(http_screen(post, sizeof(post) - 1, MAX_BODY, &r),
			 SCREEN_PASS);
	assert_true(r.sized);
	assert_int_equal(r.length, sizeof(post) - 1);
	/* Not the body yet: the head says how long it is. */
	assert_int_equal(http_screen(post, sizeof(post) - 3, MAX_BODY, &r),
			 SCREEN_PASS);
	assert_int_equal(r.length, sizeof(post) - 1);
	assert_int_equal(http_screen(two, sizeof(two) - 1, MAX_BODY, &r),
			 SCREEN_PASS);
	assert_int_equal(r.length, (sizeof(two) - 1) / 2);
	assert_int_equal(http_screen(chunked, sizeof(chunked) - 1, MAX_BODY,
				     &r),
			 SCREEN_PASS);
	assert_false(r.sized);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole),
		cmocka_unit_test(test_cut),
		cmocka_unit_test(test_too_long_and_head),
		cmocka_unit_test(test_length),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
