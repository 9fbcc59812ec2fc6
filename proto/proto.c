// SPDX-License-Identifier: MIT
/* The attach/control protocol codec and its socket I/O: see proto.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto.h"
#include "proto_internal.h"
#include "util.h"

/* Linux >= 6.5; older C libraries do not name it. It carries an fd. */
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

uint16_t proto_flags_known(uint16_t version)
{
	return version >= PROTO_VERSION_FRAMES ? PROTO_FLAG_MORE : 0;
}

static const struct proto_type_info {
	const char *name;
	unsigned senders; /* enum proto_peer bits */
	bool fds;
} types[] = {
    [PROTO_HELLO] = {"HELLO", PROTO_PEER_CLIENT, false},
    [PROTO_WELCOME] = {"WELCOME", PROTO_PEER_DAEMON, false},
    [PROTO_ERROR] = {"ERROR", PROTO_PEER_CLIENT | PROTO_PEER_DAEMON, false},
    [PROTO_REQUEST] = {"REQUEST", PROTO_PEER_CLIENT, false},
    [PROTO_REPLY] = {"REPLY", PROTO_PEER_DAEMON, false},
    [PROTO_ATTACH] = {"ATTACH", PROTO_PEER_CLIENT, false},
    [PROTO_ATTACHED] = {"ATTACHED", PROTO_PEER_DAEMON, true},
    [PROTO_DETACH] = {"DETACH", PROTO_PEER_CLIENT, false},
    [PROTO_DETACHED] = {"DETACHED", PROTO_PEER_DAEMON, false},
    [PROTO_REPORT] = {"REPORT", PROTO_PEER_CLIENT, false},
    [PROTO_EVENT] = {"EVENT", PROTO_PEER_DAEMON, false},
    [PROTO_MADE] = {"MADE", PROTO_PEER_CLIENT, false},
    [PROTO_MAP] = {"MAP", PROTO_PEER_CLIENT, false},
    [PROTO_MAPPED] = {"MAPPED", PROTO_PEER_DAEMON, true},
};

static const struct proto_type_info *type_info(uint16_t type)
{
	if (type >= ARRAY_SIZE(types) || !types[type].name)
		return NULL;
	return &types[type];
}

const char *proto_type_name(uint16_t type)
{
	const struct proto_type_info *t = type_info(type);

	return t ? t->name : "UNKNOWN";
}

bool proto_type_allowed(uint16_t type, enum proto_peer sender)
{
	const struct proto_type_info *t = type_info(type);

	return t && (t->senders & sender);
}

bool proto_type_has_fds(uint16_t type)
{
	const struct proto_type_info *t = type_info(type);

	return t && t->fds;
}

void proto_msg_init(struct proto_msg *m)
{
	m->type = 0;
	m->flags = 0;
	m->id = 0;
	m->payload = NULL;
	m->fds = m->fds_inline;
	m->n_fds = 0;
	for (size_t i = 0; i < PROTO_MAX_FDS; i++)
		m->fds_inline[i] = -1;
}

void proto_msg_clear(struct proto_msg *m)
{
	json_decref(m->payload);
	if (m->fds) {
		for (size_t i = 0; i < m->n_fds; i++)
			closep(&m->fds[i]);
		if (m->fds != m->fds_inline)
			free(m->fds);
	}
	proto_msg_init(m);
}

void proto_msg_move(struct proto_msg *dst, struct proto_msg *src)
{
	proto_msg_init(dst);
	dst->type = src->type;
	dst->flags = src->flags;
	dst->id = src->id;
	dst->payload = src->payload;
	dst->n_fds = src->n_fds;
	if (src->fds && src->fds != src->fds_inline)
		dst->fds = src->fds; /* the heap array changes hands */
	else if (src->fds)
		memcpy(dst->fds_inline, src->fds_inline,
		       sizeof(dst->fds_inline));
	src->payload = NULL;
	src->fds = NULL;
	src->n_fds = 0;
	proto_msg_init(src);
}

