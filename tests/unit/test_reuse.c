// SPDX-License-Identifier: MIT
/*
 * The last ATTACHED document kept for the next (client/librdmad_reuse.c):
 * the same bytes past the attachment id take the kept document, with the
 * new id and the new message's fds; anything else is decoded as
 * proto_decode_frame() would, with its errors: other bytes, an id JSON
 * would not write or that does not fit, an id not first, another type, a
 * bad header, a document still held.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "librdmad_internal.h"

#define REST "\"mode\":\"local\",\"memory\":[{\"name\":\"m\",\"fd\":0}]}"
/* Other bytes of the same length. */
#define REST_N "\"mode\":\"local\",\"memory\":[{\"name\":\"n\",\"fd\":0}]}"

static size_t frame(uint8_t *buf, uint16_t type, size_t n_fds,
		    const char *payload)
{
	struct proto_hdr h = {
		.magic = PROTO_MAGIC,
		.version = PROTO_VERSION,
		.type = type,
		.n_fds = (uint16_t)n_fds,
		.id = 5,
		.length = (uint32_t)strlen(payload),
	};

	proto_hdr_pack(&h, buf);
	memcpy(buf + PROTO_HDR_SIZE, payload, h.length);
	return PROTO_HDR_SIZE + h.length;
}

/* Decode payload as an ATTACHED with one fresh fd (n_fds 1). */
static int decode(struct client_reuse *u, uint16_t type, const char *payload,
		  struct proto_msg *m, int *fd)
{
	static uint8_t buf[PROTO_RECV_BYTES];
	int fds[1];
	size_t len;

	*fd = fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fds[0] >= 0);
	len = frame(buf, type, 1, payload);
	return client_reuse_decode(u, buf, len, fds, 1, m);
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static json_int_t attachment(const struct proto_msg *m)
{
	return json_integer_value(json_object_get(m->payload, "attachment"));
}

/* Decode the first ATTACHED (id 7), which is kept: its document. */
static json_t *keep_first(struct client_reuse *u)
{
	struct proto_msg m;
	json_t *doc;
	int fd;

	assert_int_equal(decode(u, PROTO_ATTACHED, "{\"attachment\":7," REST,
				&m, &fd),
			 0);
	doc = m.payload;
	assert_ptr_equal(u->doc, doc);
	proto_msg_clear(&m);
	return doc;
}

static void test_same_bytes_reuse(void **state)
{
	struct client_reuse u = { 0 };
	struct proto_msg m;
	json_t *first;
	int fd;

	(void)state;
	assert_int_equal(decode(&u, PROTO_ATTACHED,
				"{\"attachment\":7," REST, &m, &fd), 0);
	first = m.payload;
	assert_ptr_equal(u.doc, first);
	assert_int_equal(attachment(&m), 7);
	assert_int_equal(m.fds[0], fd);
	proto_msg_clear(&m);
	assert_false(fd_open(fd));

	/* The same bytes past the id: the kept document, the new id, the
	 * new fd, and the type and id of the frame. */
	assert_int_equal(decode(&u, PROTO_ATTACHED,
				"{\"attachment\":1234567," REST, &m, &fd), 0);
	assert_ptr_equal(m.payload, first);
	assert_int_equal(attachment(&m), 1234567);
	assert_int_equal(m.type, PROTO_ATTACHED);
	assert_int_equal(m.id, 5);
	assert_int_equal(m.n_fds, 1);
	assert_int_equal(m.fds[0], fd);
	assert_string_equal(
	    json_string_value(json_object_get(m.payload, "mode")), "local");
	proto_msg_clear(&m);
	assert_false(fd_open(fd));

	/* 0 and the largest id are ids too. */
	assert_int_equal(decode(&u, PROTO_ATTACHED,
				"{\"attachment\":0," REST, &m, &fd), 0);
	assert_ptr_equal(m.payload, first);
	assert_int_equal(attachment(&m), 0);
	proto_msg_clear(&m);
	assert_int_equal(decode(&u, PROTO_ATTACHED,
				"{\"attachment\":4294967295," REST, &m, &fd),
			 0);
	assert_ptr_equal(m.payload, first);
	assert_int_equal(attachment(&m), 4294967295LL);
	proto_msg_clear(&m);
	client_reuse_clear(&u);
	assert_null(u.doc);
	assert_null(u.rest);
}

