// SPDX-License-Identifier: MIT
/*
 * pyverbs' text for device and port attributes, from our JSON documents.
 *
 * This copies the __str__ methods of DeviceAttr, PortAttr and ODPCaps in
 * rdma-core 44's pyverbs/device.pyx, quirks included, because the point is
 * that the two outputs compare equal:
 * - lines are '{:<W}: {:<20}\n' (W = 22 for the device, 24 for the port;
 *   ODPCaps uses '{}: {}\n'): the value is padded to 20 characters, also
 *   when it is a multi-line flag list;
 * - a flag list is "\n  " followed by "NAME\n  " for each known set bit, in
 *   pyverbs' order; unknown bits are not shown;
 * - enumerations print as pyverbs' own tables say (active_speed 4 is
 *   "5.0 Gbps", width 8 is "Invalid width"), atomic caps as a number.
 * The JSON is read through the raw numbers, never through the "_name(s)"
 * keys, so the vocabulary of the daemon and pyverbs' wording stay apart.
 *
 * One difference, on purpose: no line ends in spaces (pyverbs' padding
 * leaves them after every value and after each flag list). The words,
 * their order and the line breaks are pyverbs'; a comparison that
 * ignores trailing blanks sees the same text.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "devprint.h"
#include "util.h"

struct flag {
	uint64_t bit;
	const char *name;
};

struct flags {
	const struct flag *v;
	size_t n;
};

#define FLAG(x) { x, #x }
#define FLAGS(id, ...)                                                         \
	static const struct flag id##_v[] = { __VA_ARGS__ };                   \
	static const struct flags id = { id##_v, ARRAY_SIZE(id##_v) }

/* pyverbs' translate_device_caps(). */
FLAGS(device_caps, FLAG(IBV_DEVICE_RESIZE_MAX_WR),
      FLAG(IBV_DEVICE_BAD_PKEY_CNTR), FLAG(IBV_DEVICE_BAD_QKEY_CNTR),
      FLAG(IBV_DEVICE_RAW_MULTI), FLAG(IBV_DEVICE_AUTO_PATH_MIG),
      FLAG(IBV_DEVICE_CHANGE_PHY_PORT), FLAG(IBV_DEVICE_UD_AV_PORT_ENFORCE),
      FLAG(IBV_DEVICE_CURR_QP_STATE_MOD), FLAG(IBV_DEVICE_SHUTDOWN_PORT),
      FLAG(IBV_DEVICE_INIT_TYPE), FLAG(IBV_DEVICE_PORT_ACTIVE_EVENT),
      FLAG(IBV_DEVICE_SYS_IMAGE_GUID), FLAG(IBV_DEVICE_RC_RNR_NAK_GEN),
      FLAG(IBV_DEVICE_SRQ_RESIZE), FLAG(IBV_DEVICE_N_NOTIFY_CQ),
      FLAG(IBV_DEVICE_MEM_WINDOW), FLAG(IBV_DEVICE_UD_IP_CSUM),
      FLAG(IBV_DEVICE_XRC), FLAG(IBV_DEVICE_MEM_MGT_EXTENSIONS),
      FLAG(IBV_DEVICE_MEM_WINDOW_TYPE_2A), FLAG(IBV_DEVICE_MEM_WINDOW_TYPE_2B),
      FLAG(IBV_DEVICE_RC_IP_CSUM), FLAG(IBV_DEVICE_RAW_IP_CSUM),
      FLAG(IBV_DEVICE_MANAGED_FLOW_STEERING));

/* translate_port_cap_flags(). */
FLAGS(port_caps, FLAG(IBV_PORT_SM), FLAG(IBV_PORT_NOTICE_SUP),
      FLAG(IBV_PORT_TRAP_SUP), FLAG(IBV_PORT_OPT_IPD_SUP),
      FLAG(IBV_PORT_AUTO_MIGR_SUP), FLAG(IBV_PORT_SL_MAP_SUP),
      FLAG(IBV_PORT_MKEY_NVRAM), FLAG(IBV_PORT_PKEY_NVRAM),
      FLAG(IBV_PORT_LED_INFO_SUP), FLAG(IBV_PORT_SYS_IMAGE_GUID_SUP),
      FLAG(IBV_PORT_PKEY_SW_EXT_PORT_TRAP_SUP),
      FLAG(IBV_PORT_EXTENDED_SPEEDS_SUP), FLAG(IBV_PORT_CAP_MASK2_SUP),
      FLAG(IBV_PORT_CM_SUP), FLAG(IBV_PORT_SNMP_TUNNEL_SUP),
      FLAG(IBV_PORT_REINIT_SUP), FLAG(IBV_PORT_DEVICE_MGMT_SUP),
      FLAG(IBV_PORT_VENDOR_CLASS_SUP), FLAG(IBV_PORT_DR_NOTICE_SUP),
      FLAG(IBV_PORT_CAP_MASK_NOTICE_SUP), FLAG(IBV_PORT_BOOT_MGMT_SUP),
      FLAG(IBV_PORT_LINK_LATENCY_SUP), FLAG(IBV_PORT_CLIENT_REG_SUP),
      FLAG(IBV_PORT_IP_BASED_GIDS));

