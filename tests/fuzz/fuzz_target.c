// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the private data of targets (proto/target_proto.h),
 * which librdmad decodes from a remote, untrusted target: the accept's
 * descriptor and a reject's reason. Whatever decodes must re-encode to
 * the same bytes (reserved fields zero), and nothing is read past size.
 *
 *   make fuzz FUZZ_TARGETS=fuzz_target
 */
#include <stdlib.h>
#include <string.h>

#include "target_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct target_range r[TARGET_MAX_RANGES];
	uint8_t again[TARGET_DESC_MAX];
	struct target_range r2[TARGET_MAX_RANGES];
	uint8_t *copy = malloc(size ? size : 1);
	int n;

	/* A copy of exactly size bytes: ASan sees any read beyond. */
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	n = target_desc_decode(copy, size, r);
	if (n >= 0) {
		size_t len;

		if (n < 1 || n > TARGET_MAX_RANGES)
			abort();
		len = target_desc_encode(again, r, (size_t)n);
		if (len != TARGET_HEADER_SIZE + (size_t)n * TARGET_RANGE_SIZE ||
		    target_desc_decode(again, len, r2) != n)
			abort();
		for (int i = 0; i < n; i++)
			if (r[i].addr != r2[i].addr || r[i].rkey != r2[i].rkey ||
			    r[i].length != r2[i].length)
				abort();
	}
	if (target_reject_reason(copy, size) < 0)
		abort();
	free(copy);
	return 0;
}
