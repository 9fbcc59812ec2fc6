// SPDX-License-Identifier: MIT
/*
 * The wire protocol: table-driven tests of the codec (round trips of
 * every type, every malformed header and payload rejected with its
 * code), then the socket layer on real SOCK_SEQPACKET pairs, counting
 * /proc/self/fd around each test so that a leaked fd fails it.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto.h"
#include "util.h"

/* ---- helpers ---- */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static int make_memfd(const char *content)
{
	int fd = memfd_create("proto-test", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)),
			 (ssize_t)strlen(content));
	return fd;
}

static void check_memfd(int fd, const char *content)
{
	char got[64] = { 0 };

	assert_int_equal(pread(fd, got, sizeof(got) - 1, 0),
			 (ssize_t)strlen(content));
	assert_string_equal(got, content);
}

static void make_pair(int sv[2], int extra_flags)
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
						     extra_flags,
				    0, sv),
			 0);
}

static void close_pair(int sv[2])
{
	closep(&sv[0]);
	closep(&sv[1]);
}

/* Send any bytes with any fds, bypassing the codec. */
static void raw_send(int sock, const void *buf, size_t len, const int *fds,
		     size_t n_fds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 256)];
	} control;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	assert_true(n_fds <= 256);
	if (n_fds) {
		struct cmsghdr *c;

		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
	}
	assert_int_equal(sendmsg(sock, &mh, MSG_NOSIGNAL), (ssize_t)len);
}

/*
 * The numbers the kernel will give the next n fds (it always takes the
 * lowest free ones), so that a test can check afterwards that nothing
 * was left open under them.
 */
static void next_fd_numbers(int *nums, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		nums[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(nums[i] >= 0);
	}
	for (i = 0; i < n; i++)
		close(nums[i]);
}

/* A frame with the given header fields; length computed unless set. */
static size_t make_frame(uint8_t *buf, size_t cap, uint16_t type,
			 uint16_t n_fds, uint32_t id, const char *payload)
{
	size_t plen = strlen(payload);
	struct proto_hdr h = {
		.magic = PROTO_MAGIC,
		.version = PROTO_VERSION,
		.type = type,
		.n_fds = n_fds,
		.id = id,
		.length = plen,
	};

	assert_true(PROTO_HDR_SIZE + plen <= cap);
	proto_hdr_pack(&h, buf);
	memcpy(buf + PROTO_HDR_SIZE, payload, plen);
	return PROTO_HDR_SIZE + plen;
}

/* {"a":[[...]]} nested depth levels deep in all (the object is one). */
static char *nested(int depth)
{
	size_t inner = depth - 1, i;
	char *s = malloc(inner * 2 + 16);

	assert_non_null(s);
	strcpy(s, "{\"a\":");
	for (i = 0; i < inner; i++)
		strcat(s, "[");
	if (!inner)
		strcat(s, "0");
	for (i = 0; i < inner; i++)
		strcat(s, "]");
	strcat(s, "}");
	return s;
}

/* Counts jansson's allocations, to show what it was never given. */
static size_t json_allocs;

static void *counting_malloc(size_t n)
{
	json_allocs++;
	return malloc(n);
}

/* ---- golden bytes: the layout is little-endian, field by field ---- */

