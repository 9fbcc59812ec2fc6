// SPDX-License-Identifier: MIT
/*
 * rdmactl's pyverbs-style text (client/devprint.c) and the JSON documents
 * it prints (daemon/verbs/devinfo.c).
 *
 * The expected texts are pyverbs' (rdma-core 44) own output: the zero
 * documents give exactly str(DeviceAttr()) / str(PortAttr()) of the
 * installed python3-pyverbs, the others were made with pyverbs' helper
 * functions (guid_format, translate_device_caps, speed_to_str, ...) on the
 * same values, with the spaces that end pyverbs' lines taken off (rdmactl
 * leaves no trailing blanks; see devprint.c).
 *
 * devinfo is run without hardware on a fake verbs context whose
 * query_device_ex and query_port ops return fixed attributes; its documents
 * must print as pyverbs prints the same attributes.
 */
#include <endian.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include <infiniband/verbs.h>
#include <jansson.h>

#include "devinfo.h"
#include "devprint.h"
#include "util.h"

/* ---- expected texts ---- */

static const char device_text[] =
	"FW version            : 1.2.3\n"
	"Node guid             : 0250:56ff:fe9a:bcde\n"
	"Sys image GUID        : 0250:56ff:fe9a:bcde\n"
	"Max MR size           : 0xffffffffffffffff\n"
	"Page size cap         : 0xfffff000\n"
	"Vendor ID             : 0xffffff\n"
	"Vendor part ID        : 0\n"
	"HW version            : 0\n"
	"Max QP                : 1048560\n"
	"Max QP WR             : 1048576\n"
	"Device cap flags      :\n"
	"  IBV_DEVICE_BAD_PKEY_CNTR\n"
	"  IBV_DEVICE_BAD_QKEY_CNTR\n"
	"  IBV_DEVICE_AUTO_PATH_MIG\n"
	"  IBV_DEVICE_CHANGE_PHY_PORT\n"
	"  IBV_DEVICE_UD_AV_PORT_ENFORCE\n"
	"  IBV_DEVICE_PORT_ACTIVE_EVENT\n"
	"  IBV_DEVICE_SYS_IMAGE_GUID\n"
	"  IBV_DEVICE_RC_RNR_NAK_GEN\n"
	"  IBV_DEVICE_SRQ_RESIZE\n"
	"  IBV_DEVICE_MEM_WINDOW\n"
	"  IBV_DEVICE_MEM_MGT_EXTENSIONS\n"
	"  IBV_DEVICE_MEM_WINDOW_TYPE_2A\n"
	"  IBV_DEVICE_MEM_WINDOW_TYPE_2B\n"
	"\n"
	"Max SGE               : 32\n"
	"Max SGE RD            : 32\n"
	"MAX CQ                : 1048576\n"
	"Max CQE               : 32767\n"
	"Max MR                : 524287\n"
	"Max PD                : 1048576\n"
	"Max QP RD atom        : 128\n"
	"Max EE RD atom        : 0\n"
	"Max res RD atom       : 258048\n"
	"Max QP init RD atom   : 128\n"
	"Max EE init RD atom   : 0\n"
	"Atomic caps           : 1\n"
	"Max EE                : 0\n"
	"Max RDD               : 0\n"
	"Max MW                : 524287\n"
	"Max raw IPv6 QPs      : 0\n"
	"Max raw ethy QP       : 0\n"
	"Max mcast group       : 8192\n"
	"Max mcast QP attach   : 56\n"
	"Max AH                : 32767\n"
	"Max FMR               : 0\n"
	"Max map per FMR       : 0\n"
	"Max SRQ               : 917503\n"
	"Max SRQ WR            : 1048576\n"
	"Max SRQ SGE           : 27\n"
	"Max PKeys             : 64\n"
	"local CA ack delay    : 15\n"
	"Phys port count       : 1\n";

