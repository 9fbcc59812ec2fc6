/* SPDX-License-Identifier: MIT */
/*
 * What a target (rdmad.conf(5), "target") and a remote peer say to each
 * other in the rdma_cm private data. Every number is big-endian.
 *
 * Connect (peer to target, RDMA_PS_TCP, at most 56 bytes): the target's
 * token, when it has one, as its bytes; the rest of the private data is
 * zero (InfiniBand pads it). A target without a token ignores it.
 *
 * Accept (target to peer, at most 196 bytes): the descriptor
 *   u8 'R', u8 'D', u8 version (1), u8 count (1..8)
 *   count times, in the order the target declares its ranges:
 *     u64 addr     the address to use with rkey
 *     u32 rkey     a type-2 memory window bound for this connection only
 *     u32 reserved 0
 *     u64 length   bytes from addr
 *
 * Reject (target to peer, at most 148 bytes):
 *   u8 'R', u8 'D', u8 version (1), u8 reason (enum target_reject),
 *   then a human-readable text (no NUL needed, zero padded).
 *
 * Header-only: the daemon and librdmad share it.
 */
#ifndef RDMAD_TARGET_PROTO_H
#define RDMAD_TARGET_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TARGET_MAGIC0 'R'
#define TARGET_MAGIC1 'D'
#define TARGET_VERSION 1
#define TARGET_MAX_RANGES 8
#define TARGET_TOKEN_MAX 56
#define TARGET_HEADER_SIZE 4
#define TARGET_RANGE_SIZE 24
#define TARGET_DESC_MAX (TARGET_HEADER_SIZE + \
			 TARGET_MAX_RANGES * TARGET_RANGE_SIZE) /* 196 */
#define TARGET_REJECT_MAX 148

enum target_reject {
	TARGET_REJECT_ADDRESS = 1, /* the peer's address is not allowed */
	TARGET_REJECT_TOKEN = 2,   /* a wrong or missing token */
	TARGET_REJECT_FULL = 3,	   /* max_connections reached */
	TARGET_REJECT_RESOURCES = 4, /* the target could not set it up */
	TARGET_REJECT_STOPPING = 5,  /* the target is going away */
};

struct target_range {
	uint64_t addr;
	uint32_t rkey;
	uint64_t length;
};

static inline void target_put_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static inline uint64_t target_get_be(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* The descriptor of n ranges into buf (TARGET_DESC_MAX bytes): its
 * length, or 0 when n is not 1..8. */
static inline size_t target_desc_encode(uint8_t *buf,
					const struct target_range *r, size_t n)
{
	uint8_t *p = buf + TARGET_HEADER_SIZE;

	if (n < 1 || n > TARGET_MAX_RANGES)
		return 0;
	buf[0] = TARGET_MAGIC0;
	buf[1] = TARGET_MAGIC1;
	buf[2] = TARGET_VERSION;
	buf[3] = (uint8_t)n;
	for (size_t i = 0; i < n; i++, p += TARGET_RANGE_SIZE) {
		target_put_be(p, r[i].addr, 8);
		target_put_be(p + 8, r[i].rkey, 4);
		target_put_be(p + 12, 0, 4);
		target_put_be(p + 16, r[i].length, 8);
	}
	return (size_t)(p - buf);
}

/* The ranges of the descriptor in buf (len bytes, padding allowed) into
 * r (room for TARGET_MAX_RANGES): their count, or -1 when it is not
 * one. */
static inline int target_desc_decode(const uint8_t *buf, size_t len,
				     struct target_range *r)
{
	size_t n;

	if (len < TARGET_HEADER_SIZE || buf[0] != TARGET_MAGIC0 ||
	    buf[1] != TARGET_MAGIC1 || buf[2] != TARGET_VERSION)
		return -1;
	n = buf[3];
	if (n < 1 || n > TARGET_MAX_RANGES ||
	    len < TARGET_HEADER_SIZE + n * TARGET_RANGE_SIZE)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = buf + TARGET_HEADER_SIZE +
				   i * TARGET_RANGE_SIZE;

		r[i].addr = target_get_be(p, 8);
		r[i].rkey = (uint32_t)target_get_be(p + 8, 4);
		r[i].length = target_get_be(p + 16, 8);
	}
	return (int)n;
}

/* A reject's private data into buf (TARGET_REJECT_MAX bytes): its
 * length. */
static inline size_t target_reject_encode(uint8_t *buf,
					  enum target_reject why,
					  const char *text)
{
	size_t n = strlen(text);

	if (n > TARGET_REJECT_MAX - TARGET_HEADER_SIZE)
		n = TARGET_REJECT_MAX - TARGET_HEADER_SIZE;
	buf[0] = TARGET_MAGIC0;
	buf[1] = TARGET_MAGIC1;
	buf[2] = TARGET_VERSION;
	buf[3] = (uint8_t)why;
	memcpy(buf + TARGET_HEADER_SIZE, text, n);
	return TARGET_HEADER_SIZE + n;
}

/* A reject's reason, or 0 when buf is not one of ours. */
static inline int target_reject_reason(const uint8_t *buf, size_t len)
{
	if (len < TARGET_HEADER_SIZE || buf[0] != TARGET_MAGIC0 ||
	    buf[1] != TARGET_MAGIC1 || buf[2] != TARGET_VERSION)
		return 0;
	return buf[3];
}

#endif
