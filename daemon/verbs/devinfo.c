// SPDX-License-Identifier: MIT
/*
 * Device, port and GID attributes as JSON.
 *
 * One scheme for every document (config, REST, rdmactl --json):
 *
 * - Keys are the C field names of the libibverbs structs: struct ibv_device
 *   (summary), ibv_device_attr_ex and ibv_port_attr. The device document
 *   flattens orig_attr (struct ibv_device_attr) into its top level; every
 *   other nested struct is a nested object under its C name, e.g.
 *   "odp_caps": {"general_caps": 0, "per_transport_caps": {"rc_odp_caps": 0,
 *   ...}}.
 * - Integers are JSON integers. jansson stops at INT64_MAX, so a uint64_t
 *   above it (rxe reports max_mr_size = 2^64 - 1) is a JSON string holding
 *   the decimal value; readers accept both forms (Python: int(v), C:
 *   strtoull()). Nothing is clamped or rounded.
 * - GUIDs are strings "xxxx:xxxx:xxxx:xxxx": hex, network order, as
 *   ibv_devinfo and pyverbs print them. GIDs are eight groups of four hex
 *   digits, not compressed, as pyverbs prints them.
 * - An enumeration keeps its number under the field name and adds
 *   "<field>_name": the libibverbs enumerator without its common prefix, in
 *   lower case (IBV_PORT_ACTIVE -> "active", IBV_MTU_4096 -> "4096",
 *   IBV_LINK_LAYER_ETHERNET -> "ethernet", IBV_NODE_CA -> "ca"), or
 *   "unknown". Where libibverbs has no enumerator (phys_state, active_width,
 *   active_speed) the kernel's IB names are used the same way
 *   (IB_PORT_PHYS_STATE_LINK_UP -> "link_up", IB_WIDTH_4X -> "4x",
 *   IB_SPEED_EDR -> "edr").
 * - A bit mask keeps its number under the field name and adds
 *   "<field>_names": the names of its set bits, lowest bit first, by the same
 *   rule (IBV_PORT_CM_SUP -> "cm_sup", 1 << IBV_QPT_UD -> "ud"); a bit
 *   without a name is listed as "0x..." so that nothing is lost.
 * - A GID entry is {"index", "gid", "type", "netdev"}: type is the name only
 *   ("ib", "roce_v1", "roce_v2"), netdev the interface name or null.
 */
#include <fcntl.h>
#include <endian.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "devinfo.h"
#include "gid.h"
#include "util.h"

struct name {
	uint64_t val;
	const char *name;
};

struct names {
	const struct name *v;
	size_t n;
	bool mask;
};