static const char port_text[] =
	"Port state              : Active (4)\n"
	"Max MTU                 : 4096 (5)\n"
	"Active MTU              : 1024 (3)\n"
	"SM lid                  : 0\n"
	"Port lid                : 0\n"
	"lmc                     : 0x0\n"
	"Link layer              : Ethernet\n"
	"Max message size        : 0x800000\n"
	"Port cap flags          :\n"
	"  IBV_PORT_CM_SUP\n"
	"  IBV_PORT_IP_BASED_GIDS\n"
	"\n"
	"Port cap flags 2        :\n"
	"  IBV_PORT_LINK_SPEED_HDR_SUP\n"
	"  IBV_PORT_LINK_SPEED_NDR_SUP\n"
	"\n"
	"max VL num              : 1\n"
	"Bad Pkey counter        : 0\n"
	"Qkey violations counter : 0\n"
	"GID table len           : 1024\n"
	"Pkey table len          : 1\n"
	"SM sl                   : 0\n"
	"Subnet timeout          : 0\n"
	"Init type reply         : 0\n"
	"Active width            : Invalid width\n"
	"Active speed            : 5.0 Gbps (4)\n"
	"Phys state              : Link up (5)\n"
	"Flags                   : 0\n";

/* str(pyverbs.device.DeviceAttr()) */
static const char device_zero_text[] =
	"FW version            :\n"
	"Node guid             : 0000:0000:0000:0000\n"
	"Sys image GUID        : 0000:0000:0000:0000\n"
	"Max MR size           : 0x0\n"
	"Page size cap         : 0x0\n"
	"Vendor ID             : 0x0\n"
	"Vendor part ID        : 0\n"
	"HW version            : 0\n"
	"Max QP                : 0\n"
	"Max QP WR             : 0\n"
	"Device cap flags      :\n"
	"\n"
	"Max SGE               : 0\n"
	"Max SGE RD            : 0\n"
	"MAX CQ                : 0\n"
	"Max CQE               : 0\n"
	"Max MR                : 0\n"
	"Max PD                : 0\n"
	"Max QP RD atom        : 0\n"
	"Max EE RD atom        : 0\n"
	"Max res RD atom       : 0\n"
	"Max QP init RD atom   : 0\n"
	"Max EE init RD atom   : 0\n"
	"Atomic caps           : 0\n"
	"Max EE                : 0\n"
	"Max RDD               : 0\n"
	"Max MW                : 0\n"
	"Max raw IPv6 QPs      : 0\n"
	"Max raw ethy QP       : 0\n"
	"Max mcast group       : 0\n"
	"Max mcast QP attach   : 0\n"
	"Max AH                : 0\n"
	"Max FMR               : 0\n"
	"Max map per FMR       : 0\n"
	"Max SRQ               : 0\n"
	"Max SRQ WR            : 0\n"
	"Max SRQ SGE           : 0\n"
	"Max PKeys             : 0\n"
	"local CA ack delay    : 0\n"
	"Phys port count       : 0\n";

/* str(pyverbs.device.PortAttr()) */
static const char port_zero_text[] =
	"Port state              : NOP (0)\n"
	"Max MTU                 : Invalid MTU (0)\n"
	"Active MTU              : Invalid MTU (0)\n"
	"SM lid                  : 0\n"
	"Port lid                : 0\n"
	"lmc                     : 0x0\n"
	"Link layer              : Unspecified\n"
	"Max message size        : 0x0\n"
	"Port cap flags          :\n"
	"\n"
	"Port cap flags 2        :\n"
	"\n"
	"max VL num              : 0\n"
	"Bad Pkey counter        : 0\n"
	"Qkey violations counter : 0\n"
	"GID table len           : 0\n"
	"Pkey table len          : 0\n"
	"SM sl                   : 0\n"
	"Subnet timeout          : 0\n"
	"Init type reply         : 0\n"
	"Active width            : Invalid width\n"
	"Active speed            : 0.0 Gbps (0)\n"
	"Phys state              : Invalid physical state\n"
	"Flags                   : 0\n";

static const char odp_text[] = "ODP General caps:\n"
			       "  IBV_ODP_SUPPORT\n"
			       "\n"
			       "RC ODP caps:\n"
			       "  IBV_ODP_SUPPORT_SEND\n"
			       "  IBV_ODP_SUPPORT_RECV\n"
			       "  IBV_ODP_SUPPORT_WRITE\n"
			       "\n"
			       "UD ODP caps:\n"
			       "  IBV_ODP_SUPPORT_SEND\n"
			       "\n"
			       "UC ODP caps:\n"
			       "\n"
			       "XRC ODP caps:\n"
			       "  IBV_ODP_SUPPORT_READ\n"
			       "  IBV_ODP_SUPPORT_ATOMIC\n"
			       "  IBV_ODP_SUPPORT_SRQ_RECV\n"
			       "\n";

