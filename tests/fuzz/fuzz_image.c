// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the configuration image (config_image.c): the
 * bytes a reload's reading child hands the daemon. Whatever the input,
 * config_from_image() reads within it and frees what it built when it
 * fails; an input that loads makes an image that loads to the same
 * configuration again.
 *
 * The same bytes as the configuration a previous run left in the fd
 * store (config_load_kept(): a header, then an image) are refused
 * cleanly or loaded; and what an input that loads keeps for a restart
 * (config_keep()) is taken back as the same configuration, or refused
 * as stale when its files are not those on this disk.
 *
 * The seeds are the images of fuzz_config's seeds: made by the code
 * under test at each run (tests/fuzz/run), and committed for the replay
 * in the unit tests (make fuzz-image-seeds; test_config_kept checks
 * that they still load).
 */
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* x and y say the same (config_json()). */
static bool same_config(const struct config *x, const struct config *y)
{
	json_t *a = config_json(x), *b = config_json(y);
	bool same = a && b && json_equal(a, b);

	json_decref(a);
	json_decref(b);
	return same;
}

/* What the fd store gave: any bytes are refused cleanly, or loaded. */
static void load_kept_bytes(const uint8_t *data, size_t size)
{
	struct config *k = NULL;
	int r = config_load_kept("/nonexistent/rdmad.conf", data, size, &k);

	check(r == 0 || r == -EPROTO || r == -ESTALE,
	      "kept bytes fail otherwise");
	check((r == 0) == (k != NULL), "kept bytes: a result and an error");
	config_free(k);
}

/* c kept for a restart comes back as c, or stale (its files are gone). */
static void keep_and_take_back(const struct config *c)
{
	struct config *k = NULL;
	char *buf = NULL;
	size_t len = 0;
	int r = config_keep(c, &buf, &len);

	check(r == 0 || r == -ENOTSUP, "config_keep");
	if (r < 0)
		return; /* a build without an ID keeps nothing */
	r = config_load_kept(c->path, buf, len, &k);
	check(r == 0 || r == -ESTALE, "what config_keep() made is refused");
	check(r != 0 || same_config(c, k),
	      "a kept configuration comes back as another");
	/* Every cut of it is refused cleanly. */
	for (size_t cut = 0; cut < len; cut += 1 + len / 64)
		load_kept_bytes((const uint8_t *)buf, cut);
	config_free(k);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config *c = NULL, *again = NULL;
	char *img = NULL;
	size_t len = 0;
	int r;

	load_kept_bytes(data, size);
	r = config_from_image(data, size, &c);
	check(r == 0 || r == -EPROTO, "an image fails otherwise");
	if (r < 0)
		return 0;
	check(config_image(c, &img, &len) == 0, "config_image");
	check(config_from_image(img, len, &again) == 0,
	      "the image of a loaded image does not load");
	check(same_config(c, again),
	      "the image of a loaded image loads to another configuration");
	keep_and_take_back(c);
	config_free(again);
	config_free(c);
	free(img);
	return 0;
}
