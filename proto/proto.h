/* SPDX-License-Identifier: MIT */
/*
 * The attach/control protocol spoken on rdmad's unix socket
 * (SOCK_SEQPACKET), shared by the daemon and librdmad.
 *
 * A message is one datagram (a frame) or, from version 2 on, several:
 * each frame is a fixed 20-byte little-endian header, then payload
 * bytes. The message's payload is one JSON object. File descriptors
 * travel as SCM_RIGHTS on the frames of the message that announces
 * them, never on another message's.
 *
 *   offset  size  field
 *        0     4  magic        PROTO_MAGIC, bytes "RDMD"
 *        4     2  version      framing/payload version, 1 or 2
 *        6     2  type         enum proto_type
 *        8     2  flags        PROTO_FLAG_MORE (version >= 2), else 0
 *       10     2  n_fds        number of fds in this frame's SCM_RIGHTS
 *       12     4  id           request id, echoed by the answer
 *       16     4  length       payload bytes that follow (the rest of
 *                              the datagram, exactly)
 *       20     -  payload      this frame's part of the message's
 *                              payload: one JSON object, UTF-8, no NUL,
 *                              at most PROTO_MAX_JSON_DEPTH containers
 *                              deep, once the parts are put together
 *
 * Multi-frame messages (version 2): a frame with PROTO_FLAG_MORE is not
 * its message's last; the next frame the sender sends on the connection
 * continues it (a sender sends nothing else between the frames of one
 * message). The message is the concatenation of its frames' payload
 * bytes and of their fds, in order; all its frames carry the same type,
 * id and version; each frame stays within PROTO_MAX_FRAME and
 * PROTO_MAX_FDS; the payload may be cut at any byte (a frame may carry
 * fds and no payload byte). A whole message holds at most
 * PROTO_MAX_MESSAGE payload bytes and PROTO_MAX_MESSAGE_FDS fds. In a
 * version 1 frame any flag is an error (-EBADMSG). Only the daemon sends
 * multi-frame messages (ATTACHED, and a REPLY too big for one frame)
 * and only to a client that chose version 2; the daemon refuses a
 * client's multi-frame message as too large (ERROR message_too_large).
 * proto_frames_count()/proto_frame_pack() cut a message into frames;
 * proto_recv() and proto_recv_buf() put them together again.
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
#define PROTO_VERSION_MAX 2
/* The first version with multi-frame messages (PROTO_FLAG_MORE). */
#define PROTO_VERSION_FRAMES 2

#define PROTO_HDR_SIZE 20
#define PROTO_MAX_FRAME (64 * 1024) /* header + payload */
#define PROTO_MAX_PAYLOAD (PROTO_MAX_FRAME - PROTO_HDR_SIZE)
#define PROTO_MAX_FDS 32
/* A whole message (multi-frame, version >= 2): payload bytes and fds. */
#define PROTO_MAX_MESSAGE (64 * 1024 * 1024)
#define PROTO_MAX_MESSAGE_FDS 4096
/* Header flags. MORE: this frame is not the message's last one. */
#define PROTO_FLAG_MORE 0x0001
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
	/* daemon: the profile's objects, with fds (so does MAPPED) */
	PROTO_ATTACHED = 7,
	/* client: end an attachment */
	PROTO_DETACH = 8,
	/* daemon: the attachment ended */
	PROTO_DETACHED = 9,
	/* client: keys of the objects it registered itself (local mode) */
	PROTO_REPORT = 10,
	/*
	 * daemon: something happened that the client did not ask about,
	 * {"event":"device_removed",...}; id 0, no answer.
	 */
	PROTO_EVENT = 11,
	/* client, shared mode: objects its process made in the context
	 * (made.h); answered with REPLY. */
	PROTO_MADE = 12,
	/* client: {"attachment":7,"memory":"ring"}, the fd of a memory the
	 * attachment holds (ATTACH with "memory_fds": false) */
	PROTO_MAP = 13,
	/* daemon: {"memory":"ring","size":N,"fd":0} with that one fd. The
	 * last type. */
	PROTO_MAPPED = 14,
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
 * TAKE_FD(m->fds[i]); clear skips negative entries.
 *
 * fds points at fds_inline (PROTO_MAX_FDS entries, -1 each after
 * proto_msg_init()) until a received message brings more, then at an
 * array from the heap of n_fds entries. So a message must be set up by
 * proto_msg_init() (or be all zero: fds NULL, n_fds 0, safe to clear,
 * not to fill), and never copied as a struct: proto_msg_move() moves
 * one. Whoever fills fds[] by hand fills at most PROTO_MAX_FDS.
 */