/* translate_port_cap_flags2(). */
FLAGS(port_caps2, FLAG(IBV_PORT_SET_NODE_DESC_SUP),
      FLAG(IBV_PORT_INFO_EXT_SUP), FLAG(IBV_PORT_VIRT_SUP),
      FLAG(IBV_PORT_SWITCH_PORT_STATE_TABLE_SUP),
      FLAG(IBV_PORT_LINK_WIDTH_2X_SUP), FLAG(IBV_PORT_LINK_SPEED_HDR_SUP),
      FLAG(IBV_PORT_LINK_SPEED_NDR_SUP));

/* ODPCaps.__str__(). */
FLAGS(odp_general, FLAG(IBV_ODP_SUPPORT), FLAG(IBV_ODP_SUPPORT_IMPLICIT));
FLAGS(odp_transport, FLAG(IBV_ODP_SUPPORT_SEND), FLAG(IBV_ODP_SUPPORT_RECV),
      FLAG(IBV_ODP_SUPPORT_WRITE), FLAG(IBV_ODP_SUPPORT_READ),
      FLAG(IBV_ODP_SUPPORT_ATOMIC), FLAG(IBV_ODP_SUPPORT_SRQ_RECV));

struct enum_val {
	long long val;
	const char *name;
};

/* known: "name (n)" or "name"; unknown: "invalid (n)" or "invalid". */
struct enum_fmt {
	const struct enum_val *v;
	size_t n;
	bool with_num;
	const char *invalid;
	bool invalid_num;
};

#define ENUM_FMT(id, with_num, invalid, invalid_num, ...)                      \
	static const struct enum_val id##_v[] = { __VA_ARGS__ };               \
	static const struct enum_fmt id = { id##_v, ARRAY_SIZE(id##_v),        \
					    with_num, invalid, invalid_num }

/* port_state_to_str(), translate_mtu(), translate_link_layer(),
 * width_to_str(), speed_to_str(), phys_state_to_str(). */
ENUM_FMT(port_state, true, "Invalid state", true, { 0, "NOP" },
	 { 1, "Down" }, { 2, "Init" }, { 3, "Armed" }, { 4, "Active" },
	 { 5, "Defer" });
ENUM_FMT(mtu, true, "Invalid MTU", true, { 1, "256" }, { 2, "512" },
	 { 3, "1024" }, { 4, "2048" }, { 5, "4096" });
ENUM_FMT(link_layer, false, "Invalid link layer", true, { 0, "Unspecified" },
	 { 1, "InfiniBand" }, { 2, "Ethernet" });
ENUM_FMT(width, true, "Invalid width", false, { 1, "1X" }, { 2, "4X" },
	 { 4, "8X" }, { 16, "2X" });
ENUM_FMT(speed, true, "Invalid speed", false, { 0, "0.0 Gbps" },
	 { 1, "2.5 Gbps" }, { 2, "5.0 Gbps" }, { 4, "5.0 Gbps" },
	 { 8, "10.0 Gbps" }, { 16, "14.0 Gbps" }, { 32, "25.0 Gbps" },
	 { 64, "50.0 Gbps" }, { 128, "100.0 Gbps" });
ENUM_FMT(phys_state, true, "Invalid physical state", false, { 1, "Sleep" },
	 { 2, "Polling" }, { 3, "Disabled" },
	 { 4, "Port configuration training" }, { 5, "Link up" },
	 { 6, "Link error recovery" }, { 7, "Phy test" });

enum fmt {
	F_STR,	 /* a string as it is */
	F_DEC,	 /* str(int) */
	F_HEX,	 /* hex(int) */
	F_FLAGS, /* str_from_flags() */
	F_ENUM,	 /* one of the enum_fmt tables */
};

struct row {
	const char *label;
	const char *key; /* path in the document, '.' between levels */
	enum fmt fmt;
	const void *tbl; /* struct flags or struct enum_fmt */
};

