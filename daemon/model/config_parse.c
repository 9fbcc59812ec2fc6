// SPDX-License-Identifier: MIT
/*
 * Configuration parser: reads the main file and its includes, applies the
 * field tables of config_fields.c to the libconfig tree, and records every
 * problem with its file:line so that all of them can be reported at once.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libconfig.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_internal.h"

/* ---- errors and locations ---- */

/*
 * Room for element n of an array of n elements of size bytes, which grows
 * only through here: its capacity is implicit, the next power of two, so
 * that it doubles when n reaches one and n appends cost O(n) copies.
 * Returns the array, moved or not, or NULL when out of memory (the array
 * unchanged).
 */
static void *array_room(void *a, size_t n, size_t size)
{
	if (n & (n - 1))
		return a; /* not a power of two: below the capacity */
	return reallocarray(a, n ? 2 * n : 1, size);
}

static const char *intern_file(struct parser *p, const char *file)
{
	struct config *c = p->c;
	char **n;

	if (!file)
		file = c->path;
	for (size_t i = 0; i < c->n_files; i++)
		if (streq(c->files[i], file))
			return c->files[i];
	n = array_room(c->files, c->n_files, sizeof(*n));
	if (!n)
		goto oom;
	c->files = n;
	n[c->n_files] = strdup(file);
	if (!n[c->n_files])
		goto oom;
	return n[c->n_files++];
oom:
	p->oom = 1;
	return "?";
}

static struct conf_loc loc_at(const char *file, int line)
{
	return (struct conf_loc){ .file = file, .line = line };
}

static struct conf_loc loc_of(struct parser *p, const config_setting_t *s)
{
	return (struct conf_loc){
		.file = p->file,
		.line = config_setting_source_line(s),
	};
}

/* Record an error at loc: "prefix: message", or just the message. */
static void add_errorv(struct parser *p, struct conf_loc loc,
		       const char *prefix, const char *fmt, va_list ap)
{
	struct config *c = p->c;
	struct conf_error *n;
	char *body, *msg = NULL;

	if (vasprintf(&body, fmt, ap) < 0) {
		p->oom = 1;
		return;
	}
	if (prefix && asprintf(&msg, "%s: %s", prefix, body) < 0)
		msg = NULL;
	if (!prefix)
		msg = TAKE_PTR(body);
	free(body);
	n = msg ? array_room(c->errors, c->n_errors, sizeof(*n)) : NULL;
	if (!n) {
		free(msg);
		p->oom = 1;
		return;
	}
	c->errors = n;
	n[c->n_errors] = (struct conf_error){ .loc = loc, .msg = msg,
					      .seq = c->n_errors };
	c->n_errors++;
}

void parser_error(struct parser *p, struct conf_loc loc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_errorv(p, loc, NULL, fmt, ap);
	va_end(ap);
}

/* An error about a setting, at its line. */
static void _printf_(3, 4)
	setting_error(struct parser *p, const config_setting_t *s,
		      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_errorv(p, loc_of(p, s), NULL, fmt, ap);
	va_end(ap);
}

/* An error about a value: prefixed with the object it belongs to. */
static void _printf_(3, 4)
	field_error(struct parser *p, const config_setting_t *s,
		    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_errorv(p, loc_of(p, s), p->label[0] ? p->label : NULL, fmt, ap);
	va_end(ap);
}

void config_add_error(struct config *c, struct conf_loc loc, const char *fmt,
		      ...)
{
	struct parser p = { .c = c };
	va_list ap;

	va_start(ap, fmt);
	add_errorv(&p, loc, NULL, fmt, ap);
	va_end(ap);
}

void config_print_errors(const struct config *c, FILE *f)
{
	for (size_t i = 0; i < c->n_errors; i++) {
		const struct conf_error *e = &c->errors[i];

		if (e->loc.line > 0)
			fprintf(f, "%s:%d: %s\n", e->loc.file, e->loc.line,
				e->msg);
		else /* about the whole file */
			fprintf(f, "%s: %s\n", e->loc.file, e->msg);
	}
}

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

static bool expect(struct parser *p, const config_setting_t *s,
		   const char *what, bool ok)
{
	if (!ok)
		field_error(p, s, "'%s' must be %s, not %s",
			      config_setting_name(s), what,
			      type_name(config_setting_type(s)));
	return ok;
}

