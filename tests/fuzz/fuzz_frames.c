// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for putting messages of several frames together
 * (proto_recv, proto/frames.c). The input is a sequence of datagrams,
 * each a 2-byte little-endian length and that many bytes; they are sent
 * on a SOCK_SEQPACKET pair, the sender closes, and proto_recv reads
 * messages until it fails. Whatever it returns must be a message the
 * protocol allows: an object payload, no flag left, as many fds as it
 * says (none here).
 *
 *   make fuzz FUZZ_TARGETS=fuzz_frames
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_msg m;
	int sv[2], r;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       0, sv) < 0)
		return 0;
	while (size >= 2) {
		size_t len = data[0] | (size_t)data[1] << 8;

		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		/* A full socket ends the input there. */
		if (send(sv[1], data, len, MSG_NOSIGNAL) < 0)
			break;
		data += len;
		size -= len;
	}
	close(sv[1]);
	do {
		r = proto_recv(sv[0], &m);
		if (r == 0) {
			check(json_is_object(m.payload));
			check(m.flags == 0 && m.n_fds == 0);
			check(proto_type_allowed(m.type, PROTO_PEER_CLIENT |
								 PROTO_PEER_DAEMON));
		} else {
			check(m.payload == NULL && m.n_fds == 0);
		}
		proto_msg_clear(&m);
	} while (r == 0);
	close(sv[0]);
	return 0;
}
