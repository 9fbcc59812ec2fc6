// SPDX-License-Identifier: MIT
/*
 * The vocabulary of the configuration: each section is described by a
 * table of fields (key, type, where it goes, range, check), and each
 * object kind by its table, size and defaults. One generic walker
 * (config_parse.c) applies a table to a libconfig group, so adding a key
 * is one line here.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <sys/un.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "access.h"
#include "config_internal.h"
#include "log.h"

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

static const struct enum_name qp_recover_names[] = {
	{ "none", QPR_NONE },
	{ "reset", QPR_RESET },
	{ NULL, 0 },
};

static const struct enum_name srq_type_names[] = {
	{ "basic", SRQK_BASIC },
	{ "xrc", SRQK_XRC },
	{ NULL, 0 },
};

static const struct enum_name mcast_join_names[] = {
	{ "full", MCJ_FULL },
	{ "send_only", MCJ_SEND_ONLY },
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

/* The protocol's one list of access names (proto/access.h). */
const struct enum_name conf_access_names[] = {
#define ACCESS_ENTRY(n, f) { n, f },
	PROTO_ACCESS_NAMES(ACCESS_ENTRY)
#undef ACCESS_ENTRY
	{ NULL, 0 },
};

/* What a memory window of a target may allow. */
static const struct enum_name remote_access_names[] = {
	{ "remote_read", IBV_ACCESS_REMOTE_READ },
	{ "remote_write", IBV_ACCESS_REMOTE_WRITE },
	{ "remote_atomic", IBV_ACCESS_REMOTE_ATOMIC },
	{ NULL, 0 },
};

const char *const conf_kind_names[OBJ_KIND_MAX] = {
	[OBJ_MEMORY] = "memory", [OBJ_XRCD] = "xrcd", [OBJ_PD] = "pd",
	[OBJ_DM] = "dm",	 [OBJ_MR] = "mr",     [OBJ_MW] = "mw",
	[OBJ_CQ] = "cq",	 [OBJ_SRQ] = "srq",   [OBJ_QP] = "qp",
	[OBJ_AH] = "ah",	 [OBJ_TARGET] = "target",
	[OBJ_MCAST] = "mcast",
};

const char *conf_enum_name(const struct enum_name *t, int v)
{
	for (; t->name; t++)
		if (t->value == v)
			return t->name;
	return "?";
}

const char *mem_backing_name(enum mem_backing b)
{
	return conf_enum_name(backing_names, b);
}

const char *qp_kind_name(enum qp_kind k)
{
	return conf_enum_name(qp_type_names, k);
}

const char *qp_target_state_name(enum qp_target_state s)
{
	return conf_enum_name(qp_state_names, s);
}

const char *qp_recover_name(enum qp_recover r)
{
	return conf_enum_name(qp_recover_names, r);
}

const char *srq_kind_name(enum srq_kind k)
{
	return conf_enum_name(srq_type_names, k);
}

const char *mcast_join_name(enum mcast_join j)
{
	return conf_enum_name(mcast_join_names, j);
}

const char *obj_kind_name(enum obj_kind k)
{
	return (unsigned int)k < OBJ_KIND_MAX ? conf_kind_names[k] : "?";
}

int obj_kind_from_name(const char *name)
{
	for (int k = 0; k < OBJ_KIND_MAX; k++)
		if (streq(conf_kind_names[k], name))
			return k;
	return -EINVAL;
}

/* Where a unix socket will be bound: it must fit in sun_path. */
static const char *check_socket_path(const char *s)
{
	struct sockaddr_un sun;

	if (s[0] != '/')
		return "is not an absolute unix socket path";
	if (strlen(s) >= sizeof(sun.sun_path))
		return "is too long for a unix socket path (at most 107 "
		       "bytes)";
	return NULL;
}

/* The control socket's directory unless said otherwise: its default
 * socket must fit too. */
static const char *check_runtime_dir(const char *s)
{
	struct sockaddr_un sun;

	if (s[0] != '/')
		return "is not an absolute path";
	if (strlen(s) + strlen("/" CONFIG_DEFAULT_SOCKET_NAME) >=
	    sizeof(sun.sun_path))
		return "is too long: its control socket " CONFIG_DEFAULT_SOCKET_NAME
		       " would not fit in a unix socket path (at most 107 "
		       "bytes)";
	return NULL;
}

