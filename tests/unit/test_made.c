// SPDX-License-Identifier: MIT
/* MADE's codec (proto/made.c): good and bad payloads, table-driven, and
 * a round trip through the encoder. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "made.h"

static const struct {
	const char *name, *json;
	int want;
	size_t n;
} cases[] = {
	{ "a QP and a CQ",
	  "{\"attachment\":7,\"made\":[{\"kind\":\"qp\",\"handle\":3,"
	  "\"qp_num\":17},{\"kind\":\"cq\",\"handle\":2}]}",
	  0, 2 },
	{ "an SRQ", "{\"attachment\":1,\"made\":[{\"kind\":\"srq\","
		    "\"handle\":4294967295}]}", 0, 1 },
	{ "nothing", "{\"attachment\":0,\"made\":[]}", 0, 0 },
	{ "undo without qp_num", "{\"attachment\":1,\"undo\":true,"
				 "\"made\":[{\"kind\":\"qp\",\"handle\":3}]}",
	  0, 1 },
	{ "qp without qp_num", "{\"attachment\":1,\"made\":[{\"kind\":\"qp\","
			       "\"handle\":3}]}", -EINVAL, 0 },
	{ "qp_num of 25 bits", "{\"attachment\":1,\"made\":[{\"kind\":\"qp\","
			       "\"handle\":3,\"qp_num\":16777216}]}",
	  -EINVAL, 0 },
	{ "qp_num on a CQ", "{\"attachment\":1,\"made\":[{\"kind\":\"cq\","
			    "\"handle\":3,\"qp_num\":1}]}", -EINVAL, 0 },
	{ "handle of 33 bits", "{\"attachment\":1,\"made\":[{\"kind\":\"cq\","
			       "\"handle\":4294967296}]}", -EINVAL, 0 },
	{ "negative handle", "{\"attachment\":1,\"made\":[{\"kind\":\"cq\","
			     "\"handle\":-1}]}", -EINVAL, 0 },
	{ "handle as a string", "{\"attachment\":1,\"made\":[{\"kind\":\"cq\","
				"\"handle\":\"1\"}]}", -EINVAL, 0 },
	{ "unknown kind", "{\"attachment\":1,\"made\":[{\"kind\":\"mr\","
			  "\"handle\":1}]}", -EINVAL, 0 },
	{ "no kind", "{\"attachment\":1,\"made\":[{\"handle\":1}]}", -EINVAL,
	  0 },
	{ "unknown key in an object",
	  "{\"attachment\":1,\"made\":[{\"kind\":\"cq\",\"handle\":1,"
	  "\"pid\":1}]}", -EINVAL, 0 },
	{ "unknown key", "{\"attachment\":1,\"pid\":5,\"made\":[]}", -EINVAL,
	  0 },
	{ "no attachment", "{\"made\":[]}", -EINVAL, 0 },
	{ "made not a list", "{\"attachment\":1,\"made\":{}}", -EINVAL, 0 },
	{ "undo not a boolean", "{\"attachment\":1,\"undo\":1,\"made\":[]}",
	  -EINVAL, 0 },
	{ "an object not an object", "{\"attachment\":1,\"made\":[1]}",
	  -EINVAL, 0 },
};

static void test_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = json_loads(cases[i].json, 0, NULL);
		struct proto_made m;
		int r;

		assert_non_null(j);
		r = proto_made_decode(j, &m);
		if (r != cases[i].want || (r == 0 && m.n_objs != cases[i].n))
			fail_msg("%s: %d (%zu objects)", cases[i].name, r,
				 m.n_objs);
		if (r < 0)
			assert_null(m.objs);
		proto_made_clear(&m);
		json_decref(j);
	}
}

static void test_too_many(void **state)
{
	json_t *a = json_array(), *j;
	struct proto_made m;

	(void)state;
	for (int i = 0; i <= PROTO_MADE_MAX; i++)
		json_array_append_new(a, json_pack("{s:s, s:i}", "kind", "cq",
						   "handle", i));
	j = json_pack("{s:i, s:o}", "attachment", 1, "made", a);
	assert_int_equal(proto_made_decode(j, &m), -E2BIG);
	json_decref(j);
}

static void test_round_trip(void **state)
{
	const struct proto_made_obj objs[] = {
		{ PROTO_MADE_QP, 3, 0xabcdef },
		{ PROTO_MADE_SRQ, 9, 0 },
	};
	json_t *j = proto_made_encode(42, true, objs, 2);
	struct proto_made m;

	(void)state;
	assert_non_null(j);
	assert_int_equal(proto_made_decode(j, &m), 0);
	assert_int_equal(m.attachment, 42);
	assert_true(m.undo);
	assert_int_equal(m.n_objs, 2);
	assert_int_equal(m.objs[0].kind, PROTO_MADE_QP);
	assert_int_equal(m.objs[0].handle, 3);
	assert_int_equal(m.objs[0].qp_num, 0xabcdef);
	assert_int_equal(m.objs[1].kind, PROTO_MADE_SRQ);
	assert_int_equal(m.objs[1].handle, 9);
	proto_made_clear(&m);
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_too_many),
		cmocka_unit_test(test_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
