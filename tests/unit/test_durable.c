// SPDX-License-Identifier: MIT
/* The durable record (durable.c): what a reader finds after every way a
 * writer can stop, the header's layout as rdmad(8) gives it (the
 * emulated fd store of the integration tests reads it so). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "durable.h"

static int new_fd(void)
{
	int fd = memfd_create("durable-test", MFD_CLOEXEC);

	assert_true(fd >= 0);
	return fd;
}

static void expect(int fd, const char *text, uint64_t want_gen)
{
	char *out = NULL;
	size_t len = 0;
	uint64_t gen = 0;

	assert_int_equal(durable_read(fd, 1 << 20, &out, &len, &gen), 0);
	assert_int_equal(len, strlen(text));
	assert_string_equal(out, text);
	assert_int_equal(gen, want_gen);
	free(out);
}

/* The header as documented: magic, then five little-endian u64. */
struct doc_header {
	char magic[8];
	uint64_t gen, off, len, sum, hsum;
};

static struct doc_header header(int fd)
{
	struct doc_header h;

	assert_int_equal(pread(fd, &h, sizeof(h), 0), 48);
	assert_memory_equal(h.magic, "RDMADREC", 8);
	return h;
}

static void test_versions_follow_each_other(void **state)
{
	int fd = new_fd();
	char big[20000];

	(void)state;
	assert_false(durable_is(fd));
	assert_int_equal(durable_read(fd, 100, &(char *){ NULL },
				      &(size_t){ 0 }, NULL),
			 -ENOENT);
	assert_int_equal(durable_write(fd, "one", 3), 1);
	assert_true(durable_is(fd));
	expect(fd, "one", 1);
	assert_int_equal(header(fd).off, 4096);
	/* The next one goes past the one named, not over it. */
	assert_int_equal(durable_write(fd, "second", 6), 2);
	expect(fd, "second", 2);
	assert_true(header(fd).off >= 4096 + 3);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	for (int i = 3; i < 40; i++) {
		size_t n = (size_t)(i * 7919) % sizeof(big);
		char saved = big[n];

		big[n] = '\0';
		assert_int_equal(durable_write(fd, big, n), i);
		expect(fd, big, (uint64_t)i);
		big[n] = saved;
	}
	close(fd);
}

/* The file stays near twice the largest version (a version below the
 * one named truncates what lies past it). */
static void test_the_file_stays_bounded(void **state)
{
	int fd = new_fd();
	char buf[65536];
	struct stat st;

	(void)state;
	memset(buf, 'y', sizeof(buf));
	for (int i = 0; i < 200; i++)
		assert_true(durable_write(fd, buf, (size_t)(i % 2 ? 60000 : 100)) > 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(st.st_size <= 4096 + 2 * 65536);
	close(fd);
}

/*
 * A writer that died after writing a version and before naming it
 * (the bytes are there, the header is the old one): the reader finds
 * the old version whole. One that died while writing the header cannot
 * be (one write within a page), but a torn or scribbled header, or a
 * version whose bytes changed, is refused, never read as another.
 */
static void test_a_writer_that_died_leaves_the_last_whole_version(void **state)
{
	int fd = new_fd();
	struct doc_header h;

	(void)state;
	assert_true(durable_write(fd, "{\"a\":1}", 7) > 0);
	h = header(fd);
	/* The next version's bytes, where the writer puts them, and no
	 * header: as after a SIGKILL between the two writes. */
	assert_int_equal(pwrite(fd, "{\"a\":2}", 7, (off_t)(h.off + 4096)), 7);
	expect(fd, "{\"a\":1}", 1);
	/* Its bytes changed under the header: refused. */
	assert_int_equal(pwrite(fd, "X", 1, (off_t)h.off), 1);
	assert_int_equal(durable_read(fd, 100, &(char *){ NULL },
				      &(size_t){ 0 }, NULL),
			 -EBADMSG);
	/* A header that does not check: refused, and the next write starts
	 * afresh. */
	assert_true(durable_write(fd, "{\"a\":3}", 7) > 0);
	h = header(fd);
	h.len = 1;
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), 48);
	assert_false(durable_is(fd));
	assert_int_equal(durable_read(fd, 100, &(char *){ NULL },
				      &(size_t){ 0 }, NULL),
			 -EBADMSG);
	assert_int_equal(durable_write(fd, "{}", 2), 1);
	expect(fd, "{}", 1);
	close(fd);
}

/* An older run's plain document is not a record: rewritten as one. */
static void test_plain_text_is_replaced(void **state)
{
	int fd = new_fd();
	static const char plain[] = "{\"version\":1,\"objects\":[]}";

	(void)state;
	assert_int_equal(write(fd, plain, strlen(plain)), (ssize_t)strlen(plain));
	assert_false(durable_is(fd));
	assert_int_equal(durable_read(fd, 100, &(char *){ NULL },
				      &(size_t){ 0 }, NULL),
			 -ENOENT);
	assert_int_equal(durable_write(fd, "{}", 2), 1);
	expect(fd, "{}", 1);
	close(fd);
}

static void test_bigger_than_asked_is_refused(void **state)
{
	int fd = new_fd();

	(void)state;
	assert_true(durable_write(fd, "0123456789", 10) > 0);
	assert_int_equal(durable_read(fd, 9, &(char *){ NULL },
				      &(size_t){ 0 }, NULL),
			 -EMSGSIZE);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions_follow_each_other),
		cmocka_unit_test(test_the_file_stays_bounded),
		cmocka_unit_test(test_a_writer_that_died_leaves_the_last_whole_version),
		cmocka_unit_test(test_plain_text_is_replaced),
		cmocka_unit_test(test_bigger_than_asked_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
