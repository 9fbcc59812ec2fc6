// SPDX-License-Identifier: MIT
/*
 * The configuration kept across a restart (config_keep(),
 * config_load_kept()): taken back only by the same binary, for the same
 * main file, while every file it was read from has the same bytes; the
 * configuration then is the one the files give.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "util.h"

#define MAIN_TEXT                                                              \
	"daemon = { include = \"profiles.d\"; };\n"                            \
	"devices = ( { name = \"d\"; match = { ibdev = \"rxe0\"; }; } );\n"

struct tree {
	char dir[32], main_path[96], inc[96], a[128], b[128], c[128];
};

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void tree_make(struct tree *t)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/rdmad-kept-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->main_path, sizeof(t->main_path), "%s/rdmad.conf", t->dir);
	snprintf(t->inc, sizeof(t->inc), "%s/profiles.d", t->dir);
	snprintf(t->a, sizeof(t->a), "%s/10-a.conf", t->inc);
	snprintf(t->b, sizeof(t->b), "%s/20-b.conf", t->inc);
	snprintf(t->c, sizeof(t->c), "%s/30-c.conf", t->inc);
	assert_int_equal(mkdir(t->inc, 0700), 0);
	write_file(t->main_path, MAIN_TEXT);
	write_file(t->a, "profiles = ( { name = \"pa\"; device = \"d\";\n"
			 "  memory = ( { name = \"m\"; size = \"1M\"; } );\n"
			 "  pd = ( { name = \"p0\"; } );\n"
			 "  mr = ( { name = \"r\"; pd = \"p0\"; memory = \"m\";"
			 " access = [ \"remote_read\" ]; } );\n"
			 "  cq = ( { name = \"c\"; cqe = 100; } ); } );\n");
	write_file(t->b, "profiles = ( { name = \"pb\"; device = \"d\"; } );\n");
}

static void tree_free(struct tree *t)
{
	unlink(t->a);
	unlink(t->b);
	unlink(t->c);
	rmdir(t->inc);
	unlink(t->main_path);
	rmdir(t->dir);
}

/* What config_print() says of c: the whole effective configuration. */
static char *printed(const struct config *c)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	assert_int_equal(config_print(c, f), 0);
	assert_int_equal(fclose(f), 0);
	return text;
}

/* The files as they were: the same configuration, not parsed. A file
 * touched but with the same bytes is the same file. */
