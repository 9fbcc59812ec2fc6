// SPDX-License-Identifier: MIT
/* A tenant is exactly its allow list (rdmad.conf(5), allow and
 * admit_root; proto/PROTOCOL.md, "Per-profile sockets"): who is admitted
 * to a profile, root included, and what a session on a profile's own
 * socket may ask. Tables of cases, from the documentation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "api.h"
#include "attach_view.h"
#include "config.h"
#include "profile.h"

static const char text[] =
	"devices = ( { name = \"d\"; match = { ibdev = \"no-such-dev0\"; }; } );\n"
	"profiles = (\n"
	"  { name = \"user_root\"; device = \"d\"; allow = { users = [ \"root\" ]; }; },\n"
	"  { name = \"uid_0\"; device = \"d\"; allow = { uids = [ 0 ]; }; },\n"
	"  { name = \"group_root\"; device = \"d\"; allow = { groups = [ \"root\" ]; }; },\n"
	"  { name = \"gid_0\"; device = \"d\"; allow = { groups = [ \"0\" ]; }; },\n"
	"  { name = \"nobody_listed\"; device = \"d\"; },\n"
	"  { name = \"app\"; device = \"d\"; allow = { uids = [ 1000 ]; groups = [ \"2000\" ]; }; }\n"
	");\n";

struct admit_case {
	const char *profile;
	uid_t uid;
	gid_t gid;
	gid_t supplementary; /* 0: none */
	bool admit_root;
	bool admitted;
};

static const struct admit_case admit_cases[] = {
	/* Root where the list names it: by user, uid, group name, gid. */
	{ "user_root", 0, 0, 0, false, true },
	{ "uid_0", 0, 0, 0, false, true },
	{ "group_root", 0, 0, 0, false, true },
	{ "gid_0", 0, 0, 0, false, true },
	/* Root where it does not: refused, as anyone else. */
	{ "nobody_listed", 0, 0, 0, false, false },
	{ "app", 0, 0, 0, false, false },
	/* A root process holding a listed group is admitted by it. */
	{ "app", 0, 0, 2000, false, true },
	/* daemon.admit_root: root everywhere, and no one else gains. */
	{ "nobody_listed", 0, 0, 0, true, true },
	{ "app", 0, 0, 0, true, true },
	{ "nobody_listed", 1000, 1000, 0, true, false },
	/* Others, by the list alone. */
	{ "app", 1000, 1000, 0, false, true },
	{ "app", 1001, 1001, 2000, false, true },
	{ "app", 1001, 1001, 0, false, false },
	{ "user_root", 1000, 0, 0, false, false },
	{ "gid_0", 1000, 0, 0, false, true },
};

static void test_admission(void **state)
{
	struct config *cfg = NULL;

	(void)state;
	assert_int_equal(config_load_string("t.conf", text, &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(config_resolve_identities(cfg), 0);
	for (size_t i = 0; i < ARRAY_SIZE(admit_cases); i++) {
		const struct admit_case *k = &admit_cases[i];
		const struct conf_profile *cp = config_profile(cfg, k->profile);
		struct profile *p = NULL;
		gid_t groups[1] = { k->supplementary };

		assert_non_null(cp);
		assert_int_equal(profile_new(cfg, cp, NULL, NULL, &p), 0);
		if (profile_admits(p, k->uid, k->gid, groups,
				   k->supplementary ? 1 : 0,
				   k->admit_root) != k->admitted)
			fail_msg("case %zu: profile %s, uid %u gid %u (+%u), "
				 "admit_root %d: expected %s",
				 i, k->profile, (unsigned int)k->uid,
				 (unsigned int)k->gid,
				 (unsigned int)k->supplementary, k->admit_root,
				 k->admitted ? "admitted" : "refused");
		profile_free(p);
	}
	config_free(cfg);
}

static void test_admit_root_key(void **state)
{
	static const char on[] = "daemon = { admit_root = true; };\n";
	static const char bad[] = "daemon = { admit_root = \"yes\"; };\n";
	struct config *cfg = NULL;

	(void)state;
	assert_int_equal(config_load_string("t.conf", "", &cfg), 0);
	assert_false(cfg->daemon.admit_root); /* the safe default */
	config_free(cfg);
	assert_int_equal(config_load_string("t.conf", on, &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	assert_true(cfg->daemon.admit_root);
	config_free(cfg);
	cfg = NULL;
	config_load_string("t.conf", bad, &cfg);
	assert_non_null(cfg);
	assert_true(cfg->n_errors > 0);
	config_free(cfg);
}

struct scope_case {
	const char *method, *path;
	bool served;
};

/* A session on profile "a"'s own socket. */
static const struct scope_case scope_cases[] = {
	{ "GET", "/v1/health", true },
	{ "GET", "/v1/version", true },
	{ "GET", "/v1/openapi.json", true },
	{ "GET", "/v1/profiles", true },
	{ "GET", "/v1/profiles/a", true },
	{ "GET", "/v1/profiles/a/mr/r", true },
	{ "GET", "/v1/profiles/a/orphans", true },
	{ "GET", "/v1/profiles/a/qp/q/endpoint", true },
	{ "GET", "/v1/profiles/a/target/t/connections", true },
	/* Another profile, existing or not, or a name that begins alike. */
	{ "GET", "/v1/profiles/b", false },
	{ "GET", "/v1/profiles/b/mr/r", false },
	{ "GET", "/v1/profiles/b/orphans", false },
	{ "GET", "/v1/profiles/ab", false },
	{ "GET", "/v1/profiles/a.", false },
	/* What shows every profile, or the host. */
	{ "GET", "/v1/config", false },
	{ "GET", "/v1/sessions", false },
	{ "GET", "/v1/devices", false },
	{ "GET", "/v1/devices/rxe0", false },
	/* Every change, its own profile's too. */
	{ "POST", "/v1/reload", false },
	{ "PATCH", "/v1/profiles/a/qp/q", false },
	{ "POST", "/v1/profiles/a/selftest", false },
	{ "POST", "/v1/profiles/a/qp/q/migrate", false },
	{ "DELETE", "/v1/profiles/a/target/t/connections/1", false },
	/* No such route. */
	{ "GET", "/v1/nothing", false },
	{ "GET", "/v1/profiles/a/", false },
};

static void test_scope(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(scope_cases); i++) {
		const struct scope_case *k = &scope_cases[i];

		if (api_in_scope(k->method, k->path, "a") != k->served)
			fail_msg("%s %s on a's socket: expected %s", k->method,
				 k->path, k->served ? "served" : "refused");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_admission),
		cmocka_unit_test(test_admit_root_key),
		cmocka_unit_test(test_scope),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