/* ---- the documents, as devinfo writes them ---- */

/* device_cap_flags has bit 27, which nobody names: pyverbs hides it. */
static const char device_json[] = "{"
	"\"fw_ver\": \"1.2.3\","
	"\"node_guid\": \"0250:56ff:fe9a:bcde\","
	"\"sys_image_guid\": \"0250:56ff:fe9a:bcde\","
	"\"max_mr_size\": \"18446744073709551615\","
	"\"page_size_cap\": 4294963200, \"vendor_id\": 16777215,"
	"\"vendor_part_id\": 0, \"hw_ver\": 0, \"max_qp\": 1048560,"
	"\"max_qp_wr\": 1048576, \"device_cap_flags\": 161627254,"
	"\"max_sge\": 32, \"max_sge_rd\": 32, \"max_cq\": 1048576,"
	"\"max_cqe\": 32767, \"max_mr\": 524287, \"max_pd\": 1048576,"
	"\"max_qp_rd_atom\": 128, \"max_ee_rd_atom\": 0,"
	"\"max_res_rd_atom\": 258048, \"max_qp_init_rd_atom\": 128,"
	"\"max_ee_init_rd_atom\": 0, \"atomic_cap\": 1, \"max_ee\": 0,"
	"\"max_rdd\": 0, \"max_mw\": 524287, \"max_raw_ipv6_qp\": 0,"
	"\"max_raw_ethy_qp\": 0, \"max_mcast_grp\": 8192,"
	"\"max_mcast_qp_attach\": 56, \"max_ah\": 32767, \"max_fmr\": 0,"
	"\"max_map_per_fmr\": 0, \"max_srq\": 917503, \"max_srq_wr\": 1048576,"
	"\"max_srq_sge\": 27, \"max_pkeys\": 64, \"local_ca_ack_delay\": 15,"
	"\"phys_port_cnt\": 1,"
	"\"odp_caps\": {\"general_caps\": 1, \"per_transport_caps\":"
	" {\"rc_odp_caps\": 7, \"uc_odp_caps\": 0, \"ud_odp_caps\": 1}},"
	"\"xrc_odp_caps\": 56"
	"}";

/* port_cap_flags has bit 0, which nobody names. */
static const char port_json[] = "{"
	"\"port_num\": 1, \"state\": 4, \"max_mtu\": 5, \"active_mtu\": 3,"
	"\"gid_tbl_len\": 1024, \"port_cap_flags\": 67174401,"
	"\"max_msg_sz\": 8388608, \"bad_pkey_cntr\": 0, \"qkey_viol_cntr\": 0,"
	"\"pkey_tbl_len\": 1, \"lid\": 0, \"sm_lid\": 0, \"lmc\": 0,"
	"\"max_vl_num\": 1, \"sm_sl\": 0, \"subnet_timeout\": 0,"
	"\"init_type_reply\": 0, \"active_width\": 8, \"active_speed\": 4,"
	"\"phys_state\": 5, \"link_layer\": 2, \"flags\": 0,"
	"\"port_cap_flags2\": 1056"
	"}";

/* ---- helpers ---- */

typedef void (*print_fn)(FILE *f, json_t *doc);

/* What fn prints for doc, to free. */
static char *print_to_string(print_fn fn, json_t *doc)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	fn(f, doc);
	assert_int_equal(fclose(f), 0);
	assert_non_null(buf);
	return buf;
}

static void assert_prints(print_fn fn, json_t *doc, const char *expected)
{
	char *s = print_to_string(fn, doc);

	assert_string_equal(s, expected);
	free(s);
}

static json_t *load(const char *text)
{
	json_error_t err;
	json_t *j = json_loads(text, 0, &err);

	if (!j)
		fail_msg("bad test JSON: %s at %d", err.text, err.position);
	return j;
}

/* The value at a '.'-separated path of objects, or NULL. */
static json_t *lookup(json_t *doc, const char *path)
{
	const char *dot;

	while (doc && (dot = strchr(path, '.'))) {
		doc = json_object_getn(doc, path, (size_t)(dot - path));
		path = dot + 1;
	}
	return doc ? json_object_get(doc, path) : NULL;
}

/* ---- JSON -> text ---- */

static void test_device_text(void **state)
{
	json_t *j = load(device_json);

	(void)state;
	assert_prints(devprint_device, j, device_text);
	json_decref(j);
}

