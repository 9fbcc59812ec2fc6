// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the configuration image (config_image.c): the
 * bytes a reload's reading child hands the daemon. Whatever the input,
 * config_from_image() reads within it and frees what it built when it
 * fails; an input that loads makes an image that loads to the same
 * configuration again.
 *
 * The seeds are the images of the seeds of fuzz_config, each made from
 * the configuration that fuzz_config's input of the same name loads.
 */
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config *c = NULL, *again = NULL;
	char *img = NULL;
	size_t len = 0;
	json_t *a, *b;
	int r;

	r = config_from_image(data, size, &c);
	check(r == 0 || r == -EPROTO, "an image fails otherwise");
	if (r < 0)
		return 0;
	check(config_image(c, &img, &len) == 0, "config_image");
	check(config_from_image(img, len, &again) == 0,
	      "the image of a loaded image does not load");
	a = config_json(c);
	b = config_json(again);
	check(a && b && json_equal(a, b),
	      "the image of a loaded image loads to another configuration");
	json_decref(a);
	json_decref(b);
	config_free(again);
	config_free(c);
	free(img);
	return 0;
}
