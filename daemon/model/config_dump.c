// SPDX-License-Identifier: MIT
/*
 * The effective configuration, written back out: as JSON (the vocabulary
 * of the file, every default filled in) and as libconfig text that reads
 * back the same (rdmad --dump). A secret (a target's token) is only said
 * to be set ("token": true): a dump with one does not read back, by
 * design, rather than read back as a configuration with another token.
 */
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

static json_t *access_names_json(unsigned int flags)
{
	json_t *a = json_array();

	for (const struct enum_name *n = conf_access_names; a && n->name; n++)
		if (flags & (unsigned int)n->value)
			json_array_append_new(a, json_string(n->name));
	return a;
}

/* Every field of table in obj, into j. Unset values (below the field's
 * minimum, NULL strings) are left out. */
static void fields_json(const struct field *table, const void *obj, json_t *j)
{
	for (const struct field *f = table; f->key; f++) {
		const char *at = (const char *)obj + f->offset;
		json_t *v = NULL;

		switch (f->type) {
		case F_STRING:
			if (*(char *const *)at)
				v = f->secret ? json_true()
					      : json_string(*(char *const *)at);
			break;
		case F_INT:
		case F_ENUM: {
			int x = *(const int *)at;

			if (f->type == F_ENUM) {
				const char *n = conf_enum_name(f->names, x);

				v = streq(n, "?") ? NULL : json_string(n);
			} else if (x >= f->min) {
				v = json_integer(x);
			}
			break;
		}
		case F_INT64:
			if (*(const int64_t *)at >= f->min)
				v = json_integer(*(const int64_t *)at);
			break;
		case F_UINT32:
			v = json_integer(*(const uint32_t *)at);
			break;
		case F_UINT16:
			v = json_integer(*(const uint16_t *)at);
			break;
		case F_SIZE:
			v = json_integer((json_int_t) * (const uint64_t *)at);
			break;
		case F_BOOL:
			v = json_boolean(*(const bool *)at);
			break;
		case F_TRIBOOL:
			if (*(const enum conf_tribool *)at != CONF_UNSET)
				v = json_boolean(*(const enum conf_tribool *)
							 at == CONF_TRUE);
			break;
		case F_ACCESS:
			v = access_names_json(*(const unsigned int *)at);
			break;
		case F_STRLIST:
		case F_INT64LIST: {
			size_t n = *(const size_t *)((const char *)obj +
						     f->count_offset);

			/* An empty list given is not a list left out. */
			if (!n && !*(void *const *)at)
				break;
			v = json_array();
			for (size_t i = 0; v && i < n; i++)
				json_array_append_new(
					v, f->type == F_STRLIST
						   ? json_string((*(char **const *)at)[i])
						   : json_integer((*(int64_t *const *)at)[i]));
			break;
		}
		case F_GROUPLIST: {
			size_t n = *(const size_t *)((const char *)obj +
						     f->count_offset);

			v = json_array();
			for (size_t i = 0; v && i < n; i++) {
				json_t *e = json_object();

				fields_json(f->sub,
					    *(char *const *)at + i * f->size, e);
				json_array_append_new(v, e);
			}
			break;
		}
		case F_GROUP:
			if (f->set_flag && !*(const bool *)at)
				break;
			if (f->indirect && !*(void *const *)at)
				break;
			v = json_object();
			fields_json(f->sub, f->indirect ? *(void *const *)at : obj,
				    v);
			if (!json_object_size(v)) {
				json_decref(v);
				v = NULL;
			}
			break;
		case F_IGNORE:
			break;
		}
		if (v)
			json_object_set_new(j, f->key, v);
	}
}

json_t *config_object_json(enum obj_kind kind, const void *obj)
{
	json_t *o;

	if ((unsigned int)kind >= OBJ_KIND_MAX || !obj)
		return NULL;
	o = json_object();
	if (o)
		fields_json(conf_kinds[kind].fields, obj, o);
	return o;
}

