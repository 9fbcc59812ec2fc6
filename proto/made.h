/* SPDX-License-Identifier: MIT */
/*
 * MADE (client, shared mode): the objects the client's process made in
 * the profile's context, by handle, so that the daemon destroys them
 * once that process is gone (PROTOCOL.md, "MADE"). The kernel ties no
 * QP, CQ or SRQ of a shared context to its maker's handle: only the
 * client can say which handles are its own.
 *
 *   {"attachment":7,"made":[{"kind":"qp","handle":3,"qp_num":17},
 *                           {"kind":"cq","handle":2}]}
 *   {"attachment":7,"undo":true,"made":[{"kind":"qp","handle":3}]}
 *
 * The codec checks every bound and does no I/O (fuzzed by
 * tests/fuzz/fuzz_proto's MADE seeds through proto_made_decode()).
 */
#ifndef RDMAD_PROTO_MADE_H
#define RDMAD_PROTO_MADE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

enum proto_made_kind {
	PROTO_MADE_QP,
	PROTO_MADE_CQ,
	PROTO_MADE_SRQ,
	PROTO_MADE_KINDS,
};

/* Objects one MADE may list. */
#define PROTO_MADE_MAX 1024

struct proto_made_obj {
	enum proto_made_kind kind;
	uint32_t handle;
	uint32_t qp_num; /* a QP's (required for "qp", 24 bits) */
};

struct proto_made {
	uint32_t attachment;
	bool undo; /* the objects are gone: the process destroyed them */
	struct proto_made_obj *objs;
	size_t n_objs;
};

const char *proto_made_kind_name(enum proto_made_kind k);
/*
 * Decode a MADE payload into *out (objs: the caller's, proto_made_clear).
 * 0, or -EINVAL (a key missing, unknown or of the wrong type, a number
 * out of range, a QP without its qp_num or an undo's with one left out
 * is fine), -E2BIG (more than PROTO_MADE_MAX objects), -ENOMEM.
 */
int proto_made_decode(const json_t *payload, struct proto_made *out);
void proto_made_clear(struct proto_made *m);
/* The payload for n objects (NULL without memory). */
json_t *proto_made_encode(uint32_t attachment, bool undo,
			  const struct proto_made_obj *objs, size_t n);

#endif
