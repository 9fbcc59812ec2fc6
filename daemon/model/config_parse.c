// SPDX-License-Identifier: MIT
/*
 * Configuration parser: reads the main file and its includes, applies the
 * field tables of config_fields.c to the libconfig tree, and records every
 * problem with its file:line so that all of them can be reported at once.
 */
#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <libconfig.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_internal.h"
#include "utf8.h"

/* ---- values ---- */

int config_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s)
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	switch (*end) {
	case '\0':
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1])
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

static const char *type_name(int t)
{
	switch (t) {
	case CONFIG_TYPE_GROUP:
		return "a group";
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		return "an integer";
	case CONFIG_TYPE_FLOAT:
		return "a number";
	case CONFIG_TYPE_STRING:
		return "a string";
	case CONFIG_TYPE_BOOL:
		return "a boolean";
	case CONFIG_TYPE_ARRAY:
		return "an array";
	case CONFIG_TYPE_LIST:
		return "a list";
	}
	return "?";
}

static bool is_int(const config_setting_t *s)
{
	int t = config_setting_type(s);

	return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

static bool is_array(const config_setting_t *s)
{
	int t = config_setting_type(s);

	return t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST;
}

static bool expect(struct parser *p, const config_setting_t *s,
		   const char *what, bool ok)
{
	if (!ok)
		parser_field_error(p, s, "'%s' must be %s, not %s",
				   config_setting_name(s), what,
				   type_name(config_setting_type(s)));
	return ok;
}

static int parse_string_list(struct parser *p, const config_setting_t *s,
			     const struct field *f, char ***out, size_t *n_out)
{
	int n = config_setting_length(s);
	char **v;

	if (!expect(p, s, "an array of strings", is_array(s)))
		return 0;
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		return p->oom = 1, -ENOMEM;
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, i);
		const char *str = config_setting_get_string(e);

		if (!str) {
			parser_field_error(p, e, "'%s' must hold strings only",
					   config_setting_name(s));
			continue;
		}
		if (f->check && f->check(str)) {
			parser_field_error(p, e, "'%s': '%s' %s", f->key, str,
					   f->check(str));
			continue;
		}
		if (f->warn && f->warn(str))
			parser_field_warning(p, e, "'%s': '%s' %s", f->key, str,
					     f->warn(str));
		v[(*n_out)++] = conf_strdup(p->c, str);
		if (!v[*n_out - 1])
			p->oom = 1;
	}
	*out = v;
	return 0;
}

static int lookup_name(const struct enum_name *t, const char *name)
{
	for (; t->name; t++)
		if (streq(t->name, name))
			return t->value;
	return -1;
}

static void name_choices(const struct enum_name *t, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (; t->name && off < len; t++)
		off += snprintf(buf + off, len - off, "%s%s",
				off ? ", " : "", t->name);
}

/* The key a value belongs to: its own, or its array's. */
static const char *key_of(const config_setting_t *s)
{
	const char *name = config_setting_name(s);

	if (!name && config_setting_parent(s))
		name = config_setting_name(config_setting_parent(s));
	return name ? name : "?";
}

/* Refuse an integer that is not the literal it was written as. */
static bool int_literal_ok(struct parser *p, const config_setting_t *s)
{
	const struct literal *l = config_setting_get_hook(s);
	const char *key = key_of(s);

	if (!l || (!l->erange && l->value == config_setting_get_int64(s)))
		return true;
	if (l->wide || l->erange)
		parser_field_error(p, s,
				   "'%s' = %.*s does not fit in 64 bits", key,
				   l->len, l->text);
	else if (!config_setting_name(s))
		/* An array holds integers of one width. */
		parser_field_error(p, s,
				   "'%s' = %.*s does not fit in 32 bits, "
				   "which libconfig keeps without a suffix: "
				   "write %.*sL, and every integer of the "
				   "array with an L",
				   key, l->len, l->text, l->len, l->text);
	else
		parser_field_error(p, s,
				   "'%s' = %.*s does not fit in 32 bits, "
				   "which libconfig keeps without a suffix: "
				   "write %.*sL (or a size string such as "
				   "\"5G\")",
				   key, l->len, l->text, l->len, l->text);
	return false;
}