int proto_msg_reserve_fds(struct proto_msg *m, size_t n)
{
	int *fds;

	if (!m->fds)
		proto_msg_init(m);
	if (n <= PROTO_MAX_FDS && m->fds == m->fds_inline)
		return 0;
	if (m->fds != m->fds_inline) {
		fds = realloc(m->fds, n * sizeof(*fds));
		if (!fds)
			return -ENOMEM;
	} else {
		fds = malloc(n * sizeof(*fds));
		if (!fds)
			return -ENOMEM;
		memcpy(fds, m->fds_inline, m->n_fds * sizeof(*fds));
	}
	for (size_t i = m->n_fds; i < n; i++)
		fds[i] = -1;
	m->fds = fds;
	return 0;
}

/* ---- header ---- */

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = v;
	p[1] = v >> 8;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static uint16_t get_le16(const uint8_t *p)
{
	return p[0] | p[1] << 8;
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

void proto_hdr_pack(const struct proto_hdr *h, uint8_t out[PROTO_HDR_SIZE])
{
	put_le32(out + 0, h->magic);
	put_le16(out + 4, h->version);
	put_le16(out + 6, h->type);
	put_le16(out + 8, h->flags);
	put_le16(out + 10, h->n_fds);
	put_le32(out + 12, h->id);
	put_le32(out + 16, h->length);
}

void proto_hdr_unpack(const uint8_t in[PROTO_HDR_SIZE], struct proto_hdr *h)
{
	h->magic = get_le32(in + 0);
	h->version = get_le16(in + 4);
	h->type = get_le16(in + 6);
	h->flags = get_le16(in + 8);
	h->n_fds = get_le16(in + 10);
	h->id = get_le32(in + 12);
	h->length = get_le32(in + 16);
}

/* ---- payload ---- */

/*
 * The deepest nesting of [ and { in a JSON text, strings skipped, in
 * one flat pass with no recursion; stops early once past max. Exact for
 * valid JSON; on invalid JSON it agrees with any JSON parser up to the
 * parser's first error (strings and brackets tokenise the same way), so
 * a parser run after it never nests deeper than max. -1 for a closing
 * bracket without an opening one.
 */
static int json_depth(const uint8_t *p, size_t len, int max)
{
	bool in_string = false;
	int depth = 0, deepest = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		uint8_t c = p[i];

		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
			continue;
		}
		switch (c) {
		case '"':
			in_string = true;
			break;
		case '[':
		case '{':
			if (++depth > deepest) {
				deepest = depth;
				if (deepest > max)
					return deepest;
			}
			break;
		case ']':
		case '}':
			if (--depth < 0)
				return -1;
			break;
		}
	}
	return deepest;
}

static bool depth_ok(const uint8_t *p, size_t len)
{
	int d = json_depth(p, len, PROTO_MAX_JSON_DEPTH);

	return d >= 0 && d <= PROTO_MAX_JSON_DEPTH;
}

/* ---- codec ---- */

void proto_pack_header(uint8_t out[PROTO_HDR_SIZE], uint16_t version,
		       uint16_t type, uint16_t flags, uint16_t n_fds,
		       uint32_t id, uint32_t length)
{
	struct proto_hdr h = {
		.magic = PROTO_MAGIC,
		.version = version,
		.type = type,
		.flags = flags,
		.n_fds = n_fds,
		.id = id,
		.length = length,
	};

	proto_hdr_pack(&h, out);
}

/* The header of a single frame: version 1's framing, which every
 * version reads (and the only one a peer yet to say HELLO does). */
static void pack_header(uint8_t out[PROTO_HDR_SIZE], uint16_t type,
			uint16_t flags, uint16_t n_fds, uint32_t id,
			uint32_t length)
{
	proto_pack_header(out, PROTO_VERSION, type, flags, n_fds, id, length);
}

