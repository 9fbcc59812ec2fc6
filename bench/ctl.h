/* SPDX-License-Identifier: MIT */
/*
 * The few control-socket steps the bench clients share: connect to a
 * SOCK_SEQPACKET socket, say HELLO, and encode the REQUEST that asks for
 * GET /v1/health, once, into bytes that are then sent as they are.
 * Built on rdmad's own codec (proto/proto.c).
 */
#ifndef BENCH_CTL_H
#define BENCH_CTL_H

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto.h"

/* A connected, blocking SOCK_SEQPACKET socket, or -errno. */
static inline int ctl_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/*
 * Send HELLO and read one datagram back. With check, the answer must be
 * a WELCOME (the daemon); an echo server's answer is taken as it is.
 */
static inline int ctl_hello(int fd, int check)
{
	struct proto_msg m;
	uint8_t buf[PROTO_MAX_FRAME];
	int r;

	r = proto_hello(&m, 1);
	if (r == 0)
		r = proto_send(fd, &m);
	proto_msg_clear(&m);
	if (r < 0)
		return r;
	if (!check)
		return recv(fd, buf, sizeof(buf), 0) > 0 ? 0 : -EPIPE;
	r = proto_recv(fd, &m);
	if (r == 0 && m.type != PROTO_WELCOME)
		r = -EPROTO;
	proto_msg_clear(&m);
	return r;
}

/* REQUEST {"method":"GET","path":path} as one datagram in buf. */
static inline int ctl_request_bytes(const char *path, uint8_t *buf,
				    size_t cap, size_t *len)
{
	struct proto_msg m;
	int r;

	proto_msg_init(&m);
	m.type = PROTO_REQUEST;
	m.id = 2;
	m.payload = json_pack("{s:s, s:s}", "method", "GET", "path", path);
	if (!m.payload)
		return -ENOMEM;
	r = proto_encode(&m, buf, cap, len);
	proto_msg_clear(&m);
	return r;
}

#endif