static void test_golden_header(void **state)
{
	static const uint8_t want[] = {
		0x52, 0x44, 0x4d, 0x44, /* magic "RDMD" */
		0x01, 0x00,		/* version 1 */
		0x07, 0x00,		/* type ATTACHED */
		0x00, 0x00,		/* flags */
		0x02, 0x00,		/* n_fds 2 */
		0x04, 0x03, 0x02, 0x01, /* id 0x01020304 */
		0x07, 0x00, 0x00, 0x00, /* length 7 */
		'{',  '"',  'a',  '"',  ':', '1', '}',
	};
	struct proto_msg m;
	proto_msg_init(&m);
	struct proto_hdr h;
	uint8_t buf[64];
	size_t len;

	(void)state;
	m.type = PROTO_ATTACHED;
	m.id = 0x01020304;
	m.n_fds = 2;
	m.payload = json_pack("{s:i}", "a", 1);
	assert_int_equal(proto_encode(&m, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	assert_memory_equal(buf, "RDMD", 4);

	proto_hdr_unpack(want, &h);
	assert_int_equal(h.magic, PROTO_MAGIC);
	assert_int_equal(h.version, 1);
	assert_int_equal(h.type, PROTO_ATTACHED);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.n_fds, 2);
	assert_int_equal(h.id, 0x01020304);
	assert_int_equal(h.length, 7);
	m.n_fds = 0; /* the fds were never real */
	proto_msg_clear(&m);
}

/* ---- round trips ---- */

struct round_trip {
	const char *name;
	uint16_t type;
	uint32_t id;
	const char *payload; /* NULL: no payload, sent as {} */
	size_t n_fds;
};

static const struct round_trip round_trips[] = {
	{ "round trip HELLO", PROTO_HELLO, 1, "{\"versions\":[1,1]}", 0 },
	{ "round trip WELCOME", PROTO_WELCOME, 1,
	  "{\"version\":1,\"server\":\"rdmad\",\"server_version\":\"0.1.0\"}",
	  0 },
	{ "round trip ERROR", PROTO_ERROR, 9,
	  "{\"error\":{\"code\":\"not_found\",\"message\":\"no profile 'x'\"}}",
	  0 },
	{ "round trip REQUEST", PROTO_REQUEST, 2,
	  "{\"method\":\"GET\",\"path\":\"/v1/profiles\",\"body\":{}}", 0 },
	{ "round trip REPLY", PROTO_REPLY, 2,
	  "{\"status\":200,\"body\":{\"profiles\":[{\"name\":\"p\","
	  "\"state\":\"ready\",\"leases\":0}]}}",
	  0 },
	{ "round trip ATTACH", PROTO_ATTACH, 3,
	  "{\"profile\":\"p\",\"flags\":0}", 0 },
	{ "round trip ATTACHED, no fds", PROTO_ATTACHED, 3,
	  "{\"mode\":\"local\"}", 0 },
	{ "round trip ATTACHED, 3 fds", PROTO_ATTACHED, 3,
	  "{\"mode\":\"shared\",\"context\":{\"fd\":0},\"pd\":{\"a\":"
	  "{\"handle\":1}},\"mr\":{\"ring\":{\"handle\":2,\"iova\":"
	  "140737488355328,\"length\":1048576,\"fd\":1}}}",
	  3 },
	{ "round trip ATTACHED, max fds", PROTO_ATTACHED, 3, "{}",
	  PROTO_MAX_FDS },
	{ "round trip DETACH", PROTO_DETACH, 4, "{\"profile\":\"p\"}", 0 },
	{ "round trip DETACHED", PROTO_DETACHED, 4, "{\"profile\":\"p\"}", 0 },
	{ "round trip REPORT", PROTO_REPORT, 5,
	  "{\"profile\":\"p\",\"mr\":{\"ring\":{\"lkey\":4660,"
	  "\"rkey\":22136}}}",
	  0 },
	{ "round trip EVENT", PROTO_EVENT, 0,
	  "{\"event\":\"device_removed\",\"attachment\":7,"
	  "\"profile\":\"p\",\"device\":\"rxe0\",\"reason\":\"gone\"}",
	  0 },
	{ "round trip: no payload is {}", PROTO_DETACHED, 0, NULL, 0 },
	{ "round trip: id 0xffffffff", PROTO_REQUEST, 0xffffffff, "{}", 0 },
	{ "round trip: every JSON kind", PROTO_REPLY, 6,
	  "{\"s\":\"\\u00fc\\u20ac\\ud83d\\ude00 \\\"q\\\" \\\\\",\"i\":-9007199254740993,"
	  "\"u\":9223372036854775807,\"r\":0.1,\"t\":true,\"f\":false,"
	  "\"n\":null,\"a\":[],\"o\":{}}",
	  0 },
};

static void test_round_trip(void **state)
{
	const struct round_trip *c = *state;
	struct proto_msg in, out;
	proto_msg_init(&in);
	proto_msg_init(&out);
	json_t *want;
	uint8_t *buf = malloc(PROTO_MAX_FRAME);
	size_t len, i;

	assert_non_null(buf);
	in.type = c->type;
	in.id = c->id;
	in.n_fds = c->n_fds;
	if (c->payload) {
		in.payload = json_loads(c->payload, 0, NULL);
		assert_non_null(in.payload);
	}
	assert_int_equal(proto_encode(&in, buf, PROTO_MAX_FRAME, &len), 0);
	assert_int_equal(proto_decode(buf, len, c->n_fds, &out), 0);
	assert_int_equal(out.type, c->type);
	assert_int_equal(out.flags, 0);
	assert_int_equal(out.id, c->id);
	assert_int_equal(out.n_fds, c->n_fds);
	for (i = 0; i < PROTO_MAX_FDS; i++)
		assert_int_equal(out.fds[i], -1);
	want = in.payload ? json_incref(in.payload) : json_object();
	assert_true(json_equal(out.payload, want));
	json_decref(want);
	in.n_fds = 0;
	proto_msg_clear(&in);
	proto_msg_clear(&out);
	free(buf);
}

/* ---- malformed frames ---- */

enum field { F_NONE, F_MAGIC, F_VERSION, F_TYPE, F_FLAGS, F_NFDS, F_LENGTH };

struct bad_frame {
	const char *name;
	uint16_t type;	  /* of the valid frame before the change */
	enum field field; /* the header field to change */
	uint32_t value;	  /* its new value */
	long cut;	  /* >= 0: present only this many bytes */
	size_t n_fds;	  /* fds "received" with the frame */
	int want;
	bool id_known; /* whether m.id is set despite the error */
};

static const struct bad_frame bad_frames[] = {
    {"empty datagram", PROTO_REQUEST, F_NONE, 0, 0, 0, -EBADMSG, false},
    {"one byte", PROTO_REQUEST, F_NONE, 0, 1, 0, -EBADMSG, false},
    {"header cut short", PROTO_REQUEST, F_NONE, 0, PROTO_HDR_SIZE - 1, 0,
     -EBADMSG, false},
    {"header without its payload", PROTO_REQUEST, F_NONE, 0, PROTO_HDR_SIZE, 0,
     -EBADMSG, true},
    {"payload cut short", PROTO_REQUEST, F_NONE, 0, PROTO_HDR_SIZE + 1, 0,
     -EBADMSG, true},
    {"magic zero", PROTO_REQUEST, F_MAGIC, 0, -1, 0, -EBADMSG, false},
    {"magic big-endian", PROTO_REQUEST, F_MAGIC, 0x52444d44, -1, 0, -EBADMSG,
     false},
    {"magic off by one bit", PROTO_REQUEST, F_MAGIC, PROTO_MAGIC ^ 1, -1, 0,
     -EBADMSG, false},
    {"version 0", PROTO_REQUEST, F_VERSION, 0, -1, 0, -EPROTONOSUPPORT, true},
    {"version 3", PROTO_REQUEST, F_VERSION, 3, -1, 0, -EPROTONOSUPPORT, true},
    {"version big-endian 1", PROTO_REQUEST, F_VERSION, 0x0100, -1, 0,
     -EPROTONOSUPPORT, true},
    {"version 0xffff", PROTO_HELLO, F_VERSION, 0xffff, -1, 0, -EPROTONOSUPPORT,
     true},
    {"type 0", PROTO_REQUEST, F_TYPE, 0, -1, 0, -EBADMSG, true},
    {"type one past the last", PROTO_REQUEST, F_TYPE, PROTO_MAPPED + 1, -1, 0,
     -EBADMSG, true},
    {"type 0xffff", PROTO_REQUEST, F_TYPE, 0xffff, -1, 0, -EBADMSG, true},
    {"flag bit 0", PROTO_REQUEST, F_FLAGS, 1, -1, 0, -EBADMSG, true},
    {"flag bit 15", PROTO_REQUEST, F_FLAGS, 0x8000, -1, 0, -EBADMSG, true},
    {"length one more than sent", PROTO_REQUEST, F_LENGTH, 3, -1, 0, -EBADMSG,
     true},
    {"length one less than sent", PROTO_REQUEST, F_LENGTH, 1, -1, 0, -EBADMSG,
     true},
    {"length 0", PROTO_REQUEST, F_LENGTH, 0, -1, 0, -EBADMSG, true},
    {"length 0xffffffff", PROTO_REQUEST, F_LENGTH, 0xffffffff, -1, 0, -EBADMSG,
     true},
    {"header n_fds 1, none received", PROTO_ATTACHED, F_NFDS, 1, -1, 0,
     -EBADMSG, true},
    {"header n_fds 0, 1 received", PROTO_ATTACHED, F_NFDS, 0, -1, 1, -EBADMSG,
     true},
    {"header n_fds 2, 3 received", PROTO_ATTACHED, F_NFDS, 2, -1, 3, -EBADMSG,
     true},
    {"n_fds over the cap", PROTO_ATTACHED, F_NFDS, PROTO_MAX_FDS + 1, -1,
     PROTO_MAX_FDS + 1, -EBADMSG, true},
    {"n_fds 0xffff", PROTO_ATTACHED, F_NFDS, 0xffff, -1, 0xffff, -EBADMSG,
     true},
};

static void test_bad_frame(void **state)
{
	const struct bad_frame *c = *state;
	struct proto_msg m;
	proto_msg_init(&m);
	struct proto_hdr h;
	uint8_t buf[64];
	size_t len = make_frame(buf, sizeof(buf), c->type, 0, 77, "{}");
	int i;

	proto_hdr_unpack(buf, &h);
	switch (c->field) {
	case F_NONE:
		break;
	case F_MAGIC:
		h.magic = c->value;
		break;
	case F_VERSION:
		h.version = c->value;
		break;
	case F_TYPE:
		h.type = c->value;
		break;
	case F_FLAGS:
		h.flags = c->value;
		break;
	case F_NFDS:
		h.n_fds = c->value;
		break;
	case F_LENGTH:
		h.length = c->value;
		break;
	}
	proto_hdr_pack(&h, buf);
	if (c->cut >= 0)
		len = c->cut;

	assert_int_equal(proto_decode(buf, len, c->n_fds, &m), c->want);
	assert_null(m.payload);
	assert_int_equal(m.n_fds, 0);
	for (i = 0; i < PROTO_MAX_FDS; i++)
		assert_int_equal(m.fds[i], -1);
	assert_int_equal(m.id, c->id_known ? 77 : 0);
}

/* Every type but ATTACHED refuses fds, even when the header owns up. */
static void test_fds_forbidden(void **state)
{
	uint8_t buf[64];
	uint16_t t;

	(void)state;
	for (t = PROTO_HELLO; t <= PROTO_MAPPED; t++) {
		struct proto_msg m;
		proto_msg_init(&m);
		size_t len = make_frame(buf, sizeof(buf), t, 1, 1, "{}");
		int want =
		    t == PROTO_ATTACHED || t == PROTO_MAPPED ? 0 : -EBADMSG;

		if (proto_decode(buf, len, 1, &m) != want)
			fail_msg("%s with 1 fd: want %d", proto_type_name(t),
				 want);
		proto_msg_clear(&m);

		/* And the encoder will not produce one. */
		m.type = t;
		m.n_fds = 1;
		want = t == PROTO_ATTACHED || t == PROTO_MAPPED ? 0 : -EINVAL;
		if (proto_encode(&m, buf, sizeof(buf), &len) != want)
			fail_msg("encode %s with 1 fd: want %d",
				 proto_type_name(t), want);
		assert_int_equal(proto_type_has_fds(t),
				 t == PROTO_ATTACHED || t == PROTO_MAPPED);
	}
}

/* ---- payloads ---- */

struct bad_payload {
	const char *name;
	const char *payload;
	size_t len; /* 0: strlen */
	int want;
};

static const struct bad_payload payloads[] = {
	{ "payload {}", "{}", 0, 0 },
	{ "payload with whitespace", " \t\n{ \"a\" : [ 1 , 2 ] }\r\n ", 0, 0 },
	{ "payload empty", "", 0, -EBADMSG },
	{ "payload only spaces", "   ", 0, -EBADMSG },
	{ "payload array", "[]", 0, -EBADMSG },
	{ "payload number", "1", 0, -EBADMSG },
	{ "payload string", "\"x\"", 0, -EBADMSG },
	{ "payload null", "null", 0, -EBADMSG },
	{ "payload unclosed", "{\"a\":1", 0, -EBADMSG },
	{ "payload lone close", "}", 0, -EBADMSG },
	{ "payload extra close", "{}}", 0, -EBADMSG },
	{ "payload two objects", "{}{}", 0, -EBADMSG },
	{ "payload trailing garbage", "{} x", 0, -EBADMSG },
	{ "payload trailing NUL", "{}\0", 3, -EBADMSG },
	{ "payload NUL inside", "{\"a\":\"b\0c\"}", 11, -EBADMSG },
	{ "payload escaped NUL", "{\"a\":\"\\u0000\"}", 0, -EBADMSG },
	{ "payload duplicate key", "{\"a\":1,\"a\":2}", 0, -EBADMSG },
	{ "payload single quotes", "{'a':1}", 0, -EBADMSG },
	{ "payload bare key", "{a:1}", 0, -EBADMSG },
	{ "payload trailing comma", "{\"a\":1,}", 0, -EBADMSG },
	{ "payload NaN", "{\"a\":NaN}", 0, -EBADMSG },
	{ "payload real overflow", "{\"a\":1e999}", 0, -EBADMSG },
	{ "payload bad escape", "{\"a\":\"\\x\"}", 0, -EBADMSG },
	{ "payload bad UTF-8", "{\"a\":\"\xff\"}", 0, -EBADMSG },
	{ "payload overlong UTF-8", "{\"a\":\"\xc0\xaf\"}", 0, -EBADMSG },
	{ "payload lone surrogate", "{\"a\":\"\\ud800\"}", 0, -EBADMSG },
	{ "payload control char in string", "{\"a\":\"\x01\"}", 0, -EBADMSG },
	{ "payload mismatched brackets", "{\"a\":[}]", 0, -EBADMSG },
	{ "payload close before open", "]{\"a\":[[1]]}", 0, -EBADMSG },
	/* The depth scan must skip strings exactly. */
	{ "payload brackets in a string",
	  "{\"a\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{{{{{{{{{{{{{{{{{{\"}", 0,
	  0 },
	{ "payload escaped quote then brackets",
	  "{\"a\":\"\\\"[[[[[[[[[[[[[[[[[[[[[[[[\"}", 0, 0 },
	{ "payload escaped backslash ends string",
	  "{\"a\":\"\\\\\",\"b\":[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]}", 0,
	  -EBADMSG },
	{ "payload brackets in a key",
	  "{\"[[[[[[[[[[[[[[[[[[[[\":{\"]]]]]]]]]]]]]]]]]]]]]]\":1}}", 0, 0 },
};

static void test_payload(void **state)
{
	const struct bad_payload *c = *state;
	size_t plen = c->len ? c->len : strlen(c->payload);
	struct proto_msg m;
	proto_msg_init(&m);
	struct proto_hdr h = {
		.magic = PROTO_MAGIC,
		.version = PROTO_VERSION,
		.type = PROTO_REQUEST,
		.id = 5,
		.length = plen,
	};
	uint8_t buf[256];

	assert_true(PROTO_HDR_SIZE + plen <= sizeof(buf));
	proto_hdr_pack(&h, buf);
	memcpy(buf + PROTO_HDR_SIZE, c->payload, plen);
	assert_int_equal(proto_decode(buf, PROTO_HDR_SIZE + plen, 0, &m),
			 c->want);
	if (c->want == 0)
		assert_true(json_is_object(m.payload));
	else
		assert_null(m.payload);
	proto_msg_clear(&m);
}

static void decode_text(const char *payload, int want)
{
	size_t plen = strlen(payload);
	uint8_t *buf = malloc(PROTO_HDR_SIZE + plen);
	struct proto_msg m;
	proto_msg_init(&m);

	assert_non_null(buf);
	make_frame(buf, PROTO_HDR_SIZE + plen, PROTO_REQUEST, 0, 1, payload);
	assert_int_equal(proto_decode(buf, PROTO_HDR_SIZE + plen, 0, &m), want);
	proto_msg_clear(&m);
	free(buf);
}

static void test_depth_limit(void **state)
{
	char *s;
	int d;

	(void)state;
	for (d = 1; d <= PROTO_MAX_JSON_DEPTH + 2; d++) {
		s = nested(d);
		decode_text(s, d <= PROTO_MAX_JSON_DEPTH ? 0 : -EBADMSG);
		free(s);
	}
}

/*
 * 10000 and 60000 '[' (and '{'): rejected by the byte scan before
 * jansson, whose parser recurses once per level, sees a single byte.
 * Jansson's allocator is counted to prove it was never called.
 */
static void test_deep_json_not_parsed(void **state)
{
	static const size_t depths[] = { PROTO_MAX_JSON_DEPTH + 1, 10000,
					 60000 };
	json_malloc_t old_malloc;
	json_free_t old_free;
	size_t i;

	(void)state;
	json_get_alloc_funcs(&old_malloc, &old_free);
	json_set_alloc_funcs(counting_malloc, free);
	for (i = 0; i < ARRAY_SIZE(depths); i++) {
		size_t n = depths[i], plen = 5 + n;
		uint8_t *buf = malloc(PROTO_HDR_SIZE + plen);
		struct proto_msg m;
		proto_msg_init(&m);
		struct timespec t0, t1;
		double ms;
		int bracket;

		for (bracket = '['; bracket;
		     bracket = bracket == '[' ? '{' : 0) {
			make_frame(buf, PROTO_HDR_SIZE + plen, PROTO_REQUEST, 0,
				   1, "");
			memcpy(buf + PROTO_HDR_SIZE, "{\"a\":", 5);
			memset(buf + PROTO_HDR_SIZE + 5, bracket, n);
			buf[16] = plen; /* length, little-endian */
			buf[17] = plen >> 8;
			json_allocs = 0;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			assert_int_equal(proto_decode(buf, PROTO_HDR_SIZE + plen,
						      0, &m),
					 -EBADMSG);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			ms = (t1.tv_sec - t0.tv_sec) * 1e3 +
			     (t1.tv_nsec - t0.tv_nsec) / 1e6;
			assert_int_equal(json_allocs, 0);
			assert_true(ms < 1000); /* generous: CI hiccups */
		}
		free(buf);
	}
	/* The counter works: a valid payload does reach jansson. */
	json_allocs = 0;
	decode_text("{\"a\":[[1]]}", 0);
	assert_true(json_allocs > 0);
	json_set_alloc_funcs(old_malloc, old_free);
}

/* ---- sizes ---- */

/* {"a":"xxx..."} making a frame of exactly total bytes. */
static json_t *payload_of_frame_size(size_t total)
{
	size_t n = total - PROTO_HDR_SIZE - strlen("{\"a\":\"\"}");
	char *s = malloc(n + 1);
	json_t *j;

	assert_non_null(s);
	memset(s, 'x', n);
	s[n] = 0;
	j = json_pack("{s:s}", "a", s);
	free(s);
	return j;
}

static void test_frame_size_limits(void **state)
{
	uint8_t *buf = malloc(PROTO_MAX_FRAME + 2);
	struct proto_msg m, out;
	proto_msg_init(&m);
	size_t len;

	(void)state;
	assert_non_null(buf);
	m.type = PROTO_REPLY;

	/* Exactly the limit: encodes and decodes. */
	m.payload = payload_of_frame_size(PROTO_MAX_FRAME);
	assert_int_equal(proto_encode(&m, buf, PROTO_MAX_FRAME, &len), 0);
	assert_int_equal(len, PROTO_MAX_FRAME);
	assert_int_equal(proto_decode(buf, len, 0, &out), 0);
	assert_true(json_equal(out.payload, m.payload));
	proto_msg_clear(&out);
	/* ... but not into a buffer one byte short. */
	assert_int_equal(proto_encode(&m, buf, PROTO_MAX_FRAME - 1, &len),
			 -ENOBUFS);
	json_decref(m.payload);

	/* One byte over: refused by the encoder, whatever the buffer. */
	m.payload = payload_of_frame_size(PROTO_MAX_FRAME + 1);
	assert_int_equal(proto_encode(&m, buf, PROTO_MAX_FRAME + 2, &len),
			 -EMSGSIZE);
	assert_int_equal(proto_encode(&m, buf, PROTO_MAX_FRAME, &len),
			 -EMSGSIZE);

	/* And by the decoder, from a well-formed header. */
	make_frame(buf, PROTO_MAX_FRAME + 2, PROTO_REPLY, 0, 8, "");
	assert_int_equal(json_dumpb(m.payload, (char *)buf + PROTO_HDR_SIZE,
				    PROTO_MAX_FRAME + 1 - PROTO_HDR_SIZE,
				    JSON_COMPACT),
			 PROTO_MAX_FRAME + 1 - PROTO_HDR_SIZE);
	buf[16] = (PROTO_MAX_FRAME + 1 - PROTO_HDR_SIZE) & 0xff;
	buf[17] = (PROTO_MAX_FRAME + 1 - PROTO_HDR_SIZE) >> 8;
	assert_int_equal(proto_decode(buf, PROTO_MAX_FRAME + 1, 0, &out),
			 -EMSGSIZE);
	assert_int_equal(out.id, 8);
	assert_null(out.payload);
	json_decref(m.payload);
	free(buf);
}

struct bad_encode {
	const char *name;
	uint16_t type, flags;
	size_t n_fds;
	const char *payload; /* JSON text, or NULL */
	json_t *(*make)(void);
	size_t cap;
	int want;
};

static json_t *make_array(void)
{
	return json_array();
}

static json_t *make_too_deep(void)
{
	char *s = nested(PROTO_MAX_JSON_DEPTH + 1);
	json_t *j = json_loads(s, 0, NULL);

	free(s);
	return j;
}

static json_t *make_just_deep_enough(void)
{
	char *s = nested(PROTO_MAX_JSON_DEPTH);
	json_t *j = json_loads(s, 0, NULL);

	free(s);
	return j;
}

static const struct bad_encode bad_encodes[] = {
    {"encode type 0", 0, 0, 0, NULL, NULL, 256, -EINVAL},
    {"encode unknown type", PROTO_MAPPED + 1, 0, 0, NULL, NULL, 256, -EINVAL},
    {"encode unknown flag", PROTO_REQUEST, 1, 0, NULL, NULL, 256, -EINVAL},
    {"encode fds on REPLY", PROTO_REPLY, 0, 1, NULL, NULL, 256, -EINVAL},
    {"encode too many fds", PROTO_ATTACHED, 0, PROTO_MAX_FDS + 1, NULL, NULL,
     256, -EINVAL},
    {"encode array payload", PROTO_REQUEST, 0, 0, NULL, make_array, 256,
     -EINVAL},
    {"encode too deep", PROTO_REQUEST, 0, 0, NULL, make_too_deep, 256, -EINVAL},
    {"encode deep enough", PROTO_REQUEST, 0, 0, NULL, make_just_deep_enough,
     256, 0},
    {"encode cap 0", PROTO_REQUEST, 0, 0, NULL, NULL, 0, -ENOBUFS},
    {"encode cap header only", PROTO_REQUEST, 0, 0, NULL, NULL, PROTO_HDR_SIZE,
     -ENOBUFS},
    {"encode cap header + 1", PROTO_REQUEST, 0, 0, "{}", NULL,
     PROTO_HDR_SIZE + 1, -ENOBUFS},
    {"encode cap exact", PROTO_REQUEST, 0, 0, "{\"a\":1}", NULL,
     PROTO_HDR_SIZE + 7, 0},
    {"encode cap one short", PROTO_REQUEST, 0, 0, "{\"a\":1}", NULL,
     PROTO_HDR_SIZE + 6, -ENOBUFS},
};

static void test_bad_encode(void **state)
{
	const struct bad_encode *c = *state;
	struct proto_msg m;
	proto_msg_init(&m);
	uint8_t buf[256];
	size_t len = 12345;

	m.type = c->type;
	m.flags = c->flags;
	m.n_fds = c->n_fds;
	if (c->payload)
		m.payload = json_loads(c->payload, 0, NULL);
	if (c->make)
		m.payload = c->make();
	assert_int_equal(proto_encode(&m, buf, c->cap, &len), c->want);
	if (c->want < 0)
		assert_int_equal(len, 12345);
	json_decref(m.payload);
}

/* ---- the message object ---- */

static void test_msg_clear(void **state)
{
	struct proto_msg m = { 0 }; /* all-zero: fds[] are 0, n_fds 0 */
	int before = fcntl(0, F_GETFD), fd, i;

	(void)state;
	proto_msg_clear(&m);
	assert_int_equal(fcntl(0, F_GETFD), before); /* stdin untouched */
	for (i = 0; i < PROTO_MAX_FDS; i++)
		assert_int_equal(m.fds[i], -1);

	/* Owned fds close; taken ones and -1 are skipped. */
	proto_msg_init(&m);
	m.payload = json_object();
	m.n_fds = 3;
	m.fds[0] = make_memfd("a");
	m.fds[1] = make_memfd("b");
	fd = TAKE_FD(m.fds[1]);
	i = m.fds[0];
	proto_msg_clear(&m);
	assert_false(fd_open(i));
	assert_true(fd_open(fd));
	assert_null(m.payload);
	assert_int_equal(m.n_fds, 0);
	close(fd);
	proto_msg_clear(&m); /* twice is fine */
}

static void test_type_table(void **state)
{
	static const struct {
		uint16_t type;
		const char *name;
		bool client, daemon;
	} t[] = {
	    {PROTO_HELLO, "HELLO", true, false},
	    {PROTO_WELCOME, "WELCOME", false, true},
	    {PROTO_ERROR, "ERROR", true, true},
	    {PROTO_REQUEST, "REQUEST", true, false},
	    {PROTO_REPLY, "REPLY", false, true},
	    {PROTO_ATTACH, "ATTACH", true, false},
	    {PROTO_ATTACHED, "ATTACHED", false, true},
	    {PROTO_DETACH, "DETACH", true, false},
	    {PROTO_DETACHED, "DETACHED", false, true},
	    {PROTO_REPORT, "REPORT", true, false},
	    {PROTO_EVENT, "EVENT", false, true},
	    {PROTO_MADE, "MADE", true, false},
	    {PROTO_MAP, "MAP", true, false},
	    {PROTO_MAPPED, "MAPPED", false, true},
	    {0, "UNKNOWN", false, false},
	    {PROTO_MAPPED + 1, "UNKNOWN", false, false},
	    {0xffff, "UNKNOWN", false, false},
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		assert_string_equal(proto_type_name(t[i].type), t[i].name);
		assert_int_equal(proto_type_allowed(t[i].type,
						    PROTO_PEER_CLIENT),
				 t[i].client);
		assert_int_equal(proto_type_allowed(t[i].type,
						    PROTO_PEER_DAEMON),
				 t[i].daemon);
	}
}

/* ---- versions ---- */

static void test_negotiate(void **state)
{
	static const struct {
		const char *hello;
		int want;
		uint16_t version;
	} t[] = {
		{ "{\"versions\":[1,1]}", 0, 1 },
		{ "{\"versions\":[1,2]}", 0, 2 },
		{ "{\"versions\":[1,7]}", 0, 2 },
		{ "{\"versions\":[1,65535]}", 0, 2 },
		{ "{\"versions\":[2,3]}", 0, 2 },
		{ "{\"versions\":[3,4]}", -EPROTONOSUPPORT, 0 },
		{ "{\"versions\":[65535,65535]}", -EPROTONOSUPPORT, 0 },
		{ "{\"versions\":[0,1]}", -EBADMSG, 0 },
		{ "{\"versions\":[2,1]}", -EBADMSG, 0 },
		{ "{\"versions\":[1,65536]}", -EBADMSG, 0 },
		{ "{\"versions\":[-1,1]}", -EBADMSG, 0 },
		{ "{\"versions\":[1]}", -EBADMSG, 0 },
		{ "{\"versions\":[1,1,1]}", -EBADMSG, 0 },
		{ "{\"versions\":[1.0,1]}", -EBADMSG, 0 },
		{ "{\"versions\":[\"1\",\"1\"]}", -EBADMSG, 0 },
		{ "{\"versions\":1}", -EBADMSG, 0 },
		{ "{\"versions\":{\"min\":1,\"max\":1}}", -EBADMSG, 0 },
		{ "{}", -EBADMSG, 0 },
	};
	struct proto_msg m;
	uint16_t v;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		json_t *j = json_loads(t[i].hello, 0, NULL);
		int r;

		assert_non_null(j);
		v = 0;
		r = proto_negotiate(j, &v);
		if (r != t[i].want || v != t[i].version)
			fail_msg("%s: got %d/%u, want %d/%u", t[i].hello, r, v,
				 t[i].want, t[i].version);
		json_decref(j);
	}
	assert_int_equal(proto_negotiate(NULL, &v), -EBADMSG);

	/* What proto_hello builds, the daemon accepts. */
	assert_int_equal(proto_hello(&m, 42), 0);
	assert_int_equal(m.type, PROTO_HELLO);
	assert_int_equal(m.id, 42);
	assert_int_equal(proto_negotiate(m.payload, &v), 0);
	assert_int_equal(v, PROTO_VERSION_MAX);
	proto_msg_clear(&m);
}

