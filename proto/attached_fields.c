// SPDX-License-Identifier: MIT
/*
 * ATTACHED's fields, as tables (attached_internal.h): the one place
 * that says what each list holds; PROTOCOL.md's tables say the same.
 */
#include <stdint.h>

#include "attached_internal.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define AT(st, k, t, m) .key = k, .type = t, .off = offsetof(st, m)
#define HAS(st, m) .has = offsetof(st, m) + 1
#define NAME(st)                                                               \
	{ AT(st, "name", AT_STR, name), .required = true, .nonempty = true }
#define REF(st, k, m, list, idx)                                               \
	{ AT(st, k, AT_STR, m), .required = true, .nonempty = true,            \
	  .ref = list, .ref_index = offsetof(st, idx) }
#define U32 .max = UINT32_MAX
#define U8 .max = UINT8_MAX
#define LIST(st, k, m, sub_, count)                                            \
	{ AT(st, k, AT_LIST, m), .sub = &(sub_),                               \
	  .count_off = offsetof(st, count) }
#define STRUCT(st, what_, fields_, ns_, id_)                                   \
	{ .what = what_, .size = sizeof(st), .fields = fields_,                \
	  .n_fields = N(fields_), .ns = ns_, .id = id_ }

#define S struct proto_att_memory
static const struct att_field memory_fields[] = {
    NAME(S),
    {AT(S, "size", AT_U64, size), .required = true, .min = 1},
    {AT(S, "backing", AT_STR, backing)},
    {AT(S, "fd", AT_FD, fd), HAS(S, has_fd)},
};
static const struct att_struct memory_struct =
	STRUCT(S, "memory", memory_fields, 1, AL_MEMORY);
#undef S

#define S struct proto_att_xrcd
static const struct att_field xrcd_fields[] = {
	NAME(S),
	{ AT(S, "file", AT_STR, file) },
	{ AT(S, "fd", AT_FD, fd), .required = true },
};
static const struct att_struct xrcd_struct =
	STRUCT(S, "xrcd", xrcd_fields, 2, AL_XRCD);
#undef S

#define S struct proto_att_pd
static const struct att_field pd_fields[] = {
	NAME(S),
	{ AT(S, "handle", AT_U64, handle), .required = true, U32 },
};
static const struct att_struct pd_struct =
	STRUCT(S, "pd", pd_fields, 3, AL_PD);
#undef S

#define S struct proto_att_qp
static const struct att_field qp_fields[] = {
	NAME(S),
	{ AT(S, "type", AT_STR, type) },
	{ AT(S, "qp_num", AT_U64, qp_num), HAS(S, has_qp_num),
	  .max = 0xffffff },
	/* Not a reference to "xrcd": a domain without a file is not
	 * listed there, and its target QPs still are here. */
	{ AT(S, "xrcd", AT_STR, xrcd), .nonempty = true },
};
static const struct att_struct qp_struct =
	STRUCT(S, "qp", qp_fields, 4, AL_QP);
#undef S

#define S struct proto_att_srq
static const struct att_field srq_fields[] = {
	NAME(S),
	{ AT(S, "type", AT_STR, type) },
	{ AT(S, "srq_num", AT_U64, srq_num), HAS(S, has_srq_num), U32 },
};
static const struct att_struct srq_struct =
	STRUCT(S, "srq", srq_fields, 5, AL_SRQ);
#undef S

#define S struct proto_att_dm
static const struct att_field dm_fields[] = {
	NAME(S),
	{ AT(S, "handle", AT_U64, handle), .required = true, U32 },
	{ AT(S, "size", AT_U64, size), .required = true, .min = 1 },
};
static const struct att_struct dm_struct =
	STRUCT(S, "dm", dm_fields, 6, AL_DM);
#undef S

