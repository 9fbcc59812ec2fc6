// SPDX-License-Identifier: MIT
/*
 * Messages of several frames (protocol version 2, proto.h): the cut
 * (proto_frames_count, proto_frame_pack), sending and putting together
 * again over a real SOCK_SEQPACKET pair (proto_send_message,
 * proto_recv) at sizes around the frame's edges and the fd caps, and
 * what is refused: a version 1 frame with MORE, one frame of more to a
 * frame-by-frame decoder, a continuation of another message, a message
 * over the caps.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto.h"

static void test_count(void **state)
{
	(void)state;
	assert_int_equal(proto_frames_count(0, 0), 1);
	assert_int_equal(proto_frames_count(PROTO_MAX_PAYLOAD, 0), 1);
	assert_int_equal(proto_frames_count(PROTO_MAX_PAYLOAD + 1, 0), 2);
	assert_int_equal(proto_frames_count(2, PROTO_MAX_FDS), 1);
	assert_int_equal(proto_frames_count(2, PROTO_MAX_FDS + 1), 2);
	assert_int_equal(proto_frames_count(2, 100), 4);
	assert_int_equal(proto_frames_count(2, PROTO_MAX_MESSAGE_FDS), 128);
	assert_int_equal(proto_frames_count(3 * PROTO_MAX_PAYLOAD, 100), 4);
}

static void test_pack(void **state)
{
	static uint8_t buf[PROTO_MAX_FRAME];
	static char payload[PROTO_MAX_PAYLOAD + 5];
	struct proto_hdr h;
	size_t len, f0, nf;

	(void)state;
	memset(payload, 'x', sizeof(payload));
	/* One frame: framed as version 1 frames it, whatever the session. */
	assert_int_equal(proto_frame_pack(2, PROTO_ATTACHED, 9, "{}", 2, 3, 0,
					  buf, &len, &f0, &nf),
			 0);
	proto_hdr_unpack(buf, &h);
	assert_int_equal(h.version, 1);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.n_fds, 3);
	assert_int_equal(len, PROTO_HDR_SIZE + 2);
	assert_int_equal(f0, 0);
	assert_int_equal(nf, 3);
	/* Two: the first full with MORE, the last the 5 bytes left. */
	assert_int_equal(proto_frame_pack(2, PROTO_REPLY, 9, payload,
					  sizeof(payload), 0, 0, buf, &len,
					  &f0, &nf),
			 0);
	proto_hdr_unpack(buf, &h);
	assert_int_equal(h.version, 2);
	assert_int_equal(h.flags, PROTO_FLAG_MORE);
	assert_int_equal(len, PROTO_MAX_FRAME);
	assert_int_equal(proto_frame_pack(2, PROTO_REPLY, 9, payload,
					  sizeof(payload), 0, 1, buf, &len,
					  &f0, &nf),
			 0);
	proto_hdr_unpack(buf, &h);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.length, 5);
	/* Fds beyond the bytes: frames of fds and no byte. */
	assert_int_equal(proto_frame_pack(2, PROTO_ATTACHED, 9, "{}", 2, 70, 2,
					  buf, &len, &f0, &nf),
			 0);
	proto_hdr_unpack(buf, &h);
	assert_int_equal(h.length, 0);
	assert_int_equal(f0, 64);
	assert_int_equal(nf, 6);
	/* Refused: past the last frame, several frames in version 1, fds on
	 * a type without, over the caps. */
	assert_int_equal(proto_frame_pack(2, PROTO_ATTACHED, 9, "{}", 2, 70, 3,
					  buf, &len, &f0, &nf),
			 -EINVAL);
	assert_int_equal(proto_frame_pack(1, PROTO_REPLY, 9, payload,
					  sizeof(payload), 0, 0, buf, &len,
					  &f0, &nf),
			 -EINVAL);
	assert_int_equal(proto_frame_pack(2, PROTO_REPLY, 9, "{}", 2, 1, 0,
					  buf, &len, &f0, &nf),
			 -EINVAL);
	assert_int_equal(proto_frame_pack(2, PROTO_ATTACHED, 9, "{}", 2,
					  PROTO_MAX_MESSAGE_FDS + 1, 0, buf,
					  &len, &f0, &nf),
			 -EMSGSIZE);
	assert_int_equal(proto_frame_pack(2, PROTO_ATTACHED, 9, payload,
					  (size_t)PROTO_MAX_MESSAGE + 1, 0, 0,
					  buf, &len, &f0, &nf),
			 -EMSGSIZE);
}

