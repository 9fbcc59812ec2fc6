// SPDX-License-Identifier: MIT
/* Issue 45 in the configuration: a target's exposed bytes are reachable
 * only through its windows (rdmad --check refuses an exposed MR with
 * remote access of its own, another that reaches those bytes, or one
 * with remote access on the target's pd, with file:line), and a target's token is a secret that GET /v1/config and
 * rdmad --dump only say is set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"

/* Line 1: the device; 2: the profile; 3: memory; 4: pd; 5 (and 6): the
 * MRs; then the CQ, the target, its expose list. */
#define HEAD "devices = ( { name = \"d\"; match = { ibdev = \"rxe0\"; }; } );\n"
#define PROFILE(mrs, expose)                                                   \
	HEAD "profiles = ( { name = \"p\"; device = \"d\";\n"                   \
	     "memory = ( { name = \"m\"; size = \"1M\"; } );\n"                 \
	     "pd = ( { name = \"a\"; } );\n"                                    \
	     "mr = ( " mrs " );\n"                                              \
	     "cq = ( { name = \"c\"; } );\n"                                    \
	     "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; " \
	     "cq = \"c\"; allow = [ \"10.0.0.0/8\" ];\n"                        \
	     " expose = ( " expose " ); } );\n} );\n"

#define WINDOW_MR                                                              \
	"{ name = \"r\"; pd = \"a\"; memory = \"m\"; "                         \
	"access = [ \"local_write\", \"mw_bind\" ]; }"

struct bad_case {
	const char *name;
	const char *text;
	int line;
	const char *msg;
};

static const struct bad_case bad_cases[] = {
	{ "exposed mr with remote_write",
	  PROFILE("{ name = \"r\"; pd = \"a\"; memory = \"m\"; access = [ \"local_write\", \"remote_write\", \"mw_bind\" ]; }",
		  "{ mr = \"r\"; access = [ \"remote_write\" ]; }"),
	  8, "target 't': mr 'r' (t.conf:5) has remote access of its own" },
	{ "exposed mr with remote_read",
	  PROFILE("{ name = \"r\"; pd = \"a\"; memory = \"m\"; access = [ \"remote_read\", \"mw_bind\" ]; }",
		  "{ mr = \"r\"; access = [ \"remote_read\" ]; }"),
	  8, "target 't': mr 'r' (t.conf:5) has remote access of its own" },
	{ "exposed mr with remote_atomic",
	  PROFILE("{ name = \"r\"; pd = \"a\"; memory = \"m\"; access = [ \"local_write\", \"remote_atomic\", \"mw_bind\" ]; }",
		  "{ mr = \"r\"; access = [ \"remote_read\" ]; }"),
	  8, "target 't': mr 'r' (t.conf:5) has remote access of its own" },
	{ "exposed bytes reached by another mr",
	  PROFILE(WINDOW_MR ",\n { name = \"all\"; pd = \"a\"; memory = \"m\"; offset = \"64K\"; access = [ \"local_write\", \"remote_write\" ]; }",
		  "{ mr = \"r\"; access = [ \"remote_read\" ]; offset = \"128K\"; length = \"4K\"; }"),
	  9, "target 't': mr 'all' (t.conf:6) has remote access and reaches the bytes exposed of mr 'r'" },
	/* The peers' QPs are on the target's pd: every mr there with remote
	 * access would be theirs, exposed or not. */
	{ "remote mr on the target's pd",
	  HEAD "profiles = ( { name = \"p\"; device = \"d\";\n"
	       "memory = ( { name = \"m\"; size = \"1M\"; }, { name = \"n\"; size = \"1M\"; } );\n"
	       "pd = ( { name = \"a\"; } );\n"
	       "mr = ( " WINDOW_MR ",\n { name = \"ring\"; pd = \"a\"; memory = \"n\"; access = [ \"local_write\", \"remote_write\" ]; } );\n"
	       "cq = ( { name = \"c\"; } );\n"
	       "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; pd = \"a\"; cq = \"c\"; allow = [ \"10.0.0.0/8\" ];\n"
	       " expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; } ); } );\n} );\n",
	  8, "target 't': mr 'ring' (t.conf:6) on its pd 'a' has remote access" },
	{ "exposed bytes reached by an implicit mr",
	  PROFILE(WINDOW_MR ",\n { name = \"all\"; pd = \"a\"; odp = true; access = [ \"local_write\", \"remote_read\" ]; }",
		  "{ mr = \"r\"; access = [ \"remote_read\" ]; }"),
	  9, "target 't': mr 'all' (t.conf:6) has remote access and reaches" },
};

