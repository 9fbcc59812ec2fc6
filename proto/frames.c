// SPDX-License-Identifier: MIT
/*
 * Multi-frame messages (protocol version 2, proto.h): cutting a message
 * into frames, sending them, and receiving them back into one message.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "proto_internal.h"
#include "util.h"

static size_t div_up(size_t a, size_t b)
{
	return (a + b - 1) / b;
}

size_t proto_frames_count(size_t payload_len, size_t n_fds)
{
	size_t by_bytes = div_up(payload_len, PROTO_MAX_PAYLOAD);
	size_t by_fds = div_up(n_fds, PROTO_MAX_FDS);
	size_t n = by_bytes > by_fds ? by_bytes : by_fds;

	return n ? n : 1;
}

/* Copy bytes [from, from + n) of the concatenation of parts to out. */
static void copy_parts(const struct iovec *parts, size_t n_parts,
		       size_t from, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n_parts && n; i++) {
		size_t len = parts[i].iov_len, k;

		if (from >= len) {
			from -= len;
			continue;
		}
		k = len - from < n ? len - from : n;
		memcpy(out, (const uint8_t *)parts[i].iov_base + from, k);
		out += k;
		n -= k;
		from = 0;
	}
}

int proto_frame_packv(uint16_t version, uint16_t type, uint32_t id,
		      const struct iovec *parts, size_t n_parts,
		      size_t n_fds, size_t index,
		      uint8_t buf[PROTO_MAX_FRAME], size_t *frame_len,
		      size_t *fd_first, size_t *fd_count)
{
	size_t len = 0, n_frames, from, n, f0, nf;

	if (n_parts > PROTO_MAX_TEXT_PARTS ||
	    !proto_type_allowed(type, PROTO_PEER_CLIENT | PROTO_PEER_DAEMON))
		return -EINVAL;
	if (n_fds && !proto_type_has_fds(type))
		return -EINVAL;
	for (size_t i = 0; i < n_parts; i++)
		len += parts[i].iov_len;
	if (len > PROTO_MAX_MESSAGE || n_fds > PROTO_MAX_MESSAGE_FDS)
		return -EMSGSIZE;
	n_frames = proto_frames_count(len, n_fds);
	if (index >= n_frames ||
	    (n_frames > 1 && version < PROTO_VERSION_FRAMES) ||
	    version < PROTO_VERSION_MIN || version > PROTO_VERSION_MAX)
		return -EINVAL;

	from = index * PROTO_MAX_PAYLOAD;
	n = from >= len ? 0 : len - from;
	if (n > PROTO_MAX_PAYLOAD)
		n = PROTO_MAX_PAYLOAD;
	f0 = index * PROTO_MAX_FDS;
	nf = f0 >= n_fds ? 0 : n_fds - f0;
	if (nf > PROTO_MAX_FDS)
		nf = PROTO_MAX_FDS;

	/* A message of one frame is framed as version 1 frames it, so
	 * that any peer reads it as before. */
	proto_pack_header(buf, n_frames > 1 ? version : PROTO_VERSION, type,
			  index + 1 < n_frames ? PROTO_FLAG_MORE : 0,
			  (uint16_t)nf, id, (uint32_t)n);
	copy_parts(parts, n_parts, from, n, buf + PROTO_HDR_SIZE);
	*frame_len = PROTO_HDR_SIZE + n;
	*fd_first = f0 < n_fds ? f0 : n_fds;
	*fd_count = nf;
	return 0;
}

int proto_frame_pack(uint16_t version, uint16_t type, uint32_t id,
		     const void *payload, size_t payload_len, size_t n_fds,
		     size_t index, uint8_t buf[PROTO_MAX_FRAME],
		     size_t *frame_len, size_t *fd_first, size_t *fd_count)
{
	struct iovec part = { .iov_base = (void *)payload,
			      .iov_len = payload_len };

	return proto_frame_packv(version, type, id, &part, 1, n_fds, index,
				 buf, frame_len, fd_first, fd_count);
}