/* What an MR over memory and one over device memory both carry. */
#define MR_KEYS(S)                                                             \
	{ AT(S, "handle", AT_U64, handle), .required = true, U32 },            \
	{ AT(S, "lkey", AT_U64, lkey), .required = true, U32 },                \
	{ AT(S, "rkey", AT_U64, rkey), .required = true, U32 },                \
	{ AT(S, "length", AT_U64, length), .required = true, .min = 1 },       \
	{ AT(S, "offset", AT_U64, offset), .required = true },                 \
	{ AT(S, "iova", AT_U64, iova), .required = true },                     \
	{ AT(S, "zero_based", AT_BOOL, zero_based) },                          \
	{ AT(S, "odp", AT_BOOL, odp) },                                        \
	{ AT(S, "access", AT_ACCESS, access), .required = true }

#define S struct proto_att_mr
static const struct att_field mr_fields[] = {
	NAME(S),
	REF(S, "pd", pd, AL_PD, pd_index),
	REF(S, "memory", memory, AL_MEMORY, memory_index),
	MR_KEYS(S),
};
static const struct att_struct mr_struct =
	STRUCT(S, "mr", mr_fields, 7, AL_MR);

static const struct att_field dm_mr_fields[] = {
	NAME(S),
	REF(S, "pd", pd, AL_PD, pd_index),
	REF(S, "dm", dm, AL_DM, dm_index),
	MR_KEYS(S),
};
static const struct att_struct dm_mr_struct =
	STRUCT(S, "dm_mr", dm_mr_fields, 7, AL_DM_MR);
#undef S

#define S struct proto_att_imr
static const struct att_field imr_fields[] = {
	NAME(S),
	REF(S, "pd", pd, AL_PD, pd_index),
	{ AT(S, "access", AT_ACCESS, access), .required = true },
};
static const struct att_struct imr_struct =
	STRUCT(S, "implicit_mr", imr_fields, 7, AL_IMR);
#undef S

#define S struct proto_att_ah
static const struct att_field ah_fields[] = {
	{ AT(S, "handle", AT_U64, handle), HAS(S, has_handle), U32 },
	{ AT(S, "port_num", AT_U64, port_num), .required = true, .min = 1,
	  U8 },
	{ AT(S, "dlid", AT_U64, dlid), .required = true, .max = 0xffff },
	{ AT(S, "sl", AT_U64, sl), .required = true, U8 },
	{ AT(S, "src_path_bits", AT_U64, src_path_bits), .required = true,
	  U8 },
	{ AT(S, "static_rate", AT_U64, static_rate), .required = true, U8 },
	{ AT(S, "is_global", AT_BOOL, is_global), .required = true },
	{ AT(S, "dgid", AT_GID, dgid), HAS(S, has_dgid) },
	{ AT(S, "sgid_index", AT_U64, sgid_index), .required = true, U8 },
	{ AT(S, "hop_limit", AT_U64, hop_limit), .required = true, U8 },
	{ AT(S, "traffic_class", AT_U64, traffic_class), .required = true,
	  U8 },
	{ AT(S, "flow_label", AT_U64, flow_label), .required = true,
	  .max = 0xfffff },
};
static const struct att_struct ah_struct =
	STRUCT(S, "mcast ah", ah_fields, 0, AL_NONE);
#undef S

#define S struct proto_att_mcast_qp
static const struct att_field mcast_qp_fields[] = {
	NAME(S),
	{ AT(S, "qp_num", AT_U64, qp_num), .required = true, .max = 0xffffff },
	{ AT(S, "attached", AT_BOOL, attached) },
};
static const struct att_struct mcast_qp_struct =
	STRUCT(S, "mcast qp", mcast_qp_fields, 0, AL_NONE);
#undef S

/* mgid, mlid, qkey, remote_qpn and ah are required of a joined group
 * only: attached.c checks that. */
