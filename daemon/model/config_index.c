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

#include "nameidx.h"

/* Positions into one array of objects that begin with loc and name. */
struct conf_names {
	const char *base;
	size_t size;
	struct nameidx ix;
};

struct conf_names *conf_names_new(const void *base, size_t size, size_t cap)
{
	struct conf_names *ix = calloc(1, sizeof(*ix));

	if (!ix)
		return NULL;
	if (nameidx_init(&ix->ix, cap) < 0) {
		free(ix);
		return NULL;
	}
	ix->base = base;
	ix->size = size;
	return ix;
}

static bool name_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct conf_names *ix = ctx;

	return streq(conf_obj_name(ix->base + i * ix->size), key);
}

int conf_names_add(struct conf_names *ix, const void *obj, const void **first)
{
	const char *name = conf_obj_name(obj);
	uint32_t h, at;
	size_t i;

	if (!name)
		return 0;
	h = nameidx_hash(name, 0);
	at = nameidx_find(&ix->ix, h, name_eq, ix, name);
	if (at != NAMEIDX_NONE) {
		*first = ix->base + at * ix->size;
		return -EEXIST;
	}
	i = (size_t)((const char *)obj - ix->base) / ix->size;
	return nameidx_add(&ix->ix, h, (uint32_t)i);
}

const void *conf_names_find(const struct conf_names *ix, const char *name)
{
	uint32_t at = nameidx_find(&ix->ix, nameidx_hash(name, 0), name_eq, ix,
				   name);

	return at == NAMEIDX_NONE ? NULL : ix->base + at * ix->size;
}

struct conf_names *conf_names_free(struct conf_names *ix)
{
	if (!ix)
		return NULL;
	nameidx_done(&ix->ix);
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
