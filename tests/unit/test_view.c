// SPDX-License-Identifier: MIT
/* What a document shows to whom (daemon/api/view.c), against the rule of
 * rdmad(8), "What each read-only route shows to whom": other users'
 * pid, uid, gid, admin and report, and PSNs, to admins only; a socket
 * user's own sessions whole; an anonymous caller sees no process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "view.h"

static const char sessions_text[] =
	"[{\"session\":1,\"pid\":4001,\"uid\":1000,\"gid\":1000,"
	"\"admin\":false,\"attachments\":[{\"attachment\":1,\"profile\":\"p\","
	"\"mode\":\"local\",\"leases\":3,\"report\":{\"mrs\":[]}}]},"
	"{\"session\":2,\"pid\":4002,\"uid\":1001,\"gid\":1000,"
	"\"admin\":false,\"attachments\":[{\"attachment\":1,\"profile\":\"p\","
	"\"mode\":\"local\",\"leases\":3,\"report\":{\"mrs\":[]}}]},"
	"{\"session\":0,\"pid\":4003,\"uid\":0,\"gid\":0,\"admin\":false,"
	"\"adopted\":true,\"attachments\":[{\"attachment\":0,"
	"\"profile\":\"p\",\"mode\":\"shared\",\"leases\":1}]}]";

static const char *const hidden[] = { "pid", "uid", "gid", "admin" };

static json_t *load(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);

	assert_non_null(j);
	return j;
}

/* Session i of doc: shown whole, or with no process in it. */
static void assert_whole(json_t *doc, size_t i, bool whole)
{
	json_t *s = json_array_get(doc, i);
	json_t *att = json_array_get(json_object_get(s, "attachments"), 0);

	assert_non_null(s);
	for (size_t k = 0; k < sizeof(hidden) / sizeof(hidden[0]); k++)
		assert_int_equal(json_object_get(s, hidden[k]) != NULL, whole);
	if (i < 2)
		assert_int_equal(json_object_get(att, "report") != NULL, whole);
	/* What anyone sees stays. */
	assert_non_null(json_object_get(s, "session"));
	assert_non_null(json_object_get(att, "profile"));
	assert_non_null(json_object_get(att, "leases"));
}

static void test_sessions_anonymous(void **state)
{
	const struct api_viewer v = { 0 };
	json_t *doc = api_view(load(sessions_text), &v);

	(void)state;
	for (size_t i = 0; i < 3; i++)
		assert_whole(doc, i, false);
	assert_true(json_is_true(
		json_object_get(json_array_get(doc, 2), "adopted")));
	json_decref(doc);
}

static void test_sessions_user(void **state)
{
	const struct api_viewer v = { .has_uid = true, .uid = 1000 };
	json_t *doc = api_view(load(sessions_text), &v);

	(void)state;
	assert_whole(doc, 0, true);
	assert_whole(doc, 1, false);
	assert_whole(doc, 2, false);
	json_decref(doc);
}

static void test_sessions_admin(void **state)
{
	const struct api_viewer v = { .admin = true };
	json_t *in = load(sessions_text), *doc;

	(void)state;
	doc = api_view(json_incref(in), &v);
	/* Nothing hidden: the document itself, not a copy. */
	assert_ptr_equal(doc, in);
	for (size_t i = 0; i < 3; i++)
		assert_whole(doc, i, true);
	json_decref(doc);
	json_decref(in);
}

/* A shared document (the bus's event) is copied, never changed. */
static void test_event_copied(void **state)
{
	const struct api_viewer v = { .has_uid = true, .uid = 1001 };
	json_t *ev = load("{\"seq\":3,\"event\":\"object_lost\","
			  "\"profile\":\"p\",\"sessions\":[{\"session\":1,"
			  "\"pid\":4001,\"uid\":1000},{\"session\":2,"
			  "\"pid\":4002,\"uid\":1001}]}");
	json_t *seen = api_view_event(ev, &v);
	json_t *list = json_object_get(seen, "sessions");

	(void)state;
	assert_ptr_not_equal(seen, ev);
	assert_null(json_object_get(json_array_get(list, 0), "pid"));
	assert_null(json_object_get(json_array_get(list, 0), "uid"));
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(list, 1), "pid")),
			 4002);
	/* The bus's own is as it was. */
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(ev, "sessions"),
						0),
				 "pid")),
			 4001);
	json_decref(seen);
	json_decref(ev);
}

static void test_endpoint_psn(void **state)
{
	static const char text[] =
		"{\"qp_num\":17,\"port\":1,\"lid\":0,\"psn\":99,\"mtu\":1024}";
	const struct api_viewer user = { .has_uid = true, .uid = 1000 };
	const struct api_viewer admin = { .admin = true };
	json_t *doc = api_view(load(text), &user);

	(void)state;
	assert_null(json_object_get(doc, "psn"));
	assert_non_null(json_object_get(doc, "qp_num"));
	json_decref(doc);
	doc = api_view(load(text), &admin);
	assert_int_equal(json_integer_value(json_object_get(doc, "psn")), 99);
	json_decref(doc);
}

/* A dead client's pid in the orphans list: no uid, so nobody's own. */
static void test_orphan_pid(void **state)
{
	const struct api_viewer v = { .has_uid = true, .uid = 1000 };
	json_t *doc = api_view(load("{\"objects\":[{\"kind\":\"mr\","
				    "\"pid\":77,\"rkey\":5}]}"),
			       &v);
	json_t *o = json_array_get(json_object_get(doc, "objects"), 0);

	(void)state;
	assert_null(json_object_get(o, "pid"));
	assert_non_null(json_object_get(o, "rkey"));
	json_decref(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sessions_anonymous),
		cmocka_unit_test(test_sessions_user),
		cmocka_unit_test(test_sessions_admin),
		cmocka_unit_test(test_event_copied),
		cmocka_unit_test(test_endpoint_psn),
		cmocka_unit_test(test_orphan_pid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