static void test_bad(void **state)
{
	const struct bad_case *c = *state;
	struct config *cfg = NULL;
	char want[64];
	int found = 0;

	assert_int_equal(config_load_string("t.conf", c->text, &cfg), 0);
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
		fail_msg("%s: no error at %s containing '%s'", c->name, want,
			 c->msg);
	}
	config_free(cfg);
}

/* What the window may be over: remote rights elsewhere in the memory,
 * outside the exposed range and on another pd, are no way around it. */
static void test_window_only_good(void **state)
{
	static const char text[] =
		HEAD "profiles = ( { name = \"p\"; device = \"d\";\n"
		     "memory = ( { name = \"m\"; size = \"1M\"; } );\n"
		     "pd = ( { name = \"a\"; }, { name = \"b\"; } );\n"
		     "mr = ( " WINDOW_MR ",\n { name = \"low\"; pd = \"b\"; "
		     "memory = \"m\"; length = \"64K\"; access = [ "
		     "\"local_write\", \"remote_write\" ]; } );\n"
		     "cq = ( { name = \"c\"; } );\n"
		     "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; "
		     "pd = \"a\"; cq = \"c\"; allow = [ \"10.0.0.0/8\" ];\n"
		     " expose = ( { mr = \"r\"; access = [ \"remote_read\", "
		     "\"remote_write\" ]; offset = \"64K\"; } ); } );\n} );\n";
	struct config *cfg = NULL;

	(void)state;
	assert_int_equal(config_load_string("t.conf", text, &cfg), 0);
	if (cfg->n_errors)
		config_print_errors(cfg, stderr);
	assert_int_equal(cfg->n_errors, 0);
	config_free(cfg);
}

/* The token shows as set (true), in the document and in --dump. */
static void test_token_secret(void **state)
{
	static const char text[] =
		HEAD "profiles = ( { name = \"p\"; device = \"d\";\n"
		     "memory = ( { name = \"m\"; size = \"1M\"; } );\n"
		     "pd = ( { name = \"a\"; } );\n"
		     "mr = ( " WINDOW_MR " );\n"
		     "cq = ( { name = \"c\"; }, { name = \"c2\"; } );\n"
		     "target = ( { name = \"t\"; listen = \"192.0.2.1:1\"; "
		     "pd = \"a\"; cq = \"c\"; allow = [ \"10.0.0.0/8\" ];\n"
		     " token = \"s3cret-inline\";\n"
		     " expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; } ); },\n"
		     " { name = \"u\"; listen = \"192.0.2.1:2\"; pd = \"a\"; "
		     "cq = \"c2\"; allow = [ \"10.0.0.0/8\" ];\n"
		     " expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; } ); } );\n"
		     "} );\n";
	struct config *cfg = NULL;
	json_t *j, *targets;
	char *dump = NULL, *doc;
	size_t len = 0;
	FILE *f;

	(void)state;
	assert_int_equal(config_load_string("t.conf", text, &cfg), 0);
	if (cfg->n_errors)
		config_print_errors(cfg, stderr);
	assert_int_equal(cfg->n_errors, 0);
	j = config_json(cfg);
	assert_non_null(j);
	targets = json_object_get(json_array_get(json_object_get(j, "profiles"),
						 0),
				  "target");
	assert_true(json_is_true(
		json_object_get(json_array_get(targets, 0), "token")));
	/* Unset: left out, as every unset value is. */
	assert_null(json_object_get(json_array_get(targets, 1), "token"));
	doc = json_dumps(j, JSON_COMPACT);
	assert_non_null(doc);
	assert_null(strstr(doc, "s3cret"));
	free(doc);
	json_decref(j);
	/* The target's own document (GET /v1/profiles/p) says the same. */
	j = config_object_json(OBJ_TARGET, conf_obj(&cfg->profiles[0],
						     OBJ_TARGET, 0));
	assert_true(json_is_true(json_object_get(j, "token")));
	json_decref(j);

	f = open_memstream(&dump, &len);
	assert_non_null(f);
	assert_int_equal(config_print(cfg, f), 0);
	assert_int_equal(fclose(f), 0);
	assert_null(strstr(dump, "s3cret"));
	assert_non_null(strstr(dump, "token = true;"));
	free(dump);
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
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_window_only_good);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_token_secret);
	return _cmocka_run_group_tests("config_target", tests, n, NULL, NULL);
}