static void test_port_text(void **state)
{
	json_t *j = load(port_json);

	(void)state;
	assert_prints(devprint_port, j, port_text);
	json_decref(j);
}

static void test_odp_text(void **state)
{
	json_t *j = load(device_json);

	(void)state;
	assert_prints(devprint_odp_caps, j, odp_text);
	json_decref(j);
}

/* Values no device sends today still print as pyverbs would. */
static void test_odd_values(void **state)
{
	json_t *j = load("{\"state\": 9, \"max_mtu\": 7, \"link_layer\": 3,"
			 "\"active_width\": 16, \"active_speed\": 128,"
			 "\"phys_state\": 8, \"lmc\": 255}");
	char *s;

	(void)state;
	s = print_to_string(devprint_port, j);
	assert_non_null(strstr(s, "Port state              : Invalid state (9)\n"));
	assert_non_null(strstr(s, "Max MTU                 : Invalid MTU (7)\n"));
	assert_non_null(strstr(s, "Link layer              : Invalid link layer (3)\n"));
	assert_non_null(strstr(s, "Active width            : 2X (16)\n"));
	assert_non_null(strstr(s, "Active speed            : 100.0 Gbps (128)\n"));
	assert_non_null(strstr(s, "Phys state              : Invalid physical state\n"));
	assert_non_null(strstr(s, "lmc                     : 0xff\n"));
	free(s);
	json_decref(j);
}

/* A document without the keys (an older daemon, a typo) does not crash
 * and says so on every line. */
static void test_missing(void **state)
{
	json_t *j = json_object();
	char *s;

	(void)state;
	s = print_to_string(devprint_device, j);
	assert_non_null(strstr(s, "FW version            : N/A\n"));
	assert_non_null(strstr(s, "Device cap flags      : N/A\n"));
	assert_non_null(strstr(s, "Phys port count       : N/A\n"));
	free(s);
	s = print_to_string(devprint_port, j);
	assert_non_null(strstr(s, "Port state              : N/A\n"));
	free(s);
	json_decref(j);
	/* Wrong types too. */
	j = load("{\"max_qp\": \"many\", \"fw_ver\": 3, \"max_mr_size\": -1}");
	s = print_to_string(devprint_device, j);
	assert_non_null(strstr(s, "Max QP                : N/A\n"));
	assert_non_null(strstr(s, "FW version            : N/A\n"));
	assert_non_null(strstr(s, "Max MR size           : -0x1\n"));
	free(s);
	json_decref(j);
}

/* ---- devinfo on a fake device ---- */

/*
 * The tests run without RDMA hardware. These replace the libibverbs
 * functions that would read sysfs or issue ioctls: a definition in the
 * executable takes precedence over the shared library's.
 */
static struct ibv_gid_entry fake_gids[4];
static size_t fake_gid_max_entries;

int ibv_get_device_index(struct ibv_device *device)
{
	(void)device;
	return 7;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	(void)device;
	return htobe64(UINT64_C(0x025056fffe9abcde));
}

ssize_t _ibv_query_gid_table(struct ibv_context *context,
			     struct ibv_gid_entry *entries, size_t max_entries,
			     uint32_t flags, size_t entry_size)
{
	(void)context;
	(void)flags;
	assert_int_equal(entry_size, sizeof(*entries));
	fake_gid_max_entries = max_entries;
	if (max_entries < ARRAY_SIZE(fake_gids))
		return -EINVAL;
	memcpy(entries, fake_gids, sizeof(fake_gids));
	return ARRAY_SIZE(fake_gids);
}

static struct ibv_device_attr_ex fake_attr;
static struct ibv_port_attr fake_port;
static struct verbs_context fake_vctx;
static struct ibv_device fake_dev;

static int fake_query_device_ex(struct ibv_context *ctx,
				const struct ibv_query_device_ex_input *in,
				struct ibv_device_attr_ex *attr, size_t size)
{
	(void)ctx;
	(void)in;
	memcpy(attr, &fake_attr, size < sizeof(*attr) ? size : sizeof(*attr));
	return 0;
}

static int fake_query_port(struct ibv_context *ctx, uint8_t port,
			   struct ibv_port_attr *attr, size_t size)
{
	(void)ctx;
	(void)port;
	memcpy(attr, &fake_port, size < sizeof(*attr) ? size : sizeof(*attr));
	return 0;
}