#define NAMES(id, is_mask, ...)                                                \
	static const struct name id##_v[] = { __VA_ARGS__ };                   \
	static const struct names id = { id##_v, ARRAY_SIZE(id##_v), is_mask }

/* ---- enumerations ---- */

NAMES(node_type_names, false, { IBV_NODE_CA, "ca" },
      { IBV_NODE_SWITCH, "switch" }, { IBV_NODE_ROUTER, "router" },
      { IBV_NODE_RNIC, "rnic" }, { IBV_NODE_USNIC, "usnic" },
      { IBV_NODE_USNIC_UDP, "usnic_udp" },
      { IBV_NODE_UNSPECIFIED, "unspecified" });

NAMES(transport_names, false, { IBV_TRANSPORT_IB, "ib" },
      { IBV_TRANSPORT_IWARP, "iwarp" }, { IBV_TRANSPORT_USNIC, "usnic" },
      { IBV_TRANSPORT_USNIC_UDP, "usnic_udp" },
      { IBV_TRANSPORT_UNSPECIFIED, "unspecified" });

NAMES(atomic_cap_names, false, { IBV_ATOMIC_NONE, "none" },
      { IBV_ATOMIC_HCA, "hca" }, { IBV_ATOMIC_GLOB, "glob" });

NAMES(port_state_names, false, { IBV_PORT_NOP, "nop" },
      { IBV_PORT_DOWN, "down" }, { IBV_PORT_INIT, "init" },
      { IBV_PORT_ARMED, "armed" }, { IBV_PORT_ACTIVE, "active" },
      { IBV_PORT_ACTIVE_DEFER, "active_defer" });

NAMES(mtu_names, false, { IBV_MTU_256, "256" }, { IBV_MTU_512, "512" },
      { IBV_MTU_1024, "1024" }, { IBV_MTU_2048, "2048" },
      { IBV_MTU_4096, "4096" });

NAMES(link_layer_names, false, { IBV_LINK_LAYER_UNSPECIFIED, "unspecified" },
      { IBV_LINK_LAYER_INFINIBAND, "infiniband" },
      { IBV_LINK_LAYER_ETHERNET, "ethernet" });

/* The kernel's enum ib_port_phys_state, ib_port_width, ib_port_speed. */
NAMES(phys_state_names, false, { 1, "sleep" }, { 2, "polling" },
      { 3, "disabled" }, { 4, "port_configuration_training" },
      { 5, "link_up" }, { 6, "link_error_recovery" }, { 7, "phy_test" });

NAMES(width_names, false, { 1, "1x" }, { 2, "4x" }, { 4, "8x" },
      { 8, "12x" }, { 16, "2x" });

NAMES(speed_names, false, { 1, "sdr" }, { 2, "ddr" }, { 4, "qdr" },
      { 8, "fdr10" }, { 16, "fdr" }, { 32, "edr" }, { 64, "hdr" },
      { 128, "ndr" });

NAMES(gid_type_names, false, { IBV_GID_TYPE_IB, "ib" },
      { IBV_GID_TYPE_ROCE_V1, "roce_v1" }, { IBV_GID_TYPE_ROCE_V2, "roce_v2" });

/* ---- bit masks ---- */

NAMES(device_cap_names, true, { IBV_DEVICE_RESIZE_MAX_WR, "resize_max_wr" },
      { IBV_DEVICE_BAD_PKEY_CNTR, "bad_pkey_cntr" },
      { IBV_DEVICE_BAD_QKEY_CNTR, "bad_qkey_cntr" },
      { IBV_DEVICE_RAW_MULTI, "raw_multi" },
      { IBV_DEVICE_AUTO_PATH_MIG, "auto_path_mig" },
      { IBV_DEVICE_CHANGE_PHY_PORT, "change_phy_port" },
      { IBV_DEVICE_UD_AV_PORT_ENFORCE, "ud_av_port_enforce" },
      { IBV_DEVICE_CURR_QP_STATE_MOD, "curr_qp_state_mod" },
      { IBV_DEVICE_SHUTDOWN_PORT, "shutdown_port" },
      { IBV_DEVICE_INIT_TYPE, "init_type" },
      { IBV_DEVICE_PORT_ACTIVE_EVENT, "port_active_event" },
      { IBV_DEVICE_SYS_IMAGE_GUID, "sys_image_guid" },
      { IBV_DEVICE_RC_RNR_NAK_GEN, "rc_rnr_nak_gen" },
      { IBV_DEVICE_SRQ_RESIZE, "srq_resize" },
      { IBV_DEVICE_N_NOTIFY_CQ, "n_notify_cq" },
      { IBV_DEVICE_MEM_WINDOW, "mem_window" },
      { IBV_DEVICE_UD_IP_CSUM, "ud_ip_csum" }, { IBV_DEVICE_XRC, "xrc" },
      { IBV_DEVICE_MEM_MGT_EXTENSIONS, "mem_mgt_extensions" },
      { IBV_DEVICE_MEM_WINDOW_TYPE_2A, "mem_window_type_2a" },
      { IBV_DEVICE_MEM_WINDOW_TYPE_2B, "mem_window_type_2b" },
      { IBV_DEVICE_RC_IP_CSUM, "rc_ip_csum" },
      { IBV_DEVICE_RAW_IP_CSUM, "raw_ip_csum" },
      { IBV_DEVICE_MANAGED_FLOW_STEERING, "managed_flow_steering" },
      { IBV_DEVICE_RAW_SCATTER_FCS, "raw_scatter_fcs" },
      { IBV_DEVICE_PCI_WRITE_END_PADDING, "pci_write_end_padding" },
      /* IB_UVERBS_DEVICE_*: newer kernels set these, rdma-core 44 does
       * not name them yet. */
      { UINT64_C(1) << 38, "flush_global" },
      { UINT64_C(1) << 39, "flush_persistent" },
      { UINT64_C(1) << 40, "atomic_write" });

NAMES(odp_general_names, true, { IBV_ODP_SUPPORT, "support" },
      { IBV_ODP_SUPPORT_IMPLICIT, "support_implicit" });

NAMES(odp_transport_names, true, { IBV_ODP_SUPPORT_SEND, "send" },
      { IBV_ODP_SUPPORT_RECV, "recv" }, { IBV_ODP_SUPPORT_WRITE, "write" },
      { IBV_ODP_SUPPORT_READ, "read" }, { IBV_ODP_SUPPORT_ATOMIC, "atomic" },
      { IBV_ODP_SUPPORT_SRQ_RECV, "srq_recv" });

/* supported_qpts masks hold 1 << enum ibv_qp_type. */
NAMES(qpt_names, true, { 1 << IBV_QPT_RC, "rc" }, { 1 << IBV_QPT_UC, "uc" },
      { 1 << IBV_QPT_UD, "ud" }, { 1 << IBV_QPT_RAW_PACKET, "raw_packet" },
      { 1 << IBV_QPT_XRC_SEND, "xrc_send" },
      { 1 << IBV_QPT_XRC_RECV, "xrc_recv" });

NAMES(rx_hash_field_names, true, { IBV_RX_HASH_SRC_IPV4, "src_ipv4" },
      { IBV_RX_HASH_DST_IPV4, "dst_ipv4" },
      { IBV_RX_HASH_SRC_IPV6, "src_ipv6" },
      { IBV_RX_HASH_DST_IPV6, "dst_ipv6" },
      { IBV_RX_HASH_SRC_PORT_TCP, "src_port_tcp" },
      { IBV_RX_HASH_DST_PORT_TCP, "dst_port_tcp" },
      { IBV_RX_HASH_SRC_PORT_UDP, "src_port_udp" },
      { IBV_RX_HASH_DST_PORT_UDP, "dst_port_udp" },
      { IBV_RX_HASH_IPSEC_SPI, "ipsec_spi" },
      { IBV_RX_HASH_INNER, "inner" });

NAMES(rx_hash_function_names, true, { IBV_RX_HASH_FUNC_TOEPLITZ, "toeplitz" });

NAMES(raw_packet_names, true,
      { IBV_RAW_PACKET_CAP_CVLAN_STRIPPING, "cvlan_stripping" },
      { IBV_RAW_PACKET_CAP_SCATTER_FCS, "scatter_fcs" },
      { IBV_RAW_PACKET_CAP_IP_CSUM, "ip_csum" },
      { IBV_RAW_PACKET_CAP_DELAY_DROP, "delay_drop" });

NAMES(tm_cap_names, true, { IBV_TM_CAP_RC, "rc" });

NAMES(pci_atomic_names, true,
      { IBV_PCI_ATOMIC_OPERATION_4_BYTE_SIZE_SUP, "4_byte_size_sup" },
      { IBV_PCI_ATOMIC_OPERATION_8_BYTE_SIZE_SUP, "8_byte_size_sup" },
      { IBV_PCI_ATOMIC_OPERATION_16_BYTE_SIZE_SUP, "16_byte_size_sup" });

NAMES(port_cap_names, true, { IBV_PORT_SM, "sm" },
      { IBV_PORT_NOTICE_SUP, "notice_sup" },
      { IBV_PORT_TRAP_SUP, "trap_sup" },
      { IBV_PORT_OPT_IPD_SUP, "opt_ipd_sup" },
      { IBV_PORT_AUTO_MIGR_SUP, "auto_migr_sup" },
      { IBV_PORT_SL_MAP_SUP, "sl_map_sup" },
      { IBV_PORT_MKEY_NVRAM, "mkey_nvram" },
      { IBV_PORT_PKEY_NVRAM, "pkey_nvram" },
      { IBV_PORT_LED_INFO_SUP, "led_info_sup" },
      { IBV_PORT_SYS_IMAGE_GUID_SUP, "sys_image_guid_sup" },
      { IBV_PORT_PKEY_SW_EXT_PORT_TRAP_SUP, "pkey_sw_ext_port_trap_sup" },
      { IBV_PORT_EXTENDED_SPEEDS_SUP, "extended_speeds_sup" },
      { IBV_PORT_CAP_MASK2_SUP, "cap_mask2_sup" },
      { IBV_PORT_CM_SUP, "cm_sup" },
      { IBV_PORT_SNMP_TUNNEL_SUP, "snmp_tunnel_sup" },
      { IBV_PORT_REINIT_SUP, "reinit_sup" },
      { IBV_PORT_DEVICE_MGMT_SUP, "device_mgmt_sup" },
      { IBV_PORT_VENDOR_CLASS_SUP, "vendor_class_sup" },
      { IBV_PORT_DR_NOTICE_SUP, "dr_notice_sup" },
      { IBV_PORT_CAP_MASK_NOTICE_SUP, "cap_mask_notice_sup" },
      { IBV_PORT_BOOT_MGMT_SUP, "boot_mgmt_sup" },
      { IBV_PORT_LINK_LATENCY_SUP, "link_latency_sup" },
      { IBV_PORT_CLIENT_REG_SUP, "client_reg_sup" },
      { IBV_PORT_IP_BASED_GIDS, "ip_based_gids" });

NAMES(port_cap2_names, true,
      { IBV_PORT_SET_NODE_DESC_SUP, "set_node_desc_sup" },
      { IBV_PORT_INFO_EXT_SUP, "info_ext_sup" },
      { IBV_PORT_VIRT_SUP, "virt_sup" },
      { IBV_PORT_SWITCH_PORT_STATE_TABLE_SUP, "switch_port_state_table_sup" },
      { IBV_PORT_LINK_WIDTH_2X_SUP, "link_width_2x_sup" },
      { IBV_PORT_LINK_SPEED_HDR_SUP, "link_speed_hdr_sup" },
      { IBV_PORT_LINK_SPEED_NDR_SUP, "link_speed_ndr_sup" });

NAMES(port_flag_names, true, { IBV_QPF_GRH_REQUIRED, "grh_required" });

/* ---- field tables ---- */

enum field_kind {
	FK_NUM,	 /* integer of any size, with optional names */
	FK_STR,	 /* char array */
	FK_GUID, /* __be64 */
	FK_OBJ,	 /* nested struct */
};

struct field {
	const char *key;
	size_t off;
	size_t size;
	bool is_signed;
	enum field_kind kind;
	const struct names *names;
	const struct field *sub;
	size_t n_sub;
};

#define MEMBER(T, m) (((T *)0)->m)
/* An enum with a negative enumerator is an int; the others unsigned. */
#define IS_SIGNED(T, m)                                                        \
	_Generic(MEMBER(T, m), signed char: true, short: true, int: true,      \
		 long: true, long long: true, default: false)
#define FIELD(T, key, m, kind, nm)                                             \
	{ key, offsetof(T, m), sizeof(MEMBER(T, m)), IS_SIGNED(T, m), kind,    \
	  nm, NULL, 0 }
#define NUM(T, m, nm) FIELD(T, #m, m, FK_NUM, nm)
#define OBJ(T, m, sub)                                                         \
	{ #m, offsetof(T, m), sizeof(MEMBER(T, m)), false, FK_OBJ, NULL, sub,  \
	  ARRAY_SIZE(sub) }

#define ODP_PT_T __typeof__(MEMBER(struct ibv_odp_caps, per_transport_caps))

static const struct field odp_pt_fields[] = {
	NUM(ODP_PT_T, rc_odp_caps, &odp_transport_names),
	NUM(ODP_PT_T, uc_odp_caps, &odp_transport_names),
	NUM(ODP_PT_T, ud_odp_caps, &odp_transport_names),
};

static const struct field odp_fields[] = {
	NUM(struct ibv_odp_caps, general_caps, &odp_general_names),
	OBJ(struct ibv_odp_caps, per_transport_caps, odp_pt_fields),
};

static const struct field tso_fields[] = {
	NUM(struct ibv_tso_caps, max_tso, NULL),
	NUM(struct ibv_tso_caps, supported_qpts, &qpt_names),
};

static const struct field rss_fields[] = {
	NUM(struct ibv_rss_caps, supported_qpts, &qpt_names),
	NUM(struct ibv_rss_caps, max_rwq_indirection_tables, NULL),
	NUM(struct ibv_rss_caps, max_rwq_indirection_table_size, NULL),
	NUM(struct ibv_rss_caps, rx_hash_fields_mask, &rx_hash_field_names),
	NUM(struct ibv_rss_caps, rx_hash_function, &rx_hash_function_names),
};

static const struct field packet_pacing_fields[] = {
	NUM(struct ibv_packet_pacing_caps, qp_rate_limit_min, NULL),
	NUM(struct ibv_packet_pacing_caps, qp_rate_limit_max, NULL),
	NUM(struct ibv_packet_pacing_caps, supported_qpts, &qpt_names),
};

static const struct field tm_fields[] = {
	NUM(struct ibv_tm_caps, max_rndv_hdr_size, NULL),
	NUM(struct ibv_tm_caps, max_num_tags, NULL),
	NUM(struct ibv_tm_caps, flags, &tm_cap_names),
	NUM(struct ibv_tm_caps, max_ops, NULL),
	NUM(struct ibv_tm_caps, max_sge, NULL),
};

static const struct field cq_mod_fields[] = {
	NUM(struct ibv_cq_moderation_caps, max_cq_count, NULL),
	NUM(struct ibv_cq_moderation_caps, max_cq_period, NULL),
};

static const struct field pci_atomic_fields[] = {
	NUM(struct ibv_pci_atomic_caps, fetch_add, &pci_atomic_names),
	NUM(struct ibv_pci_atomic_caps, swap, &pci_atomic_names),
	NUM(struct ibv_pci_atomic_caps, compare_swap, &pci_atomic_names),
};

#define DEV_T struct ibv_device_attr_ex
/* A field of orig_attr, flattened into the device object. */
#define ORIG(m, nm) FIELD(DEV_T, #m, orig_attr.m, FK_NUM, nm)

static const struct field device_fields[] = {
	FIELD(DEV_T, "fw_ver", orig_attr.fw_ver, FK_STR, NULL),
	FIELD(DEV_T, "node_guid", orig_attr.node_guid, FK_GUID, NULL),
	FIELD(DEV_T, "sys_image_guid", orig_attr.sys_image_guid, FK_GUID, NULL),
	ORIG(max_mr_size, NULL),
	ORIG(page_size_cap, NULL),
	ORIG(vendor_id, NULL),
	ORIG(vendor_part_id, NULL),
	ORIG(hw_ver, NULL),
	ORIG(max_qp, NULL),
	ORIG(max_qp_wr, NULL),
	ORIG(device_cap_flags, &device_cap_names),
	ORIG(max_sge, NULL),
	ORIG(max_sge_rd, NULL),
	ORIG(max_cq, NULL),
	ORIG(max_cqe, NULL),
	ORIG(max_mr, NULL),
	ORIG(max_pd, NULL),
	ORIG(max_qp_rd_atom, NULL),
	ORIG(max_ee_rd_atom, NULL),
	ORIG(max_res_rd_atom, NULL),
	ORIG(max_qp_init_rd_atom, NULL),
	ORIG(max_ee_init_rd_atom, NULL),
	ORIG(atomic_cap, &atomic_cap_names),
	ORIG(max_ee, NULL),
	ORIG(max_rdd, NULL),
	ORIG(max_mw, NULL),
	ORIG(max_raw_ipv6_qp, NULL),
	ORIG(max_raw_ethy_qp, NULL),
	ORIG(max_mcast_grp, NULL),
	ORIG(max_mcast_qp_attach, NULL),
	ORIG(max_total_mcast_qp_attach, NULL),
	ORIG(max_ah, NULL),
	ORIG(max_fmr, NULL),
	ORIG(max_map_per_fmr, NULL),
	ORIG(max_srq, NULL),
	ORIG(max_srq_wr, NULL),
	ORIG(max_srq_sge, NULL),
	ORIG(max_pkeys, NULL),
	ORIG(local_ca_ack_delay, NULL),
	ORIG(phys_port_cnt, NULL),
	NUM(DEV_T, comp_mask, NULL),
	OBJ(DEV_T, odp_caps, odp_fields),
	NUM(DEV_T, completion_timestamp_mask, NULL),
	NUM(DEV_T, hca_core_clock, NULL),
	NUM(DEV_T, device_cap_flags_ex, &device_cap_names),
	OBJ(DEV_T, tso_caps, tso_fields),
	OBJ(DEV_T, rss_caps, rss_fields),
	NUM(DEV_T, max_wq_type_rq, NULL),
	OBJ(DEV_T, packet_pacing_caps, packet_pacing_fields),
	NUM(DEV_T, raw_packet_caps, &raw_packet_names),
	OBJ(DEV_T, tm_caps, tm_fields),
	OBJ(DEV_T, cq_mod_caps, cq_mod_fields),
	NUM(DEV_T, max_dm_size, NULL),
	OBJ(DEV_T, pci_atomic_caps, pci_atomic_fields),
	NUM(DEV_T, xrc_odp_caps, &odp_transport_names),
	NUM(DEV_T, phys_port_cnt_ex, NULL),
};

#define PORT_T struct ibv_port_attr

static const struct field port_fields[] = {
	NUM(PORT_T, state, &port_state_names),
	NUM(PORT_T, max_mtu, &mtu_names),
	NUM(PORT_T, active_mtu, &mtu_names),
	NUM(PORT_T, gid_tbl_len, NULL),
	NUM(PORT_T, port_cap_flags, &port_cap_names),
	NUM(PORT_T, max_msg_sz, NULL),
	NUM(PORT_T, bad_pkey_cntr, NULL),
	NUM(PORT_T, qkey_viol_cntr, NULL),
	NUM(PORT_T, pkey_tbl_len, NULL),
	NUM(PORT_T, lid, NULL),
	NUM(PORT_T, sm_lid, NULL),
	NUM(PORT_T, lmc, NULL),
	NUM(PORT_T, max_vl_num, NULL),
	NUM(PORT_T, sm_sl, NULL),
	NUM(PORT_T, subnet_timeout, NULL),
	NUM(PORT_T, init_type_reply, NULL),
	NUM(PORT_T, active_width, &width_names),
	NUM(PORT_T, active_speed, &speed_names),
	NUM(PORT_T, phys_state, &phys_state_names),
	NUM(PORT_T, link_layer, &link_layer_names),
	NUM(PORT_T, flags, &port_flag_names),
	NUM(PORT_T, port_cap_flags2, &port_cap2_names),
};

static const struct field summary_fields[] = {
	FIELD(struct ibv_device, "name", name, FK_STR, NULL),
	NUM(struct ibv_device, node_type, &node_type_names),
	NUM(struct ibv_device, transport_type, &transport_names),
};

/* ---- encoding ---- */

/* Steals v, also on failure; a NULL v (failed allocation) fails. */
static int set(json_t *o, const char *key, json_t *v)
{
	return json_object_set_new(o, key, v) ? -ENOMEM : 0;
}

/* libibverbs returns a positive errno; some paths -errno, or -1 and errno. */
static int verbs_err(int ret)
{
	if (ret > 0)
		return -ret;
	if (ret < -1)
		return ret;
	return errno > 0 ? -errno : -EIO;
}

static json_t *u64_json(uint64_t v)
{
	char buf[24];

	if (v <= INT64_MAX)
		return json_integer((json_int_t)v);
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return json_string(buf);
}

static json_t *guid_json(__be64 guid)
{
	uint64_t g = be64toh(guid);
	char buf[20];

	snprintf(buf, sizeof(buf), "%04x:%04x:%04x:%04x",
		 (unsigned int)(g >> 48) & 0xffff,
		 (unsigned int)(g >> 32) & 0xffff,
		 (unsigned int)(g >> 16) & 0xffff, (unsigned int)g & 0xffff);
	return json_string(buf);
}

/* A fixed-size char array from the kernel: stop at NUL, keep it ASCII so
 * that jansson's UTF-8 check cannot turn bad firmware text into ENOMEM. */
static json_t *chars_json(const char *s, size_t size)
{
	char buf[256];
	size_t i;

	for (i = 0; i < size && i < sizeof(buf) - 1 && s[i]; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	buf[i] = '\0';
	return json_string(buf);
}

static const char *name_of(const struct names *nm, uint64_t v)
{
	for (size_t i = 0; i < nm->n; i++)
		if (nm->v[i].val == v)
			return nm->v[i].name;
	return NULL;
}

static json_t *names_json(const struct names *nm, uint64_t v)
{
	json_t *a;
	char buf[24];

	if (!nm->mask) {
		const char *s = name_of(nm, v);

		return json_string(s ? s : "unknown");
	}
	a = json_array();
	for (unsigned int bit = 0; a && bit < 64; bit++) {
		uint64_t b = UINT64_C(1) << bit;
		const char *s;

		if (!(v & b))
			continue;
		s = name_of(nm, b);
		if (!s) {
			snprintf(buf, sizeof(buf), "0x%" PRIx64, b);
			s = buf;
		}
		if (json_array_append_new(a, json_string(s))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* The field's value, sign-extended when the C type is signed. */
static uint64_t field_value(const void *p, const struct field *f)
{
	switch (f->size) {
	case 1: {
		uint8_t v;

		memcpy(&v, p, sizeof(v));
		return f->is_signed ? (uint64_t)(int8_t)v : v;
	}
	case 2: {
		uint16_t v;

		memcpy(&v, p, sizeof(v));
		return f->is_signed ? (uint64_t)(int16_t)v : v;
	}
	case 4: {
		uint32_t v;

		memcpy(&v, p, sizeof(v));
		return f->is_signed ? (uint64_t)(int32_t)v : v;
	}
	default: {
		uint64_t v;

		memcpy(&v, p, sizeof(v));
		return v;
	}
	}
}

static int emit_fields(json_t *o, const void *base, const struct field *f,
		       size_t n);

static int emit_field(json_t *o, const void *base, const struct field *f)
{
	const char *p = (const char *)base + f->off;
	char key[64];
	uint64_t v;
	json_t *sub;
	__be64 guid;
	int r;

	switch (f->kind) {
	case FK_STR:
		return set(o, f->key, chars_json(p, f->size));
	case FK_GUID:
		memcpy(&guid, p, sizeof(guid));
		return set(o, f->key, guid_json(guid));
	case FK_OBJ:
		sub = json_object();
		r = set(o, f->key, sub);
		return r < 0 ? r : emit_fields(sub, p, f->sub, f->n_sub);
	case FK_NUM:
		break;
	}
	v = field_value(p, f);
	r = set(o, f->key,
		f->is_signed ? json_integer((json_int_t)v) : u64_json(v));
	if (r < 0 || !f->names)
		return r;
	snprintf(key, sizeof(key), "%s_%s", f->key,
		 f->names->mask ? "names" : "name");
	return set(o, key, names_json(f->names, v));
}

static int emit_fields(json_t *o, const void *base, const struct field *f,
		       size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = emit_field(o, base, &f[i]);

		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- queries ---- */

static int port_count(struct ibv_context *ctx, uint32_t *n)
{
	struct ibv_device_attr_ex attr = {};
	int r = ibv_query_device_ex(ctx, NULL, &attr);

	if (r)
		return verbs_err(r);
	*n = attr.phys_port_cnt_ex ? attr.phys_port_cnt_ex
				   : attr.orig_attr.phys_port_cnt;
	return 0;
}

static int port_check(struct ibv_context *ctx, uint8_t port)
{
	uint32_t n;
	int r = port_count(ctx, &n);

	if (r < 0)
		return r;
	return port >= 1 && port <= n ? 0 : -ENOENT;
}

int devinfo_summary(struct ibv_device *dev, json_t **out)
{
	json_auto_t *j = json_object();
	int r;

	if (!j)
		return -ENOMEM;
	r = emit_fields(j, dev, summary_fields, ARRAY_SIZE(summary_fields));
	if (r < 0)
		return r;
	r = set(j, "index", json_integer(ibv_get_device_index(dev)));
	if (r < 0)
		return r;
	r = set(j, "node_guid", guid_json(ibv_get_device_guid(dev)));
	if (r < 0)
		return r;
	*out = TAKE_PTR(j);
	return 0;
}

int devinfo_device(struct ibv_context *ctx, json_t **out)
{
	struct ibv_device_attr_ex attr = {};
	json_auto_t *j = NULL;
	int r;

	r = ibv_query_device_ex(ctx, NULL, &attr);
	if (r)
		return verbs_err(r);
	r = devinfo_summary(ctx->device, &j);
	if (r < 0)
		return r;
	r = set(j, "num_comp_vectors", json_integer(ctx->num_comp_vectors));
	if (r < 0)
		return r;
	/* node_guid from the query replaces the sysfs one, in place. */
	r = emit_fields(j, &attr, device_fields, ARRAY_SIZE(device_fields));
	if (r < 0)
		return r;
	*out = TAKE_PTR(j);
	return 0;
}

int devinfo_port(struct ibv_context *ctx, uint8_t port, json_t **out)
{
	struct ibv_port_attr attr = {};
	json_auto_t *j = NULL;
	int r;

	r = port_check(ctx, port);
	if (r < 0)
		return r;
	r = ibv_query_port(ctx, port, &attr);
	if (r)
		return verbs_err(r);
	j = json_object();
	if (!j)
		return -ENOMEM;
	r = set(j, "port_num", json_integer(port));
	if (r < 0)
		return r;
	r = emit_fields(j, &attr, port_fields, ARRAY_SIZE(port_fields));
	if (r < 0)
		return r;
	*out = TAKE_PTR(j);
	return 0;
}

static json_t *gid_entry_json(const struct ibv_gid_entry *e)
{
	const char *type = name_of(&gid_type_names, e->gid_type);
	char ifname[IF_NAMESIZE];
	json_t *netdev = json_null();
	char gid[GID_TEXT_SIZE];

	gid_text(&e->gid, gid);
	/* The netdev may live in another namespace: then it is null. */
	if (e->ndev_ifindex && if_indextoname(e->ndev_ifindex, ifname))
		netdev = json_string(ifname);
	return json_pack("{s:I, s:s, s:s, s:o}", "index",
			 (json_int_t)e->gid_index, "gid", gid, "type",
			 type ? type : "unknown", "netdev", netdev);
}

int devinfo_gids(struct ibv_context *ctx, uint8_t port, json_t **out)
{
	_cleanup_free_ struct ibv_gid_entry *ent = NULL;
	json_auto_t *a = NULL;
	size_t max = 0;
	uint32_t nports;
	ssize_t n;
	int r;

	r = port_count(ctx, &nports);
	if (r < 0)
		return r;
	if (port < 1 || port > nports)
		return -ENOENT;
	/*
	 * ibv_query_gid_table() returns the valid GIDs of every port and
	 * fails with EINVAL if they do not fit: make room for every port's
	 * whole table.
	 */
	for (uint32_t p = 1; p <= nports && p <= UINT8_MAX; p++) {
		struct ibv_port_attr pa = {};

		r = ibv_query_port(ctx, (uint8_t)p, &pa);
		if (r)
			return verbs_err(r);
		if (pa.gid_tbl_len > 0)
			max += (size_t)pa.gid_tbl_len;
	}
	a = json_array();
	if (!a)
		return -ENOMEM;
	if (max) {
		ent = calloc(max, sizeof(*ent));
		if (!ent)
			return -ENOMEM;
		n = ibv_query_gid_table(ctx, ent, max, 0);
		if (n < 0)
			return (int)n;
		for (ssize_t i = 0; i < n; i++) {
			if (ent[i].port_num != port)
				continue;
			if (json_array_append_new(a, gid_entry_json(&ent[i])))
				return -ENOMEM;
		}
	}
	*out = TAKE_PTR(a);
	return 0;
}

struct ibv_context *devinfo_open(const char *ibdev)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int err = ENODEV;

	/* NULL (not an empty list) when the host has no RDMA device. */
	if (!list)
		goto out;
	for (struct ibv_device **d = list; *d; d++)
		if (streq(ibv_get_device_name(*d), ibdev)) {
			ctx = ibv_open_device(*d);
			err = ctx ? 0 : errno;
			break;
		}
	ibv_free_device_list(list);
out:
	errno = err;
	return ctx;
}

int devinfo_index(const char *ibdev)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	int idx = -ENODEV;

	for (struct ibv_device **d = list; d && *d; d++)
		if (streq(ibv_get_device_name(*d), ibdev)) {
			idx = ibv_get_device_index(*d);
			if (idx < 0)
				idx = -EOPNOTSUPP;
			break;
		}
	if (list)
		ibv_free_device_list(list);
	return idx;
}

int devinfo_probe_import(struct ibv_context *ctx)
{
	struct ibv_context *imported;
	int fd, err;

	fd = fcntl(ctx->cmd_fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	imported = ibv_import_device(fd);
	if (!imported) {
		err = errno ? errno : EOPNOTSUPP;
		close(fd);
		return -err;
	}
	/* Closing the imported context closes fd, not the original. */
	ibv_close_device(imported);
	return 0;
}

const char *devinfo_port_state_name(enum ibv_port_state s)
{
	return name_of(&port_state_names, s);
}