int proto_send_message(int sock, uint16_t version, uint16_t type,
		       uint32_t id, const struct iovec *parts,
		       size_t n_parts, const int *fds, size_t n_fds)
{
	_cleanup_free_ uint8_t *buf = malloc(PROTO_MAX_FRAME);
	size_t len = 0, n_frames;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n_parts && i <= PROTO_MAX_TEXT_PARTS; i++)
		len += parts[i].iov_len;
	n_frames = proto_frames_count(len, n_fds);
	for (size_t i = 0; i < n_frames; i++) {
		size_t frame_len, f0, nf;
		struct iovec iov;
		int r;

		r = proto_frame_packv(version, type, id, parts, n_parts, n_fds,
				      i, buf, &frame_len, &f0, &nf);
		if (r < 0)
			return r;
		iov = (struct iovec){ .iov_base = buf, .iov_len = frame_len };
		r = proto_sendmsg(sock, NULL, 0, &iov, 1, fds + f0, nf);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- receiving ---- */

void proto_raw_clear(struct proto_raw *raw)
{
	proto_msg_clear(&raw->fds);
	free(raw->heap);
	*raw = (struct proto_raw){ .frame = NULL };
	proto_msg_init(&raw->fds);
}

static void raw_init(struct proto_raw *raw)
{
	*raw = (struct proto_raw){ .frame = NULL };
	proto_msg_init(&raw->fds);
}

/* The fds of a frame, added to the message's (closed on failure). */
static int add_fds(struct proto_raw *raw, int *fds, size_t n)
{
	struct proto_msg *m = &raw->fds;
	int r;

	if (m->n_fds + n > PROTO_MAX_MESSAGE_FDS) {
		proto_drop_fds(fds, n);
		return -EMSGSIZE;
	}
	r = proto_msg_reserve_fds(m, m->n_fds + n);
	if (r < 0) {
		proto_drop_fds(fds, n);
		return r;
	}
	memcpy(m->fds + m->n_fds, fds, n * sizeof(*fds));
	m->n_fds += n;
	return 0;
}

/* This frame's header, checked as a part of the message first tells. */
static int continues(const struct proto_raw *raw, const uint8_t *buf,
		     size_t len, size_t n_fds, struct proto_hdr *h)
{
	if (len < PROTO_HDR_SIZE)
		return -EBADMSG;
	proto_hdr_unpack(buf, h);
	if (h->magic != PROTO_MAGIC || h->version != raw->hdr.version ||
	    h->type != raw->hdr.type || h->id != raw->hdr.id ||
	    h->length != len - PROTO_HDR_SIZE)
		return -EBADMSG;
	return proto_check_header(h, n_fds, PROTO_MAX_FDS);
}

/* Append a frame's payload to the message's, growing it by doubling. */
static int append(struct proto_raw *raw, size_t *cap, const uint8_t *p,
		  size_t n)
{
	if (raw->len + n > PROTO_MAX_MESSAGE)
		return -EMSGSIZE;
	if (n == 0) /* a frame of fds only; the heap may not be there yet */
		return 0;
	if (raw->len + n > *cap) {
		size_t want = *cap ? *cap : PROTO_MAX_PAYLOAD * 4;
		uint8_t *heap;

		while (want < raw->len + n)
			want *= 2;
		if (want > PROTO_MAX_MESSAGE)
			want = PROTO_MAX_MESSAGE;
		heap = realloc(raw->heap, want);
		if (!heap)
			return -ENOMEM;
		raw->heap = heap;
		*cap = want;
	}
	memcpy(raw->heap + raw->len, p, n);
	raw->len += n;
	return 0;
}

/* The frames after the first one (in buf, len bytes, its fds already
 * in raw), up to the one without MORE. */
static int gather(int sock, uint8_t *buf, size_t cap, size_t len,
		  struct proto_raw *raw)
{
	size_t heap_cap = 0;
	struct proto_hdr h = raw->hdr;
	int fds[PROTO_MAX_FDS];
	size_t n_fds;
	int r;

	r = append(raw, &heap_cap, buf + PROTO_HDR_SIZE, len - PROTO_HDR_SIZE);
	while (r == 0 && (h.flags & PROTO_FLAG_MORE)) {
		r = proto_recv_frame(sock, buf, cap, &len, fds, &n_fds);
		if (r == -EAGAIN || r == -EPIPE)
			r = -EBADMSG; /* a message cut short */
		if (r < 0)
			break;
		r = add_fds(raw, fds, n_fds);
		if (r == 0)
			r = continues(raw, buf, len, n_fds, &h);
		if (r == 0)
			r = append(raw, &heap_cap, buf + PROTO_HDR_SIZE,
				   h.length);
	}
	raw->payload = raw->heap ? raw->heap : (const uint8_t *)"";
	raw->hdr.length = (uint32_t)raw->len;
	raw->hdr.n_fds = 0; /* the count is raw->fds.n_fds */
	raw->hdr.flags &= ~PROTO_FLAG_MORE;
	return r;
}

int proto_recv_raw(int sock, uint8_t *buf, size_t cap, struct proto_raw *raw)
{
	int fds[PROTO_MAX_FDS];
	size_t len, n_fds;
	int r;

	raw_init(raw);
	r = proto_recv_frame(sock, buf, cap, &len, fds, &n_fds);
	if ((r == 0 || r == -EMSGSIZE || r == -EBADMSG) &&
	    len >= PROTO_HDR_SIZE)
		proto_hdr_unpack(buf, &raw->hdr);
	if (r < 0)
		return r;
	r = add_fds(raw, fds, n_fds);
	if (r < 0)
		return r;
	if (raw->hdr.magic != PROTO_MAGIC || len > PROTO_MAX_FRAME ||
	    raw->hdr.version < PROTO_VERSION_FRAMES ||
	    !(raw->hdr.flags & PROTO_FLAG_MORE) ||
	    raw->hdr.length != len - PROTO_HDR_SIZE ||
	    proto_check_header(&raw->hdr, n_fds, PROTO_MAX_FDS) < 0) {
		/* One frame (or a bad one): proto_decode_raw judges it. */
		raw->frame = buf;
		raw->frame_len = len;
		raw->payload = len > PROTO_HDR_SIZE ? buf + PROTO_HDR_SIZE
						    : buf;
		raw->len = len > PROTO_HDR_SIZE ? len - PROTO_HDR_SIZE : 0;
		return 0;
	}
	r = gather(sock, buf, cap, len, raw);
	if (r < 0) {
		struct proto_hdr h = raw->hdr;

		proto_raw_clear(raw);
		raw->hdr = h;
	}
	return r;
}

const uint8_t *proto_raw_payload(const struct proto_raw *raw, uint16_t type,
				 size_t *len)
{
	if (raw->frame)
		return proto_frame_payload(raw->frame, raw->frame_len,
					   raw->fds.n_fds, type, len);
	if (raw->hdr.type != type)
		return NULL;
	*len = raw->len;
	return raw->payload;
}

int proto_decode_raw(struct proto_raw *raw, struct proto_msg *m)
{
	json_t *doc;
	int r;

	if (raw->frame) {
		size_t n = raw->fds.n_fds;

		/* At most PROTO_MAX_FDS: they came in one frame. */
		raw->fds.n_fds = 0;
		return proto_decode_frame(raw->frame, raw->frame_len,
					  raw->fds.fds, n, m);
	}
	proto_msg_init(m);
	m->type = raw->hdr.type;
	m->id = raw->hdr.id;
	r = proto_decode_payload(raw->payload, raw->len, &doc);
	if (r < 0) {
		proto_msg_clear(&raw->fds);
		return r;
	}
	proto_msg_move(m, &raw->fds);
	m->type = raw->hdr.type;
	m->flags = 0;
	m->id = raw->hdr.id;
	m->payload = doc;
	return 0;
}

int proto_recv_buf(int sock, struct proto_msg *m, uint8_t *buf, size_t cap)
{
	struct proto_raw raw;
	int r;

	proto_msg_init(m);
	r = proto_recv_raw(sock, buf, cap, &raw);
	if (r == -EMSGSIZE || r == -EBADMSG) {
		m->type = raw.hdr.type;
		m->flags = raw.hdr.flags;
		m->id = raw.hdr.id;
	}
	if (r == 0)
		r = proto_decode_raw(&raw, m);
	proto_raw_clear(&raw);
	return r;
}

int proto_recv(int sock, struct proto_msg *m)
{
	_cleanup_free_ uint8_t *buf = malloc(PROTO_RECV_BYTES);

	if (!buf) {
		proto_msg_init(m);
		return -ENOMEM;
	}
	return proto_recv_buf(sock, m, buf, PROTO_RECV_BYTES);
}