/* The values of device_json / port_json, as the kernel would report them. */
static struct ibv_context *fake_context(void)
{
	struct ibv_device_attr *a = &fake_attr.orig_attr;
	struct ibv_port_attr *p = &fake_port;

	memset(&fake_attr, 0, sizeof(fake_attr));
	strcpy(a->fw_ver, "1.2.3");
	a->node_guid = htobe64(UINT64_C(0x025056fffe9abcde));
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = UINT64_MAX;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = 0xffffff;
	a->max_qp = 1048560;
	a->max_qp_wr = 1048576;
	a->device_cap_flags = 161627254; /* rxe's and bit 27 */
	a->max_sge = 32;
	a->max_sge_rd = 32;
	a->max_cq = 1048576;
	a->max_cqe = 32767;
	a->max_mr = 524287;
	a->max_pd = 1048576;
	a->max_qp_rd_atom = 128;
	a->max_res_rd_atom = 258048;
	a->max_qp_init_rd_atom = 128;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_mw = 524287;
	a->max_mcast_grp = 8192;
	a->max_mcast_qp_attach = 56;
	a->max_total_mcast_qp_attach = -1; /* a negative int stays negative */
	a->max_ah = 32767;
	a->max_srq = 917503;
	a->max_srq_wr = 1048576;
	a->max_srq_sge = 27;
	a->max_pkeys = 64;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
	fake_attr.odp_caps.general_caps = IBV_ODP_SUPPORT;
	fake_attr.odp_caps.per_transport_caps.rc_odp_caps = 7;
	fake_attr.odp_caps.per_transport_caps.ud_odp_caps = 1;
	fake_attr.xrc_odp_caps = 56;
	fake_attr.device_cap_flags_ex =
		a->device_cap_flags | IBV_DEVICE_RAW_SCATTER_FCS;
	fake_attr.rss_caps.supported_qpts =
		1 << IBV_QPT_UD | 1 << IBV_QPT_RAW_PACKET;
	fake_attr.rss_caps.rx_hash_fields_mask = IBV_RX_HASH_INNER;
	fake_attr.completion_timestamp_mask = INT64_MAX;
	fake_attr.phys_port_cnt_ex = 1;

	memset(&fake_port, 0, sizeof(fake_port));
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = IBV_MTU_4096;
	p->active_mtu = IBV_MTU_1024;
	p->gid_tbl_len = 1024;
	p->port_cap_flags = 67174401;
	p->max_msg_sz = 0x800000;
	p->pkey_tbl_len = 1;
	p->max_vl_num = 1;
	p->active_width = 8;
	p->active_speed = 4;
	p->phys_state = 5;
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
	p->port_cap_flags2 = 1056;

	memset(&fake_dev, 0, sizeof(fake_dev));
	strcpy(fake_dev.name, "fake0");
	fake_dev.node_type = IBV_NODE_CA;
	fake_dev.transport_type = IBV_TRANSPORT_IB;

	memset(&fake_vctx, 0, sizeof(fake_vctx));
	fake_vctx.sz = sizeof(fake_vctx);
	fake_vctx.query_device_ex = fake_query_device_ex;
	fake_vctx.query_port = fake_query_port;
	fake_vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	fake_vctx.context.device = &fake_dev;
	fake_vctx.context.num_comp_vectors = 2;
	return &fake_vctx.context;
}

static void assert_str_key(json_t *o, const char *path, const char *want)
{
	json_t *v = lookup(o, path);

	if (!json_is_string(v))
		fail_msg("%s is not a string", path);
	assert_string_equal(json_string_value(v), want);
}

static void assert_int_key(json_t *o, const char *path, json_int_t want)
{
	json_t *v = lookup(o, path);

	if (!json_is_integer(v))
		fail_msg("%s is not an integer", path);
	assert_int_equal(json_integer_value(v), want);
}

/* The names array at path, joined with ',' (to free). */
static char *names_at(json_t *o, const char *path)
{
	json_t *a = lookup(o, path), *v;
	char *buf = NULL;
	size_t len = 0, i;
	FILE *f = open_memstream(&buf, &len);

	if (!json_is_array(a))
		fail_msg("%s is not an array", path);
	json_array_foreach(a, i, v)
		fprintf(f, "%s%s", i ? "," : "", json_string_value(v));
	fclose(f);
	return buf;
}