static const struct row device_rows[] = {
	{ "FW version", "fw_ver", F_STR, NULL },
	{ "Node guid", "node_guid", F_STR, NULL },
	{ "Sys image GUID", "sys_image_guid", F_STR, NULL },
	{ "Max MR size", "max_mr_size", F_HEX, NULL },
	{ "Page size cap", "page_size_cap", F_HEX, NULL },
	{ "Vendor ID", "vendor_id", F_HEX, NULL },
	{ "Vendor part ID", "vendor_part_id", F_DEC, NULL },
	{ "HW version", "hw_ver", F_DEC, NULL },
	{ "Max QP", "max_qp", F_DEC, NULL },
	{ "Max QP WR", "max_qp_wr", F_DEC, NULL },
	{ "Device cap flags", "device_cap_flags", F_FLAGS, &device_caps },
	{ "Max SGE", "max_sge", F_DEC, NULL },
	{ "Max SGE RD", "max_sge_rd", F_DEC, NULL },
	{ "MAX CQ", "max_cq", F_DEC, NULL },
	{ "Max CQE", "max_cqe", F_DEC, NULL },
	{ "Max MR", "max_mr", F_DEC, NULL },
	{ "Max PD", "max_pd", F_DEC, NULL },
	{ "Max QP RD atom", "max_qp_rd_atom", F_DEC, NULL },
	{ "Max EE RD atom", "max_ee_rd_atom", F_DEC, NULL },
	{ "Max res RD atom", "max_res_rd_atom", F_DEC, NULL },
	{ "Max QP init RD atom", "max_qp_init_rd_atom", F_DEC, NULL },
	{ "Max EE init RD atom", "max_ee_init_rd_atom", F_DEC, NULL },
	{ "Atomic caps", "atomic_cap", F_DEC, NULL },
	{ "Max EE", "max_ee", F_DEC, NULL },
	{ "Max RDD", "max_rdd", F_DEC, NULL },
	{ "Max MW", "max_mw", F_DEC, NULL },
	{ "Max raw IPv6 QPs", "max_raw_ipv6_qp", F_DEC, NULL },
	{ "Max raw ethy QP", "max_raw_ethy_qp", F_DEC, NULL },
	{ "Max mcast group", "max_mcast_grp", F_DEC, NULL },
	{ "Max mcast QP attach", "max_mcast_qp_attach", F_DEC, NULL },
	{ "Max AH", "max_ah", F_DEC, NULL },
	{ "Max FMR", "max_fmr", F_DEC, NULL },
	{ "Max map per FMR", "max_map_per_fmr", F_DEC, NULL },
	{ "Max SRQ", "max_srq", F_DEC, NULL },
	{ "Max SRQ WR", "max_srq_wr", F_DEC, NULL },
	{ "Max SRQ SGE", "max_srq_sge", F_DEC, NULL },
	{ "Max PKeys", "max_pkeys", F_DEC, NULL },
	{ "local CA ack delay", "local_ca_ack_delay", F_DEC, NULL },
	{ "Phys port count", "phys_port_cnt", F_DEC, NULL },
};

static const struct row port_rows[] = {
	{ "Port state", "state", F_ENUM, &port_state },
	{ "Max MTU", "max_mtu", F_ENUM, &mtu },
	{ "Active MTU", "active_mtu", F_ENUM, &mtu },
	{ "SM lid", "sm_lid", F_DEC, NULL },
	{ "Port lid", "lid", F_DEC, NULL },
	{ "lmc", "lmc", F_HEX, NULL },
	{ "Link layer", "link_layer", F_ENUM, &link_layer },
	{ "Max message size", "max_msg_sz", F_HEX, NULL },
	{ "Port cap flags", "port_cap_flags", F_FLAGS, &port_caps },
	{ "Port cap flags 2", "port_cap_flags2", F_FLAGS, &port_caps2 },
	{ "max VL num", "max_vl_num", F_DEC, NULL },
	{ "Bad Pkey counter", "bad_pkey_cntr", F_DEC, NULL },
	{ "Qkey violations counter", "qkey_viol_cntr", F_DEC, NULL },
	{ "GID table len", "gid_tbl_len", F_DEC, NULL },
	{ "Pkey table len", "pkey_tbl_len", F_DEC, NULL },
	{ "SM sl", "sm_sl", F_DEC, NULL },
	{ "Subnet timeout", "subnet_timeout", F_DEC, NULL },
	{ "Init type reply", "init_type_reply", F_DEC, NULL },
	{ "Active width", "active_width", F_ENUM, &width },
	{ "Active speed", "active_speed", F_ENUM, &speed },
	{ "Phys state", "phys_state", F_ENUM, &phys_state },
	{ "Flags", "flags", F_DEC, NULL },
};

static const struct row odp_rows[] = {
	{ "ODP General caps", "odp_caps.general_caps", F_FLAGS, &odp_general },
	{ "RC ODP caps", "odp_caps.per_transport_caps.rc_odp_caps", F_FLAGS,
	  &odp_transport },
	{ "UD ODP caps", "odp_caps.per_transport_caps.ud_odp_caps", F_FLAGS,
	  &odp_transport },
	{ "UC ODP caps", "odp_caps.per_transport_caps.uc_odp_caps", F_FLAGS,
	  &odp_transport },
	{ "XRC ODP caps", "xrc_odp_caps", F_FLAGS, &odp_transport },
};