int config_parse_sockaddr(const char *s, struct sockaddr_storage *out)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(s, ':');
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
	struct sockaddr_in *in = (struct sockaddr_in *)out;
	size_t len;
	char *end;
	long port;

	memset(out, 0, sizeof(*out));
	if (!colon || colon == s)
		return -EINVAL;
	port = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 1 || port > 65535)
		return -EINVAL;
	len = (size_t)(colon - s);
	if (s[0] == '[') {
		if (colon[-1] != ']' || len < 3 || len - 2 >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, len - 2);
		host[len - 2] = '\0';
		if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
			return -EINVAL;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		return 0;
	}
	if (len >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, len);
	host[len] = '\0';
	if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
		return -EINVAL;
	in->sin_family = AF_INET;
	in->sin_port = htons((uint16_t)port);
	return 0;
}

int config_parse_prefix(const char *s, struct conf_prefix *out)
{
	char host[INET6_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t len = slash ? (size_t)(slash - s) : strlen(s);
	long bits = -1;
	char *end;

	memset(out, 0, sizeof(*out));
	if (!len || len >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, len);
	host[len] = '\0';
	if (inet_pton(AF_INET, host, out->addr) == 1)
		out->family = AF_INET;
	else if (inet_pton(AF_INET6, host, out->addr) == 1)
		out->family = AF_INET6;
	else
		return -EINVAL;
	if (slash) {
		bits = strtol(slash + 1, &end, 10);
		if (!slash[1] || *end || bits < 0 ||
		    bits > (out->family == AF_INET ? 32 : 128))
			return -EINVAL;
	}
	out->bits = bits >= 0 ? (int)bits : out->family == AF_INET ? 32 : 128;
	return 0;
}

static const char *check_listen(const char *s)
{
	struct sockaddr_storage ss;

	if (!strncmp(s, "unix:", 5))
		return check_socket_path(s + 5);
	if (config_parse_sockaddr(s, &ss) < 0)
		return "is not IPV4:PORT, [IPV6]:PORT or unix:/PATH (numeric "
		       "addresses only)";
	return NULL;
}

/* A name REST is asked by (daemon.http.hosts): a host name, an IPv4
 * address or a bracketed IPv6 one, without a port (any port is taken). */
static const char *check_host_name(const char *s)
{
	static const char why[] =
		"is not a host name (letters, digits, '-', '.'), an IPv4 "
		"address or an [IPv6] address, without a port";
	struct in6_addr a6;
	size_t n = strlen(s);
	char buf[INET6_ADDRSTRLEN + 2];

	if (!n || n > 253)
		return why;
	if (s[0] == '[') {
		if (n < 3 || n - 2 >= sizeof(buf) || s[n - 1] != ']')
			return why;
		memcpy(buf, s + 1, n - 2);
		buf[n - 2] = '\0';
		return inet_pton(AF_INET6, buf, &a6) == 1 ? NULL : why;
	}
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '.')
			return why;
	return NULL;
}

static const char *check_target_listen(const char *s)
{
	struct sockaddr_storage ss;

	return config_parse_sockaddr(s, &ss) < 0
		       ? "is not IPV4:PORT or [IPV6]:PORT (numeric addresses "
			 "only)"
		       : NULL;
}

static const char *check_prefix(const char *s)
{
	struct conf_prefix pfx;

	return config_parse_prefix(s, &pfx) < 0
		       ? "is not an address or a prefix (ADDR/LEN, IPv4 or "
			 "IPv6)"
		       : NULL;
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
	if (s[0] != '/')
		return "is not an absolute path";
	return strlen(s) < PATH_MAX ? NULL : "is longer than PATH_MAX";
}

/* A token, or "@/path" of the file that holds it. */
static const char *check_token(const char *s)
{
	if (s[0] == '@')
		return check_abs_path(s + 1);
	if (!s[0] || strlen(s) > CONF_TARGET_MAX_TOKEN)
		return "must be 1 to 56 bytes (it travels in the connect "
		       "private data), or @/path of a file holding it";
	return NULL;
}

/* A group that exists now: a name, or a number. */
static const char *check_group(const char *s)
{
	char *end;
	gid_t gid;

	if (identity_group(s, &gid))
		return NULL;
	strtoul(s, &end, 10);
	return *s && !*end ? NULL : "is not a known group (name or number)";
}

/* Allow lists name users and groups of the host that runs the daemon:
 * one that does not exist here is not wrong (it may be created, or the
 * file checked elsewhere), but admits nobody (identity.c). */
