/* SPDX-License-Identifier: MIT */
/*
 * The attach/control protocol spoken on rdmad's unix socket
 * (SOCK_SEQPACKET), shared by the daemon and librdmad.
 *
 * One message is one datagram: a fixed 20-byte little-endian header,
 * then a JSON object. File descriptors travel as SCM_RIGHTS on the
 * datagram of the message that announces them, never on another one.
 *
 *   offset  size  field
 *        0     4  magic        PROTO_MAGIC, bytes "RDMD"
 *        4     2  version      framing/payload version, PROTO_VERSION
 *        6     2  type         enum proto_type
 *        8     2  flags        no flag is defined yet: must be 0
 *       10     2  n_fds        number of fds in this datagram's SCM_RIGHTS
 *       12     4  id           request id, echoed by the answer
 *       16     4  length       payload bytes that follow (the rest of
 *                              the datagram, exactly)
 *       20     -  payload      one JSON object, UTF-8, no NUL, at most
 *                              PROTO_MAX_JSON_DEPTH containers deep
 *
 * The header is packed and unpacked byte by byte (proto_hdr_pack()),
 * never by casting a struct over the buffer, so it does not depend on
 * the host's byte order, padding or alignment.
 *
 * Versioning: the first 8 bytes (magic, version) and the HELLO and
 * WELCOME messages are frozen. A client sends HELLO framed as version
 * 1 with the range of versions it speaks; the daemon answers WELCOME
 * (also framed as version 1) with the version it chose, or ERROR, and
 * from then on both sides frame every message with the chosen version.
 *
 * The codec (proto_encode/proto_decode) does no I/O and keeps no state,
 * so it can be fuzzed. Everything returns 0 or a negative errno and
 * nothing logs; proto_strerror() gives the sentence for an ERROR reply.
 */
#ifndef RDMAD_PROTO_H
#define RDMAD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <jansson.h>

#define PROTO_MAGIC 0x444d4452u /* "RDMD" on the wire */
#define PROTO_VERSION 1
#define PROTO_VERSION_MIN 1 /* range this build speaks */
#define PROTO_VERSION_MAX 1

#define PROTO_HDR_SIZE 20
#define PROTO_MAX_FRAME (64 * 1024) /* header + payload */
#define PROTO_MAX_PAYLOAD (PROTO_MAX_FRAME - PROTO_HDR_SIZE)
#define PROTO_MAX_FDS 32
/* Nesting of objects and arrays, the payload's own object counting 1. */
#define PROTO_MAX_JSON_DEPTH 16

/*
 * Message types. The numbers are wire ABI: never renumber, only append.
 * Who may send each type, and whether it may carry fds, is in the
 * table in proto.c (see proto_type_allowed() and proto_type_has_fds()).
 */
enum proto_type {
	/* client: {"versions":[min,max]} */
	PROTO_HELLO = 1,
	/* daemon: {"version":v,"server":"rdmad","server_version":"x.y.z"} */
	PROTO_WELCOME = 2,
	/* either: {"error":{"code":"...","message":"..."}}, as REST */
	PROTO_ERROR = 3,
	/* client: {"method":"GET","path":"/v1/...","body":{...}} */
	PROTO_REQUEST = 4,
	/* daemon: {"status":200,"body":{...}} */
	PROTO_REPLY = 5,
	/* client: which profile to attach, how */
	PROTO_ATTACH = 6,
	/* daemon: the profile's objects; the only type that carries fds */
	PROTO_ATTACHED = 7,
	/* client: end an attachment */
	PROTO_DETACH = 8,
	/* daemon: the attachment ended */
	PROTO_DETACHED = 9,
	/* client: keys of the objects it registered itself (local mode) */
	PROTO_REPORT = 10,
	/*
	 * daemon: something happened that the client did not ask about,
	 * {"event":"device_removed",...}; id 0, no answer. The last type.
	 */
	PROTO_EVENT = 11,
};

/* Who sends a message; for proto_type_allowed(). */
enum proto_peer {
	PROTO_PEER_CLIENT = 1 << 0,
	PROTO_PEER_DAEMON = 1 << 1,
};

/* The header as numbers; only proto_hdr_pack/unpack touch the bytes. */
struct proto_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint16_t flags;
	uint16_t n_fds;
	uint32_t id;
	uint32_t length;
};

/*
 * A message. The message owns payload (one reference) and fds[0..n_fds):
 * proto_msg_clear() drops and closes them. To keep an fd, take it with
 * TAKE_FD(m->fds[i]); clear skips negative entries. An all-zero message
 * (n_fds = 0) is also safe to clear.
 */
struct proto_msg {
	uint16_t type, flags;
	uint32_t id;
	json_t *payload; /* a JSON object; NULL is sent as {} */
	int fds[PROTO_MAX_FDS];
	size_t n_fds;
};

