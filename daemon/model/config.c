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
#include <grp.h>
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
	F_INT64LIST, /* int64_t array with a count, with min/max */
	F_INT64,  /* int64_t, with min/max */
	F_GROUP,  /* nested table, same struct; offset: a bool set when
		     present, if set_flag */
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
	bool set_flag;		       /* F_GROUP: set the bool at offset */
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
	{ "raw_packet", QPK_RAW_PACKET },
	{ "xrc_send", QPK_XRC_SEND },
	{ "xrc_recv", QPK_XRC_RECV },
	{ NULL, 0 },
};

static const struct enum_name qp_state_names[] = {
	{ "reset", QPS_TARGET_RESET },
	{ "init", QPS_TARGET_INIT },
	{ "rtr", QPS_TARGET_RTR },
	{ "rts", QPS_TARGET_RTS },
	{ NULL, 0 },
};

static const struct enum_name srq_type_names[] = {
	{ "basic", SRQK_BASIC },
	{ "xrc", SRQK_XRC },
	{ NULL, 0 },
};

static const struct enum_name gid_type_names[] = {
	{ "ib", GIDK_IB },
	{ "roce_v1", GIDK_ROCE_V1 },
	{ "roce_v2", GIDK_ROCE_V2 },
	{ NULL, 0 },
};