static void assert_names(json_t *o, const char *path, const char *want)
{
	char *s = names_at(o, path);

	assert_string_equal(s, want);
	free(s);
}

static void test_devinfo_device(void **state)
{
	struct ibv_context *ctx = fake_context();
	json_t *j = NULL;

	(void)state;
	assert_int_equal(devinfo_device(ctx, &j), 0);
	assert_str_key(j, "name", "fake0");
	assert_int_key(j, "index", 7);
	assert_int_key(j, "node_type", IBV_NODE_CA);
	assert_str_key(j, "node_type_name", "ca");
	assert_str_key(j, "transport_type_name", "ib");
	assert_int_key(j, "num_comp_vectors", 2);
	assert_str_key(j, "fw_ver", "1.2.3");
	assert_str_key(j, "node_guid", "0250:56ff:fe9a:bcde");
	/* Above INT64_MAX: a decimal string; at INT64_MAX still a number. */
	assert_str_key(j, "max_mr_size", "18446744073709551615");
	assert_int_key(j, "completion_timestamp_mask", INT64_MAX);
	assert_int_key(j, "max_total_mcast_qp_attach", -1);
	assert_int_key(j, "atomic_cap", 1);
	assert_str_key(j, "atomic_cap_name", "hca");
	assert_names(j, "device_cap_flags_names",
		     "bad_pkey_cntr,bad_qkey_cntr,auto_path_mig,"
		     "change_phy_port,ud_av_port_enforce,port_active_event,"
		     "sys_image_guid,rc_rnr_nak_gen,srq_resize,mem_window,"
		     "mem_mgt_extensions,mem_window_type_2a,mem_window_type_2b,"
		     "0x8000000");
	assert_names(j, "device_cap_flags_ex_names",
		     "bad_pkey_cntr,bad_qkey_cntr,auto_path_mig,"
		     "change_phy_port,ud_av_port_enforce,port_active_event,"
		     "sys_image_guid,rc_rnr_nak_gen,srq_resize,mem_window,"
		     "mem_mgt_extensions,mem_window_type_2a,mem_window_type_2b,"
		     "0x8000000,raw_scatter_fcs");
	assert_int_key(j, "odp_caps.general_caps", 1);
	assert_names(j, "odp_caps.general_caps_names", "support");
	assert_names(j, "odp_caps.per_transport_caps.rc_odp_caps_names",
		     "send,recv,write");
	assert_names(j, "odp_caps.per_transport_caps.uc_odp_caps_names", "");
	assert_names(j, "xrc_odp_caps_names", "read,atomic,srq_recv");
	assert_names(j, "rss_caps.supported_qpts_names", "ud,raw_packet");
	assert_names(j, "rss_caps.rx_hash_fields_mask_names", "inner");
	assert_int_key(j, "tso_caps.max_tso", 0);
	assert_int_key(j, "packet_pacing_caps.qp_rate_limit_max", 0);
	assert_int_key(j, "tm_caps.max_num_tags", 0);
	assert_int_key(j, "cq_mod_caps.max_cq_period", 0);
	assert_int_key(j, "pci_atomic_caps.compare_swap", 0);
	assert_int_key(j, "max_dm_size", 0);
	assert_int_key(j, "phys_port_cnt_ex", 1);
	/* And the round trip to pyverbs' text. */
	assert_prints(devprint_device, j, device_text);
	assert_prints(devprint_odp_caps, j, odp_text);
	json_decref(j);
}

static void test_devinfo_port(void **state)
{
	struct ibv_context *ctx = fake_context();
	json_t *j = NULL;

	(void)state;
	assert_int_equal(devinfo_port(ctx, 1, &j), 0);
	assert_int_key(j, "port_num", 1);
	assert_int_key(j, "state", IBV_PORT_ACTIVE);
	assert_str_key(j, "state_name", "active");
	assert_str_key(j, "max_mtu_name", "4096");
	assert_str_key(j, "active_mtu_name", "1024");
	assert_str_key(j, "link_layer_name", "ethernet");
	assert_str_key(j, "active_width_name", "12x");
	assert_str_key(j, "active_speed_name", "qdr");
	assert_str_key(j, "phys_state_name", "link_up");
	assert_names(j, "port_cap_flags_names", "0x1,cm_sup,ip_based_gids");
	assert_names(j, "port_cap_flags2_names",
		     "link_speed_hdr_sup,link_speed_ndr_sup");
	assert_names(j, "flags_names", "");
	assert_prints(devprint_port, j, port_text);
	json_decref(j);

	j = NULL;
	assert_int_equal(devinfo_port(ctx, 0, &j), -ENOENT);
	assert_int_equal(devinfo_port(ctx, 2, &j), -ENOENT);
	assert_null(j);
}