struct proto_msg {
	uint16_t type, flags;
	uint32_t id;
	json_t *payload; /* a JSON object; NULL is sent as {} */
	int *fds;
	size_t n_fds;
	int fds_inline[PROTO_MAX_FDS];
};

void proto_msg_init(struct proto_msg *m);
/* Drop the payload, close the fds, free a heap fd array, and leave m
 * as proto_msg_init() does. */
void proto_msg_clear(struct proto_msg *m);
/* Move src into dst (dst's own content is not cleared first: clear it
 * before); src is left as proto_msg_init() leaves it. */
void proto_msg_move(struct proto_msg *dst, struct proto_msg *src);

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
 *   -EMSGSIZE         len > PROTO_MAX_FRAME, or PROTO_FLAG_MORE in
 *                     a version 2 frame (one frame of a bigger message:
 *                     only proto_recv() puts those together, so a
 *                     server that decodes frame by frame refuses it)
 *   -EBADMSG          length field != the bytes after the header,
 *                     unknown type, unknown flags, header n_fds !=
 *                     n_fds_received, fds on a type that carries none,
 *                     PROTO_FLAG_MORE in a version 1 frame,
 *                     payload nested deeper than PROTO_MAX_JSON_DEPTH
 *                     (found by a scan of the bytes before any parsing),
 *                     not JSON, not an object, duplicate keys, NUL in a
 *                     string
 *   -ENOMEM
 */
int proto_decode(const uint8_t *buf, size_t len, size_t n_fds_received,
		 struct proto_msg *m);

/*
 * Cutting a message into frames (version >= PROTO_VERSION_FRAMES), for
 * a sender that sends them one by one (the daemon's non-blocking one)
 * or at once (proto_send_message). The cut is fixed: frame i carries
 * payload bytes [i * PROTO_MAX_PAYLOAD, (i+1) * PROTO_MAX_PAYLOAD) and
 * fds [i * PROTO_MAX_FDS, (i+1) * PROTO_MAX_FDS), as far as there are
 * any; every frame but the last has PROTO_FLAG_MORE.
 *
 * proto_frames_count: how many frames a message of payload_len bytes
 * and n_fds fds takes (at least 1). A message of one frame is framed
 * exactly as version 1 frames it (no flag).
 */
size_t proto_frames_count(size_t payload_len, size_t n_fds);

/*
 * Frame index of the message whose payload is parts[0..n_parts) (their
 * concatenation, cut anywhere) with n_fds fds: its bytes (header and
 * payload slice) into buf, their count in *frame_len, and the slice of
 * the message's fds to send with it as SCM_RIGHTS, fds[*fd_first ..
 * *fd_first + *fd_count). version is the session's (a multi-frame
 * message needs >= PROTO_VERSION_FRAMES). Returns 0 or -EINVAL (unknown
 * type, fds on a type that carries none, index out of range, version 1
 * with more than one frame, n_parts > PROTO_MAX_TEXT_PARTS), -EMSGSIZE
 * (payload over PROTO_MAX_MESSAGE or fds over PROTO_MAX_MESSAGE_FDS).
 * The payload is not checked (JSON, depth): it is the caller's encoding.
 */
int proto_frame_packv(uint16_t version, uint16_t type, uint32_t id,
		      const struct iovec *parts, size_t n_parts,
		      size_t n_fds, size_t index,
		      uint8_t buf[PROTO_MAX_FRAME], size_t *frame_len,
		      size_t *fd_first, size_t *fd_count);