static int parse_string_list(struct parser *p, const config_setting_t *s,
			     const struct field *f, char ***out, size_t *n_out)
{
	int n = config_setting_length(s);
	char **v;

	if (!expect(p, s, "an array of strings",
		    config_setting_type(s) == CONFIG_TYPE_ARRAY ||
			    config_setting_type(s) == CONFIG_TYPE_LIST))
		return 0;
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		return p->oom = 1, -ENOMEM;
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(s, i);
		const char *str = config_setting_get_string(e);

		if (!str) {
			field_error(p, e, "'%s' must hold strings only",
				    config_setting_name(s));
			continue;
		}
		if (f->check && f->check(str)) {
			field_error(p, e, "'%s': '%s' %s", f->key, str,
				    f->check(str));
			continue;
		}
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

/* The text of the file being parsed, by line. */
struct source {
	const char **line; /* line[i]: where line i + 1 starts */
	bool *wide; /* line i + 1 has an integer literal beyond 32 bits */
	size_t n_lines;
};

/* The integer literal after the '=' or ':' at op: its start, or NULL when
 * there is none; *raw, *end and *erange as strtoll() left them. */
static const char *read_literal(const char *op, long long *raw, char **end,
				bool *erange)
{
	const char *v = op + 1 + strspn(op + 1, " \t");

	errno = 0;
	*raw = strtoll(v, end, 0);
	*erange = errno == ERANGE;
	return *end == v ? NULL : v;
}

/*
 * Where each line of text starts, and which lines have a literal after
 * '=' or ':' that does not fit in 32 bits: only there can libconfig have
 * cut a value (int_literal_ok()), so only there is a line read again.
 * One pass, however many literals the file has.
 */
static int source_index(struct source *src, const char *text)
{
	size_t n = 1, i = 0;

	for (const char *t = text; (t = strchr(t, '\n')); t++)
		n++;
	src->line = malloc(n * sizeof(*src->line));
	src->wide = calloc(n, sizeof(*src->wide));
	if (!src->line || !src->wide)
		return -ENOMEM;
	src->n_lines = n;
	src->line[0] = text;
	for (const char *t = text; *(t += strcspn(t, "\n=:")); t++) {
		long long raw;
		bool erange;
		char *end;

		if (*t == '\n')
			src->line[++i] = t + 1;
		else if (read_literal(t, &raw, &end, &erange) &&
			 (erange || raw != (int32_t)raw))
			src->wide[i] = true;
	}
	return 0;
}

static void source_free(struct source *src)
{
	free(src->line);
	free(src->wide);
}

/*
 * libconfig 1.5 silently keeps only the low 32 bits of an integer literal
 * without an L suffix (5368709120 becomes 1073741824). Read the literal
 * from the source line again and refuse a value that did not survive.
 */
static bool int_literal_ok(struct parser *p, const config_setting_t *s)
{
	const char *name = config_setting_name(s);
	long long value = config_setting_get_int64(s);
	int n = config_setting_source_line(s);
	const char *line, *at, *eol, *cut = NULL;
	struct source *src = p->src;
	size_t len;
	int cut_len = 0;

	if (config_setting_type(s) != CONFIG_TYPE_INT || !name || !*name)
		return true;
	if (!src || n < 1 || (size_t)n > src->n_lines || !src->wide[n - 1])
		return true;
	line = src->line[n - 1];
	eol = strchrnul(line, '\n');
	len = strlen(name);
	/* The same key may stand several times on one line: the value is
	 * fine if one of its literals is exactly it. */
	for (at = line; (at = memmem(at, (size_t)(eol - at), name, len));
	     at++) {
		const char *v = at + len;
		long long raw;
		bool erange;
		char *end;

		if (at > line && (isalnum((unsigned char)at[-1]) ||
				  at[-1] == '_'))
			continue;
		v += strspn(v, " \t");
		if (*v != '=' && *v != ':')
			continue;
		v = read_literal(v, &raw, &end, &erange);
		if (!v)
			continue;
		if (!erange && raw == value)
			return true;
		if (!cut && (erange || (int32_t)raw == value)) {
			cut = v;
			cut_len = (int)(end - v);
		}
	}
	if (!cut)
		return true;
	field_error(p, s,
		    "'%s' = %.*s does not fit in 32 bits, which libconfig "
		    "keeps without a suffix: write %.*sL (or a size string "
		    "such as \"5G\")",
		    name, cut_len, cut, cut_len, cut);
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
			setting_error(p, s, "unknown key '%s' in %s",
				      config_setting_name(s), what);
			continue;
		}
		parse_field(p, f, s, obj);
	}
	for (const struct field *f = table; f->key; f++)
		if (f->required && !config_setting_get_member(g, f->key))
			setting_error(p, g, "%s: missing required key '%s'",
				      what, f->key);
}

