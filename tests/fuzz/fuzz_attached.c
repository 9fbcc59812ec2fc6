// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the ATTACHED decoder (proto/attached.h). The
 * first input byte is the number of fds that came with the message, the
 * rest the payload, read as proto_decode reads one (depth bounded first).
 * Whatever decodes must hold the decoder's promises: every fd index below
 * the count and used once (a memory's fd is optional: "memory_fds"), every reference resolved to an index in its
 * list, every MR within its memory; and encoding it gives a document that
 * decodes again to the same encoding.
 *
 *   make fuzz FUZZ_TARGETS=fuzz_attached
 * Seeds: tests/fuzz/fuzz_attached/ (the vectors of tests/vectors/attached).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "attached.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void check_promises(const struct proto_attached *a, size_t n_fds)
{
	uint8_t used[256] = { 0 };

#define FD(i)                                                                  \
	do {                                                                   \
		check((i) < n_fds && !used[i]);                                \
		used[i] = 1;                                                   \
	} while (0)
	if (a->has_cmd_fd)
		FD(a->cmd_fd);
	check(a->mode != PROTO_ATTACH_SHARED || a->has_cmd_fd);
	for (size_t i = 0; i < a->n_memory; i++)
		if (a->memory[i].has_fd)
			FD(a->memory[i].fd);
	for (size_t i = 0; i < a->n_xrcd; i++)
		FD(a->xrcd[i].fd);
	if (a->has_mr_table) {
		const struct proto_att_mr_table *t = &a->mr_table;

		FD(t->fd);
		/* Each memory's fd among the message's, none twice. */
		check(!t->has_memory_fd || t->has_memories);
		for (uint64_t i = 0; t->has_memory_fd && i < t->memories; i++)
			FD(t->memory_fd + i);
	}
#undef FD
	for (size_t i = 0; i < a->n_mr; i++) {
		const struct proto_att_mr *mr = &a->mr[i];

		check(mr->pd_index < a->n_pd && mr->memory_index < a->n_memory);
		check(strcmp(a->pd[mr->pd_index].name, mr->pd) == 0);
		check(mr->length > 0 &&
		      mr->offset + mr->length <=
			      a->memory[mr->memory_index].size);
	}
	for (size_t i = 0; i < a->n_dm_mr; i++)
		check(a->dm_mr[i].pd_index < a->n_pd &&
		      a->dm_mr[i].dm_index < a->n_dm);
	for (size_t i = 0; i < a->n_implicit_mr; i++)
		check(a->implicit_mr[i].pd_index < a->n_pd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *frame;
	struct proto_attached a, b;
	struct proto_msg m;
	char *t1, *t2, why[128];
	size_t n_fds, l1, l2;
	json_t *doc;

	if (size < 1 || size - 1 > PROTO_MAX_PAYLOAD)
		return 0;
	n_fds = data[0];
	frame = malloc(PROTO_HDR_SIZE + size - 1);
	if (!frame)
		return 0;
	proto_hdr_pack(&(struct proto_hdr){ .magic = PROTO_MAGIC,
					   .version = 1,
					   .type = PROTO_ATTACHED,
					   .length = (uint32_t)(size - 1) },
		       frame);
	memcpy(frame + PROTO_HDR_SIZE, data + 1, size - 1);
	if (proto_decode(frame, PROTO_HDR_SIZE + size - 1, 0, &m) < 0) {
		free(frame);
		return 0;
	}
	free(frame);
	if (proto_attached_decode(m.payload, n_fds, &a, why, sizeof(why)) ==
	    0) {
		check_promises(&a, n_fds);
		check(proto_attached_encode(&a, 0, &t1, &l1) == 0);
		doc = json_loadb(t1, l1, JSON_REJECT_DUPLICATES, NULL);
		check(doc != NULL);
		check(proto_attached_decode(doc, n_fds, &b, why,
					    sizeof(why)) == 0);
		check(proto_attached_encode(&b, 0, &t2, &l2) == 0);
		check(l1 == l2 && memcmp(t1, t2, l1) == 0);
		free(t1);
		free(t2);
		json_decref(doc);
		proto_attached_free(&b);
	} else {
		check(why[0] != '\0');
	}
	proto_attached_free(&a);
	proto_msg_clear(&m);
	return 0;
}