static void parse_field(struct parser *p, const struct field *f,
			const config_setting_t *s, void *obj);

static void parse_group(struct parser *p, const struct field *table,
			const config_setting_t *g, const char *what, void *obj)
{
	int n;

	if (!expect(p, g, "a group", config_setting_is_group(g)))
		return;
	n = config_setting_length(g);
	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const struct field *f;

		for (f = table; f->key; f++)
			if (streq(f->key, config_setting_name(s)))
				break;
		if (!f->key) {
			parser_setting_error(p, s, "unknown key '%s' in %s",
					     config_setting_name(s), what);
			continue;
		}
		parse_field(p, f, s, obj);
	}
	for (const struct field *f = table; f->key; f++)
		if (f->required && !config_setting_get_member(g, f->key))
			parser_setting_error(p, g,
					     "%s: missing required key '%s'",
					     what, f->key);
}

static bool in_range(struct parser *p, const struct field *f,
		     const config_setting_t *s, long long v)
{
	if (v < f->min || v > f->max) {
		parser_field_error(p, s, "'%s' = %lld is out of range [%" PRId64
				   ", %" PRId64 "]",
				   f->key, v, f->min, f->max);
		return false;
	}
	return true;
}

/*
 * One parser per field type (parse_field's table): each checks the
 * setting's type, then its value, and stores it at f's place in obj.
 */
typedef void field_parser(struct parser *p, const struct field *f,
			  const config_setting_t *s, void *obj);

/* The value str (s's) names in f->names, or -1 with an error (fmt: the
 * key, str, the choices) when it names none. */
static int enum_value(struct parser *p, const struct field *f,
		      const config_setting_t *s, const char *str,
		      const char *fmt)
{
	char choices[256];
	int e = str ? lookup_name(f->names, str) : -1;

	if (e < 0) {
		name_choices(f->names, choices, sizeof(choices));
		parser_field_error(p, s, fmt, f->key, str ? str : "?", choices);
	}
	return e;
}

static void parse_string(struct parser *p, const struct field *f,
			 const config_setting_t *s, void *obj)
{
	char **dst = (char **)((char *)obj + f->offset);
	const char *str = config_setting_get_string(s);

	if (!expect(p, s, "a string", str))
		return;
	if (f->check && f->check(str)) {
		parser_field_error(p, s, "'%s' = '%s' %s", f->key, str,
				   f->check(str));
		return;
	}
	*dst = conf_strdup(p->c, str);
	if (!*dst)
		p->oom = 1;
}

/* F_INT, F_INT64, F_UINT32, F_UINT16: in [f->min, f->max]. */
static void parse_int(struct parser *p, const struct field *f,
		      const config_setting_t *s, void *obj)
{
	void *dst = (char *)obj + f->offset;
	long long v;

	if (!expect(p, s, "an integer", is_int(s)) || !int_literal_ok(p, s))
		return;
	v = config_setting_get_int64(s);
	if (!in_range(p, f, s, v))
		return;
	switch (f->type) {
	case F_INT:
		*(int *)dst = (int)v;
		break;
	case F_INT64:
		*(int64_t *)dst = v;
		break;
	case F_UINT32:
		*(uint32_t *)dst = (uint32_t)v;
		break;
	default:
		*(uint16_t *)dst = (uint16_t)v;
		break;
	}
}

/* A size written as an integer or as a string ("64M"): 0, or -EINVAL
 * with the error reported. */
static int size_value(struct parser *p, const struct field *f,
		      const config_setting_t *s, uint64_t *size)
{
	const char *str;
	long long v;

	if (is_int(s)) {
		if (!int_literal_ok(p, s))
			return -EINVAL;
		v = config_setting_get_int64(s);
		if (v < 0) {
			parser_field_error(p, s,
					   "'%s' = %lld: a size cannot be "
					   "negative",
					   f->key, v);
			return -EINVAL;
		}
		*size = (uint64_t)v;
		return 0;
	}
	str = config_setting_get_string(s);
	if (!str) {
		expect(p, s, "a size (integer or string)", false);
		return -EINVAL;
	}
	if (config_parse_size(str, size) < 0) {
		parser_field_error(p, s,
				   "'%s' = \"%s\" is not a size (an integer "
				   "with an optional K, M, G or T suffix)",
				   f->key, str);
		return -EINVAL;
	}
	return 0;
}