static void test_welcome(void **state)
{
	static const struct {
		const char *welcome;
		int want;
	} t[] = {
		{ "{\"version\":1}", 0 },
		{ "{\"version\":2}", 0 },
		{ "{\"version\":3}", -EPROTONOSUPPORT },
		{ "{\"version\":0}", -EBADMSG },
		{ "{\"version\":\"1\"}", -EBADMSG },
		{ "{}", -EBADMSG },
	};
	struct proto_msg m;
	uint16_t v;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		json_t *j = json_loads(t[i].welcome, 0, NULL);

		if (proto_welcome_version(j, &v) != t[i].want)
			fail_msg("%s: want %d", t[i].welcome, t[i].want);
		json_decref(j);
	}

	assert_int_equal(proto_welcome(&m, 42, 1, "0.1.0"), 0);
	assert_int_equal(m.type, PROTO_WELCOME);
	assert_int_equal(m.id, 42);
	assert_string_equal(
		json_string_value(json_object_get(m.payload, "server")),
		"rdmad");
	assert_string_equal(json_string_value(json_object_get(
				    m.payload, "server_version")),
			    "0.1.0");
	assert_int_equal(proto_welcome_version(m.payload, &v), 0);
	assert_int_equal(v, 1);
	proto_msg_clear(&m);
}