int proto_encode(const struct proto_msg *m, uint8_t *buf, size_t cap,
		 size_t *len)
{
	const struct proto_type_info *t = type_info(m->type);
	size_t room, n;

	if (!t || m->flags) /* a single frame: no flag */
		return -EINVAL;
	if (m->n_fds > PROTO_MAX_FDS || (m->n_fds && !t->fds))
		return -EINVAL;
	if (m->payload && !json_is_object(m->payload))
		return -EINVAL;
	if (cap < PROTO_HDR_SIZE)
		return -ENOBUFS;

	room = cap - PROTO_HDR_SIZE;
	if (room > PROTO_MAX_PAYLOAD)
		room = PROTO_MAX_PAYLOAD;
	if (m->payload) {
		n = json_dumpb(m->payload, (char *)buf + PROTO_HDR_SIZE, room,
			       JSON_COMPACT);
		if (n == 0) /* even {} is 2 bytes */
			return -EINVAL;
	} else {
		n = 2;
		if (n <= room)
			memcpy(buf + PROTO_HDR_SIZE, "{}", n);
	}
	if (n > PROTO_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (n > room)
		return -ENOBUFS;
	/* What we send must decode: the peer checks the same bound. */
	if (!depth_ok(buf + PROTO_HDR_SIZE, n))
		return -EINVAL;

	pack_header(buf, m->type, m->flags, (uint16_t)m->n_fds, m->id,
		    (uint32_t)n);
	*len = PROTO_HDR_SIZE + n;
	return 0;
}

/* Unpack the header if there is one with the right magic, and copy
 * what identifies the message into m, for the ERROR answer. */
static int peek_header(const uint8_t *buf, size_t len, struct proto_hdr *h,
		       struct proto_msg *m)
{
	if (len < PROTO_HDR_SIZE)
		return -EBADMSG;
	proto_hdr_unpack(buf, h);
	if (h->magic != PROTO_MAGIC)
		return -EBADMSG;
	m->type = h->type;
	m->flags = h->flags;
	m->id = h->id;
	return 0;
}

int proto_check_header(const struct proto_hdr *h, size_t n_fds,
		       size_t max_fds)
{
	const struct proto_type_info *t;

	if (h->version < PROTO_VERSION_MIN || h->version > PROTO_VERSION_MAX)
		return -EPROTONOSUPPORT;
	t = type_info(h->type);
	if (!t || (h->flags & ~proto_flags_known(h->version)))
		return -EBADMSG;
	if (h->n_fds != n_fds || n_fds > max_fds || (n_fds && !t->fds))
		return -EBADMSG;
	return 0;
}

int proto_decode_payload(const uint8_t *payload, size_t len, json_t **out)
{
	json_t *doc;

	/* Before jansson sees it: its parser recurses once per level. */
	if (!depth_ok(payload, len))
		return -EBADMSG;
	doc = json_loadb((const char *)payload, len, JSON_REJECT_DUPLICATES,
			 NULL);
	if (!doc)
		return -EBADMSG; /* jansson reports no ENOMEM apart */
	if (!json_is_object(doc)) {
		json_decref(doc);
		return -EBADMSG;
	}
	*out = doc;
	return 0;
}

int proto_decode(const uint8_t *buf, size_t len, size_t n_fds_received,
		 struct proto_msg *m)
{
	struct proto_hdr h;
	json_t *doc;
	int r;

	proto_msg_init(m);
	if (peek_header(buf, len, &h, m) < 0)
		return -EBADMSG;
	if (h.version < PROTO_VERSION_MIN || h.version > PROTO_VERSION_MAX)
		return -EPROTONOSUPPORT;
	if (len > PROTO_MAX_FRAME)
		return -EMSGSIZE;
	if (h.length != len - PROTO_HDR_SIZE)
		return -EBADMSG;
	r = proto_check_header(&h, n_fds_received, PROTO_MAX_FDS);
	if (r < 0)
		return r;
	/* One frame of more: only proto_recv() puts them together, and a
	 * peer that decodes frame by frame takes it for too large. */
	if (h.flags & PROTO_FLAG_MORE)
		return -EMSGSIZE;
	r = proto_decode_payload(buf + PROTO_HDR_SIZE, h.length, &doc);
	if (r < 0)
		return r;
	m->payload = doc;
	m->n_fds = n_fds_received;
	return 0;
}

/* ---- I/O ---- */

/* Room for PROTO_MAX_FDS fds, plus credentials so that a socket with
 * SO_PASSCRED still gets all its fds, to close them. */
#define CMSG_ROOM                                                              \
	(CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS) +                             \
	 CMSG_SPACE(sizeof(struct ucred)))
