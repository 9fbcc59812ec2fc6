// SPDX-License-Identifier: MIT
/*
 * The last ATTACHED document read on a connection, kept for the next.
 *
 * The daemon renders a profile's ATTACHED once and sends the same bytes
 * for every attach while the profile's objects stay as they are, but
 * for the attachment id, which comes first: `{"attachment":N,` and the
 * rest (daemon/front/control_attach.c). Parsing that document was the
 * largest part of an attach's work in this library (a fifth of its
 * CPU time in the VM). An ATTACHED whose bytes past the id are those of
 * the last one takes that one's document, with N set in it, instead of
 * being parsed again: the same bytes parse to the same document, and
 * those bytes passed the whole of proto_decode() once already.
 *
 * The document is shared with the message: it is reused only while
 * nothing else holds it, and what reads it must neither change it nor
 * keep it past the message (client_parse_attached() copies what it
 * keeps).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "librdmad_internal.h"

/* `{"attachment":N,` at the start of payload, N as JSON writes an
 * integer (no sign, no leading zero) that fits in 32 bits: N, and where
 * the rest starts. */
static bool split_id(const uint8_t *payload, size_t len, uint32_t *id,
		     size_t *rest)
{
	static const char head[] = "{\"attachment\":";
	size_t i = sizeof(head) - 1, start = i;
	uint64_t v = 0;

	if (len <= i || memcmp(payload, head, i) != 0)
		return false;
	for (; i < len && payload[i] >= '0' && payload[i] <= '9'; i++) {
		v = v * 10 + (payload[i] - '0');
		if (v > UINT32_MAX)
			return false;
	}
	if (i == start || (payload[start] == '0' && i - start > 1) ||
	    i == len || payload[i] != ',')
		return false;
	*id = (uint32_t)v;
	*rest = i + 1;
	return true;
}

static void keep(struct client_reuse *u, const uint8_t *rest, size_t len,
		 json_t *doc)
{
	char *copy = malloc(len ? len : 1);

	client_reuse_clear(u);
	if (!copy)
		return; /* nothing kept: the next one is parsed */
	memcpy(copy, rest, len);
	u->rest = copy;
	u->len = len;
	u->doc = json_incref(doc);
}

int client_reuse_decode_raw(struct client_reuse *u, struct proto_raw *raw,
			    struct proto_msg *m)
{
	const uint8_t *payload;
	size_t plen, rest;
	uint32_t id;
	int r;

	payload = proto_raw_payload(raw, PROTO_ATTACHED, &plen);
	if (!payload || !split_id(payload, plen, &id, &rest))
		return proto_decode_raw(raw, m);
	if (u->doc && u->doc->refcount == 1 && u->len == plen - rest &&
	    memcmp(u->rest, payload + rest, u->len) == 0 &&
	    json_object_set_new(u->doc, "attachment", json_integer(id)) == 0) {
		proto_msg_move(m, &raw->fds);
		m->type = raw->hdr.type;
		m->flags = 0;
		m->id = raw->hdr.id;
		m->payload = json_incref(u->doc);
		return 0;
	}
	r = proto_decode_raw(raw, m);
	if (r == 0)
		keep(u, payload + rest, plen - rest, m->payload);
	return r;
}

int client_reuse_decode(struct client_reuse *u, const uint8_t *buf,
			size_t len, int *fds, size_t n_fds,
			struct proto_msg *m)
{
	struct proto_raw raw = { .frame = buf, .frame_len = len };
	int r;

	proto_msg_init(&raw.fds);
	proto_msg_init(m);
	if (n_fds > PROTO_MAX_FDS) { /* not one frame's */
		for (size_t i = 0; i < n_fds; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		/* Refused as proto_decode refuses it, in its order of
		 * checks (a bad magic or version is said first); never 0:
		 * its header check allows PROTO_MAX_FDS at most. */
		r = proto_decode(buf, len, n_fds, m);
		if (r == 0) {
			proto_msg_clear(m);
			r = -EBADMSG;
		}
		return r;
	}
	if (len >= PROTO_HDR_SIZE)
		proto_hdr_unpack(buf, &raw.hdr);
	memcpy(raw.fds.fds, fds, n_fds * sizeof(*fds));
	raw.fds.n_fds = n_fds;
	r = client_reuse_decode_raw(u, &raw, m);
	proto_raw_clear(&raw);
	return r;
}

void client_reuse_clear(struct client_reuse *u)
{
	free(u->rest);
	json_decref(u->doc);
	*u = (struct client_reuse){ 0 };
}