static bool in_range(struct parser *p, const struct field *f,
		     const config_setting_t *s, long long v)
{
	if (v < f->min || v > f->max) {
		field_error(p, s, "'%s' = %lld is out of range [%" PRId64
				    ", %" PRId64 "]",
			      f->key, v, f->min, f->max);
		return false;
	}
	return true;
}

static void parse_field(struct parser *p, const struct field *f,
			const config_setting_t *s, void *obj)
{
	void *dst = (char *)obj + f->offset;
	char choices[256];
	const char *str;
	uint64_t size;
	long long v;
	int e;

	switch (f->type) {
	case F_STRING:
		str = config_setting_get_string(s);
		if (!expect(p, s, "a string", str))
			return;
		if (f->check && f->check(str)) {
			field_error(p, s, "'%s' = '%s' %s", f->key, str,
				    f->check(str));
			return;
		}
		*(char **)dst = conf_strdup(p->c, str);
		if (!*(char **)dst)
			p->oom = 1;
		return;
	case F_INT:
	case F_INT64:
	case F_UINT32:
	case F_UINT16:
		if (!expect(p, s, "an integer", is_int(s)) ||
		    !int_literal_ok(p, s))
			return;
		v = config_setting_get_int64(s);
		if (!in_range(p, f, s, v))
			return;
		if (f->type == F_INT)
			*(int *)dst = (int)v;
		else if (f->type == F_INT64)
			*(int64_t *)dst = v;
		else if (f->type == F_UINT32)
			*(uint32_t *)dst = (uint32_t)v;
		else
			*(uint16_t *)dst = (uint16_t)v;
		return;
	case F_SIZE:
		if (is_int(s)) {
			if (!int_literal_ok(p, s))
				return;
			v = config_setting_get_int64(s);
			if (v < 0) {
				field_error(p, s,
					    "'%s' = %lld: a size cannot be "
					      "negative",
					      f->key, v);
				return;
			}
			size = (uint64_t)v;
		} else if ((str = config_setting_get_string(s))) {
			if (config_parse_size(str, &size) < 0) {
				field_error(p, s,
					    "'%s' = \"%s\" is not a size "
					      "(an integer with an optional K, "
					      "M, G or T suffix)",
					      f->key, str);
				return;
			}
		} else {
			expect(p, s, "a size (integer or string)", false);
			return;
		}
		if (size < (uint64_t)f->min) {
			field_error(p, s, "'%s' must be at least %" PRId64,
				      f->key, f->min);
			return;
		}
		*(uint64_t *)dst = size;
		return;
	case F_BOOL:
		if (!expect(p, s, "a boolean (true or false)",
			    config_setting_type(s) == CONFIG_TYPE_BOOL))
			return;
		*(bool *)dst = config_setting_get_bool(s);
		return;
	case F_ENUM:
		str = config_setting_get_string(s);
		if (!expect(p, s, "a string", str))
			return;
		e = lookup_name(f->names, str);
		if (e < 0) {
			name_choices(f->names, choices, sizeof(choices));
			field_error(p, s,
				    "'%s' = \"%s\" is not one of: %s",
				      f->key, str, choices);
			return;
		}
		*(int *)dst = e;
		return;
	case F_ACCESS: {
		unsigned int flags = 0;
		int n;

		if (!expect(p, s, "an array of strings",
			    config_setting_type(s) == CONFIG_TYPE_ARRAY ||
				    config_setting_type(s) == CONFIG_TYPE_LIST))
			return;
		n = config_setting_length(s);
		for (int i = 0; i < n; i++) {
			const config_setting_t *el =
				config_setting_get_elem(s, i);

			str = config_setting_get_string(el);
			e = str ? lookup_name(f->names, str) : -1;
			if (e < 0) {
				name_choices(f->names, choices,
					     sizeof(choices));
				field_error(p, el,
					    "'%s': \"%s\" is not one of: %s",
					      f->key, str ? str : "?",
					      choices);
				continue;
			}
			flags |= (unsigned int)e;
		}
		*(unsigned int *)dst = flags;
		return;
	}
	case F_STRLIST:
		parse_string_list(p, s, f, (char ***)dst,
				  (size_t *)((char *)obj + f->count_offset));
		return;
	case F_INT64LIST: {
		int n = config_setting_length(s);
		int64_t *vals;

		if (!expect(p, s, "an array of integers",
			    config_setting_type(s) == CONFIG_TYPE_ARRAY ||
				    config_setting_type(s) == CONFIG_TYPE_LIST))
			return;
		vals = calloc((size_t)n + 1, sizeof(*vals));
		if (!vals) {
			p->oom = 1;
			return;
		}
		free(*(int64_t **)dst);
		*(int64_t **)dst = vals;
		for (int i = 0; i < n; i++) {
			const config_setting_t *el =
				config_setting_get_elem(s, i);

			if (!expect(p, el, "an integer", is_int(el)) ||
			    !int_literal_ok(p, el))
				continue;
			vals[i] = config_setting_get_int64(el);
			in_range(p, f, el, vals[i]);
		}
		*(size_t *)((char *)obj + f->count_offset) = (size_t)n;
		return;
	}
	case F_GROUP:
		if (f->indirect) {
			void **sub = dst;

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
			return;
		}
		if (f->set_flag)
			*(bool *)dst = true;
		parse_group(p, f->sub, s, f->key, obj);
		return;
	case F_IGNORE:
		return;
	}
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

			*(struct conf_loc *)elem = loc_of(p, g);
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
		prof->loc = loc_of(p, g);
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
		d->loc = loc_of(p, g);
		d->port = 1;
		d->gid_index = -1;
		d->gid_type = GIDK_ANY;
		set_label(p, "device", g);
		parse_group(p, conf_device_fields, g, "device", d);
		p->label[0] = '\0';
	}
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
			parse_group(p, conf_daemon_fields, s, "daemon",
				    &p->c->daemon);
			p->label[0] = '\0';
		}
		else if (streq(key, "devices"))
			parse_devices(p, s);
		else if (streq(key, "profiles"))
			parse_profiles(p, s);
		else
			setting_error(p, s,
				      "unknown top-level key '%s' (expected "
				      "%sdevices or profiles)",
				      key, main_file ? "daemon, " : "");
	}
}

