// SPDX-License-Identifier: MIT
/*
 * libmicrohttpd opened on first use (daemon/front/mhd.c): a missing
 * library and a library without its functions are refused and leave no
 * function behind; the real one gives every function, and it is opened
 * once.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "mhd.h"

static int n_found(void)
{
	int n = 0;
#define MHD_COUNT(f) n += sym_##f != NULL;
	MHD_FUNCTIONS(MHD_COUNT)
#undef MHD_COUNT
	return n;
}

static int n_functions(void)
{
	int n = 0;
#define MHD_ONE(f) n++;
	MHD_FUNCTIONS(MHD_ONE)
#undef MHD_ONE
	return n;
}

static void test_open(void **state)
{
	struct MHD_Response *r;

	(void)state;
	assert_int_equal(n_found(), 0);
	assert_int_equal(mhd_open_file("libmicrohttpd-none.so.0"), -ENOPKG);
	assert_int_equal(n_found(), 0);
	/* A library that is there, without libmicrohttpd's functions: the
	 * ones found before the missing one are forgotten too. */
	assert_int_equal(mhd_open_file("libjansson.so.4"), -ENOPKG);
	assert_int_equal(n_found(), 0);

	assert_int_equal(mhd_open(), 0);
	assert_int_equal(n_found(), n_functions());
	r = sym_MHD_create_response_from_buffer(2, (void *)"ok",
						MHD_RESPMEM_PERSISTENT);
	assert_non_null(r);
	assert_int_equal(sym_MHD_add_response_header(r, "X-Test", "1"),
			 MHD_YES);
	sym_MHD_destroy_response(r);
	/* Once open, it stays open: no other file is looked at. */
	assert_int_equal(mhd_open_file("libmicrohttpd-none.so.0"), 0);
	assert_int_equal(n_found(), n_functions());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