static void test_same_files(void **state)
{
	struct timespec later[2] = { { 0, UTIME_OMIT }, { 1, 0 } };
	struct config *cfg = NULL, *back = NULL;
	char *kept = NULL, *want, *got;
	struct tree t;
	size_t len = 0;

	(void)state;
	tree_make(&t);
	assert_int_equal(config_load(t.main_path, &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(config_keep(cfg, &kept, &len), 0);
	assert_int_equal(config_load_kept(t.main_path, kept, len, &back), 0);
	want = printed(cfg);
	got = printed(back);
	assert_string_equal(got, want);
	assert_int_equal(back->n_profiles, 2);
	assert_int_equal(back->n_sources, cfg->n_sources);
	config_free(back);
	free(got);

	assert_int_equal(utimensat(AT_FDCWD, t.a, later, 0), 0);
	assert_int_equal(config_load_kept(t.main_path, kept, len, &back), 0);
	got = printed(back);
	assert_string_equal(got, want);
	config_free(back);
	free(got);
	free(want);
	free(kept);
	config_free(cfg);
	tree_free(&t);
}

/* Any other source: -ESTALE, nothing made; the caller parses. */
static void test_changed_files(void **state)
{
	struct config *cfg = NULL, *back = NULL;
	char *kept = NULL;
	struct tree t;
	size_t len = 0;

	(void)state;
	tree_make(&t);
	assert_int_equal(config_load(t.main_path, &cfg), 0);
	assert_int_equal(config_keep(cfg, &kept, &len), 0);

	/* Other bytes of the same length in an included file. */
	write_file(t.b, "profiles = ( { name = \"pB\"; device = \"d\"; } );\n");
	assert_int_equal(config_load_kept(t.main_path, kept, len, &back),
			 -ESTALE);
	assert_null(back);
	write_file(t.b, "profiles = ( { name = \"pb\"; device = \"d\"; } );\n");
	assert_int_equal(config_load_kept(t.main_path, kept, len, &back), 0);
	config_free(back);
	back = NULL;

	/* A file added to the include directory, then one gone. */
	write_file(t.c, "profiles = ( { name = \"pc\"; device = \"d\"; } );\n");
	assert_int_equal(config_load_kept(t.main_path, kept, len, &back),
			 -ESTALE);
	unlink(t.c);
	unlink(t.b);
	assert_int_equal(config_load_kept(t.main_path, kept, len, &back),
			 -ESTALE);
	write_file(t.b, "profiles = ( { name = \"pb\"; device = \"d\"; } );\n");

	/* The main file, changed; then another main file with the same
	 * bytes (an image names the file it is of). */
	write_file(t.main_path, MAIN_TEXT "# a comment\n");
	assert_int_equal(config_load_kept(t.main_path, kept, len, &back),
			 -ESTALE);
	write_file(t.main_path, MAIN_TEXT);
	assert_int_equal(config_load_kept("rdmad.conf", kept, len, &back),
			 -ESTALE);
	/* A directory where the main file was. */
	unlink(t.main_path);
	assert_int_equal(mkdir(t.main_path, 0700), 0);
	assert_int_equal(config_load_kept(t.main_path, kept, len, &back),
			 -ESTALE);
	assert_null(back);
	rmdir(t.main_path);
	free(kept);
	config_free(cfg);
	tree_free(&t);
}

/* Another build's bytes are not taken (it may parse otherwise), and
 * bytes that are not a kept configuration are refused, at any length. */
static void test_other_bytes(void **state)
{
	struct config *cfg = NULL, *back = NULL, *bad = NULL;
	char *kept = NULL, *junk;
	struct tree t;
	size_t len = 0, magic;

	(void)state;
	tree_make(&t);
	assert_int_equal(config_load(t.main_path, &cfg), 0);
	assert_int_equal(config_keep(cfg, &kept, &len), 0);
	magic = strlen(kept) + 1;
	assert_true(len > magic + 1 + (unsigned char)kept[magic]);

	/* Another build ID (its last byte). */
	kept[magic + (unsigned char)kept[magic]] ^= 1;
	assert_int_equal(config_load_kept(t.main_path, kept, len, &back),
			 -ESTALE);
	kept[magic + (unsigned char)kept[magic]] ^= 1;
	/* Every cut is refused (or, cut in the image, is not an image). */
	for (size_t n = 0; n < len; n++) {
		int r = config_load_kept(t.main_path, kept, n, &back);

		assert_true(r == -EPROTO || r == -ENOMEM);
		assert_null(back);
	}
	junk = strdup("rdmad-config-kept-1");
	assert_int_equal(config_load_kept(t.main_path, junk, strlen(junk),
					  &back),
			 -EPROTO);
	free(junk);

	/* A configuration with errors is not kept. */
	assert_int_equal(config_load_string("x", "profiles = 1;\n", &bad), 0);
	assert_true(bad->n_errors > 0);
	assert_int_equal(config_keep(bad, &junk, &len), -EINVAL);
	config_free(bad);
	free(kept);
	config_free(cfg);
	tree_free(&t);
}

/* fuzz_image's committed seeds are images this code loads: else its
 * replay (make unit) and its first inputs only try the refusal. */
static void test_fuzz_seeds_load(void **state)
{
	const char *dir = "tests/fuzz/fuzz_image";
	struct dirent *e;
	size_t loaded = 0;
	DIR *d = opendir(dir);

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		struct config *c = NULL;
		char path[512], *img = NULL;
		size_t len = 0;
		size_t n = strlen(e->d_name);

		if (n < 4 || strcmp(e->d_name + n - 4, ".img"))
			continue;
		int fd;

		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(read_all(fd, 1 << 20, -1, &img, &len), 0);
		close(fd);
		if (config_from_image(img, len, &c) != 0)
			fail_msg("%s does not load: the image's format changed; "
				 "make fuzz-image-seeds makes them again", path);
		config_free(c);
		free(img);
		loaded++;
	}
	closedir(d);
	assert_true(loaded > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_files),
		cmocka_unit_test(test_changed_files),
		cmocka_unit_test(test_other_bytes),
		cmocka_unit_test(test_fuzz_seeds_load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