/* F_SIZE: at least f->min, at most f->max or CONF_SIZE_LIMIT. */
static void parse_size(struct parser *p, const struct field *f,
		       const config_setting_t *s, void *obj)
{
	uint64_t size;

	if (size_value(p, f, s, &size) < 0)
		return;
	if (size < (uint64_t)f->min) {
		parser_field_error(p, s, "'%s' must be at least %" PRId64,
				   f->key, f->min);
		return;
	}
	if (size > (uint64_t)(f->max ? f->max : CONF_SIZE_LIMIT)) {
		parser_field_error(p, s, "%s %" PRIu64 " is larger than %s",
				   f->key, size, f->max ? "allowed" : "1024T");
		return;
	}
	*(uint64_t *)((char *)obj + f->offset) = size;
}

static void parse_bool(struct parser *p, const struct field *f,
		       const config_setting_t *s, void *obj)
{
	if (!expect(p, s, "a boolean (true or false)",
		    config_setting_type(s) == CONFIG_TYPE_BOOL))
		return;
	*(bool *)((char *)obj + f->offset) = config_setting_get_bool(s);
}

static void parse_tribool(struct parser *p, const struct field *f,
			  const config_setting_t *s, void *obj)
{
	if (!expect(p, s, "a boolean (true or false)",
		    config_setting_type(s) == CONFIG_TYPE_BOOL))
		return;
	*(enum conf_tribool *)((char *)obj + f->offset) =
		config_setting_get_bool(s) ? CONF_TRUE : CONF_FALSE;
}

static void parse_enum(struct parser *p, const struct field *f,
		       const config_setting_t *s, void *obj)
{
	const char *str = config_setting_get_string(s);
	int e;

	if (!expect(p, s, "a string", str))
		return;
	e = enum_value(p, f, s, str, "'%s' = \"%s\" is not one of: %s");
	if (e >= 0)
		*(int *)((char *)obj + f->offset) = e;
}

/* F_ACCESS: the flags of a list of names, or'ed. */
static void parse_access(struct parser *p, const struct field *f,
			 const config_setting_t *s, void *obj)
{
	unsigned int flags = 0;
	int n;

	if (!expect(p, s, "an array of strings", is_array(s)))
		return;
	n = config_setting_length(s);
	for (int i = 0; i < n; i++) {
		const config_setting_t *el = config_setting_get_elem(s, i);
		int e = enum_value(p, f, el, config_setting_get_string(el),
				   "'%s': \"%s\" is not one of: %s");

		if (e >= 0)
			flags |= (unsigned int)e;
	}
	*(unsigned int *)((char *)obj + f->offset) = flags;
}

static void parse_strlist(struct parser *p, const struct field *f,
			  const config_setting_t *s, void *obj)
{
	parse_string_list(p, s, f, (char ***)((char *)obj + f->offset),
			  (size_t *)((char *)obj + f->count_offset));
}

/* F_INT64LIST: every element in [f->min, f->max]. */
static void parse_int64list(struct parser *p, const struct field *f,
			    const config_setting_t *s, void *obj)
{
	int64_t **dst = (int64_t **)((char *)obj + f->offset);
	int n = config_setting_length(s);
	int64_t *vals;

	if (!expect(p, s, "an array of integers", is_array(s)))
		return;
	vals = calloc((size_t)n + 1, sizeof(*vals));
	if (!vals) {
		p->oom = 1;
		return;
	}
	free(*dst);
	*dst = vals;
	for (int i = 0; i < n; i++) {
		const config_setting_t *el = config_setting_get_elem(s, i);

		if (!expect(p, el, "an integer", is_int(el)) ||
		    !int_literal_ok(p, el))
			continue;
		vals[i] = config_setting_get_int64(el);
		in_range(p, f, el, vals[i]);
	}
	*(size_t *)((char *)obj + f->count_offset) = (size_t)n;
}

/* F_GROUP: the same struct (a flag set when given), or one of its own
 * allocated when the key is given (indirect). */
