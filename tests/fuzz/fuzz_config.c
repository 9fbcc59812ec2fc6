// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the configuration: the input becomes files in a
 * temporary directory, loaded through config_load() as rdmad --check
 * does, so that the file reader and the include directory are fuzzed
 * with the parser and the verifier.
 *
 * The input is split at each line "%%": the first part is the main file
 * (rdmad.conf), each further part a file of the include directory "d"
 * (d/00.conf, d/01.conf, ...; a main file reaches them with
 * daemon = { include = "d"; }). A part that starts with "!fifo" becomes
 * a FIFO of that name, one that starts with "!dir" a directory.
 *
 * What must hold: every error names a file and reads as UTF-8, and a
 * configuration without errors dumps (rdmad --dump) to text that reads
 * back to the same configuration, and makes an image (config_image, what
 * a reload's reading child hands the daemon) that loads back to it.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "config.h"
#include "fuzz_util.h"
#include "utf8.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__lsan_default_suppressions(void);

/* libconfig 1.5 leaks what its lexer was reading when a syntax error
 * stops it (a few bytes per failed load, inside the library). */
const char *__lsan_default_suppressions(void)
{
	return "leak:libconfig.so\n";
}

#define MAX_PARTS 8

static char root[64];
static FILE *devnull;

static void write_part(const char *path, const uint8_t *data, size_t len)
{
	int fd;

	if (len >= 5 && !memcmp(data, "!fifo", 5)) {
		check(mkfifo(path, 0600) == 0, "mkfifo");
		return;
	}
	if (len >= 4 && !memcmp(data, "!dir", 4)) {
		check(mkdir(path, 0700) == 0, "mkdir");
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	check(fd >= 0, "open");
	check(write(fd, data, len) == (ssize_t)len, "write");
	close(fd);
}

/* Remove the files of a run. */
static void clean(void)
{
	char path[512];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/rdmad.conf", root);
	if (unlink(path) < 0)
		rmdir(path);
	snprintf(path, sizeof(path), "%s/d", root);
	d = opendir(path);
	check(d != NULL, "opendir");
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/d/%s", root, de->d_name);
		if (unlink(path) < 0)
			rmdir(path);
	}
	closedir(d);
}

static void check_errors(const struct config *c)
{
	for (size_t i = 0; i < c->n_errors; i++) {
		const struct conf_error *e = &c->errors[i];

		check(e->loc.file && e->msg, "an error without file or message");
		check(e->loc.line >= 0, "a negative line");
		check(utf8_valid(e->msg) && utf8_valid(e->loc.file),
		      "an error that is not UTF-8");
		check(strncmp(e->msg, "cannot match the integer values",
			      31),
		      "the literal scanner disagrees with libconfig");
	}
}

/* Has c a secret (a target's token), which --dump only says is set? */
static bool has_secret(const struct config *c)
{
	for (size_t i = 0; i < c->n_profiles; i++)
		for (size_t k = 0; k < c->profiles[i].n_objs[OBJ_TARGET]; k++)
			if (((const struct conf_target *)conf_obj(
				     &c->profiles[i], OBJ_TARGET, k))
				    ->token)
				return true;
	return false;
}

/* --dump reads back to the same configuration; one with a secret shows
 * it as set only (token = true), and so does not read back. */
static void check_dump(const struct config *c)
{
	struct config *again = NULL;
	json_t *a, *b;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	check(f != NULL, "open_memstream");
	check(config_print(c, f) == 0, "config_print");
	check(fclose(f) == 0, "fclose");
	if (has_secret(c)) {
		check(!strstr(text, "token = \""), "the dump shows a token");
		free(text);
		return;
	}
	check(config_load_string("dump", text, &again) == 0, "reload");
	if (again->n_errors) {
		fputs(text, stderr);
		config_print_errors(again, stderr);
		check(false, "the dump does not read back");
	}
	a = config_json(c);
	b = config_json(again);
	check(a && b, "config_json");
	if (!json_equal(a, b)) {
		fputs(text, stderr);
		check(false, "the dump reads back to another configuration");
	}
	/* The reload diff sees the same objects, with the same references. */
	check(c->n_devices == again->n_devices &&
		      c->n_profiles == again->n_profiles,
	      "the dump has other devices or profiles");
	for (size_t i = 0; i < c->n_devices; i++)
		check(conf_device_equal(&c->devices[i], &again->devices[i]),
		      "a device differs after the dump");
	for (size_t i = 0; i < c->n_profiles; i++) {
		const struct conf_profile *pa = &c->profiles[i];
		const struct conf_profile *pb =
			config_profile(again, pa->name);

		check(pb != NULL, "a profile is lost in the dump");
		for (int k = 0; k < OBJ_KIND_MAX; k++) {
			check(pa->n_objs[k] == pb->n_objs[k],
			      "objects are lost in the dump");
			for (size_t n = 0; n < pa->n_objs[k]; n++) {
				const void *oa = conf_obj(pa, k, n);
				const void *ob = conf_obj(pb, k, n);
				struct conf_ref ra[CONF_MAX_REFS];
				struct conf_ref rb[CONF_MAX_REFS];
				size_t na, nb;

				check(conf_obj_equal(k, oa, ob),
				      "an object differs after the dump");
				na = conf_obj_refs(k, oa, ra, CONF_MAX_REFS);
				nb = conf_obj_refs(k, ob, rb, CONF_MAX_REFS);
				check(na == nb, "references differ");
				for (size_t r = 0; r < na; r++)
					check(conf_obj_find(pa, ra[r].kind,
							    ra[r].name) != NULL,
					      "a reference to nothing");
			}
		}
	}
	json_decref(a);
	json_decref(b);
	config_free(again);
	free(text);
}

static bool same_loc(const struct conf_loc *a, const struct conf_loc *b)
{
	return a->line == b->line && (a->file == b->file ||
				      (a->file && b->file &&
				       streq(a->file, b->file)));
}

/* RDMAD_FUZZ_IMAGES=DIR: each image made is also written there, named
 * by its hash. tests/fuzz/run makes fuzz_image's seeds so, from this
 * target's seeds, with the code under test: never of an older format. */
static void write_image(const char *img, size_t len)
{
	const char *dir = getenv("RDMAD_FUZZ_IMAGES");
	char path[4096];
	FILE *f;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/%016llx.img", dir,
		 (unsigned long long)XXH3_64bits(img, len));
	f = fopen(path, "wbe");
	check(f && fwrite(img, 1, len, f) == len && fclose(f) == 0,
	      "writing an image to RDMAD_FUZZ_IMAGES");
}

