// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "made.h"

static const char *const kind_names[PROTO_MADE_KINDS] = {
	[PROTO_MADE_QP] = "qp",
	[PROTO_MADE_CQ] = "cq",
	[PROTO_MADE_SRQ] = "srq",
};

const char *proto_made_kind_name(enum proto_made_kind k)
{
	return k < PROTO_MADE_KINDS ? kind_names[k] : "?";
}

static int kind_of(const json_t *v, enum proto_made_kind *k)
{
	const char *s = json_string_value(v);

	for (int i = 0; s && i < PROTO_MADE_KINDS; i++)
		if (!strcmp(s, kind_names[i])) {
			*k = (enum proto_made_kind)i;
			return 0;
		}
	return -EINVAL;
}

/* An integer in [0, max]. */
static int uint_of(const json_t *v, uint64_t max, uint32_t *out)
{
	json_int_t n;

	if (!json_is_integer(v))
		return -EINVAL;
	n = json_integer_value(v);
	if (n < 0 || (uint64_t)n > max)
		return -EINVAL;
	*out = (uint32_t)n;
	return 0;
}

static int obj_decode(const json_t *j, bool undo, struct proto_made_obj *o)
{
	const char *key;
	const json_t *v;
	bool has_kind = false, has_handle = false, has_qpn = false;

	if (!json_is_object(j))
		return -EINVAL;
	*o = (struct proto_made_obj){ 0 };
	json_object_foreach((json_t *)j, key, v)
	{
		int r;

		if (!strcmp(key, "kind")) {
			r = kind_of(v, &o->kind);
			has_kind = true;
		} else if (!strcmp(key, "handle")) {
			r = uint_of(v, UINT32_MAX, &o->handle);
			has_handle = true;
		} else if (!strcmp(key, "qp_num")) {
			r = uint_of(v, 0xffffff, &o->qp_num);
			has_qpn = true;
		} else {
			r = -EINVAL;
		}
		if (r < 0)
			return r;
	}
	if (!has_kind || !has_handle)
		return -EINVAL;
	if (has_qpn && o->kind != PROTO_MADE_QP)
		return -EINVAL;
	/* What is said made is checked by its number; an undo needs none. */
	if (o->kind == PROTO_MADE_QP && !has_qpn && !undo)
		return -EINVAL;
	return 0;
}

int proto_made_decode(const json_t *payload, struct proto_made *out)
{
	const json_t *att, *undo, *made, *v;
	const char *key;
	size_t i;
	int r;

	*out = (struct proto_made){ 0 };
	if (!json_is_object(payload))
		return -EINVAL;
	json_object_foreach((json_t *)payload, key, v)
		if (strcmp(key, "attachment") && strcmp(key, "undo") &&
		    strcmp(key, "made"))
			return -EINVAL;
	att = json_object_get(payload, "attachment");
	undo = json_object_get(payload, "undo");
	made = json_object_get(payload, "made");
	if (uint_of(att, UINT32_MAX, &out->attachment) < 0 ||
	    (undo && !json_is_boolean(undo)) || !json_is_array(made))
		return -EINVAL;
	out->undo = json_is_true(undo);
	if (json_array_size(made) > PROTO_MADE_MAX)
		return -E2BIG;
	out->objs = calloc(json_array_size(made) + 1, sizeof(*out->objs));
	if (!out->objs)
		return -ENOMEM;
	json_array_foreach(made, i, v)
	{
		r = obj_decode(v, out->undo, &out->objs[i]);
		if (r < 0) {
			proto_made_clear(out);
			return r;
		}
		out->n_objs++;
	}
	return 0;
}

void proto_made_clear(struct proto_made *m)
{
	free(m->objs);
	*m = (struct proto_made){ 0 };
}

json_t *proto_made_encode(uint32_t attachment, bool undo,
			  const struct proto_made_obj *objs, size_t n)
{
	json_t *a = json_array(), *j;

	for (size_t i = 0; a && i < n; i++) {
		json_t *o = json_pack("{s:s, s:I}", "kind",
				      proto_made_kind_name(objs[i].kind),
				      "handle", (json_int_t)objs[i].handle);

		if (o && objs[i].kind == PROTO_MADE_QP)
			json_object_set_new(o, "qp_num",
					    json_integer(objs[i].qp_num));
		if (!o || json_array_append_new(a, o) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	if (!a)
		return NULL;
	j = json_pack("{s:I, s:o}", "attachment", (json_int_t)attachment,
		      "made", a);
	if (j && undo)
		json_object_set_new(j, "undo", json_true());
	return j;
}