#define CONFIG_MAX_FILE (16 << 20)

/* Parse one file's text; name is what locations say. */
void parser_text(struct parser *p, const char *name, const char *text,
		 bool main_file)
{
	struct source src = { 0 };
	config_t cfg;

	p->file = intern_file(p, name);
	if (source_index(&src, text) < 0) {
		source_free(&src);
		p->oom = 1;
		return;
	}
	p->src = &src;
	config_init(&cfg);
	if (!config_read_string(&cfg, text))
		parser_error(p, loc_at(p->file, config_error_line(&cfg)),
			     "syntax error: %s", config_error_text(&cfg));
	else
		parse_root(p, config_root_setting(&cfg), main_file);
	config_destroy(&cfg);
	p->src = NULL;
	source_free(&src);
}

static int read_text(const char *path, char **out)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t len = 0;
	int r;

	if (fd < 0)
		return -errno;
	/* A regular file says how big it is: one buffer, read at once,
	 * rather than one that doubles (and copies) its way up. */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    st.st_size < CONFIG_MAX_FILE) {
		buf = malloc((size_t)st.st_size + 1);
		if (!buf)
			return -ENOMEM;
		while (len < (size_t)st.st_size) {
			ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return -errno;
			if (n == 0)
				break;
			len += (size_t)n;
		}
		/* Grown meanwhile: read it the general way. */
		if (len == (size_t)st.st_size &&
		    read(fd, &(char){ 0 }, 1) == 0) {
			buf[len] = '\0';
			*out = TAKE_PTR(buf);
			return 0;
		}
		if (lseek(fd, 0, SEEK_SET) < 0)
			return -errno;
	}
	r = read_all(fd, CONFIG_MAX_FILE, -1, out, NULL);
	return r == -EMSGSIZE ? -EFBIG : r;
}

void parser_file(struct parser *p, const char *path, bool main_file)
{
	_cleanup_free_ char *text = NULL;
	int r = read_text(path, &text);

	if (r < 0) {
		parser_error(p, loc_at(intern_file(p, path), 0),
			     "cannot read: %s", strerror(-r));
		return;
	}
	parser_text(p, path, text, main_file);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.conf of the include directory, in name order. */
void parser_include(struct parser *p)
{
	const char *inc = p->c->daemon.include;
	_cleanup_free_ char *dir = NULL;
	struct dirent *de;
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
		parser_error(p, loc_at(intern_file(p, p->c->path), 0),
			     "include directory '%s': %s", dir,
			     strerror(errno));
		return;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char **nn;

		if (len < 6 || de->d_name[0] == '.' ||
		    !streq(de->d_name + len - 5, ".conf"))
			continue;
		nn = array_room(names, n, sizeof(*nn));
		if (!nn || asprintf(&nn[n], "%s/%s", dir, de->d_name) < 0) {
			names = nn ? nn : names;
			p->oom = 1;
			break;
		}
		names = nn;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		if (!p->oom)
			parser_file(p, names[i], false);
		free(names[i]);
	}
	free(names);
}