static const char *warn_user(const char *s)
{
	uid_t uid;

	return identity_user(s, &uid) ? NULL
				      : "is not a user on this host: it admits nobody "
			     "until it exists and the configuration is "
			     "reloaded";
}

static const char *warn_group(const char *s)
{
	char *end;
	gid_t gid;

	if (identity_group(s, &gid))
		return NULL;
	strtoul(s, &end, 10);
	return *s && !*end ? NULL
			   : "is not a group on this host: it admits nobody "
			     "until it exists and the configuration is "
			     "reloaded";
}

static const char *check_log_level(const char *s)
{
	return log_parse_level(s) < 0 ? "is not one of error, warning, "
					 "notice, info, debug"
				       : NULL;
}

/* "" turns it off. Container engines read only *.json and *.yaml files
 * of their CDI directories: another name would be written for nobody. */
static const char *check_cdi_spec(const char *s)
{
	size_t n = strlen(s);

	if (!*s)
		return NULL;
	if (s[0] != '/')
		return "is not an absolute path (or \"\" for no CDI "
		       "specification)";
	if (n >= PATH_MAX)
		return "is longer than PATH_MAX";
	if (n < 5 || strcmp(s + n - 5, ".json"))
		return "must name a file ending in .json (container engines "
		       "read no other)";
	return NULL;
}

static const char *check_orphans(const char *s)
{
	return streq(s, "keep") || streq(s, "retire")
		       ? NULL
		       : "is not \"keep\" or \"retire\"";
}

#define FLD(st, k, t, m, ...)                                                  \
	{ .key = k, .type = t, .offset = offsetof(struct st, m), __VA_ARGS__ }
