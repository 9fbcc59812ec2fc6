// SPDX-License-Identifier: MIT
/*
 * Whom a REST request names (daemon/front/http_host.c), as a table: a
 * Host field's value is host[:port] (RFC 9110, 7.2; uri-host of RFC
 * 3986, 3.2.2: IP-literal, IPv4address or reg-name; port = *DIGIT);
 * one of ours is served, another is misdirected (421), one not of that
 * shape is a bad request (400). An Origin (RFC 6454, 7) is "null" or
 * scheme "://" host [":" port], several separated by spaces: every one
 * must be ours.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "http_host.h"

static char *listen_v4[] = { "127.0.0.1:8470", "unix:/run/rdmad/http.sock",
			     "[::1]:8471", "192.0.2.1:8470" };
static char *extra[] = { "rdmad.example", "Ops.Example.ORG", "[2001:db8::1]" };
static char *wildcard[] = { "0.0.0.0:8470" };

struct host_case {
	const char *value;
	enum host_verdict v;
};

static const struct host_case hosts[] = {
	{ "localhost", HOST_OURS },
	{ "localhost:8470", HOST_OURS },
	{ "LocalHost:1", HOST_OURS },
	{ "localhost:", HOST_OURS }, /* port = *DIGIT */
	{ " localhost ", HOST_OURS }, /* optional whitespace */
	{ "127.0.0.1", HOST_OURS },
	{ "127.0.0.1:8470", HOST_OURS },
	{ "[::1]", HOST_OURS },
	{ "[::1]:8470", HOST_OURS },
	{ "[0:0:0:0:0:0:0:1]:8470", HOST_OURS }, /* the same address */
	{ "192.0.2.1:8470", HOST_OURS },	  /* a listen address */
	{ "rdmad.example", HOST_OURS },
	{ "RDMAD.EXAMPLE:443", HOST_OURS },
	{ "ops.example.org", HOST_OURS },
	{ "[2001:DB8:0::1]", HOST_OURS },
	{ "attacker.example", HOST_NOT_OURS },
	{ "attacker.example:8470", HOST_NOT_OURS },
	{ "rdmad.example.attacker.example", HOST_NOT_OURS },
	{ "localhost.attacker.example", HOST_NOT_OURS },
	{ "127.0.0.2", HOST_NOT_OURS },
	{ "192.0.2.2", HOST_NOT_OURS },
	{ "[::2]", HOST_NOT_OURS },
	{ "", HOST_NOT_OURS }, /* an empty reg-name: not a name of ours */
	{ "rdmad%2eexample", HOST_NOT_OURS }, /* pct-encoded: not decoded */
	{ "local host", HOST_BAD },
	{ "user@localhost", HOST_BAD },
	{ "localhost:port", HOST_BAD },
	{ "localhost:80:80", HOST_BAD },
	{ "[::1", HOST_BAD },
	{ "[::1]x", HOST_BAD },
	{ "[not-v6]", HOST_BAD },
	{ "http://localhost", HOST_BAD },
	{ "localhost/x", HOST_BAD },
};

static const struct host_case origins[] = {
	{ "http://localhost", HOST_OURS },
	{ "http://localhost:8470", HOST_OURS },
	{ "HTTPS://127.0.0.1:8470", HOST_OURS },
	{ "http://[::1]:8470", HOST_OURS },
	{ "http://rdmad.example http://localhost", HOST_OURS },
	{ "null", HOST_NOT_OURS },
	{ "", HOST_NOT_OURS },
	{ "http://attacker.example", HOST_NOT_OURS },
	{ "http://localhost http://attacker.example", HOST_NOT_OURS },
	{ "ftp://localhost", HOST_NOT_OURS },
	{ "http://localhost/", HOST_NOT_OURS },
	{ "http://", HOST_NOT_OURS },
	{ "localhost", HOST_NOT_OURS },
	{ "http://user@localhost", HOST_NOT_OURS },
};

static void test_hosts(void **state)
{
	struct host_names hn;

	(void)state;
	assert_int_equal(host_names_init(&hn, listen_v4, 4, extra, 3), 0);
	for (size_t i = 0; i < sizeof(hosts) / sizeof(*hosts); i++) {
		enum host_verdict v = host_judge(&hn, hosts[i].value);

		if (v != hosts[i].v)
			fail_msg("Host '%s': %d, not %d", hosts[i].value, v,
				 hosts[i].v);
	}
	host_names_done(&hn);
}

static void test_origins(void **state)
{
	struct host_names hn;

	(void)state;
	assert_int_equal(host_names_init(&hn, listen_v4, 4, extra, 3), 0);
	for (size_t i = 0; i < sizeof(origins) / sizeof(*origins); i++) {
		enum host_verdict v = origin_judge(&hn, origins[i].value);

		if (v != origins[i].v)
			fail_msg("Origin '%s': %d, not %d", origins[i].value,
				 v, origins[i].v);
	}
	host_names_done(&hn);
}

/* A wildcard listen address: any address (which no DNS name rebinds),
 * still no other name. */
static void test_wildcard(void **state)
{
	struct host_names hn;

	(void)state;
	assert_int_equal(host_names_init(&hn, wildcard, 1, NULL, 0), 0);
	assert_int_equal(host_judge(&hn, "198.51.100.7:8470"), HOST_OURS);
	assert_int_equal(host_judge(&hn, "[2001:db8::7]"), HOST_OURS);
	assert_int_equal(host_judge(&hn, "localhost"), HOST_OURS);
	assert_int_equal(host_judge(&hn, "attacker.example"), HOST_NOT_OURS);
	assert_int_equal(host_judge(&hn, "0.0.0.0.attacker.example"),
			 HOST_NOT_OURS);
	host_names_done(&hn);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hosts),
		cmocka_unit_test(test_origins),
		cmocka_unit_test(test_wildcard),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