static void parse_subgroup(struct parser *p, const struct field *f,
			   const config_setting_t *s, void *obj)
{
	void *dst = (char *)obj + f->offset;
	void **sub = dst;

	if (!f->indirect) {
		if (f->set_flag)
			*(bool *)dst = true;
		parse_group(p, f->sub, s, f->key, obj);
		return;
	}
	if (!*sub) {
		*sub = calloc(1, f->size);
		if (!*sub) {
			p->oom = 1;
			return;
		}
		if (f->defaults)
			f->defaults(*sub);
	}
	parse_group(p, f->sub, s, f->key, *sub);
}

/* F_GROUPLIST: an array of at most f->max_count groups, each at its
 * location with its defaults first. */
static void parse_grouplist(struct parser *p, const struct field *f,
			    const config_setting_t *s, void *obj)
{
	char **arr = (char **)((char *)obj + f->offset);
	size_t *count = (size_t *)((char *)obj + f->count_offset);
	int n;

	if (!expect(p, s, "a list of groups: ( { ... }, ... )",
		    config_setting_is_list(s)))
		return;
	n = config_setting_length(s);
	if (f->max_count && (size_t)n > f->max_count) {
		parser_field_error(p, s, "'%s' has %d entries, at most %zu",
				   f->key, n, f->max_count);
		return;
	}
	if (*arr || !n)
		return; /* a key given twice: libconfig refuses it */
	*arr = calloc((size_t)n, f->size);
	if (!*arr) {
		p->oom = 1;
		return;
	}
	for (int i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(s, i);
		char *elem = *arr + (size_t)i * f->size;

		*(struct conf_loc *)elem = parser_loc(p, g);
		if (f->defaults)
			f->defaults(elem);
		(*count)++;
		parse_group(p, f->sub, g, f->key, elem);
	}
}

/* F_IGNORE has none: its key is read elsewhere. */
static field_parser *const field_parsers[] = {
	[F_STRING] = parse_string,
	[F_INT] = parse_int,
	[F_UINT32] = parse_int,
	[F_UINT16] = parse_int,
	[F_INT64] = parse_int,
	[F_SIZE] = parse_size,
	[F_BOOL] = parse_bool,
	[F_TRIBOOL] = parse_tribool,
	[F_ENUM] = parse_enum,
	[F_ACCESS] = parse_access,
	[F_STRLIST] = parse_strlist,
	[F_INT64LIST] = parse_int64list,
	[F_GROUP] = parse_subgroup,
	[F_GROUPLIST] = parse_grouplist,
};

static void parse_field(struct parser *p, const struct field *f,
			const config_setting_t *s, void *obj)
{
	field_parser *fn = (size_t)f->type < ARRAY_SIZE(field_parsers)
				   ? field_parsers[f->type]
				   : NULL;

	if (fn)
		fn(p, f, s, obj);
}

/* ---- sections ---- */

static void *grow(struct parser *p, void **array, size_t *n, size_t size)
{
	char *a = array_room(*array, *n, size);

	if (!a) {
		p->oom = 1;
		return NULL;
	}
	*array = a;
	memset(a + *n * size, 0, size);
	return a + (*n)++ * size;
}

/* Name the object being parsed in value errors: "mr 'ring'". */
static void set_label(struct parser *p, const char *kind,
		      const config_setting_t *g)
{
	const config_setting_t *n = config_setting_is_group(g)
					    ? config_setting_get_member(g, "name")
					    : NULL;
	const char *name = n ? config_setting_get_string(n) : NULL;

	if (name)
		snprintf(p->label, sizeof(p->label), "%s '%s'", kind, name);
	else
		snprintf(p->label, sizeof(p->label), "%s", kind);
	/* A long name is cut: never inside a character. */
	utf8_trim_cut(p->label);
}

static void parse_objects(struct parser *p, const config_setting_t *pg,
			  struct conf_profile *prof)
{
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		const struct kind_table *kt = &conf_kinds[k];
		const config_setting_t *list =
			config_setting_get_member(pg, conf_kind_names[k]);
		int n;

