// SPDX-License-Identifier: MIT
/*
 * The fuzz targets as unit tests (make unit, make check): every file of
 * tests/fuzz/<target>/ (the seeds, and each input that once crashed,
 * kept as a regression test) run once through the target, under ASan
 * and UBSan, without libFuzzer. Built once per target with FUZZ_TARGET
 * set to its name.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void replay(void **state)
{
	const char *path = *state;
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long len;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	assert_true(len >= 0);
	rewind(f);
	buf = malloc((size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
}

static int cmp_test(const void *a, const void *b)
{
	return strcmp(((const struct CMUnitTest *)a)->name,
		      ((const struct CMUnitTest *)b)->name);
}

int main(void)
{
	const char *dir = "tests/fuzz/" FUZZ_TARGET;
	struct CMUnitTest *tests = NULL;
	struct dirent *de;
	size_t n = 0;
	DIR *d = opendir(dir);

	if (!d) {
		perror(dir);
		return 1;
	}
	while ((de = readdir(d))) {
		char *path;

		if (de->d_name[0] == '.')
			continue;
		tests = realloc(tests, (n + 1) * sizeof(*tests));
		if (!tests || asprintf(&path, "%s/%s", dir, de->d_name) < 0)
			return 1;
		tests[n++] = (struct CMUnitTest){ .name = path,
						  .test_func = replay,
						  .initial_state = path };
	}
	closedir(d);
	qsort(tests, n, sizeof(*tests), cmp_test);
	return _cmocka_run_group_tests(FUZZ_TARGET, tests, n, NULL, NULL);
}