#define PROTO_MSG_INIT                                                         \
	{                                                                      \
		.fds = {[0 ... PROTO_MAX_FDS - 1] = -1 }                       \
	}

void proto_msg_init(struct proto_msg *m);
/* Drop the payload, close the fds, and leave m as proto_msg_init() does. */
void proto_msg_clear(struct proto_msg *m);

void proto_hdr_pack(const struct proto_hdr *h, uint8_t out[PROTO_HDR_SIZE]);
void proto_hdr_unpack(const uint8_t in[PROTO_HDR_SIZE], struct proto_hdr *h);

/* "HELLO", "ATTACHED", ...; "UNKNOWN" for a number that is not a type. */
const char *proto_type_name(uint16_t type);
/* Whether the type exists and the sender (enum proto_peer) may send it. */
bool proto_type_allowed(uint16_t type, enum proto_peer sender);
/* Whether a message of this type may carry fds. */
bool proto_type_has_fds(uint16_t type);

/*
 * Encode m into buf. On success *len is the datagram's length and
 * m->n_fds the count written in the header (the fds themselves are for
 * proto_send). Errors, all caller bugs except the sizes:
 *   -EINVAL    unknown type or flags, payload not an object or deeper
 *              than PROTO_MAX_JSON_DEPTH, n_fds > PROTO_MAX_FDS, or
 *              n_fds > 0 on a type that carries none
 *   -EMSGSIZE  the frame would be larger than PROTO_MAX_FRAME
 *   -ENOBUFS   it would fit the protocol but not cap
 *   -ENOMEM
 */
int proto_encode(const struct proto_msg *m, uint8_t *buf, size_t cap,
		 size_t *len);

/*
 * Decode one datagram of len bytes that arrived with n_fds_received
 * fds. m is overwritten (not cleared first). On success m->payload is
 * a new reference to an object, m->n_fds == n_fds_received and every
 * m->fds[] is -1: the fds themselves are the caller's to fill in
 * (proto_recv does). On failure m holds no payload and no fds; if the
 * header could be read (length and magic right), m->type, m->flags
 * and m->id are set so that the ERROR answer can name the request.
 * Errors, in the order they are checked:
 *   -EBADMSG          shorter than a header, or wrong magic
 *   -EPROTONOSUPPORT  header version not one this build speaks
 *   -EMSGSIZE         len > PROTO_MAX_FRAME
 *   -EBADMSG          length field != the bytes after the header,
 *                     unknown type, unknown flags, header n_fds !=
 *                     n_fds_received, fds on a type that carries none,
 *                     payload nested deeper than PROTO_MAX_JSON_DEPTH
 *                     (found by a scan of the bytes before any parsing),
 *                     not JSON, not an object, duplicate keys, NUL in a
 *                     string
 *   -ENOMEM
 */
int proto_decode(const uint8_t *buf, size_t len, size_t n_fds_received,
		 struct proto_msg *m);

/*
 * Send m as one datagram with m->fds[0..n_fds) as SCM_RIGHTS. The fds
 * stay open and m stays the caller's. MSG_NOSIGNAL; retried on EINTR.
 * The datagram is sent whole or not at all. Returns 0, an encode
 * error, -EBADF for a negative fd in m->fds[0..n_fds), or the socket's
 * error: -EAGAIN (non-blocking socket full: send it again later),
 * -EPIPE (the peer has gone), ...
 */
int proto_send(int sock, const struct proto_msg *m);

/*
 * A payload already encoded (JSON text as proto_encode() writes it: a
 * cached document, a fixed answer), framed under a header of type and
 * id and sent with fds as proto_send() sends. The payload is not
 * checked. Returns what proto_send() returns; -EMSGSIZE for a payload
 * over PROTO_MAX_PAYLOAD, -EINVAL for more than PROTO_MAX_FDS fds.
 */
int proto_send_text(int sock, uint16_t type, uint32_t id, const void *payload,
		    size_t len, const int *fds, size_t n_fds);
/* The same, the payload in parts (at most PROTO_MAX_TEXT_PARTS), sent
 * as one: a kept document with a field of this message before it. */
#define PROTO_MAX_TEXT_PARTS 4
int proto_send_textv(int sock, uint16_t type, uint32_t id,
		     const struct iovec *parts, size_t n_parts, const int *fds,
		     size_t n_fds);

/*
 * sendmsg() of iov as one datagram, to addr unless it is NULL, with
 * fds[0..n_fds) as SCM_RIGHTS (at most PROTO_MAX_FDS). MSG_NOSIGNAL,
 * retried on EINTR. Returns 0, -EINVAL (too many fds), -EBADF (a
 * negative fd), -EIO (sent short), or the socket's error.
 */
