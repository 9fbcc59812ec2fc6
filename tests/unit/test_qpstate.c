// SPDX-License-Identifier: MIT
/* The QP path and its JSON form, without a device: defaults, round trips,
 * partial updates, and every way an input can be wrong (unknown key, wrong
 * type, each range), each with its message. qp_modify() and selftest_run()
 * themselves run for real in tests/integration/test_qpstate_selftest.py;
 * here only their argument checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "qpstate.h"
#include "selftest.h"
#include "util.h"

/* Every key qp_path_json() writes, in struct order. */
static const char *const all_keys[] = {
	"port_num",	 "pkey_index",	   "qkey",	 "access",
	"dqpn",		 "rq_psn",	   "mtu",	 "max_dest_rd_atomic",
	"min_rnr_timer", "dlid",	   "sl",	 "src_path_bits",
	"static_rate",	 "has_grh",	   "dgid",	 "sgid_index",
	"hop_limit",	 "traffic_class",  "flow_label", "sq_psn",
	"timeout",	 "retry_cnt",	   "rnr_retry",	 "max_rd_atomic",
};

static void assert_path_equal(const struct qp_path *a,
			      const struct qp_path *b)
{
	assert_int_equal(a->port_num, b->port_num);
	assert_int_equal(a->pkey_index, b->pkey_index);
	assert_int_equal(a->qkey, b->qkey);
	assert_int_equal(a->access, b->access);
	assert_int_equal(a->dqpn, b->dqpn);
	assert_int_equal(a->rq_psn, b->rq_psn);
	assert_int_equal(a->mtu, b->mtu);
	assert_int_equal(a->max_dest_rd_atomic, b->max_dest_rd_atomic);
	assert_int_equal(a->min_rnr_timer, b->min_rnr_timer);
	assert_int_equal(a->dlid, b->dlid);
	assert_int_equal(a->sl, b->sl);
	assert_int_equal(a->src_path_bits, b->src_path_bits);
	assert_int_equal(a->static_rate, b->static_rate);
	assert_int_equal(a->has_grh, b->has_grh);
	assert_memory_equal(a->dgid.raw, b->dgid.raw, sizeof(a->dgid.raw));
	assert_int_equal(a->sgid_index, b->sgid_index);
	assert_int_equal(a->hop_limit, b->hop_limit);
	assert_int_equal(a->traffic_class, b->traffic_class);
	assert_int_equal(a->flow_label, b->flow_label);
	assert_int_equal(a->sq_psn, b->sq_psn);
	assert_int_equal(a->timeout, b->timeout);
	assert_int_equal(a->retry_cnt, b->retry_cnt);
	assert_int_equal(a->rnr_retry, b->rnr_retry);
	assert_int_equal(a->max_rd_atomic, b->max_rd_atomic);
}

static json_t *parse(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, JSON_DECODE_ANY, &e);

	if (!j)
		fail_msg("bad test JSON %s: %s", text, e.text);
	return j;
}

/* ---- defaults ---- */

static void test_defaults(void **state)
{
	struct qp_path p;
	union ibv_gid zero;

	(void)state;
	memset(&p, 0xa5, sizeof(p));
	memset(&zero, 0, sizeof(zero));
	qp_path_init(&p);
	assert_int_equal(p.port_num, 1);
	assert_int_equal(p.pkey_index, 0);
	assert_int_equal(p.qkey, 0x11111111);
	assert_int_equal(p.access, 0);
	assert_int_equal(p.dqpn, 0);
	assert_int_equal(p.rq_psn, 0);
	assert_int_equal(p.mtu, IBV_MTU_1024);
	assert_int_equal(p.max_dest_rd_atomic, 1);
	assert_int_equal(p.min_rnr_timer, 12);
	assert_int_equal(p.dlid, 0);
	assert_int_equal(p.sl, 0);
	assert_int_equal(p.src_path_bits, 0);
	assert_int_equal(p.static_rate, 0);
	assert_false(p.has_grh);
	assert_memory_equal(p.dgid.raw, zero.raw, sizeof(zero.raw));
	assert_int_equal(p.sgid_index, 0);
	assert_int_equal(p.hop_limit, 64);
	assert_int_equal(p.traffic_class, 0);
	assert_int_equal(p.flow_label, 0);
	assert_int_equal(p.sq_psn, 0);
	assert_int_equal(p.timeout, 14);
	assert_int_equal(p.retry_cnt, 7);
	assert_int_equal(p.rnr_retry, 7);
	assert_int_equal(p.max_rd_atomic, 1);
}

