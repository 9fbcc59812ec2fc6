// SPDX-License-Identifier: MIT
/* The log: a line that repeats is written a few times, then counted;
 * bytes that are not printable UTF-8 are escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "log.h"

/* Run fn with stderr going to a file; returns what it wrote. */
static char *capture(void (*fn)(void))
{
	static char buf[16384];
	FILE *f = tmpfile();
	int saved = dup(2);
	size_t n;

	assert_non_null(f);
	fflush(stderr);
	dup2(fileno(f), 2);
	fn();
	log_flush();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void flood(void)
{
	for (int i = 0; i < 1000; i++)
		log_warn(24, "control socket: accept");
	log_info("something else");
}

static void test_repeats_are_counted(void **state)
{
	char *out = capture(flood);

	(void)state;
	assert_int_equal(count(out, "rdmad: control socket: accept: Too many "
				    "open files\n"),
			 3);
	assert_non_null(strstr(out, "rdmad: repeated 997 more times: control "
				    "socket: accept: Too many open files\n"));
	assert_non_null(strstr(out, "rdmad: something else\n"));
}

/* Two floods that alternate are both counted. */
static void interleaved(void)
{
	for (int i = 0; i < 100; i++) {
		log_notice("refused a session of uid 1000");
		log_notice("refused a session of uid 1001");
	}
}

static void test_interleaved_repeats_are_counted(void **state)
{
	char *out = capture(interleaved);

	(void)state;
	assert_int_equal(count(out, "rdmad: refused a session of uid 1000\n"),
			 3);
	assert_int_equal(count(out, "rdmad: refused a session of uid 1001\n"),
			 3);
	assert_non_null(strstr(out, "rdmad: repeated 97 more times: refused a "
				    "session of uid 1000\n"));
	assert_non_null(strstr(out, "rdmad: repeated 97 more times: refused a "
				    "session of uid 1001\n"));
}

static void different(void)
{
	for (int i = 0; i < 10; i++)
		log_info("line %d", i);
	log_info("same");
	log_info("same");
	log_warn(0, "same"); /* another priority: another line */
}

static void test_different_lines_are_all_written(void **state)
{
	char *out = capture(different);

	(void)state;
	assert_int_equal(count(out, "rdmad: line "), 10);
	assert_int_equal(count(out, "rdmad: same\n"), 3);
	assert_null(strstr(out, "repeated"));
}

static void stray_bytes(void)
{
	log_info("GET %s -> 404", "/v1/\xff\xfe\n\xc3\xa9t\xc3\xa9");
}

static void test_stray_bytes_are_escaped(void **state)
{
	char *out = capture(stray_bytes);

	(void)state;
	assert_string_equal(out, "rdmad: GET /v1/\\xff\\xfe\\x0a\xc3\xa9t\xc3\xa9 "
				 "-> 404\n");
}

static void object_line(void)
{
	log_object(LOG_WARNING, 0, "app", "mr", "ring", "profile app: mr ring "
		   "failed: %s", "no memory");
}

/* JOURNAL_STREAM is inherited: naming some other file than our stderr
 * (a shell redirected it), it must not send our lines to the journal. */
static void test_journal_stream_of_another_file_is_ignored(void **state)
{
	char env[64];
	struct stat st;
	char *out;

	(void)state;
	assert_int_equal(stat("/", &st), 0);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", env, 1);
	log_open("rdmad");
	out = capture(object_line);
	unsetenv("JOURNAL_STREAM");
	log_open("rdmad");
	/* On stderr the context fields are left out; the text says it. */
	assert_string_equal(out, "rdmad: profile app: mr ring failed: no "
				 "memory\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_repeats_are_counted),
		cmocka_unit_test(test_interleaved_repeats_are_counted),
		cmocka_unit_test(test_different_lines_are_all_written),
		cmocka_unit_test(test_stray_bytes_are_escaped),
		cmocka_unit_test(test_journal_stream_of_another_file_is_ignored),
	};

	unsetenv("JOURNAL_STREAM"); /* stderr, which the tests read */
	log_open("rdmad");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
