// SPDX-License-Identifier: MIT
/*
 * Configuration parser. Each section is described by a table of fields
 * (key, type, where it goes); one generic walker applies a table to a
 * libconfig group, so adding a key is one line. A separate verify pass
 * then checks what a single key cannot: names, references, ranges that
 * depend on other keys.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libconfig.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <infiniband/verbs.h>

#include "config.h"
#include "log.h"

#define NAME_MAX_LEN 64
#define SIZE_LIMIT (1ULL << 50) /* 1 PiB: anything above is a typo */

enum field_type {
	F_STRING,
	F_INT,	  /* int, with min/max */
	F_UINT32, /* uint32_t, with min/max */
	F_UINT16,
	F_SIZE,	  /* uint64_t, "64M" or integer */
	F_BOOL,
	F_ENUM,	  /* int, from names */
	F_ACCESS, /* unsigned int IBV_ACCESS_* from a list of names */
	F_STRLIST,
	F_GROUP,  /* nested table, same struct */
	F_IGNORE, /* a known key handled elsewhere */
};

struct enum_name {
	const char *name;
	int value;
};

struct field {
	const char *key;
	enum field_type type;
	size_t offset;
	size_t count_offset; /* F_STRLIST: where the count goes */
	bool required;
	int64_t min, max;
	const struct enum_name *names; /* F_ENUM, F_ACCESS */
	const struct field *sub;       /* F_GROUP */
	/* F_STRING, F_STRLIST: NULL when the value is fine, else why not. */
	const char *(*check)(const char *value);
};

#define END_OF_TABLE { .key = NULL }

static const struct enum_name backing_names[] = {
	{ "memfd", MEM_MEMFD },
	{ "hugetlb", MEM_HUGETLB },
	{ "file", MEM_FILE },
	{ "anonymous", MEM_ANONYMOUS },
	{ NULL, 0 },
};

static const struct enum_name qp_type_names[] = {
	{ "rc", QPK_RC },
	{ "uc", QPK_UC },
	{ "ud", QPK_UD },
	{ NULL, 0 },
};

static const struct enum_name qp_state_names[] = {
	{ "reset", QPS_TARGET_RESET },
	{ "init", QPS_TARGET_INIT },
	{ NULL, 0 },
};

static const struct enum_name access_names[] = {
	{ "local_write", IBV_ACCESS_LOCAL_WRITE },
	{ "remote_write", IBV_ACCESS_REMOTE_WRITE },
	{ "remote_read", IBV_ACCESS_REMOTE_READ },
	{ "remote_atomic", IBV_ACCESS_REMOTE_ATOMIC },
	{ "mw_bind", IBV_ACCESS_MW_BIND },
	{ "relaxed_ordering", IBV_ACCESS_RELAXED_ORDERING },
	{ NULL, 0 },
};

static const char *enum_to_name(const struct enum_name *t, int v)
{
	for (; t->name; t++)
		if (t->value == v)
			return t->name;
	return "?";
}

const char *mem_backing_name(enum mem_backing b)
{
	return enum_to_name(backing_names, b);
}

const char *qp_kind_name(enum qp_kind k)
{
	return enum_to_name(qp_type_names, k);
}

const char *qp_target_state_name(enum qp_target_state s)
{
	return enum_to_name(qp_state_names, s);
}

static const char *check_listen(const char *s)
{
	char host[INET6_ADDRSTRLEN + 2];
	unsigned char addr[sizeof(struct in6_addr)];
	const char *colon = strrchr(s, ':');
	size_t len;
	char *end;
	long port;

	if (!strncmp(s, "unix:", 5))
		return s[5] == '/' ? NULL
				   : "is not an absolute unix socket path";
	if (!colon || colon == s)
		goto bad;
	len = (size_t)(colon - s);
	if (s[0] == '[') {
		if (colon[-1] != ']' || len < 3 || len - 2 >= sizeof(host))
			goto bad;
		memcpy(host, s + 1, len - 2);
		host[len - 2] = '\0';
		if (inet_pton(AF_INET6, host, addr) != 1)
			goto bad;
	} else {
		if (len >= sizeof(host))
			goto bad;
		memcpy(host, s, len);
		host[len] = '\0';
		if (inet_pton(AF_INET, host, addr) != 1)
			goto bad;
	}
	port = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 1 || port > 65535)
		goto bad;
	return NULL;
