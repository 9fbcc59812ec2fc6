// SPDX-License-Identifier: MIT
/* The mcast kind in the configuration: good groups parse to the expected
 * tree, print and read back the same (rdmad --dump, the image a reload's
 * child hands over), bad ones give file:line and the message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "config.h"

#define HEAD                                                                   \
	"devices = ( { name = \"d\"; match = { ibdev = \"rxe0\"; };\n"          \
	"  gid = { type = \"roce_v2\"; family = \"ipv4\"; }; } );\n"
/* The profile starts on line 3, its groups on line 8. */
#define PROFILE(groups)                                                        \
	HEAD "profiles = ( { name = \"p\"; device = \"d\";\n"                   \
	     "pd = ( { name = \"a\"; } );\n"                                    \
	     "cq = ( { name = \"c\"; } );\n"                                    \
	     "qp = ( { name = \"u\"; pd = \"a\"; type = \"ud\"; send_cq = \"c\"; " \
	     "recv_cq = \"c\"; qkey = 0x01234567; },\n"                         \
	     "  { name = \"r\"; pd = \"a\"; type = \"rc\"; send_cq = \"c\"; "     \
	     "recv_cq = \"c\"; } );\n"                                          \
	     "mcast = ( " groups " );\n} );\n"

struct bad_case {
	const char *name;
	const char *text;
	int line;
	const char *msg;
};

static const struct bad_case bad_cases[] = {
	{ "not multicast", PROFILE("{ name = \"g\"; addr = \"192.0.2.1\"; qps = [ \"u\" ]; }"), 8, "mcast 'g': addr 192.0.2.1 is not an IPv4 multicast address (224.0.0.0/4)" },
	{ "ipv6 not multicast", PROFILE("{ name = \"g\"; addr = \"fe80::1\"; qps = [ \"u\" ]; }"), 8, "is not an IPv6 multicast address" },
	{ "not an address", PROFILE("{ name = \"g\"; addr = \"group\"; qps = [ \"u\" ]; }"), 8, "mcast 'g': addr group is not an IPv4 or IPv6 address" },
	{ "mgid not multicast", PROFILE("{ name = \"g\"; mgid = \"fe80::1\"; qps = [ \"u\" ]; }"), 8, "mcast 'g': mgid fe80::1 is not a multicast GID" },
	{ "mgid not a gid", PROFILE("{ name = \"g\"; mgid = \"x\"; qps = [ \"u\" ]; }"), 8, "is not a GID" },
	{ "addr and mgid", PROFILE("{ name = \"g\"; addr = \"239.1.1.1\"; mgid = \"ff12::1\"; qps = [ \"u\" ]; }"), 8, "takes addr or mgid, not both" },
	{ "no address", PROFILE("{ name = \"g\"; qps = [ \"u\" ]; }"), 8, "mcast 'g': needs addr (an IP multicast address) or mgid" },
	{ "no qps", PROFILE("{ name = \"g\"; addr = \"239.1.1.1\"; }"), 8, "mcast 'g': qps lists no QP" },
	{ "qp missing", PROFILE("{ name = \"g\"; addr = \"239.1.1.1\"; qps = [ \"x\" ]; }"), 8, "mcast 'g': qp 'x' is not declared in profile 'p'" },
	{ "qp not ud", PROFILE("{ name = \"g\"; addr = \"239.1.1.1\"; qps = [ \"r\" ]; }"), 8, "mcast 'g': qp 'r' is rc: only UD QPs join a multicast group" },
	{ "qp twice", PROFILE("{ name = \"g\"; addr = \"239.1.1.1\"; qps = [ \"u\", \"u\" ]; }"), 8, "mcast 'g': qp 'u' is listed twice" },
	{ "nine qps", PROFILE("{ name = \"g\"; addr = \"239.1.1.1\"; qps = [ \"u\", \"u\", \"u\", \"u\", \"u\", \"u\", \"u\", \"u\", \"u\" ]; }"), 8, "mcast 'g': 9 qps, at most 8" },
	{ "family", PROFILE("{ name = \"g\"; addr = \"ff12::1\"; qps = [ \"u\" ]; }"), 8, "mcast 'g': addr ff12::1 is IPv6, device 'd' uses IPv4 GIDs" },
	{ "group twice", PROFILE("{ name = \"g\"; addr = \"239.1.1.1\"; qps = [ \"u\" ]; },\n{ name = \"h\"; addr = \"239.1.1.1\"; qps = [ \"u\" ]; }"), 9, "mcast 'h': group 239.1.1.1 is declared already, by mcast 'g' (t.conf:8)" },
	{ "name twice", PROFILE("{ name = \"g\"; addr = \"239.1.1.1\"; qps = [ \"u\" ]; },\n{ name = \"g\"; addr = \"239.1.1.2\"; qps = [ \"u\" ]; }"), 9, "'g'" },
	{ "bad join", PROFILE("{ name = \"g\"; addr = \"239.1.1.1\"; qps = [ \"u\" ]; join = \"half\"; }"), 8, "'join' = \"half\" is not one of: full, send_only" },
	{ "unknown key", PROFILE("{ name = \"g\"; addr = \"239.1.1.1\"; qps = [ \"u\" ]; ttl = 1; }"), 8, "unknown key 'ttl' in mcast" },
};

