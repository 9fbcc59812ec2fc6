// SPDX-License-Identifier: MIT
/* The restart state document without a json_t tree (restore_doc.c): it
 * reads what any JSON writer makes of the document (the oracle is JSON
 * itself, through jansson), refuses what is not JSON, and the daemon's
 * writer (restore_state()) makes JSON that reads back the same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "profile.h"
#include "profile_fields.h" /* builds profiles by hand */
#include "profile_index.h"
#include "restore.h"
#include "restore_doc.h"

static int read_text(const char *text, struct restore_doc *doc)
{
	return restore_doc_read(text, strlen(text), doc);
}

/* As Python's json.dumps writes it: spaces, \u escapes, members in
 * another order, members this reader does not keep. */
static void test_reads_any_json_writer(void **state)
{
	static const char text[] =
		"{\"ibdev\": \"mlx5_0\", \"objects\": [\n"
		"  {\"name\": \"a\\u00e9\\\"q\", \"handle\": 3, \"kind\": \"pd\","
		" \"extra\": {\"x\": [1, 2.5, null, \"}\"]}},\n"
		"  {\"kind\": \"mr\", \"name\": \"r\", \"handle\": 5, "
		"\"pd\": \"a\", \"memory\": \"m\", \"offset\": 8192, "
		"\"length\": 4096, \"iova\": 140737488355328, \"access\": 7, "
		"\"lkey\": 4294967295, \"rkey\": 1, \"zero_based\": true},\n"
		"  {\"kind\": \"mr\", \"name\": \"s\", \"handle\": 1.5, "
		"\"offset\": -1, \"zero_based\": false, \"pd\": 3, "
		"\"draining\": true},\n"
		"  7\n"
		"], \"version\": 1, \"tids\": [1, 2], \"holders\": "
		"[{\"pid\": 9, \"leases\": [{\"kind\": \"mr\", \"name\": \"r\"}]}]}";
	struct restore_doc doc;
	const struct restore_doc_entry *e;

	(void)state;
	assert_int_equal(read_text(text, &doc), 0);
	assert_true(doc.has_objects);
	assert_int_equal(doc.n_entries, 4);
	e = &doc.entries[0];
	assert_string_equal(e->kind, "pd");
	assert_string_equal(e->name, "a\xc3\xa9\"q");
	assert_true(e->has_handle);
	assert_int_equal(e->handle, 3);
	assert_null(e->pd);
	e = &doc.entries[1];
	assert_string_equal(e->memory, "m");
	assert_int_equal(e->offset, 8192);
	assert_int_equal(e->length, 4096);
	assert_int_equal(e->iova, 140737488355328LL);
	assert_int_equal(e->access, 7);
	assert_int_equal(e->lkey, 4294967295LL);
	assert_int_equal(e->rkey, 1);
	assert_true(e->zero_based);
	/* A real is no integer (jansson's json_is_integer), a number no
	 * string. */
	e = &doc.entries[2];
	assert_false(e->has_handle);
	assert_int_equal(e->offset, -1);
	assert_false(e->zero_based);
	assert_true(e->draining);
	assert_false(doc.entries[1].draining);
	assert_null(e->pd);
	assert_true(doc.entries[3].not_object);
	/* The rest, as jansson reads it. */
	assert_int_equal(json_integer_value(json_object_get(doc.rest,
							    "version")),
			 1);
	assert_string_equal(json_string_value(json_object_get(doc.rest,
								"ibdev")),
			    "mlx5_0");
	assert_int_equal(json_array_size(json_object_get(doc.rest, "tids")), 2);
	assert_int_equal(json_array_size(json_object_get(doc.rest, "holders")),
			 1);
	assert_null(json_object_get(doc.rest, "objects"));
	restore_doc_free(&doc);
}

static void test_objects_not_an_array(void **state)
{
	struct restore_doc doc;

	(void)state;
	assert_int_equal(read_text("{\"objects\": {}}", &doc), 0);
	assert_false(doc.has_objects);
	restore_doc_free(&doc);
	assert_int_equal(read_text(" { } ", &doc), 0);
	assert_false(doc.has_objects);
	restore_doc_free(&doc);
}

