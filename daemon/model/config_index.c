// SPDX-License-Identifier: MIT
/*
 * Name indexes: devices, profiles, and each kind of object of a profile,
 * by name, so that a lookup costs the same in a file of ten objects and
 * in one of a hundred thousand. The verify pass builds them, once the
 * arrays no longer move, and finds duplicate names as it does.
 */
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

/* An allocation failure while adding fails that add, not the process. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (oom = true)
#include <uthash.h>

struct conf_name {
	const void *obj;
	UT_hash_handle hh; /* keyed by the object's own name string */
};

struct conf_names {
	struct conf_name *head;
	size_t n, cap;
	struct conf_name entry[];
};

struct conf_names *conf_names_new(size_t cap)
{
	struct conf_names *ix;

	ix = calloc(1, sizeof(*ix) + cap * sizeof(ix->entry[0]));
	if (ix)
		ix->cap = cap;
	return ix;
}

int conf_names_add(struct conf_names *ix, const void *obj, const void **first)
{
	const char *name = conf_obj_name(obj);
	struct conf_name *e;
	bool oom = false;
	size_t len;

	if (!name)
		return 0;
	len = strlen(name);
	HASH_FIND(hh, ix->head, name, len, e);
	if (e) {
		*first = e->obj;
		return -EEXIST;
	}
	if (ix->n == ix->cap)
		return -ENOSPC;
	e = &ix->entry[ix->n];
	e->obj = obj;
	HASH_ADD_KEYPTR(hh, ix->head, name, len, e);
	if (oom)
		return -ENOMEM;
	ix->n++;
	return 0;
}

const void *conf_names_find(const struct conf_names *ix, const char *name)
{
	struct conf_name *e;

	HASH_FIND(hh, ix->head, name, strlen(name), e);
	return e ? e->obj : NULL;
}

struct conf_names *conf_names_free(struct conf_names *ix)
{
	if (!ix)
		return NULL;
	HASH_CLEAR(hh, ix->head);
	free(ix);
	return NULL;
}

/* The first of n objects of size bytes named name: for a config built by
 * hand, without indexes. */
static const void *scan(const void *arr, size_t n, size_t size,
			const char *name)
{
	for (size_t i = 0; i < n; i++) {
		const void *o = (const char *)arr + i * size;

		if (conf_obj_name(o) && streq(conf_obj_name(o), name))
			return o;
	}
	return NULL;
}

const void *conf_obj_find(const struct conf_profile *p, enum obj_kind k,
			  const char *name)
{
	if (!name)
		return NULL;
	if (p->names[k])
		return conf_names_find(p->names[k], name);
	return scan(p->objs[k], p->n_objs[k], conf_kinds[k].size, name);
}

const struct conf_device *config_device(const struct config *c,
					const char *name)
{
	if (!name)
		return NULL;
	if (c->device_names)
		return conf_names_find(c->device_names, name);
	return scan(c->devices, c->n_devices, sizeof(*c->devices), name);
}

const struct conf_profile *config_profile(const struct config *c,
					  const char *name)
{
	if (!name)
		return NULL;
	if (c->profile_names)
		return conf_names_find(c->profile_names, name);
	return scan(c->profiles, c->n_profiles, sizeof(*c->profiles), name);
}