static void test_errors(void **state)
{
	static const struct {
		int err;
		const char *code;
	} t[] = {
		{ -EBADMSG, "bad_message" },
		{ -EPROTONOSUPPORT, "unsupported_version" },
		{ -EMSGSIZE, "message_too_large" },
		{ -EPIPE, "connection_closed" },
		{ -ECONNRESET, "connection_reset" },
		{ EBADMSG, "bad_message" },
		{ -ENOENT, "internal" },
	};
	struct proto_msg m;
	json_t *e;
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(t); i++) {
		assert_string_equal(proto_error_code(t[i].err), t[i].code);
		assert_non_null(proto_strerror(t[i].err));
		assert_true(strlen(proto_strerror(t[i].err)) > 0);
	}
	assert_string_equal(proto_strerror(-EBADMSG), "malformed message");
	assert_string_equal(proto_strerror(-EPROTONOSUPPORT),
			    "unsupported protocol version");
	assert_non_null(strstr(proto_strerror(-EMSGSIZE), "65536"));
	assert_string_equal(proto_strerror(-ENOENT), strerror(ENOENT));

	/* The ERROR message has the REST API's shape. */
	assert_int_equal(proto_error(&m, 7, -EMSGSIZE), 0);
	assert_int_equal(m.type, PROTO_ERROR);
	assert_int_equal(m.id, 7);
	e = json_object_get(m.payload, "error");
	assert_string_equal(json_string_value(json_object_get(e, "code")),
			    "message_too_large");
	assert_string_equal(json_string_value(json_object_get(e, "message")),
			    proto_strerror(-EMSGSIZE));
	assert_int_equal(json_object_size(m.payload), 1);
	assert_int_equal(json_object_size(e), 2);
	proto_msg_clear(&m);
}