/* A receive takes every fd the kernel may pass with one message
 * (SCM_MAX_FD): those that do not fit would be released by the kernel
 * in the receiving thread, however slow their release. */
#define SCM_MAX_FD 253
#define CMSG_RECV_ROOM                                                         \
	(CMSG_SPACE(sizeof(int) * SCM_MAX_FD) +                                \
	 CMSG_SPACE(sizeof(struct ucred)))

union cmsg_buf {
	struct cmsghdr align;
	char buf[CMSG_ROOM];
};

union cmsg_recv_buf {
	struct cmsghdr align;
	char buf[CMSG_RECV_ROOM];
};

static void (*closer)(int fd);

void proto_set_closer(void (*close_fn)(int fd))
{
	closer = close_fn;
}

void proto_drop_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (fds[i] >= 0 && closer)
			closer(fds[i]);
		else if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

int proto_sendmsg(int sock, const struct sockaddr *addr, socklen_t addr_len,
		  const struct iovec *iov, size_t n_iov, const int *fds,
		  size_t n_fds)
{
	union cmsg_buf control;
	struct msghdr mh = {
		.msg_name = (void *)addr,
		.msg_namelen = addr ? addr_len : 0,
		.msg_iov = (struct iovec *)iov,
		.msg_iovlen = n_iov,
	};
	size_t len = 0;
	ssize_t n;

	if (n_fds > PROTO_MAX_FDS)
		return -EINVAL;
	for (size_t i = 0; i < n_iov; i++)
		len += iov[i].iov_len;
	if (n_fds) {
		struct cmsghdr *c;

		for (size_t i = 0; i < n_fds; i++)
			if (fds[i] < 0)
				return -EBADF;
		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* A datagram goes whole or not at all. */
	return (size_t)n == len ? 0 : -EIO;
}

int proto_send_textv(int sock, uint16_t type, uint32_t id,
		     const struct iovec *parts, size_t n_parts, const int *fds,
		     size_t n_fds)
{
	uint8_t hdr[PROTO_HDR_SIZE];
	struct iovec iov[1 + PROTO_MAX_TEXT_PARTS];
	size_t len = 0;

	if (n_parts > PROTO_MAX_TEXT_PARTS || n_fds > PROTO_MAX_FDS)
		return -EINVAL;
	for (size_t i = 0; i < n_parts; i++) {
		len += parts[i].iov_len;
		iov[1 + i] = parts[i];
	}
	if (len > PROTO_MAX_PAYLOAD)
		return -EMSGSIZE;
	pack_header(hdr, type, 0, (uint16_t)n_fds, id, (uint32_t)len);
	iov[0] = (struct iovec){ .iov_base = hdr, .iov_len = sizeof(hdr) };
	return proto_sendmsg(sock, NULL, 0, iov, 1 + n_parts, fds, n_fds);
}

int proto_send_text(int sock, uint16_t type, uint32_t id, const void *payload,
		    size_t len, const int *fds, size_t n_fds)
{
	struct iovec part = { .iov_base = (void *)payload, .iov_len = len };

	return proto_send_textv(sock, type, id, &part, 1, fds, n_fds);
}

/* Most messages fit here; a bigger one is encoded again into a frame
 * of PROTO_MAX_FRAME bytes from the heap. */
#define SEND_STACK_BYTES 4096

int proto_send(int sock, const struct proto_msg *m)
{
	_cleanup_free_ uint8_t *big = NULL;
	uint8_t small[SEND_STACK_BYTES], *buf = small;
	struct iovec iov;
	size_t len;
	int r;

	r = proto_encode(m, small, sizeof(small), &len);
	if (r == -ENOBUFS) {
		big = malloc(PROTO_MAX_FRAME);
		if (!big)
			return -ENOMEM;
		buf = big;
		r = proto_encode(m, big, PROTO_MAX_FRAME, &len);
	}
	if (r < 0)
		return r;
	iov = (struct iovec){ .iov_base = buf, .iov_len = len };
	return proto_sendmsg(sock, NULL, 0, &iov, 1, m->fds, m->n_fds);
}

/*
 * Take every fd out of the control data into fds (capacity
 * PROTO_MAX_FDS), closing whatever does not fit or should not be there.
 * Returns 0, or -EBADMSG for control data other than SCM_RIGHTS, or
 * -EMSGSIZE for too many fds; either way every fd is accounted for.
 */
static int take_fds(struct msghdr *mh, int *fds, size_t *n_fds)
{
	struct cmsghdr *c;
	int r = 0;

	*n_fds = 0;
	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		bool rights = c->cmsg_level == SOL_SOCKET &&
			      c->cmsg_type == SCM_RIGHTS;
		bool pidfd = c->cmsg_level == SOL_SOCKET &&
			     c->cmsg_type == SCM_PIDFD;
		const uint8_t *data = CMSG_DATA(c);
		size_t i, n;

		if (!rights && !pidfd) {
			r = -EBADMSG;
			continue;
		}
		if (c->cmsg_len < CMSG_LEN(0))
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, data + i * sizeof(int), sizeof(int));
			if (pidfd) {
				proto_drop_fds(&fd, 1);
				r = -EBADMSG;
			} else if (*n_fds < PROTO_MAX_FDS) {
				fds[(*n_fds)++] = fd;
			} else {
				proto_drop_fds(&fd, 1);
				if (r == 0)
					r = -EMSGSIZE;
			}
		}
	}
	return r;
}

