// SPDX-License-Identifier: MIT
/* rdmactl: the names in a list of objects, on one line (devprint.h). */
#include <stdio.h>

#include "devprint.h"

int devprint_names(char *buf, size_t len, const char *key, json_t *a)
{
	size_t used = 0;
	json_t *o;
	size_t i;

	json_array_foreach (a, i, o) {
		const char *name = json_string_value(json_object_get(o, "name"));
		int n = snprintf(buf + used, len - used, "%s%s", i ? "," : " ",
				 i ? "" : key);

		if (n < 0 || (size_t)n >= len - used)
			return (int)used;
		used += (size_t)n;
		n = snprintf(buf + used, len - used, "%s%s", i ? "" : "=",
			     name ? name : "?");
		if (n < 0 || (size_t)n >= len - used)
			return (int)used;
		used += (size_t)n;
	}
	return (int)used;
}
