// SPDX-License-Identifier: MIT
/*
 * cfgwalk: the baseline of `rdmad --check`. Parses a file with libconfig
 * and visits every setting, reading each scalar's value, then exits.
 * That is the least any checker built on libconfig must do; what rdmad
 * does beyond it (its tables, references, limits) is the difference.
 *
 *   cfgwalk FILE
 *
 * Prints the number of settings and a checksum of what it read (so that
 * nothing can be optimised away); exit status 0, or 1 on a parse error.
 */
#include <libconfig.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct tally {
	unsigned long settings;
	uint64_t sum;
};

static void visit(const config_setting_t *s, struct tally *t)
{
	const char *name = config_setting_name(s);
	const char *str;
	int i, n;

	t->settings++;
	if (name)
		t->sum += strlen(name);
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_GROUP:
	case CONFIG_TYPE_LIST:
	case CONFIG_TYPE_ARRAY:
		n = config_setting_length(s);
		for (i = 0; i < n; i++)
			visit(config_setting_get_elem(s, (unsigned int)i), t);
		break;
	case CONFIG_TYPE_INT:
		t->sum += (uint64_t)config_setting_get_int(s);
		break;
	case CONFIG_TYPE_INT64:
		t->sum += (uint64_t)config_setting_get_int64(s);
		break;
	case CONFIG_TYPE_FLOAT:
		t->sum += (uint64_t)config_setting_get_float(s);
		break;
	case CONFIG_TYPE_BOOL:
		t->sum += (uint64_t)config_setting_get_bool(s);
		break;
	case CONFIG_TYPE_STRING:
		str = config_setting_get_string(s);
		t->sum += str ? strlen(str) : 0;
		break;
	default:
		break;
	}
	/* Where an error message would point. */
	t->sum += (uint64_t)config_setting_source_line(s);
}

int main(int argc, char **argv)
{
	struct tally t = { 0 };
	config_t cfg;

	if (argc != 2) {
		fprintf(stderr, "usage: cfgwalk FILE\n");
		return 2;
	}
	config_init(&cfg);
	if (!config_read_file(&cfg, argv[1])) {
		fprintf(stderr, "%s:%d: %s\n", argv[1], config_error_line(&cfg),
			config_error_text(&cfg));
		config_destroy(&cfg);
		return 1;
	}
	visit(config_root_setting(&cfg), &t);
	printf("%s: %lu settings, checksum %llu\n", argv[1], t.settings,
	       (unsigned long long)t.sum);
	config_destroy(&cfg);
	return 0;
}