static void test_other_bytes_are_parsed(void **state)
{
	struct client_reuse u = { 0 };
	struct proto_msg m;
	json_t *kept;
	int fd;

	(void)state;
	kept = json_incref(keep_first(&u));

	/* Other bytes, of the same length: parsed, and kept instead. */
	assert_int_equal(
	    decode(&u, PROTO_ATTACHED,
		   "{\"attachment\":8," REST_N,
		   &m, &fd),
	    0);
	assert_ptr_not_equal(m.payload, kept);
	assert_ptr_equal(u.doc, m.payload);
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(m.payload,
							       "memory"),
					       0),
				"name")),
			    "n");
	proto_msg_clear(&m);
	json_decref(kept);

	/* While the kept document is held elsewhere it is not changed:
	 * the same bytes are parsed again. */
	assert_int_equal(
	    decode(&u, PROTO_ATTACHED,
		   "{\"attachment\":9," REST_N,
		   &m, &fd),
	    0);
	assert_ptr_equal(m.payload, u.doc); /* reused: nothing held it */
	kept = json_incref(m.payload);
	proto_msg_clear(&m);
	assert_int_equal(
	    decode(&u, PROTO_ATTACHED,
		   "{\"attachment\":10," REST_N,
		   &m, &fd),
	    0);
	assert_ptr_not_equal(m.payload, kept);
	assert_int_equal(attachment(&m), 10);
	assert_int_equal(json_integer_value(json_object_get(kept, "attachment")),
			 9);
	proto_msg_clear(&m);
	json_decref(kept);
	client_reuse_clear(&u);
}

/* Ids that JSON does not write so, or that do not fit, after a document
 * is kept: never taken for the kept one; decoded as they are. */
static void test_ids_checked(void **state)
{
	struct client_reuse u = { 0 };
	struct proto_msg m;
	json_t *kept;
	int fd;

	(void)state;
	kept = keep_first(&u);

	static const char *const invalid[] = {
		"{\"attachment\":07," REST,
		"{\"attachment\":+7," REST,
		"{\"attachment\":," REST,
		"{\"attachment\":7" REST,
	};
	for (size_t i = 0; i < sizeof(invalid) / sizeof(*invalid); i++) {
		assert_int_equal(decode(&u, PROTO_ATTACHED, invalid[i], &m,
					&fd),
				 -EBADMSG);
		assert_null(m.payload);
		assert_false(fd_open(fd)); /* closed, as on any error */
	}
	/* Valid JSON, but not the kept document's shape of id. */
	static const char *const valid[] = {
		"{\"attachment\":4294967296," REST,
		"{\"attachment\":-7," REST,
		"{\"attachment\": 7," REST,
		"{\"attachment\":7 ," REST,
		"{\"attachment\":7.0," REST,
		"{\"mode\":\"local\",\"attachment\":7,\"memory\":[{\"name\":"
		"\"m\",\"fd\":0}]}",
	};
	for (size_t i = 0; i < sizeof(valid) / sizeof(*valid); i++) {
		assert_int_equal(decode(&u, PROTO_ATTACHED, valid[i], &m, &fd),
				 0);
		assert_ptr_not_equal(m.payload, kept);
		proto_msg_clear(&m);
	}
	/* A duplicate key past the id is refused, as ever. */
	assert_int_equal(decode(&u, PROTO_ATTACHED,
				"{\"attachment\":7,\"attachment\":8}", &m, &fd),
			 -EBADMSG);
	client_reuse_clear(&u);
}

/* Another type, a bad header, fds the header does not announce: as
 * proto_decode_frame(), the kept document untouched. */
static void test_frames_checked(void **state)
{
	static uint8_t buf[PROTO_RECV_BYTES];
	struct client_reuse u = { 0 };
	struct proto_msg m;
	json_t *kept;
	size_t len;
	int fd, fds[1];

	(void)state;
	kept = keep_first(&u);

	/* DETACHED may not carry fds. */
	assert_int_equal(decode(&u, PROTO_DETACHED,
				"{\"attachment\":7," REST, &m, &fd),
			 -EBADMSG);
	assert_false(fd_open(fd));

	/* The header says no fd, one came. */
	fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	len = frame(buf, PROTO_ATTACHED, 0, "{\"attachment\":8," REST);
	assert_int_equal(client_reuse_decode(&u, buf, len, fds, 1, &m),
			 -EBADMSG);
	assert_false(fd_open(fds[0]));

	/* A bad magic. */
	fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	len = frame(buf, PROTO_ATTACHED, 1, "{\"attachment\":8," REST);
	buf[0] ^= 0xff;
	assert_int_equal(client_reuse_decode(&u, buf, len, fds, 1, &m),
			 -EBADMSG);
	assert_false(fd_open(fds[0]));

	/* A length the frame does not have. */
	fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	len = frame(buf, PROTO_ATTACHED, 1, "{\"attachment\":8," REST);
	assert_int_equal(client_reuse_decode(&u, buf, len - 1, fds, 1, &m),
			 -EBADMSG);

	assert_ptr_equal(u.doc, kept);
	assert_int_equal(json_integer_value(json_object_get(kept, "attachment")),
			 7);
	client_reuse_clear(&u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_bytes_reuse),
		cmocka_unit_test(test_other_bytes_are_parsed),
		cmocka_unit_test(test_ids_checked),
		cmocka_unit_test(test_frames_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