json_t *config_json(const struct config *c)
{
	json_t *j = json_object(), *d = json_object(), *devs = json_array(),
	       *profs = json_array();

	if (!j || !d || !devs || !profs) {
		json_decref(j);
		json_decref(d);
		json_decref(devs);
		json_decref(profs);
		return NULL;
	}
	fields_json(conf_daemon_fields, &c->daemon, d);
	/* The included profiles are written out below, merged. */
	json_object_del(d, "include");
	json_object_set_new(j, "daemon", d);
	for (size_t i = 0; i < c->n_devices; i++) {
		json_t *dev = json_object();

		fields_json(conf_device_fields, &c->devices[i], dev);
		json_array_append_new(devs, dev);
	}
	if (json_array_size(devs))
		json_object_set_new(j, "devices", devs);
	else
		json_decref(devs);
	for (size_t i = 0; i < c->n_profiles; i++) {
		const struct conf_profile *pr = &c->profiles[i];
		json_t *p = json_object();

		fields_json(conf_profile_fields, pr, p);
		for (int k = 0; k < OBJ_KIND_MAX; k++) {
			json_t *list;

			if (!pr->n_objs[k])
				continue;
			list = json_array();
			for (size_t n = 0; n < pr->n_objs[k]; n++) {
				json_array_append_new(
					list, config_object_json(
						      (enum obj_kind)k,
						      conf_obj(pr, (enum obj_kind)k,
							       n)));
			}
			json_object_set_new(p, conf_kind_names[k], list);
		}
		json_array_append_new(profs, p);
	}
	if (json_array_size(profs))
		json_object_set_new(j, "profiles", profs);
	else
		json_decref(profs);
	return j;
}

static bool int32_fits(json_int_t n)
{
	return n >= INT32_MIN && n <= INT32_MAX;
}

/* libconfig text for a JSON value: objects are groups, arrays of objects
 * lists, other arrays arrays. */
static void print_value(FILE *f, const json_t *v, int depth);

static void print_group(FILE *f, const json_t *o, int depth, bool top)
{
	const char *k;
	json_t *v;

	if (!top)
		fputs("{\n", f);
	json_object_foreach ((json_t *)o, k, v) {
		fprintf(f, "%*s%s = ", (depth + !top) * 2, "", k);
		print_value(f, v, depth + !top);
		fputs(";\n", f);
	}
	if (!top)
		fprintf(f, "%*s}", depth * 2, "");
}

static void print_value(FILE *f, const json_t *v, int depth)
{
	size_t i;
	json_t *e;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		print_group(f, v, depth, false);
		break;
	case JSON_ARRAY: {
		bool groups = json_array_size(v) &&
			      json_is_object(json_array_get(v, 0));

		if (!groups) {
			/* The integers of an array have one width: all
			 * with the L when one needs it. */
			bool wide = false;

			json_array_foreach ((json_t *)v, i, e)
				wide |= json_is_integer(e) &&
					!int32_fits(json_integer_value(e));
			fputs("[ ", f);
			json_array_foreach ((json_t *)v, i, e) {
				fputs(i ? ", " : "", f);
				if (wide && json_is_integer(e))
					fprintf(f, "%lldL", (long long)
						json_integer_value(e));
				else
					print_value(f, e, depth);
			}
			fputs(" ]", f);
			break;
		}
		fputs("(\n", f);
		json_array_foreach ((json_t *)v, i, e) {
			fprintf(f, "%*s", (depth + 1) * 2, "");
			print_group(f, e, depth + 1, false);
			fputs(i + 1 < json_array_size(v) ? ",\n" : "\n", f);
		}
		fprintf(f, "%*s)", depth * 2, "");
		break;
	}
	case JSON_STRING: {
		const char *s = json_string_value(v);

		fputc('"', f);
		for (; *s; s++) {
			if (*s == '"' || *s == '\\')
				fputc('\\', f);
			fputc(*s, f);
		}
		fputc('"', f);
		break;
	}
	case JSON_INTEGER: {
		json_int_t n = json_integer_value(v);

		/* libconfig keeps 32 bits without the L. */
		fprintf(f, "%lld%s", (long long)n, int32_fits(n) ? "" : "L");
		break;
	}
	case JSON_TRUE:
		fputs("true", f);
		break;
	case JSON_FALSE:
		fputs("false", f);
		break;
	default:
		break;
	}
}

int config_print(const struct config *c, FILE *f)
{
	json_t *j = config_json(c);

	if (!j)
		return -ENOMEM;
	fprintf(f, "# Effective configuration of %s, as rdmad reads it.\n",
		c->path);
	print_group(f, j, 0, true);
	json_decref(j);
	return 0;
}