static void test_bad(void **state)
{
	const struct bad_case *c = *state;
	struct config *cfg = NULL;
	char want[64];
	int found = 0;

	assert_int_equal(config_load_string("t.conf", c->text, &cfg), 0);
	assert_non_null(cfg);
	snprintf(want, sizeof(want), "t.conf:%d", c->line);
	for (size_t i = 0; i < cfg->n_errors; i++) {
		char got[64];

		snprintf(got, sizeof(got), "%s:%d", cfg->errors[i].loc.file,
			 cfg->errors[i].loc.line);
		if (strstr(cfg->errors[i].msg, c->msg) && !strcmp(got, want))
			found = 1;
	}
	if (!found) {
		config_print_errors(cfg, stderr);
		fail_msg("%s: no error containing '%s'", c->name, c->msg);
	}
	config_free(cfg);
}

static const char good[] = PROFILE(
	"{ name = \"g\"; addr = \"239.1.2.3\"; qps = [ \"u\" ]; },\n"
	"{ name = \"s\"; mgid = \"ff12:601b:ffff::1\"; qps = [ \"u\" ]; "
	"join = \"send_only\"; }");

static void check_good(const struct config *cfg)
{
	const struct conf_profile *p = config_profile(cfg, "p");
	const struct conf_mcast *g, *s;
	struct sockaddr_storage ss;
	const char *why;

	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(p->n_objs[OBJ_MCAST], 2);
	g = conf_obj_find(p, OBJ_MCAST, "g");
	s = conf_obj_find(p, OBJ_MCAST, "s");
	assert_non_null(g);
	assert_non_null(s);
	assert_string_equal(g->addr, "239.1.2.3");
	assert_null(g->mgid);
	assert_int_equal(g->n_qps, 1);
	assert_string_equal(g->qps[0], "u");
	assert_int_equal(g->join, MCJ_FULL);
	assert_int_equal(s->join, MCJ_SEND_ONLY);
	assert_int_equal(config_parse_mcast(g, &ss, &why), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(config_parse_mcast(s, &ss, &why), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(((struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr[0],
			 0xff);
	/* A group depends on its QPs. */
	{
		struct conf_ref refs[CONF_MAX_REFS];

		assert_int_equal(conf_obj_refs(OBJ_MCAST, g, refs,
					       CONF_MAX_REFS),
				 1);
		assert_int_equal(refs[0].kind, OBJ_QP);
		assert_string_equal(refs[0].name, "u");
	}
	assert_string_equal(mcast_join_name(MCJ_SEND_ONLY), "send_only");
	assert_string_equal(obj_kind_name(OBJ_MCAST), "mcast");
	assert_int_equal(obj_kind_from_name("mcast"), OBJ_MCAST);
}

static void test_good(void **state)
{
	struct config *cfg = NULL, *back = NULL, *img = NULL;
	char *text = NULL, *image = NULL;
	size_t len = 0, ilen = 0;
	FILE *f;

	(void)state;
	assert_int_equal(config_load_string("t.conf", good, &cfg), 0);
	check_good(cfg);
	/* --dump reads back the same. */
	f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_int_equal(config_print(cfg, f), 0);
	fclose(f);
	assert_int_equal(config_load_string("dump.conf", text, &back), 0);
	if (back->n_errors)
		config_print_errors(back, stderr);
	check_good(back);
	for (size_t i = 0; i < 2; i++)
		assert_true(conf_obj_equal(
			OBJ_MCAST, conf_obj(config_profile(cfg, "p"), OBJ_MCAST, i),
			conf_obj(config_profile(back, "p"), OBJ_MCAST, i)));
	/* So does the image a reload's child hands over. */
	assert_int_equal(config_image(cfg, &image, &ilen), 0);
	assert_int_equal(config_from_image(image, ilen, &img), 0);
	check_good(img);
	config_free(img);
	free(image);
	free(text);
	config_free(back);
	config_free(cfg);
}

/* A member whose qkey differs from the groups' is not wrong, but its
 * datagrams from the group would be dropped: a warning. */
static void test_qkey_warning(void **state)
{
	struct config *cfg = NULL;
	const char *text =
		HEAD "profiles = ( { name = \"p\"; device = \"d\";\n"
		     "pd = ( { name = \"a\"; } );\ncq = ( { name = \"c\"; } );\n"
		     "qp = ( { name = \"u\"; pd = \"a\"; type = \"ud\"; "
		     "send_cq = \"c\"; recv_cq = \"c\"; } );\n"
		     "mcast = ( { name = \"g\"; addr = \"239.1.1.1\"; "
		     "qps = [ \"u\" ]; } );\n} );\n";

	(void)state;
	assert_int_equal(config_load_string("t.conf", text, &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(cfg->n_warnings, 1);
	assert_non_null(strstr(cfg->warnings[0].msg,
			       "qp 'u' has qkey 0x11111111, not 0x1234567"));
	assert_int_equal(cfg->warnings[0].loc.line, 7);
	config_free(cfg);
}

int main(void)
{
	struct CMUnitTest tests[sizeof(bad_cases) / sizeof(bad_cases[0]) + 2];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++)
		tests[n++] = (struct CMUnitTest){
			.name = bad_cases[i].name,
			.test_func = test_bad,
			.initial_state = (void *)&bad_cases[i],
		};
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_good);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_qkey_warning);
	return _cmocka_run_group_tests("config_mcast", tests, n, NULL, NULL);
}
