// SPDX-License-Identifier: MIT
/*
 * The typed ATTACHED codec (proto/attached.h): the shared vectors of
 * tests/vectors/attached/ (a payload and its fd count; what a correct
 * decoder yields, written by hand from PROTOCOL.md: the canonical
 * document, or "error"), the same vectors the Python client is checked
 * against; encode/decode round trips of a big profile; the variant
 * without "attachment". (That attaching grows linearly with the
 * objects is measured by make bench, attach_10k_mr_vs_1_mr: no timed
 * test here.)
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "access.h"
#include "attached.h"

#define VECTORS "tests/vectors/attached"

static void check_vector(const char *name)
{
	char path[512], why[256], text[16];
	struct proto_attached a;
	json_t *v, *want, *got;
	json_error_t e;
	FILE *f;
	int r;

	snprintf(path, sizeof(path), VECTORS "/%s.json", name);
	v = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
	if (!v)
		fail_msg("%s: %s", path, e.text);
	snprintf(path, sizeof(path), VECTORS "/%s.expect", name);
	f = fopen(path, "r");
	assert_non_null(f);
	want = NULL;
	if (!fgets(text, sizeof(text), f) || strncmp(text, "error", 5) != 0) {
		rewind(f);
		want = json_loadf(f, 0, &e);
		if (!want)
			fail_msg("%s: %s", path, e.text);
	}
	fclose(f);

	r = proto_attached_decode(json_object_get(v, "payload"),
				  json_integer_value(json_object_get(v, "n_fds")),
				  &a, why, sizeof(why));
	if (!want) {
		if (r != -EBADMSG)
			fail_msg("%s: decoded (%d), want an error", name, r);
		assert_true(why[0] != '\0'); /* a sentence says which field */
	} else {
		if (r != 0)
			fail_msg("%s: %s", name, why);
		assert_int_equal(proto_attached_to_json(&a, 0, &got), 0);
		if (!json_equal(got, want)) {
			char *s = json_dumps(got, JSON_COMPACT);

			fail_msg("%s: decoded to %s", name, s);
		}
		json_decref(got);
	}
	proto_attached_free(&a);
	json_decref(want);
	json_decref(v);
}

static void test_vectors(void **state)
{
	DIR *d = opendir(VECTORS);
	struct dirent *de;
	int n = 0;

	(void)state;
	assert_non_null(d);
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char name[256];

		if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0 ||
		    len - 5 >= sizeof(name))
			continue;
		memcpy(name, de->d_name, len - 5);
		name[len - 5] = '\0';
		check_vector(name);
		n++;
	}
	closedir(d);
	assert_true(n >= 12);
}

/* A profile of n_mem memories and n_mr MRs of 4 KiB over them, by hand. */
static void build(struct proto_attached *a, size_t n_mem, size_t n_mr)
{
	char s[32];

	memset(a, 0, sizeof(*a));
	a->has_attachment = true;
	a->attachment = 42;
	a->profile = strdup("big");
	a->mode = PROTO_ATTACH_SHARED;
	a->ibdev = strdup("rxe0");
	a->port = 1;
	a->has_cmd_fd = true;
	a->cmd_fd = 0;
	a->pd = calloc(1, sizeof(*a->pd));
	a->n_pd = 1;
	a->pd[0].name = strdup("main");
	a->memory = calloc(n_mem, sizeof(*a->memory));
	a->n_memory = n_mem;
	for (size_t i = 0; i < n_mem; i++) {
		snprintf(s, sizeof(s), "m%zu", i);
		a->memory[i].name = strdup(s);
		a->memory[i].size = 4096 * (n_mr / n_mem + 1);
		a->memory[i].fd = 1 + i;
		a->memory[i].has_fd = true;
	}
	a->mr = calloc(n_mr, sizeof(*a->mr));
	a->n_mr = n_mr;
	for (size_t i = 0; i < n_mr; i++) {
		struct proto_att_mr *mr = &a->mr[i];

		snprintf(s, sizeof(s), "r%zu", i);
		mr->name = strdup(s);
		mr->pd = strdup("main");
		snprintf(s, sizeof(s), "m%zu", i % n_mem);
		mr->memory = strdup(s);
		mr->handle = i + 1;
		mr->lkey = mr->rkey = 0x1000 + i;
		mr->length = 4096;
		mr->offset = 4096 * (i / n_mem);
		mr->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	}
}

