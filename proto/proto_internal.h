/* SPDX-License-Identifier: MIT */
/* What proto.c shares with frames.c (multi-frame messages), not part of
 * the protocol's interface. */
#ifndef RDMAD_PROTO_INTERNAL_H
#define RDMAD_PROTO_INTERNAL_H

#include "proto.h"

/* The flags a frame of this version may carry. */
uint16_t proto_flags_known(uint16_t version);

/* The header of a frame, packed into out. */
void proto_pack_header(uint8_t out[PROTO_HDR_SIZE], uint16_t version,
		       uint16_t type, uint16_t flags, uint16_t n_fds,
		       uint32_t id, uint32_t length);

/*
 * A whole message's header fields checked as proto_decode checks a
 * frame's, but for the length (the caller's business): -EPROTONOSUPPORT
 * or -EBADMSG. n_fds is what arrived, PROTO_FLAG_MORE is allowed.
 */
int proto_check_header(const struct proto_hdr *h, size_t n_fds,
		       size_t max_fds);

/* A whole payload decoded into *doc (an object): -EBADMSG if it is
 * nested too deep, not JSON, not an object, with duplicate keys. */
int proto_decode_payload(const uint8_t *payload, size_t len, json_t **doc);

/* Make room for n fds in m (which keeps those it holds), -1 each past
 * the old count; -ENOMEM. */
int proto_msg_reserve_fds(struct proto_msg *m, size_t n);

#endif