static void test_default_json(void **state)
{
	struct qp_path p;
	json_t *j, *want;

	(void)state;
	qp_path_init(&p);
	j = qp_path_json(&p);
	assert_non_null(j);
	assert_int_equal(json_object_size(j), ARRAY_SIZE(all_keys));
	for (size_t i = 0; i < ARRAY_SIZE(all_keys); i++)
		assert_non_null(json_object_get(j, all_keys[i]));
	want = parse("{\"port_num\": 1, \"pkey_index\": 0,"
		     " \"qkey\": 286331153, \"access\": [], \"dqpn\": 0,"
		     " \"rq_psn\": 0, \"mtu\": 1024, \"max_dest_rd_atomic\": 1,"
		     " \"min_rnr_timer\": 12, \"dlid\": 0, \"sl\": 0,"
		     " \"src_path_bits\": 0, \"static_rate\": 0,"
		     " \"has_grh\": false,"
		     " \"dgid\": \"0000:0000:0000:0000:0000:0000:0000:0000\","
		     " \"sgid_index\": 0,"
		     " \"hop_limit\": 64, \"traffic_class\": 0,"
		     " \"flow_label\": 0, \"sq_psn\": 0, \"timeout\": 14,"
		     " \"retry_cnt\": 7, \"rnr_retry\": 7,"
		     " \"max_rd_atomic\": 1}");
	assert_true(json_equal(j, want));
	json_decref(want);
	json_decref(j);
}

/* ---- round trips: struct -> JSON -> struct ---- */

static void set_gid(struct qp_path *p, const char *s)
{
	assert_int_equal(inet_pton(AF_INET6, s, p->dgid.raw), 1);
	p->has_grh = true;
}

static void rt_default(struct qp_path *p)
{
	(void)p;
}

static void rt_roce(struct qp_path *p)
{
	set_gid(p, "::ffff:192.0.2.1");
	p->sgid_index = 1;
	p->dqpn = 17;
	p->access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
}

static void rt_link_local(struct qp_path *p)
{
	set_gid(p, "fe80::5054:ff:fe12:3456");
	p->mtu = IBV_MTU_4096;
}

