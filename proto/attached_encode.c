// SPDX-License-Identifier: MIT
/*
 * ATTACHED's encoder and free: the same walk over the field tables as
 * the decoder (attached_fields.c), the other way.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "attached_internal.h"

/* A GID as the daemon writes one: eight groups of four hex digits. */
static json_t *gid_json(const uint8_t g[16])
{
	char text[40];

	snprintf(text, sizeof(text),
		 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
		 "%02x%02x:%02x%02x",
		 g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9],
		 g[10], g[11], g[12], g[13], g[14], g[15]);
	return json_string(text);
}

static json_t *encode_struct(const struct att_struct *s, const void *base,
			     unsigned int flags);

static json_t *encode_list(const struct att_field *f, const void *base,
			   unsigned int flags)
{
	const char *items = *(char *const *)ATT_AT(base, f);
	size_t n = *(const size_t *)((const char *)base + f->count_off);
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, encode_struct(f->sub,
							   items + i * f->sub->size,
							   flags)) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* The field's value, NULL when it is left out (absent; or out of
 * memory, told apart by the caller: *oom). */
static json_t *encode_field(const struct att_field *f, const void *base,
			    unsigned int flags, bool *oom)
{
	const void *at = ATT_AT(base, f);
	json_t *v = NULL;

	if (f->has && !*(const bool *)((const char *)base + f->has - 1))
		return NULL;
	switch (f->type) {
	case AT_STR:
		if (!*(char *const *)at)
			return NULL;
		v = json_string(*(char *const *)at);
		break;
	case AT_U64:
	case AT_FD:
		v = json_integer((json_int_t) * (const uint64_t *)at);
		break;
	case AT_BOOL:
		v = json_boolean(*(const bool *)at);
		break;
	case AT_ACCESS:
		v = proto_access_json(*(const unsigned int *)at);
		break;
	case AT_GID:
		v = gid_json(at);
		break;
	case AT_MODE:
		v = json_string(*(const enum proto_attach_mode *)at ==
						PROTO_ATTACH_SHARED
					? "shared"
					: "local");
		break;
	case AT_OBJ:
		v = encode_struct(f->sub, at, flags);
		break;
	case AT_LIST:
		/* An empty list is left out: read as empty. */
		if (!*(const size_t *)((const char *)base + f->count_off))
			return NULL;
		v = encode_list(f, base, flags);
		break;
	}
	*oom = !v;
	return v;
}

static json_t *encode_struct(const struct att_struct *s, const void *base,
			     unsigned int flags)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < s->n_fields; i++) {
		const struct att_field *f = &s->fields[i];
		bool oom = false;
		json_t *v;

		if (s == &att_top && (flags & PROTO_ATTACHED_NO_ID) &&
		    strcmp(f->key, "attachment") == 0)
			continue;
		v = encode_field(f, base, flags, &oom);
		if (oom || (v && json_object_set_new(o, f->key, v) < 0)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

int proto_attached_to_json(const struct proto_attached *a, unsigned int flags,
			   json_t **out)
{
	if (a->mode != PROTO_ATTACH_SHARED && a->mode != PROTO_ATTACH_LOCAL)
		return -EINVAL;
	*out = encode_struct(&att_top, a, flags);
	return *out ? 0 : -ENOMEM;
}

int proto_attached_encode(const struct proto_attached *a, unsigned int flags,
			  char **text, size_t *len)
{
	json_t *doc;
	int r = proto_attached_to_json(a, flags, &doc);

	if (r < 0)
		return r;
	/* Keys in the order set: "attachment" first, as the daemon's
	 * prefix and librdmad's reuse of a document expect. */
	*text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(doc);
	if (!*text)
		return -ENOMEM;
	*len = strlen(*text);
	return 0;
}

/* ---- free ---- */

static void free_struct(const struct att_struct *s, void *base)
{
	for (size_t i = 0; i < s->n_fields; i++) {
		const struct att_field *f = &s->fields[i];
		void *at = ATT_AT(base, f);

		if (f->type == AT_STR) {
			free(*(char **)at);
		} else if (f->type == AT_OBJ) {
			free_struct(f->sub, at);
		} else if (f->type == AT_LIST) {
			char *items = *(char **)at;
			size_t n = *(size_t *)((char *)base + f->count_off);

			for (size_t k = 0; items && k < n; k++)
				free_struct(f->sub, items + k * f->sub->size);
			free(items);
		}
	}
}

void proto_attached_free(struct proto_attached *a)
{
	if (!a)
		return;
	free_struct(&att_top, a);
	memset(a, 0, sizeof(*a));
}