		if (!list)
			continue;
		if (!expect(p, list, "a list of groups: ( { ... }, ... )",
			    config_setting_is_list(list)))
			continue;
		n = config_setting_length(list);
		if (!n)
			continue;
		/* A kind has one list per profile, whose length is known:
		 * one allocation. */
		prof->objs[k] = calloc((size_t)n, kt->size);
		if (!prof->objs[k]) {
			p->oom = 1;
			return;
		}
		for (int i = 0; i < n; i++) {
			const config_setting_t *g =
				config_setting_get_elem(list, i);
			void *elem = (char *)prof->objs[k] +
				     prof->n_objs[k]++ * kt->size;

			*(struct conf_loc *)elem = parser_loc(p, g);
			if (kt->defaults)
				kt->defaults(elem);
			set_label(p, conf_kind_names[k], g);
			parse_group(p, kt->fields, g, conf_kind_names[k], elem);
			p->label[0] = '\0';
		}
	}
}

static void parse_profiles(struct parser *p, const config_setting_t *list)
{
	struct config *c = p->c;
	int n;

	if (!expect(p, list, "a list of groups: ( { ... }, ... )",
		    config_setting_is_list(list)))
		return;
	n = config_setting_length(list);
	for (int i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(list, i);
		struct conf_profile *prof =
			grow(p, (void **)&c->profiles, &c->n_profiles,
			     sizeof(*prof));

		if (!prof)
			return;
		prof->loc = parser_loc(p, g);
		set_label(p, "profile", g);
		parse_group(p, conf_profile_fields, g, "profile", prof);
		p->label[0] = '\0';
		if (config_setting_is_group(g))
			parse_objects(p, g, prof);
	}
}

static void parse_devices(struct parser *p, const config_setting_t *list)
{
	struct config *c = p->c;
	int n;

	if (!expect(p, list, "a list of groups: ( { ... }, ... )",
		    config_setting_is_list(list)))
		return;
	n = config_setting_length(list);
	for (int i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(list, i);
		struct conf_device *d = grow(p, (void **)&c->devices,
					     &c->n_devices, sizeof(*d));

		if (!d)
			return;
		d->loc = parser_loc(p, g);
		d->port = 1;
		d->gid_index = -1;
		d->gid_type = GIDK_ANY;
		set_label(p, "device", g);
		parse_group(p, conf_device_fields, g, "device", d);
		p->label[0] = '\0';
	}
}

/* Where key of group g was set, for checks made later. */
static void remember_loc(struct parser *p, const config_setting_t *g,
			 const char *key, struct conf_loc *out)
{
	const config_setting_t *s = config_setting_is_group(g)
					    ? config_setting_get_member(g, key)
					    : NULL;

	if (s)
		*out = parser_loc(p, s);
}

static void parse_root(struct parser *p, const config_setting_t *root,
		       bool main_file)
{
	int n = config_setting_length(root);

	for (int i = 0; i < n; i++) {
		const config_setting_t *s = config_setting_get_elem(root, i);
		const char *key = config_setting_name(s);

		if (streq(key, "daemon") && main_file) {
			snprintf(p->label, sizeof(p->label), "daemon");
			const config_setting_t *h, *l;

			parse_group(p, conf_daemon_fields, s, "daemon",
				    &p->c->daemon);
			remember_loc(p, s, "include", &p->include_loc);
			remember_loc(p, s, "runtime_dir", &p->runtime_dir_loc);
			/* Where verify points when an address needs TLS. */
			h = config_setting_is_group(s)
				    ? config_setting_get_member(s, "http")
				    : NULL;
			l = h && config_setting_is_group(h)
				    ? config_setting_get_member(h, "listen")
				    : NULL;
			if (h)
				p->c->daemon.http_loc = parser_loc(p, h);
			if (l)
				p->c->daemon.listen_loc = parser_loc(p, l);
			p->label[0] = '\0';
		}
		else if (streq(key, "devices"))
			parse_devices(p, s);
		else if (streq(key, "profiles"))
			parse_profiles(p, s);
		else
			parser_setting_error(p, s,
					     "unknown top-level key '%s' "
					     "(expected %sdevices or "
					     "profiles)",
					     key, main_file ? "daemon, " : "");
	}
}

/* Every string value must be UTF-8: the documents that show them (REST,
 * --dump, the control socket) are JSON. */