/* {"pad":"xxx..."} of exactly len bytes (len >= 10). */
static char *json_of(size_t len)
{
	char *s = malloc(len + 1);

	assert_non_null(s);
	memcpy(s, "{\"pad\":\"", 8);
	memset(s + 8, 'x', len - 10);
	memcpy(s + len - 2, "\"}", 3);
	return s;
}

/* A child sends ATTACHED of len bytes and n_fds fds (each an fd of a
 * file whose size is its index) as frames of version 2; we receive it. */
static void send_recv(size_t len, size_t n_fds)
{
	char *payload = json_of(len);
	struct proto_msg m;
	struct iovec part = { payload, len };
	int sv[2], status;
	pid_t pid;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				    sv),
			 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int *fds = calloc(n_fds ? n_fds : 1, sizeof(int));

		close(sv[0]);
		for (size_t i = 0; i < n_fds; i++) {
			fds[i] = memfd_create("f", MFD_CLOEXEC);
			if (fds[i] < 0 || ftruncate(fds[i], (off_t)i) < 0)
				_exit(2);
		}
		_exit(proto_send_message(sv[1], 2, PROTO_ATTACHED, 77, &part, 1,
					 fds, n_fds) == 0
			      ? 0
			      : 1);
	}
	close(sv[1]);
	assert_int_equal(proto_recv(sv[0], &m), 0);
	assert_int_equal(m.type, PROTO_ATTACHED);
	assert_int_equal(m.id, 77);
	assert_int_equal(m.flags, 0);
	assert_int_equal(m.n_fds, n_fds);
	assert_int_equal(json_string_length(json_object_get(m.payload, "pad")),
			 len - 10);
	for (size_t i = 0; i < n_fds; i++) {
		struct stat st;

		assert_int_equal(fstat(m.fds[i], &st), 0);
		assert_int_equal(st.st_size, (off_t)i); /* in order */
	}
	proto_msg_clear(&m);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(sv[0]);
	free(payload);
}

static void test_round_trips(void **state)
{
	(void)state;
	send_recv(10, 0);
	send_recv(PROTO_MAX_PAYLOAD, 0);     /* one frame exactly */
	send_recv(PROTO_MAX_PAYLOAD + 1, 0); /* one byte over */
	send_recv(PROTO_MAX_PAYLOAD + 1, 33);
	send_recv(100, 100);
	send_recv(3 * 1024 * 1024 + 7, 5);
}

static void test_max_fds(void **state)
{
	struct rlimit rl;

	(void)state;
	/* Both ends hold every fd at once, and the kernel's in flight. */
	size_t n = PROTO_MAX_MESSAGE_FDS;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	/* A machine that allows fewer: as many as it allows (not a skip,
	 * which would send the suite to the VM for nothing). */
	if (rl.rlim_max < 3 * n + 64)
		n = (rl.rlim_max - 64) / 3;
	rl.rlim_cur = 3 * n + 64;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	send_recv(PROTO_MAX_PAYLOAD * 2, n);
}

static size_t frame(uint8_t *buf, uint16_t version, uint16_t type,
		    uint16_t flags, uint32_t id, const char *payload)
{
	struct proto_hdr h = { .magic = PROTO_MAGIC,
			       .version = version,
			       .type = type,
			       .flags = flags,
			       .id = id,
			       .length = (uint32_t)strlen(payload) };

	proto_hdr_pack(&h, buf);
	memcpy(buf + PROTO_HDR_SIZE, payload, h.length);
	return PROTO_HDR_SIZE + h.length;
}