bad:
	return "is not IPV4:PORT, [IPV6]:PORT or unix:/PATH (numeric "
	       "addresses only)";
}

static const char *check_log_level(const char *s)
{
	return log_parse_level(s) < 0 ? "is not one of error, warning, "
					 "notice, info, debug"
				       : NULL;
}

#define FLD(st, k, t, m, ...)                                                  \
	{ .key = k, .type = t, .offset = offsetof(struct st, m), __VA_ARGS__ }
#define LIST(st, k, m, ...)                                                    \
	{ .key = k, .type = F_STRLIST, .offset = offsetof(struct st, m),       \
	  .count_offset = offsetof(struct st, n_##m), __VA_ARGS__ }

static const struct field http_fields[] = {
	LIST(conf_daemon, "listen", listen, .check = check_listen),
	FLD(conf_daemon, "token_file", F_STRING, token_file),
	END_OF_TABLE,
};

static const struct field daemon_fields[] = {
	FLD(conf_daemon, "runtime_dir", F_STRING, runtime_dir),
	FLD(conf_daemon, "control_socket", F_STRING, control_socket),
	FLD(conf_daemon, "admin_group", F_STRING, admin_group),
	{ .key = "http", .type = F_GROUP, .sub = http_fields },
	FLD(conf_daemon, "include", F_STRING, include),
	FLD(conf_daemon, "log_level", F_STRING, log_level,
	    .check = check_log_level),
	END_OF_TABLE,
};

static const struct field match_fields[] = {
	FLD(conf_device, "ibdev", F_STRING, ibdev, .required = true),
	END_OF_TABLE,
};

static const struct field gid_fields[] = {
	FLD(conf_device, "index", F_INT, gid_index, .min = 0, .max = 65535),
	END_OF_TABLE,
};

static const struct field device_fields[] = {
	FLD(conf_device, "name", F_STRING, name, .required = true),
	{ .key = "match", .type = F_GROUP, .sub = match_fields,
	  .required = true },
	FLD(conf_device, "port", F_INT, port, .min = 1, .max = 255),
	{ .key = "gid", .type = F_GROUP, .sub = gid_fields },
	END_OF_TABLE,
};

static const struct field memory_fields[] = {
	FLD(conf_memory, "name", F_STRING, name, .required = true),
	FLD(conf_memory, "size", F_SIZE, size, .required = true, .min = 1),
	FLD(conf_memory, "backing", F_ENUM, backing, .names = backing_names),
	FLD(conf_memory, "path", F_STRING, path),
	END_OF_TABLE,
};

static const struct field pd_fields[] = {
	FLD(conf_pd, "name", F_STRING, name, .required = true),
	END_OF_TABLE,
};

static const struct field mr_fields[] = {
	FLD(conf_mr, "name", F_STRING, name, .required = true),
	FLD(conf_mr, "pd", F_STRING, pd, .required = true),
	FLD(conf_mr, "memory", F_STRING, memory, .required = true),
	FLD(conf_mr, "access", F_ACCESS, access, .names = access_names),
	FLD(conf_mr, "offset", F_SIZE, offset),
	FLD(conf_mr, "length", F_SIZE, length),
	FLD(conf_mr, "zero_based", F_BOOL, zero_based),
	END_OF_TABLE,
};

static const struct field cq_fields[] = {
	FLD(conf_cq, "name", F_STRING, name, .required = true),
	FLD(conf_cq, "cqe", F_INT, cqe, .min = 1, .max = 4194304),
	FLD(conf_cq, "channel", F_BOOL, channel),
	FLD(conf_cq, "comp_vector", F_INT, comp_vector, .min = 0,
	    .max = 1023),
	END_OF_TABLE,
};

#define CAP(k, m) FLD(conf_qp, k, F_UINT32, cap.m, .min = 0, .max = 1 << 20)
static const struct field qp_cap_fields[] = {
	CAP("max_send_wr", max_send_wr),
	CAP("max_recv_wr", max_recv_wr),
	CAP("max_send_sge", max_send_sge),
	CAP("max_recv_sge", max_recv_sge),
	CAP("max_inline_data", max_inline_data),
	END_OF_TABLE,
};

static const struct field qp_fields[] = {
	FLD(conf_qp, "name", F_STRING, name, .required = true),
	FLD(conf_qp, "pd", F_STRING, pd, .required = true),
	FLD(conf_qp, "type", F_ENUM, type, .names = qp_type_names,
	    .required = true),
	FLD(conf_qp, "send_cq", F_STRING, send_cq, .required = true),
	FLD(conf_qp, "recv_cq", F_STRING, recv_cq, .required = true),
	{ .key = "cap", .type = F_GROUP, .sub = qp_cap_fields },
	FLD(conf_qp, "sq_sig_all", F_BOOL, sq_sig_all),
	FLD(conf_qp, "state", F_ENUM, state, .names = qp_state_names),
	FLD(conf_qp, "access", F_ACCESS, access, .names = access_names),
	FLD(conf_qp, "pkey_index", F_UINT16, pkey_index, .min = 0,
	    .max = 65535),
	FLD(conf_qp, "qkey", F_UINT32, qkey, .min = 0, .max = UINT32_MAX),
	END_OF_TABLE,
};

static const struct field allow_fields[] = {
	LIST(conf_profile, "users", allow_users),
	LIST(conf_profile, "groups", allow_groups),
	END_OF_TABLE,
};

/* Object lists inside a profile: parsed by parse_objects(). */
static const struct field profile_fields[] = {
	FLD(conf_profile, "name", F_STRING, name, .required = true),
	FLD(conf_profile, "device", F_STRING, device, .required = true),
	{ .key = "allow", .type = F_GROUP, .sub = allow_fields },
	{ .key = "memory", .type = F_IGNORE },
	{ .key = "pd", .type = F_IGNORE },
	{ .key = "mr", .type = F_IGNORE },
	{ .key = "cq", .type = F_IGNORE },
	{ .key = "qp", .type = F_IGNORE },
	/* Kinds of the spec this version rejects: see later_kinds. */
	{ .key = "srq", .type = F_IGNORE },
	{ .key = "mw", .type = F_IGNORE },
	{ .key = "dm", .type = F_IGNORE },
	{ .key = "xrcd", .type = F_IGNORE },
	{ .key = "ah", .type = F_IGNORE },
	END_OF_TABLE,
};

/* Kinds of the spec that this version does not create yet. */
static const char *const later_kinds[] = { "srq", "mw", "dm", "xrcd", "ah" };

struct object_list {
	const char *key;
	const struct field *fields;
	size_t elem_size;
	size_t array_offset;
	size_t count_offset;
	void (*defaults)(void *elem);
};

static void qp_defaults(void *elem)
{
	struct conf_qp *q = elem;

	q->cap = (struct conf_qp_cap){ .max_send_wr = 16, .max_recv_wr = 16,
				       .max_send_sge = 1, .max_recv_sge = 1 };
	q->state = QPS_TARGET_INIT;
	q->qkey = 0x11111111;
}

static void cq_defaults(void *elem)
{
	struct conf_cq *q = elem;

	q->cqe = 256;
}

static void mr_defaults(void *elem)
{
	struct conf_mr *m = elem;

	m->access = IBV_ACCESS_LOCAL_WRITE;
}

#define OBJLIST(k, st, arr, def)                                               \
	{ .key = k, .fields = st##_fields, .elem_size = sizeof(struct conf_##st), \
	  .array_offset = offsetof(struct conf_profile, arr),                  \
	  .count_offset = offsetof(struct conf_profile, n_##arr),              \
	  .defaults = def }

static const struct object_list object_lists[] = {
	OBJLIST("memory", memory, memory, NULL),
	OBJLIST("pd", pd, pd, NULL),
	OBJLIST("mr", mr, mr, mr_defaults),
	OBJLIST("cq", cq, cq, cq_defaults),
	OBJLIST("qp", qp, qp, qp_defaults),
};

/* ---- errors and locations ---- */

struct parser {
	struct config *c;
	int oom;
	const char *file; /* interned name of the file being parsed */
	const char *text; /* its text, for raw literals */
	char label[96];	  /* "mr 'ring'": the object being parsed */
};

static const char *intern_file(struct parser *p, const char *file)
{
	struct config *c = p->c;
	char **n;

	if (!file)
		file = c->path;
	for (size_t i = 0; i < c->n_files; i++)
		if (streq(c->files[i], file))
			return c->files[i];
	n = realloc(c->files, (c->n_files + 1) * sizeof(*n));
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

static struct conf_loc loc_of(struct parser *p, const config_setting_t *s)
{
	return (struct conf_loc){
		.file = p->file,
		.line = config_setting_source_line(s),
	};
}

static void _printf_(3, 4)
	add_error(struct parser *p, struct conf_loc loc, const char *fmt, ...)
{
	struct config *c = p->c;
	struct conf_error *n;
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	n = msg ? realloc(c->errors, (c->n_errors + 1) * sizeof(*n)) : NULL;
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

static void _printf_(3, 4)
	setting_error(struct parser *p, const config_setting_t *s,
		      const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0) {
		va_end(ap);
		p->oom = 1;
		return;
	}
	va_end(ap);
	add_error(p, loc_of(p, s), "%s", msg);
	free(msg);
}

/* An error about a value: prefixed with the object it belongs to. */
static void _printf_(3, 4)
	field_error(struct parser *p, const config_setting_t *s,
		    const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0) {
		va_end(ap);
		p->oom = 1;
		return;
	}
	va_end(ap);
	if (p->label[0])
		setting_error(p, s, "%s: %s", p->label, msg);
	else
		setting_error(p, s, "%s", msg);
	free(msg);
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
		v[(*n_out)++] = strdup(str);
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

/* The text of line n (1-based) of the file being parsed, or NULL. */
static const char *source_line(const struct parser *p, int n)
{
	const char *t = p->text;

	if (!t || n < 1)
		return NULL;
	while (--n > 0) {
		t = strchr(t, '\n');
		if (!t)
			return NULL;
		t++;
	}
	return t;
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
	const char *line, *at, *eol, *cut = NULL;
	int cut_len = 0;

	if (config_setting_type(s) != CONFIG_TYPE_INT || !name)
		return true;
	line = source_line(p, config_setting_source_line(s));
	eol = line ? strchrnul(line, '\n') : NULL;
	/* The same key may stand several times on one line: the value is
	 * fine if one of its literals is exactly it. */
	for (at = line; at && (at = strstr(at, name)) && at < eol; at++) {
		const char *v = at + strlen(name);
		long long raw;
		char *end;

		if (at > line && (isalnum((unsigned char)at[-1]) ||
				  at[-1] == '_'))
			continue;
		v += strspn(v, " \t");
		if (*v != '=' && *v != ':')
			continue;
		v += 1 + strspn(v + 1, " \t");
		errno = 0;
		raw = strtoll(v, &end, 0);
		if (end == v)
			continue;
		if (errno != ERANGE && raw == value)
			return true;
		if (!cut && (errno == ERANGE || (int32_t)raw == value)) {
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
		free(*(char **)dst);
		*(char **)dst = strdup(str);
		if (!*(char **)dst)
			p->oom = 1;
		return;
	case F_INT:
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
	case F_GROUP:
		parse_group(p, f->sub, s, f->key, obj);
		return;
	case F_IGNORE:
		return;
	}
}

/* ---- sections ---- */

static void *grow(struct parser *p, void **array, size_t *n, size_t size)
{
	char *a = realloc(*array, (*n + 1) * size);

	if (!a) {
		p->oom = 1;
		return NULL;
	}
	*array = a;
	memset(a + *n * size, 0, size);
	return a + (*n)++ * size;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (; *s; s++)
		if (!(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') ||
		      ('0' <= *s && *s <= '9') || *s == '_' || *s == '-' ||
		      *s == '.'))
			return false;
	return true;
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
	for (size_t k = 0; k < ARRAY_SIZE(object_lists); k++) {
		const struct object_list *ol = &object_lists[k];
		const config_setting_t *list =
			config_setting_get_member(pg, ol->key);
		void **array = (void **)((char *)prof + ol->array_offset);
		size_t *count = (size_t *)((char *)prof + ol->count_offset);
		int n;

		if (!list)
			continue;
		if (!expect(p, list, "a list of groups: ( { ... }, ... )",
			    config_setting_is_list(list)))
			continue;
		n = config_setting_length(list);
		for (int i = 0; i < n; i++) {
			const config_setting_t *g =
				config_setting_get_elem(list, i);
			void *elem = grow(p, array, count, ol->elem_size);

			if (!elem)
				return;
			/* Every object struct starts with its loc. */
			*(struct conf_loc *)elem = loc_of(p, g);
			if (ol->defaults)
				ol->defaults(elem);
			set_label(p, ol->key, g);
			parse_group(p, ol->fields, g, ol->key, elem);
			p->label[0] = '\0';
		}
	}
	for (size_t k = 0; k < ARRAY_SIZE(later_kinds); k++) {
		const config_setting_t *s =
			config_setting_get_member(pg, later_kinds[k]);

		if (s)
			setting_error(p, s,
				      "objects of kind '%s' are not supported "
				      "by this version of rdmad",
				      later_kinds[k]);
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
		parse_group(p, profile_fields, g, "profile", prof);
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
		set_label(p, "device", g);
		parse_group(p, device_fields, g, "device", d);
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
			parse_group(p, daemon_fields, s, "daemon",
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
static void parse_text(struct parser *p, const char *name, const char *text,
		       bool main_file)
{
	config_t cfg;

	p->file = intern_file(p, name);
	p->text = text;
	config_init(&cfg);
	if (!config_read_string(&cfg, text))
		add_error(p,
			  (struct conf_loc){ p->file, config_error_line(&cfg) },
			  "syntax error: %s", config_error_text(&cfg));
	else
		parse_root(p, config_root_setting(&cfg), main_file);
	config_destroy(&cfg);
	p->text = NULL;
}

static int read_text(const char *path, char **out)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0, cap = 4096;
	char *buf;

	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (len + 1 == cap) {
			char *nb = cap < CONFIG_MAX_FILE ? realloc(buf, cap * 2)
							 : NULL;

			if (!nb) {
				free(buf);
				return cap < CONFIG_MAX_FILE ? -ENOMEM : -EFBIG;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;

			free(buf);
			return err;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

static void parse_file(struct parser *p, const char *path, bool main_file)
{
	_cleanup_free_ char *text = NULL;
	int r = read_text(path, &text);

	if (r < 0) {
		add_error(p, (struct conf_loc){ intern_file(p, path), 0 },
			  "cannot read: %s", strerror(-r));
		return;
	}
	parse_text(p, path, text, main_file);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.conf of the include directory, in name order. */
static void parse_include(struct parser *p)
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
		add_error(p, (struct conf_loc){ intern_file(p, p->c->path), 0 },
			  "include directory '%s': %s", dir, strerror(errno));
		return;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char **nn;

		if (len < 6 || de->d_name[0] == '.' ||
		    !streq(de->d_name + len - 5, ".conf"))
			continue;
		nn = realloc(names, (n + 1) * sizeof(*nn));
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
			parse_file(p, names[i], false);
		free(names[i]);
	}
	free(names);
}

/* ---- verify ---- */

#define FIND(arr, n, nm)                                                       \
	({                                                                     \
		__typeof__(&(arr)[0]) _r = NULL;                               \
		for (size_t _i = 0; _i < (n); _i++)                            \
			if ((arr)[_i].name && streq((arr)[_i].name, (nm)))     \
				_r = &(arr)[_i];                               \
		_r;                                                            \
	})

/* Names are unique within their kind; report the second one. */
#define CHECK_NAMES(p, arr, n, what)                                           \
	for (size_t _i = 0; _i < (n); _i++) {                                  \
		if (!(arr)[_i].name)                                           \
			continue;                                              \
		if (!valid_name((arr)[_i].name))                               \
			add_error(p, (arr)[_i].loc,                            \
				  "%s name '%s' is invalid (1-64 of "          \
				  "A-Z a-z 0-9 _ - .)",                         \
				  what, (arr)[_i].name);                       \
		for (size_t _j = 0; _j < _i; _j++)                             \
			if ((arr)[_j].name &&                                  \
			    streq((arr)[_j].name, (arr)[_i].name))             \
				add_error(p, (arr)[_i].loc,                    \
					  "duplicate %s '%s' (first at "       \
					  "%s:%d)",                            \
					  what, (arr)[_i].name,                \
					  (arr)[_j].loc.file,                  \
					  (arr)[_j].loc.line);                 \
	}

static void check_ref(struct parser *p, struct conf_loc loc, bool found,
		      const char *kind, const char *name, const char *key,
		      const char *ref, const char *profile)
{
	if (ref && !found)
		add_error(p, loc,
			  "%s '%s': %s '%s' is not declared in profile '%s'",
			  kind, name, key, ref, profile);
}

static void verify_profile(struct parser *p, struct conf_profile *pr)
{
	const char *pn = pr->name ? pr->name : "?";

	CHECK_NAMES(p, pr->memory, pr->n_memory, "memory");
	CHECK_NAMES(p, pr->pd, pr->n_pd, "pd");
	CHECK_NAMES(p, pr->mr, pr->n_mr, "mr");
	CHECK_NAMES(p, pr->cq, pr->n_cq, "cq");
	CHECK_NAMES(p, pr->qp, pr->n_qp, "qp");

	if (pr->device && !config_device(p->c, pr->device))
		add_error(p, pr->loc,
			  "profile '%s': device '%s' is not declared", pn,
			  pr->device);

	for (size_t i = 0; i < pr->n_memory; i++) {
		struct conf_memory *m = &pr->memory[i];

		if (m->size > SIZE_LIMIT)
			add_error(p, m->loc,
				  "memory '%s': size %" PRIu64
				  " is larger than 1024T",
				  m->name, m->size);
		if (m->backing == MEM_FILE && !m->path)
			add_error(p, m->loc,
				  "memory '%s': backing \"file\" needs a path",
				  m->name);
		if (m->backing != MEM_FILE && m->path)
			add_error(p, m->loc,
				  "memory '%s': path is only for backing "
				  "\"file\"",
				  m->name);
		if (m->path && m->path[0] != '/')
			add_error(p, m->loc,
				  "memory '%s': path '%s' must be absolute",
				  m->name, m->path);
	}
	for (size_t i = 0; i < pr->n_mr; i++) {
		struct conf_mr *r = &pr->mr[i];
		struct conf_memory *m =
			r->memory ? FIND(pr->memory, pr->n_memory, r->memory)
				  : NULL;

		check_ref(p, r->loc, r->pd && FIND(pr->pd, pr->n_pd, r->pd),
			  "mr", r->name, "pd", r->pd, pn);
		check_ref(p, r->loc, m, "mr", r->name, "memory",
			  r->memory, pn);
		if (m && m->size &&
		    (r->offset >= m->size ||
		     r->length > m->size - r->offset))
			add_error(p, r->loc,
				  "mr '%s': offset %" PRIu64 " + length %" PRIu64
				  " is outside memory '%s' (%" PRIu64
				  " bytes)",
				  r->name, r->offset, r->length, m->name,
				  m->size);
		if ((r->access & (IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_ATOMIC)) &&
		    !(r->access & IBV_ACCESS_LOCAL_WRITE))
			add_error(p, r->loc,
				  "mr '%s': remote_write and remote_atomic "
				  "need local_write",
				  r->name);
	}
	for (size_t i = 0; i < pr->n_qp; i++) {
		struct conf_qp *q = &pr->qp[i];

		check_ref(p, q->loc, q->pd && FIND(pr->pd, pr->n_pd, q->pd),
			  "qp", q->name, "pd", q->pd, pn);
		check_ref(p, q->loc,
			  q->send_cq && FIND(pr->cq, pr->n_cq, q->send_cq),
			  "qp", q->name, "send_cq", q->send_cq, pn);
		check_ref(p, q->loc,
			  q->recv_cq && FIND(pr->cq, pr->n_cq, q->recv_cq),
			  "qp", q->name, "recv_cq", q->recv_cq, pn);
		if (q->type == QPK_UD &&
		    (q->access & ~IBV_ACCESS_LOCAL_WRITE))
			add_error(p, q->loc,
				  "qp '%s': a UD QP takes no remote access "
				  "flags",
				  q->name);
		if (q->type == QPK_UC &&
		    (q->access & (IBV_ACCESS_REMOTE_READ |
				  IBV_ACCESS_REMOTE_ATOMIC)))
			add_error(p, q->loc,
				  "qp '%s': a UC QP allows remote_write only "
				  "(no remote_read or remote_atomic)",
				  q->name);
	}
}

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

static void verify(struct parser *p)
{
	struct config *c = p->c;

	CHECK_NAMES(p, c->devices, c->n_devices, "device");
	CHECK_NAMES(p, c->profiles, c->n_profiles, "profile");
	for (size_t i = 0; i < c->n_profiles; i++)
		verify_profile(p, &c->profiles[i]);
}

/* ---- entry points ---- */

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

	if (!d->runtime_dir && !(d->runtime_dir = strdup("/run/rdmad")))
		return -ENOMEM;
	if (!d->control_socket &&
	    asprintf(&d->control_socket, "%s/rdmad.sock", d->runtime_dir) < 0) {
		d->control_socket = NULL;
		return -ENOMEM;
	}
	if (!d->log_level && !(d->log_level = strdup("info")))
		return -ENOMEM;
	if (!d->listen) {
		d->listen = calloc(2, sizeof(char *));
		if (!d->listen || !(d->listen[0] = strdup(CONFIG_DEFAULT_LISTEN)))
			return -ENOMEM;
		d->n_listen = 1;
	}
	return 0;
}

static int finish(struct parser *p)
{
	if (!p->oom)
		verify(p);
	/* Report in file and line order, whatever pass found them. */
	if (p->c->n_errors)
		qsort(p->c->errors, p->c->n_errors, sizeof(*p->c->errors),
		      cmp_error);
	if (p->oom || set_defaults(p->c) < 0) {
		config_free(p->c);
		return -ENOMEM;
	}
	return 0;
}

int config_load(const char *path, struct config **out)
{
	struct parser p = { 0 };
	int r;

	r = config_new(path, &p.c);
	if (r < 0)
		return r;
	parse_file(&p, path, true);
	if (!p.c->n_errors)
		parse_include(&p);
	r = finish(&p);
	if (r < 0)
		return r;
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
	parse_text(&p, name, text, true);
	r = finish(&p);
	if (r < 0)
		return r;
	*out = p.c;
	return 0;
}

const struct conf_device *config_device(const struct config *c,
					const char *name)
{
	for (size_t i = 0; i < c->n_devices; i++)
		if (c->devices[i].name && streq(c->devices[i].name, name))
			return &c->devices[i];
	return NULL;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void free_profile(struct conf_profile *pr)
{
	free(pr->name);
	free(pr->device);
	free_strv(pr->allow_users, pr->n_allow_users);
	free_strv(pr->allow_groups, pr->n_allow_groups);
	for (size_t i = 0; i < pr->n_memory; i++) {
		free(pr->memory[i].name);
		free(pr->memory[i].path);
	}
	free(pr->memory);
	for (size_t i = 0; i < pr->n_pd; i++)
		free(pr->pd[i].name);
	free(pr->pd);
	for (size_t i = 0; i < pr->n_mr; i++) {
		free(pr->mr[i].name);
		free(pr->mr[i].pd);
		free(pr->mr[i].memory);
	}
	free(pr->mr);
	for (size_t i = 0; i < pr->n_cq; i++)
		free(pr->cq[i].name);
	free(pr->cq);
	for (size_t i = 0; i < pr->n_qp; i++) {
		free(pr->qp[i].name);
		free(pr->qp[i].pd);
		free(pr->qp[i].send_cq);
		free(pr->qp[i].recv_cq);
	}
	free(pr->qp);
}

struct config *config_free(struct config *c)
{
	struct conf_daemon *d;

	if (!c)
		return NULL;
	d = &c->daemon;
	free(d->runtime_dir);
	free(d->control_socket);
	free(d->admin_group);
	free_strv(d->listen, d->n_listen);
	free(d->token_file);
	free(d->include);
	free(d->log_level);
	for (size_t i = 0; i < c->n_devices; i++) {
		free(c->devices[i].name);
		free(c->devices[i].ibdev);
	}
	free(c->devices);
	for (size_t i = 0; i < c->n_profiles; i++)
		free_profile(&c->profiles[i]);
	free(c->profiles);
	for (size_t i = 0; i < c->n_errors; i++)
		free(c->errors[i].msg);
	free(c->errors);
	free_strv(c->files, c->n_files);
	free(c->path);
	free(c);
	return NULL;
}