/* The image a reading child hands the daemon (validate.c) loads back to
 * the same configuration, locations, files read and warnings included;
 * cut anywhere, it loads to nothing. */
static void check_image(const struct config *c)
{
	struct config *again = NULL, *cut = NULL;
	char *img = NULL;
	size_t len = 0;
	json_t *a, *b;

	check(config_image(c, &img, &len) == 0, "config_image");
	write_image(img, len);
	check(config_from_image(img, len, &again) == 0,
	      "an image does not load");
	a = config_json(c);
	b = config_json(again);
	check(a && b && json_equal(a, b),
	      "an image loads to another configuration");
	json_decref(a);
	json_decref(b);
	check(streq(c->path, again->path), "the image's path");
	check(c->n_sources == again->n_sources, "the image's sources");
	for (size_t i = 0; i < c->n_sources; i++) {
		const struct conf_source *x = &c->sources[i];
		const struct conf_source *y = &again->sources[i];

		check(streq(x->path, y->path) && x->dev == y->dev &&
			      x->ino == y->ino && x->size == y->size &&
			      x->mode == y->mode &&
			      !memcmp(&x->mtime, &y->mtime, sizeof(x->mtime)) &&
			      !memcmp(&x->ctime, &y->ctime, sizeof(x->ctime)) &&
			      !memcmp(x->digest, y->digest, sizeof(x->digest)),
		      "a source differs in the image");
	}
	check(config_sources_unchanged(c) == config_sources_unchanged(again),
	      "the image's sources look otherwise");
	check(c->n_warnings == again->n_warnings, "the image's warnings");
	for (size_t i = 0; i < c->n_warnings; i++)
		check(streq(c->warnings[i].msg, again->warnings[i].msg) &&
			      same_loc(&c->warnings[i].loc,
				       &again->warnings[i].loc),
		      "a warning differs in the image");
	check(same_loc(&c->daemon.listen_loc, &again->daemon.listen_loc) &&
		      same_loc(&c->daemon.http_loc, &again->daemon.http_loc),
	      "the daemon's locations differ in the image");
	check(c->n_devices == again->n_devices &&
		      c->n_profiles == again->n_profiles,
	      "the image has other devices or profiles");
	for (size_t i = 0; i < c->n_devices; i++)
		check(conf_device_equal(&c->devices[i], &again->devices[i]) &&
			      same_loc(&c->devices[i].loc,
				       &again->devices[i].loc) &&
			      config_device(again, c->devices[i].name) ==
				      &again->devices[i],
		      "a device differs in the image");
	for (size_t i = 0; i < c->n_profiles; i++) {
		const struct conf_profile *pa = &c->profiles[i];
		const struct conf_profile *pb = &again->profiles[i];

		check(config_profile(again, pa->name) == pb &&
			      same_loc(&pa->loc, &pb->loc),
		      "a profile differs in the image");
		for (int k = 0; k < OBJ_KIND_MAX; k++) {
			check(pa->n_objs[k] == pb->n_objs[k],
			      "objects are lost in the image");
			for (size_t n = 0; n < pa->n_objs[k]; n++) {
				const void *oa = conf_obj(pa, k, n);
				const void *ob = conf_obj(pb, k, n);

				check(conf_obj_equal(k, oa, ob) &&
					      same_loc(oa, ob) &&
					      conf_obj_find(pb, k,
							    conf_obj_name(oa)) ==
						      ob,
				      "an object differs in the image");
			}
		}
	}
	config_free(again);
	/* Cut short: the last 16 bytes one by one, and 32 cuts before. */
	for (size_t i = 1; i <= len && i <= 48; i++) {
		size_t at = i <= 16 ? len - i : (len / 33) * (i - 16);

		check(config_from_image(img, at, &cut) == -EPROTO,
		      "a cut image loads");
	}
	free(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *part = data, *end = data + size;
	struct config *c = NULL;
	char path[512];
	int n = 0;

	if (!root[0]) {
		snprintf(root, sizeof(root), "/dev/shm/fuzz_config-XXXXXX");
		if (!mkdtemp(root)) {
			snprintf(root, sizeof(root), "/tmp/fuzz_config-XXXXXX");
			check(mkdtemp(root) != NULL, "mkdtemp");
		}
		snprintf(path, sizeof(path), "%s/d", root);
		check(mkdir(path, 0700) == 0, "mkdir d");
		devnull = fopen("/dev/null", "w");
		check(devnull != NULL, "/dev/null");
	}
	while (part <= end && n <= MAX_PARTS) {
		const uint8_t *sep = part;
		size_t len;

		/* The next "\n%%\n" (or "%%\n" at the start of a part). */
		for (sep = part; sep + 3 <= end; sep++)
			if (sep[0] == '%' && sep[1] == '%' && sep[2] == '\n' &&
			    (sep == part || sep[-1] == '\n'))
				break;
		if (sep + 3 > end)
			sep = end;
		len = (size_t)(sep - part);
		if (n == 0)
			snprintf(path, sizeof(path), "%s/rdmad.conf", root);
		else
			snprintf(path, sizeof(path), "%s/d/%02d.conf", root,
				 n - 1);
		write_part(path, part, len);
		n++;
		if (sep == end)
			break;
		part = sep + 3;
	}
	snprintf(path, sizeof(path), "%s/rdmad.conf", root);
	check(config_load(path, &c) == 0, "config_load");
	check_errors(c);
	config_print_errors(c, devnull);
	if (!c->n_errors) {
		check_dump(c);
		check_image(c);
	}
	config_free(c);
	clean();
	return 0;
}
