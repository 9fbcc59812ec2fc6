// SPDX-License-Identifier: MIT
/* Access-right names: see access.h. */
#include <errno.h>
#include <string.h>

#include "access.h"

static const struct {
	const char *name;
	unsigned int flag;
} names[] = {
#define ENTRY(n, f) { n, f },
	PROTO_ACCESS_NAMES(ENTRY)
#undef ENTRY
};

#define N_NAMES (sizeof(names) / sizeof(names[0]))

unsigned int proto_access_flag(const char *name)
{
	for (size_t i = 0; name && i < N_NAMES; i++)
		if (strcmp(names[i].name, name) == 0)
			return names[i].flag;
	return 0;
}

const char *proto_access_name(unsigned int flag)
{
	for (size_t i = 0; i < N_NAMES; i++)
		if (names[i].flag == flag)
			return names[i].name;
	return NULL;
}

unsigned int proto_access_known(void)
{
	unsigned int all = 0;

	for (size_t i = 0; i < N_NAMES; i++)
		all |= names[i].flag;
	return all;
}

json_t *proto_access_json(unsigned int access)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < N_NAMES; i++)
		if ((access & names[i].flag) &&
		    json_array_append_new(a, json_string(names[i].name)) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

int proto_access_parse(const json_t *a, unsigned int *access)
{
	const json_t *v;
	size_t i;

	if (!json_is_array(a))
		return -EINVAL;
	*access = 0;
	json_array_foreach(a, i, v)
	{
		unsigned int f = proto_access_flag(json_string_value(v));

		if (!f)
			return -EINVAL;
		*access |= f;
	}
	return 0;
}
