// SPDX-License-Identifier: MIT
/* Taking back a device context after a restart (restore.c), on the paths
 * a machine without an import-capable device takes: whatever does not
 * fit is dropped, with every fd systemd passed closed. Taking back for
 * real needs mlx5: tests/hw/test_restart_hw.py. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "profile.h"
#include "profile_fields.h" /* builds profiles by hand */
#include "restore.h"

static size_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	size_t n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int state_fd(const char *text)
{
	int fd = memfd_create("state", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	return fd;
}

static int devnull(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	assert_true(fd >= 0);
	return fd;
}

static const char good[] =
	"{\"version\": 1, \"ibdev\": \"mlx5_0\", \"tids\": [1, 2], "
	"\"ctxn\": 4, \"objects\": ["
	"{\"kind\": \"pd\", \"name\": \"a\", \"handle\": 3},"
	"{\"kind\": \"mr\", \"name\": \"r\", \"handle\": 5, \"pd\": \"a\", "
	"\"memory\": \"m\", \"offset\": 0, \"length\": 4096, \"iova\": 0, "
	"\"access\": 1, \"zero_based\": true}]}";

/* The profile "p" on ibdev. */
static struct profile *profile_on(const char *ibdev)
{
	static struct conf_profile conf = { .name = "p" };
	static struct profile p;

	memset(&p, 0, sizeof(p));
	p.conf = &conf;
	snprintf(p.ibdev, sizeof(p.ibdev), "%s", ibdev);
	return &p;
}

static void take_and_expect_none(const char *ibdev, const char *state)
{
	struct ibv_context *ctx = NULL;
	size_t before = open_fds();

	assert_int_equal(restore_keep("ctx/p", devnull()), 0);
	if (state)
		assert_int_equal(restore_keep("state/p", state_fd(state)), 0);
	assert_int_equal(open_fds(), before + (state ? 2 : 1));
	assert_null(restore_take(profile_on(ibdev), &ctx));
	assert_null(ctx);
	/* Dropped: both fds closed. */
	assert_int_equal(open_fds(), before);
	restore_done(NULL);
}

static void test_nothing_kept(void **state)
{
	struct ibv_context *ctx = NULL;

	(void)state;
	assert_null(restore_take(profile_on("mlx5_0"), &ctx));
	assert_null(ctx);
}

static void test_another_device(void **state)
{
	(void)state;
	take_and_expect_none("mlx5_1", good);
}

static void test_no_or_bad_state(void **state)
{
	(void)state;
	take_and_expect_none("mlx5_0", NULL);
	take_and_expect_none("mlx5_0", "not json");
	take_and_expect_none("mlx5_0", "{\"version\": 2, \"ibdev\": \"mlx5_0\","
				       " \"objects\": []}");
	/* An entry without a handle, of an unknown kind, twice the same. */
	take_and_expect_none("mlx5_0", "{\"version\": 1, \"ibdev\": \"mlx5_0\","
				       " \"objects\": [{\"kind\": \"pd\", "
				       "\"name\": \"a\"}]}");
	take_and_expect_none("mlx5_0", "{\"version\": 1, \"ibdev\": \"mlx5_0\","
				       " \"objects\": [{\"kind\": \"qp\", "
				       "\"name\": \"a\", \"handle\": 1}]}");
	take_and_expect_none("mlx5_0",
			     "{\"version\": 1, \"ibdev\": \"mlx5_0\", "
			     "\"objects\": [{\"kind\": \"pd\", \"name\": \"a\", "
			     "\"handle\": 1}, {\"kind\": \"pd\", \"name\": "
			     "\"a\", \"handle\": 2}]}");
}

/* A good state over a context that is not one (here /dev/null): the
 * import fails and nothing is taken back. */
static void test_import_refused(void **state)
{
	(void)state;
	take_and_expect_none("mlx5_0", good);
}

static const char *gone_seen[4];
static size_t n_gone;

static void on_gone(const char *profile)
{
	gone_seen[n_gone++] = strdup(profile);
}

static void test_unclaimed_are_dropped_at_the_end(void **state)
{
	size_t before = open_fds();

	(void)state;
	assert_int_equal(restore_keep("ctx/q", devnull()), 0);
	assert_int_equal(restore_keep("state/q", state_fd(good)), 0);
	assert_int_equal(restore_keep("mem/q/m", devnull()), -EINVAL);
	assert_int_equal(open_fds(), before + 2);
	restore_done(on_gone);
	assert_int_equal(n_gone, 1);
	assert_string_equal(gone_seen[0], "q");
	free((void *)gone_seen[0]);
	assert_int_equal(open_fds(), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nothing_kept),
		cmocka_unit_test(test_another_device),
		cmocka_unit_test(test_no_or_bad_state),
		cmocka_unit_test(test_import_refused),
		cmocka_unit_test(test_unclaimed_are_dropped_at_the_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
