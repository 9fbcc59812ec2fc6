// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for restore_doc_read (daemon/engine/restore_doc.c),
 * the reader of the restart state document that rdmad keeps in
 * systemd's fd store and reads back without a tree of json_t.
 *
 * The oracle is jansson, the library the reader stands in for: a
 * document jansson reads as an object with no member twice must be
 * read, and each entry of "objects" must say what jansson says of it
 * (the strings kept, the integers, zero_based and draining, whether it
 * is an object). Whatever the input, nothing may crash or leak, and the
 * reader may refuse only what is not JSON, not an object at the top,
 * or a member twice. jansson lets a NUL byte between tokens pass
 * (RFC 8259 does not): inputs with one are checked for crashes only.
 */
#include <stdint.h>

#include "fuzz_util.h"
#include "restore_doc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_str(const char *got, const json_t *o, const char *key)
{
	const char *want = json_string_value(json_object_get(o, key));

	if (!want || !got)
		return !want == !got;
	return strcmp(got, want) == 0;
}

static bool same_int(json_int_t got, const json_t *o, const char *key)
{
	return got == json_integer_value(json_object_get(o, key));
}

/* What the reader made of entry i agrees with jansson's object e. */
static void check_entry(const struct restore_doc_entry *d, const json_t *e)
{
	if (!json_is_object(e)) {
		check(d->not_object, "an entry that is no object read as one");
		return;
	}
	check(!d->not_object, "an object entry read as no object");
	check(same_str(d->kind, e, "kind"), "kind differs");
	check(same_str(d->name, e, "name"), "name differs");
	check(same_str(d->pd, e, "pd"), "pd differs");
	check(same_str(d->memory, e, "memory"), "memory differs");
	check(d->has_handle == json_is_integer(json_object_get(e, "handle")),
	      "has_handle differs");
	check(same_int(d->handle, e, "handle"), "handle differs");
	check(same_int(d->offset, e, "offset"), "offset differs");
	check(same_int(d->length, e, "length"), "length differs");
	check(same_int(d->iova, e, "iova"), "iova differs");
	check(same_int(d->access, e, "access"), "access differs");
	check(same_int(d->lkey, e, "lkey"), "lkey differs");
	check(same_int(d->rkey, e, "rkey"), "rkey differs");
	check(d->zero_based == json_is_true(json_object_get(e, "zero_based")),
	      "zero_based differs");
	check(d->draining == json_is_true(json_object_get(e, "draining")),
	      "draining differs");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct restore_doc doc = { 0 };
	json_t *j = json_loadb((const char *)data, size,
			       JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
	int r = restore_doc_read((const char *)data, size, &doc);

	if (j && json_is_object(j) && !memchr(data, 0, size)) {
		const json_t *objs = json_object_get(j, "objects");

		check(r == 0, "a document jansson reads is refused");
		check(doc.has_objects == json_is_array(objs),
		      "has_objects differs");
		if (json_is_array(objs)) {
			check(doc.n_entries == json_array_size(objs),
			      "entry count differs");
			for (size_t i = 0; i < doc.n_entries; i++)
				check_entry(&doc.entries[i],
					    json_array_get(objs, i));
		}
		check(json_object_get(doc.rest, "objects") == NULL,
		      "\"objects\" left among the other members");
		check(json_object_size(doc.rest) + !!objs ==
			      json_object_size(j),
		      "other members lost");
	}
	if (r == 0)
		restore_doc_free(&doc);
	json_decref(j);
	return 0;
}
