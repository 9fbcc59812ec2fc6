// SPDX-License-Identifier: MIT
/* Who may see whose processes and PSNs: the rule of view.h, in one
 * place for every route and the event stream. */
#include <string.h>

#include "view.h"

/* Documents are ours and shallow; a bound keeps a walk finite anyway. */
#define VIEW_MAX_DEPTH 16

static const char *const process_keys[] = { "pid", "uid", "gid", "admin",
					    "report" };

/* Is o a record of a process v may not see? */
static bool foreign(const json_t *o, const struct api_viewer *v)
{
	const json_t *uid = json_object_get(o, "uid");

	if (v->admin || (!uid && !json_object_get(o, "pid")))
		return false;
	return !v->has_uid || !json_is_integer(uid) ||
	       json_integer_value(uid) != (json_int_t)v->uid;
}

/* Does j hold anything v may not see? Then (with edit) take it out:
 * hidden says that this object is below a foreign record. */
static bool walk(json_t *j, const struct api_viewer *v, bool edit,
		 bool hidden, int depth)
{
	bool found = false;
	const char *k;
	json_t *x;
	size_t i;

	if (depth > VIEW_MAX_DEPTH)
		return false;
	if (json_is_array(j)) {
		json_array_foreach (j, i, x)
			found |= walk(x, v, edit, hidden, depth + 1);
		return found;
	}
	if (!json_is_object(j))
		return false;
	hidden |= foreign(j, v);
	for (i = 0; i < sizeof(process_keys) / sizeof(process_keys[0]); i++)
		if (hidden && json_object_get(j, process_keys[i])) {
			found = true;
			if (edit)
				json_object_del(j, process_keys[i]);
		}
	if (!v->admin && json_object_get(j, "psn")) {
		found = true;
		if (edit)
			json_object_del(j, "psn");
	}
	json_object_foreach (j, k, x)
		found |= walk(x, v, edit, hidden, depth + 1);
	return found;
}

json_t *api_view(json_t *doc, const struct api_viewer *v)
{
	json_t *copy;

	if (!doc || !walk(doc, v, false, false, 0))
		return doc;
	/* The caller's document may be shared (a cached one): a copy. */
	copy = json_deep_copy(doc);
	json_decref(doc);
	if (copy)
		walk(copy, v, true, false, 0);
	return copy;
}

json_t *api_view_event(const json_t *ev, const struct api_viewer *v)
{
	return api_view(json_incref((json_t *)ev), v);
}
