// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <stdio.h>

#include "profprint.h"
#include "progress.h"
#include "util.h"

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	/* Never empty: a last column must not end a line in a space. */
	return s && *s ? s : "-";
}

void print_profiles(json_t *a)
{
	char progress[96];
	size_t i;
	json_t *p;

	printf("%-16s %-12s %-8s %-9s %s\n", "PROFILE", "DEVICE", "IBDEV",
	       "STATE", "OBJECTS");
	json_array_foreach (a, i, p)
		printf("%-16s %-12s %-8s %-9s %lld%s\n", str(p, "name"),
		       str(p, "device"), str(p, "ibdev"), str(p, "state"),
		       json_integer_value(json_object_get(p, "objects")),
		       progress_text(p, progress, sizeof(progress)));
}

/* " key=NAME,NAME" of the "name"s of the objects of array a, into buf
 * (at most len bytes, NUL included): the length written. */
static int names_text(char *buf, size_t len, const char *key, json_t *a)
{
	size_t used = 0, i;
	json_t *o;

	json_array_foreach (a, i, o) {
		const char *name = json_string_value(json_object_get(o, "name"));
		int n = snprintf(buf + used, len - used, "%s%s%s%s",
				 i ? "," : " ", i ? "" : key, i ? "" : "=",
				 name ? name : "?");

		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
	return (int)used;
}

/*
 * One line of details per object: the keys that matter for its kind.
 * Keys and addresses in hex, as `rdma resource show mr` and the ibv
 * tools print them; QP numbers in decimal, as `rdma resource show qp`
 * prints lqpn and rqpn (the kernel's view that one compares with).
 */
void print_object_line(json_t *o)
{
	static const struct {
		const char *key;
		bool hex;
	} keys[] = {
		{ "handle", false },  { "size", false },     { "backing", false },
		{ "lkey", true },     { "rkey", true },	     { "length", false },
		{ "iova", true },     { "qp_num", false },   { "qp_state", false },
		{ "cqe", false },     { "errno", false },    { "reason", false },
		{ "group", false },   { "join_state", false }, { "qps", false },
	};
	char details[1024];
	size_t len = 0;

	details[0] = '\0';
	for (size_t k = 0; k < ARRAY_SIZE(keys) && len < sizeof(details); k++) {
		json_t *v = json_object_get(o, keys[k].key);
		int n = 0;

		if (json_is_integer(v) && keys[k].hex)
			n = snprintf(details + len, sizeof(details) - len,
				     " %s=0x%llx", keys[k].key,
				     (unsigned long long)json_integer_value(v));
		else if (json_is_integer(v))
			n = snprintf(details + len, sizeof(details) - len,
				     " %s=%lld", keys[k].key,
				     (long long)json_integer_value(v));
		else if (json_is_array(v)) /* a group's QPs: their names */
			n = names_text(details + len, sizeof(details) - len,
				       keys[k].key, v);
		else if (json_is_string(v))
			n = snprintf(details + len, sizeof(details) - len,
				     " %s=%s", keys[k].key,
				     json_string_value(v));
		if (n > 0)
			len += (size_t)n;
	}
	/* The state column is padded only when details follow it. */
	printf("%-7s %-16s %-*s%s\n", str(o, "kind"), str(o, "name"),
	       details[0] ? 8 : 0, str(o, "state"), details);
}

/* A profile's line and its objects (of kind only, when not NULL). */
void print_profile_kind(json_t *p, const char *kind)
{
	char progress[96];
	size_t i;
	json_t *o;

	printf("profile %s on %s (%s port %lld): %s%s%s%s\n", str(p, "name"),
	       str(p, "device"), str(p, "ibdev"),
	       json_integer_value(json_object_get(p, "port")), str(p, "state"),
	       progress_text(p, progress, sizeof(progress)),
	       json_object_get(p, "reason") ? ": " : "",
	       json_object_get(p, "reason") ? str(p, "reason") : "");
	printf("%-7s %-16s %-8s %s\n", "KIND", "NAME", "STATE", "DETAILS");
	json_array_foreach (json_object_get(p, "objects"), i, o)
		if (!kind || streq(kind, str(o, "kind")))
			print_object_line(o);
}

void print_profile(json_t *p)
{
	print_profile_kind(p, NULL);
}
