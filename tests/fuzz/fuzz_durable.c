// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the durable record's reader (daemon/durable.c):
 * the input is a whole memfd as the fd store hands it back. Whatever
 * durable_read() accepts must be what the header says, read the way
 * rdmad(8) documents the layout (checked here by hand, not through the
 * reader); and a version written over any input must read back as
 * written, with a generation above the input's.
 *
 *   make fuzz FUZZ_TARGETS=fuzz_durable
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "durable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

static uint64_t u64_at(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-durable", MFD_CLOEXEC);
	char *out = NULL, *again = NULL;
	size_t len = 0, len2 = 0;
	uint64_t gen = 0, gen2 = 0;
	int r;

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	r = durable_read(fd, 1 << 20, &out, &len, &gen);
	check(r == 0 || r == -ENOENT || r == -EBADMSG || r == -EMSGSIZE);
	check(r != 0 || durable_is(fd));
	check(r != -ENOENT || size < 8 || memcmp(data, "RDMADREC", 8));
	if (r == 0) {
		uint64_t off = u64_at(data + 16), n = u64_at(data + 24);

		check(!memcmp(data, "RDMADREC", 8));
		check(gen == u64_at(data + 8) && n == len && off >= 4096 &&
		      off + n <= size);
		check(!memcmp(out, data + off, n) && out[n] == '\0');
		check(XXH64(data + off, n, 0) == u64_at(data + 32));
	}
	/* Written over whatever was there: read back as written. */
	check(durable_write(fd, "{\"x\":1}", 7) > 0);
	check(durable_read(fd, 1 << 20, &again, &len2, &gen2) == 0);
	check(len2 == 7 && !memcmp(again, "{\"x\":1}", 7));
	check(r != 0 || gen2 == gen + 1);
	free(out);
	free(again);
	close(fd);
	return 0;
}
