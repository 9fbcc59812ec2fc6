// SPDX-License-Identifier: MIT
/*
 * The configuration model's face: load (parse, then verify, then fill
 * in the daemon defaults) from files, a string or a child's image, free,
 * and equality of objects for the reload diff. The parts (config_*.c)
 * are called from here and never call back: what one needs from above
 * comes as an argument.
 */
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

static int cmp_error(const void *a, const void *b)
{
	const struct conf_error *x = a, *y = b;
	int r = strcmp(x->loc.file, y->loc.file);

	if (r)
		return r;
	if (x->loc.line != y->loc.line)
		return x->loc.line < y->loc.line ? -1 : 1;
	/* Same line: the order found. */
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int config_new(const char *path, struct config **out)
{
	struct config *c = calloc(1, sizeof(*c));

	if (!c || !(c->path = strdup(path))) {
		free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

static int set_defaults(struct config *c)
{
	struct conf_daemon *d = &c->daemon;

	if (!d->runtime_dir && !(d->runtime_dir = conf_strdup(c, "/run/rdmad")))
		return -ENOMEM;
	if (!d->control_socket) {
		_cleanup_free_ char *s = NULL;

		if (asprintf(&s, "%s/" CONFIG_DEFAULT_SOCKET_NAME, d->runtime_dir) < 0) {
			s = NULL;
			return -ENOMEM;
		}
		if (!(d->control_socket = conf_strdup(c, s)))
			return -ENOMEM;
	}
	if (!d->log_level && !(d->log_level = conf_strdup(c, "info")))
		return -ENOMEM;
	if (!d->orphans && !(d->orphans = conf_strdup(c, "keep")))
		return -ENOMEM;
	if (!d->cdi_spec &&
	    !(d->cdi_spec = conf_strdup(c, CONFIG_DEFAULT_CDI_SPEC)))
		return -ENOMEM;
	if (!d->max_sessions)
		d->max_sessions = CONFIG_DEFAULT_MAX_SESSIONS;
	if (!d->max_sessions_per_uid)
		d->max_sessions_per_uid = CONFIG_DEFAULT_MAX_SESSIONS_PER_UID;
	if (!d->hello_timeout)
		d->hello_timeout = CONFIG_DEFAULT_HELLO_TIMEOUT;
	if (!d->output_budget)
		d->output_budget = CONFIG_DEFAULT_OUTPUT_BUDGET;
	if (!d->output_budget_per_uid)
		d->output_budget_per_uid = CONFIG_DEFAULT_OUTPUT_BUDGET_PER_UID;
	if (!d->max_attachments_per_session)
		d->max_attachments_per_session =
			CONFIG_DEFAULT_MAX_ATTACHMENTS_PER_SESSION;
	if (!d->http_max_connections)
		d->http_max_connections = CONFIG_DEFAULT_HTTP_MAX_CONNECTIONS;
	if (!d->http_reserved)
		d->http_reserved = d->http_max_connections / 8
					   ? d->http_max_connections / 8
					   : 1;
	if (!d->http_max_per_address)
		d->http_max_per_address = CONFIG_DEFAULT_HTTP_MAX_PER_ADDRESS;
	if (!d->http_idle_timeout)
		d->http_idle_timeout = CONFIG_DEFAULT_HTTP_IDLE_TIMEOUT;
	if (!d->http_header_timeout)
		d->http_header_timeout = CONFIG_DEFAULT_HTTP_HEADER_TIMEOUT;
	if (!d->listen) {
		d->listen = calloc(2, sizeof(char *));
		if (!d->listen ||
		    !(d->listen[0] = conf_strdup(c, CONFIG_DEFAULT_LISTEN)))
			return -ENOMEM;
		d->n_listen = 1;
	}
	return 0;
}

static int finish(struct parser *p)
{
	if (!p->oom)
		parser_verify(p);
	/* Report in file and line order, whatever pass found them. */
	if (p->c->n_errors)
		qsort(p->c->errors, p->c->n_errors, sizeof(*p->c->errors),
		      cmp_error);
	if (p->c->n_warnings)
		qsort(p->c->warnings, p->c->n_warnings,
		      sizeof(*p->c->warnings), cmp_error);
	if (p->oom || set_defaults(p->c) < 0) {
		config_free(p->c);
		return -ENOMEM;
	}
	conf_strings_seal(p->c);
	return 0;
}

int config_load(const char *path, struct config **out)
{
	struct parser p = { 0 };
	int r;

	r = config_new(path, &p.c);
	if (r < 0)
		return r;
	parser_file(&p, path, true);
	if (!p.c->n_errors)
		parser_include(&p);
	r = finish(&p);
	if (r < 0)
		return r;
	*out = p.c;
	return 0;
}

int config_load_known(const char *path, const struct config *known,
		      struct config **out)
{
	struct parser p = { .known = known };
	int r;

	r = config_new(path, &p.c);
	if (r < 0)
		return r;
	parser_file(&p, path, true);
	if (!p.c->n_errors && !p.stale)
		parser_include(&p);
	r = finish(&p);
	if (r < 0)
		return r;
	/* Every file known read, and nothing else. */
	if (p.stale || p.c->n_sources != known->n_sources) {
		config_free(p.c);
		return -ESTALE;
	}
	*out = p.c;
	return 0;
}

int config_load_string(const char *name, const char *text,
		       struct config **out)
{
	struct parser p = { 0 };
	int r;

	r = config_new(name, &p.c);
	if (r < 0)
		return r;
	parser_text(&p, name, text, true);
	r = finish(&p);
	if (r < 0)
		return r;
	*out = p.c;
	return 0;
}

int config_from_image(const void *image, size_t len, struct config **out)
{
	struct config *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	r = conf_image_read(c, image, len);
	conf_strings_seal(c);
	if (r < 0) {
		config_free(c);
		return r;
	}
	*out = c;
	return 0;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Free what the fields of table own in obj (lists; the strings are the
 * config's, config_strings.c). */
static void free_fields(const struct field *table, void *obj)
{
	for (const struct field *f = table; f->key; f++) {
		void *at = (char *)obj + f->offset;

		switch (f->type) {
		case F_STRLIST:
			free(*(char ***)at);
			break;
		case F_INT64LIST:
			free(*(int64_t **)at);
			break;
		case F_GROUPLIST: {
			size_t n = *(size_t *)((char *)obj + f->count_offset);

			for (size_t i = 0; i < n; i++)
				free_fields(f->sub,
					    *(char **)at + i * f->size);
			free(*(void **)at);
			break;
		}
		case F_GROUP:
			if (!f->indirect) {
				free_fields(f->sub, obj);
			} else if (*(void **)at) {
				free_fields(f->sub, *(void **)at);
				free(*(void **)at);
			}
			break;
		default:
			break;
		}
	}
}

static size_t scalar_size(enum field_type t)
{
	switch (t) {
	case F_INT:
	case F_ENUM:
		return sizeof(int);
	case F_TRIBOOL:
		return sizeof(enum conf_tribool);
	case F_INT64:
	case F_SIZE:
		return sizeof(uint64_t);
	case F_UINT32:
	case F_ACCESS:
		return sizeof(uint32_t);
	case F_UINT16:
		return sizeof(uint16_t);
	case F_BOOL:
		return sizeof(bool);
	default:
		return 0;
	}
}

/* Equal values of every field of table in a and b. */
static bool fields_equal(const struct field *table, const void *a,
			 const void *b)
{
	for (const struct field *f = table; f->key; f++) {
		const char *x = (const char *)a + f->offset;
		const char *y = (const char *)b + f->offset;

		switch (f->type) {
		case F_STRING: {
			const char *sx = *(char *const *)x;
			const char *sy = *(char *const *)y;

			if ((sx == NULL) != (sy == NULL) ||
			    (sx && !streq(sx, sy)))
				return false;
			break;
		}
		case F_STRLIST:
		case F_INT64LIST: {
			size_t nx = *(const size_t *)((const char *)a +
						      f->count_offset);
			size_t ny = *(const size_t *)((const char *)b +
						      f->count_offset);

			if (nx != ny)
				return false;
			for (size_t i = 0; i < nx; i++)
				if (f->type == F_STRLIST
					    ? !streq((*(char **const *)x)[i],
						     (*(char **const *)y)[i])
					    : (*(int64_t *const *)x)[i] !=
						      (*(int64_t *const *)y)[i])
					return false;
			break;
		}
		case F_GROUPLIST: {
			size_t nx = *(const size_t *)((const char *)a +
						      f->count_offset);
			size_t ny = *(const size_t *)((const char *)b +
						      f->count_offset);

			if (nx != ny)
				return false;
			for (size_t i = 0; i < nx; i++)
				if (!fields_equal(f->sub,
						  *(char *const *)x + i * f->size,
						  *(char *const *)y + i * f->size))
					return false;
			break;
		}
		case F_GROUP:
			if (f->indirect) {
				const void *px = *(const void *const *)x;
				const void *py = *(const void *const *)y;

				if (!px != !py ||
				    (px && !fields_equal(f->sub, px, py)))
					return false;
				break;
			}
			if (f->set_flag && *(const bool *)x != *(const bool *)y)
				return false;
			if (!fields_equal(f->sub, a, b))
				return false;
			break;
		case F_INT:
		case F_ENUM:
		case F_INT64:
		case F_UINT32:
		case F_ACCESS:
		case F_UINT16:
		case F_SIZE:
		case F_BOOL:
		case F_TRIBOOL:
			if (memcmp(x, y, scalar_size(f->type)))
				return false;
			break;
		case F_IGNORE:
			break;
		}
	}
	return true;
}

bool conf_obj_equal(enum obj_kind k, const void *a, const void *b)
{
	if (k == OBJ_QP) {
		/* "@FILE" the same, what the file says may not be. */
		const char *x = ((const struct conf_qp *)a)->peer_endpoint;
		const char *y = ((const struct conf_qp *)b)->peer_endpoint;

		if (!x != !y || (x && !streq(x, y)))
			return false;
	}
	return fields_equal(conf_kinds[k].fields, a, b);
}

bool conf_device_equal(const struct conf_device *a,
		       const struct conf_device *b)
{
	return fields_equal(conf_device_fields, a, b);
}

static void free_profile(struct conf_profile *pr)
{
	free_fields(conf_profile_fields, pr);
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		for (size_t i = 0; i < pr->n_objs[k]; i++) {
			void *o = (char *)pr->objs[k] + i * conf_kinds[k].size;

			if (k == OBJ_QP)
				free(((struct conf_qp *)o)->peer_endpoint);
			free_fields(conf_kinds[k].fields, o);
		}
		free(pr->objs[k]);
		conf_names_free(pr->names[k]);
	}
	free(pr->admit_uids);
	free(pr->admit_gids);
}

struct config *config_free(struct config *c)
{
	if (!c)
		return NULL;
	free_fields(conf_daemon_fields, &c->daemon);
	for (size_t i = 0; i < c->n_devices; i++)
		free_fields(conf_device_fields, &c->devices[i]);
	free(c->devices);
	for (size_t i = 0; i < c->n_profiles; i++)
		free_profile(&c->profiles[i]);
	free(c->profiles);
	conf_names_free(c->device_names);
	conf_names_free(c->profile_names);
	for (size_t i = 0; i < c->n_errors; i++)
		free(c->errors[i].msg);
	free(c->errors);
	for (size_t i = 0; i < c->n_warnings; i++)
		free(c->warnings[i].msg);
	free(c->warnings);
	free_strv(c->files, c->n_files);
	config_sources_free(c);
	conf_strings_free(c);
	free(c->path);
	free(c);
	return NULL;
}

json_t *config_errors_json(const struct config *c)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < c->n_errors; i++)
		json_array_append_new(
			a, json_pack("{s:s, s:i, s:s}", "file",
				     c->errors[i].loc.file, "line",
				     c->errors[i].loc.line, "message",
				     c->errors[i].msg));
	return a;
}