/* The same with the payload in one piece. */
int proto_frame_pack(uint16_t version, uint16_t type, uint32_t id,
		     const void *payload, size_t payload_len, size_t n_fds,
		     size_t index, uint8_t buf[PROTO_MAX_FRAME],
		     size_t *frame_len, size_t *fd_first, size_t *fd_count);

/*
 * Send a whole message, as many frames as proto_frames_count() says,
 * each with its slice of fds, on a blocking socket (a socket that says
 * -EAGAIN midway leaves the message cut: the connection is then
 * unusable). Returns 0, a proto_frame_packv() error, or the socket's.
 */
int proto_send_message(int sock, uint16_t version, uint16_t type,
		       uint32_t id, const struct iovec *parts,
		       size_t n_parts, const int *fds, size_t n_fds);

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
 * Receive one message into m (overwritten, as proto_decode): one frame,
 * or all the frames of a multi-frame message (version >= 2), waiting
 * for the ones after the first (a socket's receive timeout applies to
 * each; a frame that does not continue the message, of another type, id
 * or version, is -EBADMSG, and so is -EAGAIN midway). Received
 * fds are CLOEXEC. Every fd that arrives is either in m->fds on success
 * or closed on failure, whatever the failure. Returns 0 or:
 *   -EAGAIN           non-blocking socket, nothing to read
 *   -EPIPE            end of file: the peer closed the connection (a
 *                     zero-length datagram without fds reads the same)
 *   -ECONNRESET       the peer closed with our messages unread
 *   -EMSGSIZE         datagram larger than PROTO_MAX_FRAME, or more
 *                     than PROTO_MAX_FDS fds (in a frame), or a
 *                     message over PROTO_MAX_MESSAGE bytes or
 *                     PROTO_MAX_MESSAGE_FDS fds (control data truncated;
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

/*
 * How the fds a peer sent and the codec does not hand on (refused, past
 * PROTO_MAX_FDS, with a bad frame) are closed: by close_fn, or close(2)
 * when NULL (the default). A server that must not wait for a slow close
 * (a lingering socket, a FUSE file) closes them elsewhere (fdsink.h).
 */
void proto_set_closer(void (*close_fn)(int fd));
/* fds[0..n) closed as proto_set_closer() says; each set to -1. */
void proto_drop_fds(int *fds, size_t n);

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

/*
 * A message received, its frames put together, not decoded yet: for a
 * client that can answer some messages without decoding them (one it
 * has seen before, byte for byte; one it drops). hdr is the first
 * frame's header, with length the whole payload's and n_fds the whole
 * message's; payload points into the caller's buf (one frame) or into
 * heap (several); fds holds the fds (only fds.fds[0..fds.n_fds) is
 * used). proto_raw_clear() closes what is left and frees the rest.
 */
struct proto_raw {
	struct proto_hdr hdr;
	const uint8_t *frame; /* one frame: it, in buf; several: NULL */
	size_t frame_len;
	const uint8_t *payload;
	size_t len;
	uint8_t *heap;
	struct proto_msg fds;
};

/*
 * proto_recv_buf's receiving half: one frame into buf (cap >=
 * PROTO_RECV_BYTES), and the frames that continue it, if it has
 * PROTO_FLAG_MORE. Errors as proto_recv_buf's, except that a single
 * frame is not checked past what receiving it needs (proto_decode_raw
 * does); a multi-frame message's headers are checked as they come. On
 * error raw holds no fd, and raw->hdr what the first header told (for
 * the ERROR's id; zero without one).
 */
int proto_recv_raw(int sock, uint8_t *buf, size_t cap, struct proto_raw *raw);
/* The payload of a well-formed raw message of type type (see
 * proto_frame_payload), else NULL. */
const uint8_t *proto_raw_payload(const struct proto_raw *raw, uint16_t type,
				 size_t *len);
/* Decode raw into m, as proto_decode_frame; m takes the fds (raw keeps
 * none, success or not). raw is to be cleared after, and m keeps
 * nothing of it. */
int proto_decode_raw(struct proto_raw *raw, struct proto_msg *m);
void proto_raw_clear(struct proto_raw *raw);

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