int proto_recv_frame(int sock, uint8_t *buf, size_t cap, size_t *len,
		     int fds[PROTO_MAX_FDS], size_t *n_fds)
{
	union cmsg_recv_buf control;
	struct msghdr mh = { 0 };
	struct iovec iov;
	ssize_t n;
	int r;

	*len = 0;
	*n_fds = 0;
	if (cap < PROTO_RECV_BYTES)
		return -EINVAL;
	/* One byte more than allowed, to tell "just fits" from "too big". */
	iov = (struct iovec){ .iov_base = buf, .iov_len = PROTO_RECV_BYTES };
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = control.buf;
	mh.msg_controllen = sizeof(control.buf);

	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	*len = (size_t)n;

	/* Before anything can fail: every fd must end up owned or closed. */
	r = take_fds(&mh, fds, n_fds);
	if (r == 0 && (mh.msg_flags & MSG_CTRUNC))
		r = -EMSGSIZE;
	if (r == 0 && ((mh.msg_flags & MSG_TRUNC) || n > PROTO_MAX_FRAME))
		r = -EMSGSIZE;
	if (r == 0 && n == 0 && *n_fds == 0)
		return -EPIPE;
	if (r < 0) {
		proto_drop_fds(fds, *n_fds);
		*n_fds = 0;
	}
	return r;
}

int proto_decode_frame(const uint8_t *buf, size_t len, int *fds,
		       size_t n_fds, struct proto_msg *m)
{
	int r = proto_decode(buf, len, n_fds, m);

	if (r < 0) {
		proto_drop_fds(fds, n_fds);
		return r;
	}
	for (size_t i = 0; i < n_fds; i++)
		m->fds[i] = fds[i];
	return 0;
}

const uint8_t *proto_frame_payload(const uint8_t *buf, size_t len,
				   size_t n_fds, uint16_t type,
				   size_t *payload_len)
{
	const struct proto_type_info *t;
	struct proto_msg m;
	struct proto_hdr h;

	if (len > PROTO_MAX_FRAME || peek_header(buf, len, &h, &m) < 0)
		return NULL;
	t = type_info(h.type);
	if (h.type != type || !t || h.n_fds != n_fds ||
	    n_fds > PROTO_MAX_FDS || (n_fds && !t->fds) ||
	    h.flags || h.version < PROTO_VERSION_MIN ||
	    h.version > PROTO_VERSION_MAX || h.length != len - PROTO_HDR_SIZE)
		return NULL;
	*payload_len = h.length;
	return buf + PROTO_HDR_SIZE;
}

void proto_frame_ids(const uint8_t *buf, size_t len, struct proto_msg *m)
{
	struct proto_hdr h;

	proto_msg_init(m);
	peek_header(buf, len, &h, m);
}