static void check_strings(struct parser *p, const config_setting_t *s)
{
	const char *str = config_setting_get_string(s);

	if (str && !utf8_valid(str))
		parser_setting_error(p, s, "'%s' is not valid UTF-8",
				     key_of(s));
	if (!config_setting_is_aggregate(s))
		return;
	for (int i = 0, n = config_setting_length(s); i < n; i++)
		check_strings(p, config_setting_get_elem(s, i));
}

/* Parse one file's text; name is what locations say. */
void parser_text(struct parser *p, const char *name, const char *text,
		 bool main_file)
{
	struct source src = { 0 };
	config_t cfg;

	p->file = parser_intern_file(p, name);
	if (source_scan(&src, text) < 0) {
		source_free(&src);
		p->oom = 1;
		return;
	}
	/* libconfig would read the named file behind our back: past the
	 * size limit and the checks, with no file:line of its own, and it
	 * exits the process when the name is a directory. */
	if (src.include_line) {
		parser_error(p, conf_loc_at(p->file, src.include_line),
			     "@include is not supported: put profiles in "
			     "*.conf files of the directory daemon.include "
			     "names");
		source_free(&src);
		return;
	}
	config_init(&cfg);
	if (!config_read_string(&cfg, text)) {
		const char *why = config_error_text(&cfg);

		/* libconfig's text is often just "syntax error": say it
		 * once. */
		if (!why)
			why = "syntax error";
		parser_error(p, conf_loc_at(p->file, config_error_line(&cfg)),
			     strncmp(why, "syntax error", 12) ? "syntax error: %s"
							     : "%s",
			     why);
	} else if (!source_pair(&src, config_root_setting(&cfg)) ||
		   src.next != src.n_lit) {
		/* Never seen: the scanner and libconfig disagree. Refuse
		 * rather than take values that may have been cut. */
		parser_error(p, conf_loc_at(p->file, 0),
			     "cannot match the integer values with their "
			     "literals (an rdmad bug: please report it)");
	} else {
		check_strings(p, config_root_setting(&cfg));
		parse_root(p, config_root_setting(&cfg), main_file);
	}
	config_destroy(&cfg);
	source_free(&src);
}

void parser_file(struct parser *p, const char *path, bool main_file)
{
	_cleanup_free_ char *text = NULL;
	const char *why = NULL, *nul;
	size_t len = 0;
	int r = parser_read(p, path, &text, &len, &why);

	if (r == -ESTALE)
		return; /* config_load_known() says so */
	if (r < 0) {
		parser_error(p, conf_loc_at(parser_intern_file(p, path), 0),
			     "cannot read: %s", why ? why : strerror(-r));
		return;
	}
	/* libconfig would stop at a NUL and ignore the rest. */
	nul = memchr(text, '\0', len);
	if (nul) {
		int line = 1;

		for (const char *t = text; t < nul; t++)
			line += *t == '\n';
		parser_error(p,
			     conf_loc_at(parser_intern_file(p, path), line),
			     "a NUL byte: this is not a text file");
		return;
	}
	parser_text(p, path, text, main_file);
}

/* Every *.conf of the include directory, in name order. */
void parser_include(struct parser *p)
{
	const char *inc = p->c->daemon.include;
	_cleanup_free_ char *dir = NULL;
	char **names = NULL;
	size_t n = 0;
	DIR *d;

	if (!inc)
		return;
	/* A relative include is relative to the main file, not to the
	 * daemon's working directory. */
	if (inc[0] != '/' && strchr(p->c->path, '/')) {
		const char *slash = strrchr(p->c->path, '/');

		if (asprintf(&dir, "%.*s/%s", (int)(slash - p->c->path),
			     p->c->path, inc) < 0)
			dir = NULL;
	} else {
		dir = strdup(inc);
	}
	if (!dir) {
		p->oom = 1;
		return;
	}
	d = opendir(dir);
	if (!d) {
		parser_error(p, p->include_loc,
			     "include directory '%s': %s", dir,
			     strerror(errno));
		return;
	}
	if (config_dir_names(d, dir, &names, &n) < 0)
		p->oom = 1;
	if (!p->oom)
		(void)parser_dir_seen(p, dir, d, names, n); /* sets p->stale */
	closedir(d);
	for (size_t i = 0; i < n && !p->oom && !p->stale; i++)
		parser_file(p, names[i], false);
	config_names_free(names, n);
}