/* ---- sockets ---- */

static void test_sock_three_fds(void **state)
{
	static const char *content[] = { "context", "ring buffer", "pd" };
	struct proto_msg out, in;
	proto_msg_init(&out);
	int before = count_fds(), sv[2], i;
	struct stat a, b;

	(void)state;
	make_pair(sv, 0);
	out.type = PROTO_ATTACHED;
	out.id = 99;
	out.payload = json_pack("{s:s}", "profile", "p");
	out.n_fds = 3;
	for (i = 0; i < 3; i++)
		out.fds[i] = make_memfd(content[i]);

	assert_int_equal(proto_send(sv[0], &out), 0);
	for (i = 0; i < 3; i++) /* send does not close */
		assert_true(fd_open(out.fds[i]));

	assert_int_equal(proto_recv(sv[1], &in), 0);
	assert_int_equal(in.type, PROTO_ATTACHED);
	assert_int_equal(in.id, 99);
	assert_true(json_equal(in.payload, out.payload));
	assert_int_equal(in.n_fds, 3);
	for (i = 0; i < 3; i++) {
		/* New numbers, close-on-exec, same open files. */
		assert_int_not_equal(in.fds[i], out.fds[i]);
		assert_true(fcntl(in.fds[i], F_GETFD) & FD_CLOEXEC);
		assert_int_equal(fstat(in.fds[i], &a), 0);
		assert_int_equal(fstat(out.fds[i], &b), 0);
		assert_int_equal(a.st_ino, b.st_ino);
		check_memfd(in.fds[i], content[i]);
	}
	for (i = 3; i < PROTO_MAX_FDS; i++)
		assert_int_equal(in.fds[i], -1);
	/* A write through one side shows through the other. */
	assert_int_equal(pwrite(in.fds[1], "RING", 4, 0), 4);
	check_memfd(out.fds[1], "RING buffer");

	proto_msg_clear(&in);
	proto_msg_clear(&out);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

static void test_sock_max_fds(void **state)
{
	struct proto_msg out, in;
	proto_msg_init(&out);
	int before = count_fds(), sv[2], i;
	char s[16];

	(void)state;
	make_pair(sv, 0);
	out.type = PROTO_ATTACHED;
	out.n_fds = PROTO_MAX_FDS;
	for (i = 0; i < PROTO_MAX_FDS; i++) {
		snprintf(s, sizeof(s), "fd %d", i);
		out.fds[i] = make_memfd(s);
	}
	assert_int_equal(proto_send(sv[0], &out), 0);
	assert_int_equal(proto_recv(sv[1], &in), 0);
	assert_int_equal(in.n_fds, PROTO_MAX_FDS);
	for (i = 0; i < PROTO_MAX_FDS; i++) {
		snprintf(s, sizeof(s), "fd %d", i);
		check_memfd(in.fds[i], s);
	}
	proto_msg_clear(&in);
	proto_msg_clear(&out);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

/* Text already encoded, in parts, goes out as proto_send() would send
 * it: the receiver decodes one message, fds and all. */
static void test_sock_send_text(void **state)
{
	static const char tail[] = "\"profile\":\"p\",\"n\":[1,2]}";
	struct iovec parts[2] = {
		{ .iov_base = (void *)"{\"attachment\":7,", .iov_len = 16 },
		{ .iov_base = (void *)tail, .iov_len = sizeof(tail) - 1 },
	};
	struct iovec many[PROTO_MAX_TEXT_PARTS + 1];
	int before = count_fds(), sv[2], fds[2];
	struct proto_msg in;
	json_t *want;

	(void)state;
	make_pair(sv, SOCK_NONBLOCK);
	fds[0] = make_memfd("zero");
	fds[1] = make_memfd("one");
	assert_int_equal(proto_send_textv(sv[0], PROTO_ATTACHED, 41, parts, 2,
					  fds, 2),
			 0);
	assert_int_equal(proto_recv(sv[1], &in), 0);
	assert_int_equal(in.type, PROTO_ATTACHED);
	assert_int_equal(in.id, 41);
	want = json_pack("{s:i, s:s, s:[i,i]}", "attachment", 7, "profile",
			 "p", "n", 1, 2);
	assert_true(json_equal(in.payload, want));
	json_decref(want);
	assert_int_equal(in.n_fds, 2);
	check_memfd(in.fds[0], "zero");
	check_memfd(in.fds[1], "one");
	proto_msg_clear(&in);

	assert_int_equal(proto_send_text(sv[0], PROTO_REPLY, 42, "{}", 2,
					 NULL, 0),
			 0);
	assert_int_equal(proto_recv(sv[1], &in), 0);
	assert_int_equal(in.type, PROTO_REPLY);
	assert_int_equal(in.id, 42);
	assert_int_equal(json_object_size(in.payload), 0);
	proto_msg_clear(&in);

	/* Refused before anything is sent: too many parts or fds, a
	 * payload over the protocol's bound, a bad fd. */
	for (size_t i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = (struct iovec){ .iov_base = (void *)"{}",
					  .iov_len = 0 };
	assert_int_equal(proto_send_textv(sv[0], PROTO_REPLY, 1, many,
					  ARRAY_SIZE(many), NULL, 0),
			 -EINVAL);
	assert_int_equal(proto_send_text(sv[0], PROTO_ATTACHED, 1, "{}", 2,
					 fds, PROTO_MAX_FDS + 1),
			 -EINVAL);
	assert_int_equal(proto_send_text(sv[0], PROTO_REPLY, 1, tail,
					 PROTO_MAX_PAYLOAD + 1, NULL, 0),
			 -EMSGSIZE);
	closep(&fds[1]);
	assert_int_equal(proto_send_text(sv[0], PROTO_ATTACHED, 1, "{}", 2,
					 fds, 2),
			 -EBADF);
	assert_int_equal(proto_recv(sv[1], &in), -EAGAIN);
	close(fds[0]);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

/* The largest frame passes the socket; one byte more does not. */
static void test_sock_frame_limit(void **state)
{
	struct proto_msg out, in;
	proto_msg_init(&out);
	int before = count_fds(), sv[2];

	(void)state;
	make_pair(sv, 0);
	out.type = PROTO_REPLY;
	out.payload = payload_of_frame_size(PROTO_MAX_FRAME);
	assert_int_equal(proto_send(sv[0], &out), 0);
	assert_int_equal(proto_recv(sv[1], &in), 0);
	assert_true(json_equal(in.payload, out.payload));
	proto_msg_clear(&in);
	proto_msg_clear(&out);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

/*
 * One buffer of the caller's, message after message (the daemon's way):
 * frames on both sides of the size proto_send encodes on its stack,
 * up to the largest, each read whole. A buffer one byte short of
 * PROTO_RECV_BYTES is refused before anything is read.
 */
static void test_sock_recv_buf(void **state)
{
	static const size_t sizes[] = { 64, 4095, 4096, 4097, 20000,
					PROTO_MAX_FRAME };
	uint8_t *buf = malloc(PROTO_RECV_BYTES);
	struct proto_msg out, in;
	proto_msg_init(&out);
	int before = count_fds(), sv[2];

	(void)state;
	assert_non_null(buf);
	make_pair(sv, SOCK_NONBLOCK);
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		out.type = PROTO_REPLY;
		out.payload = payload_of_frame_size(sizes[i]);
		assert_int_equal(proto_send(sv[0], &out), 0);
		assert_int_equal(proto_recv_buf(sv[1], &in, buf,
						PROTO_RECV_BYTES - 1),
				 -EINVAL);
		assert_null(in.payload);
		assert_int_equal(proto_recv_buf(sv[1], &in, buf,
						PROTO_RECV_BYTES),
				 0);
		assert_true(json_equal(in.payload, out.payload));
		proto_msg_clear(&in);
		proto_msg_clear(&out);
	}
	assert_int_equal(proto_recv_buf(sv[1], &in, buf, PROTO_RECV_BYTES),
			 -EAGAIN);
	close_pair(sv);
	free(buf);
	assert_int_equal(count_fds(), before);
}

/* A frame whose header field is changed after make_frame. */
static size_t frame_with(uint8_t *buf, size_t cap, const char *payload,
			 void (*change)(struct proto_hdr *h))
{
	size_t len = make_frame(buf, cap, PROTO_REQUEST, 0, 5, payload);
	struct proto_hdr h;

	proto_hdr_unpack(buf, &h);
	if (change)
		change(&h);
	proto_hdr_pack(&h, buf);
	return len;
}

static void bad_magic(struct proto_hdr *h)
{
	h->magic ^= 1;
}

static void version_0(struct proto_hdr *h)
{
	h->version = 0;
}

static void version_high(struct proto_hdr *h)
{
	h->version = 999;
}

static void unknown_flag(struct proto_hdr *h)
{
	h->flags = 0x4000;
}

static void claims_fds(struct proto_hdr *h)
{
	h->n_fds = 1;
}

static void long_length(struct proto_hdr *h)
{
	h->length++;
}

static void short_length(struct proto_hdr *h)
{
	h->length--;
}

static void reply_type(struct proto_hdr *h)
{
	h->type = PROTO_REPLY;
}

static void unknown_type(struct proto_hdr *h)
{
	h->type = 999;
}

/* proto_frame_payload: the payload only of a whole good header of the
 * type asked, with the fds it announces (only for a type that carries
 * them); never a judgement of the payload. */
static void test_frame_payload(void **state)
{
	static void (*const bad[])(struct proto_hdr *) = {
		bad_magic,  version_0,	 version_high, unknown_flag, claims_fds,
		long_length, short_length, reply_type,	unknown_type,
	};
	const char *payload = "{\"method\":\"GET\",\"path\":\"/v1/health\"}";
	uint8_t buf[256];
	const uint8_t *p;
	size_t len, plen = 0;

	(void)state;
	len = frame_with(buf, sizeof(buf), payload, NULL);
	p = proto_frame_payload(buf, len, 0, PROTO_REQUEST, &plen);
	assert_ptr_equal(p, buf + PROTO_HDR_SIZE);
	assert_int_equal(plen, strlen(payload));
	assert_memory_equal(p, payload, plen);
	/* fds that came with it, a short or an oversized frame */
	assert_null(proto_frame_payload(buf, len, 1, PROTO_REQUEST, &plen));
	assert_null(proto_frame_payload(buf, PROTO_HDR_SIZE - 1, 0,
					PROTO_REQUEST, &plen));
	assert_null(proto_frame_payload(buf, PROTO_MAX_FRAME + 1, 0,
					PROTO_REQUEST, &plen));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		len = frame_with(buf, sizeof(buf), payload, bad[i]);
		if (proto_frame_payload(buf, len, 0, PROTO_REQUEST, &plen))
			fail_msg("bad header %zu taken", i);
	}
	/* Any payload, even one that is no JSON: that is decode's job. */
	len = frame_with(buf, sizeof(buf), "not json", NULL);
	assert_non_null(proto_frame_payload(buf, len, 0, PROTO_REQUEST, &plen));

	/* A type that carries fds, with as many as its header says. */
	len = make_frame(buf, sizeof(buf), PROTO_ATTACHED, 2, 5, payload);
	assert_non_null(proto_frame_payload(buf, len, 2, PROTO_ATTACHED, &plen));
	assert_null(proto_frame_payload(buf, len, 1, PROTO_ATTACHED, &plen));
	assert_null(proto_frame_payload(buf, len, 0, PROTO_ATTACHED, &plen));
	assert_null(proto_frame_payload(buf, len, 2, PROTO_REQUEST, &plen));
	/* Fds announced and sent with a type that carries none. */
	len = frame_with(buf, sizeof(buf), payload, claims_fds);
	assert_null(proto_frame_payload(buf, len, 1, PROTO_REQUEST, &plen));
}

/* proto_recv_frame then proto_decode_frame: the fds go to the message
 * when it decodes, and are closed when it does not; the ids of a frame
 * refused are still told. */
static void test_sock_recv_frame(void **state)
{
	uint8_t *buf = malloc(PROTO_RECV_BYTES);
	int before = count_fds(), sv[2], fds[PROTO_MAX_FDS], src, nums[2];
	int two[2];
	struct proto_msg m;
	uint8_t out[256];
	size_t len, n_fds;

	(void)state;
	assert_non_null(buf);
	make_pair(sv, SOCK_NONBLOCK);
	src = make_memfd("frame");
	two[0] = two[1] = src;

	/* Decodes: the message owns both fds. */
	len = make_frame(out, sizeof(out), PROTO_ATTACHED, 2, 9, "{}");
	raw_send(sv[0], out, len, two, 2);
	assert_int_equal(proto_recv_frame(sv[1], buf, PROTO_RECV_BYTES, &len,
					  fds, &n_fds),
			 0);
	assert_int_equal(n_fds, 2);
	assert_int_equal(proto_decode_frame(buf, len, fds, n_fds, &m), 0);
	assert_int_equal(m.id, 9);
	assert_int_equal(m.n_fds, 2);
	check_memfd(m.fds[1], "frame");
	proto_msg_clear(&m);

	/* Does not decode (a REQUEST takes no fds): both closed, ids told. */
	len = make_frame(out, sizeof(out), PROTO_REQUEST, 2, 10, "{}");
	raw_send(sv[0], out, len, two, 2);
	next_fd_numbers(nums, 2);
	assert_int_equal(proto_recv_frame(sv[1], buf, PROTO_RECV_BYTES, &len,
					  fds, &n_fds),
			 0);
	assert_int_equal(proto_decode_frame(buf, len, fds, n_fds, &m),
			 -EBADMSG);
	assert_int_equal(m.id, 10);
	assert_int_equal(m.n_fds, 0);
	assert_false(fd_open(nums[0]) || fd_open(nums[1]));
	proto_frame_ids(buf, len, &m);
	assert_int_equal(m.type, PROTO_REQUEST);
	assert_int_equal(m.id, 10);

	/* Too small a buffer; nothing waiting; end of file. */
	assert_int_equal(proto_recv_frame(sv[1], buf, PROTO_RECV_BYTES - 1,
					  &len, fds, &n_fds),
			 -EINVAL);
	assert_int_equal(proto_recv_frame(sv[1], buf, PROTO_RECV_BYTES, &len,
					  fds, &n_fds),
			 -EAGAIN);
	closep(&sv[0]);
	assert_int_equal(proto_recv_frame(sv[1], buf, PROTO_RECV_BYTES, &len,
					  fds, &n_fds),
			 -EPIPE);
	close(src);
	close_pair(sv);
	free(buf);
	assert_int_equal(count_fds(), before);
}

/*
 * A 70000-byte datagram with 3 fds and an honest header: -EMSGSIZE, and
 * the 3 fds the kernel installed for it are closed again: the numbers
 * they got are free afterwards. The next message still reads.
 */
static void test_sock_oversize(void **state)
{
	size_t total = 70000, plen = total - PROTO_HDR_SIZE;
	uint8_t *buf = malloc(total);
	struct proto_msg out, in;
	proto_msg_init(&out);
	int before = count_fds(), sv[2], fds[3], nums[3], i;

	(void)state;
	assert_non_null(buf);
	make_pair(sv, 0);
	make_frame(buf, total, PROTO_ATTACHED, 3, 42, "");
	memset(buf + PROTO_HDR_SIZE, ' ', plen);
	memcpy(buf + PROTO_HDR_SIZE, "{}", 2);
	buf[16] = plen;
	buf[17] = plen >> 8;
	buf[18] = plen >> 16;
	for (i = 0; i < 3; i++)
		fds[i] = make_memfd("x");
	raw_send(sv[0], buf, total, fds, 3);
	for (i = 0; i < 3; i++)
		close(fds[i]);
	out.type = PROTO_REQUEST;
	out.id = 43;
	assert_int_equal(proto_send(sv[0], &out), 0);

	next_fd_numbers(nums, 3);
	assert_int_equal(proto_recv(sv[1], &in), -EMSGSIZE);
	assert_int_equal(in.id, 42); /* for the ERROR answer */
	assert_null(in.payload);
	assert_int_equal(in.n_fds, 0);
	for (i = 0; i < 3; i++)
		assert_false(fd_open(nums[i]));
	assert_int_equal(count_fds(), before + 2);

	assert_int_equal(proto_recv(sv[1], &in), 0);
	assert_int_equal(in.id, 43);
	proto_msg_clear(&in);
	close_pair(sv);
	free(buf);
	assert_int_equal(count_fds(), before);
}

struct sock_bad {
	const char *name;
	uint16_t type;	    /* header type */
	uint16_t hdr_n_fds; /* what the header claims */
	size_t n_fds;	    /* what is actually attached */
	const char *payload;
	long cut; /* >= 0: send only this many bytes */
	int want;
};

static const struct sock_bad sock_bads[] = {
	{ "socket: fds, header claims none (REPLY)", PROTO_REPLY, 0, 2, "{}",
	  -1, -EBADMSG },
	{ "socket: fds, header claims none (ATTACHED)", PROTO_ATTACHED, 0, 2,
	  "{}", -1, -EBADMSG },
	{ "socket: header claims 3, 2 attached", PROTO_ATTACHED, 3, 2, "{}", -1,
	  -EBADMSG },
	{ "socket: header claims 1, none attached", PROTO_ATTACHED, 1, 0, "{}",
	  -1, -EBADMSG },
	{ "socket: fds on a client type (ATTACH)", PROTO_ATTACH, 1, 1, "{}",
	  -1, -EBADMSG },
	{ "socket: fds on a client type (REPORT)", PROTO_REPORT, 1, 1, "{}",
	  -1, -EBADMSG },
	{ "socket: fds with bad JSON", PROTO_ATTACHED, 2, 2, "{\"a\":", -1,
	  -EBADMSG },
	{ "socket: fds with a deep payload", PROTO_ATTACHED, 2, 2,
	  "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[}", -1,
	  -EBADMSG },
	{ "socket: fds on a short frame", PROTO_ATTACHED, 2, 2, "{}", 10,
	  -EBADMSG },
	{ "socket: fds on an empty datagram", PROTO_ATTACHED, 1, 1, "{}", 0,
	  -EBADMSG },
	{ "socket: more fds than the cap", PROTO_ATTACHED, PROTO_MAX_FDS + 8,
	  PROTO_MAX_FDS + 8, "{}", -1, -EMSGSIZE },
	{ "socket: far more fds than the cap", PROTO_ATTACHED, 200, 200, "{}",
	  -1, -EMSGSIZE },
};

static void test_sock_bad(void **state)
{
	const struct sock_bad *c = *state;
	struct proto_msg m;
	int before = count_fds(), sv[2], fds[200], nums[64], src;
	uint8_t buf[256];
	size_t len, i, check;

	make_pair(sv, 0);
	len = make_frame(buf, sizeof(buf), c->type, c->hdr_n_fds, 11,
			 c->payload);
	if (c->cut >= 0)
		len = c->cut;
	/* One open file, passed n times (dups). */
	src = make_memfd("secret");
	for (i = 0; i < c->n_fds; i++)
		fds[i] = src;
	raw_send(sv[0], buf, len, fds, c->n_fds);
	close(src);

	/* Every number the kernel might use for them: it installs as
	 * many as fit the control buffer, a few more than the cap. */
	check = c->n_fds < 64 ? c->n_fds : 64;
	next_fd_numbers(nums, check);
	assert_int_equal(proto_recv(sv[1], &m), c->want);
	assert_null(m.payload);
	assert_int_equal(m.n_fds, 0);
	for (i = 0; i < check; i++)
		if (fd_open(nums[i]))
			fail_msg("fd %d left open", nums[i]);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

/* Peer identity comes from SO_PEERCRED, never from messages: a socket
 * with SO_PASSCRED is a bug, and what arrives on it is refused whole. */
static void test_sock_passcred(void **state)
{
	struct proto_msg out, in;
	proto_msg_init(&out);
	int before = count_fds(), sv[2], one = 1, nums[2];

	(void)state;
	make_pair(sv, 0);
	assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &one,
				    sizeof(one)),
			 0);
	out.type = PROTO_ATTACHED;
	out.n_fds = 2;
	out.fds[0] = make_memfd("a");
	out.fds[1] = make_memfd("b");
	assert_int_equal(proto_send(sv[0], &out), 0);
	proto_msg_clear(&out);

	next_fd_numbers(nums, 2);
	assert_int_equal(proto_recv(sv[1], &in), -EBADMSG);
	assert_false(fd_open(nums[0]));
	assert_false(fd_open(nums[1]));
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

static void test_sock_eof(void **state)
{
	struct proto_msg out, in;
	proto_msg_init(&out);
	int before = count_fds(), sv[2];

	(void)state;
	make_pair(sv, 0);
	out.type = PROTO_DETACH;
	out.id = 1;
	assert_int_equal(proto_send(sv[0], &out), 0);
	closep(&sv[0]);

	/* What was sent before the close still arrives, then EOF. */
	assert_int_equal(proto_recv(sv[1], &in), 0);
	assert_int_equal(in.type, PROTO_DETACH);
	proto_msg_clear(&in);
	assert_int_equal(proto_recv(sv[1], &in), -EPIPE);
	assert_int_equal(proto_recv(sv[1], &in), -EPIPE);
	assert_null(in.payload);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

/* The peer closed with our message unread: the kernel says so. */
static void test_sock_reset(void **state)
{
	struct proto_msg out, in;
	proto_msg_init(&out);
	int before = count_fds(), sv[2];

	(void)state;
	make_pair(sv, 0);
	out.type = PROTO_REPLY;
	assert_int_equal(proto_send(sv[1], &out), 0);
	closep(&sv[0]); /* unread REPLY in its queue */
	assert_int_equal(proto_recv(sv[1], &in), -ECONNRESET);
	assert_int_equal(proto_recv(sv[1], &in), -EPIPE);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

static void test_sock_nonblocking(void **state)
{
	struct proto_msg out, in;
	proto_msg_init(&out);
	int before = count_fds(), sv[2];

	(void)state;
	make_pair(sv, SOCK_NONBLOCK);
	assert_int_equal(proto_recv(sv[1], &in), -EAGAIN);
	assert_null(in.payload);
	out.type = PROTO_HELLO;
	assert_int_equal(proto_send(sv[0], &out), 0);
	assert_int_equal(proto_recv(sv[1], &in), 0);
	proto_msg_clear(&in);
	assert_int_equal(proto_recv(sv[1], &in), -EAGAIN);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

static void test_sock_send_errors(void **state)
{
	struct proto_msg m;
	proto_msg_init(&m);
	int before = count_fds(), sv[2];
	char buf[8];

	(void)state;
	make_pair(sv, SOCK_NONBLOCK);

	/* Invalid messages are refused before anything is sent. */
	m.type = PROTO_REPLY;
	m.n_fds = 1;
	m.fds[0] = 0;
	assert_int_equal(proto_send(sv[0], &m), -EINVAL);
	m.type = PROTO_ATTACHED;
	m.fds[0] = -1;
	assert_int_equal(proto_send(sv[0], &m), -EBADF);
	m.type = 0;
	m.n_fds = 0;
	assert_int_equal(proto_send(sv[0], &m), -EINVAL);
	assert_int_equal(recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);

	/* A gone peer is -EPIPE (and, MSG_NOSIGNAL, never SIGPIPE). */
	m.type = PROTO_REQUEST;
	closep(&sv[1]);
	assert_int_equal(proto_send(sv[0], &m), -EPIPE);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

/* A whole conversation: HELLO, WELCOME, REQUEST, REPLY, ERROR. */
static void test_sock_conversation(void **state)
{
	struct proto_msg m, r;
	int before = count_fds(), sv[2];
	uint16_t v;

	(void)state;
	make_pair(sv, 0);
	assert_int_equal(proto_hello(&m, 1), 0);
	assert_int_equal(proto_send(sv[0], &m), 0);
	proto_msg_clear(&m);

	assert_int_equal(proto_recv(sv[1], &r), 0);
	assert_true(proto_type_allowed(r.type, PROTO_PEER_CLIENT));
	assert_int_equal(r.type, PROTO_HELLO);
	assert_int_equal(proto_negotiate(r.payload, &v), 0);
	assert_int_equal(proto_welcome(&m, r.id, v, "0.1.0"), 0);
	proto_msg_clear(&r);
	assert_int_equal(proto_send(sv[1], &m), 0);
	proto_msg_clear(&m);

	assert_int_equal(proto_recv(sv[0], &r), 0);
	assert_int_equal(r.type, PROTO_WELCOME);
	assert_int_equal(r.id, 1);
	assert_int_equal(proto_welcome_version(r.payload, &v), 0);
	assert_int_equal(v, PROTO_VERSION_MAX);
	proto_msg_clear(&r);

	/* A bad frame gets an ERROR that names its id. */
	{
		uint8_t buf[64];
		size_t len = make_frame(buf, sizeof(buf), PROTO_REQUEST, 0,
					2, "{\"method\":");

		raw_send(sv[0], buf, len, NULL, 0);
	}
	assert_int_equal(proto_recv(sv[1], &r), -EBADMSG);
	assert_int_equal(proto_error(&m, r.id, -EBADMSG), 0);
	assert_int_equal(proto_send(sv[1], &m), 0);
	proto_msg_clear(&m);
	assert_int_equal(proto_recv(sv[0], &r), 0);
	assert_int_equal(r.type, PROTO_ERROR);
	assert_int_equal(r.id, 2);
	proto_msg_clear(&r);

	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

/* ---- main ---- */

#define CASES(table, fn)                                                       \
	for (i = 0; i < ARRAY_SIZE(table); i++)                                \
		tests[n++] = (struct CMUnitTest){                              \
			.name = table[i].name,                                 \
			.test_func = fn,                                       \
			.initial_state = (void *)&table[i],                    \
		}

int main(void)
{
	struct CMUnitTest tests[ARRAY_SIZE(round_trips) +
				ARRAY_SIZE(bad_frames) + ARRAY_SIZE(payloads) +
				ARRAY_SIZE(bad_encodes) +
				ARRAY_SIZE(sock_bads) + 32];
	size_t n = 0, i;

	/* A test that got SIGPIPE would die instead of failing. */
	signal(SIGPIPE, SIG_DFL);

	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_golden_header);
	CASES(round_trips, test_round_trip);
	CASES(bad_frames, test_bad_frame);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_fds_forbidden);
	CASES(payloads, test_payload);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_depth_limit);
	tests[n++] =
		(struct CMUnitTest)cmocka_unit_test(test_deep_json_not_parsed);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_frame_size_limits);
	CASES(bad_encodes, test_bad_encode);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_msg_clear);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_type_table);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_negotiate);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_welcome);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_errors);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_three_fds);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_max_fds);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_send_text);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_frame_limit);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_recv_buf);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_recv_frame);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_frame_payload);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_oversize);
	CASES(sock_bads, test_sock_bad);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_passcred);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_eof);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_reset);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_nonblocking);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_sock_send_errors);
	tests[n++] =
		(struct CMUnitTest)cmocka_unit_test(test_sock_conversation);
	assert_true(n <= ARRAY_SIZE(tests));
	return _cmocka_run_group_tests("proto", tests, n, NULL, NULL);
}
