// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for restore_leases_read (daemon/engine/restore_leases.c),
 * the reader of the lease record and of the lease sets it names, which the
 * previous run left in systemd's fd store.
 *
 * An input is records separated by the byte 0x1e (ASCII RS, never in a
 * JSON text outside a string): the lease record first, then lease sets,
 * each named by its first 16 bytes (the rest its text). The properties,
 * from restore.h: nothing crashes or leaks; what is read is an array of
 * holders; of a version 2 record, in version 1's shape (no holder names
 * a set any more), each holder holding its own leases and then those of
 * each set it names; makers come only with holders. (Version 1 is read
 * as it is: a "sets" there means nothing.)
 */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "fuzz_util.h"
#include "restore_leases.h"

#define MAX_SETS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd_of(const uint8_t *p, size_t n)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);

	check(fd >= 0, "memfd_create");
	check(write(fd, p, n) == (ssize_t)n, "write");
	return fd;
}

/* How many leases the set named id has, as jansson reads its text; -1
 * when it does not read as one (restore_leases.h: then the record is
 * not read). */
static long set_size(const struct restore_set *sets, size_t n, const char *id,
		     char *const *texts, const size_t *lens)
{
	for (size_t i = 0; i < n; i++) {
		json_t *doc, *l;
		long r = -1;

		if (strcmp(sets[i].id, id))
			continue;
		doc =
		    json_loadb(texts[i], lens[i], JSON_REJECT_DUPLICATES, NULL);
		l = json_object_get(doc, "leases");
		if (json_integer_value(json_object_get(doc, "version")) == 2 &&
		    json_is_string(json_object_get(doc, "id")) &&
		    !strcmp(json_string_value(json_object_get(doc, "id")),
			    id) &&
		    json_is_array(l))
			r = (long)json_array_size(l);
		json_decref(doc);
		if (r >= 0)
			return r;
	}
	return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct restore_set sets[MAX_SETS];
	char *texts[MAX_SETS];
	size_t lens[MAX_SETS], n = 0, i;
	const uint8_t *end = data + size, *rs = memchr(data, 0x1e, size);
	size_t head = (size_t)((rs ? rs : end) - data);
	json_t *got, *makers, *doc, *h;
	int lease_fd = memfd_of(data, head);
	bool v2;

	while (rs && n < MAX_SETS) {
		const uint8_t *q = rs + 1,
			      *next = memchr(q, 0x1e, (size_t)(end - q));
		size_t len = (size_t)((next ? next : end) - q);

		rs = next;
		if (len < 16 || memchr(q, 0, 16))
			continue;
		sets[n].id = strndup((const char *)q, 16);
		check(sets[n].id != NULL, "strndup");
		sets[n].fd = memfd_of(q + 16, len - 16);
		texts[n] = (char *)q + 16;
		lens[n++] = len - 16;
	}
	got = restore_leases_read("p", lease_fd, sets, n, &makers);
	check(got || !makers, "makers without holders");
	check(!got || json_is_array(got), "holders that are not an array");
	doc =
	    json_loadb((const char *)data, head, JSON_REJECT_DUPLICATES, NULL);
	v2 = json_integer_value(json_object_get(doc, "version")) == 2;
	json_array_foreach(v2 ? got : NULL, i, h)
	{
		const json_t *was =
		    json_array_get(json_object_get(doc, "holders"), i);
		const json_t *own = json_object_get(was, "leases");
		const json_t *named = json_object_get(was, "sets");
		long want = own ? (long)json_array_size(own) : 0;
		size_t k;
		const json_t *id;

		check(!json_object_get(h, "sets"), "a set left unexpanded");
		if (!named)
			continue;
		json_array_foreach(named, k, id)
		{
			long s = set_size(sets, n, json_string_value(id), texts,
					  lens);

			check(s >= 0, "a missing set read as there");
			want += s;
		}
		check(json_is_array(json_object_get(h, "leases")) &&
			  (long)json_array_size(json_object_get(h, "leases")) ==
			      want,
		      "a holder's leases are not its own and its sets'");
	}
	json_decref(doc);
	json_decref(got);
	json_decref(makers);
	close(lease_fd);
	for (i = 0; i < n; i++) {
		free(sets[i].id);
		close(sets[i].fd);
	}
	return 0;
}