/* Encode, then decode: the same objects, indexes resolved. */
static void round_trip(size_t n_mem, size_t n_mr)
{
	struct proto_attached a, b;
	char *text, why[256];
	json_t *doc;
	size_t len;
	build(&a, n_mem, n_mr);
	assert_int_equal(proto_attached_encode(&a, 0, &text, &len), 0);
	assert_int_equal(strncmp(text, "{\"attachment\":42,", 17), 0);
	doc = json_loadb(text, len, 0, NULL);
	assert_non_null(doc);
	assert_int_equal(proto_attached_decode(doc, 1 + n_mem, &b, why,
					       sizeof(why)),
			 0);
	assert_int_equal(b.n_mr, n_mr);
	assert_int_equal(b.n_memory, n_mem);
	for (size_t i = 0; i < n_mr; i++) {
		assert_string_equal(b.mr[i].name, a.mr[i].name);
		assert_int_equal(b.mr[i].memory_index, i % n_mem);
		assert_int_equal(b.mr[i].pd_index, 0);
		assert_int_equal(b.mr[i].rkey, a.mr[i].rkey);
		assert_int_equal(b.mr[i].access, a.mr[i].access);
	}
	/* An fd count one short: the last memory's fd is not there. */
	proto_attached_free(&b);
	assert_int_equal(proto_attached_decode(doc, n_mem, &b, why,
					       sizeof(why)),
			 -EBADMSG);
	proto_attached_free(&b);
	json_decref(doc);
	free(text);
	proto_attached_free(&a);
}

static void test_round_trip(void **state)
{
	(void)state;
	round_trip(1, 1);
	round_trip(100, 10000);
}

static void test_no_id(void **state)
{
	struct proto_attached a;
	char *text;
	size_t len;

	(void)state;
	build(&a, 1, 1);
	assert_int_equal(proto_attached_encode(&a, PROTO_ATTACHED_NO_ID, &text,
					       &len),
			 0);
	assert_int_equal(strncmp(text, "{\"profile\":\"big\",", 17), 0);
	assert_null(strstr(text, "\"attachment\""));
	free(text);
	a.mode = 0;
	assert_int_equal(proto_attached_encode(&a, 0, &text, &len), -EINVAL);
	proto_attached_free(&a);
	proto_attached_free(NULL);
}

static void test_access_names(void **state)
{
	unsigned int all = proto_access_known(), got;
	json_t *j;

	(void)state;
	assert_int_equal(proto_access_flag("remote_atomic"),
			 IBV_ACCESS_REMOTE_ATOMIC);
	assert_int_equal(proto_access_flag("telepathy"), 0);
	assert_int_equal(proto_access_flag(NULL), 0);
	assert_string_equal(proto_access_name(IBV_ACCESS_MW_BIND), "mw_bind");
	assert_null(proto_access_name(IBV_ACCESS_ON_DEMAND));
	j = proto_access_json(all | IBV_ACCESS_ON_DEMAND);
	assert_int_equal(json_array_size(j), 6);
	assert_int_equal(proto_access_parse(j, &got), 0);
	assert_int_equal(got, all);
	json_array_append_new(j, json_integer(1));
	assert_int_equal(proto_access_parse(j, &got), -EINVAL);
	json_decref(j);
	assert_int_equal(proto_access_parse(NULL, &got), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_no_id),
		cmocka_unit_test(test_access_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
