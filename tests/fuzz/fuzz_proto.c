// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for proto_decode. The first input byte is the number
 * of fds "received" with the frame (mod PROTO_MAX_FDS + 2, so that the
 * cap is crossed too), the rest is the datagram. Whatever decodes must
 * hold the codec's promises: an object no deeper than the limit, fds
 * accounted, and encode(decode(x)) decoding to the same document. The
 * client's decoder of ATTACHED, which takes the last document again for
 * the same bytes past the attachment id (client/librdmad_reuse.c, kept
 * across inputs here), must agree with proto_decode on every input. A
 * MADE's payload goes through proto_made_decode() too: within its
 * bounds, and the same again once encoded.
 *
 *   clang -g -O1 -std=gnu11 -D_GNU_SOURCE \
 *     -fsanitize=fuzzer,address,undefined -Icommon -Iproto \
 *     proto/proto.c proto/made.c client/librdmad_reuse.c \
 *     tests/fuzz/fuzz_proto.c -ljansson -o build/fuzz_proto
 *   build/fuzz_proto -max_len=70000 -max_total_time=60 CORPUS_DIR
 */
#include <errno.h>
#include <stdlib.h>

#include "made.h"
#include "proto.h"
#include "../../client/librdmad_internal.h" /* client_reuse_decode */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Depth of a decoded document; recursion is safe: it is bounded. */
static int depth(const json_t *j)
{
	const char *key;
	json_t *v;
	size_t i;
	int d = 0;

	if (json_is_object(j)) {
		json_object_foreach ((json_t *)j, key, v) {
			if (depth(v) > d)
				d = depth(v);
		}
	} else if (json_is_array(j)) {
		json_array_foreach (j, i, v) {
			if (depth(v) > d)
				d = depth(v);
		}
	} else {
		return 0;
	}
	return d + 1;
}

static void check(bool ok)
{
	if (!ok)
		abort();
}

/* client_reuse_decode on the same frame: what proto_decode said, the
 * same document. The fds are none (-1): closing them closes nothing. */
static void check_reuse(const uint8_t *frame, size_t len, size_t n_fds,
			int r, const struct proto_msg *m)
{
	static struct client_reuse reuse;
	int fds[PROTO_MAX_FDS + 2];
	struct proto_msg u;

	for (size_t i = 0; i < n_fds; i++)
		fds[i] = -1;
	check(client_reuse_decode(&reuse, frame, len, fds, n_fds, &u) == r);
	if (r == 0) {
		check(u.type == m->type && u.id == m->id &&
		      u.flags == m->flags && u.n_fds == m->n_fds);
		check(json_equal(u.payload, m->payload));
	} else {
		check(!u.payload);
	}
	proto_msg_clear(&u);
}

/* MADE's decoder on a decoded payload: its bounds, and a round trip. */
static void check_made(const json_t *payload)
{
	struct proto_made a, b;
	json_t *j;
	int r = proto_made_decode(payload, &a);

	check(r == 0 || r == -EINVAL || r == -E2BIG || r == -ENOMEM);
	if (r < 0) {
		check(!a.objs);
		return;
	}
	check(a.n_objs <= PROTO_MADE_MAX);
	for (size_t i = 0; i < a.n_objs; i++)
		check(a.objs[i].kind < PROTO_MADE_KINDS &&
		      a.objs[i].qp_num <= 0xffffff);
	j = proto_made_encode(a.attachment, a.undo, a.objs, a.n_objs);
	if (j) {
		check(proto_made_decode(j, &b) == 0);
		check(b.attachment == a.attachment && b.undo == a.undo &&
		      b.n_objs == a.n_objs);
		for (size_t i = 0; i < a.n_objs; i++)
			check(b.objs[i].kind == a.objs[i].kind &&
			      b.objs[i].handle == a.objs[i].handle &&
			      b.objs[i].qp_num == a.objs[i].qp_num);
		proto_made_clear(&b);
		json_decref(j);
	}
	proto_made_clear(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[PROTO_MAX_FRAME];
	struct proto_msg m, again;
	size_t n_fds, len, i, plen = 0;
	const uint8_t *payload;
	uint16_t v;
	int r;

	if (size < 1)
		return 0;
	n_fds = data[0] % (PROTO_MAX_FDS + 2);
	r = proto_decode(data + 1, size - 1, n_fds, &m);
	check(r == 0 || r == -EBADMSG || r == -EPROTONOSUPPORT ||
	      r == -EMSGSIZE || r == -ENOMEM);
	/* The header check the daemon's answer-again path trusts: it takes
	 * no frame of a type that proto_decode would refuse on the header,
	 * and every frame of that type that decodes. */
	payload = proto_frame_payload(data + 1, size - 1, n_fds, m.type,
				      &plen);
	if (r == 0)
		check(payload == data + 1 + PROTO_HDR_SIZE &&
		      plen == size - 1 - PROTO_HDR_SIZE);
	if (r != -ENOMEM)
		check_reuse(data + 1, size - 1, n_fds, r, &m);
	if (payload)
		check(r == 0 || r == -EBADMSG || r == -ENOMEM);
	check(m.n_fds == (r == 0 ? n_fds : 0));
	for (i = 0; i < PROTO_MAX_FDS; i++)
		check(m.fds[i] == -1);
	if (r < 0) {
		check(!m.payload);
		proto_msg_clear(&m);
		return 0;
	}

	check(json_is_object(m.payload));
	check(depth(m.payload) <= PROTO_MAX_JSON_DEPTH);
	check(n_fds == 0 || proto_type_has_fds(m.type));
	(void)proto_type_name(m.type);
	if (proto_negotiate(m.payload, &v) == 0)
		check(v >= PROTO_VERSION_MIN && v <= PROTO_VERSION_MAX);
	if (proto_welcome_version(m.payload, &v) == 0)
		check(v >= PROTO_VERSION_MIN && v <= PROTO_VERSION_MAX);
	if (m.type == PROTO_MADE)
		check_made(m.payload);

	/* Re-encoding may grow (1e5 -> 100000.0), so it may not fit. */
	r = proto_encode(&m, buf, sizeof(buf), &len);
	check(r == 0 || r == -EMSGSIZE);
	if (r == 0) {
		check(proto_decode(buf, len, n_fds, &again) == 0);
		check(again.type == m.type && again.flags == m.flags &&
		      again.id == m.id && again.n_fds == m.n_fds);
		check(json_equal(again.payload, m.payload));
		proto_msg_clear(&again);
	}
	proto_msg_clear(&m);
	return 0;
}