/* ---- versions ---- */

static int build(struct proto_msg *m, uint16_t type, uint32_t id,
		 json_t *payload)
{
	proto_msg_init(m);
	if (!payload)
		return -ENOMEM;
	m->type = type;
	m->id = id;
	m->payload = payload;
	return 0;
}

int proto_hello(struct proto_msg *m, uint32_t id)
{
	return build(m, PROTO_HELLO, id,
		     json_pack("{s:[i,i]}", "versions", PROTO_VERSION_MIN,
			       PROTO_VERSION_MAX));
}

/* An integer JSON value in [1, 65535]. */
static int get_version(const json_t *v, uint16_t *out)
{
	json_int_t i;

	if (!json_is_integer(v))
		return -EBADMSG;
	i = json_integer_value(v);
	if (i < 1 || i > UINT16_MAX)
		return -EBADMSG;
	*out = i;
	return 0;
}

int proto_negotiate(const json_t *hello, uint16_t *version)
{
	const json_t *range = json_object_get(hello, "versions");
	uint16_t lo, hi;

	if (!json_is_array(range) || json_array_size(range) != 2)
		return -EBADMSG;
	if (get_version(json_array_get(range, 0), &lo) < 0 ||
	    get_version(json_array_get(range, 1), &hi) < 0 || lo > hi)
		return -EBADMSG;
	if (hi > PROTO_VERSION_MAX)
		hi = PROTO_VERSION_MAX;
	if (hi < lo || hi < PROTO_VERSION_MIN)
		return -EPROTONOSUPPORT;
	*version = hi;
	return 0;
}

int proto_welcome(struct proto_msg *m, uint32_t id, uint16_t version,
		  const char *server_version)
{
	return build(m, PROTO_WELCOME, id,
		     json_pack("{s:i, s:s, s:s}", "version", version, "server",
			       "rdmad", "server_version",
			       server_version ? server_version : ""));
}

int proto_welcome_version(const json_t *welcome, uint16_t *version)
{
	uint16_t v;

	if (get_version(json_object_get(welcome, "version"), &v) < 0)
		return -EBADMSG;
	if (v < PROTO_VERSION_MIN || v > PROTO_VERSION_MAX)
		return -EPROTONOSUPPORT;
	*version = v;
	return 0;
}

/* ---- errors ---- */

static const struct {
	int err;
	const char *code;
	const char *message;
} errors[] = {
	{ EBADMSG, "bad_message", "malformed message" },
	{ EPROTONOSUPPORT, "unsupported_version",
	  "unsupported protocol version" },
	{ EMSGSIZE, "message_too_large",
	  "message larger than 65536 bytes or with more than 32 file "
	  "descriptors" },
	{ EPIPE, "connection_closed", "connection closed by peer" },
	{ ECONNRESET, "connection_reset", "connection reset by peer" },
	{ EAGAIN, "would_block", "no message available" },
	{ EINVAL, "invalid_message", "invalid message" },
	{ ENOBUFS, "no_buffer_space", "buffer too small for message" },
	{ ENOMEM, "internal", "out of memory" },
};

/* The table's sentence for EMSGSIZE spells the limits out. */
_Static_assert(PROTO_MAX_FRAME == 65536 && PROTO_MAX_FDS == 32,
	       "update the EMSGSIZE sentence");

const char *proto_strerror(int err)
{
	size_t i;

	if (err < 0)
		err = -err;
	for (i = 0; i < ARRAY_SIZE(errors); i++)
		if (errors[i].err == err)
			return errors[i].message;
	return strerror(err);
}

const char *proto_error_code(int err)
{
	size_t i;

	if (err < 0)
		err = -err;
	for (i = 0; i < ARRAY_SIZE(errors); i++)
		if (errors[i].err == err)
			return errors[i].code;
	return "internal";
}

int proto_error(struct proto_msg *m, uint32_t id, int err)
{
	return build(m, PROTO_ERROR, id,
		     json_pack("{s:{s:s, s:s}}", "error", "code",
			       proto_error_code(err), "message",
			       proto_strerror(err)));
}