static const struct enum_name gid_family_names[] = {
	{ "ipv4", GIDF_IPV4 },
	{ "ipv6", GIDF_IPV6 },
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

static const char *const kind_names[OBJ_KIND_MAX] = {
	[OBJ_MEMORY] = "memory", [OBJ_XRCD] = "xrcd", [OBJ_PD] = "pd",
	[OBJ_DM] = "dm",	 [OBJ_MR] = "mr",     [OBJ_MW] = "mw",
	[OBJ_CQ] = "cq",	 [OBJ_SRQ] = "srq",   [OBJ_QP] = "qp",
	[OBJ_AH] = "ah",
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

const char *srq_kind_name(enum srq_kind k)
{
	return enum_to_name(srq_type_names, k);
}

const char *obj_kind_name(enum obj_kind k)
{
	return (unsigned int)k < OBJ_KIND_MAX ? kind_names[k] : "?";
}

int obj_kind_from_name(const char *name)
{
	for (int k = 0; k < OBJ_KIND_MAX; k++)
		if (streq(kind_names[k], name))
			return k;
	return -EINVAL;
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

/* A GID: IPv6 notation, or an IPv4 address (taken as IPv4-mapped). */
int config_parse_gid(const char *s, uint8_t gid[16])
{
	struct in_addr a4;

	if (inet_pton(AF_INET6, s, gid) == 1)
		return 0;
	if (inet_pton(AF_INET, s, &a4) != 1)
		return -EINVAL;
	memset(gid, 0, 10);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, &a4, 4);
	return 0;
}

static const char *check_gid(const char *s)
{
	uint8_t gid[16];

	return config_parse_gid(s, gid) ? "is not a GID (IPv6 notation, or "
					  "IPv4 for an IPv4-mapped GID)"
					: NULL;
}

static const char *check_abs_path(const char *s)
{
	return s[0] == '/' ? NULL : "is not an absolute path";
}

/* A group that exists now: a name, or a number. */
static const char *check_group(const char *s)
{
	char *end;

	if (getgrnam(s))
		return NULL;
	strtoul(s, &end, 10);
	return *s && !*end ? NULL : "is not a known group (name or number)";
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
	FLD(conf_daemon, "admin_group", F_STRING, admin_group,
	    .check = check_group),
	FLD(conf_daemon, "control_group", F_STRING, control_group,
	    .check = check_group),
	{ .key = "http", .type = F_GROUP, .sub = http_fields },
	FLD(conf_daemon, "include", F_STRING, include),
	FLD(conf_daemon, "log_level", F_STRING, log_level,
	    .check = check_log_level),
	END_OF_TABLE,
};

static const struct field match_fields[] = {
	FLD(conf_device, "ibdev", F_STRING, ibdev),
	FLD(conf_device, "guid", F_STRING, guid),
	FLD(conf_device, "netdev", F_STRING, netdev),
	FLD(conf_device, "pci", F_STRING, pci),
	FLD(conf_device, "driver", F_STRING, driver),
	END_OF_TABLE,
};

static const struct field gid_fields[] = {
	FLD(conf_device, "index", F_INT, gid_index, .min = 0, .max = 65535),
	FLD(conf_device, "type", F_ENUM, gid_type, .names = gid_type_names),
	FLD(conf_device, "family", F_ENUM, gid_family,
	    .names = gid_family_names),
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
	FLD(conf_memory, "path", F_STRING, path, .check = check_abs_path),
	END_OF_TABLE,
};

static const struct field xrcd_fields[] = {
	FLD(conf_xrcd, "name", F_STRING, name, .required = true),
	FLD(conf_xrcd, "file", F_STRING, file, .check = check_abs_path),
	END_OF_TABLE,
};

static const struct field pd_fields[] = {
	FLD(conf_pd, "name", F_STRING, name, .required = true),
	END_OF_TABLE,
};

static const struct field dm_fields[] = {
	FLD(conf_dm, "name", F_STRING, name, .required = true),
	FLD(conf_dm, "size", F_SIZE, size, .required = true, .min = 1),
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

static const struct field mw_fields[] = {
	FLD(conf_mw, "name", F_STRING, name, .required = true),
	FLD(conf_mw, "pd", F_STRING, pd, .required = true),
	FLD(conf_mw, "type", F_INT, type, .min = 1, .max = 2),
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

static const struct field srq_fields[] = {
	FLD(conf_srq, "name", F_STRING, name, .required = true),
	FLD(conf_srq, "pd", F_STRING, pd, .required = true),
	FLD(conf_srq, "type", F_ENUM, type, .names = srq_type_names),
	FLD(conf_srq, "max_wr", F_UINT32, max_wr, .min = 1, .max = 1 << 24),
	FLD(conf_srq, "max_sge", F_UINT32, max_sge, .min = 1, .max = 1024),
	FLD(conf_srq, "srq_limit", F_UINT32, srq_limit, .min = 0,
	    .max = 1 << 24),
	FLD(conf_srq, "xrcd", F_STRING, xrcd),
	FLD(conf_srq, "cq", F_STRING, cq),
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

/* The keys of struct qp_path (qpstate.h), with their ranges. */
#define PATH(k, lo, hi)                                                        \
	FLD(conf_qp, #k, F_INT64, path.k, .min = (lo), .max = (hi))
static const struct field qp_path_fields[] = {
	FLD(conf_qp, "dgid", F_STRING, path.dgid, .check = check_gid),
	PATH(port_num, 1, 255),
	PATH(pkey_index, 0, 65535),
	PATH(qkey, 0, UINT32_MAX),
	PATH(dqpn, 0, (1 << 24) - 1),
	PATH(rq_psn, 0, (1 << 24) - 1),
	PATH(sq_psn, 0, (1 << 24) - 1),
	PATH(mtu, 256, 4096),
	PATH(max_dest_rd_atomic, 0, 255),
	PATH(min_rnr_timer, 0, 31),
	PATH(dlid, 0, 65535),
	PATH(sl, 0, 15),
	PATH(src_path_bits, 0, 127),
	PATH(static_rate, 0, 255),
	PATH(sgid_index, 0, 255),
	PATH(hop_limit, 0, 255),
	PATH(traffic_class, 0, 255),
	PATH(flow_label, 0, (1 << 20) - 1),
	PATH(timeout, 0, 31),
	PATH(retry_cnt, 0, 7),
	PATH(rnr_retry, 0, 7),
	PATH(max_rd_atomic, 0, 255),
	END_OF_TABLE,
};

static const struct field qp_fields[] = {
	FLD(conf_qp, "name", F_STRING, name, .required = true),
	FLD(conf_qp, "pd", F_STRING, pd),
	FLD(conf_qp, "type", F_ENUM, type, .names = qp_type_names,
	    .required = true),
	FLD(conf_qp, "send_cq", F_STRING, send_cq),
	FLD(conf_qp, "recv_cq", F_STRING, recv_cq),
	FLD(conf_qp, "srq", F_STRING, srq),
	FLD(conf_qp, "xrcd", F_STRING, xrcd),
	{ .key = "cap", .type = F_GROUP, .sub = qp_cap_fields },
	FLD(conf_qp, "sq_sig_all", F_BOOL, sq_sig_all),
	FLD(conf_qp, "state", F_ENUM, state, .names = qp_state_names),
	FLD(conf_qp, "access", F_ACCESS, access, .names = access_names),
	FLD(conf_qp, "pkey_index", F_UINT16, pkey_index, .min = 0,
	    .max = 65535),
	FLD(conf_qp, "qkey", F_UINT32, qkey, .min = 0, .max = UINT32_MAX),
	FLD(conf_qp, "peer", F_STRING, peer),
	{ .key = "path", .type = F_GROUP, .sub = qp_path_fields,
	  .offset = offsetof(struct conf_qp, has_path), .set_flag = true },
	END_OF_TABLE,
};

static const struct field ah_fields[] = {
	FLD(conf_ah, "name", F_STRING, name, .required = true),
	FLD(conf_ah, "pd", F_STRING, pd, .required = true),
	FLD(conf_ah, "dgid", F_STRING, dgid, .required = true,
	    .check = check_gid),
	FLD(conf_ah, "sgid_index", F_INT, sgid_index, .min = 0, .max = 255),
	FLD(conf_ah, "hop_limit", F_INT, hop_limit, .min = 0, .max = 255),
	FLD(conf_ah, "traffic_class", F_INT, traffic_class, .min = 0,
	    .max = 255),
	FLD(conf_ah, "sl", F_INT, sl, .min = 0, .max = 15),
	FLD(conf_ah, "dlid", F_INT, dlid, .min = 0, .max = 65535),
	END_OF_TABLE,
};

static const struct field allow_fields[] = {
	LIST(conf_profile, "users", allow_users),
	LIST(conf_profile, "groups", allow_groups),
	{ .key = "uids", .type = F_INT64LIST,
	  .offset = offsetof(struct conf_profile, allow_uids),
	  .count_offset = offsetof(struct conf_profile, n_allow_uids),
	  .min = 0, .max = UINT32_MAX - 1 },
	END_OF_TABLE,
};

/* Object lists inside a profile: parsed by parse_objects(). */
static const struct field profile_fields[] = {
	FLD(conf_profile, "name", F_STRING, name, .required = true),
	FLD(conf_profile, "device", F_STRING, device, .required = true),
	{ .key = "allow", .type = F_GROUP, .sub = allow_fields },
	/* The object lists: parse_objects() reads them. */
	{ .key = "memory", .type = F_IGNORE },
	{ .key = "xrcd", .type = F_IGNORE },
	{ .key = "pd", .type = F_IGNORE },
	{ .key = "dm", .type = F_IGNORE },
	{ .key = "mr", .type = F_IGNORE },
	{ .key = "mw", .type = F_IGNORE },
	{ .key = "cq", .type = F_IGNORE },
	{ .key = "srq", .type = F_IGNORE },
	{ .key = "qp", .type = F_IGNORE },
	{ .key = "ah", .type = F_IGNORE },
	END_OF_TABLE,
};

static void qp_defaults(void *elem)
{
	struct conf_qp *q = elem;

	q->cap = (struct conf_qp_cap){ .max_send_wr = 16, .max_recv_wr = 16,
				       .max_send_sge = 1, .max_recv_sge = 1 };
	q->state = QPS_TARGET_INIT;
	q->qkey = 0x11111111;
	/* -1: not given (qp_path_init's default or the device's). */
	memset(&q->path.port_num, 0xff,
	       sizeof(q->path) - offsetof(struct conf_path, port_num));
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

static void mw_defaults(void *elem)
{
	struct conf_mw *m = elem;

	m->type = 1;
}

static void srq_defaults(void *elem)
{
	struct conf_srq *q = elem;

	q->max_wr = 256;
	q->max_sge = 1;
}

static void ah_defaults(void *elem)
{
	struct conf_ah *a = elem;

	a->sgid_index = -1;
	a->hop_limit = 64;
}

struct kind_table {
	const struct field *fields;
	size_t size;
	void (*defaults)(void *elem);
};

#define KIND(k, st, def)                                                       \
	[k] = { .fields = st##_fields, .size = sizeof(struct conf_##st),        \
		.defaults = def }

static const struct kind_table kinds[OBJ_KIND_MAX] = {
	KIND(OBJ_MEMORY, memory, NULL), KIND(OBJ_XRCD, xrcd, NULL),
	KIND(OBJ_PD, pd, NULL),		KIND(OBJ_DM, dm, NULL),
	KIND(OBJ_MR, mr, mr_defaults),	KIND(OBJ_MW, mw, mw_defaults),
	KIND(OBJ_CQ, cq, cq_defaults),	KIND(OBJ_SRQ, srq, srq_defaults),
	KIND(OBJ_QP, qp, qp_defaults),	KIND(OBJ_AH, ah, ah_defaults),
};

size_t conf_obj_size(enum obj_kind k)
{
	return kinds[k].size;
}

const void *conf_obj(const struct conf_profile *p, enum obj_kind k, size_t i)
{
	return (const char *)p->objs[k] + i * kinds[k].size;
}

const char *conf_obj_name(const void *obj)
{
	return *(char *const *)((const char *)obj + sizeof(struct conf_loc));
}

const void *conf_obj_find(const struct conf_profile *p, enum obj_kind k,
			  const char *name)
{
	for (size_t i = 0; name && i < p->n_objs[k]; i++) {
		const void *o = conf_obj(p, k, i);

		if (conf_obj_name(o) && streq(conf_obj_name(o), name))
			return o;
	}
	return NULL;
}

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
	add_error(struct parser *p, struct conf_loc loc, const char *fmt, ...)
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
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		const struct kind_table *kt = &kinds[k];
		const config_setting_t *list =
			config_setting_get_member(pg, kind_names[k]);
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
			void *elem = grow(p, &prof->objs[k], &prof->n_objs[k],
					  kt->size);

			if (!elem)
				return;
			*(struct conf_loc *)elem = loc_of(p, g);
			if (kt->defaults)
				kt->defaults(elem);
			set_label(p, kind_names[k], g);
			parse_group(p, kt->fields, g, kind_names[k], elem);
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
		d->gid_type = GIDK_ANY;
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
	int r;

	if (fd < 0)
		return -errno;
	r = read_all(fd, CONFIG_MAX_FILE, -1, out, NULL);
	return r == -EMSGSIZE ? -EFBIG : r;
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

static void check_names(struct parser *p, const char *what, const void *arr,
			size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++) {
		const void *o = (const char *)arr + i * size;
		const struct conf_loc *loc = o;
		const char *name = conf_obj_name(o);

		if (!name)
			continue;
		if (!valid_name(name))
			add_error(p, *loc,
				  "%s name '%s' is invalid (1-64 of A-Z a-z "
				  "0-9 _ - .)",
				  what, name);
		for (size_t j = 0; j < i; j++) {
			const void *prev = (const char *)arr + j * size;
			const struct conf_loc *pl = prev;

			if (conf_obj_name(prev) &&
			    streq(conf_obj_name(prev), name)) {
				add_error(p, *loc,
					  "duplicate %s '%s' (first at %s:%d)",
					  what, name, pl->file, pl->line);
				break;
			}
		}
	}
}

/* Which key of which kind names an object of which kind. */
struct reference {
	enum obj_kind kind;
	const char *key;
	size_t offset; /* char * in struct conf_<kind> */
	enum obj_kind target;
};

#define REF(k, st, key_, tgt)                                                  \
	{ k, #key_, offsetof(struct conf_##st, key_), tgt }

static const struct reference references[] = {
	REF(OBJ_MR, mr, pd, OBJ_PD),	   REF(OBJ_MR, mr, memory, OBJ_MEMORY),
	REF(OBJ_MW, mw, pd, OBJ_PD),	   REF(OBJ_SRQ, srq, pd, OBJ_PD),
	REF(OBJ_SRQ, srq, xrcd, OBJ_XRCD), REF(OBJ_SRQ, srq, cq, OBJ_CQ),
	REF(OBJ_QP, qp, pd, OBJ_PD),	   REF(OBJ_QP, qp, send_cq, OBJ_CQ),
	REF(OBJ_QP, qp, recv_cq, OBJ_CQ),  REF(OBJ_QP, qp, srq, OBJ_SRQ),
	REF(OBJ_QP, qp, xrcd, OBJ_XRCD),   REF(OBJ_QP, qp, peer, OBJ_QP),
	REF(OBJ_AH, ah, pd, OBJ_PD),
};

size_t conf_obj_refs(enum obj_kind k, const void *obj, struct conf_ref *out,
		     size_t max)
{
	size_t n = 0;

	for (size_t r = 0; r < ARRAY_SIZE(references) && n < max; r++) {
		const char *name;

		if (references[r].kind != k)
			continue;
		name = *(char *const *)((const char *)obj + references[r].offset);
		if (name)
			out[n++] = (struct conf_ref){ references[r].target,
						      name };
	}
	return n;
}

static void check_references(struct parser *p, const struct conf_profile *pr)
{
	for (size_t r = 0; r < ARRAY_SIZE(references); r++) {
		const struct reference *ref = &references[r];

		for (size_t i = 0; i < pr->n_objs[ref->kind]; i++) {
			const void *o = conf_obj(pr, ref->kind, i);
			const char *name =
				*(char *const *)((const char *)o + ref->offset);

			if (name && !conf_obj_find(pr, ref->target, name))
				add_error(p, *(const struct conf_loc *)o,
					  "%s '%s': %s '%s' is not declared "
					  "in profile '%s'",
					  kind_names[ref->kind],
					  conf_obj_name(o), ref->key, name,
					  pr->name ? pr->name : "?");
		}
	}
}

static void verify_memory(struct parser *p, const struct conf_memory *m)
{
	if (m->size > SIZE_LIMIT)
		add_error(p, m->loc,
			  "memory '%s': size %" PRIu64 " is larger than 1024T",
			  m->name, m->size);
	if (m->backing == MEM_FILE && !m->path)
		add_error(p, m->loc,
			  "memory '%s': backing \"file\" needs a path",
			  m->name);
	if (m->backing != MEM_FILE && m->path)
		add_error(p, m->loc,
			  "memory '%s': path is only for backing \"file\"",
			  m->name);
}

static void verify_mr(struct parser *p, const struct conf_profile *pr,
		      const struct conf_mr *r)
{
	const struct conf_memory *m = conf_obj_find(pr, OBJ_MEMORY, r->memory);

	if (m && m->size &&
	    (r->offset >= m->size || r->length > m->size - r->offset))
		add_error(p, r->loc,
			  "mr '%s': offset %" PRIu64 " + length %" PRIu64
			  " is outside memory '%s' (%" PRIu64 " bytes)",
			  r->name, r->offset, r->length, m->name, m->size);
	if ((r->access &
	     (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(r->access & IBV_ACCESS_LOCAL_WRITE))
		add_error(p, r->loc,
			  "mr '%s': remote_write and remote_atomic need "
			  "local_write",
			  r->name);
}

static void verify_srq(struct parser *p, const struct conf_srq *q)
{
	if (q->type == SRQK_XRC && (!q->xrcd || !q->cq))
		add_error(p, q->loc, "srq '%s': an XRC SRQ needs xrcd and cq",
			  q->name);
	if (q->type == SRQK_BASIC && (q->xrcd || q->cq))
		add_error(p, q->loc,
			  "srq '%s': xrcd and cq are for type \"xrc\" only",
			  q->name);
	if (q->srq_limit > q->max_wr)
		add_error(p, q->loc,
			  "srq '%s': srq_limit %u is above max_wr %u", q->name,
			  q->srq_limit, q->max_wr);
}

/* What each QP type takes: the rest is an error. */
static void verify_qp_shape(struct parser *p, const struct conf_qp *q)
{
	bool xrc_recv = q->type == QPK_XRC_RECV;
	bool xrc_send = q->type == QPK_XRC_SEND;

	if (!xrc_recv && !q->pd)
		add_error(p, q->loc, "qp '%s': missing required key 'pd'",
			  q->name);
	if (!xrc_recv && !q->send_cq)
		add_error(p, q->loc, "qp '%s': missing required key 'send_cq'",
			  q->name);
	if (!xrc_recv && !xrc_send && !q->recv_cq)
		add_error(p, q->loc, "qp '%s': missing required key 'recv_cq'",
			  q->name);
	if (xrc_recv && (q->send_cq || q->recv_cq || q->srq))
		add_error(p, q->loc,
			  "qp '%s': an xrc_recv QP takes no send_cq, recv_cq "
			  "or srq (its XRC SRQ receives)",
			  q->name);
	if (xrc_recv != (q->xrcd != NULL))
		add_error(p, q->loc,
			  "qp '%s': xrcd is %s for type \"%s\"", q->name,
			  xrc_recv ? "required" : "not allowed",
			  qp_kind_name(q->type));
	if (xrc_send && (q->recv_cq || q->srq))
		add_error(p, q->loc,
			  "qp '%s': an xrc_send QP takes no recv_cq or srq",
			  q->name);
	if (q->type == QPK_UD && (q->access & ~IBV_ACCESS_LOCAL_WRITE))
		add_error(p, q->loc,
			  "qp '%s': a UD QP takes no remote access flags",
			  q->name);
	if (q->type == QPK_UC &&
	    (q->access & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
		add_error(p, q->loc,
			  "qp '%s': a UC QP allows remote_write only (no "
			  "remote_read or remote_atomic)",
			  q->name);
}

static bool connected_type(enum qp_kind k)
{
	return k == QPK_RC || k == QPK_UC || k == QPK_XRC_SEND ||
	       k == QPK_XRC_RECV;
}

/* State rtr/rts: where the remote end comes from. */
static void verify_qp_remote(struct parser *p, const struct conf_profile *pr,
			     const struct conf_qp *q)
{
	bool beyond_init = q->state >= QPS_TARGET_RTR;
	const struct conf_qp *peer = conf_obj_find(pr, OBJ_QP, q->peer);
	int64_t mtu = q->path.mtu;

	if (q->peer && q->has_path)
		add_error(p, q->loc, "qp '%s': give peer or path, not both",
			  q->name);
	if (!beyond_init && (q->peer || q->has_path))
		add_error(p, q->loc,
			  "qp '%s': peer and path are for state \"rtr\" or "
			  "\"rts\", not \"%s\"",
			  q->name, qp_target_state_name(q->state));
	if (beyond_init && connected_type(q->type) && !q->peer &&
	    !(q->has_path && q->path.dqpn >= 0))
		add_error(p, q->loc,
			  "qp '%s': state \"%s\" needs the remote end: peer = "
			  "\"QP\", or a path with dqpn",
			  q->name, qp_target_state_name(q->state));
	if (q->has_path && mtu >= 0 && mtu != 256 && mtu != 512 &&
	    mtu != 1024 && mtu != 2048 && mtu != 4096)
		add_error(p, q->loc,
			  "qp '%s': path mtu %" PRId64
			  " is not one of 256, 512, 1024, 2048, 4096",
			  q->name, mtu);
	if (!peer)
		return;
	if (peer == q) {
		add_error(p, q->loc, "qp '%s': a QP cannot be its own peer",
			  q->name);
		return;
	}
	if (!(q->type == QPK_RC || q->type == QPK_UC) ||
	    peer->type != q->type)
		add_error(p, q->loc,
			  "qp '%s': peer '%s' must be of the same type, rc or "
			  "uc (here %s and %s)",
			  q->name, peer->name, qp_kind_name(q->type),
			  qp_kind_name(peer->type));
	/* A loopback pair: each names the other. */
	if (!peer->peer || !streq(peer->peer, q->name))
		add_error(p, q->loc,
			  "qp '%s': its peer '%s' must name '%s' as peer too",
			  q->name, peer->name, q->name);
}

static void verify_device(struct parser *p, const struct conf_device *d)
{
	if (!d->ibdev && !d->guid && !d->netdev && !d->pci && !d->driver)
		add_error(p, d->loc,
			  "device '%s': match needs at least one of ibdev, "
			  "guid, netdev, pci, driver",
			  d->name ? d->name : "?");
	if (d->gid_index >= 0 &&
	    (d->gid_type != GIDK_ANY || d->gid_family != GIDF_ANY))
		add_error(p, d->loc,
			  "device '%s': gid takes index, or type and family, "
			  "not both",
			  d->name ? d->name : "?");
}

static void verify_profile(struct parser *p, struct conf_profile *pr)
{
	for (int k = 0; k < OBJ_KIND_MAX; k++)
		check_names(p, kind_names[k], pr->objs[k], pr->n_objs[k],
			    kinds[k].size);
	if (pr->device && !config_device(p->c, pr->device))
		add_error(p, pr->loc,
			  "profile '%s': device '%s' is not declared",
			  pr->name ? pr->name : "?", pr->device);
	check_references(p, pr);

	for (size_t i = 0; i < pr->n_objs[OBJ_MEMORY]; i++)
		verify_memory(p, conf_obj(pr, OBJ_MEMORY, i));
	for (size_t i = 0; i < pr->n_objs[OBJ_MR]; i++)
		verify_mr(p, pr, conf_obj(pr, OBJ_MR, i));
	for (size_t i = 0; i < pr->n_objs[OBJ_SRQ]; i++)
		verify_srq(p, conf_obj(pr, OBJ_SRQ, i));
	for (size_t i = 0; i < pr->n_objs[OBJ_QP]; i++) {
		const struct conf_qp *q = conf_obj(pr, OBJ_QP, i);
		const struct conf_srq *srq = conf_obj_find(pr, OBJ_SRQ, q->srq);

		verify_qp_shape(p, q);
		verify_qp_remote(p, pr, q);
		if (srq && srq->type != SRQK_BASIC)
			add_error(p, q->loc,
				  "qp '%s': srq '%s' is an XRC SRQ; a %s QP "
				  "takes a basic one",
				  q->name, srq->name, qp_kind_name(q->type));
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

	check_names(p, "device", c->devices, c->n_devices, sizeof(*c->devices));
	check_names(p, "profile", c->profiles, c->n_profiles,
		    sizeof(*c->profiles));
	for (size_t i = 0; i < c->n_devices; i++)
		verify_device(p, &c->devices[i]);
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

/* Free what the fields of table own in obj (strings, lists). */
static void free_fields(const struct field *table, void *obj)
{
	for (const struct field *f = table; f->key; f++) {
		void *at = (char *)obj + f->offset;

		switch (f->type) {
		case F_STRING:
			free(*(char **)at);
			break;
		case F_STRLIST:
			free_strv(*(char ***)at,
				  *(size_t *)((char *)obj + f->count_offset));
			break;
		case F_INT64LIST:
			free(*(int64_t **)at);
			break;
		case F_GROUP:
			free_fields(f->sub, obj);
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
		case F_GROUP:
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
	return fields_equal(kinds[k].fields, a, b);
}

bool conf_device_equal(const struct conf_device *a,
		       const struct conf_device *b)
{
	return fields_equal(device_fields, a, b);
}

static void free_profile(struct conf_profile *pr)
{
	free_fields(profile_fields, pr);
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		for (size_t i = 0; i < pr->n_objs[k]; i++)
			free_fields(kinds[k].fields,
				    (char *)pr->objs[k] + i * kinds[k].size);
		free(pr->objs[k]);
	}
}

struct config *config_free(struct config *c)
{
	if (!c)
		return NULL;
	free_fields(daemon_fields, &c->daemon);
	for (size_t i = 0; i < c->n_devices; i++)
		free_fields(device_fields, &c->devices[i]);
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

/* ---- the effective configuration, written back out ---- */

static json_t *access_names_json(unsigned int flags)
{
	json_t *a = json_array();

	for (const struct enum_name *n = access_names; a && n->name; n++)
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
				v = json_string(*(char *const *)at);
			break;
		case F_INT:
		case F_ENUM: {
			int x = *(const int *)at;

			if (f->type == F_ENUM) {
				const char *n = enum_to_name(f->names, x);

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
		case F_GROUP:
			if (f->set_flag && !*(const bool *)at)
				break;
			v = json_object();
			fields_json(f->sub, obj, v);
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
	fields_json(daemon_fields, &c->daemon, d);
	/* The included profiles are written out below, merged. */
	json_object_del(d, "include");
	json_object_set_new(j, "daemon", d);
	for (size_t i = 0; i < c->n_devices; i++) {
		json_t *dev = json_object();

		fields_json(device_fields, &c->devices[i], dev);
		json_array_append_new(devs, dev);
	}
	if (json_array_size(devs))
		json_object_set_new(j, "devices", devs);
	else
		json_decref(devs);
	for (size_t i = 0; i < c->n_profiles; i++) {
		const struct conf_profile *pr = &c->profiles[i];
		json_t *p = json_object();

		fields_json(profile_fields, pr, p);
		for (int k = 0; k < OBJ_KIND_MAX; k++) {
			json_t *list;

			if (!pr->n_objs[k])
				continue;
			list = json_array();
			for (size_t n = 0; n < pr->n_objs[k]; n++) {
				json_t *o = json_object();

				fields_json(kinds[k].fields,
					    conf_obj(pr, (enum obj_kind)k, n), o);
				json_array_append_new(list, o);
			}
			json_object_set_new(p, kind_names[k], list);
		}
		json_array_append_new(profs, p);
	}
	if (json_array_size(profs))
		json_object_set_new(j, "profiles", profs);
	else
		json_decref(profs);
	return j;
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
			fputs("[ ", f);
			json_array_foreach ((json_t *)v, i, e) {
				fputs(i ? ", " : "", f);
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
		fprintf(f, "%lld%s", (long long)n,
			n > INT32_MAX || n < INT32_MIN ? "L" : "");
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