/* Enough for the longest flag list of the tables above. */
struct text {
	char s[2048];
	size_t len;
};

static void _printf_(2, 3) text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->len >= sizeof(t->s) - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->s + t->len, sizeof(t->s) - t->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len += (size_t)n;
	if (t->len >= sizeof(t->s))
		t->len = sizeof(t->s) - 1;
}

static json_t *lookup(json_t *doc, const char *path)
{
	const char *dot;

	while (doc && (dot = strchr(path, '.'))) {
		doc = json_object_getn(doc, path, (size_t)(dot - path));
		path = dot + 1;
	}
	return doc ? json_object_get(doc, path) : NULL;
}

/*
 * An integer of the document: a JSON integer, or a uint64_t above INT64_MAX
 * written as a decimal string. *neg says whether *v holds a negative
 * integer (two's complement).
 */
static bool get_int(json_t *j, uint64_t *v, bool *neg)
{
	const char *s;
	char *end;

	if (json_is_integer(j)) {
		json_int_t i = json_integer_value(j);

		*v = (uint64_t)i;
		*neg = i < 0;
		return true;
	}
	if (!json_is_string(j))
		return false;
	s = json_string_value(j);
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	*neg = false;
	return !*end && !errno;
}

static void format_enum(struct text *t, const struct enum_fmt *e, long long n)
{
	for (size_t i = 0; i < e->n; i++) {
		if (e->v[i].val != n)
			continue;
		if (e->with_num)
			text_add(t, "%s (%lld)", e->v[i].name, n);
		else
			text_add(t, "%s", e->v[i].name);
		return;
	}
	if (e->invalid_num)
		text_add(t, "%s (%lld)", e->invalid, n);
	else
		text_add(t, "%s", e->invalid);
}

static void format_row(struct text *t, json_t *doc, const struct row *r)
{
	json_t *j = lookup(doc, r->key);
	const struct flags *fl;
	uint64_t v;
	bool neg;

	if (r->fmt == F_STR) {
		text_add(t, "%s",
			 json_is_string(j) ? json_string_value(j) : "N/A");
		return;
	}
	if (!get_int(j, &v, &neg)) {
		text_add(t, "N/A");
		return;
	}
	switch (r->fmt) {
	case F_DEC:
		if (neg)
			text_add(t, "%lld", (long long)v);
		else
			text_add(t, "%" PRIu64, v);
		break;
	case F_HEX:
		if (neg)
			text_add(t, "-0x%" PRIx64, -v);
		else
			text_add(t, "0x%" PRIx64, v);
		break;
	case F_FLAGS:
		fl = r->tbl;
		text_add(t, "\n  ");
		for (size_t i = 0; i < fl->n; i++)
			if (v & fl->v[i].bit)
				text_add(t, "%s\n  ", fl->v[i].name);
		break;
	case F_ENUM:
		format_enum(t, r->tbl, (long long)v);
		break;
	case F_STR:
		break;
	}
}

/* Write s, a line or several, without the spaces that end its lines. */
static void put_trimmed(FILE *f, const char *s, size_t len)
{
	size_t start = 0;

	for (size_t i = 0; i <= len; i++) {
		size_t end = i;

		if (i < len && s[i] != '\n')
			continue;
		while (end > start && s[end - 1] == ' ')
			end--;
		fwrite(s + start, 1, end - start, f);
		if (i < len)
			fputc('\n', f);
		start = i + 1;
	}
}

static void print_rows(FILE *f, json_t *doc, const struct row *rows, size_t n,
		       int label_width, int value_width)
{
	for (size_t i = 0; i < n; i++) {
		struct text t = { .len = 0 }, line = { .len = 0 };

		t.s[0] = '\0';
		format_row(&t, doc, &rows[i]);
		text_add(&line, "%-*s: %-*s\n", label_width, rows[i].label,
			 value_width, t.s);
		put_trimmed(f, line.s, line.len);
	}
}

void devprint_device(FILE *f, json_t *dev)
{
	print_rows(f, dev, device_rows, ARRAY_SIZE(device_rows), 22, 20);
}

void devprint_port(FILE *f, json_t *port)
{
	print_rows(f, port, port_rows, ARRAY_SIZE(port_rows), 24, 20);
}

void devprint_odp_caps(FILE *f, json_t *dev)
{
	print_rows(f, dev, odp_rows, ARRAY_SIZE(odp_rows), 0, 0);
}