/* What jansson (with JSON_REJECT_DUPLICATES) refuses is refused. */
static void test_refuses_what_is_not_json(void **state)
{
	static const char *const bad[] = {
		"",
		"not json",
		"[]",
		"{\"objects\": []} x",
		"{\"objects\": [], \"objects\": []}",
		"{\"version\": 1, \"version\": 1}",
		"{\"objects\": [{\"handle\": 1, \"handle\": 2}]}",
		"{\"objects\": [{\"name\": \"a\x01\"}]}",
		"{\"objects\": [{\"name\": \"a}]}",
		"{\"objects\": [{\"handle\": 01}]}",
		"{\"objects\": [{\"handle\": 99999999999999999999}]}",
		"{\"objects\": [{\"handle\": 1,}]}",
		"{\"objects\": [{\"x\": tru}]}",
		"{\"objects\": [{\"name\": \"\\q\"}]}",
		"{\"objects\": [1 2]}",
		"{\"version\": [1, }",
	};
	struct restore_doc doc;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (read_text(bad[i], &doc) == 0) {
			restore_doc_free(&doc);
			fail_msg("read: %s", bad[i]);
		}
	}
}

/* The daemon's writer: JSON that jansson reads, and that reads back
 * the same here. */
static void test_state_written_reads_back(void **state)
{
	struct conf_pd cpd = { .name = "p\"1\n" };
	struct conf_mr cmr = { .name = "m\\0", .pd = "p\"1\n", .memory = "mem",
			       .access = 5, .zero_based = true,
			       .offset = 4096 };
	struct conf_pd cgone = { .name = "gone" };
	struct ibv_pd pd = { .handle = 7 };
	struct ibv_mr mr = { .handle = 9, .lkey = 0xfffffffe, .rkey = 12,
			     .length = 8192 };
	struct object objs[3] = {
		{ .kind = OBJ_PD, .state = OBJ_READY, .conf = &cpd },
		{ .kind = OBJ_MR, .state = OBJ_READY, .conf = &cmr },
		{ .kind = OBJ_PD, .state = OBJ_FAILED, .conf = &cgone },
	};
	struct conf_profile cp = { .name = "p" };
	struct profile p = { .conf = &cp, .objects = objs, .n_objects = 3,
			     .ctx = (struct ibv_context *)&pd, .ctxn = 4 };
	json_t *holders = json_pack("[{s:i}]", "pid", 1), *j, *o, *want;
	struct restore_doc doc;
	char *text;
	size_t len = 0;

	(void)state;
	objs[0].u.pd = &pd;
	objs[1].u.mr.mr = &mr;
	objs[1].u.mr.iova = 1ULL << 46;
	snprintf(p.ibdev, sizeof(p.ibdev), "rxe0");
	text = restore_state(&p, holders, &len);
	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	j = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "version")), 1);
	assert_string_equal(json_string_value(json_object_get(j, "ibdev")),
			    "rxe0");
	assert_int_equal(json_integer_value(json_object_get(j, "ctxn")), 4);
	assert_true(json_array_size(json_object_get(j, "tids")) >= 1);
	assert_true(json_equal(json_object_get(j, "holders"), holders));
	assert_int_equal(json_array_size(json_object_get(j, "objects")), 2);
	o = json_array_get(json_object_get(j, "objects"), 0);
	want = json_pack("{s:s, s:s, s:i}", "kind", "pd", "name", "p\"1\n",
			 "handle", 7);
	assert_true(json_equal(o, want));
	json_decref(want);
	o = json_array_get(json_object_get(j, "objects"), 1);
	assert_string_equal(json_string_value(json_object_get(o, "name")),
			    "m\\0");
	assert_string_equal(json_string_value(json_object_get(o, "pd")),
			    "p\"1\n");
	assert_int_equal(json_integer_value(json_object_get(o, "lkey")),
			 0xfffffffeLL);
	assert_int_equal(json_integer_value(json_object_get(o, "iova")),
			 1LL << 46);
	assert_int_equal(json_integer_value(json_object_get(o, "length")), 8192);
	assert_int_equal(json_integer_value(json_object_get(o, "offset")), 4096);
	assert_int_equal(json_integer_value(json_object_get(o, "access")), 5);
	assert_true(json_is_true(json_object_get(o, "zero_based")));
	json_decref(j);

	assert_int_equal(restore_doc_read(text, len, &doc), 0);
	assert_int_equal(doc.n_entries, 2);
	assert_string_equal(doc.entries[1].pd, "p\"1\n");
	assert_int_equal(doc.entries[1].handle, 9);
	assert_int_equal(doc.entries[1].rkey, 12);
	restore_doc_free(&doc);
	free(text);
	json_decref(holders);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reads_any_json_writer),
		cmocka_unit_test(test_objects_not_an_array),
		cmocka_unit_test(test_refuses_what_is_not_json),
		cmocka_unit_test(test_state_written_reads_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
