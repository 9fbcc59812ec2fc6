// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for rdmanl_parse, the decoder of the kernel's RDMA
 * netlink resource dumps (daemon/verbs/rdmanl.c). The first input byte
 * picks the dump kind (one past the last too: refused), the second
 * whether sequence and port are checked; the rest is what one recvmsg
 * returned. Whatever decodes must keep the decoder's promises: entries
 * of the kind asked for, a known result, nothing read past the buffer
 * (ASan).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdmanl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	enum rdmanl_kind kind;
	size_t n;
};

static void check(int ok)
{
	if (!ok)
		abort();
}

static int on_res(void *ud, const struct rdmanl_res *r)
{
	struct seen *s = ud;

	check(r->kind == s->kind);
	/* A context's number is its id. */
	check(r->kind != RDMANL_CTX || (r->has & RDMANL_HAS_CTXN));
	s->n++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* As a receive buffer is: aligned for the headers. */
	static uint64_t buf[65536 / sizeof(uint64_t)];
	struct seen s;
	int r;

	if (size < 2 || size - 2 > sizeof(buf))
		return 0;
	s = (struct seen){ (enum rdmanl_kind)(data[0] % (RDMANL_KINDS + 1)),
			   0 };
	memcpy(buf, data + 2, size - 2);
	r = rdmanl_parse(buf, size - 2, s.kind, data[1] & 1 ? 77 : 0,
			 data[1] & 1 ? 4242 : 0, on_res, &s);
	check(r == 0 || r == 1 || r < 0);
	check(s.kind < RDMANL_KINDS || (r == -EINVAL && !s.n));
	/* Every entry takes a nest header and its number: at least 16
	 * bytes. */
	check(s.n <= (size - 2) / 16);
	return 0;
}