static void test_devinfo_gids(void **state)
{
	struct ibv_context *ctx = fake_context();
	json_t *j = NULL, *e;

	(void)state;
	fake_attr.orig_attr.phys_port_cnt = 2;
	fake_attr.phys_port_cnt_ex = 2;
	fake_port.gid_tbl_len = 4;
	memset(fake_gids, 0, sizeof(fake_gids));
	for (size_t i = 0; i < ARRAY_SIZE(fake_gids); i++) {
		struct ibv_gid_entry *g = &fake_gids[i];

		g->gid.global.subnet_prefix = htobe64(UINT64_C(0xfe80) << 48);
		g->gid.global.interface_id =
			htobe64(UINT64_C(0x025056fffe9abc00) + i);
		g->gid_index = (uint32_t)i % 2;
		g->port_num = i < 2 ? 1 : 2;
		g->gid_type = i % 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
	}

	assert_int_equal(devinfo_gids(ctx, 2, &j), 0);
	/* Room for both ports' tables. */
	assert_int_equal(fake_gid_max_entries, 8);
	assert_int_equal(json_array_size(j), 2);
	e = json_array_get(j, 0);
	assert_int_key(e, "index", 0);
	assert_str_key(e, "gid", "fe80:0000:0000:0000:0250:56ff:fe9a:bc02");
	assert_str_key(e, "type", "roce_v1");
	assert_true(json_is_null(json_object_get(e, "netdev")));
	e = json_array_get(j, 1);
	assert_int_key(e, "index", 1);
	assert_str_key(e, "gid", "fe80:0000:0000:0000:0250:56ff:fe9a:bc03");
	assert_str_key(e, "type", "roce_v2");
	json_decref(j);

	j = NULL;
	assert_int_equal(devinfo_gids(ctx, 3, &j), -ENOENT);
	assert_int_equal(devinfo_gids(ctx, 0, &j), -ENOENT);
	assert_null(j);
}

static void test_devinfo_summary(void **state)
{
	struct ibv_context *ctx = fake_context();
	json_t *j = NULL;

	(void)state;
	assert_int_equal(devinfo_summary(ctx->device, &j), 0);
	assert_str_key(j, "name", "fake0");
	assert_int_key(j, "index", 7);
	assert_int_key(j, "node_type", 1);
	assert_str_key(j, "node_type_name", "ca");
	assert_int_key(j, "transport_type", 0);
	assert_str_key(j, "transport_type_name", "ib");
	assert_str_key(j, "node_guid", "0250:56ff:fe9a:bcde");
	json_decref(j);
}

/* All-zero attributes print exactly as pyverbs prints DeviceAttr() and
 * PortAttr(), its objects before any query. */
static void test_zero_text(void **state)
{
	struct ibv_context *ctx = fake_context();
	json_t *j = NULL;

	(void)state;
	memset(&fake_attr, 0, sizeof(fake_attr));
	memset(&fake_port, 0, sizeof(fake_port));
	assert_int_equal(devinfo_device(ctx, &j), 0);
	assert_prints(devprint_device, j, device_zero_text);
	json_decref(j);

	/* A port to query, still zero in the device's own attributes. */
	fake_attr.phys_port_cnt_ex = 1;
	j = NULL;
	assert_int_equal(devinfo_port(ctx, 1, &j), 0);
	assert_prints(devprint_port, j, port_zero_text);
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device_text),
		cmocka_unit_test(test_port_text),
		cmocka_unit_test(test_odp_text),
		cmocka_unit_test(test_zero_text),
		cmocka_unit_test(test_odd_values),
		cmocka_unit_test(test_missing),
		cmocka_unit_test(test_devinfo_device),
		cmocka_unit_test(test_devinfo_port),
		cmocka_unit_test(test_devinfo_gids),
		cmocka_unit_test(test_devinfo_summary),
	};

	return cmocka_run_group_tests_name("devprint", tests, NULL, NULL);
}