int proto_sendmsg(int sock, const struct sockaddr *addr, socklen_t addr_len,
		  const struct iovec *iov, size_t n_iov, const int *fds,
		  size_t n_fds);

/*
 * Receive one message into m (overwritten, as proto_decode). Received
 * fds are CLOEXEC. Every fd that arrives is either in m->fds on success
 * or closed on failure, whatever the failure. Returns 0 or:
 *   -EAGAIN           non-blocking socket, nothing to read
 *   -EPIPE            end of file: the peer closed the connection (a
 *                     zero-length datagram without fds reads the same)
 *   -ECONNRESET       the peer closed with our messages unread
 *   -EMSGSIZE         datagram larger than PROTO_MAX_FRAME, or more
 *                     than PROTO_MAX_FDS fds (control data truncated;
 *                     the kernel also truncates when this process is
 *                     out of fds, RLIMIT_NOFILE, and that reads the same)
 *   -EBADMSG          control data other than SCM_RIGHTS (e.g. the
 *                     socket has SO_PASSCRED or SO_PASSPIDFD set: the
 *                     peer's identity comes from SO_PEERCRED, never
 *                     from messages), or a proto_decode error
 *   -EPROTONOSUPPORT  from proto_decode
 *   -ENOMEM, or another recvmsg error
 * Any error but -EAGAIN leaves the stream in a state where the caller
 * should answer ERROR (if the peer is still there) and close.
 */
int proto_recv(int sock, struct proto_msg *m);

/* What proto_recv_buf needs: a frame and one byte more (to tell a
 * datagram that just fits from one too big). */
#define PROTO_RECV_BYTES (PROTO_MAX_FRAME + 1)

/*
 * proto_recv into the caller's buf of cap >= PROTO_RECV_BYTES bytes
 * (-EINVAL if smaller): for a server that receives message after
 * message, no allocation per message. buf holds nothing the caller
 * needs afterwards: m owns everything it returns.
 */
int proto_recv_buf(int sock, struct proto_msg *m, uint8_t *buf, size_t cap);

/*
 * proto_recv_buf in two steps, for a server that can answer some frames
 * without decoding them (one it has seen before, byte for byte):
 * proto_recv_frame receives one datagram into buf (cap as above) and its
 * fds, *len its size; errors as proto_recv, except that the frame is not
 * decoded (and its fds are closed on any error). proto_decode_frame
 * decodes it into m, which then owns the fds; on failure they are
 * closed and m has what the header told (type, id) for the ERROR.
 */
int proto_recv_frame(int sock, uint8_t *buf, size_t cap, size_t *len,
		     int fds[PROTO_MAX_FDS], size_t *n_fds);
int proto_decode_frame(const uint8_t *buf, size_t len, int *fds,
		       size_t n_fds, struct proto_msg *m);

/* m initialized, with the type and id a frame's header tells (if it has
 * one): for the ERROR answering a frame that proto_recv_frame refused. */
void proto_frame_ids(const uint8_t *buf, size_t len, struct proto_msg *m);

/*
 * A frame whose header is well formed (magic, a version in range, known
 * type and flags, length matching, n_fds fds as the header says and only
 * for a type that carries fds) and whose type is type: its payload and
 * length, else NULL. Says nothing of the payload itself.
 */
const uint8_t *proto_frame_payload(const uint8_t *buf, size_t len,
				   size_t n_fds, uint16_t type,
				   size_t *payload_len);

/* Client: build the HELLO offering PROTO_VERSION_MIN..PROTO_VERSION_MAX. */
int proto_hello(struct proto_msg *m, uint32_t id);

/*
 * Daemon: pick the highest version both sides speak from a HELLO's
 * payload. -EBADMSG if the payload is not {"versions":[min,max]} with
 * integers 1 <= min <= max <= 65535; -EPROTONOSUPPORT if the ranges do
 * not meet.
 */
int proto_negotiate(const json_t *hello, uint16_t *version);

/* Daemon: build the WELCOME announcing version. */
int proto_welcome(struct proto_msg *m, uint32_t id, uint16_t version,
		  const char *server_version);

/*
 * Client: the version a WELCOME's payload chose. -EBADMSG if there is
 * none, -EPROTONOSUPPORT if it is outside what this build speaks.
 */
int proto_welcome_version(const json_t *welcome, uint16_t *version);

/*
 * For a protocol error err (negative or positive errno): a sentence,
 * and a stable code for {"error":{"code":...}} in the style of the
 * REST API ("bad_message", "unsupported_version", "message_too_large",
 * ...). Never NULL.
 */
const char *proto_strerror(int err);
const char *proto_error_code(int err);

/* Build the ERROR message for err, answering request id (0 if unknown). */
int proto_error(struct proto_msg *m, uint32_t id, int err);

#endif