#define S struct proto_att_mcast
static const struct att_field mcast_fields[] = {
	NAME(S),
	{ AT(S, "group", AT_STR, group) },
	{ AT(S, "join", AT_STR, join) },
	{ AT(S, "join_state", AT_STR, join_state) },
	{ AT(S, "join_error", AT_STR, join_error) },
	{ AT(S, "rejoins", AT_U64, rejoins), HAS(S, has_rejoins) },
	LIST(S, "qps", qps, mcast_qp_struct, n_qps),
	{ AT(S, "mgid", AT_GID, mgid), HAS(S, has_mgid) },
	{ AT(S, "mlid", AT_U64, mlid), HAS(S, has_mlid), .max = 0xffff },
	{ AT(S, "qkey", AT_U64, qkey), HAS(S, has_qkey), U32 },
	{ AT(S, "remote_qpn", AT_U64, remote_qpn), HAS(S, has_remote_qpn),
	  .max = 0xffffff },
	{ AT(S, "ah", AT_OBJ, ah), HAS(S, has_ah), .sub = &ah_struct },
};
static const struct att_struct mcast_struct =
	STRUCT(S, "mcast", mcast_fields, 8, AL_MCAST);
#undef S

#define S struct proto_att_mr_table
static const struct att_field mr_table_fields[] = {
    {AT(S, "fd", AT_FD, fd), .required = true},
    {AT(S, "count", AT_U64, count), .required = true, .max = UINT32_MAX},
    {AT(S, "size", AT_U64, size), .required = true, .min = 64,
     .max = UINT32_MAX},
    {AT(S, "memories", AT_U64, memories), HAS(S, has_memories),
     .max = UINT32_MAX},
    {AT(S, "memory_fd", AT_U64, memory_fd), HAS(S, has_memory_fd),
     .max = UINT32_MAX},
};
static const struct att_struct mr_table_struct =
	STRUCT(S, "mr_table", mr_table_fields, 0, AL_NONE);
#undef S

#define S struct proto_attached
static const struct att_field top_fields[] = {
	{ AT(S, "attachment", AT_U64, attachment), HAS(S, has_attachment),
	  .required = true, U32 },
	{ AT(S, "profile", AT_STR, profile) },
	{ AT(S, "mode", AT_MODE, mode), .required = true },
	{ AT(S, "ibdev", AT_STR, ibdev), .required = true, .nonempty = true },
	{ AT(S, "port", AT_U64, port), .required = true, .min = 1, U8 },
	{ AT(S, "gid_index", AT_U64, gid_index), .required = true,
	  .max = INT32_MAX },
	{ AT(S, "import_capable", AT_BOOL, import_capable),
	  HAS(S, has_import_capable) },
	{ AT(S, "import_error", AT_STR, import_error) },
	/* Required in shared mode: attached.c checks that. */
	{ AT(S, "cmd_fd", AT_FD, cmd_fd), HAS(S, has_cmd_fd) },
	LIST(S, "memory", memory, memory_struct, n_memory),
	LIST(S, "xrcd", xrcd, xrcd_struct, n_xrcd),
	LIST(S, "pd", pd, pd_struct, n_pd),
	LIST(S, "qp", qp, qp_struct, n_qp),
	LIST(S, "srq", srq, srq_struct, n_srq),
	LIST(S, "dm", dm, dm_struct, n_dm),
	LIST(S, "dm_mr", dm_mr, dm_mr_struct, n_dm_mr),
	LIST(S, "implicit_mr", implicit_mr, imr_struct, n_implicit_mr),
	LIST(S, "mcast", mcast, mcast_struct, n_mcast),
	LIST(S, "mr", mr, mr_struct, n_mr),
	{ AT(S, "mr_table", AT_OBJ, mr_table), HAS(S, has_mr_table),
	  .sub = &mr_table_struct },
};
const struct att_struct att_top =
	STRUCT(S, "ATTACHED", top_fields, 0, AL_NONE);
#undef S

const struct att_field *att_list_field(enum att_list_id id)
{
	for (size_t i = 0; i < N(top_fields); i++)
		if (top_fields[i].type == AT_LIST &&
		    top_fields[i].sub->id == id)
			return &top_fields[i];
	return NULL;
}