#define LIST(st, k, m, ...)                                                    \
	{ .key = k, .type = F_STRLIST, .offset = offsetof(struct st, m),       \
	  .count_offset = offsetof(struct st, n_##m), __VA_ARGS__ }

static const struct field http_fields[] = {
	LIST(conf_daemon, "listen", listen, .check = check_listen),
	FLD(conf_daemon, "token_file", F_STRING, token_file,
	    .check = check_abs_path),
	FLD(conf_daemon, "max_connections", F_INT, http_max_connections,
	    .min = 1, .max = 1 << 20),
	FLD(conf_daemon, "reserved_connections", F_INT, http_reserved,
	    .min = 1, .max = 1 << 20),
	LIST(conf_daemon, "hosts", http_hosts, .check = check_host_name),
	FLD(conf_daemon, "max_connections_per_address", F_INT,
	    http_max_per_address, .min = 1, .max = 1 << 20),
	FLD(conf_daemon, "idle_timeout", F_INT, http_idle_timeout, .min = 1,
	    .max = 86400),
	FLD(conf_daemon, "header_timeout", F_INT, http_header_timeout,
	    .min = 1, .max = 3600),
	FLD(conf_daemon, "tls_cert", F_STRING, tls_cert,
	    .check = check_abs_path),
	FLD(conf_daemon, "tls_key", F_STRING, tls_key,
	    .check = check_abs_path),
	FLD(conf_daemon, "insecure", F_BOOL, insecure),
	END_OF_TABLE,
};

const struct field conf_daemon_fields[] = {
	FLD(conf_daemon, "runtime_dir", F_STRING, runtime_dir,
	    .check = check_runtime_dir),
	FLD(conf_daemon, "control_socket", F_STRING, control_socket,
	    .check = check_socket_path),
	FLD(conf_daemon, "admin_group", F_STRING, admin_group,
	    .check = check_group),
	FLD(conf_daemon, "control_group", F_STRING, control_group,
	    .check = check_group),
	FLD(conf_daemon, "admit_root", F_BOOL, admit_root),
	{ .key = "http", .type = F_GROUP, .sub = http_fields },
	FLD(conf_daemon, "include", F_STRING, include),
	FLD(conf_daemon, "log_level", F_STRING, log_level,
	    .check = check_log_level),
	FLD(conf_daemon, "cdi_spec", F_STRING, cdi_spec,
	    .check = check_cdi_spec),
	FLD(conf_daemon, "workers", F_INT, workers, .min = 0, .max = 1024),
	FLD(conf_daemon, "orphans", F_STRING, orphans,
	    .check = check_orphans),
	FLD(conf_daemon, "max_sessions", F_INT, max_sessions, .min = 1,
	    .max = 1 << 20),
	FLD(conf_daemon, "max_sessions_per_uid", F_INT, max_sessions_per_uid,
	    .min = 1, .max = 1 << 20),
	FLD(conf_daemon, "hello_timeout", F_INT, hello_timeout, .min = 1,
	    .max = 3600),
	FLD(conf_daemon, "output_budget", F_SIZE, output_budget,
	    .min = 1 << 20, .max = 1LL << 40),
	FLD(conf_daemon, "output_budget_per_uid", F_SIZE,
	    output_budget_per_uid, .min = 1 << 20, .max = 1LL << 40),
	FLD(conf_daemon, "max_attachments_per_session", F_INT,
	    max_attachments_per_session, .min = 1, .max = 1 << 16),
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

const struct field conf_device_fields[] = {
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
	FLD(conf_memory, "page_size", F_SIZE, page_size),
	FLD(conf_memory, "thp", F_TRIBOOL, thp),
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
	FLD(conf_mr, "memory", F_STRING, memory),
	FLD(conf_mr, "dm", F_STRING, dm),
	FLD(conf_mr, "access", F_ACCESS, access, .names = conf_access_names),
	FLD(conf_mr, "offset", F_SIZE, offset),
	FLD(conf_mr, "length", F_SIZE, length),
	FLD(conf_mr, "zero_based", F_BOOL, zero_based),
	FLD(conf_mr, "odp", F_BOOL, odp),
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
	FLD(conf_path, #k, F_INT64, k, .min = (lo), .max = (hi))
static const struct field qp_path_fields[] = {
	FLD(conf_path, "dgid", F_STRING, dgid, .check = check_gid),
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
	PATH(static_rate, 0, 63),
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

/* -1: not given (qp_path_init's default or the device's). */
static void path_defaults(void *sub)
{
	struct conf_path *path = sub;

	memset(&path->port_num, 0xff,
	       sizeof(*path) - offsetof(struct conf_path, port_num));
}

/* What an alternate path may say: its address vector, port, P_Key
 * index and timeout (the rest is the connection's, not the path's). */
static const struct field qp_alt_path_fields[] = {
	FLD(conf_path, "dgid", F_STRING, dgid, .check = check_gid),
	PATH(port_num, 1, 255),
	PATH(pkey_index, 0, 65535),
	PATH(dlid, 0, 65535),
	PATH(sl, 0, 15),
	PATH(src_path_bits, 0, 127),
	PATH(static_rate, 0, 63),
	PATH(sgid_index, 0, 255),
	PATH(hop_limit, 0, 255),
	PATH(traffic_class, 0, 255),
	PATH(flow_label, 0, (1 << 20) - 1),
	PATH(timeout, 0, 31),
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
	FLD(conf_qp, "recover", F_ENUM, recover, .names = qp_recover_names),
	FLD(conf_qp, "access", F_ACCESS, access, .names = conf_access_names),
	FLD(conf_qp, "pkey_index", F_UINT16, pkey_index, .min = 0,
	    .max = 65535),
	FLD(conf_qp, "pkey", F_INT, pkey, .min = 0, .max = 65535),
	FLD(conf_qp, "qkey", F_UINT32, qkey, .min = 0, .max = UINT32_MAX),
	FLD(conf_qp, "peer", F_STRING, peer),
	{ .key = "path", .type = F_GROUP, .sub = qp_path_fields,
	  .offset = offsetof(struct conf_qp, path), .indirect = true,
	  .size = sizeof(struct conf_path), .defaults = path_defaults },
	{ .key = "alt_path", .type = F_GROUP, .sub = qp_alt_path_fields,
	  .offset = offsetof(struct conf_qp, alt_path), .indirect = true,
	  .size = sizeof(struct conf_path), .defaults = path_defaults },
	END_OF_TABLE,
};

static const struct field ah_fields[] = {
	FLD(conf_ah, "name", F_STRING, name, .required = true),
	FLD(conf_ah, "pd", F_STRING, pd, .required = true),
	FLD(conf_ah, "dgid", F_STRING, dgid, .check = check_gid),
	FLD(conf_ah, "sgid_index", F_INT, sgid_index, .min = 0, .max = 255),
	FLD(conf_ah, "hop_limit", F_INT, hop_limit, .min = 0, .max = 255),
	FLD(conf_ah, "traffic_class", F_INT, traffic_class, .min = 0,
	    .max = 255),
	FLD(conf_ah, "sl", F_INT, sl, .min = 0, .max = 15),
	FLD(conf_ah, "dlid", F_INT, dlid, .min = 0, .max = 65535),
	FLD(conf_ah, "static_rate", F_INT, static_rate, .min = 0, .max = 63),
	END_OF_TABLE,
};

static const struct field expose_fields[] = {
	FLD(conf_expose, "mr", F_STRING, mr, .required = true),
	FLD(conf_expose, "access", F_ACCESS, access,
	    .names = remote_access_names, .required = true),
	FLD(conf_expose, "offset", F_SIZE, offset),
	FLD(conf_expose, "length", F_SIZE, length),
	END_OF_TABLE,
};

static const struct field target_fields[] = {
	FLD(conf_target, "name", F_STRING, name, .required = true),
	FLD(conf_target, "listen", F_STRING, listen, .required = true,
	    .check = check_target_listen),
	FLD(conf_target, "pd", F_STRING, pd, .required = true),
	FLD(conf_target, "cq", F_STRING, cq, .required = true),
	{ .key = "expose", .type = F_GROUPLIST, .sub = expose_fields,
	  .offset = offsetof(struct conf_target, expose),
	  .count_offset = offsetof(struct conf_target, n_expose),
	  .size = sizeof(struct conf_expose),
	  .max_count = CONF_TARGET_MAX_EXPOSE, .required = true },
	LIST(conf_target, "allow", allow, .check = check_prefix),
	FLD(conf_target, "max_connections", F_INT, max_connections, .min = 1,
	    .max = 65536),
	FLD(conf_target, "token", F_STRING, token, .check = check_token,
	    .secret = true),
	END_OF_TABLE,
};

static const struct field mcast_fields[] = {
	FLD(conf_mcast, "name", F_STRING, name, .required = true),
	FLD(conf_mcast, "addr", F_STRING, addr),
	FLD(conf_mcast, "mgid", F_STRING, mgid, .check = check_gid),
	LIST(conf_mcast, "qps", qps),
	FLD(conf_mcast, "join", F_ENUM, join, .names = mcast_join_names),
	END_OF_TABLE,
};

static const struct field allow_fields[] = {
	LIST(conf_profile, "users", allow_users, .warn = warn_user),
	LIST(conf_profile, "groups", allow_groups, .warn = warn_group),
	{ .key = "uids", .type = F_INT64LIST,
	  .offset = offsetof(struct conf_profile, allow_uids),
	  .count_offset = offsetof(struct conf_profile, n_allow_uids),
	  .min = 0, .max = UINT32_MAX - 1 },
	END_OF_TABLE,
};

/* Object lists inside a profile: parsed by parse_objects(). */
const struct field conf_profile_fields[] = {
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
	{ .key = "target", .type = F_IGNORE },
	{ .key = "mcast", .type = F_IGNORE },
	END_OF_TABLE,
};

static void qp_defaults(void *elem)
{
	struct conf_qp *q = elem;

	q->cap = (struct conf_qp_cap){ .max_send_wr = 16, .max_recv_wr = 16,
				       .max_send_sge = 1, .max_recv_sge = 1 };
	q->state = QPS_TARGET_INIT;
	q->qkey = 0x11111111;
	q->pkey = -1;
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

static void target_defaults(void *elem)
{
	struct conf_target *t = elem;

	t->max_connections = 16;
}

#define KIND(k, st, def)                                                       \
	[k] = { .fields = st##_fields, .size = sizeof(struct conf_##st),        \
		.defaults = def }

const struct kind_table conf_kinds[OBJ_KIND_MAX] = {
	KIND(OBJ_MEMORY, memory, NULL), KIND(OBJ_XRCD, xrcd, NULL),
	KIND(OBJ_PD, pd, NULL),		KIND(OBJ_DM, dm, NULL),
	KIND(OBJ_MR, mr, mr_defaults),	KIND(OBJ_MW, mw, mw_defaults),
	KIND(OBJ_CQ, cq, cq_defaults),	KIND(OBJ_SRQ, srq, srq_defaults),
	KIND(OBJ_QP, qp, qp_defaults),	KIND(OBJ_AH, ah, ah_defaults),
	KIND(OBJ_TARGET, target, target_defaults),
	KIND(OBJ_MCAST, mcast, NULL),
};

size_t conf_obj_size(enum obj_kind k)
{
	return conf_kinds[k].size;
}

const void *conf_obj(const struct conf_profile *p, enum obj_kind k, size_t i)
{
	return (const char *)p->objs[k] + i * conf_kinds[k].size;
}

const char *conf_obj_name(const void *obj)
{
	return *(char *const *)((const char *)obj + sizeof(struct conf_loc));
}

