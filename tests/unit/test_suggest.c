// SPDX-License-Identifier: MIT
/* rdmactl's "did you mean" (client/suggest.c): distances and choices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "suggest.h"
#include "util.h"

static void test_distance(void **state)
{
	static const struct {
		const char *a, *b;
		size_t d;
	} cases[] = {
		{ "", "", 0 },		   { "abc", "abc", 0 },
		{ "", "abc", 3 },	   { "abc", "", 3 },
		{ "ingset", "ingest", 1 }, /* a swap counts once */
		{ "shwo", "show", 1 },	   { "profils", "profiles", 1 },
		{ "mx", "mr", 1 },	   { "kitten", "sitting", 3 },
		{ "ab", "ba", 1 },	   { "ca", "abc", 3 },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		assert_int_equal(suggest_distance(cases[i].a, cases[i].b),
				 cases[i].d);
}

static void test_closest(void **state)
{
	static const char *const commands[] = { "devices", "device", "port",
						"gids",	   "profiles", "show",
						"reload",  "qp" };
	static const char *const profiles[] = { "ingest", "egress", NULL };
	char longer[300];

	(void)state;
	assert_string_equal(suggest_closest("shwo", commands, 8), "show");
	assert_string_equal(suggest_closest("relaod", commands, 8), "reload");
	assert_string_equal(suggest_closest("profile", commands, 8),
			    "profiles");
	/* The first of equals: "devics" is one edit from both. */
	assert_string_equal(suggest_closest("devics", commands, 8),
			    "devices");
	assert_null(suggest_closest("frobnicate", commands, 8));
	/* Short words: one edit at most. */
	assert_null(suggest_closest("xy", commands, 8));
	assert_null(suggest_closest("show", commands, 8)); /* no typo */
	assert_string_equal(suggest_closest("ingset", profiles, 3), "ingest");
	assert_null(suggest_closest("ingest", profiles, 0));
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	assert_null(suggest_closest(longer, profiles, 3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_distance),
		cmocka_unit_test(test_closest),
	};

	return cmocka_run_group_tests_name("suggest", tests, NULL, NULL);
}