static void rt_max(struct qp_path *p)
{
	set_gid(p, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
	*p = (struct qp_path){
		.port_num = 255, .pkey_index = 0xffff, .qkey = 0xffffffff,
		.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
		.dqpn = 0xffffff, .rq_psn = 0xffffff, .mtu = IBV_MTU_256,
		.max_dest_rd_atomic = 255, .min_rnr_timer = 31,
		.dlid = 0xffff, .sl = 15, .src_path_bits = 127,
		.static_rate = 63, .has_grh = true, .dgid = p->dgid,
		.sgid_index = 255, .hop_limit = 255, .traffic_class = 255,
		.flow_label = 0xfffff, .sq_psn = 0xffffff, .timeout = 31,
		.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 255,
	};
}

static void rt_ib_no_grh(struct qp_path *p)
{
	p->dlid = 0x1234;
	p->sl = 3;
	p->src_path_bits = 1;
	p->static_rate = IBV_RATE_100_GBPS;
	p->mtu = IBV_MTU_2048;
	p->timeout = 0;
	p->retry_cnt = 0;
	p->rnr_retry = 0;
	p->min_rnr_timer = 0;
}

static void rt_mtu_512(struct qp_path *p)
{
	p->mtu = IBV_MTU_512;
	p->access = IBV_ACCESS_REMOTE_ATOMIC;
	p->rq_psn = 0x123456;
	p->sq_psn = 0xabcdef;
}

struct rt_case {
	const char *name;
	void (*setup)(struct qp_path *p);
};

static const struct rt_case rt_cases[] = {
	{ "round trip: defaults", rt_default },
	{ "round trip: RoCE v2 path", rt_roce },
	{ "round trip: link-local GID, mtu 4096", rt_link_local },
	{ "round trip: every field at its maximum", rt_max },
	{ "round trip: IB path without GRH, zeros", rt_ib_no_grh },
	{ "round trip: mtu 512, psns, remote_atomic", rt_mtu_512 },
};

static void test_round_trip(void **state)
{
	const struct rt_case *c = *state;
	struct qp_path p, q;
	char err[256];
	json_t *j, *j2;
	char *text;

	qp_path_init(&p);
	c->setup(&p);
	j = qp_path_json(&p);
	assert_non_null(j);
	assert_int_equal(json_object_size(j), ARRAY_SIZE(all_keys));

	/* Through text too: what a config file or the REST API carries. */
	text = json_dumps(j, 0);
	assert_non_null(text);
	json_decref(j);
	j = parse(text);
	free(text);

	/* Into a path far from p: every field must come from the JSON. */
	memset(&q, 0x5a, sizeof(q));
	q.has_grh = !p.has_grh;
	assert_int_equal(qp_path_from_json(j, &q, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_path_equal(&p, &q);
	j2 = qp_path_json(&q);
	assert_true(json_equal(j, j2));
	json_decref(j2);
	json_decref(j);
}

/* ---- partial documents: start from *p, change only what is named ---- */

struct good_case {
	const char *name;
	const char *json;
	const char *changed; /* the keys whose output differs from defaults */
};

static const struct good_case good_cases[] = {
	{ "empty object keeps everything", "{}", "{}" },
	{ "dgid implies has_grh", "{\"dgid\": \"::ffff:192.0.2.1\"}",
	  "{\"dgid\": \"0000:0000:0000:0000:0000:ffff:c000:0201\", "
	  "\"has_grh\": true}" },
	{ "dgid :: still implies has_grh", "{\"dgid\": \"::\"}",
	  "{\"has_grh\": true}" },
	{ "has_grh before dgid", "{\"has_grh\": true, \"dgid\": \"fe80::1\"}",
	  "{\"dgid\": \"fe80:0000:0000:0000:0000:0000:0000:0001\", "
	  "\"has_grh\": true}" },
	{ "explicit has_grh false with zero dgid",
	  "{\"dgid\": \"::\", \"has_grh\": false}", "{}" },
	{ "has_grh without dgid", "{\"has_grh\": true}",
	  "{\"has_grh\": true}" },
	{ "uncompressed dgid is normalised",
	  "{\"dgid\": \"FE80:0000:0000:0000:0000:0000:0000:0001\"}",
	  "{\"dgid\": \"fe80:0000:0000:0000:0000:0000:0000:0001\", "
	  "\"has_grh\": true}" },
	{ "mtu 256", "{\"mtu\": 256}", "{\"mtu\": 256}" },
	{ "mtu 512", "{\"mtu\": 512}", "{\"mtu\": 512}" },
	{ "mtu 1024", "{\"mtu\": 1024}", "{}" },
	{ "mtu 2048", "{\"mtu\": 2048}", "{\"mtu\": 2048}" },
	{ "mtu 4096", "{\"mtu\": 4096}", "{\"mtu\": 4096}" },
	{ "access, any order, duplicates",
	  "{\"access\": [\"remote_read\", \"local_write\", \"remote_read\"]}",
	  "{\"access\": [\"local_write\", \"remote_read\"]}" },
	{ "access all four",
	  "{\"access\": [\"remote_atomic\", \"remote_write\", \"remote_read\","
	  " \"local_write\"]}",
	  "{\"access\": [\"local_write\", \"remote_write\", \"remote_read\","
	  " \"remote_atomic\"]}" },
	{ "access empty list", "{\"access\": []}", "{}" },
	{ "lower bounds",
	  "{\"port_num\": 1, \"timeout\": 0, \"retry_cnt\": 0,"
	  " \"rnr_retry\": 0, \"min_rnr_timer\": 0, \"hop_limit\": 0,"
	  " \"qkey\": 0, \"max_rd_atomic\": 0, \"max_dest_rd_atomic\": 0}",
	  "{\"timeout\": 0, \"retry_cnt\": 0, \"rnr_retry\": 0,"
	  " \"min_rnr_timer\": 0, \"hop_limit\": 0, \"qkey\": 0,"
	  " \"max_rd_atomic\": 0, \"max_dest_rd_atomic\": 0}" },
	{ "upper bounds",
	  "{\"port_num\": 255, \"pkey_index\": 65535, \"qkey\": 4294967295,"
	  " \"dqpn\": 16777215, \"rq_psn\": 16777215, \"sq_psn\": 16777215,"
	  " \"flow_label\": 1048575, \"timeout\": 31, \"min_rnr_timer\": 31,"
	  " \"sl\": 15, \"src_path_bits\": 127, \"static_rate\": 63,"
	  " \"dlid\": 65535, \"sgid_index\": 255, \"traffic_class\": 255}",
	  "{\"port_num\": 255, \"pkey_index\": 65535, \"qkey\": 4294967295,"
	  " \"dqpn\": 16777215, \"rq_psn\": 16777215, \"sq_psn\": 16777215,"
	  " \"flow_label\": 1048575, \"timeout\": 31, \"min_rnr_timer\": 31,"
	  " \"sl\": 15, \"src_path_bits\": 127, \"static_rate\": 63,"
	  " \"dlid\": 65535, \"sgid_index\": 255, \"traffic_class\": 255}" },
	{ "a connection's path",
	  "{\"dgid\": \"::ffff:192.0.2.1\", \"sgid_index\": 1, \"dqpn\": 18,"
	  " \"mtu\": 1024, \"access\": [\"remote_write\"]}",
	  "{\"dgid\": \"0000:0000:0000:0000:0000:ffff:c000:0201\","
	  " \"has_grh\": true, \"sgid_index\": 1, \"dqpn\": 18, \"access\": [\"remote_write\"]}" },
};

static void test_good(void **state)
{
	const struct good_case *c = *state;
	struct qp_path p, d;
	char err[256] = "untouched";
	json_t *in, *want, *got;

	qp_path_init(&p);
	in = parse(c->json);
	assert_int_equal(qp_path_from_json(in, &p, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	qp_path_init(&d);
	want = qp_path_json(&d);
	got = parse(c->changed);
	assert_int_equal(json_object_update(want, got), 0);
	json_decref(got);
	got = qp_path_json(&p);
	if (!json_equal(got, want)) {
		char *g = json_dumps(got, JSON_SORT_KEYS);
		char *w = json_dumps(want, JSON_SORT_KEYS);

		print_error("got  %s\nwant %s\n", g, w);
		free(g);
		free(w);
		fail();
	}
	json_decref(got);
	json_decref(want);
	json_decref(in);
}

/* Values already in *p survive what the JSON does not name. */
static void test_starts_from_p(void **state)
{
	struct qp_path p, want;
	char err[128];
	json_t *j = parse("{\"timeout\": 20}");

	(void)state;
	qp_path_init(&p);
	rt_roce(&p);
	p.sq_psn = 99;
	want = p;
	want.timeout = 20;
	assert_int_equal(qp_path_from_json(j, &p, err, sizeof(err)), 0);
	assert_path_equal(&p, &want);
	json_decref(j);
}

/* ---- bad documents: -EINVAL, the message, and *p untouched ---- */

struct bad_case {
	char name[96];
	char json[128];
	char msg[160];
};

static const struct bad_case fixed_bad_cases[] = {
	{ "unknown key", "{\"timout\": 3}", "unknown key 'timout'" },
	{ "unknown key after good ones", "{\"timeout\": 3, \"qpn\": 3}",
	  "unknown key 'qpn'" },
	{ "state is not a path key", "{\"state\": \"rts\"}",
	  "unknown key 'state'" },
	{ "timeout range (the example)", "{\"timeout\": 40}",
	  "'timeout' = 40 is out of range [0, 31]" },
	{ "mtu not a size", "{\"mtu\": 1000}",
	  "'mtu' = 1000 is not one of 256, 512, 1024, 2048, 4096" },
	{ "mtu as an enum number", "{\"mtu\": 3}",
	  "'mtu' = 3 is not one of 256, 512, 1024, 2048, 4096" },
	{ "mtu 0", "{\"mtu\": 0}",
	  "'mtu' = 0 is not one of 256, 512, 1024, 2048, 4096" },
	{ "mtu 8192", "{\"mtu\": 8192}",
	  "'mtu' = 8192 is not one of 256, 512, 1024, 2048, 4096" },
	{ "mtu as a string", "{\"mtu\": \"1024\"}",
	  "'mtu' must be an integer (bytes), not a string" },
	{ "has_grh as an integer", "{\"has_grh\": 1}",
	  "'has_grh' must be true or false, not an integer" },
	{ "has_grh as a string", "{\"has_grh\": \"true\"}",
	  "'has_grh' must be true or false, not a string" },
	{ "has_grh null", "{\"has_grh\": null}",
	  "'has_grh' must be true or false, not null" },
	{ "dgid not a string", "{\"dgid\": 1}",
	  "'dgid' must be a string, not an integer" },
	{ "dgid as a byte array", "{\"dgid\": [0, 0]}",
	  "'dgid' must be a string, not an array" },
	{ "dgid IPv4 literal", "{\"dgid\": \"192.0.2.1\"}",
	  "'dgid' = \"192.0.2.1\" is not a GID in IPv6 notation" },
	{ "dgid garbage", "{\"dgid\": \"fe80::1::2\"}",
	  "'dgid' = \"fe80::1::2\" is not a GID in IPv6 notation" },
	{ "dgid empty", "{\"dgid\": \"\"}",
	  "'dgid' = \"\" is not a GID in IPv6 notation" },
	{ "dgid with has_grh false",
	  "{\"has_grh\": false, \"dgid\": \"fe80::1\"}",
	  "'has_grh' is false but 'dgid' is set" },
	{ "access not an array", "{\"access\": \"remote_write\"}",
	  "'access' must be an array of names, not a string" },
	{ "access as a number", "{\"access\": 2}",
	  "'access' must be an array of names, not an integer" },
	{ "access element not a string", "{\"access\": [\"remote_write\", 4]}",
	  "'access'[1] must be a string, not an integer" },
	{ "access unknown name",
	  "{\"access\": [\"remote_write\", \"mw_bind\"]}",
	  "'access'[1] = \"mw_bind\" is not one of local_write, remote_write, "
	  "remote_read, remote_atomic" },
	{ "access upper case", "{\"access\": [\"REMOTE_WRITE\"]}",
	  "'access'[0] = \"REMOTE_WRITE\" is not one of" },
	{ "top level array", "[]", "a path must be an object, not an array" },
	{ "top level string", "\"x\"",
	  "a path must be an object, not a string" },
	{ "top level null", "null", "a path must be an object, not null" },
};

struct range {
	const char *key;
	long long min, max;
};

/* Every integer key and its range. */
static const struct range ranges[] = {
	{ "port_num", 1, 255 },
	{ "pkey_index", 0, 0xffff },
	{ "qkey", 0, 0xffffffffLL },
	{ "dqpn", 0, 0xffffff },
	{ "rq_psn", 0, 0xffffff },
	{ "max_dest_rd_atomic", 0, 255 },
	{ "min_rnr_timer", 0, 31 },
	{ "dlid", 0, 0xffff },
	{ "sl", 0, 15 },
	{ "src_path_bits", 0, 127 },
	{ "static_rate", 0, 63 },
	{ "sgid_index", 0, 255 },
	{ "hop_limit", 0, 255 },
	{ "traffic_class", 0, 255 },
	{ "flow_label", 0, 0xfffff },
	{ "sq_psn", 0, 0xffffff },
	{ "timeout", 0, 31 },
	{ "retry_cnt", 0, 7 },
	{ "rnr_retry", 0, 7 },
	{ "max_rd_atomic", 0, 255 },
};

static const struct {
	const char *json, *name;
} wrong_types[] = {
	{ "\"1\"", "a string" },  { "1.0", "a real number" },
	{ "true", "a boolean" },  { "null", "null" },
	{ "[1]", "an array" },	  { "{}", "an object" },
};

/* Generated: per integer key, just below and just above its range and far
 * outside it, and each wrong type. */
#define N_GENERATED (ARRAY_SIZE(ranges) * (3 + ARRAY_SIZE(wrong_types)))
static struct bad_case generated[N_GENERATED];

static size_t generate_bad_cases(void)
{
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(ranges); i++) {
		const struct range *r = &ranges[i];
		const long long outside[] = { r->min - 1, r->max + 1,
					      r->max + (1LL << 32) };

		for (size_t k = 0; k < ARRAY_SIZE(outside); k++) {
			struct bad_case *c = &generated[n++];

			snprintf(c->name, sizeof(c->name), "%s = %lld",
				 r->key, outside[k]);
			snprintf(c->json, sizeof(c->json), "{\"%s\": %lld}",
				 r->key, outside[k]);
			snprintf(c->msg, sizeof(c->msg),
				 "'%s' = %lld is out of range [%lld, %lld]",
				 r->key, outside[k], r->min, r->max);
		}
		for (size_t k = 0; k < ARRAY_SIZE(wrong_types); k++) {
			struct bad_case *c = &generated[n++];

			snprintf(c->name, sizeof(c->name), "%s as %s", r->key,
				 wrong_types[k].name);
			snprintf(c->json, sizeof(c->json), "{\"%s\": %s}",
				 r->key, wrong_types[k].json);
			snprintf(c->msg, sizeof(c->msg),
				 "'%s' must be an integer, not %s", r->key,
				 wrong_types[k].name);
		}
	}
	return n;
}

static void test_bad(void **state)
{
	const struct bad_case *c = *state;
	struct qp_path p, before;
	char err[256] = "";
	json_t *j = parse(c->json);

	qp_path_init(&p);
	rt_roce(&p);
	before = p;
	assert_int_equal(qp_path_from_json(j, &p, err, sizeof(err)), -EINVAL);
	if (strncmp(err, c->msg, strlen(c->msg)))
		fail_msg("for %s\n got: %s\nwant: %s", c->json, err, c->msg);
	assert_path_equal(&p, &before);
	json_decref(j);
}

static void test_err_buffer(void **state)
{
	struct qp_path p;
	char small[12];
	json_t *j = parse("{\"timeout\": 40}");

	(void)state;
	qp_path_init(&p);
	/* No buffer at all, and one too small: truncated, terminated. */
	assert_int_equal(qp_path_from_json(j, &p, NULL, 0), -EINVAL);
	memset(small, 'x', sizeof(small));
	assert_int_equal(qp_path_from_json(j, &p, small, sizeof(small)),
			 -EINVAL);
	assert_string_equal(small, "'timeout' =");
	assert_int_equal(qp_path_from_json(NULL, &p, small, sizeof(small)),
			 -EINVAL);
	json_decref(j);
}

/* ---- endpoint documents ---- */

static void test_endpoint_good(void **state)
{
	struct qp_path p, want;
	char err[256] = "";
	json_t *j;

	(void)state;
	/* A RoCE peer: every key; the MTU is the smaller of the two. */
	j = parse("{\"qp_num\": 17, \"port\": 1, \"lid\": 0, "
		  "\"gid\": \"0000:0000:0000:0000:0000:ffff:c000:0202\", "
		  "\"gid_index\": 1, \"psn\": 4242, \"mtu\": 4096, "
		  "\"type\": \"rc\"}");
	qp_path_init(&p);
	want = p;
	want.dqpn = 17;
	want.rq_psn = 4242;
	want.mtu = IBV_MTU_2048;
	want.has_grh = true;
	inet_pton(AF_INET6, "::ffff:192.0.2.2", want.dgid.raw);
	assert_int_equal(qp_path_from_endpoint(j, "rc", IBV_MTU_2048, &p, err,
					       sizeof(err)),
			 0);
	assert_path_equal(&p, &want);
	json_decref(j);

	/* An IB peer without a GID: LID routing; no local MTU: the peer's. */
	j = parse("{\"qp_num\": 5, \"lid\": 9, \"gid\": null, "
		  "\"gid_index\": null, \"mtu\": 512}");
	qp_path_init(&p);
	p.has_grh = true;
	inet_pton(AF_INET6, "::ffff:192.0.2.1", p.dgid.raw);
	want = p;
	want.dqpn = 5;
	want.dlid = 9;
	want.mtu = IBV_MTU_512;
	want.has_grh = false;
	memset(&want.dgid, 0, sizeof(want.dgid));
	assert_int_equal(qp_path_from_endpoint(j, "uc", 0, &p, err,
					       sizeof(err)),
			 0);
	assert_path_equal(&p, &want);
	json_decref(j);
}

static void test_endpoint_bad(void **state)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{ "[]", "an endpoint must be an object, not an array" },
		{ "{\"psn\": 1}", "'qp_num' is missing" },
		{ "{\"qp_num\": 16777216}",
		  "'qp_num' = 16777216 is out of range [0, 16777215]" },
		{ "{\"qp_num\": \"17\"}",
		  "'qp_num' must be an integer, not a string" },
		{ "{\"qp_num\": 1, \"psn\": -1}", "'psn' = -1 is out of range" },
		{ "{\"qp_num\": 1, \"lid\": 65536}", "'lid' = 65536" },
		{ "{\"qp_num\": 1, \"mtu\": 1000}",
		  "'mtu' = 1000 is not one of" },
		{ "{\"qp_num\": 1, \"gid\": 7}",
		  "'gid' must be a string or null, not an integer" },
		{ "{\"qp_num\": 1, \"gid\": \"nope\"}",
		  "'gid' = \"nope\" is not a GID" },
		{ "{\"qp_num\": 1, \"type\": \"uc\"}",
		  "the endpoint is of a uc QP, this one is rc" },
		{ "{\"qp_num\": 1, \"dqpn\": 2}", "unknown key 'dqpn'" },
	};
	struct qp_path p, before;
	char err[256];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		json_t *j = parse(cases[i].json);

		qp_path_init(&p);
		before = p;
		err[0] = '\0';
		assert_int_equal(qp_path_from_endpoint(j, "rc", IBV_MTU_1024,
						       &p, err, sizeof(err)),
				 -EINVAL);
		if (strncmp(err, cases[i].msg, strlen(cases[i].msg)))
			fail_msg("for %s\n got: %s\nwant: %s", cases[i].json,
				 err, cases[i].msg);
		assert_path_equal(&p, &before);
		json_decref(j);
	}
}

static void test_rts_mask(void **state)
{
	char err[256] = "";
	int mask = -1;
	json_t *j;

	(void)state;
	assert_int_equal(qp_path_rts_mask(NULL, &mask, err, sizeof(err)), 0);
	assert_int_equal(mask, 0);
	j = parse("{\"min_rnr_timer\": 1, \"timeout\": 2, "
		  "\"retry_cnt\": 3, \"rnr_retry\": 4, "
		  "\"max_rd_atomic\": 5, \"access\": []}");
	assert_int_equal(qp_path_rts_mask(j, &mask, err, sizeof(err)), 0);
	assert_int_equal(mask, QP_RTS_MASK);
	json_decref(j);
	j = parse("{\"timeout\": 2}");
	assert_int_equal(qp_path_rts_mask(j, &mask, err, sizeof(err)), 0);
	assert_int_equal(mask, IBV_QP_TIMEOUT);
	json_decref(j);
	for (size_t i = 0; i < ARRAY_SIZE(all_keys); i++) {
		char text[128];
		bool ok = false;

		snprintf(text, sizeof(text), "{\"%s\": 1}", all_keys[i]);
		j = parse(text);
		for (const char *const *k = (const char *const[]){
			     "min_rnr_timer", "timeout", "retry_cnt",
			     "rnr_retry", "max_rd_atomic", "access", NULL };
		     *k; k++)
			ok |= streq(*k, all_keys[i]);
		assert_int_equal(qp_path_rts_mask(j, &mask, err, sizeof(err)),
				 ok ? 0 : -EINVAL);
		if (!ok)
			assert_non_null(strstr(err, "cannot change while the "
						    "QP is in RTS"));
		json_decref(j);
	}
	assert_int_equal(qp_modify_rts(NULL, NULL, IBV_QP_TIMEOUT, NULL),
			 -EINVAL);
}

/* ---- argument checks that need no device ---- */

static void test_modify_args(void **state)
{
	struct qp_path p;
	const char *at = "stale";

	(void)state;
	qp_path_init(&p);
	assert_int_equal(qp_modify(NULL, IBV_QPS_RTS, &p, &at), -EINVAL);
	assert_null(at);
	assert_int_equal(qp_modify(NULL, IBV_QPS_RTS, &p, NULL), -EINVAL);
}

static void test_selftest_args(void **state)
{
	struct selftest_mr mr = { 0 };
	json_t *report = NULL;

	(void)state;
	assert_int_equal(selftest_run(NULL, NULL, &mr, 1000, NULL), -EINVAL);
	assert_int_equal(selftest_run(NULL, NULL, &mr, 1000, &report),
			 -EINVAL);
	assert_non_null(report);
	assert_non_null(strstr(json_string_value(json_object_get(report,
								 "error")),
			       "preconditions not met"));
	json_decref(report);
}

int main(void)
{
	size_t n_gen = generate_bad_cases();
	size_t max = ARRAY_SIZE(rt_cases) + ARRAY_SIZE(good_cases) +
		     ARRAY_SIZE(fixed_bad_cases) + n_gen + 11;
	struct CMUnitTest *tests = calloc(max, sizeof(*tests));
	size_t n = 0;
	int r;

	if (!tests)
		return 1;
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_defaults);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_default_json);
	for (size_t i = 0; i < ARRAY_SIZE(rt_cases); i++)
		tests[n++] = (struct CMUnitTest){
			.name = rt_cases[i].name,
			.test_func = test_round_trip,
			.initial_state = (void *)&rt_cases[i],
		};
	for (size_t i = 0; i < ARRAY_SIZE(good_cases); i++)
		tests[n++] = (struct CMUnitTest){
			.name = good_cases[i].name,
			.test_func = test_good,
			.initial_state = (void *)&good_cases[i],
		};
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_starts_from_p);
	for (size_t i = 0; i < ARRAY_SIZE(fixed_bad_cases); i++)
		tests[n++] = (struct CMUnitTest){
			.name = fixed_bad_cases[i].name,
			.test_func = test_bad,
			.initial_state = (void *)&fixed_bad_cases[i],
		};
	for (size_t i = 0; i < n_gen; i++)
		tests[n++] = (struct CMUnitTest){
			.name = generated[i].name,
			.test_func = test_bad,
			.initial_state = &generated[i],
		};
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_err_buffer);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_endpoint_good);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_endpoint_bad);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_rts_mask);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_modify_args);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_selftest_args);
	r = _cmocka_run_group_tests("qpstate", tests, n, NULL, NULL);
	free(tests);
	return r;
}
