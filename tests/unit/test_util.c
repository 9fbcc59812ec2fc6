// SPDX-License-Identifier: MIT
/* closep() and close_all() (common/util.h): an fd closed once through a
 * variable is closed once, however often the variable is closed again.
 * The daemon closes a session's output fd when a send fails and again
 * when the session ends; by then accept() may have given that number to
 * a new session, whose socket a second close() would end without its
 * session knowing (never polled again: the session of a gone client
 * stays listed). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "util.h"

static bool is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static void test_closep_twice_spares_the_next_owner_of_the_number(void **state)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), number = fd, next;

	(void)state;
	assert_true(fd >= 0);
	closep(&fd);
	assert_false(is_open(number));
	assert_int_equal(fd, -1);
	/* The lowest free number: the one just closed. */
	next = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_equal(next, number);
	closep(&fd);
	assert_true(is_open(next));
	close(next);
}

static void test_closep_keeps_errno(void **state)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	(void)state;
	errno = EAGAIN;
	closep(&fd);
	assert_int_equal(errno, EAGAIN);
	fd = -1;
	closep(&fd); /* nothing to close: nothing happens */
	assert_int_equal(errno, EAGAIN);
}

static void test_close_all_twice_spares_the_next_owners(void **state)
{
	int fds[3], numbers[3], again[3];

	(void)state;
	for (int i = 0; i < 3; i++) {
		fds[i] = numbers[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(fds[i] >= 0);
	}
	close_all(fds, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(fds[i], -1);
		assert_false(is_open(numbers[i]));
	}
	for (int i = 0; i < 3; i++)
		again[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	close_all(fds, 3);
	for (int i = 0; i < 3; i++) {
		assert_true(is_open(again[i]));
		close(again[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_closep_twice_spares_the_next_owner_of_the_number),
		cmocka_unit_test(test_closep_keeps_errno),
		cmocka_unit_test(test_close_all_twice_spares_the_next_owners),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
