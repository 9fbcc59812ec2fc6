// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the MR table's reader (proto/mr_table.c), what
 * librdmad reads of a memfd another process wrote. The input is the
 * table. Whatever the bytes, the reader stays within them (ASan says so
 * when it does not) and what it hands out keeps its promises: a name it
 * returns is NUL-terminated within the input, an entry found by name is
 * one whose name is that name, a memory it hands out has a size and a
 * name within the input.
 *
 *   make fuzz FUZZ_TARGETS=fuzz_mr_table
 */
#include <stdlib.h>
#include <string.h>

#include "mr_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly size bytes: a read past it is ASan's. */
	uint8_t *buf = malloc(size ? size : 1);
	uint32_t count = 0;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (proto_mr_table_check(buf, size, &count) == 0) {
		for (uint32_t i = 0; i < count && i < 64; i++) {
			struct proto_mr_entry e;
			const char *name;
			int64_t at;

			if (proto_mr_table_at(buf, size, i, 4, 4, &e, &name))
				continue;
			check(name >= (const char *)buf &&
			      name + strlen(name) < (const char *)buf + size);
			check(e.pd < 4 && e.memory < 4);
			at = proto_mr_table_find(buf, size, name);
			if (at >= 0) {
				const char *found;

				if (proto_mr_table_at(buf, size, (uint32_t)at,
						      4, 4, &e, &found) == 0)
					check(!strcmp(found, name));
			}
		}
		for (uint32_t i = 0;
		     i < proto_mr_table_memories(buf, size) && i < 64; i++) {
			struct proto_mr_table_memory m;
			const char *name;

			if (proto_mr_table_memory(buf, size, i, &m, &name))
				continue;
			check(m.size > 0);
			check(name >= (const char *)buf &&
			      name + strlen(name) < (const char *)buf + size);
		}
		proto_mr_table_find(buf, size, "r1");
		proto_mr_table_find(buf, size, "");
	}
	free(buf);
	return 0;
}