static void test_refused(void **state)
{
	uint8_t buf[256];
	struct proto_msg m;
	int sv[2];
	size_t len;

	(void)state;
	/* A version 1 frame with MORE: no flag exists in version 1. */
	len = frame(buf, 1, PROTO_REPLY, PROTO_FLAG_MORE, 1, "{}");
	assert_int_equal(proto_decode(buf, len, 0, &m), -EBADMSG);
	/* A version 2 one, to a decoder of single frames: too large. */
	len = frame(buf, 2, PROTO_REPLY, PROTO_FLAG_MORE, 1, "{}");
	assert_int_equal(proto_decode(buf, len, 0, &m), -EMSGSIZE);
	assert_int_equal(m.id, 1);
	/* Another flag. */
	len = frame(buf, 2, PROTO_REPLY, 0x0002, 1, "{}");
	assert_int_equal(proto_decode(buf, len, 0, &m), -EBADMSG);

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	/* The same through proto_recv. */
	len = frame(buf, 1, PROTO_REPLY, PROTO_FLAG_MORE, 1, "{}");
	assert_int_equal(send(sv[1], buf, len, 0), (ssize_t)len);
	assert_int_equal(proto_recv(sv[0], &m), -EBADMSG);
	/* Continued by a frame of another id, then of another type. */
	len = frame(buf, 2, PROTO_REPLY, PROTO_FLAG_MORE, 5, "{\"a\":");
	assert_int_equal(send(sv[1], buf, len, 0), (ssize_t)len);
	len = frame(buf, 2, PROTO_REPLY, 0, 6, "1}");
	assert_int_equal(send(sv[1], buf, len, 0), (ssize_t)len);
	assert_int_equal(proto_recv(sv[0], &m), -EBADMSG);
	assert_int_equal(m.id, 5);
	len = frame(buf, 2, PROTO_REPLY, PROTO_FLAG_MORE, 5, "{\"a\":");
	assert_int_equal(send(sv[1], buf, len, 0), (ssize_t)len);
	len = frame(buf, 2, PROTO_EVENT, 0, 5, "1}");
	assert_int_equal(send(sv[1], buf, len, 0), (ssize_t)len);
	assert_int_equal(proto_recv(sv[0], &m), -EBADMSG);
	/* Put together right: one object cut inside a key. */
	len = frame(buf, 2, PROTO_REPLY, PROTO_FLAG_MORE, 5, "{\"a");
	assert_int_equal(send(sv[1], buf, len, 0), (ssize_t)len);
	len = frame(buf, 2, PROTO_REPLY, 0, 5, "\":1}");
	assert_int_equal(send(sv[1], buf, len, 0), (ssize_t)len);
	assert_int_equal(proto_recv(sv[0], &m), 0);
	assert_int_equal(json_integer_value(json_object_get(m.payload, "a")),
			 1);
	proto_msg_clear(&m);
	/* Cut short: the sender goes after a MORE. */
	len = frame(buf, 2, PROTO_REPLY, PROTO_FLAG_MORE, 5, "{\"a\":");
	assert_int_equal(send(sv[1], buf, len, 0), (ssize_t)len);
	close(sv[1]);
	assert_int_equal(proto_recv(sv[0], &m), -EBADMSG);
	close(sv[0]);
}

/* A message moved keeps its heap fds; a struct never copied. */
static void test_move(void **state)
{
	struct proto_msg a, b;

	(void)state;
	proto_msg_init(&a);
	a.fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	a.n_fds = 1;
	proto_msg_move(&b, &a);
	assert_int_equal(a.n_fds, 0);
	assert_ptr_equal(a.fds, a.fds_inline);
	assert_ptr_equal(b.fds, b.fds_inline);
	assert_true(b.fds[0] >= 0);
	proto_msg_clear(&a);
	proto_msg_clear(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_count),	    cmocka_unit_test(test_pack),
		cmocka_unit_test(test_round_trips), cmocka_unit_test(test_max_fds),
		cmocka_unit_test(test_refused),	    cmocka_unit_test(test_move),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
